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
