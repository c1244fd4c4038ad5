//! Unit tests of the DynamicResources plugin (facts of upstream's `dynamicresources_test.go`:
//! the PreFilter messages, the Filter reasons, the allocation written before binding).

use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus, PodStatus};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClaim, DeviceRequest, DeviceSubRequest, DeviceTaint,
    ExactDeviceRequest, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kcm_testing::MetaBuilder;

use super::*;
use crate::dra::{DRIVER, FakeDra, device_class, node_resource_slice};

struct Fixture {
    plugin: DynamicResources,
    claims: Indexer<ResourceClaim>,
    slices: Indexer<ResourceSlice>,
    classes: Indexer<DeviceClass>,
    client: Arc<FakeDra>,
}

fn fixture() -> Fixture {
    let claims = Indexer::new();
    let slices = Indexer::new();
    let classes = Indexer::new();
    classes.add(Arc::new(device_class())).expect("class");
    let client = Arc::new(FakeDra::new());
    let plugin = DynamicResources::new(
        claims.clone(),
        slices.clone(),
        classes.clone(),
        client.clone(),
    );
    Fixture {
        plugin,
        claims,
        slices,
        classes,
        client,
    }
}

fn node(name: &str) -> Node {
    kcm_testing::node(name).build()
}

impl Fixture {
    fn with_slices(self, nodes: &[&str], devices: usize) -> Self {
        for n in nodes {
            self.slices
                .add(Arc::new(node_resource_slice(&node(n), devices)))
                .expect("slice");
        }
        self
    }

    fn add_claim(&self, claim: ResourceClaim) {
        self.client.put_claim(claim.clone());
        self.claims.add(Arc::new(claim)).expect("claim");
    }

    fn claims_of(&self, pod: &Pod) -> PodClaims {
        match self.plugin.pre_filter(pod) {
            PreFilter::Claims(c) => c,
            other => panic!("expected claims, got {other:?}"),
        }
    }

    fn unresolvable(&self, pod: &Pod) -> String {
        match self.plugin.pre_filter(pod) {
            PreFilter::Unresolvable(message) => message,
            other => panic!("expected unresolvable, got {other:?}"),
        }
    }
}

fn exactly(name: &str, class: &str, mode: Option<&str>, count: Option<i64>) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.into(),
            allocation_mode: mode.map(Into::into),
            count,
            ..ExactDeviceRequest::default()
        }),
        first_available: None,
    }
}

fn claim_with(name: &str, requests: Vec<DeviceRequest>) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                ..DeviceClaim::default()
            }),
        },
        status: None,
    }
}

fn claim(name: &str, count: i64) -> ResourceClaim {
    claim_with(name, vec![exactly("gpu", DRIVER, None, Some(count))])
}

fn allocated(mut claim: ResourceClaim, node: &str, devices: &[&str]) -> ResourceClaim {
    claim.status = Some(ResourceClaimStatus {
        allocation: Some(AllocationResult {
            devices: Some(DeviceAllocationResult {
                results: Some(
                    devices
                        .iter()
                        .map(|d| DeviceRequestAllocationResult {
                            request: "gpu".into(),
                            driver: DRIVER.into(),
                            pool: node.into(),
                            device: (*d).into(),
                            ..DeviceRequestAllocationResult::default()
                        })
                        .collect(),
                ),
                config: None,
            }),
            node_selector: Some(node_name_selector(node)),
            allocation_timestamp: None,
        }),
        ..ResourceClaimStatus::default()
    });
    claim
}

/// A pod naming `claims` directly.
fn pod_using(name: &str, claims: &[&str]) -> Pod {
    let mut pod = kcm_testing::pod(name)
        .namespace("ns")
        .uid(format!("uid-{name}"))
        .build();
    pod.spec.get_or_insert_default().resource_claims = Some(
        claims
            .iter()
            .map(|c| PodResourceClaim {
                name: format!("rc-{c}"),
                resource_claim_name: Some((*c).into()),
                resource_claim_template_name: None,
            })
            .collect(),
    );
    pod
}

