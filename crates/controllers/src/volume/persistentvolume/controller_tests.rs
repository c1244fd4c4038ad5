//! Unit tests of the PV controller: caches seeded directly, `sync_claim` / `sync_volume` called, the fake client's actions and the recorded events checked; the facts of upstream's `binder_test.go`, `provision_test.go`, `delete_test.go` and `recycle_test.go`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NFSVolumeSource, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kcm_machinery::events::{EventType, FakeRecorder};
use kcm_testing::{MetaBuilder, pod, pv, pvc};

use super::controller::PvListers;
use super::util::*;
use super::*;
use crate::volume::client::{Action, FakeStorageClient};

struct Fixture {
    ctrl: PersistentVolumeController,
    client: Arc<FakeStorageClient>,
    recorder: Arc<FakeRecorder>,
    listers: PvListers,
}

fn fixture(
    volumes: Vec<PersistentVolume>,
    claims: Vec<PersistentVolumeClaim>,
    classes: Vec<StorageClass>,
) -> Fixture {
    fixture_with(
        volumes,
        claims,
        classes,
        PersistentVolumeControllerOptions::default(),
    )
}

fn fixture_with(
    volumes: Vec<PersistentVolume>,
    claims: Vec<PersistentVolumeClaim>,
    classes: Vec<StorageClass>,
    options: PersistentVolumeControllerOptions,
) -> Fixture {
    let listers = PvListers::default();
    let client = Arc::new(FakeStorageClient::new());
    for v in volumes {
        client.insert_volume(v.clone());
        let _ = listers.volumes.add(Arc::new(v));
    }
    for c in claims {
        client.insert_claim(c.clone());
        let _ = listers.claims.add(Arc::new(c));
    }
    for c in classes {
        let _ = listers.classes.add(Arc::new(c));
    }
    let recorder = Arc::new(FakeRecorder::new());
    let ctrl = PersistentVolumeController::with_listers(
        listers.clone(),
        client.clone(),
        recorder.clone(),
        options,
    );
    ctrl.initialize_caches();
    Fixture {
        ctrl,
        client,
        recorder,
        listers,
    }
}

impl Fixture {
    async fn sync_claim(&self, key: &str) {
        let claim = self
            .ctrl
            .claims
            .get(key)
            .unwrap_or_else(|| panic!("claim {key} not cached"));
        self.ctrl
            .sync_claim(&claim)
            .await
            .unwrap_or_else(|e| panic!("sync claim {key}: {e}"));
    }

    async fn sync_volume(&self, name: &str) {
        let volume = self
            .ctrl
            .volumes
            .get(name)
            .unwrap_or_else(|| panic!("volume {name} not cached"));
        self.ctrl
            .sync_volume(&volume)
            .await
            .unwrap_or_else(|e| panic!("sync volume {name}: {e}"));
    }

    fn volume(&self, name: &str) -> PersistentVolume {
        self.client
            .volumes()
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("volume {name} gone"))
    }

    fn claim(&self, key: &str) -> PersistentVolumeClaim {
        self.client
            .claims()
            .get(key)
            .cloned()
            .unwrap_or_else(|| panic!("claim {key} gone"))
    }

    /// `(type, reason, message)` of every event.
    fn events(&self) -> Vec<(EventType, String, String)> {
        self.recorder
            .events()
            .into_iter()
            .map(|e| (e.type_, e.reason, e.message))
            .collect()
    }

    fn writes(&self) -> Vec<Action> {
        self.client
            .actions()
            .into_iter()
            .filter(|a| !matches!(a, Action::GetVolume(_) | Action::GetClaim(_)))
            .collect()
    }
}

/// An `Available` RWO hostPath volume of `size`, reclaim `Retain`, no class.
fn volume(name: &str, size: &str) -> PersistentVolume {
    pv(name)
        .capacity(size)
        .phase("Available")
        .resource_version("1")
        .with(|v| {
            let spec = v.spec.get_or_insert_default();
            spec.access_modes = Some(vec!["ReadWriteOnce".into()]);
            spec.persistent_volume_reclaim_policy = Some("Retain".into());
            spec.host_path = Some(HostPathVolumeSource {
                path: format!("/mnt/{name}"),
                type_: None,
            });
        })
        .build()
}

fn with_spec(
    mut v: PersistentVolume,
    f: impl FnOnce(&mut k8s_openapi::api::core::v1::PersistentVolumeSpec),
) -> PersistentVolume {
    f(v.spec.get_or_insert_default());
    v
}

fn bound_volume(name: &str, size: &str, claim: &str, uid: &str) -> PersistentVolume {
    let mut v = volume(name, size);
    v.spec.get_or_insert_default().claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
        namespace: Some("default".into()),
        name: Some(claim.into()),
        uid: Some(uid.into()),
        ..Default::default()
    });
    v.status.get_or_insert_default().phase = Some("Bound".into());
    v
}

