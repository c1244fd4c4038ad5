//! Unit tests of the device taint eviction controller: bare caches, the recording fake client, a fake event recorder and paused tokio time with a wall clock that follows it, the cases of upstream's `device_taint_eviction_test.go` (`TestController`) that apply to v1.36's defaults and to DeviceTaintRules.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationResult, DeviceRequestAllocationResult, DeviceTaint,
    DeviceToleration, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus,
    ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::api::resource::v1beta2::{
    DeviceTaint as RuleTaint, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintRuleStatus,
    DeviceTaintSelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kcm_machinery::controller::api_status;
use kcm_machinery::events::{FakeRecorder, TokioClock};
use kcm_machinery::informer::store::Indexer;
use kcm_testing::{MetaBuilder, pod};

use super::client::Verb;
use super::rule_status::{CONDITION_EVICTION_IN_PROGRESS, RULE_STATUS_PERIOD};
use super::*;

const NAMESPACE: &str = "default";
const NODE: &str = "worker";
const DRIVER: &str = "some-driver";
const POD: &str = "my-pod";
const POD_UID: &str = "1234";
const RESOURCE: &str = "my-resource";
const CLAIM: &str = "my-pod-my-resource";
const TAINT_KEY: &str = "example.com/taint";
const TAINT_VALUE: &str = "something";
/// Upstream's toleration: longer than any test runs.
const TOLERATION: Duration = Duration::from_secs(60 * 60);

/// Upstream's `taintTime`; the wall clock starts there.
fn taint_time() -> Timestamp {
    "2000-01-01T00:00:00Z".parse().expect("timestamp")
}

fn taint(effect: &str) -> DeviceTaint {
    DeviceTaint {
        key: TAINT_KEY.to_owned(),
        value: Some(TAINT_VALUE.to_owned()),
        effect: effect.to_owned(),
        time_added: Some(Time(taint_time())),
    }
}

fn device(name: &str, taints: Vec<DeviceTaint>) -> Device {
    Device {
        name: name.to_owned(),
        taints: (!taints.is_empty()).then_some(taints),
        ..Device::default()
    }
}

/// A slice of pool `worker` of `some-driver`, generation 1.
fn slice_with(devices: Vec<Device>) -> Arc<ResourceSlice> {
    Arc::new(ResourceSlice {
        metadata: ObjectMeta {
            name: Some(format!("{NODE}-{DRIVER}")),
            uid: Some("slice-uid".to_owned()),
            ..ObjectMeta::default()
        },
        spec: ResourceSliceSpec {
            driver: DRIVER.to_owned(),
            node_name: Some(NODE.to_owned()),
            pool: ResourcePool {
                name: NODE.to_owned(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(devices),
            ..ResourceSliceSpec::default()
        },
    })
}

/// Upstream's `slice`: `instance` untainted, `instance-no-schedule` NoSchedule,
/// `instance-no-execute` None and NoExecute.
fn slice() -> Arc<ResourceSlice> {
    slice_with(vec![
        device("instance", vec![]),
        device("instance-no-schedule", vec![taint("NoSchedule")]),
        device(
            "instance-no-execute",
            vec![taint("None"), taint("NoExecute")],
        ),
    ])
}

/// Upstream's `sliceTainted`: `instance` tainted NoExecute too.
fn slice_tainted() -> Arc<ResourceSlice> {
    slice_with(vec![
        device("instance", vec![taint("NoExecute")]),
        device("instance-no-schedule", vec![taint("NoSchedule")]),
        device(
            "instance-no-execute",
            vec![taint("None"), taint("NoExecute")],
        ),
    ])
}

/// `instance` tainted with `effect` only.
fn slice_instance(effect: &str) -> Arc<ResourceSlice> {
    slice_with(vec![device("instance", vec![taint(effect)])])
}

fn toleration(effect: Option<&str>, seconds: Option<i64>) -> DeviceToleration {
    DeviceToleration {
        key: Some(TAINT_KEY.to_owned()),
        operator: Some("Equal".to_owned()),
        value: Some(TAINT_VALUE.to_owned()),
        effect: effect.map(str::to_owned),
        toleration_seconds: seconds,
    }
}

/// Upstream's `inUseClaim`: owned by the pod, `instance` allocated, reserved for the pod.
fn in_use_claim(tolerations: Vec<DeviceToleration>) -> Arc<ResourceClaim> {
    let pod = pod_with_claim();
    Arc::new(ResourceClaim {
        metadata: ObjectMeta {
            name: Some(CLAIM.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            uid: Some("claim-uid".to_owned()),
            owner_references: Some(vec![kcm_testing::controller_ref_of(&pod)]),
            ..ObjectMeta::default()
        },
        spec: Default::default(),
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(vec![DeviceRequestAllocationResult {
                        driver: DRIVER.to_owned(),
                        pool: NODE.to_owned(),
                        device: "instance".to_owned(),
                        request: "req-1".to_owned(),
                        tolerations: (!tolerations.is_empty()).then_some(tolerations),
                        ..DeviceRequestAllocationResult::default()
                    }]),
                    ..DeviceAllocationResult::default()
                }),
                ..AllocationResult::default()
            }),
            reserved_for: Some(vec![ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".to_owned(),
                name: POD.to_owned(),
                uid: POD_UID.to_owned(),
            }]),
            ..ResourceClaimStatus::default()
        }),
    })
}

