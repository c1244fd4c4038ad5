#![allow(clippy::unwrap_used)]
//! A real SharedIndexInformer over real HTTP: `kube::Client` against a small in-test API
//! server on 127.0.0.1:0 that speaks paginated list (limit/continue) and chunked watch
//! (bookmarks, and 410 Gone on a stale watch both as an HTTP status and as an ERROR event).
//!
//! `informer_apiserver.rs` runs the same informer against kcm's embedded API server; this
//! in-test server stays because it can inject failures (410s, closes) on demand.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::informer::{
    DeletedObject, HasSynced, ResourceEventHandler, SharedInformerFactory, wait_for_cache_sync,
};
use kcm_machinery::labels::Selector;
use kcm_testing::MetaBuilder;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// How a stale watch is refused.
#[derive(Clone, Copy, PartialEq)]
enum GoneMode {
    /// `410 Gone` as the HTTP status of the watch request.
    Http,
    /// `200 OK`, then a single `ERROR` event carrying a 410 Status.
    ErrorEvent,
}

/// What watch streams are told.
#[derive(Clone)]
enum Broadcast {
    /// One event line.
    Line(String),
    /// End every open watch (as an API server does on restart or compaction).
    CloseAll,
}

struct ServerState {
    /// The current resourceVersion.
    rv: u64,
    pods: BTreeMap<String, Pod>,
    /// Every change, for watches that start in the past: (rv, event line).
    history: Vec<(u64, String)>,
    /// Watches from below this resourceVersion get 410.
    compacted_below: u64,
    gone_mode: GoneMode,
    list_queries: Vec<HashMap<String, String>>,
    watch_queries: Vec<HashMap<String, String>>,
    /// How many watches were refused with 410, per mode.
    gone_http: usize,
    gone_event: usize,
}

struct Server {
    state: Mutex<ServerState>,
    events: broadcast::Sender<Broadcast>,
}

