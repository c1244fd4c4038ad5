//! `KubeLeaseLock` against a fake Lease API served in-process (no network): status mapping
//! (404, 409), resourceVersion preconditions, and two electors sharing the lease.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::coordination::v1::Lease;
use kcm_machinery::events::TokioClock;
use kcm_machinery::leaderelection::{
    Error, KubeLeaseLock, LeaderElectionConfig, LeaderElectionRecord, LeaderElector, LeaseLock,
    Transition,
};
use tokio::time::Instant;

const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";

/// The fake server's state: one lease and the last resourceVersion handed out.
#[derive(Default)]
struct FakeApi {
    lease: Option<Lease>,
    version: u64,
    requests: Vec<String>,
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code.as_u16(),
    });
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("response")
}

fn lease_response(code: StatusCode, lease: &Lease) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            serde_json::to_vec(lease).expect("serialize"),
        )))
        .expect("response")
}

impl FakeApi {
    fn handle(&mut self, method: &Method, path: &str, body: &[u8]) -> Response<Full<Bytes>> {
        self.requests.push(format!("{method} {path}"));
        let item = format!("{LEASE_PATH}/kcm");
        match (method.clone(), path) {
            (Method::GET, p) if p == item => match &self.lease {
                Some(lease) => lease_response(StatusCode::OK, lease),
                None => status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "leases \"kcm\" not found",
                ),
            },
            (Method::POST, LEASE_PATH) => {
                if self.lease.is_some() {
                    return status(StatusCode::CONFLICT, "AlreadyExists", "already exists");
                }
                let mut lease: Lease = serde_json::from_slice(body).expect("lease body");
                self.version += 1;
                lease.metadata.resource_version = Some(self.version.to_string());
                self.lease = Some(lease.clone());
                lease_response(StatusCode::CREATED, &lease)
            }
            (Method::PUT, p) if p == item => {
                let mut lease: Lease = serde_json::from_slice(body).expect("lease body");
                let current = self
                    .lease
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.clone());
                if current.is_none() {
                    return status(StatusCode::NOT_FOUND, "NotFound", "not found");
                }
                if lease.metadata.resource_version != current {
                    return status(
                        StatusCode::CONFLICT,
                        "Conflict",
                        "the object has been modified; please apply your changes to the latest version and try again",
                    );
                }
                self.version += 1;
                lease.metadata.resource_version = Some(self.version.to_string());
                self.lease = Some(lease.clone());
                lease_response(StatusCode::OK, &lease)
            }
            _ => status(StatusCode::NOT_FOUND, "NotFound", "no such path"),
        }
    }

    /// An outside writer touching the lease (bumps the resourceVersion).
    fn touch(&mut self) {
        if let Some(lease) = &mut self.lease {
            self.version += 1;
            lease.metadata.resource_version = Some(self.version.to_string());
        }
    }
}

fn client(api: Arc<Mutex<FakeApi>>) -> kube::Client {
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let api = api.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = body.collect().await.expect("request body").to_bytes();
            let response =
                api.lock()
                    .expect("fake api")
                    .handle(&parts.method, parts.uri.path(), &body);
            Ok::<_, Infallible>(response)
        }
    });
    kube::Client::new(service, "default")
}

fn record(holder: &str) -> LeaderElectionRecord {
    LeaderElectionRecord {
        holder_identity: holder.into(),
        lease_duration_seconds: 15,
        ..Default::default()
    }
}

#[tokio::test]
async fn lease_lock_maps_not_found_and_conflict() {
    let api = Arc::new(Mutex::new(FakeApi::default()));
    let mut lock = KubeLeaseLock::new(client(api.clone()), "kube-system", "kcm");
    assert_eq!(lock.describe(), "kube-system/kcm");

    let err = lock.get().await.expect_err("no lease yet");
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let err = lock
        .update(&record("a"))
        .await
        .expect_err("nothing read yet");
    assert!(matches!(err, Error::NotInitialized { .. }), "{err}");

    lock.create(&record("a")).await.expect("create");
    let err = lock.create(&record("a")).await.expect_err("exists");
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err}");
    assert_eq!(lock.get().await.expect("get"), record("a"));

    api.lock().expect("fake api").touch();
    let err = lock.update(&record("a")).await.expect_err("stale");
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("kube-system/kcm"), "{err}");

    lock.get().await.expect("refresh");
    lock.update(&record("b")).await.expect("fresh update");
    let stored = api.lock().expect("fake api").lease.clone().expect("lease");
    let spec = stored.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));
}

#[tokio::test(start_paused = true)]
async fn electors_over_the_api_conflict_fall_back_to_the_slow_path_and_stay_single_leader() {
    let api = Arc::new(Mutex::new(FakeApi::default()));
    let start_wall = "2024-01-01T00:00:00Z".parse().expect("timestamp");
    let make = |identity: &str| {
        let lock = KubeLeaseLock::new(client(api.clone()), "kube-system", "kcm");
        LeaderElector::new(
            LeaderElectionConfig::new("kube-system", "kcm", identity),
            lock,
        )
        .expect("valid")
        .with_clock(Arc::new(TokioClock::starting_at(start_wall)))
    };
    let mut a = make("a");
    let mut b = make("b");

    assert_eq!(a.step().await.transition, Some(Transition::Acquired));
    assert_eq!(b.step().await.transition, None);

    // Someone bumps the lease: a's optimistic update gets 409 and a re-reads, then renews.
    api.lock().expect("fake api").touch();
    tokio::time::advance(Duration::from_secs(2)).await;
    api.lock().expect("fake api").requests.clear();
    let step = a.step().await;
    assert_eq!(step.transition, None);
    assert_eq!(
        api.lock().expect("fake api").requests,
        vec![
            format!("PUT {LEASE_PATH}/kcm"),
            format!("GET {LEASE_PATH}/kcm"),
            format!("PUT {LEASE_PATH}/kcm"),
        ]
    );

    // Both keep going for a minute on their own schedules: a stays the only leader.
    let until = Instant::now() + Duration::from_secs(60);
    let mut next_a = step.next.expect("a renews");
    let mut next_b = Instant::now();
    while next_a.min(next_b) <= until {
        if next_a <= next_b {
            tokio::time::sleep_until(next_a).await;
            let s = a.step().await;
            assert_eq!(s.transition, None);
            next_a = s.next.expect("a renews");
        } else {
            tokio::time::sleep_until(next_b).await;
            let s = b.step().await;
            assert_eq!(s.transition, None, "b must not take a renewed lease");
            next_b = s.next.expect("b retries");
        }
    }
    assert!(a.is_leader());
    assert_eq!(b.leader(), "a");
    let spec = api
        .lock()
        .expect("fake api")
        .lease
        .clone()
        .and_then(|l| l.spec)
        .expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
}
