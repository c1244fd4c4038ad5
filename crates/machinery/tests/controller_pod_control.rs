//! RealPodControl and the pod ref manager against a fake API service: requests sent, events recorded.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::controller::api_status::{self, ApiStatus};
use kcm_machinery::controller::pod_control::{self, PodControl, RealPodControl};
use kcm_machinery::controller::{PodControllerRefManager, new_controller_ref};
use kcm_machinery::events::{EventType, FakeRecorder};
use kcm_machinery::labels::Selector;
use kcm_testing::{MetaBuilder, PodSpecBuilder, container, object_ref_of, pod, pod_template};
use kube::core::{GroupVersionKind, Status};
use serde_json::{Value, json};

/// One request the fake API server received.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    content_type: Option<String>,
    body: Value,
}

/// A canned reply: a status code and a JSON body.
type Reply = (StatusCode, Value);

/// A `kube::Client` whose requests go to `reply` and are recorded.
fn fake_client(
    reply: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
) -> (kube::Client, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let reply = Arc::new(reply);
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let log = Arc::clone(&log);
        let reply = Arc::clone(&reply);
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let seen = Seen {
                method: parts.method,
                path: parts.uri.path().to_owned(),
                content_type: parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            let (code, body) = reply(&seen);
            log.lock().expect("log").push(seen);
            let response = Response::builder()
                .status(code)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body.to_string())))
                .expect("response");
            Ok::<_, Infallible>(response)
        }
    });
    (kube::Client::new(service, "default"), seen)
}

fn status_reply(status: &Status) -> Reply {
    let code = StatusCode::from_u16(status.code).expect("status code");
    (code, serde_json::to_value(status).expect("status json"))
}

fn pod_reply(name: &str) -> Reply {
    (
        StatusCode::CREATED,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}}),
    )
}

fn controller() -> (ObjectMeta, ObjectReference, GroupVersionKind) {
    let rc = ReplicationController {
        metadata: kcm_testing::meta("foobar")
            .namespace("default")
            .uid("rc-uid")
            .build(),
        ..ReplicationController::default()
    };
    let reference = object_ref_of(&rc);
    (
        rc.metadata,
        reference,
        GroupVersionKind::gvk("", "v1", "ReplicationController"),
    )
}

fn template(labels: &[(&str, &str)]) -> PodTemplateSpec {
    pod_template()
        .labels(labels)
        .annotation("a", "b")
        .finalizers(&["example.com/f"])
        .container(container("c").image("foo/bar"))
        .restart_policy("Always")
        .build()
}

/// Upstream `TestCreatePodsWithGenerateName`: a POST to the namespace's pods with the pod
/// built from the template, then a `SuccessfulCreate` event naming the created pod.
#[tokio::test]
async fn create_pods_posts_pod_from_template_and_records_event() {
    let (client, seen) = fake_client(|_| pod_reply("foobar-abcde"));
    let recorder = Arc::new(FakeRecorder::new());
    let control = RealPodControl::new(client, recorder.clone());
    let (meta, reference, gvk) = controller();
    let controller_ref = new_controller_ref(&meta, &gvk);
    let template = template(&[("name", "foo"), ("type", "production")]);

    control
        .create_pods("default", &template, &reference, &controller_ref)
        .await
        .expect("create");

    let seen = seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::POST);
    assert_eq!(seen[0].path, "/api/v1/namespaces/default/pods");
    let pod: Pod = serde_json::from_value(seen[0].body.clone()).expect("pod body");
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("foobar-"));
    assert_eq!(pod.metadata.name, None);
    assert_eq!(
        pod.metadata.labels,
        template.metadata.as_ref().and_then(|m| m.labels.clone())
    );
    assert_eq!(
        pod.metadata.annotations,
        template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.clone())
    );
    assert_eq!(
        pod.metadata.finalizers,
        Some(vec!["example.com/f".to_owned()])
    );
    let owners = pod.metadata.owner_references.expect("owner refs");
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].uid, "rc-uid");
    assert_eq!(owners[0].kind, "ReplicationController");
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(owners[0].block_owner_deletion, Some(true));
    assert_eq!(pod.spec, template.spec);

    let events = recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, "SuccessfulCreate");
    assert_eq!(events[0].type_, EventType::Normal);
    assert_eq!(events[0].message, "Created pod: foobar-abcde");
    assert_eq!(events[0].regarding, reference);
}

#[tokio::test]
async fn create_pods_with_generate_name_overrides_the_prefix() {
    let (client, seen) = fake_client(|_| pod_reply("hello-xyz"));
    let control = RealPodControl::new(client, Arc::new(FakeRecorder::new()));
    let (meta, reference, gvk) = controller();
    control
        .create_pods_with_generate_name(
            "default",
            &template(&[("a", "b")]),
            &reference,
            &new_controller_ref(&meta, &gvk),
            "hello-",
        )
        .await
        .expect("create");
    let body = &seen.lock().expect("log")[0].body;
    assert_eq!(body["metadata"]["generateName"], "hello-");
}

