//! Admission webhooks over real HTTPS: a test webhook server denies, allows and patches pods; failure policies with the webhook down or hung; selectors and match conditions skip it; a Service reference resolves to an EndpointSlice.

use serde_json::{Value, json};

use crate::common::{raw, send, timed};
use crate::webhook_server::{WebhookServer, local_address, patch};
use kcm_apiserver::testing::TestServer;

const ADMISSION: &str = "/apis/admissionregistration.k8s.io/v1";

/// A webhook on pod creates, with `extra` fields merged in.
fn hook(name: &str, client_config: Value, extra: Value) -> Value {
    let mut hook = json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": client_config,
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]});
    if let (Some(h), Some(extra)) = (hook.as_object_mut(), extra.as_object()) {
        h.extend(extra.clone());
    }
    hook
}

/// A client config calling `path` of `server`, trusting its certificate.
fn url_config(server: &WebhookServer, path: &str) -> Value {
    json!({"url": server.url(path), "caBundle": server.ca_bundle})
}

/// Stores a `kind` (`validating` or `mutating`) webhook configuration.
async fn configure(client: &kube::Client, kind: &str, name: &str, hooks: Vec<Value>) {
    let body = json!({"metadata": {"name": name}, "webhooks": hooks});
    let (code, out) = raw(
        client,
        "POST",
        &format!("{ADMISSION}/{kind}webhookconfigurations"),
        "application/json",
        serde_json::to_vec(&body).expect("json"),
    )
    .await;
    assert_eq!(code, 201, "{out}");
}

/// POSTs a pod; returns the code, the body and the `Warning` headers.
async fn create_pod(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    labels: Value,
    query: &str,
) -> (u16, Value, Vec<String>) {
    let pod = json!({"metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    send(
        client,
        "POST",
        &format!("/api/v1/namespaces/{namespace}/pods{query}"),
        Some("application/json"),
        serde_json::to_vec(&pod).expect("json"),
    )
    .await
}

/// Denies pods labelled `deny`, allows the others with a warning.
fn deny_label(_: &str, review: &Value) -> Option<Value> {
    let labels = &review["request"]["object"]["metadata"]["labels"];
    if labels.get("deny").is_some() {
        Some(json!({"allowed": false,
            "status": {"code": 403, "message": "pods with the deny label are not allowed"}}))
    } else {
        Some(json!({"allowed": true, "warnings": ["checked by the test webhook"]}))
    }
}

#[tokio::test]
async fn a_validating_webhook_denies_a_label_with_its_message() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let webhook = WebhookServer::start(deny_label).await;
        configure(&client, "validating", "deny", vec![hook("deny.kcm.test", url_config(&webhook, "/validate"), json!({}))]).await;

        let (code, status, _) = create_pod(&client, "default", "bad", json!({"deny": "yes"}), "").await;
        assert_eq!(code, 403, "{status}");
        assert_eq!(
            status["message"],
            "pods \"bad\" is forbidden: admission webhook \"deny.kcm.test\" denied the request: pods with the deny label are not allowed"
        );

        let (code, pod, warnings) = create_pod(&client, "default", "good", json!({"app": "web"}), "").await;
        assert_eq!(code, 201, "{pod}");
        assert!(
            warnings.iter().any(|w| w.contains("checked by the test webhook")),
            "{warnings:?}"
        );

        // What the webhook was sent: upstream's AdmissionReview v1.
        let reviews = webhook.reviews();
        assert_eq!(reviews.len(), 2);
        let review = &reviews[0];
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
        let request = &review["request"];
        assert!(!request["uid"].as_str().unwrap_or("").is_empty());
        assert_eq!(request["kind"], json!({"group": "", "version": "v1", "kind": "Pod"}));
        assert_eq!(request["resource"], json!({"group": "", "version": "v1", "resource": "pods"}));
        assert_eq!((&request["operation"], &request["namespace"], &request["name"]), (&json!("CREATE"), &json!("default"), &json!("bad")));
        assert!(!request["userInfo"]["username"].as_str().unwrap_or("").is_empty(), "{request}");
        assert_eq!(request["dryRun"], false);
        assert_eq!(request["options"]["kind"], "CreateOptions");

        // A dry run reaches a webhook without side effects, marked as such.
        let (code, _, _) = create_pod(&client, "default", "trial", json!({}), "?dryRun=All").await;
        assert_eq!(code, 201);
        let reviews = webhook.reviews();
        assert_eq!(reviews.len(), 3);
        assert_eq!(reviews[2]["request"]["dryRun"], true);

        // Updates are not in the rules: not sent.
        let (code, _) = raw(&client, "PATCH", "/api/v1/namespaces/default/pods/good",
            "application/merge-patch+json", br#"{"metadata": {"labels": {"deny": "now"}}}"#.to_vec()).await;
        assert_eq!(code, 200);
        assert_eq!(webhook.reviews().len(), 3);
    })
    .await;
}

