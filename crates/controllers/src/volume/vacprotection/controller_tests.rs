//! Unit tests of the VAC protection controller: bare caches and the recording fake client, the cases of upstream's `vac_protection_controller_test.go`.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kcm_machinery::controller::api_status;
use kcm_testing::{MetaBuilder, VolumeAttributesClassBuilder, pv, pvc, volume_attributes_class};

use super::*;
use crate::volume::client::{Action, FakeStorageClient, Verb};
use crate::volume::test_support::run_until;

fn deleted_at() -> jiff::Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

fn vac1() -> VolumeAttributesClassBuilder {
    volume_attributes_class("vac1")
}

fn vac1_protected() -> VolumeAttributesClassBuilder {
    vac1().finalizers(&[VAC_PROTECTION_FINALIZER])
}

fn vac1_terminating_protected() -> VolumeAttributesClassBuilder {
    vac1_protected().deleted_at(deleted_at())
}

fn vac1_terminating() -> VolumeAttributesClassBuilder {
    vac1().deleted_at(deleted_at())
}

fn volume(name: &str, class: &str) -> PersistentVolume {
    pv(name).volume_attributes_class(class).build()
}

fn claim(name: &str, class: &str) -> PersistentVolumeClaim {
    pvc(name)
        .namespace("default")
        .volume_attributes_class(class)
        .build()
}

fn update(class: VolumeAttributesClassBuilder) -> Action {
    Action::UpdateVolumeAttributesClass(class.build())
}

/// What happens in one case.
#[derive(Default)]
struct Case {
    name: &'static str,
    /// Objects in the caches before the event.
    classes: Vec<VolumeAttributesClassBuilder>,
    volumes: Vec<PersistentVolume>,
    claims: Vec<PersistentVolumeClaim>,
    /// A class event (the class is also cached).
    updated_class: Option<VolumeAttributesClassBuilder>,
    /// A volume event: updated from `old_volume` to `updated_volume` (cached), or deleted when
    /// only `old_volume` is given.
    old_volume: Option<PersistentVolume>,
    updated_volume: Option<PersistentVolume>,
    /// A claim event, as the volume one.
    old_claim: Option<PersistentVolumeClaim>,
    updated_claim: Option<PersistentVolumeClaim>,
    /// Class updates that fail before one succeeds.
    failures: usize,
    want: Vec<Action>,
}

async fn run(case: Case) {
    let classes = Indexer::new();
    let volumes = Indexer::new();
    let claims = Indexer::new();
    let client = Arc::new(FakeStorageClient::new());
    if case.failures > 0 {
        client.fail(
            Verb::UpdateVolumeAttributesClass,
            case.failures,
            api_status::internal_error("Mock error"),
        );
    }
    let controller = VacProtectionController::with_caches(
        classes.clone(),
        volumes.clone(),
        claims.clone(),
        client.clone(),
        VacProtectionControllerOptions::default(),
    );
    for class in case.classes.iter().chain(case.updated_class.iter()) {
        classes.add(class.clone().arc()).expect("add class");
    }
    for v in case.volumes.iter().chain(case.updated_volume.iter()) {
        volumes.add(Arc::new(v.clone())).expect("add volume");
    }
    for c in case.claims.iter().chain(case.updated_claim.iter()) {
        claims.add(Arc::new(c.clone())).expect("add claim");
    }
    let handlers = controller.event_handlers();
    if let Some(class) = &case.updated_class {
        handlers.class_added_updated(&class.clone().build());
    }
    match (&case.old_volume, &case.updated_volume) {
        (Some(old), Some(new)) => handlers.volume_updated(old, new),
        (Some(old), None) => handlers.volume_deleted(old),
        _ => {}
    }
    match (&case.old_claim, &case.updated_claim) {
        (Some(old), Some(new)) => handlers.claim_updated(old, new),
        (Some(old), None) => handlers.claim_deleted(old),
        _ => {}
    }
    run_until(&client, case.want.len(), || async {
        !controller.queue().is_empty() && controller.process_next_work_item().await
    })
    .await;
    assert_eq!(client.actions(), case.want, "{}", case.name);
}

