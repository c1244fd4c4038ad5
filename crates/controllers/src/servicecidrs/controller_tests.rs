//! Unit tests of the ServiceCIDR controller: bare caches, the recording fake client and an injected clock, with the cases of upstream's `servicecidrs_controller_test.go` (`TestControllerSync`, `TestCanDeleteCIDR`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::networking::v1::{
    IPAddressSpec, ParentReference, ServiceCIDRSpec, ServiceCIDRStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kcm_machinery::events::FakeRecorder;

use super::*;
use crate::servicecidrs::client::{FakeServiceCidrClient, RecordedPatch};

fn now() -> Timestamp {
    "2026-06-01T12:00:00Z".parse().expect("time")
}

fn cidr(name: &str, cidrs: &[&str]) -> ServiceCIDR {
    ServiceCIDR {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            resource_version: Some("3".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceCIDRSpec {
            cidrs: Some(cidrs.iter().map(|c| (*c).to_owned()).collect()),
        }),
        status: None,
    }
}

fn protected(mut c: ServiceCIDR) -> ServiceCIDR {
    c.metadata.finalizers = Some(vec![SERVICE_CIDR_PROTECTION_FINALIZER.to_owned()]);
    c
}

fn ready(mut c: ServiceCIDR) -> ServiceCIDR {
    c.status = Some(ServiceCIDRStatus {
        conditions: Some(vec![Condition {
            type_: "Ready".to_owned(),
            status: "True".to_owned(),
            reason: String::new(),
            message: READY_MESSAGE.to_owned(),
            last_transition_time: Time(now()),
            observed_generation: None,
        }]),
    });
    c
}

fn deleted(mut c: ServiceCIDR, seconds_ago: i64) -> ServiceCIDR {
    let at = now() - jiff::SignedDuration::from_secs(seconds_ago);
    c.metadata.deletion_timestamp = Some(Time(at));
    c
}

fn address(ip: &str, managed: bool) -> IPAddress {
    IPAddress {
        metadata: ObjectMeta {
            name: Some(ip.to_owned()),
            labels: managed.then(|| {
                BTreeMap::from([(
                    "ipaddress.kubernetes.io/managed-by".to_owned(),
                    "ipallocator.k8s.io".to_owned(),
                )])
            }),
            ..ObjectMeta::default()
        },
        spec: IPAddressSpec {
            parent_ref: ParentReference {
                group: Some(String::new()),
                resource: "services".to_owned(),
                namespace: Some("default".to_owned()),
                name: "web".to_owned(),
            },
        },
    }
}

struct Fixture {
    controller: ServiceCidrController,
    cidrs: Indexer<ServiceCIDR>,
    addresses: Indexer<IPAddress>,
    client: Arc<FakeServiceCidrClient>,
    recorder: FakeRecorder,
}

fn fixture(cidrs_in: Vec<ServiceCIDR>, addresses_in: Vec<IPAddress>) -> Fixture {
    let cidrs = Indexer::new();
    let addresses = Indexer::new();
    for c in cidrs_in {
        cidrs.add(Arc::new(c)).expect("add");
    }
    for a in addresses_in {
        addresses.add(Arc::new(a)).expect("add");
    }
    let client = Arc::new(FakeServiceCidrClient::new());
    let recorder = FakeRecorder::new();
    let controller = ServiceCidrController::with_cache(
        cidrs.clone(),
        addresses.clone(),
        client.clone(),
        Arc::new(recorder.clone()),
        ServiceCidrControllerOptions::default(),
    )
    .with_clock(Arc::new(now));
    Fixture {
        controller,
        cidrs,
        addresses,
        client,
        recorder,
    }
}

fn finalizer_patch(list: serde_json::Value) -> RecordedPatch {
    RecordedPatch {
        name: "c".to_owned(),
        status: false,
        patch: json!({"metadata": {"resourceVersion": "3", "finalizers": list}}),
    }
}

/// Upstream's `TestControllerSync` cases.
#[tokio::test]
async fn sync_as_upstream() {
    // A new ServiceCIDR gets the finalizer and Ready=True.
    let f = fixture(vec![cidr("c", &["10.0.0.0/24"])], vec![]);
    f.controller.sync("c").await.expect("sync");
    let patches = f.client.patches();
    assert_eq!(
        patches[0],
        finalizer_patch(json!([SERVICE_CIDR_PROTECTION_FINALIZER]))
    );
    assert!(patches[1].status);
    assert_eq!(
        patches[1].patch,
        json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "",
            "message": READY_MESSAGE, "lastTransitionTime": "2026-06-01T12:00:00Z"}]}})
    );

    // Protected and Ready already: nothing to write.
    let f = fixture(vec![ready(protected(cidr("c", &["10.0.0.0/24"])))], vec![]);
    f.controller.sync("c").await.expect("sync");
    assert!(f.client.patches().is_empty());

    // Gone: nothing.
    let f = fixture(vec![], vec![]);
    f.controller.sync("c").await.expect("sync");
    assert!(f.client.patches().is_empty());

    // Deleted, no address: the finalizer goes once the grace period has passed.
    let f = fixture(
        vec![deleted(protected(cidr("c", &["10.0.0.0/24"])), 11)],
        vec![],
    );
    f.controller.sync("c").await.expect("sync");
    assert_eq!(f.client.patches(), [finalizer_patch(json!(null))]);

    // Deleted, an address only it contains: Ready=False, Terminating, finalizer kept.
    let f = fixture(
        vec![ready(deleted(protected(cidr("c", &["10.0.0.0/24"])), 60))],
        vec![address("10.0.0.1", true)],
    );
    f.controller.sync("c").await.expect("sync");
    let patches = f.client.patches();
    assert_eq!(patches.len(), 1);
    assert_eq!(
        patches[0].patch["status"]["conditions"][0],
        json!({"type": "Ready", "status": "False", "reason": "Terminating",
            "message": TERMINATING_MESSAGE, "lastTransitionTime": "2026-06-01T12:00:00Z"})
    );
    assert!(f.recorder.events().is_empty());
}