#[tokio::test]
async fn a_mutating_webhook_patches_before_validating_webhooks_see_the_object() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let webhook = WebhookServer::start(|path, review| {
            let name = review["request"]["name"].as_str().unwrap_or("");
            let update = review["request"]["operation"] == "UPDATE";
            match path {
                "/mutate" if name == "broken" || update => Some(json!({"allowed": true, "patchType": "JSONPatch",
                    "patch": patch(json!([{"op": "remove", "path": "/spec/containers"}]))})),
                "/mutate" => Some(json!({"allowed": true, "patchType": "JSONPatch",
                    "patch": patch(json!([{"op": "add", "path": "/metadata/labels/injected", "value": "yes"}]))})),
                // Only lets in what the mutating webhook labelled.
                _ => {
                    let labelled = review["request"]["object"]["metadata"]["labels"]["injected"] == "yes";
                    Some(json!({"allowed": labelled, "status": {"code": 403, "message": "not injected"}}))
                }
            }
        })
        .await;
        configure(&client, "mutating", "inject", vec![hook("inject.kcm.test", url_config(&webhook, "/mutate"), json!({}))]).await;
        configure(&client, "validating", "check", vec![hook("check.kcm.test", url_config(&webhook, "/validate"), json!({}))]).await;

        let (code, pod, _) = create_pod(&client, "default", "plain", json!({"app": "web"}), "").await;
        assert_eq!(code, 201, "{pod}");
        assert_eq!(pod["metadata"]["labels"], json!({"app": "web", "injected": "yes"}));
        let (_, stored) = raw(&client, "GET", "/api/v1/namespaces/default/pods/plain", "application/json", Vec::new()).await;
        assert_eq!(stored["metadata"]["labels"]["injected"], "yes");

        // A patch that breaks the object is caught by validation after admission.
        let (code, status, _) = create_pod(&client, "default", "broken", json!({"app": "web"}), "").await;
        assert_eq!(code, 422, "{status}");
        assert!(status["message"].as_str().unwrap_or("").contains("spec.containers"), "{status}");

        // An update patched by a webhook is validated again too.
        let mut on_update = hook("break-updates.kcm.test", url_config(&webhook, "/mutate"), json!({}));
        on_update["rules"][0]["operations"] = json!(["UPDATE"]);
        on_update["objectSelector"] = json!({"matchLabels": {"break": "yes"}});
        configure(&client, "mutating", "break", vec![on_update]).await;
        let (code, status) = raw(&client, "PATCH", "/api/v1/namespaces/default/pods/plain",
            "application/merge-patch+json", br#"{"metadata": {"labels": {"break": "yes"}}}"#.to_vec()).await;
        assert_eq!(code, 422, "{status}");
    })
    .await;
}