fn pod(name: &str, rv: u64) -> Pod {
    let app = if name.ends_with('0') { "zero" } else { "web" };
    kcm_testing::pod(name)
        .namespace("default")
        .resource_version(rv.to_string())
        .label("app", app)
        .build()
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

impl Server {
    fn new(initial: usize) -> Arc<Self> {
        let mut state = ServerState {
            rv: 1,
            pods: BTreeMap::new(),
            history: Vec::new(),
            compacted_below: 0,
            gone_mode: GoneMode::Http,
            list_queries: Vec::new(),
            watch_queries: Vec::new(),
            gone_http: 0,
            gone_event: 0,
        };
        for i in 0..initial {
            state.rv += 1;
            let name = format!("p-{i:04}");
            let p = pod(&name, state.rv);
            state.pods.insert(name, p);
        }
        Arc::new(Self {
            state: Mutex::new(state),
            events: broadcast::channel(1024).0,
        })
    }

    /// Applies a change and tells the watchers.
    fn change(&self, kind: &str, name: &str) -> u64 {
        let mut state = self.state.lock().unwrap();
        state.rv += 1;
        let rv = state.rv;
        let p = pod(name, rv);
        match kind {
            "DELETED" => {
                state.pods.remove(name);
            }
            _ => {
                state.pods.insert(name.to_owned(), p.clone());
            }
        }
        let line = json!({"type": kind, "object": p}).to_string();
        state.history.push((rv, line.clone()));
        let _ = self.events.send(Broadcast::Line(line));
        rv
    }

    /// Deletes without any event reaching watchers, then forgets history so the watchers'
    /// resourceVersion is too old: only a relist can notice the deletion.
    fn delete_silently_and_compact(&self, name: &str, mode: GoneMode) {
        let mut state = self.state.lock().unwrap();
        state.rv += 1;
        state.pods.remove(name);
        state.compacted_below = state.rv;
        state.history.clear();
        state.gone_mode = mode;
        let _ = self.events.send(Broadcast::CloseAll);
    }

    fn bookmark(&self) -> u64 {
        let mut state = self.state.lock().unwrap();
        state.rv += 1;
        let rv = state.rv;
        let line = json!({
            "type": "BOOKMARK",
            "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}},
        })
        .to_string();
        let _ = self.events.send(Broadcast::Line(line));
        rv
    }
}

async fn pods(
    State(server): State<Arc<Server>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if q.get("watch").map(String::as_str) == Some("true") {
        watch(server, q)
    } else {
        list(server, q)
    }
}

fn list(server: Arc<Server>, q: HashMap<String, String>) -> Response {
    let mut state = server.state.lock().unwrap();
    state.list_queries.push(q.clone());
    let limit: usize = q
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    // continue = "<rv>/<offset>": the snapshot's resourceVersion and where to resume.
    let (list_rv, offset) = match q.get("continue") {
        Some(token) => {
            let (rv, offset) = token.split_once('/').unwrap();
            let rv: u64 = rv.parse().unwrap();
            if rv < state.compacted_below {
                let body = status(410, "Expired", "The provided continue parameter is too old");
                return (StatusCode::GONE, axum::Json(body)).into_response();
            }
            (rv, offset.parse().unwrap())
        }
        None => (state.rv, 0usize),
    };
    let items: Vec<&Pod> = state.pods.values().skip(offset).take(limit).collect();
    let next = offset + items.len();
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if next < state.pods.len() {
        metadata["continue"] = json!(format!("{list_rv}/{next}"));
    }
    let body = json!({"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items});
    axum::Json(body).into_response()
}

fn watch(server: Arc<Server>, q: HashMap<String, String>) -> Response {
    let mut state = server.state.lock().unwrap();
    state.watch_queries.push(q.clone());
    let from: u64 = q
        .get("resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(state.rv);
    if from < state.compacted_below {
        let message = format!(
            "too old resource version: {from} ({})",
            state.compacted_below
        );
        match state.gone_mode {
            GoneMode::Http => {
                state.gone_http += 1;
                return (
                    StatusCode::GONE,
                    axum::Json(status(410, "Expired", &message)),
                )
                    .into_response();
            }
            GoneMode::ErrorEvent => {
                state.gone_event += 1;
                let line = json!({"type": "ERROR", "object": status(410, "Expired", &message)});
                let body = Body::from(format!("{line}\n"));
                return Response::builder()
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(body)
                    .unwrap();
            }
        }
    }
    let backlog: Vec<String> = state
        .history
        .iter()
        .filter(|(rv, _)| *rv > from)
        .map(|(_, line)| line.clone())
        .collect();
    let rx = server.events.subscribe();
    drop(state);
    let backlog = futures::stream::iter(
        backlog
            .into_iter()
            .map(|l| Ok::<_, std::io::Error>(format!("{l}\n"))),
    );
    let live = futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(Broadcast::Line(line)) => return Some((Ok(format!("{line}\n")), rx)),
                Ok(Broadcast::CloseAll) | Err(broadcast::error::RecvError::Closed) => return None,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
            }
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(backlog.chain(live)))
        .unwrap()
}

#[derive(Default)]
struct Recorder {
    adds: Mutex<Vec<(String, bool)>>,
    updates: Mutex<Vec<(String, String)>>,
    deletes: Mutex<Vec<(String, bool)>>,
}

impl ResourceEventHandler<Pod> for Recorder {
    fn on_add(&self, obj: Arc<Pod>, initial: bool) {
        self.adds
            .lock()
            .unwrap()
            .push((obj.metadata.name.clone().unwrap(), initial));
    }
    fn on_update(&self, old: Arc<Pod>, new: Arc<Pod>) {
        self.updates.lock().unwrap().push((
            old.metadata.resource_version.clone().unwrap(),
            new.metadata.resource_version.clone().unwrap(),
        ));
    }
    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.deletes.lock().unwrap().push((
            obj.object().metadata.name.clone().unwrap(),
            obj.is_tombstone(),
        ));
    }
}

async fn eventually(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..3000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn informer_over_http_lists_in_pages_watches_and_relists_after_410() {
    tokio::time::timeout(Duration::from_secs(60), scenario())
        .await
        .expect("scenario timed out");
}

async fn scenario() {
    let server = Server::new(1200);
    let app = Router::new()
        .route("/api/v1/pods", get(pods))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serve = tokio::spawn(async move { axum::serve(listener, app).await });

    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let pods_informer = factory.pods();
    let recorder = Arc::new(Recorder::default());
    let registration = pods_informer.add_event_handler(recorder.clone()).unwrap();

    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(factory.wait_for_cache_sync(&cancel).await);
    assert!(wait_for_cache_sync("test", &cancel, &[&registration]).await);
    assert!(registration.has_synced());

    // Paginated initial list: 1200 pods in pages of 500.
    {
        let state = server.state.lock().unwrap();
        let pages: Vec<_> = state.list_queries.iter().collect();
        assert_eq!(pages.len(), 3, "{pages:?}");
        assert_eq!(pages[0].get("limit").map(String::as_str), Some("500"));
        assert!(pages[1].contains_key("continue"));
        assert!(!pages[1].contains_key("resourceVersion"));
    }
    let lister = pods_informer.lister();
    assert_eq!(lister.list_all(&Selector::everything()).len(), 1200);
    assert_eq!(
        lister
            .list("default", &Selector::parse("app=zero").unwrap())
            .len(),
        120
    );
    assert_eq!(recorder.adds.lock().unwrap().len(), 1200);
    assert!(
        recorder
            .adds
            .lock()
            .unwrap()
            .iter()
            .all(|(_, initial)| *initial)
    );
    let list_rv: u64 = pods_informer.last_sync_resource_version().parse().unwrap();
    assert_eq!(list_rv, 1201);

    // The watch started from the list's resourceVersion, with bookmarks and a 5–10 min timeout.
    eventually("watch", || {
        !server.state.lock().unwrap().watch_queries.is_empty()
    })
    .await;
    {
        let state = server.state.lock().unwrap();
        let w = &state.watch_queries[0];
        assert_eq!(w.get("resourceVersion").map(String::as_str), Some("1201"));
        assert_eq!(
            w.get("allowWatchBookmarks").map(String::as_str),
            Some("true")
        );
        let timeout: u64 = w.get("timeoutSeconds").unwrap().parse().unwrap();
        assert!((300..600).contains(&timeout), "timeout {timeout}");
    }

    // Watch events reach the cache and the handler; freshness follows.
    let rv = server.change("MODIFIED", "p-0000");
    server.change("DELETED", "p-0001");
    let added_rv = server.change("ADDED", "new-1");
    pods_informer
        .wait_for_resource_version(&added_rv.to_string())
        .await
        .unwrap();
    assert_eq!(
        lister
            .get("default", "p-0000")
            .unwrap()
            .metadata
            .resource_version,
        Some(rv.to_string())
    );
    assert!(lister.get("default", "p-0001").is_none());
    assert!(lister.get("default", "new-1").is_some());
    eventually("handler", || recorder.deletes.lock().unwrap().len() == 1).await;
    assert_eq!(
        recorder.deletes.lock().unwrap()[0],
        ("p-0001".to_owned(), false)
    );
    assert!(
        recorder
            .adds
            .lock()
            .unwrap()
            .contains(&("new-1".to_owned(), false))
    );

    // A bookmark advances the resourceVersion without touching any object.
    let bookmark_rv = server.bookmark();
    pods_informer
        .wait_for_resource_version(&bookmark_rv.to_string())
        .await
        .unwrap();
    assert_eq!(
        pods_informer.last_sync_resource_version(),
        bookmark_rv.to_string()
    );

    // A deletion the watch never reports, then the watch history is compacted: the re-watch
    // from our resourceVersion gets HTTP 410, the informer relists and delivers a tombstone.
    server.delete_silently_and_compact("p-0002", GoneMode::Http);
    eventually("tombstone after HTTP 410", || {
        recorder
            .deletes
            .lock()
            .unwrap()
            .contains(&("p-0002".to_owned(), true))
    })
    .await;
    assert!(lister.get("default", "p-0002").is_none());
    assert_eq!(server.state.lock().unwrap().gone_http, 1);
    let lists_after_first_410 = server.state.lock().unwrap().list_queries.len();
    assert!(lists_after_first_410 > 3, "relisted");

    // Once re-established, the watch delivers again; then the same with a 410 ERROR event.
    eventually("new watch", || {
        let state = server.state.lock().unwrap();
        state
            .watch_queries
            .last()
            .and_then(|w| w.get("resourceVersion"))
            .and_then(|rv| rv.parse::<u64>().ok())
            .is_some_and(|rv| rv >= state.compacted_below)
    })
    .await;
    let rv = server.change("MODIFIED", "p-0003");
    pods_informer
        .wait_for_resource_version(&rv.to_string())
        .await
        .unwrap();
    server.delete_silently_and_compact("p-0004", GoneMode::ErrorEvent);
    eventually("tombstone after 410 ERROR event", || {
        recorder
            .deletes
            .lock()
            .unwrap()
            .contains(&("p-0004".to_owned(), true))
    })
    .await;
    assert_eq!(server.state.lock().unwrap().gone_event, 1);
    assert_eq!(
        lister.list_all(&Selector::everything()).len(),
        server.state.lock().unwrap().pods.len()
    );
    assert!(factory.has_synced());

    cancel.cancel();
    factory.shutdown().await;
    assert!(pods_informer.is_stopped());
    serve.abort();
}

/// Serves one namespaced custom resource, `foos.samplecontroller.k8s.io/v1alpha1`: a list
/// holding `f1`, and a watch that adds `f2` and then stays open.
async fn foos(Query(q): Query<HashMap<String, String>>) -> Response {
    let foo_object = |name: &str, rv: u64, replicas: u64| {
        json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": rv.to_string()},
            "spec": {"deploymentName": format!("{name}-deploy"), "replicas": replicas},
        })
    };
    if q.get("watch").map(String::as_str) != Some("true") {
        let body = json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "FooList",
            "metadata": {"resourceVersion": "5"},
            "items": [foo_object("f1", 4, 1)],
        });
        return axum::Json(body).into_response();
    }
    let line = json!({"type": "ADDED", "object": foo_object("f2", 6, 3)});
    let events = futures::stream::iter([Ok::<_, std::io::Error>(format!("{line}\n"))])
        .chain(futures::stream::pending());
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(events))
        .unwrap()
}

