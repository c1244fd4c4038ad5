//! Unit tests of the simulated provisioner: claims of the simulated class get a bound volume,
//! at once or once their first consumer is scheduled; others are left alone; volumes of
//! deleted claims go.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Volume};
use kcm_testing::{MetaBuilder, PodSpecBuilder, pod, pvc};

use super::super::class::{IMMEDIATE, default_storage_class};
use super::super::client::FakeVolumes;
use super::*;

fn fixture(mode: &str) -> (Provisioner, Arc<FakeVolumes>, StorageCaches) {
    let caches = StorageCaches::default();
    let mut class = default_storage_class();
    class.volume_binding_mode = Some(mode.to_owned());
    let _ = caches.classes.add(Arc::new(class));
    let client = Arc::new(FakeVolumes::new());
    (
        Provisioner::with_caches(caches.clone(), client.clone()),
        client,
        caches,
    )
}

fn claim() -> PersistentVolumeClaim {
    pvc("www-web-0")
        .namespace("default")
        .uid("claim-uid")
        .resource_version("3")
        .storage("2Gi")
        .build()
}

fn consumer(node: Option<&str>) -> Pod {
    let mut p = pod("web-0").namespace("default").with(|p| {
        p.spec.get_or_insert_default().volumes = Some(vec![Volume {
            name: "www".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: "www-web-0".into(),
                read_only: None,
            }),
            ..Volume::default()
        }]);
    });
    if let Some(node) = node {
        p = p.node(node);
    }
    p.build()
}