#[tokio::test]
async fn failure_policies_decide_when_the_webhook_is_down_or_hung() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        // A port nothing listens on.
        let down_port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let hung = WebhookServer::start(|_, _| None).await;
        let down_url = format!("https://127.0.0.1:{down_port}/validate");
        let by_case = |case: &str| json!({"objectSelector": {"matchLabels": {"case": case}}});
        let with = |policy: &str, timeout: i64, case: &str| {
            let mut extra = by_case(case);
            extra["failurePolicy"] = json!(policy);
            extra["timeoutSeconds"] = json!(timeout);
            extra
        };
        configure(&client, "validating", "policies", vec![
            hook("down-ignore.kcm.test", json!({"url": down_url, "caBundle": hung.ca_bundle}), with("Ignore", 10, "down-ignore")),
            hook("down-fail.kcm.test", json!({"url": down_url, "caBundle": hung.ca_bundle}), with("Fail", 10, "down-fail")),
            hook("hung-ignore.kcm.test", url_config(&hung, "/validate"), with("Ignore", 1, "hung-ignore")),
            hook("hung-fail.kcm.test", url_config(&hung, "/validate"), with("Fail", 1, "hung-fail")),
        ]).await;

        let (code, pod, _) = create_pod(&client, "default", "a", json!({"case": "down-ignore"}), "").await;
        assert_eq!(code, 201, "Ignore lets the create through with the webhook down: {pod}");

        let (code, status, _) = create_pod(&client, "default", "b", json!({"case": "down-fail"}), "").await;
        assert_eq!(code, 500, "{status}");
        let message = status["message"].as_str().unwrap_or("");
        assert_eq!(
            message,
            format!(
                "Internal error occurred: failed calling webhook \"down-fail.kcm.test\": failed to call webhook: Post \"https://127.0.0.1:{down_port}/validate?timeout=10s\": dial tcp 127.0.0.1:{down_port}: connect: connection refused"
            )
        );

        let (code, pod, _) = create_pod(&client, "default", "c", json!({"case": "hung-ignore"}), "").await;
        assert_eq!(code, 201, "Ignore lets the create through after the timeout: {pod}");

        let (code, status, _) = create_pod(&client, "default", "d", json!({"case": "hung-fail"}), "").await;
        assert_eq!(code, 500, "{status}");
        assert_eq!(
            status["message"],
            format!(
                "Internal error occurred: failed calling webhook \"hung-fail.kcm.test\": failed to call webhook: Post \"{}?timeout=1s\": context deadline exceeded",
                hung.url("/validate")
            )
        );

        // Pods no webhook selects are not held up by any of them.
        let (code, _, _) = create_pod(&client, "default", "e", json!({}), "").await;
        assert_eq!(code, 201);
        assert_eq!(hung.reviews().len(), 2, "only the two hung cases reached the hung webhook");
    })
    .await;
}

#[tokio::test]
async fn selectors_and_match_conditions_skip_webhooks() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let deny_all = WebhookServer::start(|_, _| {
            Some(json!({"allowed": false, "status": {"code": 403, "message": "no"}}))
        })
        .await;
        configure(&client, "validating", "scoped", vec![
            hook("prod-only.kcm.test", url_config(&deny_all, "/ns"),
                json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}})),
            hook("conditional.kcm.test", url_config(&deny_all, "/cond"),
                json!({"matchConditions": [
                    {"name": "not-exempt", "expression": "object.metadata.name != 'exempt'"},
                    {"name": "creates", "expression": "request.operation == 'CREATE'"}]})),
        ]).await;

        // The conditional webhook skips `exempt`; the prod-only one skips `default`.
        let (code, pod, _) = create_pod(&client, "default", "exempt", json!({}), "").await;
        assert_eq!(code, 201, "{pod}");
        let (code, status, _) = create_pod(&client, "default", "other", json!({}), "").await;
        assert_eq!(code, 403);
        assert_eq!(status["message"], "pods \"other\" is forbidden: admission webhook \"conditional.kcm.test\" denied the request: no");

        let (code, _) = raw(&client, "POST", "/api/v1/namespaces", "application/json",
            br#"{"metadata": {"name": "prod", "labels": {"env": "prod"}}}"#.to_vec()).await;
        assert_eq!(code, 201);
        let (code, status, _) = create_pod(&client, "prod", "exempt", json!({}), "").await;
        assert_eq!(code, 403);
        assert_eq!(status["message"], "pods \"exempt\" is forbidden: admission webhook \"prod-only.kcm.test\" denied the request: no");
        assert_eq!(deny_all.reviews().len(), 2);

        // A condition that cannot be evaluated fails closed under `Fail`.
        configure(&client, "validating", "broken", vec![
            hook("broken.kcm.test", url_config(&deny_all, "/broken"),
                json!({"matchConditions": [{"name": "missing", "expression": "object.spec.nothing == 1"}]})),
        ]).await;
        let (code, status, _) = create_pod(&client, "default", "exempt2", json!({}), "").await;
        assert_eq!(code, 403, "{status}");
        let message = status["message"].as_str().unwrap_or("");
        assert!(
            message.starts_with("pods \"exempt2\" is forbidden: expression 'object.spec.nothing == 1' resulted in error: "),
            "{message}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_service_reference_resolves_to_an_endpoint_slice() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        // Endpoints may not be loopback addresses: the webhook listens on the machine's own.
        let Some(ip) = local_address() else {
            eprintln!("skipping: this machine has no non-loopback address");
            return;
        };
        let webhook = WebhookServer::start_on(ip, deny_label).await;
        let port = webhook.addr.port();
        let (code, out) = raw(&client, "POST", "/api/v1/namespaces/default/services", "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "hook"},
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}})).expect("json")).await;
        assert_eq!(code, 201, "{out}");
        let (code, out) = raw(&client, "POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "hook-1", "labels": {"kubernetes.io/service-name": "hook"}},
                "addressType": "IPv4", "ports": [{"name": "https", "port": port}],
                "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}]})).expect("json")).await;
        assert_eq!(code, 201, "{out}");
        configure(&client, "validating", "by-service", vec![hook("svc.kcm.test",
            json!({"service": {"namespace": "default", "name": "hook", "path": "/validate"}, "caBundle": webhook.ca_bundle}),
            json!({}))]).await;

        let (code, status, _) = create_pod(&client, "default", "bad", json!({"deny": "yes"}), "").await;
        assert_eq!(code, 403, "{status}");
        assert_eq!(
            status["message"],
            "pods \"bad\" is forbidden: admission webhook \"svc.kcm.test\" denied the request: pods with the deny label are not allowed"
        );
        let (code, pod, _) = create_pod(&client, "default", "good", json!({}), "").await;
        assert_eq!(code, 201, "{pod}");
    })
    .await;
}

