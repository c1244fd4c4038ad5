//! Unit tests of the PVC protection controller: bare caches and the recording fake client, the cases of upstream's `pvc_protection_controller_test.go` plus generic ephemeral volumes and the shared live list.

use kcm_machinery::controller::api_status;
use kcm_testing::{
    MetaBuilder, PodBuilder, PodSpecBuilder, PvcBuilder, controller_ref_of, pod, pvc,
};

use super::*;
use crate::volume::client::{Action, FakeStorageClient, Verb};
use crate::volume::pvcprotection::{pod_is_shut_down, pod_uses_claim};
use crate::volume::test_support::run_until;

const NS: &str = "default";

fn deleted_at() -> jiff::Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

/// Upstream's `pod()`: `default/pod1`, UID `uid1`, on `node1`, `Pending`.
fn a_pod() -> PodBuilder {
    pod_in("pod1", NS)
}

/// Upstream's `podWithConfig`.
fn pod_in(name: &str, namespace: &str) -> PodBuilder {
    pod(name)
        .namespace(namespace)
        .uid("uid1")
        .node("node1")
        .phase("Pending")
}

fn unscheduled(p: PodBuilder) -> PodBuilder {
    p.with(|p| {
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = None;
        }
    })
}

fn with_claim(claim: &str, p: PodBuilder) -> PodBuilder {
    p.claim_volume(claim, claim)
}

/// Upstream's `pvc()`: `default/pvc1`.
fn a_pvc() -> PvcBuilder {
    pvc_in("pvc1", NS)
}

/// Upstream's `pvcWithConfig`.
fn pvc_in(name: &str, namespace: &str) -> PvcBuilder {
    pvc(name).namespace(namespace)
}

fn protected(c: PvcBuilder) -> PvcBuilder {
    c.finalizers(&[PVC_PROTECTION_FINALIZER])
}

fn deleted(c: PvcBuilder) -> PvcBuilder {
    c.deleted_at(deleted_at())
}

fn update(c: PvcBuilder) -> Action {
    Action::UpdateClaim(c.build())
}

fn list(namespace: &str) -> Action {
    Action::ListPods(namespace.to_owned())
}

/// One case of upstream's `TestPVCProtectionController`.
#[derive(Default)]
struct Case {
    name: &'static str,
    /// Objects on the server, and in the caches unless `informers_are_late`.
    initial_pods: Vec<PodBuilder>,
    initial_claims: Vec<PvcBuilder>,
    /// The caches have not seen the initial objects yet.
    informers_are_late: bool,
    /// Claim events (each claim also on the server and in the cache).
    updated_claims: Vec<PvcBuilder>,
    /// A pod event (the pod also on the server and in the cache).
    updated_pod: Option<PodBuilder>,
    /// A deleted pod (on neither); with `updated_pod` of the same name, an update whose UID
    /// changed.
    deleted_pod: Option<PodBuilder>,
    /// Injected failures: `(verb, times)`.
    failures: Vec<(Verb, usize)>,
    want: Vec<Action>,
}

async fn run(case: Case) {
    let claims = Indexer::new();
    let pods = Indexer::new();
    let client = Arc::new(FakeStorageClient::new());
    let controller = PvcProtectionController::with_caches(
        claims.clone(),
        pods.clone(),
        client.clone(),
        PvcProtectionControllerOptions::default(),
    );
    for (verb, times) in &case.failures {
        client.fail(*verb, *times, api_status::internal_error("Mock error"));
    }
    for p in &case.initial_pods {
        client.insert_pod(p.clone().build());
        if !case.informers_are_late {
            pods.add(p.clone().arc()).expect("add pod");
        }
    }
    for c in &case.initial_claims {
        if !case.informers_are_late {
            claims.add(c.clone().arc()).expect("add claim");
        }
    }
    for c in &case.updated_claims {
        claims.add(c.clone().arc()).expect("add claim");
    }
    if let Some(p) = &case.updated_pod {
        client.insert_pod(p.clone().build());
        pods.add(p.clone().arc()).expect("add pod");
    }

    let handlers = controller.event_handlers();
    for c in &case.updated_claims {
        handlers.claim_added_updated(&c.clone().build());
    }
    match (&case.deleted_pod, &case.updated_pod) {
        (Some(old), Some(new)) => handlers.pod_added_deleted_updated(
            Some(&old.clone().build()),
            &new.clone().build(),
            false,
        ),
        (None, Some(new)) => handlers.pod_added_deleted_updated(None, &new.clone().build(), false),
        (Some(old), None) => handlers.pod_added_deleted_updated(None, &old.clone().build(), true),
        (None, None) => {}
    }

    // As upstream's test: one key at a time, then every namespace batch it made.
    run_until(&client, case.want.len(), || async {
        if controller.queue().is_empty() {
            return false;
        }
        controller.process_next_work_item().await;
        while !controller.batches().is_empty() {
            controller.process_claims_by_namespace().await;
        }
        true
    })
    .await;
    assert_eq!(client.actions(), case.want, "{}", case.name);
}