#[tokio::test(start_paused = true)]
async fn class_events() {
    let cases = [
        Case {
            name: "VAC without finalizer -> finalizer is added",
            updated_class: Some(vac1()),
            want: vec![update(vac1_protected())],
            ..Case::default()
        },
        Case {
            name: "VAC with finalizer -> no action",
            updated_class: Some(vac1_protected()),
            ..Case::default()
        },
        Case {
            name: "saving VAC finalizer fails -> controller retries",
            updated_class: Some(vac1()),
            failures: 2,
            want: vec![
                update(vac1_protected()),
                update(vac1_protected()),
                update(vac1_protected()),
            ],
            ..Case::default()
        },
        Case {
            name: "deleted VAC with finalizer -> finalizer is removed",
            updated_class: Some(vac1_terminating_protected()),
            want: vec![update(vac1_terminating())],
            ..Case::default()
        },
        Case {
            name: "finalizer removal fails -> controller retries",
            updated_class: Some(vac1_terminating_protected()),
            failures: 2,
            want: vec![
                update(vac1_terminating()),
                update(vac1_terminating()),
                update(vac1_terminating()),
            ],
            ..Case::default()
        },
        Case {
            name: "deleted VAC with finalizer but it's referenced by a PV -> finalizer is not removed",
            volumes: vec![volume("pv1", "vac1")],
            updated_class: Some(vac1_terminating_protected()),
            ..Case::default()
        },
        Case {
            name: "deleted VAC with finalizer but it's referenced by a PVC -> finalizer is not removed",
            claims: vec![claim("pvc1", "vac1")],
            updated_class: Some(vac1_terminating_protected()),
            ..Case::default()
        },
    ];
    for case in cases {
        run(case).await;
    }
}

#[tokio::test(start_paused = true)]
async fn volume_events() {
    let cases = [
        Case {
            name: "pv changes vac and deleted VAC with finalizer -> finalizer is removed",
            classes: vec![vac1_terminating_protected()],
            old_volume: Some(volume("pv1", "vac1")),
            updated_volume: Some(volume("pv1", "vac2")),
            want: vec![update(vac1_terminating())],
            ..Case::default()
        },
        Case {
            name: "pv is deleted and deleted VAC with finalizer -> finalizer is removed",
            classes: vec![vac1_terminating_protected()],
            old_volume: Some(volume("pv1", "vac1")),
            want: vec![update(vac1_terminating())],
            ..Case::default()
        },
        Case {
            name: "pv is deleted but other pv still holds terminating vac -> finalizer is not removed",
            classes: vec![vac1_terminating_protected()],
            volumes: vec![volume("pv2", "vac1")],
            old_volume: Some(volume("pv1", "vac1")),
            ..Case::default()
        },
        Case {
            name: "pv is deleted but pvc still holds terminating vac -> finalizer is not removed",
            classes: vec![vac1_terminating_protected()],
            claims: vec![claim("pvc1", "vac1")],
            old_volume: Some(volume("pv1", "vac1")),
            ..Case::default()
        },
    ];
    for case in cases {
        run(case).await;
    }
}

#[tokio::test(start_paused = true)]
async fn claim_events() {
    let cases = [
        Case {
            name: "pvc changes vac and deleted VAC with finalizer -> finalizer is removed",
            classes: vec![vac1_terminating_protected()],
            old_claim: Some(claim("pvc1", "vac1")),
            updated_claim: Some(claim("pvc1", "vac2")),
            want: vec![update(vac1_terminating())],
            ..Case::default()
        },
        Case {
            name: "pvc changes vac but its status still holds terminating vac -> finalizer is not removed",
            classes: vec![vac1_terminating_protected()],
            old_claim: Some(claim("pvc1", "vac1")),
            updated_claim: Some(
                pvc("pvc1")
                    .namespace("default")
                    .volume_attributes_class("vac2")
                    .current_volume_attributes_class("vac1")
                    .build(),
            ),
            ..Case::default()
        },
        Case {
            name: "pvc changes vac but its target status still holds terminating vac -> finalizer is not removed",
            classes: vec![vac1_terminating_protected()],
            old_claim: Some(claim("pvc1", "vac1")),
            updated_claim: Some(
                pvc("pvc1")
                    .namespace("default")
                    .volume_attributes_class("vac2")
                    .target_volume_attributes_class("vac1")
                    .build(),
            ),
            ..Case::default()
        },
        Case {
            name: "pvc is deleted but other pvc still holds terminating vac -> finalizer is not removed",
            classes: vec![vac1_terminating_protected()],
            claims: vec![claim("pvc2", "vac1")],
            old_claim: Some(claim("pvc1", "vac1")),
            ..Case::default()
        },
        Case {
            name: "pvc is deleted but pv still holds terminating vac -> finalizer is not removed",
            classes: vec![vac1_terminating_protected()],
            volumes: vec![volume("pv1", "vac1")],
            old_claim: Some(claim("pvc1", "vac1")),
            ..Case::default()
        },
    ];
    for case in cases {
        run(case).await;
    }
}

/// A claim names a class three ways; each counts once.
#[test]
fn claim_class_names_are_deduplicated() {
    let c = pvc("c")
        .volume_attributes_class("gold")
        .current_volume_attributes_class("gold")
        .target_volume_attributes_class("silver")
        .build();
    assert_eq!(claim_class_names(&c), vec!["gold", "silver"]);
    assert!(volume_class_names(&pv("v").build()).is_empty());
}