#[tokio::test]
async fn if_needed_webhooks_are_reinvoked_after_a_later_change() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let webhook = WebhookServer::start(|path, review| {
            let labels = &review["request"]["object"]["metadata"]["labels"];
            let ops = match path {
                // Records whether it saw b's label.
                "/a" => json!([{"op": "add", "path": "/metadata/labels/a-saw-b",
                    "value": labels.get("b").is_some().to_string()}]),
                _ => json!([{"op": "add", "path": "/metadata/labels/b", "value": "yes"}]),
            };
            Some(json!({"allowed": true, "patchType": "JSONPatch", "patch": patch(ops)}))
        })
        .await;
        configure(
            &client,
            "mutating",
            "a",
            vec![hook(
                "a.kcm.test",
                url_config(&webhook, "/a"),
                json!({"reinvocationPolicy": "IfNeeded"}),
            )],
        )
        .await;
        configure(
            &client,
            "mutating",
            "b",
            vec![hook("b.kcm.test", url_config(&webhook, "/b"), json!({}))],
        )
        .await;

        let (code, pod, _) = create_pod(&client, "default", "p", json!({"app": "web"}), "").await;
        assert_eq!(code, 201, "{pod}");
        assert_eq!(
            pod["metadata"]["labels"],
            json!({"app": "web", "a-saw-b": "true", "b": "yes"})
        );
        let label_counts: Vec<String> = webhook
            .reviews()
            .iter()
            .map(|r| {
                r["request"]["object"]["metadata"]["labels"]
                    .as_object()
                    .map(|l| l.len())
                    .unwrap_or(0)
                    .to_string()
            })
            .collect();
        assert_eq!(
            label_counts,
            ["1", "2", "3"],
            "a, b, then a again (b is not IfNeeded)"
        );
    })
    .await;
}

#[tokio::test]
async fn configurations_with_match_conditions_that_do_not_compile_to_a_bool_are_refused() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let config = json!({"service": {"namespace": "default", "name": "webhook"}});
        for kind in ["validating", "mutating"] {
            let path = format!("{ADMISSION}/{kind}webhookconfigurations");
            let with = |conditions: Value| {
                json!({"metadata": {"name": format!("{kind}-conditions")},
                    "webhooks": [hook("conditions.example.com", config.clone(),
                        json!({"matchConditions": conditions}))]})
                .to_string()
            };
            let bad = with(json!([{"name": "invalid-expression-1", "expression": "... [] bad expression"}]));
            let (code, status) = raw(&client, "POST", &path, "application/json", bad).await;
            assert_eq!((code, &status["reason"]), (422, &json!("Invalid")), "{kind}: {status}");
            let message = status["message"].as_str().unwrap_or("");
            assert!(
                message.contains(r#"webhooks[0].matchConditions[0].expression: Invalid value: "... [] bad expression": compilation failed: "#),
                "{kind}: {message}"
            );
            let not_bool = with(json!([{"name": "string", "expression": "'yes'"}]));
            let (code, status) = raw(&client, "POST", &path, "application/json", not_bool).await;
            assert_eq!(code, 422, "{kind}: {status}");
            assert!(status["message"].as_str().unwrap_or("").ends_with("must evaluate to bool"), "{kind}: {status}");
            let good = with(json!([{"name": "skip-me", "expression": "object.metadata.name != 'skip-me'"}]));
            let (code, status) = raw(&client, "POST", &path, "application/json", good).await;
            assert_eq!(code, 201, "{kind}: {status}");
        }
    })
    .await;
}
