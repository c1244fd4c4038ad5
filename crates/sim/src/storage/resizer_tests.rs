//! Tests of the simulated resizer: caches seeded by hand, `sync` called, the fake client's claims, volumes and actions read.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kcm_machinery::events::{EventType, FakeRecorder, SystemClock};
use kcm_machinery::informer::Indexer;
use serde_json::json;

use super::*;
use crate::storage::FakeVolumes;

const KEY: &str = "default/data";

/// Claim `default/data` (uid `u-1`) bound to `pv-1` with 1Gi, asking for `request`.
fn claim(request: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "data", "namespace": "default", "uid": "u-1", "resourceVersion": "10"},
        "spec": {
            "volumeName": "pv-1",
            "storageClassName": "standard",
            "resources": {"requests": {"storage": request}},
        },
        "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}},
    }))
    .expect("claim")
}

/// PV `pv-1` of `driver` with 1Gi, bound to `default/data` (uid `u-1`).
fn volume(driver: &str) -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": "pv-1", "resourceVersion": "5"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "storageClassName": "standard",
            "csi": {"driver": driver, "volumeHandle": "pv-1"},
            "claimRef": {"namespace": "default", "name": "data", "uid": "u-1"},
        },
    }))
    .expect("volume")
}

fn class(fault: Option<&str>) -> StorageClass {
    let mut class = crate::storage::default_storage_class();
    if let Some(message) = fault {
        class
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION_RESIZE_FAILS.into(), message.into());
    }
    class
}

struct Harness {
    client: Arc<FakeVolumes>,
    recorder: FakeRecorder,
    claims: Indexer<PersistentVolumeClaim>,
    classes: Indexer<StorageClass>,
    resizer: Resizer,
}

impl Harness {
    /// The claim in the cache and the fake; the volume in both unless `volume_in_api` is false.
    async fn new(
        claim: PersistentVolumeClaim,
        volume: PersistentVolume,
        volume_in_api: bool,
    ) -> Self {
        let client = Arc::new(FakeVolumes::new());
        let recorder = FakeRecorder::new();
        let claims = Indexer::new();
        let volumes = Indexer::new();
        let classes = Indexer::new();
        classes.add(Arc::new(class(None))).expect("class");
        client.put_claim(claim.clone());
        if volume_in_api {
            client.create_volume(&volume).await.expect("volume");
        }
        claims.add(Arc::new(claim)).expect("claim");
        volumes.add(Arc::new(volume)).expect("volume");
        let resizer = Resizer::with_caches(
            claims.clone(),
            volumes,
            classes.clone(),
            client.clone(),
            Arc::new(recorder.clone()),
            Arc::new(SystemClock),
        );
        Self {
            client,
            recorder,
            claims,
            classes,
            resizer,
        }
    }

    fn claim(&self) -> PersistentVolumeClaim {
        self.client.claim(KEY).expect("claim written")
    }

    fn events(&self) -> Vec<(EventType, String, String)> {
        self.recorder
            .events()
            .into_iter()
            .map(|e| (e.type_, e.reason, e.message))
            .collect()
    }
}

fn conditions(claim: &PersistentVolumeClaim) -> Vec<(String, String, Option<String>)> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status, c.message))
        .collect()
}

fn storage(map: Option<&std::collections::BTreeMap<String, Quantity>>) -> Option<String> {
    map.and_then(|m| m.get("storage")).map(|q| q.0.clone())
}

#[tokio::test]
async fn a_grown_claim_is_resized_and_left_for_the_node() {
    let h = Harness::new(claim("2Gi"), volume(CSI_DRIVER), true).await;
    h.resizer.sync(KEY).await.expect("sync");
    assert_eq!(
        h.client.actions(),
        vec![
            "create-volume pv-1",
            "patch-claim-status default/data",
            "patch-volume pv-1",
            "patch-claim-status default/data",
        ]
    );
    let written = h.claim();
    let status = written.status.clone().expect("status");
    assert_eq!(
        storage(status.allocated_resources.as_ref()).as_deref(),
        Some("2Gi")
    );
    assert_eq!(
        status
            .allocated_resource_statuses
            .as_ref()
            .and_then(|m| m.get("storage"))
            .map(String::as_str),
        Some(NODE_RESIZE_PENDING)
    );
    assert_eq!(
        storage(status.capacity.as_ref()).as_deref(),
        Some("1Gi"),
        "the claim's capacity waits for the node"
    );
    assert_eq!(
        conditions(&written),
        vec![
            ("Resizing".into(), "True".into(), None),
            (
                "FileSystemResizePending".into(),
                "True".into(),
                Some(
                    "Waiting for user to (re-)start a pod to finish file system resize of volume \
                     on node."
                        .into()
                )
            ),
        ]
    );
    let pv = h.client.volumes().pop().expect("volume");
    assert_eq!(
        storage(pv.spec.as_ref().and_then(|s| s.capacity.as_ref())).as_deref(),
        Some("2Gi")
    );
    assert_eq!(
        h.events(),
        vec![
            (
                EventType::Normal,
                "Resizing".into(),
                "External resizer is resizing volume pv-1".into()
            ),
            (
                EventType::Normal,
                "FileSystemResizeRequired".into(),
                "Require file system resize of volume on node".into()
            ),
        ]
    );
    assert!(h.recorder.events().iter().all(|e| {
        e.regarding.kind.as_deref() == Some("PersistentVolumeClaim")
            && e.regarding.name.as_deref() == Some("data")
    }));

    // Synced again from the new state (the PV grown): the node's turn, nothing to do.
    let h2 = Harness::new(written, h.client.volumes().pop().expect("pv"), true).await;
    h2.resizer.sync(KEY).await.expect("sync");
    assert_eq!(h2.client.actions(), vec!["create-volume pv-1"]);
}

