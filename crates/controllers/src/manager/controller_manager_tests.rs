//! Wiring tests of `ControllerManager` with tokio's paused clock and an in-memory Lease: start
//! order, readiness, leader election hand-over, leadership loss, init failures.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::events::TokioClock;
use kcm_machinery::leaderelection::{MemoryLeaseLock, MemoryLeaseStore};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::manager::{ControllerDescriptor, ControllerRegistry, StartedController};

/// The manager's flags, parsed as `kcm run` would.
#[derive(Parser, Debug)]
#[command(args_override_self = true)]
struct Cli {
    #[command(flatten)]
    options: ManagerOptions,
}

/// Flags for tests: no HTTPS endpoint, short leases (lease 4s, renew 3s, retry 1s).
fn options(extra: &[&str]) -> ManagerOptions {
    let base = [
        "kcm-run",
        "--secure-port=0",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
    ];
    Cli::try_parse_from(base.iter().chain(extra))
        .expect("flags")
        .options
}

/// A client for an address nothing listens on: informers never sync.
fn unreachable_config() -> kube::Config {
    kube::Config::new("http://127.0.0.1:1".parse().expect("uri"))
}

/// What the test controllers did, in order.
#[derive(Clone, Default)]
struct Journal(Arc<Mutex<Vec<String>>>);

impl Journal {
    fn push(&self, entry: String) {
        self.0.lock().expect("journal").push(entry);
    }
    fn entries(&self) -> Vec<String> {
        self.0.lock().expect("journal").clone()
    }
    fn count(&self, entry: &str) -> usize {
        self.entries().iter().filter(|e| *e == entry).count()
    }
}

/// A controller that records `init`, `run` and `stop`, and runs until cancelled.
fn recording(name: &'static str, journal: &Journal) -> ControllerDescriptor {
    let journal = journal.clone();
    ControllerDescriptor::new(name, move |ctx: ControllerContext| {
        let journal = journal.clone();
        async move {
            journal.push(format!("init {name}"));
            let cancel = ctx.cancel.clone();
            Ok(Some(StartedController::new(async move {
                journal.push(format!("run {name}"));
                cancel.cancelled().await;
                // A worker finishing the item it holds.
                tokio::time::sleep(Duration::from_millis(300)).await;
                journal.push(format!("stop {name}"));
            })))
        }
    })
}

/// Polls `cond` every 10ms of (paused) tokio time, up to `limit`. Returns whether it held.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

fn status(manager: &RunningManager, endpoint: &str) -> (u16, String) {
    let checks = manager.health().endpoint(endpoint).expect("endpoint");
    let response = checks.respond(endpoint, Some("verbose"));
    (response.status, response.body)
}

async fn start_elected(
    registry: ControllerRegistry,
    lock: MemoryLeaseLock,
    identity: &str,
    cancel: &CancellationToken,
) -> RunningManager {
    ControllerManager::new(options(&[]), registry)
        .expect("manager")
        .with_kube_config(unreachable_config())
        .with_lease_lock(lock)
        .with_identity(identity)
        .with_wall_clock(Arc::new(TokioClock::starting_at(
            "2024-01-01T00:00:00Z".parse().expect("time"),
        )))
        .start(cancel.clone())
        .await
        .expect("start")
}

/// Starts `registry`'s controllers without leader election against an unreachable server.
async fn start_unelected(
    registry: ControllerRegistry,
    cancel: &CancellationToken,
) -> RunningManager {
    ControllerManager::new(options(&["--leader-elect=false"]), registry)
        .expect("manager")
        .with_kube_config(unreachable_config())
        .start(cancel.clone())
        .await
        .expect("start")
}

fn with_timeout<F: Future>(f: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(Duration::from_secs(120), f)
}

