//! Unit tests of the ResourceClaim controller: bare caches, the recording fake client and a fake event recorder, the pod cases of upstream's `controller_test.go` (`TestSyncHandler`).

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClaim, DeviceRequest, ExactDeviceRequest, ResourceClaimSpec,
    ResourceClaimTemplateSpec,
};
use kcm_machinery::controller::api_status;
use kcm_machinery::events::FakeRecorder;
use kcm_testing::{MetaBuilder, pod};

use super::*;
use crate::resourceclaim::claims::{POD_CLAIM_NAME_ANNOTATION, generate_name};
use crate::resourceclaim::client::{FakeResourceClaimClient, Verb};
use crate::resourceclaim::metrics::count_claims;

const NAMESPACE: &str = "my-namespace";
const POD_CLAIM: &str = "acme-resource";
const TEMPLATE: &str = "my-template";
const NODE: &str = "worker";
/// The name the fake gives the first claim generated for `test-pod`'s entry.
const GENERATED: &str = "test-pod-acme-resource-00000";

fn deleted_at() -> jiff::Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

/// Upstream's `testPod`: `my-namespace/test-pod`, UID `uidpod1`, no claims.
fn test_pod() -> Pod {
    pod("test-pod").namespace(NAMESPACE).uid("uidpod1").build()
}

/// Upstream's `testPodWithResource`: one entry `acme-resource` from template `my-template`.
fn test_pod_with_resource() -> Pod {
    pod("test-pod")
        .namespace(NAMESPACE)
        .uid("uidpod1")
        .with(|p| {
            p.spec.get_or_insert_with(Default::default).resource_claims =
                Some(vec![PodResourceClaim {
                    name: POD_CLAIM.to_owned(),
                    resource_claim_template_name: Some(TEMPLATE.to_owned()),
                    ..PodResourceClaim::default()
                }]);
        })
        .build()
}

/// Upstream's `otherTestPod`.
fn other_test_pod() -> Pod {
    pod("test-pod-II")
        .namespace(NAMESPACE)
        .uid("uidpod1-II")
        .build()
}

fn with_claim_status(mut pod: Pod, claim: &str) -> Pod {
    pod.status
        .get_or_insert_with(Default::default)
        .resource_claim_statuses = Some(vec![PodResourceClaimStatus {
        name: POD_CLAIM.to_owned(),
        resource_claim_name: Some(claim.to_owned()),
    }]);
    pod
}

fn with_phase(mut pod: Pod, phase: &str) -> Pod {
    pod.status.get_or_insert_with(Default::default).phase = Some(phase.to_owned());
    pod
}

/// Upstream's `testPodWithNodeName`: scheduled, its claim recorded in its status.
fn test_pod_with_node_name() -> Pod {
    let mut pod = with_claim_status(test_pod_with_resource(), GENERATED);
    pod.spec.get_or_insert_with(Default::default).node_name = Some(NODE.to_owned());
    pod
}

fn owner_of(pod: &Pod) -> OwnerReference {
    kcm_testing::controller_ref_of(pod)
}

/// Upstream's `makeClaim`.
fn make_claim(name: &str, namespace: &str, owner: Option<OwnerReference>) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec::default(),
        status: None,
    }
}

/// Upstream's `testClaim`: `test-pod-acme-resource`, controlled by the pod.
fn test_claim() -> ResourceClaim {
    make_claim(
        "test-pod-acme-resource",
        NAMESPACE,
        Some(owner_of(&test_pod_with_resource())),
    )
}

fn admin_spec() -> ResourceClaimSpec {
    ResourceClaimSpec {
        devices: Some(DeviceClaim {
            requests: Some(vec![DeviceRequest {
                name: "req-0".to_owned(),
                exactly: Some(ExactDeviceRequest {
                    device_class_name: "class".to_owned(),
                    admin_access: Some(true),
                    ..ExactDeviceRequest::default()
                }),
                ..DeviceRequest::default()
            }]),
            ..DeviceClaim::default()
        }),
    }
}