#[tokio::test(start_paused = true)]
async fn claim_events() {
    let cases = [
        Case {
            name: "PVC without finalizer -> finalizer is added",
            updated_claims: vec![a_pvc(), pvc_in("pvc2", "namespace-2")],
            want: vec![
                update(protected(a_pvc())),
                update(protected(pvc_in("pvc2", "namespace-2"))),
            ],
            ..Case::default()
        },
        Case {
            name: "PVC with finalizer -> no action",
            updated_claims: vec![protected(a_pvc()), protected(pvc_in("pvc2", "namespace-2"))],
            ..Case::default()
        },
        Case {
            name: "saving PVC finalizer fails -> controller retries",
            updated_claims: vec![a_pvc()],
            failures: vec![(Verb::UpdateClaim, 2)],
            want: vec![
                update(protected(a_pvc())),
                update(protected(a_pvc())),
                update(protected(a_pvc())),
            ],
            ..Case::default()
        },
        Case {
            name: "deleted PVC with finalizers across different namespaces -> finalizer is removed",
            updated_claims: vec![
                deleted(protected(a_pvc())),
                deleted(protected(pvc_in("pvc2", "namespace-2"))),
            ],
            want: vec![
                list(NS),
                update(deleted(a_pvc())),
                list("namespace-2"),
                update(deleted(pvc_in("pvc2", "namespace-2"))),
            ],
            ..Case::default()
        },
        Case {
            name: "multiple PVCs with finalizer for the same namespace; no alive pods -> finalizer is removed",
            updated_claims: vec![
                deleted(protected(a_pvc())),
                deleted(protected(pvc_in("pvc2", NS))),
            ],
            want: vec![
                list(NS),
                update(deleted(a_pvc())),
                list(NS),
                update(deleted(pvc_in("pvc2", NS))),
            ],
            ..Case::default()
        },
        Case {
            name: "finalizer removal fails -> controller retries",
            updated_claims: vec![deleted(protected(a_pvc()))],
            failures: vec![(Verb::UpdateClaim, 2)],
            want: vec![
                list(NS),
                update(deleted(a_pvc())),
                list(NS),
                update(deleted(a_pvc())),
                list(NS),
                update(deleted(a_pvc())),
            ],
            ..Case::default()
        },
        Case {
            name: "delete multiple PVCs of the same namespace; pod list fails for one PVC -> add failing PVC back to queue and continue to the next PVC",
            updated_claims: vec![
                deleted(protected(a_pvc())),
                deleted(protected(pvc_in("pvc2", NS))),
            ],
            failures: vec![(Verb::ListPods, 1)],
            want: vec![
                list(NS),
                list(NS),
                update(deleted(pvc_in("pvc2", NS))),
                list(NS),
                update(deleted(a_pvc())),
            ],
            ..Case::default()
        },
        Case {
            name: "deleted PVC with finalizer + pod with the PVC exists -> finalizer is not removed",
            initial_pods: vec![with_claim("pvc1", a_pod())],
            updated_claims: vec![deleted(protected(a_pvc()))],
            ..Case::default()
        },
        Case {
            name: "deleted PVC with finalizer + pod with unrelated PVC and EmptyDir exists -> finalizer is removed",
            initial_pods: vec![with_claim("unrelatedPVC", a_pod()).empty_dir_volume("emptyDir")],
            updated_claims: vec![deleted(protected(a_pvc()))],
            want: vec![list(NS), update(deleted(a_pvc()))],
            ..Case::default()
        },
        Case {
            name: "deleted multiple PVCs with finalizer (same namespace) + pod with unrelated PVC and EmptyDir exists",
            initial_pods: vec![with_claim("unrelatedPVC", a_pod()).empty_dir_volume("emptyDir")],
            updated_claims: vec![
                deleted(protected(a_pvc())),
                deleted(protected(pvc_in("pvc2", NS))),
                deleted(protected(pvc_in("pvc3", NS))),
            ],
            want: vec![
                list(NS),
                update(deleted(a_pvc())),
                list(NS),
                update(deleted(pvc_in("pvc2", NS))),
                list(NS),
                update(deleted(pvc_in("pvc3", NS))),
            ],
            ..Case::default()
        },
        Case {
            name: "deleted PVC with finalizer + pod with the PVC finished but is not deleted -> finalizer is not removed",
            initial_pods: vec![with_claim("pvc1", a_pod()).phase("Failed")],
            updated_claims: vec![deleted(protected(a_pvc()))],
            ..Case::default()
        },
        Case {
            name: "deleted PVC with finalizer + pod with the PVC exists but is not in the Informer's cache yet -> finalizer is not removed",
            initial_pods: vec![with_claim("pvc1", a_pod())],
            informers_are_late: true,
            updated_claims: vec![deleted(protected(a_pvc()))],
            want: vec![list(NS)],
            ..Case::default()
        },
        Case {
            name: "mix of deleted PVCs with some used by a pod and some unused -> finalizer is removed only for unused PVCs",
            initial_pods: vec![
                with_claim("pvc1", a_pod()),
                with_claim("pvc3", pod_in("pod2", "namespace-3")),
            ],
            informers_are_late: true,
            updated_claims: vec![
                deleted(protected(a_pvc())),
                deleted(protected(pvc_in("pvc2", NS))),
                deleted(protected(pvc_in("pvc3", "namespace-3"))),
            ],
            want: vec![
                list(NS),
                list(NS),
                update(deleted(pvc_in("pvc2", NS))),
                list("namespace-3"),
            ],
            ..Case::default()
        },
    ];
    for case in cases {
        run(case).await;
    }
}