/// A `Pending` RWO claim of `size` in `default`, uid `uid-<name>`, no class.
fn claim(name: &str, size: &str) -> PersistentVolumeClaim {
    pvc(name)
        .namespace("default")
        .uid(format!("uid-{name}"))
        .resource_version("1")
        .storage(size)
        .phase("Pending")
        .build()
}

fn with_class(mut c: PersistentVolumeClaim, class: &str) -> PersistentVolumeClaim {
    c.spec.get_or_insert_default().storage_class_name = Some(class.into());
    c
}

fn annotated(mut c: PersistentVolumeClaim, pairs: &[(&str, &str)]) -> PersistentVolumeClaim {
    let a = c.metadata.annotations.get_or_insert_default();
    for (k, v) in pairs {
        a.insert((*k).into(), (*v).into());
    }
    c
}

fn bound_claim(name: &str, size: &str, volume: &str) -> PersistentVolumeClaim {
    let mut c = annotated(claim(name, size), &[(ANN_BIND_COMPLETED, "yes")]);
    c.spec.get_or_insert_default().volume_name = Some(volume.into());
    c.status.get_or_insert_default().phase = Some("Bound".into());
    c
}

fn class(name: &str, provisioner: &str, mode: &str) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        provisioner: provisioner.into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some(mode.into()),
        ..StorageClass::default()
    }
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn claim_ref_uid(v: &PersistentVolume) -> Option<String> {
    claim_ref(v).and_then(|r| r.uid.clone())
}

// [Unit test set 1]: claims without spec.volumeName.