/// A pod with one template entry `gpu`, the claim name recorded when `generated` is given.
fn pod_from_template(name: &str, generated: Option<&str>) -> Pod {
    let mut pod = kcm_testing::pod(name)
        .namespace("ns")
        .uid(format!("uid-{name}"))
        .build();
    pod.spec.get_or_insert_default().resource_claims = Some(vec![PodResourceClaim {
        name: "gpu".into(),
        resource_claim_name: None,
        resource_claim_template_name: Some("gpu-template".into()),
    }]);
    if let Some(generated) = generated {
        pod.status = Some(PodStatus {
            resource_claim_statuses: Some(vec![PodResourceClaimStatus {
                name: "gpu".into(),
                resource_claim_name: Some(generated.into()),
            }]),
            ..PodStatus::default()
        });
    }
    pod
}

fn results(claims: &NodeClaims) -> Vec<(String, String, String)> {
    claims
        .claims
        .iter()
        .filter_map(|(_, a)| a.as_ref())
        .flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten()))
        .map(|r| (r.request.clone(), r.pool.clone(), r.device.clone()))
        .collect()
}

fn triple(request: &str, pool: &str, device: &str) -> (String, String, String) {
    (request.into(), pool.into(), device.into())
}

#[test]
fn pods_without_claims_are_skipped() {
    let f = fixture();
    let pod = kcm_testing::pod("plain").namespace("ns").build();
    assert!(!uses_resource_claims(&pod));
    assert!(matches!(f.plugin.pre_filter(&pod), PreFilter::NoClaims));
}

#[test]
fn pre_filter_waits_for_claims_with_upstreams_messages() {
    let f = fixture();
    assert_eq!(
        f.unresolvable(&pod_from_template("p", None)),
        "pod \"ns/p\": ResourceClaim not created yet"
    );
    assert_eq!(
        f.unresolvable(&pod_using("p", &["missing"])),
        "could not find ResourceClaim \"ns/missing\""
    );
    let mut deleting = claim("going", 1);
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    f.add_claim(deleting);
    assert_eq!(
        f.unresolvable(&pod_using("p", &["going"])),
        "resourceclaim \"going\" is being deleted"
    );
    // A claim made from a template must be the pod's.
    f.add_claim(claim("p-gpu-abcde", 1));
    assert_eq!(
        f.unresolvable(&pod_from_template("p", Some("p-gpu-abcde"))),
        "ResourceClaim ns/p-gpu-abcde was not created for pod ns/p (pod is not owner)"
    );
    let mut owned = claim("q-gpu-abcde", 1);
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: "q".into(),
        uid: "uid-q".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    f.add_claim(owned);
    assert_eq!(
        f.claims_of(&pod_from_template("q", Some("q-gpu-abcde")))
            .claims
            .len(),
        1
    );
    f.add_claim(claim_with(
        "other-class",
        vec![exactly("big", "no-such-class", None, None)],
    ));
    assert_eq!(
        f.unresolvable(&pod_using("p", &["other-class"])),
        "request big: device class no-such-class does not exist"
    );
}

#[test]
fn filter_allocates_free_devices_of_the_node() {
    let f = fixture().with_slices(&["n1", "n2"], 2);
    f.add_claim(claim("c", 1));
    let state = f.claims_of(&pod_using("p", &["c"]));
    let on_n1 = f.plugin.filter(&state, &node("n1")).expect("fits n1");
    assert_eq!(results(&on_n1), [triple("gpu", "n1", "gpu-0")]);
    let allocation = on_n1.claims[0].1.clone().expect("new allocation");
    assert_eq!(allocation.node_selector, Some(node_name_selector("n1")));
    let driver = &allocation
        .devices
        .and_then(|d| d.results)
        .unwrap_or_default()[0]
        .driver;
    assert_eq!(driver, DRIVER);
    // A node publishing nothing cannot hold it.
    assert_eq!(
        f.plugin.filter(&state, &node("n3")),
        Err(vec![ERR_REASON_CANNOT_ALLOCATE.to_owned()])
    );
}

