//! admissionregistration.k8s.io/v1 over HTTP: webhook configurations and the validating and mutating admission policies are defaulted, validated and stored (webhooks.rs calls the webhooks).

use kcm_apiserver::testing::TestServer;
use serde_json::json;

use crate::common::{raw, timed};
use crate::lifecycle::{self, Lifecycle};

const ADMISSION: &str = "/apis/admissionregistration.k8s.io/v1";

fn webhook(name: &str) -> serde_json::Value {
    json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "hook", "namespace": "default"}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]})
}

#[tokio::test]
async fn webhook_configurations_are_defaulted_and_stored() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{ADMISSION}/mutatingwebhookconfigurations"),
                object: json!({"metadata": {"name": "inject"}, "webhooks": [webhook("inject.example.com")]}),
                patch: json!({"metadata": {"labels": {"a": "b"}}}),
                apply: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                    "metadata": {"name": "inject"}, "webhooks": [webhook("inject.example.com")]}),
            },
        )
        .await;
        let hook = &out.created["webhooks"][0];
        assert_eq!(
            (&hook["failurePolicy"], &hook["matchPolicy"], &hook["timeoutSeconds"], &hook["reinvocationPolicy"]),
            (&json!("Fail"), &json!("Equivalent"), &json!(10), &json!("Never"))
        );
        assert_eq!((&hook["namespaceSelector"], &hook["objectSelector"]), (&json!({}), &json!({})));
        assert_eq!(hook["clientConfig"]["service"]["port"], 443);
        assert_eq!(hook["rules"][0]["scope"], "*");

        // A Fail webhook whose Service does not exist: a matching create is refused with
        // upstream's call error (webhooks.rs drives webhooks that answer).
        let (code, _) = raw(&client, "POST", &format!("{ADMISSION}/validatingwebhookconfigurations"), "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "deny"}, "webhooks": [webhook("deny.example.com")]})).expect("json")).await;
        assert_eq!(code, 201);
        let (code, status) = raw(&client, "POST", "/api/v1/namespaces/default/configmaps", "application/json",
            br#"{"metadata": {"name": "refused"}}"#.to_vec()).await;
        assert_eq!(code, 500, "{status}");
        assert_eq!(
            status["message"],
            "Internal error occurred: failed calling webhook \"deny.example.com\": failed to call webhook: Post \"https://hook.default.svc:443/?timeout=10s\": services \"hook\" not found"
        );
        // The configuration itself is exempt: it can always be removed.
        let (code, _) = raw(&client, "DELETE", &format!("{ADMISSION}/validatingwebhookconfigurations/deny"), "application/json", Vec::new()).await;
        assert_eq!(code, 200);
        let (code, cm) = raw(&client, "POST", "/api/v1/namespaces/default/configmaps", "application/json",
            br#"{"metadata": {"name": "works-again"}}"#.to_vec()).await;
        assert_eq!(code, 201, "{cm}");

        let (code, status) = raw(&client, "POST", &format!("{ADMISSION}/validatingwebhookconfigurations"), "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "bad"}, "webhooks": [{"name": "bad.example.com",
                "clientConfig": {"url": "http://example.com"}}]})).expect("json")).await;
        assert_eq!(code, 422);
        assert_eq!(
            status["message"],
            "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"bad\" is invalid: [webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, webhooks[0].clientConfig.url: Invalid value: \"http://example.com\": 'https' is the only allowed URL scheme, webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1]"
        );
    })
    .await;
}