#[tokio::test]
async fn unbound_claim_binds_to_the_smallest_matching_volume() {
    let f = fixture(
        vec![
            volume("small", "1Gi"),
            volume("big", "10Gi"),
            volume("fits", "5Gi"),
        ],
        vec![claim("c", "3Gi")],
        vec![],
    );
    f.sync_claim("default/c").await;
    let v = f.volume("fits");
    assert_eq!(claim_ref_uid(&v).as_deref(), Some("uid-c"));
    assert_eq!(
        annotation(&v.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    assert_eq!(volume_phase(&v), "Bound");
    let c = f.claim("default/c");
    assert_eq!(
        c.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("fits")
    );
    assert_eq!(annotation(&c.metadata, ANN_BIND_COMPLETED), Some("yes"));
    assert_eq!(
        annotation(&c.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    let status = c.status.clone().unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Bound"));
    assert_eq!(
        status
            .capacity
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("5Gi".into())
    );
    assert_eq!(status.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
    assert!(f.volume("small").spec.and_then(|s| s.claim_ref).is_none());
    assert!(f.events().is_empty());
    // Volume, volume status, claim, claim status: one write each.
    assert_eq!(f.writes().len(), 4);
}

#[tokio::test]
async fn claim_without_match_or_class_stays_pending_with_failed_binding() {
    let f = fixture(
        vec![volume("small", "1Gi")],
        vec![claim("c", "3Gi")],
        vec![],
    );
    f.sync_claim("default/c").await;
    assert!(f.writes().is_empty(), "already Pending: nothing to write");
    assert_eq!(
        f.events(),
        [(
            EventType::Normal,
            "FailedBinding".to_owned(),
            "no persistent volumes available for this claim and no storage class is set".to_owned()
        )]
    );
}

#[tokio::test]
async fn volumes_of_another_class_mode_selector_or_phase_do_not_match() {
    let labelled = |mut v: PersistentVolume, value: &str| {
        v.metadata.labels = Some([("tier".to_owned(), value.to_owned())].into());
        v
    };
    let mut c = with_class(claim("c", "1Gi"), "gold");
    c.spec.get_or_insert_default().selector = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some([("tier".to_owned(), "db".to_owned())].into()),
            match_expressions: None,
        },
    );
    let gold = |v: PersistentVolume| with_spec(v, |s| s.storage_class_name = Some("gold".into()));
    let f = fixture(
        vec![
            // Wrong class.
            labelled(volume("silver", "1Gi"), "db"),
            // Wrong label.
            gold(labelled(volume("web", "1Gi"), "web")),
            // Block, the claim wants a filesystem.
            with_spec(gold(labelled(volume("block", "1Gi"), "db")), |s| {
                s.volume_mode = Some("Block".into())
            }),
            // Not Available.
            {
                let mut v = gold(labelled(volume("released", "1Gi"), "db"));
                v.status.get_or_insert_default().phase = Some("Released".into());
                v
            },
            // Being deleted.
            {
                let mut v = gold(labelled(volume("deleting", "1Gi"), "db"));
                v.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
                v
            },
            // Lacks ReadWriteOnce.
            with_spec(gold(labelled(volume("rox", "1Gi"), "db")), |s| {
                s.access_modes = Some(vec!["ReadOnlyMany".into()])
            }),
            // The one that fits, though bigger.
            gold(labelled(volume("match", "2Gi"), "db")),
        ],
        vec![c],
        vec![],
    );
    f.sync_claim("default/c").await;
    assert_eq!(claim_ref_uid(&f.volume("match")).as_deref(), Some("uid-c"));
}

#[tokio::test]
async fn volume_prebound_by_claim_ref_wins_and_is_not_marked_bound_by_controller() {
    let mut prebound = with_spec(volume("prebound", "10Gi"), |s| {
        s.claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
            namespace: Some("default".into()),
            name: Some("c".into()),
            ..Default::default()
        })
    });
    prebound.status.get_or_insert_default().phase = Some("Pending".into());
    let f = fixture(
        vec![volume("small", "1Gi"), prebound],
        vec![claim("c", "1Gi")],
        vec![],
    );
    f.sync_claim("default/c").await;
    let v = f.volume("prebound");
    assert_eq!(
        claim_ref_uid(&v).as_deref(),
        Some("uid-c"),
        "the UID is filled in"
    );
    assert_eq!(annotation(&v.metadata, ANN_BOUND_BY_CONTROLLER), None);
    let c = f.claim("default/c");
    assert_eq!(
        annotation(&c.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    assert_eq!(claim_phase(&c), "Bound");
}

// [Unit test set 2]: claims naming a volume.

#[tokio::test]
async fn claim_naming_an_unbound_volume_binds_it() {
    let mut c = claim("c", "1Gi");
    c.spec.get_or_insert_default().volume_name = Some("v".into());
    let f = fixture(vec![volume("v", "1Gi")], vec![c], vec![]);
    f.sync_claim("default/c").await;
    let v = f.volume("v");
    assert_eq!(claim_ref_uid(&v).as_deref(), Some("uid-c"));
    assert_eq!(
        annotation(&v.metadata, ANN_BOUND_BY_CONTROLLER),
        Some("yes")
    );
    let c = f.claim("default/c");
    assert_eq!(
        annotation(&c.metadata, ANN_BOUND_BY_CONTROLLER),
        None,
        "the user bound it"
    );
    assert_eq!(annotation(&c.metadata, ANN_BIND_COMPLETED), Some("yes"));
    assert_eq!(claim_phase(&c), "Bound");
}

#[tokio::test]
async fn claim_naming_a_missing_volume_stays_pending() {
    let mut c = claim("c", "1Gi");
    c.spec.get_or_insert_default().volume_name = Some("gone".into());
    c.status = None;
    let f = fixture(vec![], vec![c], vec![]);
    f.sync_claim("default/c").await;
    assert_eq!(claim_phase(&f.claim("default/c")), "Pending");
    assert!(f.events().is_empty());
}

#[tokio::test]
async fn claim_naming_a_too_small_volume_gets_volume_mismatch() {
    let mut c = claim("c", "5Gi");
    c.spec.get_or_insert_default().volume_name = Some("v".into());
    let f = fixture(vec![volume("v", "1Gi")], vec![c], vec![]);
    f.sync_claim("default/c").await;
    assert!(claim_ref(&f.volume("v")).is_none());
    assert_eq!(
        f.events(),
        [(
            EventType::Warning,
            "VolumeMismatch".to_owned(),
            "Cannot bind to requested volume \"v\": requested PV is too small".to_owned()
        )]
    );
}

#[tokio::test]
async fn claim_naming_a_volume_the_user_bound_elsewhere_waits() {
    let mut c = claim("c", "1Gi");
    c.spec.get_or_insert_default().volume_name = Some("v".into());
    let f = fixture(
        vec![bound_volume("v", "1Gi", "other", "uid-other")],
        vec![c],
        vec![],
    );
    f.sync_claim("default/c").await;
    assert!(f.writes().is_empty());
    assert_eq!(claim_ref_uid(&f.volume("v")).as_deref(), Some("uid-other"));
}

// [Unit test set 3]: bound claims.

#[tokio::test]
async fn bound_claim_whose_volume_is_gone_is_lost_once() {
    let f = fixture(vec![], vec![bound_claim("c", "1Gi", "gone")], vec![]);
    f.sync_claim("default/c").await;
    assert_eq!(claim_phase(&f.claim("default/c")), "Lost");
    let lost = f.ctrl.claims.get("default/c").unwrap_or_default();
    f.ctrl
        .sync_claim(&lost)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        f.events(),
        [(
            EventType::Warning,
            "ClaimLost".to_owned(),
            "Bound claim has lost its PersistentVolume. Data on the volume is lost!".to_owned()
        )],
        "a claim already Lost gets no second event"
    );
}

#[tokio::test]
async fn bound_claim_without_volume_name_is_lost() {
    let mut c = bound_claim("c", "1Gi", "v");
    c.spec.get_or_insert_default().volume_name = None;
    let f = fixture(vec![], vec![c], vec![]);
    f.sync_claim("default/c").await;
    assert_eq!(claim_phase(&f.claim("default/c")), "Lost");
    assert_eq!(
        f.events()[0].2,
        "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
    );
}

#[tokio::test]
async fn bound_claim_whose_volume_is_bound_to_another_claim_is_misbound() {
    let f = fixture(
        vec![bound_volume("v", "1Gi", "other", "uid-other")],
        vec![bound_claim("c", "1Gi", "v")],
        vec![],
    );
    f.sync_claim("default/c").await;
    assert_eq!(claim_phase(&f.claim("default/c")), "Lost");
    assert_eq!(f.events()[0].1, "ClaimMisbound");
}

#[tokio::test]
async fn bound_claim_whose_volume_lost_its_claim_ref_is_bound_again() {
    let f = fixture(
        vec![volume("v", "1Gi")],
        vec![bound_claim("c", "1Gi", "v")],
        vec![],
    );
    f.sync_claim("default/c").await;
    let v = f.volume("v");
    assert_eq!(claim_ref_uid(&v).as_deref(), Some("uid-c"));
    assert_eq!(volume_phase(&v), "Bound");
}

// [Unit test set 4]: volumes.

#[tokio::test]
async fn volume_without_claim_becomes_available() {
    let mut v = volume("v", "1Gi");
    v.status.get_or_insert_default().phase = Some("Pending".into());
    let f = fixture(vec![v], vec![], vec![]);
    f.sync_volume("v").await;
    assert_eq!(volume_phase(&f.volume("v")), "Available");
}

#[tokio::test]
async fn volume_bound_to_its_claim_becomes_bound() {
    let mut v = bound_volume("v", "1Gi", "c", "uid-c");
    v.status.get_or_insert_default().phase = Some("Available".into());
    let f = fixture(vec![v], vec![bound_claim("c", "1Gi", "v")], vec![]);
    f.sync_volume("v").await;
    assert_eq!(volume_phase(&f.volume("v")), "Bound");
}

#[tokio::test]
async fn volume_whose_claim_is_gone_is_released_and_retained() {
    let f = fixture(vec![bound_volume("v", "1Gi", "c", "uid-c")], vec![], vec![]);
    f.sync_volume("v").await;
    let v = f.volume("v");
    assert_eq!(volume_phase(&v), "Released");
    assert_eq!(
        claim_ref_uid(&v).as_deref(),
        Some("uid-c"),
        "Retain keeps the claimRef"
    );
    assert!(
        f.client
            .actions()
            .contains(&Action::GetClaim("default/c".into())),
        "the claim is looked up on the server before the volume is released"
    );
    assert!(f.events().is_empty());
}

#[tokio::test]
async fn volume_whose_claim_was_recreated_is_released() {
    let f = fixture(
        vec![bound_volume("v", "1Gi", "c", "uid-old")],
        vec![claim("c", "1Gi")],
        vec![],
    );
    f.sync_volume("v").await;
    assert_eq!(volume_phase(&f.volume("v")), "Released");
}

/// A `Retain` volume released by a deleted claim keeps pointing at it: a new claim of the same
/// name and size does not get it.
#[tokio::test]
async fn released_volume_is_not_bound_to_a_new_identical_claim() {
    let mut v = bound_volume("v", "1Gi", "c", "uid-old");
    v.status.get_or_insert_default().phase = Some("Released".into());
    let f = fixture(vec![v], vec![claim("c", "1Gi")], vec![]);
    f.sync_claim("default/c").await;
    assert_eq!(claim_ref_uid(&f.volume("v")).as_deref(), Some("uid-old"));
    assert_eq!(f.events()[0].1, "FailedBinding");
}

#[tokio::test]
async fn volume_bound_by_controller_to_a_claim_bound_elsewhere_is_unbound() {
    let mut v = bound_volume("v", "1Gi", "c", "uid-c");
    v.metadata.annotations = Some([(ANN_BOUND_BY_CONTROLLER.to_owned(), "yes".to_owned())].into());
    let f = fixture(vec![v], vec![bound_claim("c", "1Gi", "other")], vec![]);
    f.sync_volume("v").await;
    let v = f.volume("v");
    assert!(claim_ref(&v).is_none());
    assert!(v.metadata.annotations.is_none());
    assert_eq!(volume_phase(&v), "Available");
}

#[tokio::test]
async fn volume_prebound_by_user_to_a_claim_bound_elsewhere_keeps_the_name() {
    let f = fixture(
        vec![bound_volume("v", "1Gi", "c", "uid-c")],
        vec![bound_claim("c", "1Gi", "other")],
        vec![],
    );
    f.sync_volume("v").await;
    let v = f.volume("v");
    let r = claim_ref(&v).cloned().unwrap_or_default();
    assert_eq!(r.name.as_deref(), Some("c"));
    assert_eq!(r.uid, None);
    assert_eq!(volume_phase(&v), "Available");
}

#[tokio::test]
async fn volume_bound_to_a_pending_claim_enqueues_the_claim() {
    let f = fixture(
        vec![bound_volume("v", "1Gi", "c", "uid-c")],
        vec![claim("c", "1Gi")],
        vec![],
    );
    f.sync_volume("v").await;
    assert_eq!(f.ctrl.claim_queue().len(), 1);
    assert!(f.writes().is_empty());
}

// Reclaim: upstream's delete_test.go and recycle_test.go.

fn released(v: PersistentVolume, policy: &str) -> PersistentVolume {
    let mut v = with_spec(v, |s| {
        s.persistent_volume_reclaim_policy = Some(policy.into())
    });
    v.status.get_or_insert_default().phase = Some("Released".into());
    v
}

#[tokio::test]
async fn volume_of_an_external_provisioner_is_left_for_it_to_delete() {
    let mut v = released(bound_volume("v", "1Gi", "c", "uid-c"), "Delete");
    v.metadata.annotations = Some(
        [(
            ANN_DYNAMICALLY_PROVISIONED.to_owned(),
            "ebs.csi.aws.com".to_owned(),
        )]
        .into(),
    );
    let f = fixture(vec![v], vec![], vec![]);
    f.sync_volume("v").await;
    assert!(f.writes().is_empty());
    assert!(f.events().is_empty());
}

#[tokio::test]
async fn hostpath_volume_under_tmp_is_deleted() {
    let v = with_spec(
        released(bound_volume("v", "1Gi", "c", "uid-c"), "Delete"),
        |s| {
            s.host_path = Some(HostPathVolumeSource {
                path: "/tmp/data".into(),
                type_: None,
            })
        },
    );
    let f = fixture(vec![v], vec![], vec![]);
    f.sync_volume("v").await;
    assert_eq!(f.writes(), [Action::DeleteVolume("v".into())]);
}

#[tokio::test]
async fn volume_without_a_deleter_fails_with_volume_failed_delete() {
    let v = with_spec(
        released(bound_volume("v", "1Gi", "c", "uid-c"), "Delete"),
        |s| {
            s.host_path = None;
            s.nfs = Some(NFSVolumeSource {
                path: "/export".into(),
                server: "nfs".into(),
                read_only: None,
            });
        },
    );
    let f = fixture(vec![v.clone()], vec![], vec![]);
    let err = f.ctrl.sync_volume(&v).await;
    assert!(matches!(err, Err(Error::Delete { .. })), "{err:?}");
    assert_eq!(volume_phase(&f.volume("v")), "Failed");
    assert_eq!(
        f.events(),
        [(
            EventType::Warning,
            "VolumeFailedDelete".to_owned(),
            "error getting deleter volume plugin for volume \"v\": no deletable volume plugin matched"
                .to_owned()
        )]
    );
}

#[tokio::test]
async fn hostpath_volume_outside_tmp_fails_to_delete() {
    let f = fixture(
        vec![released(bound_volume("v", "1Gi", "c", "uid-c"), "Delete")],
        vec![],
        vec![],
    );
    let v = f.ctrl.volumes.get("v").unwrap_or_default();
    assert!(f.ctrl.sync_volume(&v).await.is_err());
    assert_eq!(
        f.events()[0].2,
        "host_path deleter only supports /tmp/.+ but received provided /mnt/v"
    );
}

#[tokio::test]
async fn recycled_volume_fails_without_a_recycler() {
    let f = fixture(
        vec![released(bound_volume("v", "1Gi", "c", "uid-c"), "Recycle")],
        vec![],
        vec![],
    );
    f.sync_volume("v").await;
    assert_eq!(volume_phase(&f.volume("v")), "Failed");
    assert_eq!(
        f.events(),
        [(
            EventType::Warning,
            "VolumeFailedRecycle".to_owned(),
            "No recycler plugin found for the volume!".to_owned()
        )]
    );
}

#[tokio::test]
async fn unknown_reclaim_policy_fails_the_volume() {
    let f = fixture(
        vec![released(bound_volume("v", "1Gi", "c", "uid-c"), "Shred")],
        vec![],
        vec![],
    );
    f.sync_volume("v").await;
    assert_eq!(volume_phase(&f.volume("v")), "Failed");
    assert_eq!(f.events()[0].1, "VolumeUnknownReclaimPolicy");
}

#[tokio::test]
async fn provisioned_volume_whose_claim_bound_elsewhere_is_released() {
    let mut v = with_spec(bound_volume("v", "1Gi", "c", "uid-c"), |s| {
        s.persistent_volume_reclaim_policy = Some("Delete".into())
    });
    v.metadata.annotations = Some(
        [(
            ANN_DYNAMICALLY_PROVISIONED.to_owned(),
            "ebs.csi.aws.com".to_owned(),
        )]
        .into(),
    );
    let f = fixture(vec![v], vec![bound_claim("c", "1Gi", "other")], vec![]);
    f.sync_volume("v").await;
    assert_eq!(volume_phase(&f.volume("v")), "Released");
}

// Provisioning: upstream's provision_test.go.

const EXTERNAL: &str = "example.com/provisioner";

#[tokio::test]
async fn claim_of_an_external_class_is_annotated_for_its_provisioner() {
    let f = fixture(
        vec![],
        vec![with_class(claim("c", "1Gi"), "fast")],
        vec![class("fast", EXTERNAL, "Immediate")],
    );
    f.sync_claim("default/c").await;
    let c = f.claim("default/c");
    assert_eq!(
        annotation(&c.metadata, ANN_STORAGE_PROVISIONER),
        Some(EXTERNAL)
    );
    assert_eq!(
        annotation(&c.metadata, ANN_BETA_STORAGE_PROVISIONER),
        Some(EXTERNAL)
    );
    assert_eq!(
        f.events(),
        [(
            EventType::Normal,
            "ExternalProvisioning".to_owned(),
            format!(
                "Waiting for a volume to be created either by the external provisioner '{EXTERNAL}' \
                 or manually by the system administrator. If volume creation is delayed, please \
                 verify that the provisioner is running and correctly registered."
            )
        )]
    );
    // Annotated already: the next sync only repeats the event.
    f.sync_claim("default/c").await;
    assert_eq!(f.writes().len(), 1);
}

#[tokio::test]
async fn delayed_binding_claim_waits_for_its_first_consumer_then_is_provisioned() {
    let c = with_class(claim("c", "1Gi"), "local");
    let f = fixture(
        vec![volume("v", "1Gi")],
        vec![c.clone()],
        vec![class("local", EXTERNAL, "WaitForFirstConsumer")],
    );
    f.sync_claim("default/c").await;
    assert!(f.writes().is_empty());
    assert_eq!(
        f.events()[0],
        (
            EventType::Normal,
            "WaitForFirstConsumer".to_owned(),
            "waiting for first consumer to be created before binding".to_owned()
        )
    );
    let consumer = pod("web-0")
        .namespace("default")
        .with(|p| {
            p.spec.get_or_insert_default().volumes = Some(vec![Volume {
                name: "data".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: "c".into(),
                    read_only: None,
                }),
                ..Volume::default()
            }]);
        })
        .build();
    let _ = f.listers.pods.add(Arc::new(consumer));
    f.sync_claim("default/c").await;
    assert_eq!(
        f.events()[1],
        (
            EventType::Normal,
            "WaitForPodScheduled".to_owned(),
            "waiting for pod web-0 to be scheduled".to_owned()
        )
    );
    let selected = annotated(c, &[(ANN_SELECTED_NODE, "node-1")]);
    f.ctrl.store_claim(&selected);
    f.sync_claim("default/c").await;
    let saved = f.claim("default/c");
    assert_eq!(
        annotation(&saved.metadata, ANN_STORAGE_PROVISIONER),
        Some(EXTERNAL)
    );
    assert!(
        claim_ref(&f.volume("v")).is_none(),
        "the scheduler binds existing volumes"
    );
}