#[test]
fn devices_held_by_other_claims_are_not_allocated_again() {
    let f = fixture().with_slices(&["n1"], 2);
    f.add_claim(allocated(claim("held", 1), "n1", &["gpu-0"]));
    f.add_claim(claim("one", 1));
    f.add_claim(claim("two", 2));
    let one = f.claims_of(&pod_using("p", &["one"]));
    let fit = f.plugin.filter(&one, &node("n1")).expect("one left");
    assert_eq!(results(&fit), [triple("gpu", "n1", "gpu-1")]);
    let two = f.claims_of(&pod_using("p", &["two"]));
    assert_eq!(
        f.plugin.filter(&two, &node("n1")),
        Err(vec![ERR_REASON_CANNOT_ALLOCATE.to_owned()])
    );
    // Two claims of one pod never share a device either.
    let both = f.claims_of(&pod_using("p", &["one", "two"]));
    assert!(f.plugin.filter(&both, &node("n1")).is_err());
}

#[test]
fn an_allocated_claim_keeps_the_pod_on_its_node() {
    let f = fixture().with_slices(&["n1", "n2"], 2);
    f.add_claim(allocated(claim("shared", 1), "n1", &["gpu-0"]));
    let state = f.claims_of(&pod_using("p", &["shared"]));
    assert_eq!(
        f.plugin.filter(&state, &node("n2")),
        Err(vec![ERR_REASON_NOT_AVAILABLE.to_owned()])
    );
    let fit = f.plugin.filter(&state, &node("n1")).expect("its node");
    assert_eq!(fit.claims.len(), 1);
    assert!(fit.claims[0].1.is_none(), "nothing new to allocate");
}

#[test]
fn a_claim_reserved_for_as_many_consumers_as_allowed_is_in_use() {
    let f = fixture().with_slices(&["n1"], 2);
    let mut full = allocated(claim("full", 1), "n1", &["gpu-0"]);
    if let Some(status) = full.status.as_mut() {
        status.reserved_for = Some(
            (0..crate::dra::RESERVED_FOR_MAX_SIZE)
                .map(|i| ResourceClaimConsumerReference {
                    api_group: None,
                    resource: "pods".into(),
                    name: format!("p{i}"),
                    uid: format!("u{i}"),
                })
                .collect(),
        );
    }
    f.add_claim(full);
    assert_eq!(f.unresolvable(&pod_using("late", &["full"])), CLAIM_IN_USE);
}

#[test]
fn allocation_modes_and_first_available() {
    let f = fixture().with_slices(&["n1"], 2);
    f.add_claim(claim_with(
        "all",
        vec![exactly("gpus", DRIVER, Some(ALLOCATION_MODE_ALL), None)],
    ));
    let all = f.claims_of(&pod_using("p", &["all"]));
    assert_eq!(
        results(&f.plugin.filter(&all, &node("n1")).expect("all")),
        [triple("gpus", "n1", "gpu-0"), triple("gpus", "n1", "gpu-1")]
    );
    let sub = |name: &str, count: i64| DeviceSubRequest {
        name: name.into(),
        device_class_name: DRIVER.into(),
        count: Some(count),
        ..DeviceSubRequest::default()
    };
    f.add_claim(claim_with(
        "choice",
        vec![DeviceRequest {
            name: "gpu".into(),
            exactly: None,
            first_available: Some(vec![sub("three", 3), sub("one", 1)]),
        }],
    ));
    let choice = f.claims_of(&pod_using("p", &["choice"]));
    assert_eq!(
        results(
            &f.plugin
                .filter(&choice, &node("n1"))
                .expect("second choice")
        ),
        [triple("gpu/one", "n1", "gpu-0")]
    );
}

#[test]
fn class_and_request_selectors_pick_the_devices() {
    let f = fixture().with_slices(&["n1"], 2);
    let mut other = device_class();
    other.metadata.name = Some("other".into());
    other.spec.selectors = Some(vec![DeviceSelector {
        cel: Some(CELDeviceSelector {
            expression: "device.driver == \"other.example.com\"".into(),
        }),
    }]);
    f.classes.add(Arc::new(other)).expect("class");
    f.add_claim(claim_with(
        "wrong",
        vec![exactly("gpu", "other", None, None)],
    ));
    let wrong = f.claims_of(&pod_using("p", &["wrong"]));
    assert!(f.plugin.filter(&wrong, &node("n1")).is_err());
    let mut second = exactly("gpu", DRIVER, None, None);
    if let Some(e) = second.exactly.as_mut() {
        e.selectors = Some(vec![DeviceSelector {
            cel: Some(CELDeviceSelector {
                expression: format!("device.attributes[\"{DRIVER}\"].index == 1"),
            }),
        }]);
    }
    f.add_claim(claim_with("second", vec![second]));
    let state = f.claims_of(&pod_using("p", &["second"]));
    assert_eq!(
        results(&f.plugin.filter(&state, &node("n1")).expect("gpu-1")),
        [triple("gpu", "n1", "gpu-1")]
    );
}