#[tokio::test]
async fn admission_policies_and_bindings() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let policy = json!({"metadata": {"name": "max-replicas"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]}});
        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{ADMISSION}/validatingadmissionpolicies"),
                object: policy.clone(),
                patch: json!({"spec": {"failurePolicy": "Ignore"}, "status": {"observedGeneration": 9}}),
                apply: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                    "metadata": {"name": "max-replicas"}, "spec": policy["spec"]}),
            },
        )
        .await;
        assert_eq!(out.created["spec"]["failurePolicy"], "Fail");
        assert_eq!(out.created["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(out.created["status"], json!({}));
        assert_eq!(out.patched["status"], json!({}), "status only through /status");
        lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{ADMISSION}/validatingadmissionpolicybindings"),
                object: json!({"metadata": {"name": "max-replicas"}, "spec": {"policyName": "max-replicas",
                    "validationActions": ["Deny"]}}),
                patch: json!({"spec": {"validationActions": ["Warn", "Audit"]}}),
                apply: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": "max-replicas"}, "spec": {"policyName": "max-replicas", "validationActions": ["Deny"]}}),
            },
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn mutating_admission_policies_and_bindings_are_defaulted_validated_and_stored() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let policy = json!({"metadata": {"name": "replicas"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["deployments"]}]},
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": "Object{spec: Object.spec{replicas: 100}}"}}]}});
        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{ADMISSION}/mutatingadmissionpolicies"),
                object: policy.clone(),
                patch: json!({"spec": {"reinvocationPolicy": "IfNeeded"}}),
                apply: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
                    "metadata": {"name": "replicas"}, "spec": policy["spec"]}),
            },
        )
        .await;
        assert_eq!(out.created["spec"]["failurePolicy"], "Fail");
        assert_eq!(out.created["metadata"]["generation"], 1);
        assert_eq!(out.created.get("status"), None, "v1 has no status");
        assert_eq!(out.patched["spec"]["reinvocationPolicy"], "IfNeeded");
        assert_eq!(out.patched["metadata"]["generation"], 2);

        let (code, status) = raw(&client, "POST", &format!("{ADMISSION}/mutatingadmissionpolicies"), "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "bad"}, "spec": {
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["DELETE"], "resources": ["pods"]}]},
                "mutations": [{"patchType": "JSONPatch"}]}})).expect("json")).await;
        assert_eq!(code, 422, "{status}");
        assert_eq!(
            status["message"],
            "MutatingAdmissionPolicy.admissionregistration.k8s.io \"bad\" is invalid: [spec.matchConstraints.resourceRules.operations: Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\", spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch, spec.reinvocationPolicy: Required value]"
        );

        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{ADMISSION}/mutatingadmissionpolicybindings"),
                object: json!({"metadata": {"name": "replicas"}, "spec": {"policyName": "replicas",
                    "matchResources": {"namespaceSelector": {"matchLabels": {"team": "a"}}}}}),
                patch: json!({"spec": {"policyName": "other"}}),
                apply: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
                    "metadata": {"name": "replicas"}, "spec": {"policyName": "replicas"}}),
            },
        )
        .await;
        let m = &out.created["spec"]["matchResources"];
        assert_eq!((&m["matchPolicy"], &m["objectSelector"]), (&json!("Equivalent"), &json!({})));
        assert_eq!(out.patched["spec"]["policyName"], "other");
    })
    .await;
}

/// The conformance suite's policies over HTTP: a bound MutatingAdmissionPolicy mutates the
/// Deployments created after it, an unbound one does nothing.
#[tokio::test]
async fn mutating_admission_policies_mutate_bound_creates() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let post = |path: String, body: serde_json::Value| {
            let client = client.clone();
            async move {
                raw(&client, "POST", &path, "application/json", serde_json::to_vec(&body).expect("json")).await
            }
        };
        let deployment = |name: &str| json!({"metadata": {"name": name}, "spec": {"replicas": 1,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}});
        let (code, policy) = post(format!("{ADMISSION}/mutatingadmissionpolicies"), json!({
            "metadata": {"name": "replicas.policy.example.com"}, "spec": {
                "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                "reinvocationPolicy": "Never",
                "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                    "expression": "Object{spec: Object.spec{replicas: 1337}}"}}]}})).await;
        assert_eq!(code, 201, "{policy}");
        let deployments = "/apis/apps/v1/namespaces/default/deployments".to_owned();
        let (code, unbound) = post(deployments.clone(), deployment("unbound")).await;
        assert_eq!((code, &unbound["spec"]["replicas"]), (201, &json!(1)), "{unbound}");
        let (code, binding) = post(format!("{ADMISSION}/mutatingadmissionpolicybindings"), json!({
            "metadata": {"name": "replicas.binding.example.com"},
            "spec": {"policyName": "replicas.policy.example.com"}})).await;
        assert_eq!(code, 201, "{binding}");
        let (code, marker) = post(deployments, deployment("marker")).await;
        assert_eq!((code, &marker["spec"]["replicas"]), (201, &json!(1337)), "{marker}");
    })
    .await;
}