fn unallocated(claim: &ResourceClaim) -> Arc<ResourceClaim> {
    let mut claim = claim.clone();
    claim.status = None;
    Arc::new(claim)
}

/// Upstream's `podWithClaimName`: scheduled, using the claim by name.
fn pod_with_claim() -> Pod {
    pod(POD)
        .namespace(NAMESPACE)
        .uid(POD_UID)
        .with(|p| {
            let spec = p.spec.get_or_insert_with(Default::default);
            spec.node_name = Some(NODE.to_owned());
            spec.resource_claims = Some(vec![PodResourceClaim {
                name: RESOURCE.to_owned(),
                resource_claim_name: Some(CLAIM.to_owned()),
                ..PodResourceClaim::default()
            }]);
        })
        .build()
}

fn pod_ref() -> ObjectRef {
    ObjectRef {
        namespace: NAMESPACE.to_owned(),
        name: POD.to_owned(),
        uid: POD_UID.to_owned(),
    }
}

fn rule(name: &str, uid: &str, effect: &str) -> Arc<DeviceTaintRule> {
    Arc::new(DeviceTaintRule {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            uid: Some(uid.to_owned()),
            ..ObjectMeta::default()
        },
        spec: DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: Some(DRIVER.to_owned()),
                ..DeviceTaintSelector::default()
            }),
            taint: RuleTaint {
                key: TAINT_KEY.to_owned(),
                value: Some(TAINT_VALUE.to_owned()),
                effect: effect.to_owned(),
                time_added: Some(Time(taint_time())),
            },
        },
        status: None,
    })
}

struct Fixture {
    controller: Arc<DeviceTaintEvictionController>,
    pods: Indexer<Pod>,
    rules: Indexer<DeviceTaintRule>,
    client: Arc<FakeDeviceTaintEvictionClient>,
    recorder: FakeRecorder,
}

/// A controller at upstream's taint time, with the rule cache (only rule tests fill it).
fn setup() -> Fixture {
    let pods = Indexer::new();
    let rules = Indexer::new();
    let client = Arc::new(FakeDeviceTaintEvictionClient::new());
    let recorder = FakeRecorder::new();
    let controller = DeviceTaintEvictionController::with_caches(
        pods.clone(),
        Some(rules.clone()),
        client.clone(),
        Arc::new(recorder.clone()),
        Arc::new(TokioClock::starting_at(taint_time())),
    );
    Fixture {
        controller,
        pods,
        rules,
        client,
        recorder,
    }
}

impl Fixture {
    /// The pod in the cache and on the server, then its add event.
    fn add_pod(&self, pod: Pod) {
        self.client.add_pod(pod.clone());
        self.pods.add(Arc::new(pod.clone())).expect("cache");
        self.controller.handle_pod_change(None, Some(&pod));
    }

    /// Handles every ready work item.
    async fn drain(&self) {
        // Let the delaying queue's timer move what is due.
        tokio::task::yield_now().await;
        while !self.controller.queue().is_empty() {
            self.controller.process_next_work_item().await;
            tokio::task::yield_now().await;
        }
    }

    /// Moves time on (paused: instantly) and handles what became due.
    async fn advance(&self, by: Duration) {
        tokio::time::sleep(by).await;
        self.drain().await;
    }

