//! Unit tests of the mirroring controller (upstream `endpointslicemirroring_controller_test.go` and `reconciler_test.go`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::EndpointAddress;
use kcm_machinery::events::FakeRecorder;
use kcm_testing::prelude::*;

use super::*;
use crate::endpointslicemirroring::{INVALID_IP_ADDRESS, TOO_MANY_ADDRESSES_TO_MIRROR};
use crate::endpointsliceutil::{
    FakeEndpointSliceClient, LABEL_MANAGED_BY, LABEL_SERVICE_NAME, LABEL_SKIP_MIRROR,
    LEADER_ELECTION_RECORD_ANNOTATION, SliceAction,
};

const NS: &str = "ns";

struct Fixture {
    client: Arc<FakeEndpointSliceClient>,
    recorder: FakeRecorder,
    endpoints: Indexer<Endpoints>,
    services: Indexer<Service>,
    slices: Indexer<EndpointSlice>,
    controller: EndpointSliceMirroringController,
}

fn fixture_with(options: EndpointSliceMirroringOptions) -> Fixture {
    let client = Arc::new(FakeEndpointSliceClient::new());
    let recorder = FakeRecorder::new();
    let (endpoints, services, slices) = (Indexer::new(), Indexer::new(), Indexer::new());
    let controller = EndpointSliceMirroringController::with_caches(
        endpoints.clone(),
        services.clone(),
        slices.clone(),
        client.clone(),
        Arc::new(recorder.clone()),
        options,
    );
    Fixture {
        client,
        recorder,
        endpoints,
        services,
        slices,
        controller,
    }
}

fn fixture() -> Fixture {
    fixture_with(EndpointSliceMirroringOptions::default())
}

impl Fixture {
    fn observe_writes(&self) {
        let stored: Vec<Arc<EndpointSlice>> =
            self.client.slices().into_iter().map(Arc::new).collect();
        self.slices.replace(stored).expect("cache");
    }

    async fn sync(&self) -> Result<()> {
        self.controller.sync(&format!("{NS}/svc")).await
    }
}

fn selectorless() -> Service {
    service("svc")
        .namespace(NS)
        .uid("svc-uid")
        .port(80, 8080)
        .build()
}

fn custom_endpoints() -> EndpointsBuilder {
    endpoints("svc")
        .namespace(NS)
        .uid("ep-uid")
        .resource_version("1")
        .labels(&[("app", "legacy")])
        .subset(&["10.0.0.1", "10.0.0.2"], &["10.0.0.3"], &[("http", 8080)])
}

/// Upstream's `TestSyncEndpoints` table, in the cases that matter.
#[tokio::test]
async fn what_gets_mirrored() {
    struct Case {
        name: &'static str,
        service: Option<Service>,
        endpoints: Endpoints,
        want_slices: usize,
    }
    let cases = [
        Case {
            name: "no Service",
            service: None,
            endpoints: custom_endpoints().build(),
            want_slices: 0,
        },
        Case {
            name: "Service with selector",
            service: Some(service("svc").namespace(NS).selector(&[("a", "b")]).build()),
            endpoints: custom_endpoints().build(),
            want_slices: 0,
        },
        Case {
            name: "selector-less Service",
            service: Some(selectorless()),
            endpoints: custom_endpoints().build(),
            want_slices: 1,
        },
        Case {
            name: "skip-mirror label",
            service: Some(selectorless()),
            endpoints: custom_endpoints().label(LABEL_SKIP_MIRROR, "true").build(),
            want_slices: 0,
        },
        Case {
            name: "leader election lock",
            service: Some(selectorless()),
            endpoints: custom_endpoints()
                .annotation(LEADER_ELECTION_RECORD_ANNOTATION, "{}")
                .build(),
            want_slices: 0,
        },
        Case {
            name: "two port lists",
            service: Some(selectorless()),
            endpoints: custom_endpoints()
                .subset(&["10.0.0.9"], &[], &[("https", 8443)])
                .build(),
            want_slices: 2,
        },
        Case {
            name: "dual stack subset",
            service: Some(selectorless()),
            endpoints: endpoints("svc")
                .namespace(NS)
                .subset(&["10.0.0.1", "fd00::1"], &[], &[("http", 80)])
                .build(),
            want_slices: 2,
        },
        Case {
            name: "no subsets",
            service: Some(selectorless()),
            endpoints: endpoints("svc").namespace(NS).build(),
            want_slices: 0,
        },
    ];
    for case in cases {
        let fx = fixture();
        if let Some(svc) = case.service {
            fx.services.add(Arc::new(svc)).expect("cache");
        }
        fx.endpoints.add(Arc::new(case.endpoints)).expect("cache");
        fx.sync().await.expect(case.name);
        assert_eq!(fx.client.slices().len(), case.want_slices, "{}", case.name);
    }
}

