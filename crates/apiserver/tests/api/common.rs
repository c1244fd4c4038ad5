//! Shared helpers: object builders, raw HTTP requests, timeouts.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::ObjectMeta;
use serde_json::{Value, json};

/// Every test body runs under this timeout, so a hung server fails the test instead of CI.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `f` with [`TEST_TIMEOUT`].
pub async fn timed<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test timed out")
}

/// A ConfigMap named `name` with `data`.
pub fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..Default::default()
    }
}

/// A one-container pod named `name` with `labels`.
pub fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| ((*k).to_owned(), Value::from(*v))).collect::<serde_json::Map<_, _>>()},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}
    }))
    .expect("pod")
}

/// The `kube` error's HTTP code and Status reason, for asserting on failures.
pub fn status_of(err: kube::Error) -> (u16, String, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Collects every event of a watch until the server ends it (use a short `timeoutSeconds`).
pub async fn drain<K>(
    stream: impl futures::Stream<Item = Result<kube::core::WatchEvent<K>, kube::Error>>,
) -> Vec<kube::core::WatchEvent<K>> {
    use futures::StreamExt;
    stream.map(|e| e.expect("watch event")).collect().await
}

/// The next event of a watch (panics if the watch ends first).
pub async fn next_event<K>(
    stream: &mut (impl futures::Stream<Item = Result<kube::core::WatchEvent<K>, kube::Error>> + Unpin),
) -> kube::core::WatchEvent<K> {
    use futures::StreamExt;
    stream
        .next()
        .await
        .expect("watch ended")
        .expect("watch event")
}

/// A short label for an event: its type and the object's name (or bookmark RV).
pub fn describe<K: kube::Resource>(ev: &kube::core::WatchEvent<K>) -> String {
    use kube::core::WatchEvent;
    match ev {
        WatchEvent::Added(o) => format!("ADDED {}", o.meta().name.clone().unwrap_or_default()),
        WatchEvent::Modified(o) => {
            format!("MODIFIED {}", o.meta().name.clone().unwrap_or_default())
        }
        WatchEvent::Deleted(o) => format!("DELETED {}", o.meta().name.clone().unwrap_or_default()),
        WatchEvent::Bookmark(_) => "BOOKMARK".to_owned(),
        WatchEvent::Error(s) => format!("ERROR {}", s.code),
    }
}

/// Sends a raw request through `client` and returns the status code and the JSON body
/// (`Value::Null` when the body is not JSON).
pub async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: impl Into<Vec<u8>>,
) -> (u16, Value) {
    let (code, body, _) = send(client, method, path, Some(content_type), body.into()).await;
    (code, body)
}

/// Drives one resource through real HTTP as clients do, with a typed `kube` API: create,
/// get, list, a watch that sees a merge patch, and a server-side apply by a second manager.
/// `obj` must be valid; `patch` a merge patch that changes it; `apply` a full apply
/// configuration of the same object (JSON). Returns the created, patched and applied
/// objects, for the caller's own assertions.
pub async fn lifecycle<K>(api: &kube::Api<K>, obj: &K, patch: Value, apply: Value) -> (K, K, K)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    use futures::StreamExt;
    use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchParams};
    use kube::core::WatchEvent;

    let created = api
        .create(&PostParams::default(), obj)
        .await
        .expect("create");
    let name = created.meta().name.clone().expect("name");
    let got = api.get(&name).await.expect("get");
    assert_eq!(
        got.meta().uid,
        created.meta().uid,
        "get returns the created object"
    );
    let list = api.list(&ListParams::default()).await.expect("list");
    assert!(
        list.items
            .iter()
            .any(|o| o.meta().name.as_deref() == Some(&name)),
        "list holds {name}"
    );
    let rv = list.metadata.resource_version.clone().expect("list rv");
    let mut watch = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(10), &rv)
        .await
        .expect("watch")
        .boxed();
    let patched = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("merge patch");
    assert_ne!(
        patched.meta().resource_version,
        created.meta().resource_version,
        "the patch changed {name}"
    );
    match next_event(&mut watch).await {
        WatchEvent::Modified(o) => assert_eq!(o.meta().name.as_deref(), Some(name.as_str())),
        other => panic!("expected MODIFIED {name}, got {}", describe(&other)),
    }
    let applied = api
        .patch(
            &name,
            &PatchParams::apply("lifecycle-test").force(),
            &Patch::Apply(apply),
        )
        .await
        .expect("apply");
    let managers: Vec<String> = applied
        .meta()
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers.iter().any(|m| m == "lifecycle-test"),
        "the apply is recorded: {managers:?}"
    );
    (created, patched, applied)
}

/// Sends a bodiless request; returns the status code, the JSON body and the `Warning`
/// headers.
pub async fn with_warnings(
    client: &kube::Client,
    method: &str,
    path: &str,
) -> (u16, Value, Vec<String>) {
    send(client, method, path, None, Vec::new()).await
}

/// Sends a request (with a `content-type` when given); returns the status code, the JSON body
/// (`Null` when it is not JSON) and the `Warning` headers.
pub async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, Value, Vec<String>) {
    let mut request = http::Request::builder().method(method).uri(path);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let request = request
        .body(kube::client::Body::from(body))
        .expect("request");
    let response = client.send(request).await.expect("response");
    let code = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    let bytes = response.into_body().collect_bytes().await.expect("body");
    (
        code,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        warnings,
    )
}
