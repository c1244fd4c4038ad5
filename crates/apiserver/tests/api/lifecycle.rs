//! A resource's whole life over HTTP — create, get, list, merge patch, server-side apply, watch, delete — for the API tests of each group.

use serde_json::{Value, json};

use crate::common::raw;

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// One resource to take through its life.
pub struct Lifecycle<'a> {
    /// The collection path, e.g. `/apis/rbac.authorization.k8s.io/v1/clusterroles`.
    pub collection: &'a str,
    /// The object to create (its `metadata.name` is used throughout).
    pub object: Value,
    /// A merge patch to apply after the create.
    pub patch: Value,
    /// A server-side apply configuration (YAML or JSON) applied by the manager `lifecycle`.
    pub apply: Value,
}

/// What each step answered.
pub struct Outcome {
    /// The created object.
    pub created: Value,
    /// The object after the merge patch.
    pub patched: Value,
    /// The object after the apply.
    pub applied: Value,
    /// The types of the watch events seen from the create's revision on.
    pub events: Vec<String>,
}

/// Takes `r` through its life, asserting each step's code, and returns what the steps
/// answered for the caller's checks of defaults and semantics.
pub async fn run(client: &kube::Client, r: Lifecycle<'_>) -> Outcome {
    let name = r.object["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    let item = format!("{}/{name}", r.collection);
    let body = serde_json::to_vec(&r.object).expect("json");
    let (code, created) = raw(client, "POST", r.collection, JSON, body).await;
    assert_eq!(code, 201, "create {item}: {created}");
    let (code, got) = raw(client, "GET", &item, JSON, Vec::new()).await;
    assert_eq!(code, 200, "get {item}: {got}");
    assert_eq!(got["metadata"]["uid"], created["metadata"]["uid"]);
    let (code, list) = raw(client, "GET", r.collection, JSON, Vec::new()).await;
    assert_eq!(code, 200, "list {}: {list}", r.collection);
    assert!(
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .any(|i| i["metadata"]["name"] == name.as_str()),
        "{name} listed: {list}"
    );
    let from = created["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let patch = serde_json::to_vec(&r.patch).expect("json");
    let (code, patched) = raw(client, "PATCH", &item, MERGE, patch).await;
    assert_eq!(code, 200, "merge patch {item}: {patched}");
    let apply = serde_json::to_vec(&r.apply).expect("json");
    let (code, applied) = raw(
        client,
        "PATCH",
        &format!("{item}?fieldManager=lifecycle&force=true"),
        APPLY,
        apply,
    )
    .await;
    assert_eq!(code, 200, "apply {item}: {applied}");
    assert!(
        applied["metadata"]["managedFields"]
            .as_array()
            .is_some_and(|m| m
                .iter()
                .any(|e| e["manager"] == "lifecycle" && e["operation"] == "Apply")),
        "apply recorded: {applied}"
    );
    // The watch from the create's revision replays the later writes, then times out.
    let watch = format!(
        "{}?watch=true&resourceVersion={from}&timeoutSeconds=1&fieldSelector=metadata.name%3D{name}",
        r.collection
    );
    let events = watch_events(client, &watch).await;
    let (code, deleted) = raw(client, "DELETE", &item, JSON, Vec::new()).await;
    assert_eq!(code, 200, "delete {item}: {deleted}");
    let (code, _) = raw(client, "GET", &item, JSON, Vec::new()).await;
    assert_eq!(code, 404, "{item} gone");
    Outcome {
        created,
        patched,
        applied,
        events,
    }
}

/// The event types of a watch that ends by itself (`timeoutSeconds`).
async fn watch_events(client: &kube::Client, path: &str) -> Vec<String> {
    let request = http::Request::builder()
        .method("GET")
        .uri(path)
        .body(kube::client::Body::empty())
        .expect("request");
    let response = client.send(request).await.expect("watch");
    assert_eq!(response.status().as_u16(), 200, "watch {path}");
    let bytes = response.into_body().collect_bytes().await.expect("body");
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or(json!({})))
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .collect()
}