/// The mirrored slice: labels (the Endpoints' plus the reserved ones), owner, ports, ready
/// and not-ready endpoints; then steady state (no write) and label changes (one update).
#[tokio::test]
async fn mirrored_slice_content_and_minimal_writes() {
    let fx = fixture();
    fx.services.add(Arc::new(selectorless())).expect("cache");
    fx.endpoints.add(custom_endpoints().arc()).expect("cache");
    fx.sync().await.expect("sync");
    let slice = &fx.client.slices()[0];
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("legacy"));
    assert_eq!(
        labels.get(LABEL_SERVICE_NAME).map(String::as_str),
        Some("svc")
    );
    assert_eq!(
        labels.get(LABEL_MANAGED_BY).map(String::as_str),
        Some(MANAGED_BY)
    );
    assert_eq!(
        slice.metadata.owner_references.clone().unwrap_or_default()[0].kind,
        "Endpoints"
    );
    assert_eq!(slice.ports.clone().unwrap_or_default()[0].port, Some(8080));
    let ready: Vec<(String, Option<bool>)> = slice
        .endpoints
        .iter()
        .flatten()
        .map(|e| {
            (
                e.addresses[0].clone(),
                e.conditions.as_ref().and_then(|c| c.ready),
            )
        })
        .collect();
    assert_eq!(
        ready,
        [
            ("10.0.0.1".to_owned(), Some(true)),
            ("10.0.0.2".to_owned(), Some(true)),
            ("10.0.0.3".to_owned(), Some(false))
        ]
    );

    fx.observe_writes();
    fx.sync().await.expect("sync");
    assert_eq!(fx.client.actions().len(), 1, "nothing changed");

    fx.endpoints
        .update(custom_endpoints().labels(&[("app", "renamed")]).arc())
        .expect("cache");
    fx.sync().await.expect("sync");
    assert!(matches!(
        fx.client.actions().last(),
        Some(SliceAction::Update(_))
    ));
    assert_eq!(fx.controller.metrics().changes("update"), 1);
}

/// Two slices for one port list: the extra one goes; a subset over the limit is cut with a
/// warning; invalid IPs are skipped with a warning.
#[tokio::test]
async fn extras_limits_and_invalid_addresses() {
    let fx = fixture_with(EndpointSliceMirroringOptions {
        max_endpoints_per_subset: 2,
        ..EndpointSliceMirroringOptions::default()
    });
    fx.services.add(Arc::new(selectorless())).expect("cache");
    let mut ep = custom_endpoints().build();
    if let Some(subset) = ep.subsets.as_mut().and_then(|s| s.first_mut()) {
        subset.addresses.get_or_insert_default().insert(
            0,
            EndpointAddress {
                ip: "not-an-ip".to_owned(),
                ..EndpointAddress::default()
            },
        );
    }
    fx.endpoints.add(Arc::new(ep)).expect("cache");
    fx.sync().await.expect("sync");
    assert_eq!(
        fx.client.slices()[0].endpoints.as_ref().map_or(0, Vec::len),
        2,
        "capped at the limit"
    );
    assert_eq!(
        fx.recorder.reasons(),
        [INVALID_IP_ADDRESS, TOO_MANY_ADDRESSES_TO_MIRROR]
    );
    assert_eq!(
        fx.recorder.events()[1].message,
        "A max of 2 addresses can be mirrored to EndpointSlices per Endpoints subset. 2 addresses were skipped"
    );

    // A duplicate slice for the same port list (e.g. from an earlier run) is deleted.
    let mut dup = fx.client.slices()[0].clone();
    dup.metadata.name = Some("svc-dup".to_owned());
    dup.metadata.uid = Some("dup".to_owned());
    fx.client.insert(dup);
    fx.observe_writes();
    fx.sync().await.expect("sync");
    assert_eq!(fx.client.slices().len(), 1);
}

/// A Service gaining a selector, or losing its Endpoints, takes the mirrored slices away.
#[tokio::test]
async fn mirrored_slices_are_deleted_when_no_longer_mirrored() {
    let fx = fixture();
    fx.services.add(Arc::new(selectorless())).expect("cache");
    fx.endpoints.add(custom_endpoints().arc()).expect("cache");
    fx.sync().await.expect("sync");
    fx.observe_writes();
    fx.services
        .update(
            service("svc")
                .namespace(NS)
                .uid("svc-uid")
                .selector(&[("a", "b")])
                .arc(),
        )
        .expect("cache");
    fx.sync().await.expect("sync");
    assert!(fx.client.slices().is_empty());
    assert!(matches!(
        fx.client.actions().last(),
        Some(SliceAction::Delete(_))
    ));
}

/// A sync before the cache saw the controller's own creation is refused.
#[tokio::test]
async fn stale_cache_is_refused() {
    let fx = fixture();
    fx.services.add(Arc::new(selectorless())).expect("cache");
    fx.endpoints.add(custom_endpoints().arc()).expect("cache");
    fx.sync().await.expect("sync");
    assert!(matches!(fx.sync().await, Err(Error::StaleCache)));
}

/// Handlers: Endpoints to mirror and selector-less Services queue their key; Services with a
/// selector, skip-mirror Endpoints do not; a selector appearing does.
#[tokio::test]
async fn handlers_queue_what_may_need_mirroring() {
    let fx = fixture();
    let h = fx.controller.event_handlers();
    ResourceEventHandler::<Endpoints>::on_add(
        h,
        endpoints("a")
            .namespace(NS)
            .label(LABEL_SKIP_MIRROR, "true")
            .arc(),
        false,
    );
    ResourceEventHandler::<Service>::on_add(
        h,
        service("b").namespace(NS).selector(&[("x", "y")]).arc(),
        false,
    );
    assert_eq!(fx.controller.queue().len(), 0);
    ResourceEventHandler::<Endpoints>::on_add(h, endpoints("c").namespace(NS).arc(), false);
    ResourceEventHandler::<Service>::on_add(h, service("d").namespace(NS).arc(), false);
    ResourceEventHandler::<Service>::on_update(
        h,
        service("e").namespace(NS).arc(),
        service("e").namespace(NS).selector(&[("x", "y")]).arc(),
    );
    assert_eq!(fx.controller.queue().len(), 3);
}