    fn messages(&self) -> Vec<(String, String)> {
        self.recorder
            .events()
            .into_iter()
            .map(|e| (e.reason, e.message))
            .collect()
    }
}

fn marking() -> (String, String) {
    (
        REASON_DEVICE_TAINT_MANAGER_EVICTION.to_owned(),
        MESSAGE_MARKING_FOR_DELETION.to_owned(),
    )
}

fn cancelling() -> (String, String) {
    (
        REASON_DEVICE_TAINT_MANAGER_EVICTION.to_owned(),
        MESSAGE_CANCELLING_DELETION.to_owned(),
    )
}

fn pod_key() -> String {
    format!("{NAMESPACE}/{POD}")
}

#[tokio::test(start_paused = true)]
async fn untainted_claim_evicts_nothing() {
    let f = setup();
    f.controller.handle_slice_change(None, Some(&slice()));
    f.controller
        .handle_claim_change(None, Some(&in_use_claim(vec![])));
    f.add_pod(pod_with_claim());
    f.advance(Duration::from_secs(3600)).await;
    assert_eq!(f.controller.scheduled_eviction(&pod_ref()), None);
    assert!(f.client.actions().is_empty(), "{:?}", f.client.actions());
    assert!(f.recorder.events().is_empty());
}

#[tokio::test(start_paused = true)]
async fn not_tolerated_no_execute_taint_deletes_the_pod_at_once_in_any_event_order() {
    // Upstream's `evict-pod-resourceclaim`: the final state is the same in every order.
    type Event = fn(&Fixture);
    let events: [(&str, Event); 3] = [
        ("slice", |f| {
            f.controller
                .handle_slice_change(None, Some(&slice_tainted()))
        }),
        ("claim", |f| {
            f.controller
                .handle_claim_change(None, Some(&in_use_claim(vec![])))
        }),
        ("pod", |f| f.add_pod(pod_with_claim())),
    ];
    let orders = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for order in orders {
        let f = setup();
        let name: Vec<&str> = order.iter().map(|&i| events[i].0).collect();
        for i in order {
            (events[i].1)(&f);
        }
        assert_eq!(
            f.controller.scheduled_eviction(&pod_ref()),
            Some(taint_time()),
            "{name:?}"
        );
        f.drain().await;
        assert_eq!(f.client.deleted(), vec![pod_key()], "{name:?}");
        assert_eq!(f.messages(), vec![marking()], "{name:?}");
        assert_eq!(
            f.controller.scheduled_eviction(&pod_ref()),
            None,
            "{name:?}"
        );
        assert_eq!(f.controller.metrics().pod_deletions(), 1, "{name:?}");
        let verbs: Vec<Verb> = f.client.actions().iter().map(|a| a.verb).collect();
        assert_eq!(
            verbs,
            [Verb::GetPod, Verb::PatchPodStatus, Verb::DeletePod],
            "{name:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_pod_gets_the_disruption_target_condition_before_deletion() {
    let f = setup();
    f.controller
        .handle_slice_change(None, Some(&slice_instance("NoExecute")));
    f.controller
        .handle_claim_change(None, Some(&in_use_claim(vec![])));
    f.add_pod(pod_with_claim());
    f.drain().await;
    let patches = f.client.patches();
    assert_eq!(patches.len(), 1);
    let (key, patch) = &patches[0];
    assert_eq!(key, &pod_key());
    assert_eq!(patch["metadata"]["uid"], POD_UID, "UID precondition");
    let condition = &patch["status"]["conditions"][0];
    assert_eq!(condition["type"], DISRUPTION_TARGET);
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], REASON_DELETION_BY_DEVICE_TAINT_MANAGER);
    assert_eq!(
        condition["message"],
        MESSAGE_DELETION_BY_DEVICE_TAINT_MANAGER
    );
    assert_eq!(condition["lastTransitionTime"], "2000-01-01T00:00:00Z");
}