#[tokio::test]
async fn immediate_claims_are_bound_at_once() {
    let (p, client, caches) = fixture(IMMEDIATE);
    let _ = caches.claims.add(Arc::new(claim()));
    p.sync(&Item::Claim("default/www-web-0".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let volumes = client.volumes();
    assert_eq!(volumes.len(), 1);
    let pv = &volumes[0];
    assert_eq!(pv.metadata.name.as_deref(), Some("pvc-claim-uid"));
    assert_eq!(
        pv.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Bound")
    );
    let spec = pv.spec.clone().unwrap_or_default();
    assert_eq!(
        spec.capacity
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("2Gi".into())
    );
    assert_eq!(spec.claim_ref.and_then(|r| r.uid), Some("claim-uid".into()));
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert!(spec.node_affinity.is_none());
    let bound = client.claim("default/www-web-0").unwrap_or_default();
    assert_eq!(
        bound.spec.and_then(|s| s.volume_name).as_deref(),
        Some("pvc-claim-uid")
    );
    let status = bound.status.unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Bound"));
    assert_eq!(
        status
            .capacity
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("2Gi".into())
    );
    assert_eq!(
        client.actions(),
        [
            "create-volume pvc-claim-uid",
            "update-volume-status pvc-claim-uid",
            "update-claim default/www-web-0",
            "update-claim-status default/www-web-0"
        ]
    );
}

#[tokio::test]
async fn wait_for_first_consumer_waits_for_a_scheduled_pod() {
    let (p, client, caches) = fixture(WAIT_FOR_FIRST_CONSUMER);
    let _ = caches.claims.add(Arc::new(claim()));
    let _ = caches.pods.add(Arc::new(consumer(None)));
    p.sync(&Item::Claim("default/www-web-0".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(client.actions().is_empty(), "no consumer scheduled yet");
    let _ = caches.pods.update(Arc::new(consumer(Some("kcm-node-1"))));
    p.sync(&Item::Claim("default/www-web-0".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let pv = client.volumes().remove(0);
    let terms = pv
        .spec
        .and_then(|s| s.node_affinity)
        .and_then(|a| a.required)
        .map(|r| r.node_selector_terms)
        .unwrap_or_default();
    assert_eq!(
        terms[0]
            .match_expressions
            .as_ref()
            .and_then(|e| e[0].values.clone()),
        Some(vec!["kcm-node-1".to_owned()])
    );
    let bound = client.claim("default/www-web-0").unwrap_or_default();
    assert_eq!(
        bound
            .metadata
            .annotations
            .and_then(|a| a.get(SELECTED_NODE_ANNOTATION).cloned())
            .as_deref(),
        Some("kcm-node-1")
    );
}

/// The claim the ephemeral volume controller makes for a pod's generic ephemeral volume waits
/// for that pod, as a `persistentVolumeClaim` volume's claim does; a claim of that name the pod
/// does not control is not the pod's.
#[tokio::test]
async fn ephemeral_claims_wait_for_their_scheduled_pod() {
    let (p, client, caches) = fixture(WAIT_FOR_FIRST_CONSUMER);
    let owner = pod("web")
        .namespace("default")
        .uid("pod-uid")
        .ephemeral_volume("scratch", pvc("").storage("1Gi"))
        .node("kcm-node-2")
        .build();
    let _ = caches.pods.add(Arc::new(owner.clone()));
    let foreign = pvc("web-scratch")
        .namespace("default")
        .uid("claim-uid")
        .storage("1Gi")
        .build();
    let _ = caches.claims.add(Arc::new(foreign));
    p.sync(&Item::Claim("default/web-scratch".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(client.actions().is_empty(), "not the pod's claim");
    let owned = pvc("web-scratch")
        .namespace("default")
        .uid("claim-uid")
        .storage("1Gi")
        .owner(kcm_testing::controller_ref_of(&owner))
        .build();
    let _ = caches.claims.update(Arc::new(owned));
    p.sync(&Item::Claim("default/web-scratch".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let bound = client.claim("default/web-scratch").unwrap_or_default();
    assert_eq!(
        bound
            .metadata
            .annotations
            .and_then(|a| a.get(SELECTED_NODE_ANNOTATION).cloned())
            .as_deref(),
        Some("kcm-node-2")
    );
}

#[tokio::test]
async fn other_classes_and_bound_claims_are_left_alone() {
    let (p, client, caches) = fixture(IMMEDIATE);
    let _ = caches.claims.add(Arc::new(
        pvc("other")
            .namespace("default")
            .storage_class("fast")
            .build(),
    ));
    let _ = caches.claims.add(Arc::new(
        pvc("done").namespace("default").bound_to("pv-x").build(),
    ));
    for key in ["default/other", "default/done", "default/missing"] {
        p.sync(&Item::Claim(key.into()))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(client.actions().is_empty());
}

#[tokio::test]
async fn volumes_of_deleted_claims_are_deleted() {
    let (p, client, caches) = fixture(IMMEDIATE);
    let class = default_storage_class();
    let volume = new_volume(&claim(), &class, None, "pvc-claim-uid");
    let _ = caches.volumes.add(Arc::new(volume.clone()));
    let _ = caches.claims.add(Arc::new(claim()));
    p.sync(&Item::Volume("pvc-claim-uid".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(client.actions().is_empty(), "its claim still exists");
    let _ = caches.claims.delete(&claim());
    p.sync(&Item::Volume("pvc-claim-uid".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        client.actions(),
        [
            "update-volume-status pvc-claim-uid",
            "delete-volume pvc-claim-uid"
        ],
        "released first, so the PV protection controller lets it go"
    );
}

/// A `Retain` volume whose claim is gone is `Released`, not deleted, as the PV controller
/// leaves it.
#[tokio::test]
async fn retained_volumes_of_deleted_claims_are_released() {
    let (p, client, caches) = fixture(IMMEDIATE);
    let mut class = default_storage_class();
    class.reclaim_policy = Some("Retain".to_owned());
    let volume = new_volume(&claim(), &class, None, "pvc-claim-uid");
    let _ = caches.volumes.add(Arc::new(volume));
    p.sync(&Item::Volume("pvc-claim-uid".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(client.actions(), ["update-volume-status pvc-claim-uid"]);
    let released = client
        .volumes()
        .pop()
        .and_then(|v| v.status)
        .and_then(|s| s.phase);
    assert_eq!(released.as_deref(), Some("Released"));
}
