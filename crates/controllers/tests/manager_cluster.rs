//! The controller manager against the embedded API server: leader election between managers,
//! the ReplicaSet controller reconciling, `--controllers`, `/readyz` and `/metrics` over HTTPS,
//! and the client-side QPS limit.

mod manager_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kcm_apiserver::testing::TestServer;
use kcm_controllers::manager::{
    ControllerContext, ControllerDescriptor, ControllerManager, ControllerRegistry, RunningManager,
    StartedController,
};
use kcm_machinery::informer::ResourceEventHandlerFuncs;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use manager_support::*;
use tokio_util::sync::CancellationToken;

/// Lease 2s, retry 250ms jittered up to ×2.2 (see `options`).
const LEASE: Duration = Duration::from_secs(2);
const JITTERED_RETRY: Duration = Duration::from_millis(550);
/// Allowance for real scheduling on a loaded machine.
const SLACK: Duration = Duration::from_millis(1500);

async fn start(
    server: &TestServer,
    extra: &[&str],
    registry: ControllerRegistry,
    cancel: &CancellationToken,
) -> RunningManager {
    ControllerManager::new(options(extra), registry)
        .expect("manager")
        .with_kube_config(server.server().kube_config())
        .start(cancel.clone())
        .await
        .expect("start")
}