/// Upstream's `makeTemplatedClaim`: what the controller creates for the pod's entry.
fn templated_claim(spec: ResourceClaimSpec) -> ResourceClaim {
    let pod = test_pod_with_resource();
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(GENERATED.to_owned()),
            generate_name: Some("test-pod-acme-resource-".to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            annotations: Some(BTreeMap::from([(
                POD_CLAIM_NAME_ANNOTATION.to_owned(),
                POD_CLAIM.to_owned(),
            )])),
            owner_references: Some(vec![owner_of(&pod)]),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

fn allocate(mut claim: ResourceClaim) -> ResourceClaim {
    claim.status.get_or_insert_with(Default::default).allocation =
        Some(AllocationResult::default());
    claim
}

fn deallocate(mut claim: ResourceClaim) -> ResourceClaim {
    claim.status.get_or_insert_with(Default::default).allocation = None;
    claim
}

fn reserve(mut claim: ResourceClaim, pod: &Pod) -> ResourceClaim {
    claim
        .status
        .get_or_insert_with(Default::default)
        .reserved_for
        .get_or_insert_with(Vec::new)
        .push(ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".to_owned(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        });
    claim
}

/// Upstream's `structuredParameters`: allocated by the scheduler (its finalizer).
fn structured(mut claim: ResourceClaim) -> ResourceClaim {
    claim.metadata.finalizers = Some(vec![DELETE_PROTECTION_FINALIZER.to_owned()]);
    claim
}

fn without_finalizer(mut claim: ResourceClaim) -> ResourceClaim {
    claim.metadata.finalizers = Some(Vec::new());
    claim
}

fn deleting(mut claim: ResourceClaim) -> ResourceClaim {
    claim.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        deleted_at(),
    ));
    claim
}

fn template(spec: ResourceClaimSpec) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        metadata: ObjectMeta {
            name: Some(TEMPLATE.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimTemplateSpec {
            metadata: None,
            spec,
        },
    }
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "pod:{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn claim_key(claim: &ResourceClaim) -> String {
    format!(
        "claim:{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

struct Fixture {
    controller: ResourceClaimController,
    pods: Indexer<Pod>,
    claims: Indexer<ResourceClaim>,
    templates: Indexer<ResourceClaimTemplate>,
    client: Arc<FakeResourceClaimClient>,
    recorder: Arc<FakeRecorder>,
    metrics: Arc<ResourceClaimMetrics>,
}

impl Fixture {
    fn new(features: Features) -> Self {
        let pods = Indexer::new();
        let claims = Indexer::new();
        let templates = Indexer::new();
        let client = Arc::new(FakeResourceClaimClient::new());
        let recorder = Arc::new(FakeRecorder::new());
        let metrics = Arc::new(ResourceClaimMetrics::new());
        let controller = ResourceClaimController::with_caches(
            pods.clone(),
            claims.clone(),
            templates.clone(),
            client.clone(),
            recorder.clone(),
            ResourceClaimControllerOptions {
                metrics: None,
                controller_metrics: Some(metrics.clone()),
                features,
            },
        );
        Self {
            controller,
            pods,
            claims,
            templates,
            client,
            recorder,
            metrics,
        }
    }

    /// Puts `pod` in the cache and on the server.
    fn add_pod(&self, pod: Pod) {
        self.pods.add(Arc::new(pod.clone())).expect("add pod");
        self.client.add_pod(pod);
    }

    /// Puts `claim` in the cache and on the server.
    fn add_claim(&self, claim: ResourceClaim) {
        self.claims.add(Arc::new(claim.clone())).expect("add claim");
        self.client.add_claim(claim);
    }

    fn add_template(&self, template: ResourceClaimTemplate) {
        self.templates
            .add(Arc::new(template))
            .expect("add template");
    }

    /// `(success, success with admin access, failure, failure with admin access)`.
    fn create_metrics(&self) -> (u64, u64, u64, u64) {
        (
            self.metrics.creates(true, false),
            self.metrics.creates(true, true),
            self.metrics.creates(false, false),
            self.metrics.creates(false, true),
        )
    }
}

/// One row of upstream's `TestSyncHandler` (the pod rows; PodGroups are not served).
#[derive(Default)]
struct Case {
    name: &'static str,
    key: String,
    admin_access: bool,
    /// Pods in the cache and on the server.
    pods: Vec<Pod>,
    /// Pods only on the server (upstream's `podsLater`: the informer has not seen them yet).
    pods_later: Vec<Pod>,
    /// Claims in the cache and on the server.
    claims: Vec<ResourceClaim>,
    /// Claims only in the controller's created-claim cache.
    claims_in_cache: Vec<ResourceClaim>,
    templates: Vec<ResourceClaimTemplate>,
    /// Creations fail with a conflict.
    create_conflict: bool,
    want_claims: Vec<ResourceClaim>,
    /// The `resourceClaimStatuses` applied to the pod, if any.
    want_statuses: Option<Vec<(&'static str, &'static str)>>,
    want_error: Option<&'static str>,
    want_metrics: (u64, u64, u64, u64),
}

fn sorted(mut claims: Vec<ResourceClaim>) -> Vec<ResourceClaim> {
    claims.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    claims
}

/// Upstream's `TestSyncHandler`, pod and claim keys.
#[tokio::test]
async fn sync_handler_as_upstream() {
    let pod_with_resource = test_pod_with_resource();
    let claim = test_claim();
    let claim_allocated = allocate(claim.clone());
    let claim_reserved = reserve(claim_allocated.clone(), &pod_with_resource);
    let claim_reserved_twice = reserve(claim_reserved.clone(), &other_test_pod());
    let templated = templated_claim(ResourceClaimSpec::default());
    let conflicting = make_claim("test-pod-acme-resource", NAMESPACE, None);
    let other_namespace = make_claim("test-pod-acme-resource", "not-my-namespace", None);
    let generated_status = Some(vec![(POD_CLAIM, GENERATED)]);

    let cases = vec![
        Case {
            name: "create",
            key: pod_key(&pod_with_resource),
            pods: vec![pod_with_resource.clone()],
            templates: vec![template(ResourceClaimSpec::default())],
            want_claims: vec![templated.clone()],
            want_statuses: generated_status.clone(),
            want_metrics: (1, 0, 0, 0),
            ..Case::default()
        },
        Case {
            name: "create with admin and feature gate off",
            key: pod_key(&pod_with_resource),
            pods: vec![pod_with_resource.clone()],
            templates: vec![template(admin_spec())],
            want_error: Some("admin access is requested, but the feature is disabled"),
            ..Case::default()
        },
        Case {
            name: "create with admin and feature gate on",
            key: pod_key(&pod_with_resource),
            admin_access: true,
            pods: vec![pod_with_resource.clone()],
            templates: vec![template(admin_spec())],
            want_claims: vec![templated_claim(admin_spec())],
            want_statuses: generated_status.clone(),
            want_metrics: (0, 1, 0, 0),
            ..Case::default()
        },
        Case {
            name: "nop",
            key: pod_key(&pod_with_resource),
            pods: vec![with_claim_status(pod_with_resource.clone(), GENERATED)],
            templates: vec![template(ResourceClaimSpec::default())],
            claims: vec![templated.clone()],
            want_claims: vec![templated.clone()],
            ..Case::default()
        },
        Case {
            name: "recreate",
            key: pod_key(&pod_with_resource),
            pods: vec![with_claim_status(pod_with_resource.clone(), GENERATED)],
            templates: vec![template(ResourceClaimSpec::default())],
            want_claims: vec![templated.clone()],
            want_statuses: generated_status.clone(),
            want_metrics: (1, 0, 0, 0),
            ..Case::default()
        },
        Case {
            name: "missing-template",
            key: pod_key(&pod_with_resource),
            pods: vec![pod_with_resource.clone()],
            want_error: Some(
                "resource claim template \"my-template\": resourceclaimtemplate.resource.k8s.io \"my-template\" not found",
            ),
            ..Case::default()
        },
        Case {
            name: "find-existing-claim-by-label",
            key: pod_key(&pod_with_resource),
            pods: vec![pod_with_resource.clone()],
            claims: vec![templated.clone()],
            want_claims: vec![templated.clone()],
            want_statuses: generated_status.clone(),
            ..Case::default()
        },
        Case {
            name: "find-created-claim-in-cache",
            key: pod_key(&pod_with_resource),
            pods: vec![pod_with_resource.clone()],
            claims_in_cache: vec![templated.clone()],
            want_statuses: generated_status.clone(),
            ..Case::default()
        },
        Case {
            name: "no-such-pod",
            key: pod_key(&pod_with_resource),
            ..Case::default()
        },
        Case {
            name: "pod-deleted",
            key: pod_key(&pod_with_resource),
            pods: vec![{
                let mut pod = pod_with_resource.clone();
                pod.metadata.deletion_timestamp = Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(deleted_at()),
                );
                pod
            }],
            ..Case::default()
        },
        Case {
            name: "no-volumes",
            key: pod_key(&test_pod()),
            pods: vec![test_pod()],
            ..Case::default()
        },
        Case {
            name: "create-with-other-claim",
            key: pod_key(&pod_with_resource),
            pods: vec![pod_with_resource.clone()],
            templates: vec![template(ResourceClaimSpec::default())],
            claims: vec![other_namespace.clone()],
            want_claims: vec![templated.clone(), other_namespace.clone()],
            want_statuses: generated_status.clone(),
            want_metrics: (1, 0, 0, 0),
            ..Case::default()
        },
        Case {
            name: "wrong-claim-owner",
            key: pod_key(&pod_with_resource),
            pods: vec![pod_with_resource.clone()],
            claims: vec![conflicting.clone()],
            want_claims: vec![conflicting.clone()],
            want_error: Some(
                "resource claim template \"my-template\": resourceclaimtemplate.resource.k8s.io \"my-template\" not found",
            ),
            ..Case::default()
        },
        Case {
            name: "create-conflict",
            key: pod_key(&pod_with_resource),
            pods: vec![pod_with_resource.clone()],
            templates: vec![template(ResourceClaimSpec::default())],
            create_conflict: true,
            want_error: Some(
                "create ResourceClaim : Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"fake name\": fake conflict",
            ),
            want_metrics: (0, 0, 1, 0),
            ..Case::default()
        },
        Case {
            name: "stay-reserved-seen",
            key: claim_key(&claim_reserved),
            pods: vec![pod_with_resource.clone()],
            claims: vec![claim_reserved.clone()],
            want_claims: vec![claim_reserved.clone()],
            ..Case::default()
        },
        Case {
            name: "stay-reserved-not-seen",
            key: claim_key(&claim_reserved),
            pods_later: vec![pod_with_resource.clone()],
            claims: vec![claim_reserved.clone()],
            want_claims: vec![claim_reserved.clone()],
            ..Case::default()
        },
        Case {
            name: "clear-reserved-structured",
            key: claim_key(&claim_reserved),
            claims: vec![structured(claim_reserved.clone())],
            want_claims: vec![without_finalizer(deallocate(claim_allocated.clone()))],
            ..Case::default()
        },
        Case {
            name: "dont-clear-reserved-structured",
            key: claim_key(&claim_reserved),
            pods: vec![pod_with_resource.clone()],
            claims: vec![reserve(
                structured(claim_reserved.clone()),
                &other_test_pod(),
            )],
            want_claims: vec![structured(claim_reserved.clone())],
            ..Case::default()
        },
        Case {
            name: "clear-reserved-structured-deleted",
            key: claim_key(&claim_reserved),
            claims: vec![deleting(structured(claim_reserved.clone()))],
            want_claims: vec![without_finalizer(deallocate(deleting(
                claim_allocated.clone(),
            )))],
            ..Case::default()
        },
        Case {
            name: "structured-deleted",
            key: claim_key(&claim_reserved),
            claims: vec![deleting(structured(claim_allocated.clone()))],
            want_claims: vec![without_finalizer(deallocate(deleting(
                claim_allocated.clone(),
            )))],
            ..Case::default()
        },
        Case {
            name: "clear-reserved-when-done",
            key: claim_key(&claim_reserved),
            pods: vec![with_phase(pod_with_resource.clone(), "Succeeded")],
            claims: vec![{
                let mut claim = claim_reserved.clone();
                claim.metadata.owner_references = None;
                claim
            }],
            want_claims: vec![{
                let mut claim = claim_allocated.clone();
                claim.metadata.owner_references = None;
                claim
            }],
            ..Case::default()
        },
        Case {
            name: "remove-reserved",
            key: claim_key(&claim_reserved_twice),
            pods: vec![test_pod()],
            claims: vec![claim_reserved_twice.clone()],
            want_claims: vec![claim_reserved.clone()],
            ..Case::default()
        },
        Case {
            name: "delete-claim-when-done",
            key: claim_key(&claim_reserved),
            pods: vec![with_phase(pod_with_resource.clone(), "Succeeded")],
            claims: vec![claim_reserved.clone()],
            ..Case::default()
        },
        Case {
            name: "add-reserved",
            key: pod_key(&test_pod_with_node_name()),
            pods: vec![test_pod_with_node_name()],
            templates: vec![template(ResourceClaimSpec::default())],
            claims: vec![allocate(templated.clone())],
            want_claims: vec![reserve(allocate(templated.clone()), &pod_with_resource)],
            ..Case::default()
        },
        Case {
            name: "clean up pod reservation with non-pod reservation present",
            key: claim_key(&claim_reserved),
            pods: vec![with_phase(pod_with_resource.clone(), "Succeeded")],
            claims: vec![{
                let mut claim = claim_reserved.clone();
                claim.metadata.owner_references = None;
                non_pod_reservation(claim)
            }],
            want_claims: vec![{
                let mut claim = claim_allocated.clone();
                claim.metadata.owner_references = None;
                non_pod_reservation(claim)
            }],
            ..Case::default()
        },
    ];

    for case in cases {
        let f = Fixture::new(Features {
            admin_access: case.admin_access,
            prioritized_list: true,
        });
        for pod in case.pods {
            f.add_pod(pod);
        }
        for pod in case.pods_later {
            f.client.add_pod(pod);
        }
        for claim in case.claims {
            f.add_claim(claim);
        }
        for claim in case.claims_in_cache {
            f.controller.remember_created(claim);
        }
        for template in case.templates {
            f.add_template(template);
        }
        if case.create_conflict {
            f.client.set_error(
                Verb::Create,
                Some(api_status::conflict(
                    "resourceclaims.resource.k8s.io",
                    "fake name",
                    "fake conflict",
                )),
            );
        }

        let result = f.controller.sync(&case.key).await;
        match (case.want_error, result) {
            (None, Ok(())) => {}
            (None, Err(err)) => panic!("{}: unexpected error {err}", case.name),
            (Some(want), Ok(())) => panic!("{}: expected error {want:?}", case.name),
            (Some(want), Err(err)) => {
                assert!(err.to_string().contains(want), "{}: {err}", case.name);
                // A failed pod entry is also a warning on the pod.
                if case.key.starts_with("pod:") {
                    let events = f.recorder.events();
                    assert_eq!(events.len(), 1, "{}", case.name);
                    assert_eq!(events[0].reason, FAILED_RESOURCE_CLAIM_CREATION);
                    assert_eq!(
                        events[0].message,
                        format!("PodResourceClaim {POD_CLAIM}: {want}"),
                        "{}",
                        case.name
                    );
                }
            }
        }
        assert_eq!(
            sorted(f.client.claims()),
            sorted(case.want_claims),
            "{}: claims",
            case.name
        );
        let want_statuses: BTreeMap<String, Vec<PodResourceClaimStatus>> = case
            .want_statuses
            .map(|statuses| {
                let statuses = statuses
                    .into_iter()
                    .map(|(name, claim)| PodResourceClaimStatus {
                        name: name.to_owned(),
                        resource_claim_name: Some(claim.to_owned()),
                    })
                    .collect();
                (format!("{NAMESPACE}/test-pod"), statuses)
            })
            .into_iter()
            .collect();
        assert_eq!(
            f.client.pod_statuses(),
            want_statuses,
            "{}: statuses",
            case.name
        );
        assert_eq!(
            f.create_metrics(),
            case.want_metrics,
            "{}: metrics",
            case.name
        );
    }
}

fn non_pod_reservation(mut claim: ResourceClaim) -> ResourceClaim {
    claim
        .status
        .get_or_insert_with(Default::default)
        .reserved_for
        .get_or_insert_with(Vec::new)
        .push(ResourceClaimConsumerReference {
            api_group: Some("foo.com".to_owned()),
            resource: "foo".to_owned(),
            name: "foo".to_owned(),
            uid: "123".to_owned(),
        });
    claim
}

/// A claim the informer delivers leaves the created-claim cache, and a later sync of a pod
/// whose status already names it does nothing.
#[tokio::test]
async fn the_informer_catching_up_empties_the_created_claim_cache() {
    let f = Fixture::new(Features::default());
    f.add_pod(test_pod_with_resource());
    f.add_template(template(ResourceClaimSpec::default()));
    f.controller
        .sync(&pod_key(&test_pod_with_resource()))
        .await
        .expect("sync");
    let created = f.client.claims();
    assert_eq!(created.len(), 1);
    assert_eq!(f.controller.shared().created.len(), 1);
    let claim = Arc::new(created[0].clone());
    f.claims.add(Arc::clone(&claim)).expect("add");
    f.controller.event_handlers().on_add(claim, false);
    assert!(f.controller.shared().created.is_empty());
}

/// A pod that failed the apply of its status reuses the claim it made on the retry.
#[tokio::test]
async fn a_retry_after_a_failed_status_apply_reuses_the_claim() {
    let f = Fixture::new(Features::default());
    f.add_pod(test_pod_with_resource());
    f.add_template(template(ResourceClaimSpec::default()));
    f.client.set_error(
        Verb::ApplyPodStatus,
        Some(api_status::conflict("pods", "test-pod", "try again")),
    );
    let key = pod_key(&test_pod_with_resource());
    let err = f.controller.sync(&key).await.expect_err("apply fails");
    assert!(
        err.to_string()
            .starts_with("update pod my-namespace/test-pod ResourceClaimStatuses:"),
        "{err}"
    );
    f.client.set_error(Verb::ApplyPodStatus, None);
    f.controller.sync(&key).await.expect("retry");
    assert_eq!(f.client.claims().len(), 1);
    assert_eq!(f.create_metrics(), (1, 0, 0, 0));
}

/// Upstream's truncation of long generated names: both parts cut in proportion.
#[test]
fn generated_names_fit_63_characters() {
    assert_eq!(generate_name("pod", "claim"), "pod-claim-");
    let pod_name = "a".repeat(50);
    let entry = "b".repeat(30);
    let name = generate_name(&pod_name, &entry);
    // 82 bytes cut to 57: 50*57/82 = 34 and 30*57/82 = 20.
    assert_eq!(name, format!("{}-{}", "a".repeat(34), "b".repeat(20)));
    assert!(name.len() + 5 <= 63);
}

/// Upstream's `enqueuePod`/`podNeedsWork`: a pod whose claim must be made is queued; a done
/// pod queues its claims instead; a pod without claims queues nothing.
#[tokio::test]
async fn pod_events_queue_what_needs_work() {
    let f = Fixture::new(Features::default());
    let handlers = f.controller.event_handlers();

    handlers.enqueue_pod(&test_pod(), false);
    assert_eq!(f.controller.queue().len(), 0, "no claims");

    handlers.enqueue_pod(&test_pod_with_resource(), false);
    assert_eq!(f.controller.queue().len(), 1, "claim to create");

    let f = Fixture::new(Features::default());
    let handlers = f.controller.event_handlers();
    let done = with_phase(
        with_claim_status(test_pod_with_resource(), GENERATED),
        "Failed",
    );
    f.add_claim(templated_claim(ResourceClaimSpec::default()));
    handlers.enqueue_pod(&done, false);
    assert_eq!(f.controller.queue().len(), 1, "only the claim");
    let key = f.controller.queue().get().await.expect("key");
    assert_eq!(key, format!("claim:{NAMESPACE}/{GENERATED}"));

    // A deleted pod is remembered, so its reservations go without asking the server.
    let f = Fixture::new(Features::default());
    let pod = with_claim_status(test_pod_with_resource(), GENERATED);
    f.add_claim(reserve(
        allocate(templated_claim(ResourceClaimSpec::default())),
        &pod,
    ));
    f.controller.event_handlers().enqueue_pod(&pod, true);
    f.controller
        .sync(&format!("claim:{NAMESPACE}/{GENERATED}"))
        .await
        .expect("sync");
    assert!(
        !f.client.actions().iter().any(|a| a.verb == Verb::GetPod),
        "{:?}",
        f.client.actions()
    );
    assert!(
        f.client.claims()[0]
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .is_none()
    );
}

/// A scheduled pod with an allocated claim not reserved for it needs work; once reserved not.
#[tokio::test]
async fn a_scheduled_pod_needs_its_allocated_claim_reserved() {
    let f = Fixture::new(Features::default());
    let pod = test_pod_with_node_name();
    f.add_claim(allocate(templated_claim(ResourceClaimSpec::default())));
    assert!(f.controller.event_handlers().pod_needs_work(&pod));

    let f = Fixture::new(Features::default());
    f.add_claim(reserve(
        allocate(templated_claim(ResourceClaimSpec::default())),
        &pod,
    ));
    assert!(!f.controller.event_handlers().pod_needs_work(&pod));
}

/// A claim event queues the claim and the pods using it that need work.
#[tokio::test]
async fn claim_events_queue_the_claim_and_its_pods() {
    let f = Fixture::new(Features::default());
    let pod = test_pod_with_node_name();
    f.add_pod(pod);
    let claim = allocate(templated_claim(ResourceClaimSpec::default()));
    f.add_claim(claim.clone());
    f.controller.event_handlers().enqueue_claim(&claim, false);
    assert_eq!(f.controller.queue().len(), 2);
    f.controller.event_handlers().enqueue_claim(&claim, true);
    // The deleted claim itself is not queued again; the pod key is already queued.
    assert_eq!(f.controller.queue().len(), 2);
}

/// `resourceclaim_controller_resource_claims` counts by allocation, admin access and source.
#[test]
fn resource_claims_are_counted_by_labels() {
    let user = make_claim("user", NAMESPACE, None);
    let templated = templated_claim(admin_spec());
    let mut extended = make_claim("extended", NAMESPACE, None);
    extended.metadata.annotations = Some(BTreeMap::from([(
        "resource.kubernetes.io/extended-resource-claim".to_owned(),
        "true".to_owned(),
    )]));
    let claims = [allocate(user.clone()), user, templated, allocate(extended)];
    let counts = count_claims(claims.iter());
    let want = BTreeMap::from([
        ((false, false, ""), 1),
        ((true, false, ""), 1),
        ((false, true, "resource_claim_template"), 1),
        ((true, false, "extended_resource"), 1),
    ]);
    assert_eq!(counts, want);
}

/// The metrics as Prometheus text, under upstream's names.
#[test]
fn metrics_are_exposed_under_upstreams_names() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ResourceClaimMetrics::new();
    metrics.register(&mut registry);
    metrics.create(true, false);
    let claims = Indexer::new();
    claims
        .add(Arc::new(allocate(templated_claim(
            ResourceClaimSpec::default(),
        ))))
        .expect("add");
    registry.register_collector(Box::new(super::super::ResourceClaimsCollector::new(claims)));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains(
            "resourceclaim_controller_creates_total{status=\"success\",admin_access=\"false\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "resourceclaim_controller_resource_claims{admin_access=\"false\",allocated=\"true\",source=\"resource_claim_template\"} 1"
        ),
        "{text}"
    );
}