/// The first step on its own: the PV patch fails, the claim stays `ControllerResizeInProgress`
/// with `Resizing` and the allocated size, and the error is returned for a retry.
#[tokio::test]
async fn the_claim_is_marked_resizing_before_the_volume_is_expanded() {
    let h = Harness::new(claim("2Gi"), volume(CSI_DRIVER), false).await;
    let err = h
        .resizer
        .sync(KEY)
        .await
        .expect_err("the PV is not in the API");
    assert!(
        err.to_string()
            .contains("updating the volume's capacity for pv-1"),
        "{err}"
    );
    let written = h.claim();
    let status = written.status.clone().expect("status");
    assert_eq!(
        status
            .allocated_resource_statuses
            .as_ref()
            .and_then(|m| m.get("storage"))
            .map(String::as_str),
        Some(CONTROLLER_RESIZE_IN_PROGRESS)
    );
    assert_eq!(
        storage(status.allocated_resources.as_ref()).as_deref(),
        Some("2Gi")
    );
    assert_eq!(
        conditions(&written),
        vec![("Resizing".into(), "True".into(), None)]
    );
    assert_eq!(
        written.metadata.resource_version.as_deref(),
        Some("11"),
        "one write"
    );

    // The retry reads the in-progress claim and resumes to the same size.
    h.claims.update(Arc::new(written)).expect("cache");
    h.client
        .create_volume(&volume(CSI_DRIVER))
        .await
        .expect("volume");
    h.resizer.sync(KEY).await.expect("sync");
    assert_eq!(resize_status(&h.claim()), Some(NODE_RESIZE_PENDING));
}

#[tokio::test]
async fn a_faulted_class_makes_the_expansion_infeasible_until_the_fault_goes() {
    let h = Harness::new(claim("2Gi"), volume(CSI_DRIVER), true).await;
    h.classes
        .update(Arc::new(class(Some("no room for 2Gi"))))
        .expect("class");
    h.resizer
        .sync(KEY)
        .await
        .expect("a final error is recorded, not retried");
    let written = h.claim();
    assert_eq!(resize_status(&written), Some(CONTROLLER_RESIZE_INFEASIBLE));
    assert_eq!(
        conditions(&written),
        vec![
            ("Resizing".into(), "True".into(), None),
            (
                "ControllerResizeError".into(),
                "True".into(),
                Some(
                    "failed to expand pvc with rpc error: code = OutOfRange desc = no room for 2Gi"
                        .into()
                )
            ),
        ]
    );
    assert_eq!(
        h.events(),
        vec![
            (
                EventType::Normal,
                "Resizing".into(),
                "External resizer is resizing volume pv-1".into()
            ),
            (
                EventType::Warning,
                "VolumeResizeFailed".into(),
                "resize volume \"pv-1\" by resizer \"hostpath.sim.kcm.io\" failed: rpc error: \
                 code = OutOfRange desc = no room for 2Gi"
                    .into()
            ),
        ]
    );
    let pv = h.client.volumes().pop().expect("volume");
    assert_eq!(
        storage(pv.spec.as_ref().and_then(|s| s.capacity.as_ref())).as_deref(),
        Some("1Gi"),
        "the volume is not expanded"
    );

    // The same infeasible size is not tried again while the fault stays.
    h.claims.update(Arc::new(written)).expect("cache");
    let before = h.client.actions().len();
    h.resizer.sync(KEY).await.expect("sync");
    assert_eq!(h.client.actions().len(), before);

    // Without the fault the retry succeeds; the error condition goes with the new status.
    h.classes.update(Arc::new(class(None))).expect("class");
    h.resizer.sync(KEY).await.expect("sync");
    let written = h.claim();
    assert_eq!(resize_status(&written), Some(NODE_RESIZE_PENDING));
    let types: Vec<String> = conditions(&written).into_iter().map(|c| c.0).collect();
    assert_eq!(
        types,
        vec![
            "Resizing",
            "ControllerResizeError",
            "FileSystemResizePending"
        ],
        "resize conditions are kept, as keepOldResizeConditions"
    );
}

