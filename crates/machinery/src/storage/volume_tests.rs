//! Unit tests of the matching rules (upstream `util_test.go` / `index_test.go` facts).

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, VolumeNodeAffinity,
};
use kcm_testing::{MetaBuilder, node, pv, pvc};

use super::*;

fn volume(name: &str, size: &str) -> Arc<PersistentVolume> {
    pv(name)
        .capacity(size)
        .phase("Available")
        .with(|v| v.spec.get_or_insert_default().access_modes = Some(vec!["ReadWriteOnce".into()]))
        .arc()
}

fn claim(size: &str) -> PersistentVolumeClaim {
    pvc("c").namespace("ns").uid("uid-c").storage(size).build()
}

#[test]
fn access_modes_key_is_in_upstream_order() {
    let modes = |m: &[&str]| m.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        access_modes_key(&modes(&["ReadWriteMany", "ReadWriteOnce", "ReadOnlyMany"])),
        "RWO,ROX,RWX"
    );
    assert_eq!(access_modes_key(&modes(&["ReadWriteOncePod"])), "RWOP");
    assert_eq!(access_modes_key(&[]), "");
}

#[test]
fn volume_mode_defaults_to_filesystem_on_both_sides() {
    let mut claim = PersistentVolumeClaimSpec::default();
    let mut volume = PersistentVolumeSpec::default();
    assert!(!volume_mode_mismatches(&claim, &volume));
    volume.volume_mode = Some("Filesystem".into());
    assert!(!volume_mode_mismatches(&claim, &volume));
    claim.volume_mode = Some("Block".into());
    assert!(volume_mode_mismatches(&claim, &volume));
}

#[test]
fn smallest_large_enough_volume_matches() {
    let volumes = [
        volume("1g", "1Gi"),
        volume("5g", "5Gi"),
        volume("3g", "3Gi"),
    ];
    let found = find_matching_volume(&claim("2Gi"), &volumes, None, false)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        found.and_then(|v| v.metadata.name.clone()).as_deref(),
        Some("3g")
    );
    let none = find_matching_volume(&claim("6Gi"), &volumes, None, false)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(none.is_none());
}

#[test]
fn delayed_binding_matches_only_prebound_volumes_without_a_node() {
    let prebound = pv("pre").capacity("1Gi").claim_ref("ns", "c", "").arc();
    let volumes = [volume("free", "1Gi")];
    assert!(
        find_matching_volume(&claim("1Gi"), &volumes, None, true)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none()
    );
    let with_prebound = [volume("free", "1Gi"), prebound];
    let found = find_matching_volume(&claim("1Gi"), &with_prebound, None, true)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        found.and_then(|v| v.metadata.name.clone()).as_deref(),
        Some("pre")
    );
}

#[test]
fn with_a_node_the_volumes_affinity_must_admit_it() {
    let pinned = pv("pinned")
        .capacity("1Gi")
        .phase("Available")
        .with(|v| {
            let spec = v.spec.get_or_insert_default();
            spec.access_modes = Some(vec!["ReadWriteOnce".into()]);
            spec.node_affinity = Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "kubernetes.io/hostname".into(),
                            operator: "In".into(),
                            values: Some(vec!["node-1".into()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            });
        })
        .arc();
    let node1 = node("node-1")
        .label("kubernetes.io/hostname", "node-1")
        .build();
    let node2 = node("node-2")
        .label("kubernetes.io/hostname", "node-2")
        .build();
    let volumes = [Arc::clone(&pinned)];
    assert!(
        find_matching_volume(&claim("1Gi"), &volumes, Some(&node1), true)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_some()
    );
    assert!(
        find_matching_volume(&claim("1Gi"), &volumes, Some(&node2), true)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none()
    );
}

#[test]
fn requested_volume_checks_say_what_does_not_fit() {
    let v = volume("v", "1Gi");
    assert_eq!(check_volume_satisfies_claim(&v, &claim("1Gi")), Ok(()));
    assert_eq!(
        check_volume_satisfies_claim(&v, &claim("2Gi")),
        Err("requested PV is too small".to_owned())
    );
    let mut gold = claim("1Gi");
    gold.spec.get_or_insert_default().storage_class_name = Some("gold".into());
    assert_eq!(
        check_volume_satisfies_claim(&v, &gold),
        Err("storageClassName does not match".to_owned())
    );
    let mut rwx = claim("1Gi");
    rwx.spec.get_or_insert_default().access_modes = Some(vec!["ReadWriteMany".into()]);
    assert_eq!(
        check_volume_satisfies_claim(&v, &rwx),
        Err("incompatible accessMode".to_owned())
    );
}

#[test]
fn the_newest_default_class_wins() {
    let class = |name: &str, default: bool, created: i64| {
        let mut c = StorageClass::default();
        c.metadata.name = Some(name.into());
        if default {
            c.metadata.annotations = Some(
                [(
                    IS_DEFAULT_STORAGE_CLASS_ANNOTATION.to_owned(),
                    "true".to_owned(),
                )]
                .into(),
            );
        }
        c.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(created).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        ));
        Arc::new(c)
    };
    let classes = [
        class("old", true, 10),
        class("new-b", true, 20),
        class("new-a", true, 20),
        class("newest-not-default", false, 30),
    ];
    assert_eq!(
        default_class(&classes)
            .and_then(|c| c.metadata.name.clone())
            .as_deref(),
        Some("new-a")
    );
    assert!(default_class(&classes[3..]).is_none());
}