#[tokio::test]
async fn claim_without_class_gets_the_default_class() {
    let mut standard = class("standard", EXTERNAL, "Immediate");
    standard.metadata.annotations = Some(
        [(
            IS_DEFAULT_STORAGE_CLASS_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]
        .into(),
    );
    let f = fixture(vec![], vec![claim("c", "1Gi")], vec![standard]);
    f.sync_claim("default/c").await;
    let c = f.claim("default/c");
    assert_eq!(
        c.spec.and_then(|s| s.storage_class_name).as_deref(),
        Some("standard")
    );
    assert_eq!(
        f.writes().len(),
        1,
        "the update's event syncs the claim again"
    );
    assert!(f.events().is_empty());
}

#[tokio::test]
async fn claim_of_a_missing_class_gets_provisioning_failed() {
    let f = fixture(vec![], vec![with_class(claim("c", "1Gi"), "gone")], vec![]);
    f.sync_claim("default/c").await;
    assert_eq!(
        f.events(),
        [(
            EventType::Warning,
            "ProvisioningFailed".to_owned(),
            "storageclass.storage.k8s.io \"gone\" not found".to_owned()
        )]
    );
}

#[tokio::test]
async fn claim_of_an_unknown_in_tree_provisioner_gets_provisioning_failed() {
    let f = fixture(
        vec![],
        vec![with_class(claim("c", "1Gi"), "local")],
        vec![class("local", "kubernetes.io/no-provisioner", "Immediate")],
    );
    f.sync_claim("default/c").await;
    assert!(f.writes().is_empty());
    assert_eq!(
        f.events()[0].2,
        "no volume plugin matched name: kubernetes.io/no-provisioner"
    );
}

#[tokio::test]
async fn disabled_dynamic_provisioning_leaves_claims_alone() {
    let f = fixture_with(
        vec![],
        vec![with_class(claim("c", "1Gi"), "fast")],
        vec![class("fast", EXTERNAL, "Immediate")],
        PersistentVolumeControllerOptions {
            enable_dynamic_provisioning: false,
            ..PersistentVolumeControllerOptions::default()
        },
    );
    f.sync_claim("default/c").await;
    assert!(f.writes().is_empty());
    assert!(f.events().is_empty());
}

// The workers: deletions seen as objects missing from the informers.

#[tokio::test]
async fn deleted_volume_makes_its_claim_lost_at_once() {
    let f = fixture(
        vec![bound_volume("v", "1Gi", "c", "uid-c")],
        vec![bound_claim("c", "1Gi", "v")],
        vec![],
    );
    let _ = f.listers.volumes.delete(&f.volume("v"));
    f.ctrl
        .volume_work("v")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(f.ctrl.volumes.get("v").is_none());
    assert!(f.ctrl.process_next_claim().await);
    assert_eq!(claim_phase(&f.claim("default/c")), "Lost");
}

#[tokio::test]
async fn deleted_claim_releases_its_volume_at_once() {
    let f = fixture(
        vec![bound_volume("v", "1Gi", "c", "uid-c")],
        vec![bound_claim("c", "1Gi", "v")],
        vec![],
    );
    let _ = f.listers.claims.delete(&f.claim("default/c"));
    f.ctrl
        .claim_work("default/c")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Gone from the server too.
    f.client.fail(
        crate::volume::client::Verb::GetClaim,
        1,
        kcm_machinery::controller::api_status::not_found("persistentvolumeclaims", "c"),
    );
    assert!(f.ctrl.process_next_volume().await);
    assert_eq!(volume_phase(&f.volume("v")), "Released");
}

#[tokio::test]
async fn older_informer_copies_do_not_undo_the_controllers_writes() {
    let f = fixture(vec![volume("v", "1Gi")], vec![claim("c", "1Gi")], vec![]);
    let mut newer = volume("v", "1Gi");
    newer.metadata.resource_version = Some("5".into());
    f.ctrl.store_volume(&newer);
    // The informer still holds resourceVersion 1: the worker skips it.
    f.ctrl
        .volume_work("v")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(f.client.actions().is_empty());
}

// Metrics (upstream `pv_controller_test.go`'s operation timestamp cases and the collector).

fn with_metrics(
    volumes: Vec<PersistentVolume>,
    claims: Vec<PersistentVolumeClaim>,
    classes: Vec<StorageClass>,
) -> (Fixture, Arc<metrics::PvMetrics>) {
    let m = Arc::new(metrics::PvMetrics::new());
    let f = fixture_with(
        volumes,
        claims,
        classes,
        PersistentVolumeControllerOptions {
            controller_metrics: Some(Arc::clone(&m)),
            ..PersistentVolumeControllerOptions::default()
        },
    );
    (f, m)
}

fn encode(m: &metrics::PvMetrics) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    m.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    text
}