#[tokio::test(start_paused = true)]
async fn without_leader_election_controllers_start_after_every_init_and_stop_on_cancel() {
    let journal = Journal::default();
    let registry = ControllerRegistry::new()
        .with(recording("a-controller", &journal))
        .and_then(|r| r.with(recording("b-controller", &journal).with_aliases(&["b"])))
        .and_then(|r| r.with(recording("c-controller", &journal).disabled_by_default()))
        .and_then(|r| r.with(recording("d-controller", &journal)))
        .expect("registry");
    let manager = ControllerManager::new(
        options(&["--leader-elect=false", "--controllers=*,-b"]),
        registry,
    )
    .expect("manager")
    .with_kube_config(unreachable_config());
    assert_eq!(
        manager.enabled_controllers(),
        vec!["a-controller", "d-controller"]
    );
    let cancel = CancellationToken::new();
    let running = manager.start(cancel.clone()).await.expect("start");
    assert!(running.is_leader(), "no election: always running");
    assert!(
        running.local_addr().is_none(),
        "--secure-port=0 serves nothing"
    );

    assert!(
        eventually(Duration::from_secs(5), || journal.count("run d-controller")
            == 1)
        .await
    );
    let entries = journal.entries();
    assert_eq!(
        &entries[..2],
        ["init a-controller", "init d-controller"],
        "every init before any run: {entries:?}"
    );
    let (code, body) = status(&running, "readyz");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]informer-sync ok\n"), "{body}");
    assert!(body.contains("[+]a-controller ok\n"), "{body}");
    assert!(!body.contains("b-controller") && !body.contains("c-controller"));
    let text = running.metrics().encode().expect("metrics");
    assert!(
        text.contains(
            "running_managed_controllers{name=\"a-controller\",manager=\"kube-controller-manager\"} 1"
        ),
        "{text}"
    );

    cancel.cancel();
    let metrics = running.metrics().clone();
    with_timeout(running.wait())
        .await
        .expect("stops")
        .expect("graceful stop is Ok");
    assert_eq!(journal.count("stop a-controller"), 1);
    assert_eq!(journal.count("stop d-controller"), 1);
    assert!(
        journal
            .entries()
            .iter()
            .all(|e| !e.contains("b-controller"))
    );
    assert!(metrics.encode().expect("metrics").contains(
        "running_managed_controllers{name=\"a-controller\",manager=\"kube-controller-manager\"} 0"
    ));
}

#[tokio::test(start_paused = true)]
async fn readyz_fails_until_caches_sync_and_controllers_wait_for_them() {
    let journal = Journal::default();
    let descriptor = {
        let journal = journal.clone();
        ControllerDescriptor::new("pods-controller", move |ctx: ControllerContext| {
            let journal = journal.clone();
            async move {
                // Declares its informer; the server is unreachable so it never syncs.
                let _pods = ctx.factory.informer_for::<Pod>();
                Ok(Some(StartedController::new(async move {
                    journal.push("run".to_owned());
                })))
            }
        })
    };
    let registry = ControllerRegistry::new()
        .with(descriptor)
        .expect("registry");
    let cancel = CancellationToken::new();
    let running = start_unelected(registry, &cancel).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let (code, body) = status(&running, "readyz");
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("[-]informer-sync failed"), "{body}");
    assert_eq!(
        status(&running, "livez").0,
        200,
        "liveness is not readiness"
    );
    assert!(
        journal.entries().is_empty(),
        "no controller runs before sync"
    );
    cancel.cancel();
    with_timeout(running.wait())
        .await
        .expect("stops")
        .expect("ok");
    assert!(journal.entries().is_empty());
}

