//! The event broadcaster writing through `KubeEventSink` to a fake core/v1 Events API served
//! in-process: POST for new events, strategic-merge PATCH for repeats, re-create on 404.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kcm_machinery::events::{
    BroadcasterOptions, CorrelatorOptions, EventBroadcaster, EventType, KubeEventSink, TokioClock,
    WallClock,
};
use serde_json::Value;

/// One request as the fake server saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    content_type: String,
    body: Value,
}

#[derive(Default)]
struct FakeEvents {
    /// Stored events by `namespace/name`.
    events: BTreeMap<String, Value>,
    seen: Vec<Seen>,
    version: u64,
}

fn json(code: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("response")
}

fn not_found() -> Response<Full<Bytes>> {
    json(
        StatusCode::NOT_FOUND,
        &serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
    )
}

impl FakeEvents {
    fn handle(&mut self, seen: Seen) -> Response<Full<Bytes>> {
        self.seen.push(seen.clone());
        let parts: Vec<&str> = seen.path.trim_start_matches('/').split('/').collect();
        // api/v1/namespaces/{ns}/events[/{name}]
        match (seen.method.clone(), parts.as_slice()) {
            (Method::POST, ["api", "v1", "namespaces", ns, "events"]) => {
                let mut event = seen.body.clone();
                let name = event["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                self.version += 1;
                event["metadata"]["resourceVersion"] = Value::from(self.version.to_string());
                self.events.insert(format!("{ns}/{name}"), event.clone());
                json(StatusCode::CREATED, &event)
            }
            (Method::PATCH, ["api", "v1", "namespaces", ns, "events", name]) => {
                let Some(event) = self.events.get_mut(&format!("{ns}/{name}")) else {
                    return not_found();
                };
                json_patch::merge(event, &seen.body);
                self.version += 1;
                event["metadata"]["resourceVersion"] = Value::from(self.version.to_string());
                json(StatusCode::OK, event)
            }
            _ => not_found(),
        }
    }
}

fn client(api: Arc<Mutex<FakeEvents>>) -> kube::Client {
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let api = api.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = body.collect().await.expect("body").to_bytes();
            let seen = Seen {
                method: parts.method.clone(),
                path: parts.uri.path().to_owned(),
                content_type: parts
                    .headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned(),
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            };
            let response = api.lock().expect("fake api").handle(seen);
            Ok::<_, Infallible>(response)
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(start_paused = true)]
async fn events_are_created_then_patched_and_recreated_when_gone() {
    let api = Arc::new(Mutex::new(FakeEvents::default()));
    let clock: Arc<dyn WallClock> = Arc::new(TokioClock::starting_at(
        "2024-03-01T12:00:00Z".parse().expect("timestamp"),
    ));
    let broadcaster = EventBroadcaster::with_options(
        Arc::new(KubeEventSink::new(client(api.clone()))),
        BroadcasterOptions {
            clock: clock.clone(),
            correlator: CorrelatorOptions {
                clock,
                ..CorrelatorOptions::default()
            },
            ..BroadcasterOptions::default()
        },
    );
    let recorder = broadcaster.recorder("replicaset-controller", None);
    let rs = ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("ReplicaSet".into()),
        namespace: Some("shop".into()),
        name: Some("frontend".into()),
        uid: Some("1234".into()),
        ..Default::default()
    };

    recorder.event(
        &rs,
        EventType::Warning,
        "FailedCreate",
        "exceeded quota".into(),
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    recorder.event(
        &rs,
        EventType::Warning,
        "FailedCreate",
        "exceeded quota".into(),
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    api.lock().expect("fake api").events.clear();
    recorder.event(
        &rs,
        EventType::Warning,
        "FailedCreate",
        "exceeded quota".into(),
    );
    broadcaster.shutdown().await;

    let seen = api.lock().expect("fake api").seen.clone();
    let summary: Vec<(Method, String)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect();
    let name = seen[0].body["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    assert!(name.starts_with("frontend."), "{name}");
    let item = format!("/api/v1/namespaces/shop/events/{name}");
    let collection = "/api/v1/namespaces/shop/events".to_owned();
    assert_eq!(
        summary,
        vec![
            (Method::POST, collection.clone()),
            (Method::PATCH, item.clone()),
            (Method::PATCH, item),
            (Method::POST, collection),
        ]
    );

    let created = &seen[0].body;
    assert_eq!(created["reason"], "FailedCreate");
    assert_eq!(created["type"], "Warning");
    assert_eq!(created["count"], 1);
    assert_eq!(created["source"]["component"], "replicaset-controller");
    assert_eq!(created["reportingComponent"], "replicaset-controller");
    assert_eq!(created["involvedObject"]["name"], "frontend");
    assert_eq!(created["firstTimestamp"], "2024-03-01T12:00:00Z");

    assert_eq!(
        seen[1].content_type,
        "application/strategic-merge-patch+json"
    );
    assert_eq!(
        seen[1].body,
        serde_json::json!({"count": 2, "lastTimestamp": "2024-03-01T12:00:05Z", "message": "exceeded quota"})
    );
    // The third occurrence patches first, finds the Event gone, and creates it with count 3
    // and no resourceVersion.
    let recreated = &seen[3].body;
    assert_eq!(recreated["count"], 3);
    assert_eq!(recreated["metadata"]["name"], name.as_str());
    assert!(recreated["metadata"].get("resourceVersion").is_none());
    let stored: Vec<Event> = api
        .lock()
        .expect("fake api")
        .events
        .values()
        .map(|v| serde_json::from_value(v.clone()).expect("event"))
        .collect();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].count, Some(3));
}