#[tokio::test(start_paused = true)]
async fn a_provisioning_is_timed_from_its_first_attempt_until_the_claim_is_bound() {
    let (f, m) = with_metrics(
        vec![],
        vec![with_class(claim("c", "1Gi"), "fast")],
        vec![class("fast", EXTERNAL, "Immediate")],
    );
    f.sync_claim("default/c").await;
    assert!(m.operation_pending("default/c"));
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    f.sync_claim("default/c").await;
    // The external provisioner's volume, pre-bound to the claim.
    let mut v = with_spec(volume("pvc-c", "1Gi"), |s| {
        s.storage_class_name = Some("fast".into());
        s.claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
            namespace: Some("default".into()),
            name: Some("c".into()),
            uid: Some("uid-c".into()),
            ..Default::default()
        });
    });
    v.metadata.annotations =
        Some([(ANN_DYNAMICALLY_PROVISIONED.to_owned(), EXTERNAL.to_owned())].into());
    f.client.insert_volume(v.clone());
    f.ctrl.store_volume(&v);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    f.sync_claim("default/c").await;
    assert!(
        !m.operation_pending("default/c"),
        "bound: the provisioning is over"
    );
    let text = encode(&m);
    for line in [
        "volume_operation_total_seconds_count{plugin_name=\"example.com/provisioner\",operation_name=\"provision\"} 1",
        "volume_operation_total_seconds_sum{plugin_name=\"example.com/provisioner\",operation_name=\"provision\"} 5.0",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    assert!(
        !text.contains("volume_operation_total_errors_total{"),
        "{text}"
    );
}