#[tokio::test(start_paused = true)]
async fn toleration_seconds_delay_the_eviction_from_time_added() {
    // Upstream's tolerated case: evicted at timeAdded + tolerationSeconds.
    let f = setup();
    f.controller
        .handle_slice_change(None, Some(&slice_instance("NoExecute")));
    let seconds = i64::try_from(TOLERATION.as_secs()).expect("seconds");
    f.controller.handle_claim_change(
        None,
        Some(&in_use_claim(vec![toleration(
            Some("NoExecute"),
            Some(seconds),
        )])),
    );
    f.add_pod(pod_with_claim());
    let due = taint_time() + SignedDuration::from_secs(seconds);
    assert_eq!(f.controller.scheduled_eviction(&pod_ref()), Some(due));
    f.drain().await;
    assert!(f.client.deleted().is_empty(), "not yet");
    f.advance(TOLERATION - Duration::from_secs(1)).await;
    assert!(f.client.deleted().is_empty(), "still not");
    assert!(f.recorder.events().is_empty());
    f.advance(Duration::from_secs(1)).await;
    assert_eq!(f.client.deleted(), vec![pod_key()]);
    assert_eq!(f.messages(), vec![marking()]);
    assert_eq!(f.controller.metrics().pod_deletions(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_smallest_toleration_seconds_win_and_a_toleration_without_seconds_ignores_the_taint() {
    struct Case {
        name: &'static str,
        tolerations: Vec<DeviceToleration>,
        want: Option<Timestamp>,
    }
    let at = |s: i64| Some(taint_time() + SignedDuration::from_secs(s));
    let cases = [
        Case {
            name: "two tolerations: the smaller seconds",
            tolerations: vec![
                toleration(Some("NoExecute"), Some(300)),
                toleration(Some("NoExecute"), Some(30)),
            ],
            want: at(30),
        },
        Case {
            name: "negative seconds count as zero",
            tolerations: vec![toleration(Some("NoExecute"), Some(-5))],
            want: at(0),
        },
        Case {
            name: "no seconds: tolerated forever",
            tolerations: vec![toleration(Some("NoExecute"), None)],
            want: None,
        },
        Case {
            name: "forever beats seconds",
            tolerations: vec![
                toleration(Some("NoExecute"), Some(30)),
                toleration(Some("NoExecute"), None),
            ],
            want: None,
        },
        Case {
            // As upstream's claimEvictionTime: only tolerations with effect NoExecute count.
            name: "a toleration without effect does not apply",
            tolerations: vec![toleration(None, None)],
            want: at(0),
        },
        Case {
            name: "a NoSchedule toleration does not apply",
            tolerations: vec![toleration(Some("NoSchedule"), None)],
            want: at(0),
        },
    ];
    for case in cases {
        let f = setup();
        f.controller
            .handle_slice_change(None, Some(&slice_instance("NoExecute")));
        f.controller
            .handle_claim_change(None, Some(&in_use_claim(case.tolerations)));
        f.add_pod(pod_with_claim());
        assert_eq!(
            f.controller.scheduled_eviction(&pod_ref()),
            case.want,
            "{}",
            case.name
        );
    }
}

#[tokio::test(start_paused = true)]
async fn removing_the_taint_before_the_deadline_cancels_the_eviction() {
    let f = setup();
    let tainted = slice_instance("NoExecute");
    f.controller.handle_slice_change(None, Some(&tainted));
    f.controller.handle_claim_change(
        None,
        Some(&in_use_claim(vec![toleration(Some("NoExecute"), Some(60))])),
    );
    f.add_pod(pod_with_claim());
    assert!(f.controller.scheduled_eviction(&pod_ref()).is_some());
    f.advance(Duration::from_secs(30)).await;
    let untainted = slice_with(vec![device("instance", vec![])]);
    f.controller
        .handle_slice_change(Some(&tainted), Some(&untainted));
    assert_eq!(f.controller.scheduled_eviction(&pod_ref()), None);
    assert_eq!(f.messages(), vec![cancelling()]);
    f.advance(Duration::from_secs(60)).await;
    assert!(f.client.actions().is_empty(), "{:?}", f.client.actions());
    assert_eq!(
        f.controller.maybe_delete_pod_count(),
        1,
        "the obsolete work item is seen and dropped"
    );
    assert_eq!(f.controller.metrics().pod_deletions(), 0);
}

#[tokio::test(start_paused = true)]
async fn deleting_the_slice_or_the_claim_cancels_the_eviction() {
    for what in ["slice", "claim", "deallocation"] {
        let f = setup();
        let tainted = slice_instance("NoExecute");
        let claim = in_use_claim(vec![toleration(Some("NoExecute"), Some(60))]);
        f.controller.handle_slice_change(None, Some(&tainted));
        f.controller.handle_claim_change(None, Some(&claim));
        f.add_pod(pod_with_claim());
        match what {
            "slice" => f.controller.handle_slice_change(Some(&tainted), None),
            "claim" => f.controller.handle_claim_change(Some(&claim), None),
            _ => f
                .controller
                .handle_claim_change(Some(&claim), Some(&unallocated(&claim))),
        }
        assert_eq!(f.controller.scheduled_eviction(&pod_ref()), None, "{what}");
        assert_eq!(f.messages(), vec![cancelling()], "{what}");
        f.advance(Duration::from_secs(120)).await;
        assert!(f.client.deleted().is_empty(), "{what}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_deleted_pod_is_forgotten_without_an_event() {
    let f = setup();
    f.controller
        .handle_slice_change(None, Some(&slice_instance("NoExecute")));
    f.controller.handle_claim_change(
        None,
        Some(&in_use_claim(vec![toleration(Some("NoExecute"), Some(60))])),
    );
    let pod = pod_with_claim();
    f.add_pod(pod.clone());
    f.controller.handle_pod_change(Some(&pod), None);
    assert_eq!(f.controller.scheduled_eviction(&pod_ref()), None);
    assert!(f.recorder.events().is_empty());
}

#[tokio::test(start_paused = true)]
async fn other_effects_do_not_evict() {
    for effect in ["NoSchedule", "None", "unknown-effect"] {
        let f = setup();
        f.controller
            .handle_slice_change(None, Some(&slice_instance(effect)));
        f.controller
            .handle_claim_change(None, Some(&in_use_claim(vec![])));
        f.add_pod(pod_with_claim());
        f.advance(Duration::from_secs(60)).await;
        assert_eq!(
            f.controller.scheduled_eviction(&pod_ref()),
            None,
            "{effect}"
        );
        assert!(f.client.actions().is_empty(), "{effect}");
    }
}

#[tokio::test(start_paused = true)]
async fn pods_that_do_not_use_the_tainted_claim_stay() {
    struct Case {
        name: &'static str,
        claim: Arc<ResourceClaim>,
        pod: Pod,
    }
    let claim = in_use_claim(vec![]);
    let reserved_for_other = {
        let mut c = (*claim).clone();
        if let Some(r) = c.status.as_mut().and_then(|s| s.reserved_for.as_mut()) {
            r[0].uid = "other".to_owned();
        }
        Arc::new(c)
    };
    let cases = [
        Case {
            name: "pod without claims",
            claim: Arc::clone(&claim),
            pod: pod(POD)
                .namespace(NAMESPACE)
                .uid(POD_UID)
                .with(|p| p.spec.get_or_insert_with(Default::default).node_name = Some(NODE.into()))
                .build(),
        },
        Case {
            name: "claim not allocated",
            claim: unallocated(&claim),
            pod: pod_with_claim(),
        },
        Case {
            name: "pod not scheduled",
            claim: Arc::clone(&claim),
            pod: {
                let mut p = pod_with_claim();
                p.spec.get_or_insert_with(Default::default).node_name = None;
                p
            },
        },
        Case {
            name: "claim reserved for another pod instance",
            claim: reserved_for_other,
            pod: pod_with_claim(),
        },
        Case {
            name: "template claim not created yet",
            claim: Arc::clone(&claim),
            pod: {
                let mut p = pod_with_claim();
                if let Some(entries) = p.spec.as_mut().and_then(|s| s.resource_claims.as_mut()) {
                    entries[0].resource_claim_name = None;
                    entries[0].resource_claim_template_name = Some(CLAIM.to_owned());
                }
                p
            },
        },
        Case {
            name: "claim in another namespace",
            claim: {
                let mut c = (*claim).clone();
                c.metadata.namespace = Some("other".to_owned());
                Arc::new(c)
            },
            pod: pod_with_claim(),
        },
    ];
    for case in cases {
        let f = setup();
        f.controller
            .handle_slice_change(None, Some(&slice_instance("NoExecute")));
        f.controller.handle_claim_change(None, Some(&case.claim));
        f.add_pod(case.pod);
        f.advance(Duration::from_secs(60)).await;
        assert_eq!(
            f.controller.scheduled_eviction(&pod_ref()),
            None,
            "{}",
            case.name
        );
        assert!(f.client.actions().is_empty(), "{}", case.name);
    }
}

#[tokio::test(start_paused = true)]
async fn a_pod_scheduled_later_is_evicted_once_it_has_a_node() {
    let f = setup();
    f.controller
        .handle_slice_change(None, Some(&slice_instance("NoExecute")));
    f.controller
        .handle_claim_change(None, Some(&in_use_claim(vec![])));
    let mut unscheduled = pod_with_claim();
    unscheduled
        .spec
        .get_or_insert_with(Default::default)
        .node_name = None;
    f.add_pod(unscheduled.clone());
    assert_eq!(f.controller.scheduled_eviction(&pod_ref()), None);
    let scheduled = pod_with_claim();
    f.client.add_pod(scheduled.clone());
    f.pods.update(Arc::new(scheduled.clone())).expect("cache");
    f.controller
        .handle_pod_change(Some(&unscheduled), Some(&scheduled));
    f.drain().await;
    assert_eq!(f.client.deleted(), vec![pod_key()]);
}

#[tokio::test(start_paused = true)]
async fn a_replaced_pod_is_not_deleted_and_the_work_is_done() {
    let f = setup();
    f.controller
        .handle_slice_change(None, Some(&slice_instance("NoExecute")));
    f.controller
        .handle_claim_change(None, Some(&in_use_claim(vec![])));
    f.add_pod(pod_with_claim());
    // The server has a new pod of the same name by now.
    let mut replacement = pod_with_claim();
    replacement.metadata.uid = Some("new-uid".to_owned());
    f.client.add_pod(replacement);
    f.drain().await;
    assert!(f.client.deleted().is_empty());
    assert!(f.recorder.events().is_empty());
    assert_eq!(f.controller.scheduled_eviction(&pod_ref()), None);
    assert_eq!(f.controller.metrics().pod_deletions(), 0);
    f.advance(Duration::from_secs(60)).await;
    assert_eq!(f.client.actions().len(), 1, "one get, no retry");
}

#[tokio::test(start_paused = true)]
async fn a_failed_delete_is_retried_rate_limited() {
    let f = setup();
    f.client.set_error(
        Verb::DeletePod,
        Some(api_status::internal_error("etcd unavailable")),
    );
    f.controller
        .handle_slice_change(None, Some(&slice_instance("NoExecute")));
    f.controller
        .handle_claim_change(None, Some(&in_use_claim(vec![])));
    f.add_pod(pod_with_claim());
    f.drain().await;
    assert!(f.client.deleted().is_empty());
    assert_eq!(f.client.pods().len(), 1, "still there");
    assert!(
        f.controller.scheduled_eviction(&pod_ref()).is_some(),
        "still due"
    );
    f.client.set_error(Verb::DeletePod, None);
    f.advance(Duration::from_secs(1)).await;
    assert!(f.client.pods().is_empty(), "deleted on retry");
    assert_eq!(f.controller.metrics().pod_deletions(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_pod_being_deleted_needs_nothing_more() {
    let f = setup();
    f.controller
        .handle_slice_change(None, Some(&slice_instance("NoExecute")));
    f.controller
        .handle_claim_change(None, Some(&in_use_claim(vec![])));
    let mut deleting = pod_with_claim();
    deleting.metadata.deletion_timestamp = Some(Time(taint_time()));
    f.add_pod(deleting);
    f.drain().await;
    let verbs: Vec<Verb> = f.client.actions().iter().map(|a| a.verb).collect();
    assert_eq!(verbs, [Verb::GetPod]);
    assert!(f.recorder.events().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_outdated_slice_generation_does_not_count() {
    let f = setup();
    let old = slice_instance("NoExecute");
    let mut newer = (*slice_with(vec![device("instance", vec![])])).clone();
    newer.metadata.name = Some("replacement".to_owned());
    newer.spec.pool.generation = 2;
    f.controller.handle_slice_change(None, Some(&old));
    f.controller
        .handle_slice_change(None, Some(&Arc::new(newer)));
    f.controller
        .handle_claim_change(None, Some(&in_use_claim(vec![])));
    f.add_pod(pod_with_claim());
    assert_eq!(f.controller.scheduled_eviction(&pod_ref()), None);
}

#[tokio::test(start_paused = true)]
async fn a_no_execute_rule_evicts_and_reports_its_progress() {
    // Upstream's `evict-pod-rule`.
    let f = setup();
    let evict = rule("evict", "rule-uid", "NoExecute");
    f.rules.add(Arc::clone(&evict)).expect("cache");
    f.controller
        .handle_claim_change(None, Some(&in_use_claim(vec![])));
    f.add_pod(pod_with_claim());
    f.controller.handle_rule_change(None, Some(&evict));
    assert_eq!(
        f.controller.scheduled_eviction(&pod_ref()),
        Some(taint_time())
    );
    f.drain().await;
    assert_eq!(f.client.deleted(), vec![pod_key()]);
    let conditions = f.client.rule_conditions();
    assert_eq!(conditions.len(), 1, "{conditions:?}");
    let (name, first) = &conditions[0];
    assert_eq!(name, "evict");
    assert_eq!(first.type_, CONDITION_EVICTION_IN_PROGRESS);
    assert_eq!(
        (
            first.status.as_str(),
            first.reason.as_str(),
            first.message.as_str()
        ),
        (
            "True",
            "PodsPendingEviction",
            "1 pod needs to be evicted in 1 namespace."
        )
    );
    assert_eq!(first.last_transition_time, Time(taint_time()));
    // The informers catch up: the status is stored, the pod is gone.
    let mut stored = (*evict).clone();
    stored.status = Some(DeviceTaintRuleStatus {
        conditions: Some(vec![first.clone()]),
    });
    f.rules.update(Arc::new(stored)).expect("cache");
    let pod = pod_with_claim();
    f.pods.delete(&pod).expect("cache");
    f.controller.handle_pod_change(Some(&pod), None);
    f.advance(RULE_STATUS_PERIOD).await;
    let conditions = f.client.rule_conditions();
    assert_eq!(conditions.len(), 2, "{conditions:?}");
    let last = &conditions[1].1;
    assert_eq!(
        (
            last.status.as_str(),
            last.reason.as_str(),
            last.message.as_str()
        ),
        (
            "False",
            "Completed",
            "1 pod evicted since starting the controller."
        )
    );
    assert_eq!(
        last.last_transition_time,
        Time(taint_time() + SignedDuration::from_secs(10))
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_rule_reports_not_started_without_pods() {
    // Upstream's `rule-status`.
    let f = setup();
    let evict = rule("evict", "rule-uid", "NoExecute");
    f.rules.add(Arc::clone(&evict)).expect("cache");
    f.controller.handle_rule_change(None, Some(&evict));
    f.drain().await;
    let conditions = f.client.rule_conditions();
    assert_eq!(conditions.len(), 1);
    let c = &conditions[0].1;
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        ("False", "NotStarted", "")
    );
}

#[tokio::test(start_paused = true)]
async fn a_none_rule_simulates_and_evicts_nothing() {
    let f = setup();
    let none = rule("evict", "rule-uid", "None");
    f.rules.add(Arc::clone(&none)).expect("cache");
    f.controller.handle_slice_change(None, Some(&slice()));
    f.controller
        .handle_claim_change(None, Some(&in_use_claim(vec![])));
    f.add_pod(pod_with_claim());
    f.controller.handle_rule_change(None, Some(&none));
    f.drain().await;
    assert!(f.client.deleted().is_empty());
    assert_eq!(f.controller.scheduled_eviction(&pod_ref()), None);
    let conditions = f.client.rule_conditions();
    assert_eq!(conditions.len(), 1);
    let c = &conditions[0].1;
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "NoEffect")
    );
    assert_eq!(
        c.message,
        "3 published devices selected. 1 allocated device selected. 1 pod would be evicted in \
         1 namespace if the effect was NoExecute. This information will not be updated again. \
         Recreate the DeviceTaintRule to trigger an update."
    );
    f.advance(Duration::from_secs(60)).await;
    assert!(
        f.client.deleted().is_empty(),
        "the simulation evicts nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn removing_the_rule_cancels_its_eviction() {
    let f = setup();
    let evict = rule("evict", "rule-uid", "NoExecute");
    f.controller.handle_claim_change(
        None,
        Some(&in_use_claim(vec![toleration(Some("NoExecute"), Some(60))])),
    );
    f.add_pod(pod_with_claim());
    f.controller.handle_rule_change(None, Some(&evict));
    assert!(f.controller.scheduled_eviction(&pod_ref()).is_some());
    f.controller.handle_rule_change(Some(&evict), None);
    assert_eq!(f.controller.scheduled_eviction(&pod_ref()), None);
    assert_eq!(f.messages(), vec![cancelling()]);
}
