//! Unit tests of the ephemeral volume controller: bare caches, the recording fake client and a fake event recorder, the cases of upstream's `controller_test.go` (`TestSyncHandler`).

use std::collections::BTreeMap;

use kcm_machinery::controller::api_status;
use kcm_machinery::events::FakeRecorder;
use kcm_testing::{MetaBuilder, PodBuilder, PodSpecBuilder, controller_ref_of, pod, pvc};

use super::*;
use crate::volume::client::{Action, FakeStorageClient, Verb};

const NAMESPACE: &str = "my-namespace";
const VOLUME: &str = "ephemeral-volume";
const CLAIM: &str = "test-pod-ephemeral-volume";

fn deleted_at() -> jiff::Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

/// Upstream's `testPod`: `my-namespace/test-pod`, UID `uidpod1`.
fn test_pod() -> PodBuilder {
    pod("test-pod").namespace(NAMESPACE).uid("uidpod1")
}

/// Upstream's `testPodWithEphemeral`: one ephemeral volume with an empty template.
fn test_pod_with_ephemeral() -> Pod {
    test_pod().ephemeral_volume(VOLUME, pvc("")).build()
}

/// The claim the controller makes for [`test_pod_with_ephemeral`].
fn ephemeral_claim() -> PersistentVolumeClaim {
    pvc(CLAIM)
        .namespace(NAMESPACE)
        .owner(controller_ref_of(&test_pod_with_ephemeral()))
        .with(|c| c.spec = Some(Default::default()))
        .build()
}

struct Fixture {
    controller: EphemeralController,
    pods: Indexer<Pod>,
    claims: Indexer<PersistentVolumeClaim>,
    client: Arc<FakeStorageClient>,
    recorder: Arc<FakeRecorder>,
    metrics: Arc<EphemeralVolumeMetrics>,
}

impl Fixture {
    fn new() -> Self {
        let pods = Indexer::new();
        let claims = Indexer::new();
        let client = Arc::new(FakeStorageClient::new());
        let recorder = Arc::new(FakeRecorder::new());
        let metrics = Arc::new(EphemeralVolumeMetrics::new());
        let controller = EphemeralController::with_caches(
            pods.clone(),
            claims.clone(),
            client.clone(),
            recorder.clone(),
            EphemeralControllerOptions {
                metrics: None,
                controller_metrics: Some(metrics.clone()),
            },
        );
        Self {
            controller,
            pods,
            claims,
            client,
            recorder,
            metrics,
        }
    }

    fn add_pod(&self, pod: Pod) {
        self.pods.add(Arc::new(pod)).expect("add pod");
    }

    /// Puts `claim` in the cache and on the server.
    fn add_claim(&self, claim: PersistentVolumeClaim) {
        self.claims.add(Arc::new(claim.clone())).expect("add claim");
        self.client.insert_claim(claim);
    }

    fn server_claims(&self) -> Vec<PersistentVolumeClaim> {
        self.client.claims().into_values().collect()
    }
}