#[tokio::test]
async fn a_claim_deleted_before_it_is_bound_is_no_longer_timed() {
    let (f, m) = with_metrics(
        vec![],
        vec![with_class(claim("c", "1Gi"), "fast")],
        vec![class("fast", EXTERNAL, "Immediate")],
    );
    f.sync_claim("default/c").await;
    assert!(m.operation_pending("default/c"));
    let c = f.listers.claims.get_by_key("default/c").expect("cached");
    f.listers.claims.delete(&c).expect("delete");
    f.ctrl.claim_work("default/c").await.expect("claim work");
    assert!(!m.operation_pending("default/c"));
}

#[tokio::test]
async fn a_failed_deletion_counts_an_error_and_a_deleted_volume_its_latency() {
    let failing = released(bound_volume("bad", "1Gi", "c", "uid-c"), "Delete");
    let tmp = with_spec(
        released(bound_volume("v", "1Gi", "c2", "uid-c2"), "Delete"),
        |s| {
            s.host_path = Some(HostPathVolumeSource {
                path: "/tmp/data".into(),
                type_: None,
            })
        },
    );
    let (f, m) = with_metrics(vec![failing, tmp], vec![], vec![]);
    f.ctrl
        .sync_volume(&f.ctrl.volumes.get("bad").expect("cached"))
        .await
        .expect_err("no deleter");
    // The hostPath deleter refuses a path outside /tmp: an error of its plugin.
    assert_eq!(
        m.operation_errors("kubernetes.io/host-path", metrics::OPERATION_DELETE),
        1
    );
    f.sync_volume("v").await;
    assert_eq!(f.writes().last(), Some(&Action::DeleteVolume("v".into())));
    assert!(m.operation_pending("v"), "timed until the deletion is seen");
    let v = f.listers.volumes.get_by_key("v").expect("cached");
    f.listers.volumes.delete(&v).expect("delete");
    f.ctrl.volume_work("v").await.expect("volume work");
    assert!(!m.operation_pending("v"));
    let text = encode(&m);
    assert!(
        text.contains("volume_operation_total_seconds_count{plugin_name=\"kubernetes.io/host-path\",operation_name=\"delete\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("volume_operation_total_errors_total{plugin_name=\"kubernetes.io/host-path\",operation_name=\"delete\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_retroactive_default_class_assignment_is_counted() {
    let mut standard = class("standard", EXTERNAL, "Immediate");
    standard.metadata.annotations = Some(
        [(
            IS_DEFAULT_STORAGE_CLASS_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]
        .into(),
    );
    let (f, m) = with_metrics(
        vec![],
        vec![claim("c", "1Gi"), with_class(claim("d", "1Gi"), "standard")],
        vec![standard],
    );
    f.sync_claim("default/c").await;
    f.sync_claim("default/d").await;
    assert_eq!(
        m.retroactive_counts(),
        (1, 0),
        "a claim with a class is not counted"
    );
    let text = encode(&m);
    assert!(text.contains("retroactive_storageclass_total 1"), "{text}");
    assert!(
        text.contains("retroactive_storageclass_errors_total 0"),
        "{text}"
    );
}

#[tokio::test]
async fn the_pv_collector_counts_the_controllers_caches_while_the_controller_lives() {
    let f = fixture(
        vec![bound_volume("a", "1Gi", "c", "uid-c"), volume("b", "1Gi")],
        vec![bound_claim("c", "1Gi", "a"), claim("d", "1Gi")],
        vec![],
    );
    let ctrl = Arc::new(f.ctrl);
    let mut registry = prometheus_client::registry::Registry::default();
    ctrl.register_state_metrics(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    for line in [
        "pv_collector_bound_pv_count{storage_class=\"\"} 1",
        "pv_collector_unbound_pv_count{storage_class=\"\"} 1",
        "pv_collector_total_pv_count{plugin_name=\"kubernetes.io/host-path\",volume_mode=\"Filesystem\"} 2",
        "pv_collector_bound_pvc_count{namespace=\"default\",storage_class=\"\",volume_attributes_class=\"\"} 1",
        "pv_collector_unbound_pvc_count{namespace=\"default\",storage_class=\"\",volume_attributes_class=\"\"} 1",
        "# TYPE pv_collector_bound_pv_count gauge",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    drop(ctrl);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(!text.contains("pv_collector"), "{text}");
}