/// Waits until the ReplicaSet `name` has exactly `want` live pods, and returns them.
async fn converge(client: &kube::Client, name: &str, want: usize) -> Vec<Pod> {
    poll(Duration::from_secs(30), "pods to converge", || async {
        let pods = pods_of(client, name).await;
        (pods.len() == want).then_some(pods)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_reconciles_and_leadership_moves_on_kill_and_on_graceful_stop() {
    let server = TestServer::start().await;
    let client = server.client();
    create_replica_set(&client, &replica_set("web", 3)).await;

    let cancels: Vec<CancellationToken> = (0..3).map(|_| CancellationToken::new()).collect();
    let a = start(&server, &[], ControllerRegistry::builtin(), &cancels[0]).await;
    let b = start(&server, &[], ControllerRegistry::builtin(), &cancels[1]).await;

    // Exactly one holds the Lease, and only it leads.
    let holder = poll(Duration::from_secs(15), "a leader", || async {
        let holder = lease_holder(&client).await;
        (!holder.is_empty() && (a.is_leader() || b.is_leader())).then_some(holder)
    })
    .await;
    assert!(holder == a.identity() || holder == b.identity(), "{holder}");
    assert!(a.is_leader() != b.is_leader(), "exactly one leader");
    let (leader, standby, standby_cancel) = if a.is_leader() {
        (a, b, cancels[1].clone())
    } else {
        (b, a, cancels[0].clone())
    };
    assert_eq!(holder, leader.identity());
    poll(
        Duration::from_secs(15),
        "the LeaderElection event",
        || async {
            let events: Api<Event> = Api::namespaced(client.clone(), "kube-system");
            let list = events.list(&ListParams::default()).await.expect("events");
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("LeaderElection")
                        && e.message.as_deref() == Some(&format!("{holder} became leader"))
                        && e.involved_object.kind.as_deref() == Some("Lease")
                })
                .then_some(())
        },
    )
    .await;

    // The leader's ReplicaSet controller creates the pods, once each.
    converge(&client, "web", 3).await;
    let rs: ReplicaSet = Api::namespaced(client.clone(), "default")
        .get("web")
        .await
        .expect("rs");
    assert_eq!(rs.metadata.name.as_deref(), Some("web"));

    // SIGKILL-like death: the lease is not released, the standby waits for it to expire.
    leader.kill();
    let killed = Instant::now();
    leader.wait().await.expect("killed");
    poll(
        Duration::from_secs(15),
        "the standby to take over",
        || async { standby.is_leader().then_some(()) },
    )
    .await;
    let took = killed.elapsed();
    assert!(
        took <= LEASE + 2 * JITTERED_RETRY + SLACK,
        "took {took:?} to replace a dead leader"
    );
    assert_eq!(lease_holder(&client).await, standby.identity());

    // The new leader reconciles: a deleted pod is replaced, no duplicates.
    let pods = converge(&client, "web", 3).await;
    let victim = pods[0].metadata.name.clone().expect("name");
    Api::<Pod>::namespaced(client.clone(), "default")
        .delete(&victim, &DeleteParams::default())
        .await
        .expect("delete pod");
    poll(
        Duration::from_secs(30),
        "the pod to be replaced",
        || async {
            let pods = pods_of(&client, "web").await;
            (pods.len() == 3
                && pods
                    .iter()
                    .all(|p| p.metadata.name.as_deref() != Some(&*victim)))
            .then_some(())
        },
    )
    .await;

    // Graceful stop: the lease is released, a standby takes it within about two retries.
    let third = start(&server, &[], ControllerRegistry::builtin(), &cancels[2]).await;
    poll(
        Duration::from_secs(10),
        "the third manager to observe the lease",
        || async {
            third
                .leader_status()
                .filter(|s| s.leader() == standby.identity())
                .map(|_| ())
        },
    )
    .await;
    let transitions_before = lease(&client)
        .await
        .and_then(|l| l.spec)
        .and_then(|s| s.lease_transitions)
        .unwrap_or_default();
    standby_cancel.cancel();
    standby.wait().await.expect("graceful stop is Ok");
    let released = Instant::now();
    poll(
        Duration::from_secs(10),
        "the third manager to take over",
        || async { third.is_leader().then_some(()) },
    )
    .await;
    let took = released.elapsed();
    assert!(
        took <= 2 * JITTERED_RETRY + SLACK,
        "took {took:?} after a release"
    );
    let lease = lease(&client).await.and_then(|l| l.spec).expect("lease");
    assert_eq!(lease.holder_identity.as_deref(), Some(third.identity()));
    assert_eq!(lease.lease_transitions, Some(transitions_before + 1));
    converge(&client, "web", 3).await;

    for cancel in &cancels {
        cancel.cancel();
    }
    third.wait().await.expect("stop");
}

/// A controller that reports once its ReplicaSet informer has seen any ReplicaSet.
fn witness(seen: Arc<AtomicBool>) -> ControllerDescriptor {
    ControllerDescriptor::new("witness-controller", move |ctx: ControllerContext| {
        let seen = Arc::clone(&seen);
        async move {
            let informer = ctx.factory.replica_sets();
            informer.add_event_handler(ResourceEventHandlerFuncs::<ReplicaSet>::new().add_func(
                move |_rs, _| {
                    seen.store(true, Ordering::SeqCst);
                },
            ))?;
            let cancel = ctx.cancel.clone();
            Ok(Some(StartedController::new(async move {
                cancel.cancelled().await
            })))
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_the_replicaset_controller_leaves_replicasets_untouched() {
    let server = TestServer::start().await;
    let client = server.client();
    create_replica_set(&client, &replica_set("idle", 2)).await;
    let seen = Arc::new(AtomicBool::new(false));
    let registry = ControllerRegistry::builtin()
        .with(witness(Arc::clone(&seen)))
        .expect("registry");
    let cancel = CancellationToken::new();
    let manager = start(
        &server,
        &["--leader-elect=false", "--controllers=*,-replicaset"],
        registry,
        &cancel,
    )
    .await;
    // The manager's shared ReplicaSet informer has delivered the ReplicaSet...
    poll(
        Duration::from_secs(10),
        "the witness to see the ReplicaSet",
        || async { seen.load(Ordering::SeqCst).then_some(()) },
    )
    .await;
    // ... and a replicaset controller, had it run, would have acted on the same event. Give
    // it a generous while (real processes) before checking nothing happened.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(pods_of(&client, "idle").await.is_empty(), "no pods created");
    let rs: ReplicaSet = Api::namespaced(client.clone(), "default")
        .get("idle")
        .await
        .expect("rs");
    assert_eq!(
        rs.status.and_then(|s| s.observed_generation),
        None,
        "status untouched"
    );
    let metrics = manager.metrics().encode().expect("metrics");
    assert!(
        !metrics.contains("workqueue_depth{name=\"replicaset\"}"),
        "no replicaset queue: {metrics}"
    );
    cancel.cancel();
    manager.wait().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_metrics_are_served_over_https() {
    let server = TestServer::start().await;
    let client = server.client();
    create_replica_set(&client, &replica_set("served", 1)).await;
    let cancel = CancellationToken::new();
    let manager = ControllerManager::new(
        options(&["--leader-elect=false"]),
        ControllerRegistry::builtin(),
    )
    .expect("manager")
    .with_kube_config(server.server().kube_config())
    .with_delegation_config(server.server().kube_config())
    .with_listener(loopback_listener())
    .start(cancel.clone())
    .await
    .expect("start");
    let addr = manager.local_addr().expect("serving");
    let ca = manager.serving_cert_pem().expect("cert").to_owned();

    // /readyz flips to ok once the caches have synced.
    let body = poll(Duration::from_secs(15), "/readyz to pass", || async {
        let (code, body) = https_get(addr, &ca, "/readyz?verbose").await;
        (code == 200).then_some(body)
    })
    .await;
    assert!(body.contains("[+]informer-sync ok\n"), "{body}");
    assert!(body.contains("[+]replicaset-controller ok\n"), "{body}");
    assert!(body.ends_with("readyz check passed\n"), "{body}");
    assert_eq!(
        https_get(addr, &ca, "/healthz").await,
        (200, "ok".to_owned())
    );
    assert_eq!(https_get(addr, &ca, "/livez").await, (200, "ok".to_owned()));
    // Single checks are not among the always-allowed paths (exact matches): anonymous is
    // forbidden, as upstream; the admin reads them.
    assert_eq!(https_get(addr, &ca, "/readyz/informer-sync").await.0, 403);
    assert_eq!(
        https_get_as(addr, &ca, "/readyz/informer-sync", Some(server.token())).await,
        (200, "ok".to_owned())
    );
    assert_eq!(
        https_get_as(addr, &ca, "/readyz/nope", Some(server.token()))
            .await
            .0,
        404
    );

    converge(&client, "served", 1).await;
    // The controller's events reach the API server through the manager's broadcaster.
    poll(
        Duration::from_secs(15),
        "a SuccessfulCreate event",
        || async {
            let events: Api<Event> = Api::namespaced(client.clone(), "default");
            let list = events.list(&ListParams::default()).await.expect("events");
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("SuccessfulCreate")
                        && e.involved_object.name.as_deref() == Some("served")
                        && e.source.as_ref().and_then(|s| s.component.as_deref())
                            == Some("replicaset-controller")
                })
                .then_some(())
        },
    )
    .await;
    // /metrics is delegated: anonymous and unbound service accounts are forbidden, the
    // admin (system:masters) and an account in system:monitoring may read it.
    assert_eq!(
        https_get(addr, &ca, "/metrics").await,
        (403, forbidden_status("system:anonymous", "/metrics"))
    );
    let scraper = service_account_token(&client, "scraper").await;
    assert_eq!(
        https_get_as(addr, &ca, "/metrics", Some(&scraper)).await,
        (
            403,
            forbidden_status("system:serviceaccount:default:scraper", "/metrics")
        )
    );
    // A token the API server does not recognise is anonymous; one it recognises and refuses
    // (its service account deleted) is 401, as upstream's delegating authenticator.
    assert_eq!(
        https_get_as(addr, &ca, "/metrics", Some("not-a-token")).await,
        (403, forbidden_status("system:anonymous", "/metrics"))
    );
    let gone = service_account_token(&client, "gone").await;
    Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete service account");
    let (code, body) = https_get_as(addr, &ca, "/metrics", Some(&gone)).await;
    assert_eq!(code, 401, "{body}");
    let monitor = service_account_token(&client, "monitor").await;
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "monitor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:monitoring"},
        "subjects": [{"kind": "ServiceAccount", "name": "monitor", "namespace": "default"}],
    }))
    .expect("binding");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("bind");
    let (code, _) = https_get_as(addr, &ca, "/metrics", Some(&monitor)).await;
    assert_eq!(code, 200, "a system:monitoring binding allows /metrics");
    let (code, metrics) = https_get_as(addr, &ca, "/metrics", Some(server.token())).await;
    assert_eq!(code, 200);
    let host = server.url().trim_start_matches("https://").to_owned();
    for needle in [
        "workqueue_depth{name=\"replicaset\"}".to_owned(),
        "workqueue_adds_total{name=\"replicaset\"}".to_owned(),
        "workqueue_work_duration_seconds_count{name=\"replicaset\"}".to_owned(),
        format!("rest_client_requests_total{{code=\"201\",method=\"POST\",host=\"{host}\"}}"),
        format!("rest_client_request_duration_seconds_count{{verb=\"GET\",host=\"{host}\"}}"),
        "running_managed_controllers{name=\"replicaset-controller\",manager=\"kube-controller-manager\"} 1"
            .to_owned(),
    ] {
        assert!(metrics.contains(&needle), "missing {needle} in\n{metrics}");
    }
    cancel.cancel();
    manager.wait().await.expect("stop");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the endpoint stops with the manager"
    );
}

