//! Unit tests of the PV protection controller: a bare cache and the recording fake client, the cases of upstream's `pv_protection_controller_test.go`.

use kcm_machinery::controller::api_status;
use kcm_testing::{MetaBuilder, PvBuilder, pv};

use super::*;
use crate::volume::client::{Action, FakeStorageClient, Verb};
use crate::volume::test_support::run_until;

fn deleted_at() -> jiff::Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

/// Upstream's `pv()`: `default-pv`, nothing else.
fn a_pv() -> PvBuilder {
    pv("default-pv")
}

fn protected(b: PvBuilder) -> PvBuilder {
    b.finalizers(&[PV_PROTECTION_FINALIZER])
}

fn deleted(b: PvBuilder) -> PvBuilder {
    b.deleted_at(deleted_at())
}

/// The update upstream expects: the volume as sent.
fn update(b: PvBuilder) -> Action {
    Action::UpdateVolume(b.build())
}

#[tokio::test(start_paused = true)]
async fn finalizer_changes_as_upstream() {
    struct Case {
        name: &'static str,
        volume: PvBuilder,
        /// Update calls that fail before one succeeds.
        failures: usize,
        want: Vec<Action>,
    }
    let cases = [
        Case {
            name: "PV without finalizer -> finalizer is added",
            volume: a_pv(),
            failures: 0,
            want: vec![update(protected(a_pv()))],
        },
        Case {
            name: "PV with finalizer -> no action",
            volume: protected(a_pv()),
            failures: 0,
            want: vec![],
        },
        Case {
            name: "saving PV finalizer fails -> controller retries",
            volume: a_pv(),
            failures: 2,
            want: vec![
                update(protected(a_pv())),
                update(protected(a_pv())),
                update(protected(a_pv())),
            ],
        },
        Case {
            name: "deleted PV with finalizer -> finalizer is removed",
            volume: deleted(protected(a_pv())),
            failures: 0,
            want: vec![update(deleted(a_pv()))],
        },
        Case {
            name: "finalizer removal fails -> controller retries",
            volume: deleted(protected(a_pv())),
            failures: 2,
            want: vec![
                update(deleted(a_pv())),
                update(deleted(a_pv())),
                update(deleted(a_pv())),
            ],
        },
        Case {
            name: "deleted PV with finalizer + PV is bound -> finalizer is not removed",
            volume: deleted(protected(a_pv().phase("Bound"))),
            failures: 0,
            want: vec![],
        },
        Case {
            name: "deleted PV with finalizer + PV is released -> finalizer is removed",
            volume: deleted(protected(a_pv().phase("Released"))),
            failures: 0,
            want: vec![update(deleted(a_pv().phase("Released")))],
        },
    ];
    for case in cases {
        let volumes = Indexer::new();
        let client = Arc::new(FakeStorageClient::new());
        if case.failures > 0 {
            client.fail(
                Verb::UpdateVolume,
                case.failures,
                api_status::internal_error("Mock error"),
            );
        }
        let controller = PvProtectionController::with_cache(
            volumes.clone(),
            client.clone(),
            PvProtectionControllerOptions::default(),
        );
        let volume = case.volume.build();
        volumes.add(Arc::new(volume.clone())).expect("add");
        controller.event_handlers().volume_added_updated(&volume);
        run_until(&client, case.want.len(), || async {
            !controller.queue().is_empty() && controller.process_next_work_item().await
        })
        .await;
        assert_eq!(client.actions(), case.want, "{}", case.name);
    }
}

/// A volume the cache no longer holds is left alone.
#[tokio::test]
async fn a_volume_gone_from_the_cache_is_ignored() {
    let client = Arc::new(FakeStorageClient::new());
    let controller = PvProtectionController::with_cache(
        Indexer::new(),
        client.clone(),
        PvProtectionControllerOptions::default(),
    );
    controller.sync("gone").await.expect("sync");
    assert!(client.actions().is_empty());
}