/// Upstream `TestSyncHandler`.
#[tokio::test]
async fn sync_handler_as_upstream() {
    struct Case {
        name: &'static str,
        pods: Vec<Pod>,
        claims: Vec<PersistentVolumeClaim>,
        /// Creations fail with a conflict.
        create_fails: bool,
        want_claims: Vec<PersistentVolumeClaim>,
        want_error: bool,
        /// `(attempts, failures)`.
        want_metrics: (u64, u64),
    }
    let other_namespace_claim = pvc(CLAIM).namespace("not-my-namespace").build();
    let conflicting_claim = pvc(CLAIM).namespace(NAMESPACE).build();
    let cases = [
        Case {
            name: "create",
            pods: vec![test_pod_with_ephemeral()],
            claims: vec![],
            create_fails: false,
            want_claims: vec![ephemeral_claim()],
            want_error: false,
            want_metrics: (1, 0),
        },
        Case {
            name: "no-such-pod",
            pods: vec![],
            claims: vec![],
            create_fails: false,
            want_claims: vec![],
            want_error: false,
            want_metrics: (0, 0),
        },
        Case {
            name: "pod-deleted",
            pods: vec![
                test_pod()
                    .ephemeral_volume(VOLUME, pvc(""))
                    .deleted_at(deleted_at())
                    .build(),
            ],
            claims: vec![],
            create_fails: false,
            want_claims: vec![],
            want_error: false,
            want_metrics: (0, 0),
        },
        Case {
            name: "no-volumes",
            pods: vec![test_pod().build()],
            claims: vec![],
            create_fails: false,
            want_claims: vec![],
            want_error: false,
            want_metrics: (0, 0),
        },
        Case {
            name: "create-with-other-PVC",
            pods: vec![test_pod_with_ephemeral()],
            claims: vec![other_namespace_claim.clone()],
            create_fails: false,
            want_claims: vec![ephemeral_claim(), other_namespace_claim],
            want_error: false,
            want_metrics: (1, 0),
        },
        Case {
            name: "wrong-PVC-owner",
            pods: vec![test_pod_with_ephemeral()],
            claims: vec![conflicting_claim.clone()],
            create_fails: false,
            want_claims: vec![conflicting_claim],
            want_error: true,
            want_metrics: (0, 0),
        },
        Case {
            name: "create-conflict",
            pods: vec![test_pod_with_ephemeral()],
            claims: vec![],
            create_fails: true,
            want_claims: vec![],
            want_error: true,
            want_metrics: (1, 1),
        },
    ];
    for case in cases {
        let f = Fixture::new();
        for p in case.pods {
            f.add_pod(p);
        }
        for c in case.claims {
            f.add_claim(c);
        }
        if case.create_fails {
            f.client.fail(
                Verb::CreateClaim,
                usize::MAX,
                api_status::conflict("persistentvolumeclaims", "fake name", "fake conflict"),
            );
        }
        let got = f.controller.sync(&format!("{NAMESPACE}/test-pod")).await;
        assert_eq!(got.is_err(), case.want_error, "{}: {got:?}", case.name);
        let sorted = |mut claims: Vec<PersistentVolumeClaim>| {
            claims.sort_by_key(|c| (c.metadata.namespace.clone(), c.metadata.name.clone()));
            claims
        };
        assert_eq!(
            sorted(f.server_claims()),
            sorted(case.want_claims),
            "{}",
            case.name
        );
        assert_eq!(f.metrics.counts(), case.want_metrics, "{}", case.name);
    }
}

/// The claim copies the template's labels, annotations and spec, and is controlled by the pod
/// with `blockOwnerDeletion`, so the garbage collector deletes it with the pod (foreground
/// deletion waits for it).
#[tokio::test]
async fn the_claim_is_made_from_the_template_and_owned_by_the_pod() {
    let f = Fixture::new();
    let p = test_pod()
        .ephemeral_volume(
            "scratch",
            pvc("ignored")
                .namespace("ignored")
                .label("app", "web")
                .annotation("note", "from-template")
                .storage("1Gi")
                .storage_class("fast"),
        )
        .claim_volume("data", "shared")
        .build();
    f.add_pod(p.clone());
    f.controller
        .sync(&format!("{NAMESPACE}/test-pod"))
        .await
        .expect("sync");
    let actions = f.client.actions();
    assert_eq!(actions.len(), 1, "{actions:?}");
    let Action::CreateClaim(claim) = &actions[0] else {
        panic!("not a create: {actions:?}");
    };
    assert_eq!(claim.metadata.name.as_deref(), Some("test-pod-scratch"));
    assert_eq!(claim.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(
        claim.metadata.labels,
        Some(BTreeMap::from([("app".to_owned(), "web".to_owned())]))
    );
    assert_eq!(
        claim.metadata.annotations,
        Some(BTreeMap::from([(
            "note".to_owned(),
            "from-template".to_owned()
        )]))
    );
    let owner = &claim.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str()
        ),
        ("v1", "Pod", "test-pod", "uidpod1")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    let spec = claim.spec.clone().unwrap_or_default();
    assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
    assert_eq!(
        spec.access_modes,
        Some(vec!["ReadWriteOnce".to_owned()]),
        "the template's spec, unchanged"
    );
}