#[tokio::test(start_paused = true)]
async fn pod_events() {
    let cases = [
        Case {
            name: "updated running Pod -> no action",
            initial_claims: vec![deleted(protected(a_pvc()))],
            updated_pod: Some(with_claim("pvc1", a_pod()).phase("Running")),
            ..Case::default()
        },
        Case {
            name: "updated finished Pod -> finalizer is not removed",
            initial_claims: vec![deleted(protected(a_pvc()))],
            updated_pod: Some(with_claim("pvc1", a_pod()).phase("Succeeded")),
            ..Case::default()
        },
        Case {
            name: "updated unscheduled Pod -> finalizer is removed",
            initial_claims: vec![deleted(protected(a_pvc()))],
            updated_pod: Some(unscheduled(with_claim("pvc1", a_pod()))),
            want: vec![list(NS), update(deleted(a_pvc()))],
            ..Case::default()
        },
        Case {
            name: "deleted running Pod -> finalizer is removed",
            initial_claims: vec![deleted(protected(a_pvc()))],
            deleted_pod: Some(with_claim("pvc1", a_pod()).phase("Running")),
            want: vec![list(NS), update(deleted(a_pvc()))],
            ..Case::default()
        },
        Case {
            name: "pod delete and create with same namespaced name seen as an update, old pod used deleted PVC -> finalizer is removed",
            initial_claims: vec![deleted(protected(a_pvc()))],
            deleted_pod: Some(with_claim("pvc1", a_pod())),
            updated_pod: Some(a_pod().uid("uid2")),
            want: vec![list(NS), update(deleted(a_pvc()))],
            ..Case::default()
        },
        Case {
            name: "pod delete and create with same namespaced name seen as an update, old pod used non-deleted PVC -> finalizer is not removed",
            initial_claims: vec![protected(a_pvc())],
            deleted_pod: Some(with_claim("pvc1", a_pod())),
            updated_pod: Some(a_pod().uid("uid2")),
            ..Case::default()
        },
        Case {
            name: "pod delete and create with same namespaced name seen as an update, both pods reference deleted PVC -> finalizer is not removed",
            initial_claims: vec![deleted(protected(a_pvc()))],
            deleted_pod: Some(with_claim("pvc1", a_pod())),
            updated_pod: Some(with_claim("pvc1", a_pod().uid("uid2"))),
            ..Case::default()
        },
        Case {
            name: "pod update from unscheduled to scheduled, deleted PVC is referenced -> finalizer is not removed",
            initial_claims: vec![deleted(protected(a_pvc()))],
            deleted_pod: Some(unscheduled(with_claim("pvc1", a_pod()))),
            updated_pod: Some(with_claim("pvc1", a_pod())),
            ..Case::default()
        },
    ];
    for case in cases {
        run(case).await;
    }
}

/// `default/pod1` with the generic ephemeral volume `scratch`, whose claim is `pod1-scratch`.
fn ephemeral_pod() -> PodBuilder {
    a_pod().ephemeral_volume("scratch", pvc("").storage("1Gi"))
}

/// The deleted, protected claim of [`ephemeral_pod`]'s volume, controlled by the pod.
fn ephemeral_claim() -> PvcBuilder {
    deleted(protected(
        pvc_in("pod1-scratch", NS).owner(controller_ref_of(&ephemeral_pod().build())),
    ))
}