/// The Status body of a 403 for `user` reading `path`, as upstream's `responsewriters.Forbidden`.
fn forbidden_status(user: &str, path: &str) -> String {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("forbidden: User \"{user}\" cannot get path \"{path}\""),
        "reason": "Forbidden",
        "details": {},
        "code": 403,
    })
    .to_string()
}

/// Creates `default/<name>` and returns a token for it.
async fn service_account_token(client: &kube::Client, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("sa");
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("create service account");
    accounts
        .create_token_request(name, &PostParams::default(), &TokenRequest::default())
        .await
        .expect("token")
        .status
        .expect("status")
        .token
        .expect("token")
}

/// A controller that reads one ConfigMap as fast as the client lets it.
fn hammer() -> ControllerDescriptor {
    ControllerDescriptor::new("hammer-controller", |ctx: ControllerContext| async move {
        let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
        let cancel = ctx.cancel.clone();
        Ok(Some(StartedController::new(async move {
            while !cancel.is_cancelled() {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = api.get_opt("absent") => {}
                }
            }
        })))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_api_qps_bounds_the_request_rate() {
    let server = TestServer::start().await;
    let registry = ControllerRegistry::new().with(hammer()).expect("registry");
    let cancel = CancellationToken::new();
    let manager = start(
        &server,
        &[
            "--leader-elect=false",
            "--kube-api-qps=5",
            "--kube-api-burst=5",
        ],
        registry,
        &cancel,
    )
    .await;
    let metrics = manager.metrics().clone();
    // Let the burst drain, then measure a window.
    poll(
        Duration::from_secs(10),
        "the hammer to use its burst",
        || async { (total_requests(&metrics.encode().expect("metrics")) >= 5).then_some(()) },
    )
    .await;
    let start_count = total_requests(&metrics.encode().expect("metrics"));
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let count = total_requests(&metrics.encode().expect("metrics")) - start_count;
    let elapsed = started.elapsed().as_secs_f64();
    // The bucket holds at most one token at this point (it was just drained), so at most
    // 5/s × elapsed + 1 requests can start in the window; one more may be in flight.
    let bound = (5.0 * elapsed).ceil() as u64 + 2;
    assert!(
        count <= bound,
        "{count} requests in {elapsed:.2}s, limit {bound}"
    );
    assert!(
        count >= 5,
        "only {count} requests in {elapsed:.2}s: the hammer stalled"
    );
    cancel.cancel();
    manager.wait().await.expect("stop");
}

/// A controller that keeps `parallel` requests queued on the manager's client at all times,
/// as a leader busy creating pods does.
fn hog(parallel: usize) -> ControllerDescriptor {
    ControllerDescriptor::new("hog-controller", move |ctx: ControllerContext| async move {
        let cancel = ctx.cancel.clone();
        for _ in 0..parallel {
            let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
            let cancel = cancel.clone();
            tokio::spawn(async move {
                while !cancel.is_cancelled() {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        _ = cms.get_opt("hog") => {}
                    }
                }
            });
        }
        Ok(Some(StartedController::new(async move {
            cancel.cancelled().await
        })))
    })
}

/// Regression (chaos tests, issue 26): the Lease renewals went through the controllers'
/// rate-limited client, so a leader whose controllers filled the `--kube-api-qps` queue missed
/// its renew deadline and lost the lease in the middle of a scale-up. As client-go's
/// `resourcelock.NewFromKubeconfig`, the lock now has a client and a bucket of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_controllers_saturate_the_client_limit_keeps_its_lease() {
    let server = TestServer::start().await;
    let client = server.client();
    let registry = ControllerRegistry::new().with(hog(40)).expect("registry");
    let cancel = CancellationToken::new();
    // 10 requests a second shared by 40 busy requests: each waits about four seconds in the
    // bucket's queue, well past the 1.5 s renew deadline.
    let manager = start(
        &server,
        &["--kube-api-qps=10", "--kube-api-burst=10"],
        registry,
        &cancel,
    )
    .await;
    poll(Duration::from_secs(15), "a leader", || async {
        manager.is_leader().then_some(())
    })
    .await;
    let transitions = lease(&client)
        .await
        .and_then(|l| l.spec)
        .and_then(|s| s.lease_transitions);
    // Several lease durations of saturation: a lost lease ends the manager.
    let held_until = Instant::now() + 4 * LEASE;
    while Instant::now() < held_until {
        assert!(
            manager.is_leader(),
            "lost the lease under client saturation"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(lease_holder(&client).await, manager.identity());
    assert_eq!(
        lease(&client)
            .await
            .and_then(|l| l.spec)
            .and_then(|s| s.lease_transitions),
        transitions,
        "no other holder in between"
    );
    cancel.cancel();
    manager
        .wait()
        .await
        .expect("a graceful stop after keeping the lease");
}

/// A controller that records one event about the ConfigMap `default/<name>` at start and
/// notes which event pipeline it was handed.
fn recorder(
    name: &'static str,
    pipelines: Arc<std::sync::Mutex<Vec<usize>>>,
) -> ControllerDescriptor {
    ControllerDescriptor::new(name, move |ctx: ControllerContext| {
        let pipelines = Arc::clone(&pipelines);
        async move {
            pipelines
                .lock()
                .expect("pipelines")
                .push(Arc::as_ptr(&ctx.events).cast::<()>() as usize);
            let regarding = k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("ConfigMap".to_owned()),
                namespace: Some("default".to_owned()),
                name: Some(name.to_owned()),
                ..Default::default()
            };
            ctx.recorder(name).event(
                &regarding,
                kcm_machinery::events::EventType::Normal,
                "Recorded",
                format!("by {name}"),
            );
            let cancel = ctx.cancel.clone();
            Ok(Some(StartedController::new(async move {
                cancel.cancelled().await
            })))
        }
    })
}

/// As kube-controller-manager, where each controller starts a broadcaster of its own over its
/// own client (its events take its `--kube-api-qps` tokens and queue apart from the others'):
/// two controllers get two pipelines, and both their events reach the API server by the time
/// a graceful stop returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_controller_records_events_through_a_broadcaster_of_its_own() {
    let server = TestServer::start().await;
    let client = server.client();
    let pipelines = Arc::new(std::sync::Mutex::new(Vec::new()));
    let registry = ControllerRegistry::new()
        .with(recorder("first-recorder", Arc::clone(&pipelines)))
        .expect("registry")
        .with(recorder("second-recorder", Arc::clone(&pipelines)))
        .expect("registry");
    let cancel = CancellationToken::new();
    let manager = start(&server, &["--leader-elect=false"], registry, &cancel).await;
    poll(
        Duration::from_secs(10),
        "both controllers to start",
        || async { (pipelines.lock().expect("pipelines").len() == 2).then_some(()) },
    )
    .await;
    cancel.cancel();
    manager.wait().await.expect("stop");

    let seen = pipelines.lock().expect("pipelines").clone();
    assert_ne!(seen[0], seen[1], "one pipeline per controller");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut sources: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Recorded"))
        .filter_map(|e| e.source.and_then(|s| s.component))
        .collect();
    sources.sort();
    assert_eq!(sources, ["first-recorder", "second-recorder"]);
}