#[tokio::test(start_paused = true)]
async fn one_leader_runs_controllers_and_a_graceful_stop_hands_over_within_two_retries() {
    let store = MemoryLeaseStore::new();
    let journal_a = Journal::default();
    let journal_b = Journal::default();
    let registry = |journal: &Journal| {
        ControllerRegistry::new()
            .with(recording("x-controller", journal))
            .expect("registry")
    };
    let cancel_a = CancellationToken::new();
    let cancel_b = CancellationToken::new();
    let a = start_elected(registry(&journal_a), store.lock(), "a", &cancel_a).await;
    let b = start_elected(registry(&journal_b), store.lock(), "b", &cancel_b).await;

    assert!(eventually(Duration::from_secs(10), || a.is_leader() || b.is_leader()).await);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(a.is_leader() != b.is_leader(), "exactly one leader");
    let (leader, leader_cancel, leader_journal, standby, standby_journal) = if a.is_leader() {
        (a, cancel_a.clone(), journal_a, b, journal_b)
    } else {
        (b, cancel_b.clone(), journal_b, a, journal_a)
    };
    assert_eq!(leader_journal.count("run x-controller"), 1);
    assert!(
        standby_journal.entries().is_empty(),
        "the standby runs nothing"
    );
    let holder = store.record().expect("lease").holder_identity;
    assert_eq!(holder, leader.identity());
    let (code, body) = status(&standby, "readyz");
    assert_eq!(code, 200, "a standby is ready: {body}");
    assert!(
        body.contains(&format!(
            "[+]leader-election ok: standby, leader is {holder}"
        )),
        "{body}"
    );
    assert!(
        status(&leader, "readyz")
            .1
            .contains("[+]leader-election ok: leading\n")
    );
    assert!(
        leader
            .metrics()
            .encode()
            .expect("metrics")
            .contains("leader_election_master_status{name=\"kube-controller-manager\"} 1")
    );

    // Graceful stop: controllers finish, then the lease is released.
    let stopped_at = tokio::time::Instant::now();
    leader_cancel.cancel();
    with_timeout(leader.wait())
        .await
        .expect("stops")
        .expect("graceful stop is Ok");
    assert_eq!(leader_journal.count("stop x-controller"), 1);
    let released = store.record().expect("lease");
    assert!(
        released.holder_identity.is_empty() || released.holder_identity == standby.identity(),
        "released: {released:?}"
    );
    // The standby's next attempt (at most a jittered retry period, 1s × 2.2) takes it.
    assert!(eventually(Duration::from_secs(10), || standby.is_leader()).await);
    assert!(
        stopped_at.elapsed() <= Duration::from_millis(2 * 2200 + 400),
        "took over {:?} after the stop",
        stopped_at.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(5), || standby_journal
            .count("run x-controller")
            == 1)
        .await
    );
    assert_eq!(store.record().expect("lease").leader_transitions, 1);

    cancel_b.cancel();
    cancel_a.cancel();
    with_timeout(standby.wait())
        .await
        .expect("stops")
        .expect("ok");
}

