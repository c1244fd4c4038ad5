//! Unit tests of the controller's caches and the access-mode search (upstream `index_test.go`).

use kcm_testing::{MetaBuilder, pv, pvc};

use super::*;

fn volume(name: &str, size: &str, modes: &[&str]) -> PersistentVolume {
    pv(name)
        .capacity(size)
        .phase("Available")
        .with(|v| {
            v.spec.get_or_insert_default().access_modes =
                Some(modes.iter().map(|m| (*m).to_owned()).collect())
        })
        .build()
}

fn index(volumes: Vec<PersistentVolume>) -> VolumeIndex {
    let index = VolumeIndex::default();
    for v in volumes {
        index.store_update(
            v.metadata.name.clone().unwrap_or_default(),
            Arc::new(v),
            |v| &v.metadata,
        );
    }
    index
}

fn claim(size: &str, modes: &[&str]) -> PersistentVolumeClaim {
    let mut c = pvc("c").namespace("ns").uid("uid").storage(size).build();
    c.spec.get_or_insert_default().access_modes =
        Some(modes.iter().map(|m| (*m).to_owned()).collect());
    c
}

fn found(index: &VolumeIndex, claim: &PersistentVolumeClaim) -> Option<String> {
    index
        .find_by_claim(claim, None, false)
        .unwrap_or_else(|e| panic!("{e}"))
        .and_then(|v| v.metadata.name.clone())
}

/// The closest set of access modes is searched first, even when a volume with more modes is
/// smaller (upstream's `TestFindingVolumeWithDifferentAccessModes`).
#[test]
fn closest_access_modes_win_over_size() {
    let index = index(vec![
        volume("gce", "10Gi", &["ReadWriteOnce", "ReadOnlyMany"]),
        volume("ebs", "20Gi", &["ReadWriteOnce"]),
        volume(
            "nfs",
            "1Gi",
            &["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"],
        ),
    ]);
    assert_eq!(
        found(&index, &claim("1Gi", &["ReadWriteOnce"])).as_deref(),
        Some("ebs")
    );
    assert_eq!(
        found(&index, &claim("1Gi", &["ReadOnlyMany"])).as_deref(),
        Some("gce")
    );
    assert_eq!(
        found(&index, &claim("1Gi", &["ReadWriteMany", "ReadOnlyMany"])).as_deref(),
        Some("nfs")
    );
    assert_eq!(found(&index, &claim("30Gi", &["ReadWriteOnce"])), None);
    assert_eq!(
        found(&index, &claim("15Gi", &["ReadWriteOnce"])),
        Some("ebs".into())
    );
    assert_eq!(found(&index, &claim("1Gi", &["ReadWriteOncePod"])), None);
}

#[test]
fn older_copies_do_not_replace_newer_ones() {
    let cache = VolumeIndex::default();
    let at = |rv: &str| {
        let mut v = volume("v", "1Gi", &["ReadWriteOnce"]);
        v.metadata.resource_version = Some(rv.into());
        Arc::new(v)
    };
    assert!(cache.store_update("v".into(), at("5"), |v| &v.metadata));
    assert!(!cache.store_update("v".into(), at("4"), |v| &v.metadata));
    assert!(
        cache.store_update("v".into(), at("5"), |v| &v.metadata),
        "the same version passes"
    );
    assert!(cache.store_update("v".into(), at("6"), |v| &v.metadata));
    assert_eq!(
        cache
            .get("v")
            .and_then(|v| v.metadata.resource_version.clone())
            .as_deref(),
        Some("6")
    );
    cache.delete("v");
    assert!(cache.get("v").is_none());
}