#[tokio::test]
async fn create_failure_records_failed_create_unless_namespace_terminating() {
    let quota = Status::failure(
        "pods \"foobar-x\" is forbidden: exceeded quota: compute",
        "Forbidden",
    )
    .with_code(403);
    let (client, _) = fake_client(move |_| status_reply(&quota));
    let recorder = Arc::new(FakeRecorder::new());
    let control = RealPodControl::new(client, recorder.clone());
    let (meta, reference, gvk) = controller();
    let controller_ref = new_controller_ref(&meta, &gvk);
    let err = control
        .create_pods(
            "default",
            &template(&[("a", "b")]),
            &reference,
            &controller_ref,
        )
        .await
        .expect_err("quota");
    assert!(err.is_forbidden() && !err.is_namespace_terminating());
    let events = recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, "FailedCreate");
    assert_eq!(events[0].type_, EventType::Warning);
    assert_eq!(
        events[0].message,
        "Error creating: pods \"foobar-x\" is forbidden: exceeded quota: compute"
    );

    let terminating = api_status::namespace_terminating("pods", "", "default");
    let (client, _) = fake_client(move |_| status_reply(&terminating));
    let recorder = Arc::new(FakeRecorder::new());
    let control = RealPodControl::new(client, recorder.clone());
    let err = control
        .create_pods(
            "default",
            &template(&[("a", "b")]),
            &reference,
            &controller_ref,
        )
        .await
        .expect_err("terminating");
    assert!(
        err.is_namespace_terminating(),
        "callers must be able to tell: {err}"
    );
    assert!(
        recorder.events().is_empty(),
        "no event for a dying namespace"
    );
}

#[tokio::test]
async fn create_without_labels_is_refused_before_any_request() {
    let (client, seen) = fake_client(|_| pod_reply("x"));
    let control = RealPodControl::new(client, Arc::new(FakeRecorder::new()));
    let (meta, reference, gvk) = controller();
    let err = control
        .create_pods(
            "default",
            &template(&[]),
            &reference,
            &new_controller_ref(&meta, &gvk),
        )
        .await
        .expect_err("no labels");
    assert!(matches!(err, pod_control::Error::NoLabels { .. }), "{err}");
    let mut bad_ref = new_controller_ref(&meta, &gvk);
    bad_ref.block_owner_deletion = None;
    let err = control
        .create_pods("default", &template(&[("a", "b")]), &reference, &bad_ref)
        .await
        .expect_err("bad ref");
    assert!(
        err.to_string()
            .contains("controllerRef.BlockOwnerDeletion is not set"),
        "{err}"
    );
    assert!(seen.lock().expect("log").is_empty());
}

#[tokio::test]
async fn delete_pod_records_events_and_reports_not_found() {
    let (client, seen) = fake_client(|seen| {
        if seen.path.ends_with("/gone") {
            status_reply(&api_status::not_found("pods", "gone"))
        } else if seen.path.ends_with("/stuck") {
            status_reply(&api_status::internal_error("etcd unavailable"))
        } else {
            pod_reply("web-1")
        }
    });
    let recorder = Arc::new(FakeRecorder::new());
    let control = RealPodControl::new(client, recorder.clone());
    let (_, reference, _) = controller();

    control
        .delete_pod("default", "web-1", &reference)
        .await
        .expect("delete");
    // Upstream `TestDeletePodsAllowsMissing`: a missing pod is a NotFound error, no event.
    let err = control
        .delete_pod("default", "gone", &reference)
        .await
        .expect_err("missing");
    assert!(err.is_not_found());
    let err = control
        .delete_pod("default", "stuck", &reference)
        .await
        .expect_err("server error");
    assert!(!err.is_not_found());

    let seen = seen.lock().expect("log").clone();
    assert_eq!(seen[0].method, Method::DELETE);
    assert_eq!(seen[0].path, "/api/v1/namespaces/default/pods/web-1");
    let events: Vec<(String, String)> = recorder
        .events()
        .into_iter()
        .map(|e| (e.reason, e.message))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                "SuccessfulDelete".to_owned(),
                "Deleted pod: web-1".to_owned()
            ),
            (
                "FailedDelete".to_owned(),
                "Error deleting: Internal error occurred: etcd unavailable".to_owned()
            ),
        ]
    );
}

/// The ref manager through the real pod control: the adoption is a strategic-merge PATCH of
/// the pod carrying the controller reference and the pod's uid.
#[tokio::test]
async fn adoption_sends_strategic_merge_patch() {
    let (client, seen) = fake_client(|_| pod_reply("orphan"));
    let control: Arc<dyn PodControl> =
        Arc::new(RealPodControl::new(client, Arc::new(FakeRecorder::new())));
    let (meta, _, gvk) = controller();
    let manager = PodControllerRefManager::for_pods(
        control,
        &meta,
        Selector::parse("app=web").expect("selector"),
        gvk,
        None,
    );
    let orphan = pod("orphan")
        .namespace("default")
        .uid("pod-uid")
        .label("app", "web")
        .arc();
    let claimed = manager
        .claim_pods(std::slice::from_ref(&orphan), |_| true)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    let seen = seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::PATCH);
    assert_eq!(seen[0].path, "/api/v1/namespaces/default/pods/orphan");
    assert_eq!(
        seen[0].content_type.as_deref(),
        Some("application/strategic-merge-patch+json")
    );
    assert_eq!(seen[0].body["metadata"]["uid"], "pod-uid");
    assert_eq!(
        seen[0].body["metadata"]["ownerReferences"][0],
        json!({
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "name": "foobar",
            "uid": "rc-uid",
            "controller": true,
            "blockOwnerDeletion": true,
        })
    );
}