#[tokio::test(start_paused = true)]
async fn a_killed_leader_is_replaced_only_after_its_lease_expires() {
    let store = MemoryLeaseStore::new();
    let journal = Journal::default();
    let registry = || {
        ControllerRegistry::new()
            .with(recording("x-controller", &journal))
            .expect("registry")
    };
    let cancel = CancellationToken::new();
    let first = start_elected(registry(), store.lock(), "first", &cancel).await;
    assert!(eventually(Duration::from_secs(5), || first.is_leader()).await);
    let second = start_elected(registry(), store.lock(), "second", &cancel).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!second.is_leader());

    first.kill();
    let killed_at = tokio::time::Instant::now();
    with_timeout(first.wait())
        .await
        .expect("ends")
        .expect("kill is not an error");
    assert_eq!(
        store.record().expect("lease").holder_identity,
        "first",
        "a crash does not release the lease"
    );
    // Not before the lease (4s from the last renewal second saw) expires...
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!second.is_leader(), "took over a live lease");
    // ... and soon after: the standby times the lease from when it last saw the record change
    // (at most one jittered retry period, 2.2s, after the leader's last renewal), and takes it
    // at its first attempt after expiry (at most one more): lease + 2 × 2.2s after the kill.
    assert!(eventually(Duration::from_secs(10), || second.is_leader()).await);
    assert!(
        killed_at.elapsed() <= Duration::from_millis(4000 + 2 * 2200 + 100),
        "took {:?}",
        killed_at.elapsed()
    );
    assert_eq!(store.record().expect("lease").holder_identity, "second");
    cancel.cancel();
    with_timeout(second.wait())
        .await
        .expect("stops")
        .expect("ok");
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_ends_the_run_with_an_error() {
    let store = MemoryLeaseStore::new();
    let journal = Journal::default();
    let registry = ControllerRegistry::new()
        .with(recording("x-controller", &journal))
        .expect("registry");
    let lock = store.lock();
    let partition = lock.disconnect_switch();
    let cancel = CancellationToken::new();
    let running = start_elected(registry, lock, "solo", &cancel).await;
    assert!(eventually(Duration::from_secs(5), || running.is_leader()).await);
    assert!(
        eventually(Duration::from_secs(5), || journal.count("run x-controller")
            == 1)
        .await
    );

    partition.set(true);
    let err = with_timeout(running.wait())
        .await
        .expect("ends")
        .expect_err("lost leadership is an error");
    assert!(matches!(err, Error::LeadershipLost { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "leader election lost on lease kube-system/kube-controller-manager"
    );
    assert!(
        eventually(Duration::from_secs(5), || journal
            .count("stop x-controller")
            == 1)
        .await
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_init_stops_the_manager_and_releases_the_lease() {
    let store = MemoryLeaseStore::new();
    let journal = Journal::default();
    let broken = ControllerDescriptor::new("broken-controller", |_ctx| async {
        Err::<Option<StartedController>, _>("no such resource".into())
    });
    let registry = ControllerRegistry::new()
        .with(recording("a-controller", &journal))
        .and_then(|r| r.with(broken))
        .expect("registry");
    let cancel = CancellationToken::new();
    let running = start_elected(registry, store.lock(), "me", &cancel).await;
    let err = with_timeout(running.wait())
        .await
        .expect("ends")
        .expect_err("init failure");
    assert_eq!(
        err.to_string(),
        "start controller broken-controller: no such resource"
    );
    assert!(journal.count("run a-controller") == 0, "nothing ran");
    let record = store.record().expect("lease");
    assert!(record.holder_identity.is_empty(), "released: {record:?}");
}

#[tokio::test(start_paused = true)]
async fn a_controller_that_stops_on_its_own_fails_healthz() {
    let quits = ControllerDescriptor::new("quitter-controller", |_ctx| async {
        Ok(Some(StartedController::new(async {})))
    });
    let unhealthy =
        ControllerDescriptor::new("sick-controller", |ctx: ControllerContext| async move {
            Ok(Some(
                StartedController::new(async move { ctx.cancel.cancelled().await })
                    .with_health_check(|| Err("stuck".to_owned())),
            ))
        });
    let registry = ControllerRegistry::new()
        .with(quits)
        .and_then(|r| r.with(unhealthy))
        .expect("registry");
    let cancel = CancellationToken::new();
    let running = start_unelected(registry, &cancel).await;
    assert!(
        eventually(Duration::from_secs(5), || status(&running, "healthz").0
            == 500)
        .await
    );
    let body = status(&running, "healthz").1;
    assert!(body.contains("[-]quitter-controller failed"), "{body}");
    assert!(body.contains("[-]sick-controller failed"), "{body}");
    assert_eq!(status(&running, "livez").0, 200);
    cancel.cancel();
    with_timeout(running.wait())
        .await
        .expect("stops")
        .expect("ok");
}

#[tokio::test]
async fn a_busy_port_fails_start_naming_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let manager = ControllerManager::new(
        options(&[
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
        ]),
        ControllerRegistry::new(),
    )
    .expect("manager")
    .with_kube_config(unreachable_config());
    let err = manager
        .start(CancellationToken::new())
        .await
        .expect_err("port in use");
    assert!(
        err.to_string()
            .starts_with(&format!("listen on 127.0.0.1:{port}: ")),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn embedders_get_the_informers_the_controllers_use() {
    let descriptor = ControllerDescriptor::new("pods-controller", move |ctx: ControllerContext| {
        async move {
            // The controller's cache, seeded directly: an embedder must see this very store.
            let pods = ctx.factory.pods();
            pods.indexer()
                .add(Arc::new(Pod {
                    metadata: kube::api::ObjectMeta {
                        name: Some("seeded".into()),
                        namespace: Some("default".into()),
                        ..Default::default()
                    },
                    ..Pod::default()
                }))
                .expect("add");
            let cancel = ctx.cancel.clone();
            Ok(Some(StartedController::new(async move {
                cancel.cancelled().await
            })))
        }
    });
    let registry = ControllerRegistry::new()
        .with(descriptor)
        .expect("registry");
    let cancel = CancellationToken::new();
    let running = start_unelected(registry, &cancel).await;

    let informers = with_timeout(running.informer_factory())
        .await
        .expect("built")
        .expect("the manager runs");
    let pods = informers.factory.pods();
    assert!(
        eventually(Duration::from_secs(5), || pods.has_started()).await,
        "the manager started the informer it handed out"
    );
    assert!(
        pods.lister().get("default", "seeded").is_some(),
        "the same cache as the controller's, not a second informer"
    );

    cancel.cancel();
    with_timeout(running.wait())
        .await
        .expect("stops")
        .expect("graceful stop is Ok");
    assert!(
        informers.cancel.is_cancelled(),
        "added informers stop with it"
    );
    assert!(pods.is_stopped(), "stopped with the manager");
}

/// Upstream's `ControllerDescriptor.requiredFeatureGates`: a controller whose gates are not all
/// on is skipped ("Controller is disabled by a feature gate"), and `--feature-gates` turns it
/// on; a controller kcm does not build yet is skipped without failing the manager.
#[tokio::test(start_paused = true)]
async fn feature_gates_decide_which_gated_controllers_start() {
    use crate::manager::builtin::not_built_controller;
    use crate::manager::feature_gates::{API_SERVER_IDENTITY, GENERIC_WORKLOAD};
    use crate::manager::names::NOT_BUILT_CONTROLLERS;

    let registry = |journal: &Journal| {
        let podgroup = NOT_BUILT_CONTROLLERS
            .into_iter()
            .find(|c| c.names.name == "podgroup-protection-controller")
            .expect("listed");
        ControllerRegistry::new()
            .with(
                recording("alpha-controller", journal)
                    .with_required_feature_gates(&[GENERIC_WORKLOAD]),
            )
            .and_then(|r| {
                r.with(
                    recording("beta-controller", journal)
                        .with_required_feature_gates(&[API_SERVER_IDENTITY]),
                )
            })
            .and_then(|r| r.with(not_built_controller(podgroup)))
            .expect("registry")
    };

    let journal = Journal::default();
    let manager = ControllerManager::new(options(&["--leader-elect=false"]), registry(&journal))
        .expect("manager");
    assert_eq!(manager.enabled_controllers(), ["beta-controller"]);

    let manager = ControllerManager::new(
        options(&[
            "--leader-elect=false",
            "--feature-gates=GenericWorkload=true",
            "--feature-gates=APIServerIdentity=false",
        ]),
        registry(&journal),
    )
    .expect("manager");
    assert_eq!(
        manager.enabled_controllers(),
        ["alpha-controller", "podgroup-protection-controller"]
    );
    let cancel = CancellationToken::new();
    let running = manager
        .with_kube_config(unreachable_config())
        .start(cancel.clone())
        .await
        .expect("start");
    assert!(
        eventually(Duration::from_secs(5), || journal
            .count("init alpha-controller")
            == 1)
        .await
    );
    assert_eq!(journal.count("init beta-controller"), 0, "its gate is off");
    cancel.cancel();
    with_timeout(running.wait())
        .await
        .expect("stops")
        .expect("a skipped controller is no failure");
}

#[test]
fn a_refused_feature_gate_fails_flag_parsing_with_upstreams_message() {
    for (arg, want) in [
        (
            "--feature-gates=Nope=true",
            "unrecognized feature gate: Nope",
        ),
        (
            "--feature-gates=DynamicResourceAllocation=false",
            "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true",
        ),
        (
            "--feature-gates=GenericWorkload=yes",
            "invalid value of GenericWorkload=yes, err: strconv.ParseBool: parsing \"yes\": invalid syntax",
        ),
    ] {
        let err = Cli::try_parse_from(["kcm-run", arg]).expect_err(arg);
        assert!(err.to_string().contains(want), "{arg}: {err}");
    }
}