/// Republishes `node`'s slice of two devices with each named device's taints.
fn taint_devices(f: &Fixture, node_name: &str, taints: &[(&str, Vec<DeviceTaint>)]) {
    let mut slice = node_resource_slice(&node(node_name), 2);
    for d in slice.spec.devices.iter_mut().flatten() {
        d.taints = taints
            .iter()
            .find(|(name, _)| *name == d.name)
            .map(|(_, t)| t.clone());
    }
    f.slices.update(Arc::new(slice)).expect("slice");
}

fn device_taint(effect: &str) -> DeviceTaint {
    DeviceTaint {
        key: "example.com/taint".into(),
        value: None,
        effect: effect.into(),
        time_added: None,
    }
}

#[test]
fn untolerated_device_taints_keep_devices_from_being_allocated() {
    let f = fixture().with_slices(&["n1"], 2);
    taint_devices(
        &f,
        "n1",
        &[
            ("gpu-0", vec![device_taint("NoSchedule")]),
            ("gpu-1", vec![device_taint("NoExecute")]),
        ],
    );
    f.add_claim(claim("plain", 1));
    let plain = f.claims_of(&pod_using("p", &["plain"]));
    assert_eq!(
        f.plugin.filter(&plain, &node("n1")),
        Err(vec![ERR_REASON_CANNOT_ALLOCATE.to_owned()]),
        "both devices are tainted"
    );

    let mut tolerating = exactly("gpu", DRIVER, None, None);
    if let Some(e) = tolerating.exactly.as_mut() {
        e.tolerations = Some(vec![DeviceToleration {
            key: Some("example.com/taint".into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            ..DeviceToleration::default()
        }]);
    }
    f.add_claim(claim_with("tolerating", vec![tolerating]));
    let state = f.claims_of(&pod_using("p", &["tolerating"]));
    let fit = f
        .plugin
        .filter(&state, &node("n1"))
        .expect("gpu-1 is tolerated");
    assert_eq!(results(&fit), [triple("gpu", "n1", "gpu-1")]);
    // The allocation carries the request's tolerations, as taint eviction reads them.
    let allocation = fit.claims[0].1.clone().expect("new allocation");
    let result = &allocation
        .devices
        .and_then(|d| d.results)
        .unwrap_or_default()[0];
    assert_eq!(
        result
            .tolerations
            .as_deref()
            .map(|t| t[0].effect.as_deref()),
        Some(Some("NoExecute"))
    );

    // The None effect only informs.
    taint_devices(
        &f,
        "n1",
        &[
            ("gpu-0", vec![device_taint("None")]),
            ("gpu-1", vec![device_taint("NoExecute")]),
        ],
    );
    let plain = f.claims_of(&pod_using("p", &["plain"]));
    assert_eq!(
        results(
            &f.plugin
                .filter(&plain, &node("n1"))
                .expect("gpu-0 is usable")
        ),
        [triple("gpu", "n1", "gpu-0")]
    );
}

#[test]
fn reserved_allocations_are_in_flight_until_pre_bind_ends() {
    let f = fixture().with_slices(&["n1"], 1);
    f.add_claim(claim("a", 1));
    f.add_claim(claim("b", 1));
    let a = f.claims_of(&pod_using("pa", &["a"]));
    let fit = f.plugin.filter(&a, &node("n1")).expect("fits");
    f.plugin.reserve(&fit);
    assert_eq!(f.plugin.in_flight_count(), 1);
    assert_eq!(
        f.unresolvable(&pod_using("again", &["a"])),
        "resource claim ns/a is in the process of being allocated"
    );
    // The device in flight is not free for another claim.
    let b = f.claims_of(&pod_using("pb", &["b"]));
    assert!(f.plugin.filter(&b, &node("n1")).is_err());
    f.plugin.unreserve(&fit);
    assert_eq!(f.plugin.in_flight_count(), 0);
    let b = f.claims_of(&pod_using("pb", &["b"]));
    assert!(f.plugin.filter(&b, &node("n1")).is_ok());
}

#[tokio::test]
async fn pre_bind_writes_the_finalizer_then_allocation_and_reservation() {
    let f = fixture().with_slices(&["n1"], 1);
    f.add_claim(claim("c", 1));
    let pod = pod_using("p", &["c"]);
    let state = f.claims_of(&pod);
    let fit = f.plugin.filter(&state, &node("n1")).expect("fits");
    f.plugin.reserve(&fit);
    f.plugin.pre_bind(&pod, &fit).await.expect("written");
    assert_eq!(f.plugin.in_flight_count(), 0);
    assert_eq!(
        f.client.actions(),
        ["update-claim ns/c", "update-claim-status ns/c"]
    );
    let written = f.client.claim("ns/c").expect("claim");
    assert_eq!(
        written.metadata.finalizers,
        Some(vec![DELETE_PROTECTION_FINALIZER.to_owned()])
    );
    let status = written.status.clone().unwrap_or_default();
    assert_eq!(status.allocation, fit.claims[0].1);
    assert_eq!(status.reserved_for, Some(vec![consumer_reference(&pod)]));
    assert_eq!(
        status.reserved_for.unwrap_or_default()[0],
        ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".into(),
            name: "p".into(),
            uid: "uid-p".into(),
        }
    );
    // The informer has not caught up: the written claim is assumed, so the device stays
    // taken and the pod's claim counts as allocated and reserved.
    f.add_claim(claim("d", 1));
    let other = f.claims_of(&pod_using("q", &["d"]));
    assert!(f.plugin.filter(&other, &node("n1")).is_err());
    let again = f.claims_of(&pod);
    let fit_again = f
        .plugin
        .filter(&again, &node("n1"))
        .expect("its allocation");
    assert!(fit_again.claims[0].1.is_none());
    f.plugin
        .pre_bind(&pod, &fit_again)
        .await
        .expect("nothing to write");
    assert_eq!(f.client.actions().len(), 2, "already reserved: no write");
}