#[tokio::test]
async fn dynamic_informer_lists_and_watches_a_custom_resource() {
    let app = Router::new().route("/apis/samplecontroller.k8s.io/v1alpha1/foos", get(foos));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serve = tokio::spawn(async move { axum::serve(listener, app).await });
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();

    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let foos = factory.dynamic(kube::core::ApiResource {
        group: "samplecontroller.k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "samplecontroller.k8s.io/v1alpha1".into(),
        kind: "Foo".into(),
        plural: "foos".into(),
    });
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let synced = tokio::time::timeout(
        Duration::from_secs(30),
        factory.wait_for_cache_sync(&cancel),
    );
    assert!(synced.await.unwrap());
    tokio::time::timeout(Duration::from_secs(30), foos.wait_for_resource_version("6"))
        .await
        .unwrap()
        .unwrap();
    let lister = foos.lister();
    let f1 = lister.get("default", "f1").unwrap();
    assert_eq!(f1.data["spec"]["replicas"], json!(1));
    let f2 = lister.get("default", "f2").unwrap();
    assert_eq!(f2.data["spec"]["deploymentName"], json!("f2-deploy"));
    assert_eq!(foos.last_sync_resource_version(), "6");

    cancel.cancel();
    factory.shutdown().await;
    serve.abort();
}