#[tokio::test]
async fn claims_it_does_not_resize_are_left_alone() {
    // Another driver's volume.
    let h = Harness::new(claim("2Gi"), volume("other.csi.example.com"), true).await;
    h.resizer.sync(KEY).await.expect("sync");
    assert_eq!(h.client.actions(), vec!["create-volume pv-1"]);
    // A request within the capacity.
    let h = Harness::new(claim("1Gi"), volume(CSI_DRIVER), true).await;
    h.resizer.sync(KEY).await.expect("sync");
    assert_eq!(h.client.actions(), vec!["create-volume pv-1"]);
    // A volume bound to another claim (uid).
    let mut other = volume(CSI_DRIVER);
    if let Some(r) = other.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
        r.uid = Some("u-2".into());
    }
    let h = Harness::new(claim("2Gi"), other, true).await;
    h.resizer.sync(KEY).await.expect("sync");
    assert_eq!(h.client.actions(), vec!["create-volume pv-1"]);
    // A claim not bound yet, and one gone from the cache.
    let mut pending = claim("2Gi");
    if let Some(s) = pending.status.as_mut() {
        s.phase = Some("Pending".into());
    }
    let h = Harness::new(pending, volume(CSI_DRIVER), true).await;
    h.resizer.sync(KEY).await.expect("sync");
    h.resizer.sync("default/gone").await.expect("sync");
    assert_eq!(h.client.actions(), vec!["create-volume pv-1"]);
    assert!(h.recorder.events().is_empty());
}

/// Cases of upstream's `TestExpandAndRecover` (expand_and_recover_test.go), by the size picked.
#[test]
fn the_target_size_follows_the_recorded_resize_state() {
    struct Case {
        name: &'static str,
        request: &'static str,
        pv: &'static str,
        allocated: Option<&'static str>,
        status: Option<&'static str>,
        want: Option<&'static str>,
    }
    let cases = [
        Case {
            name: "a new expansion takes the request",
            request: "2Gi",
            pv: "1Gi",
            allocated: None,
            status: None,
            want: Some("2Gi"),
        },
        Case {
            name: "an expansion in progress resumes to the allocated size",
            request: "3Gi",
            pv: "1Gi",
            allocated: Some("2Gi"),
            status: Some(CONTROLLER_RESIZE_IN_PROGRESS),
            want: Some("2Gi"),
        },
        Case {
            name: "node expansion pending with the volume expanded waits",
            request: "2Gi",
            pv: "2Gi",
            allocated: Some("2Gi"),
            status: Some(NODE_RESIZE_PENDING),
            want: None,
        },
        Case {
            name: "node expansion pending and a bigger request wait for the node first",
            request: "3Gi",
            pv: "2Gi",
            allocated: Some("2Gi"),
            status: Some(NODE_RESIZE_PENDING),
            want: None,
        },
        Case {
            name: "an infeasible expansion is retried to the new request",
            request: "3Gi",
            pv: "1Gi",
            allocated: Some("2Gi"),
            status: Some(CONTROLLER_RESIZE_INFEASIBLE),
            want: Some("3Gi"),
        },
        Case {
            name: "a volume already expanded with no status resumes to the allocated size",
            request: "2Gi",
            pv: "2Gi",
            allocated: Some("2Gi"),
            status: None,
            want: Some("2Gi"),
        },
    ];
    for case in cases {
        let mut c = claim(case.request);
        if let Some(status) = c.status.as_mut() {
            if let Some(a) = case.allocated {
                status.allocated_resources =
                    Some([("storage".to_owned(), Quantity(a.into()))].into());
            }
            if let Some(s) = case.status {
                set_resize_status(status, Some(s));
            }
        }
        let mut v = volume(CSI_DRIVER);
        if let Some(spec) = v.spec.as_mut() {
            spec.capacity = Some([("storage".to_owned(), Quantity(case.pv.into()))].into());
        }
        assert_eq!(
            target_size(&c, &v).map(|q| q.0).as_deref(),
            case.want,
            "{}",
            case.name
        );
    }
}
