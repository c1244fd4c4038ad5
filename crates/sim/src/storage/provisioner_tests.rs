//! Unit tests of the simulated external provisioner: claims the PV controller annotated for it
//! get a volume pointing back at them, at once or once the scheduler selected their node;
//! others are left alone; released `Delete` volumes it made go.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeStatus;
use kcm_testing::{MetaBuilder, pvc};

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

/// A claim of class `standard`, annotated for `provisioner` (the PV controller's request) and
/// with `node` selected, when given.
fn claim_for(provisioner: Option<&str>, node: Option<&str>) -> PersistentVolumeClaim {
    let mut b = pvc("www-web-0")
        .namespace("default")
        .uid("claim-uid")
        .resource_version("3")
        .storage("2Gi")
        .storage_class("standard");
    if let Some(p) = provisioner {
        b = b
            .annotation(STORAGE_PROVISIONER_ANNOTATION, p)
            .annotation(BETA_STORAGE_PROVISIONER_ANNOTATION, p);
    }
    if let Some(n) = node {
        b = b.annotation(SELECTED_NODE_ANNOTATION, n);
    }
    b.build()
}

async fn sync(p: &Provisioner, item: Item) {
    p.sync(&item).await.unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn immediate_claims_asked_for_get_a_volume_pointing_back_at_them() {
    let (p, client, caches) = fixture(IMMEDIATE);
    let _ = caches
        .claims
        .add(Arc::new(claim_for(Some(PROVISIONER), None)));
    sync(&p, Item::Claim("default/www-web-0".into())).await;
    assert_eq!(client.actions(), ["create-volume pvc-claim-uid"]);
    let pv = client.volumes().remove(0);
    assert_eq!(pv.metadata.name.as_deref(), Some("pvc-claim-uid"));
    assert!(pv.status.is_none(), "the PV controller sets the phases");
    assert_eq!(
        pv.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PROVISIONED_BY_ANNOTATION))
            .map(String::as_str),
        Some(PROVISIONER)
    );
    assert_eq!(
        pv.metadata.finalizers.as_deref(),
        Some(&[PROVISIONER_FINALIZER.to_owned()][..])
    );
    let spec = pv.spec.clone().unwrap_or_default();
    assert_eq!(
        spec.capacity
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("2Gi".into())
    );
    let claim_ref = spec.claim_ref.unwrap_or_default();
    assert_eq!(claim_ref.uid.as_deref(), Some("claim-uid"));
    assert_eq!(claim_ref.name.as_deref(), Some("www-web-0"));
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert!(spec.node_affinity.is_none());
    assert!(
        client.claim("default/www-web-0").is_none(),
        "the claim is not written"
    );
}

#[tokio::test]
async fn claims_not_asked_for_are_left_alone() {
    let (p, client, caches) = fixture(IMMEDIATE);
    let _ = caches.claims.add(Arc::new(claim_for(None, None)));
    let _ = caches.claims.add(Arc::new(
        pvc("other")
            .namespace("default")
            .storage_class("standard")
            .annotation(STORAGE_PROVISIONER_ANNOTATION, "ebs.csi.aws.com")
            .build(),
    ));
    let _ = caches.claims.add(Arc::new(
        pvc("done")
            .namespace("default")
            .storage_class("standard")
            .bound_to("pv-x")
            .build(),
    ));
    for key in [
        "default/www-web-0",
        "default/other",
        "default/done",
        "default/missing",
    ] {
        sync(&p, Item::Claim(key.into())).await;
    }
    assert!(client.actions().is_empty());
}

/// A delayed-binding claim waits for the scheduler to select its node (a scheduled pod is not
/// enough: the scheduler writes the annotation), then gets a volume pinned to that node.
#[tokio::test]
async fn wait_for_first_consumer_claims_wait_for_their_selected_node_then_get_a_volume_there() {
    let (p, client, caches) = fixture(WAIT_FOR_FIRST_CONSUMER);
    let _ = caches
        .claims
        .add(Arc::new(claim_for(Some(PROVISIONER), None)));
    sync(&p, Item::Claim("default/www-web-0".into())).await;
    assert!(client.actions().is_empty(), "no node selected yet");
    let _ = caches
        .claims
        .update(Arc::new(claim_for(Some(PROVISIONER), Some("kcm-node-1"))));
    sync(&p, Item::Claim("default/www-web-0".into())).await;
    assert_eq!(client.actions(), ["create-volume pvc-claim-uid"]);
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
}

fn with_phase(mut volume: PersistentVolume, phase: &str) -> PersistentVolume {
    volume.status = Some(PersistentVolumeStatus {
        phase: Some(phase.to_owned()),
        ..PersistentVolumeStatus::default()
    });
    volume
}

/// A `Delete` volume it made is deleted once the PV controller released it, its finalizer
/// dropped first; bound volumes are not touched.
#[tokio::test]
async fn released_delete_volumes_it_made_are_deleted() {
    let (p, client, caches) = fixture(IMMEDIATE);
    let class = default_storage_class();
    let volume = new_volume(&claim_for(None, None), &class, None, "pvc-claim-uid");
    let _ = caches
        .volumes
        .add(Arc::new(with_phase(volume.clone(), "Bound")));
    sync(&p, Item::Volume("pvc-claim-uid".into())).await;
    assert!(client.actions().is_empty(), "still bound");
    let _ = caches
        .volumes
        .update(Arc::new(with_phase(volume, "Released")));
    sync(&p, Item::Volume("pvc-claim-uid".into())).await;
    assert_eq!(
        client.actions(),
        ["update-volume pvc-claim-uid", "delete-volume pvc-claim-uid"]
    );
}

/// A released `Retain` volume, or one another provisioner made, stays.
#[tokio::test]
async fn retained_and_foreign_volumes_stay() {
    let (p, client, caches) = fixture(IMMEDIATE);
    let mut class = default_storage_class();
    class.reclaim_policy = Some("Retain".to_owned());
    let retained = new_volume(&claim_for(None, None), &class, None, "pvc-retained");
    assert!(retained.metadata.finalizers.is_none());
    let _ = caches
        .volumes
        .add(Arc::new(with_phase(retained, "Released")));
    let mut foreign = new_volume(
        &claim_for(None, None),
        &default_storage_class(),
        None,
        "pvc-foreign",
    );
    foreign.metadata.annotations = Some(BTreeMap::from([(
        PROVISIONED_BY_ANNOTATION.to_owned(),
        "ebs.csi.aws.com".to_owned(),
    )]));
    let _ = caches
        .volumes
        .add(Arc::new(with_phase(foreign, "Released")));
    sync(&p, Item::Volume("pvc-retained".into())).await;
    sync(&p, Item::Volume("pvc-foreign".into())).await;
    assert!(client.actions().is_empty());
}
