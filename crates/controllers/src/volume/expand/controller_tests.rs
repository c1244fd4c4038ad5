//! Unit tests of the expand controller: a bare claim cache, the recording fake client and recorder, the cases of upstream's `expand_controller_test.go` that apply without in-tree plugins.

use kcm_machinery::events::FakeRecorder;
use kcm_testing::{MetaBuilder, PvBuilder, PvcBuilder, pv, pvc, quantities};

use super::*;
use crate::volume::client::{Action, FakeStorageClient, Verb};

const UID: &str = "foobar-uid";

/// A claim `default/foobar` of `request`, bound to `pv-foobar` with status capacity `capacity`.
fn claim(request: &str, capacity: &str) -> PvcBuilder {
    let capacity = capacity.to_owned();
    pvc("foobar")
        .namespace("default")
        .uid(UID)
        .storage(request)
        .bound_to("pv-foobar")
        .with(move |c| {
            c.status.get_or_insert_default().capacity =
                Some(quantities(&[("storage", capacity.as_str())]));
        })
}

/// A CSI volume of `capacity` bound to `default/foobar` with `uid`.
fn csi_volume(capacity: &str, uid: &str) -> PvBuilder {
    pv("pv-foobar")
        .capacity(capacity)
        .claim_ref("default", "foobar", uid)
        .phase("Bound")
        .with(|v| {
            v.spec.get_or_insert_default().csi =
                Some(k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
                    driver: "sim.csi.kcm.io".into(),
                    volume_handle: "pv-foobar".into(),
                    ..Default::default()
                });
        })
}

struct Fixture {
    controller: ExpandController,
    claims: Indexer<PersistentVolumeClaim>,
    client: Arc<FakeStorageClient>,
    recorder: Arc<FakeRecorder>,
}

fn fixture() -> Fixture {
    let claims = Indexer::new();
    let client = Arc::new(FakeStorageClient::new());
    let recorder = Arc::new(FakeRecorder::new());
    let controller = ExpandController::with_cache(
        claims.clone(),
        client.clone(),
        recorder.clone(),
        ExpandControllerOptions::default(),
    );
    Fixture {
        controller,
        claims,
        client,
        recorder,
    }
}

#[tokio::test]
async fn sync_hands_grown_claims_to_the_external_resizer() {
    struct Case {
        name: &'static str,
        claim: PvcBuilder,
        volume: Option<PvBuilder>,
        want_error: bool,
        want_events: Vec<&'static str>,
    }
    let cases = [
        Case {
            name: "when pvc has no PV binding",
            claim: claim("2Gi", "1Gi"),
            volume: Some(csi_volume("1Gi", "other-uid")),
            want_error: true,
            want_events: vec![],
        },
        Case {
            name: "when the PV is missing",
            claim: claim("2Gi", "1Gi"),
            volume: None,
            want_error: true,
            want_events: vec![],
        },
        Case {
            name: "csi volume with a grown request waits for the external resizer",
            claim: claim("2Gi", "1Gi"),
            volume: Some(csi_volume("1Gi", UID)),
            want_error: false,
            want_events: vec![EXTERNAL_EXPANDING],
        },
        Case {
            name: "request not above status capacity needs nothing",
            claim: claim("1Gi", "1Gi"),
            volume: Some(csi_volume("1Gi", UID)),
            want_error: false,
            want_events: vec![],
        },
        Case {
            name: "a request below status capacity needs nothing",
            claim: claim("1Gi", "2Gi"),
            volume: Some(csi_volume("2Gi", UID)),
            want_error: false,
            want_events: vec![],
        },
    ];
    for case in cases {
        let f = fixture();
        let claim = case.claim.build();
        f.claims.add(Arc::new(claim)).expect("add");
        if let Some(volume) = case.volume {
            f.client.insert_volume(volume.build());
        }
        let result = f.controller.sync("default/foobar").await;
        assert_eq!(
            result.is_err(),
            case.want_error,
            "{}: {result:?}",
            case.name
        );
        assert_eq!(f.recorder.reasons(), case.want_events, "{}", case.name);
        // Only the volume read: the external resizer writes claim and volume.
        assert_eq!(
            f.client.actions(),
            vec![Action::GetVolume("pv-foobar".into())],
            "{}",
            case.name
        );
    }
}

#[tokio::test]
async fn the_external_expanding_event_names_the_claim() {
    let f = fixture();
    f.claims
        .add(Arc::new(claim("2Gi", "1Gi").build()))
        .expect("add");
    f.client.insert_volume(csi_volume("1Gi", UID).build());
    f.controller.sync("default/foobar").await.expect("sync");
    let events = f.recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].type_, EventType::Normal);
    assert_eq!(
        events[0].message,
        "waiting for an external controller to expand this PVC"
    );
    assert_eq!(events[0].regarding.name.as_deref(), Some("foobar"));
    assert_eq!(
        events[0].regarding.kind.as_deref(),
        Some("PersistentVolumeClaim")
    );
}

#[tokio::test]
async fn a_claim_gone_from_the_cache_is_ignored() {
    let f = fixture();
    f.controller.sync("default/gone").await.expect("sync");
    assert!(f.client.actions().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failed_volume_read_is_retried_rate_limited() {
    let f = fixture();
    let c = claim("2Gi", "1Gi").build();
    f.claims.add(Arc::new(c.clone())).expect("add");
    f.client.insert_volume(csi_volume("1Gi", UID).build());
    f.client.fail(
        Verb::GetVolume,
        1,
        kcm_machinery::controller::api_status::internal_error("Mock error"),
    );
    f.controller.event_handlers().enqueue_claim(&c);
    assert!(f.controller.process_next_work_item().await);
    assert!(f.recorder.reasons().is_empty());
    crate::volume::test_support::run_until(&f.client, 2, || async {
        !f.controller.queue().is_empty() && f.controller.process_next_work_item().await
    })
    .await;
    assert_eq!(f.recorder.reasons(), vec![EXTERNAL_EXPANDING]);
}

#[tokio::test]
async fn only_bound_claims_whose_request_or_capacity_grew_are_queued() {
    let f = fixture();
    let handlers = f.controller.event_handlers();
    handlers.enqueue_claim(&pvc("pending").namespace("default").storage("1Gi").build());
    assert_eq!(
        f.controller.queue().len(),
        0,
        "a pending claim is not queued"
    );

    let old = claim("1Gi", "1Gi").build();
    handlers.claim_updated(&old, &claim("1Gi", "1Gi").build());
    assert_eq!(
        f.controller.queue().len(),
        0,
        "an unchanged claim is not queued"
    );
    handlers.claim_updated(&claim("2Gi", "1Gi").build(), &claim("1Gi", "1Gi").build());
    assert_eq!(
        f.controller.queue().len(),
        0,
        "a shrunk request is not queued"
    );

    handlers.claim_updated(&old, &claim("2Gi", "1Gi").build());
    assert_eq!(f.controller.queue().len(), 1, "a grown request is queued");
    let key = f.controller.queue().get().await.expect("key");
    assert_eq!(key, "default/foobar");
    f.controller.queue().done(&key);

    handlers.claim_updated(&claim("2Gi", "1Gi").build(), &claim("2Gi", "2Gi").build());
    assert_eq!(f.controller.queue().len(), 1, "a grown capacity is queued");
}