/// Within the grace period the finalizer stays and the name is queued for later.
#[tokio::test(start_paused = true)]
async fn a_fresh_deletion_waits_for_the_grace_period() {
    let clock = Arc::new(Mutex::new(now()));
    let f = fixture(
        vec![deleted(protected(cidr("c", &["10.0.0.0/24"])), 3)],
        vec![],
    );
    let tick = Arc::clone(&clock);
    let controller = f
        .controller
        .with_clock(Arc::new(move || *tick.lock().expect("clock")));
    controller.sync("c").await.expect("sync");
    assert!(f.client.patches().is_empty());
    assert_eq!(controller.queue().len(), 0);
    tokio::time::sleep(Duration::from_secs(7) + Duration::from_millis(10)).await;
    assert_eq!(controller.queue().len(), 1, "queued after the 7 s left");
    *clock.lock().expect("clock") = now() + jiff::SignedDuration::from_secs(8);
    assert!(controller.process_next_work_item().await);
    assert_eq!(f.client.patches(), [finalizer_patch(json!(null))]);
}

/// Upstream's `TestCanDeleteCIDR` cases.
#[tokio::test]
async fn can_delete_as_upstream() {
    let target = || deleted(protected(cidr("c", &["10.0.0.0/24"])), 60);
    let cases: Vec<(&str, Vec<ServiceCIDR>, Vec<IPAddress>, bool)> = vec![
        ("empty", vec![target()], vec![], true),
        (
            "an address only it contains",
            vec![target()],
            vec![address("10.0.0.1", true)],
            false,
        ),
        (
            "an address not managed by the allocator",
            vec![target()],
            vec![address("10.0.0.1", false)],
            true,
        ),
        (
            "an address outside it",
            vec![target()],
            vec![address("10.0.1.1", true)],
            true,
        ),
        (
            "a larger ServiceCIDR contains it",
            vec![target(), cidr("big", &["10.0.0.0/16"])],
            vec![address("10.0.0.1", true)],
            true,
        ),
        (
            "an identical ServiceCIDR",
            vec![target(), cidr("twin", &["10.0.0.0/24"])],
            vec![address("10.0.0.1", true)],
            true,
        ),
        (
            "a smaller ServiceCIDR holds the address",
            vec![target(), cidr("small", &["10.0.0.0/28"])],
            vec![address("10.0.0.1", true)],
            true,
        ),
        (
            "a smaller ServiceCIDR elsewhere",
            vec![target(), cidr("small", &["10.0.0.128/28"])],
            vec![address("10.0.0.1", true)],
            false,
        ),
    ];
    for (name, cidrs, addresses, want) in cases {
        let f = fixture(cidrs, addresses);
        let c = f.cidrs.get_by_key("c").expect("target");
        assert_eq!(f.controller.can_delete(&c), want, "{name}");
    }
}

/// Address events queue the ServiceCIDRs containing them; a new ServiceCIDR queues those it
/// overlaps.
#[tokio::test]
async fn events_queue_the_ranges_concerned() {
    let f = fixture(
        vec![
            cidr("a", &["10.0.0.0/24"]),
            cidr("b", &["10.0.0.0/16"]),
            cidr("c", &["192.168.0.0/24"]),
        ],
        vec![],
    );
    let handlers = f.controller.event_handlers();
    handlers.address_changed(&address("10.0.0.7", true));
    assert_eq!(f.controller.queue().len(), 2, "a and b");
    handlers.address_changed(&address("192.168.0.9", false));
    assert_eq!(f.controller.queue().len(), 2, "unmanaged: nothing");
    let f = fixture(
        vec![cidr("a", &["10.0.0.0/24"]), cidr("c", &["192.168.0.0/24"])],
        vec![],
    );
    let added = cidr("new", &["10.0.0.0/8"]);
    f.cidrs.add(Arc::new(added.clone())).expect("add");
    f.controller.event_handlers().cidr_added(&added);
    assert_eq!(f.controller.queue().len(), 2, "new and a");
    let _ = &f.addresses;
}