#[tokio::test]
async fn pre_bind_adds_a_consumer_to_a_shared_claim() {
    let f = fixture().with_slices(&["n1"], 1);
    let mut shared = allocated(claim("shared", 1), "n1", &["gpu-0"]);
    shared.metadata.finalizers = Some(vec![DELETE_PROTECTION_FINALIZER.to_owned()]);
    f.add_claim(shared);
    let pod = pod_using("second", &["shared"]);
    let state = f.claims_of(&pod);
    let fit = f.plugin.filter(&state, &node("n1")).expect("fits its node");
    f.plugin.pre_bind(&pod, &fit).await.expect("reserved");
    assert_eq!(f.client.actions(), ["update-claim-status ns/shared"]);
    let status = f
        .client
        .claim("ns/shared")
        .and_then(|c| c.status)
        .unwrap_or_default();
    assert_eq!(status.reserved_for, Some(vec![consumer_reference(&pod)]));
}

#[tokio::test]
async fn a_failed_write_is_the_plugins_error_and_releases_the_devices() {
    let f = fixture().with_slices(&["n1"], 1);
    f.add_claim(claim("c", 1));
    let pod = pod_using("p", &["c"]);
    let state = f.claims_of(&pod);
    let fit = f.plugin.filter(&state, &node("n1")).expect("fits");
    f.plugin.reserve(&fit);
    f.client.fail_next(kube::Error::Api(
        kcm_machinery::controller::api_status::internal_error("etcd is sad").boxed(),
    ));
    let err = f.plugin.pre_bind(&pod, &fit).await.expect_err("failed");
    assert!(err.starts_with("binding claim ns/c: "), "{err}");
    assert_eq!(f.plugin.in_flight_count(), 0);
}