/// A claim the pod already controls is left alone; nothing is created.
#[tokio::test]
async fn an_existing_claim_of_the_pod_is_kept() {
    let f = Fixture::new();
    f.add_pod(test_pod_with_ephemeral());
    f.add_claim(ephemeral_claim());
    f.controller
        .sync(&format!("{NAMESPACE}/test-pod"))
        .await
        .expect("sync");
    assert!(f.client.actions().is_empty());
    assert!(f.recorder.events().is_empty());
}

/// A claim of the volume's name that the pod does not control: a `FailedBinding` warning on
/// the pod with upstream's message, and an error so the pod is retried.
#[tokio::test]
async fn a_foreign_claim_of_the_same_name_is_reported_on_the_pod() {
    let f = Fixture::new();
    f.add_pod(test_pod_with_ephemeral());
    f.add_claim(pvc(CLAIM).namespace(NAMESPACE).build());
    let err = f
        .controller
        .sync(&format!("{NAMESPACE}/test-pod"))
        .await
        .expect_err("not the pod's claim");
    assert_eq!(
        err.to_string(),
        "pod my-namespace/test-pod, ephemeral volume ephemeral-volume: PVC \
         my-namespace/test-pod-ephemeral-volume was not created for pod my-namespace/test-pod \
         (pod is not owner)"
    );
    let events = f.recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, FAILED_BINDING);
    assert_eq!(events[0].type_, EventType::Warning);
    assert_eq!(events[0].regarding.name.as_deref(), Some("test-pod"));
    assert_eq!(
        events[0].message,
        "ephemeral volume ephemeral-volume: PVC my-namespace/test-pod-ephemeral-volume was not \
         created for pod my-namespace/test-pod (pod is not owner)"
    );
}

/// A failed creation is a `FailedBinding` warning naming the claim and the server's message.
#[tokio::test]
async fn a_failed_creation_is_reported_on_the_pod() {
    let f = Fixture::new();
    f.add_pod(test_pod_with_ephemeral());
    f.client.fail(
        Verb::CreateClaim,
        1,
        api_status::internal_error("etcd is down"),
    );
    f.controller
        .sync(&format!("{NAMESPACE}/test-pod"))
        .await
        .expect_err("create failed");
    let events = f.recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].message,
        "ephemeral volume ephemeral-volume: create PVC test-pod-ephemeral-volume: Internal \
         error occurred: etcd is down"
    );
}

/// New pods are enqueued only with an ephemeral volume and when not being deleted; a deleted
/// claim enqueues the pod whose ephemeral volume it was, so it is made again.
#[tokio::test]
async fn pods_and_deleted_claims_enqueue_the_pods_that_need_a_claim() {
    let f = Fixture::new();
    let handlers = f.controller.event_handlers();
    handlers.enqueue_pod(&test_pod().claim_volume("data", "shared").build());
    handlers.enqueue_pod(
        &test_pod()
            .ephemeral_volume(VOLUME, pvc(""))
            .deleted_at(deleted_at())
            .build(),
    );
    assert_eq!(f.controller.queue().len(), 0);

    f.add_pod(test_pod_with_ephemeral());
    handlers.claim_deleted(&pvc("unrelated").namespace(NAMESPACE).build());
    assert_eq!(f.controller.queue().len(), 0);
    handlers.claim_deleted(&ephemeral_claim());
    assert_eq!(f.controller.queue().len(), 1);
    assert!(f.controller.process_next_work_item().await);
    assert_eq!(f.server_claims(), vec![ephemeral_claim()]);
}