#[tokio::test(start_paused = true)]
async fn generic_ephemeral_volumes() {
    let removed = || {
        pvc_in("pod1-scratch", NS)
            .owner(controller_ref_of(&ephemeral_pod().build()))
            .deleted_at(deleted_at())
    };
    let cases = [
        Case {
            name: "deleted ephemeral PVC + its scheduled pod -> finalizer is not removed",
            initial_pods: vec![ephemeral_pod()],
            updated_claims: vec![ephemeral_claim()],
            ..Case::default()
        },
        Case {
            name: "deleted ephemeral PVC + its pod shut down (grace period 0) -> finalizer is removed",
            initial_pods: vec![
                ephemeral_pod()
                    .deleted_at(deleted_at())
                    .deletion_grace_period(0),
            ],
            updated_claims: vec![ephemeral_claim()],
            want: vec![list(NS), update(removed())],
            ..Case::default()
        },
        Case {
            name: "deleted ephemeral PVC + its pod terminating with a grace period -> finalizer is not removed",
            initial_pods: vec![
                ephemeral_pod()
                    .deleted_at(deleted_at())
                    .deletion_grace_period(30),
            ],
            updated_claims: vec![ephemeral_claim()],
            ..Case::default()
        },
        Case {
            name: "deleted PVC named as a pod's ephemeral volume but not the pod's -> finalizer is removed",
            initial_pods: vec![ephemeral_pod()],
            updated_claims: vec![deleted(protected(pvc_in("pod1-scratch", NS)))],
            want: vec![list(NS), update(deleted(pvc_in("pod1-scratch", NS)))],
            ..Case::default()
        },
        Case {
            name: "deleted ephemeral PVC + its pod not in the Informer's cache yet -> finalizer is not removed",
            initial_pods: vec![ephemeral_pod()],
            informers_are_late: true,
            updated_claims: vec![ephemeral_claim()],
            want: vec![list(NS)],
            ..Case::default()
        },
        Case {
            name: "deleted ephemeral pod -> its PVC's finalizer is removed",
            initial_claims: vec![ephemeral_claim()],
            deleted_pod: Some(ephemeral_pod()),
            want: vec![list(NS), update(removed())],
            ..Case::default()
        },
    ];
    for case in cases {
        run(case).await;
    }
}

/// The claims of one namespace taken together share one live list, as upstream's lazy list:
/// the main worker batches every queued key before the namespace worker runs.
#[tokio::test]
async fn one_live_list_per_namespace_batch() {
    let claims = Indexer::new();
    let client = Arc::new(FakeStorageClient::new());
    let controller = PvcProtectionController::with_caches(
        claims.clone(),
        Indexer::new(),
        client.clone(),
        PvcProtectionControllerOptions::default(),
    );
    let batch = [
        deleted(protected(a_pvc())),
        deleted(protected(pvc_in("pvc2", NS))),
        deleted(protected(pvc_in("pvc3", "other"))),
    ];
    for c in &batch {
        claims.add(c.clone().arc()).expect("add");
        controller
            .event_handlers()
            .claim_added_updated(&c.clone().build());
    }
    while !controller.queue().is_empty() {
        controller.process_next_work_item().await;
    }
    assert_eq!(controller.batches().len(), 2);
    while !controller.batches().is_empty() {
        controller.process_claims_by_namespace().await;
    }
    assert_eq!(
        client.actions(),
        vec![
            list(NS),
            update(deleted(a_pvc())),
            update(deleted(pvc_in("pvc2", NS))),
            list("other"),
            update(deleted(pvc_in("pvc3", "other"))),
        ]
    );
    assert!(
        controller.queue().is_empty(),
        "every key done and forgotten"
    );
}

#[test]
fn pods_use_claims_as_upstream() {
    let claim = a_pvc().build();
    assert!(pod_uses_claim(&with_claim("pvc1", a_pod()).build(), &claim));
    assert!(pod_uses_claim(
        &with_claim("pvc1", a_pod()).phase("Succeeded").build(),
        &claim
    ));
    assert!(!pod_uses_claim(
        &unscheduled(with_claim("pvc1", a_pod())).build(),
        &claim
    ));
    assert!(!pod_uses_claim(
        &with_claim("other", a_pod()).build(),
        &claim
    ));
    let shut_down = a_pod()
        .deleted_at(deleted_at())
        .deletion_grace_period(0)
        .build();
    assert!(pod_is_shut_down(&shut_down));
    assert!(!pod_is_shut_down(&a_pod().deleted_at(deleted_at()).build()));
    assert!(!pod_is_shut_down(&a_pod().deletion_grace_period(0).build()));
}
