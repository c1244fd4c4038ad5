//! The plugin through the registry: policies and bindings created through the API decide later writes.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::Registry;
use crate::registry::options::{WriteOptions, WriteOutcome};
use crate::registry::resource::ResourceDef;
use crate::resources::admissionregistration::{
    VALIDATING_ADMISSION_POLICIES, VALIDATING_ADMISSION_POLICY_BINDINGS,
};
use crate::resources::apps::DEPLOYMENTS;
use crate::resources::core::CONFIGMAPS;
use crate::resources::namespace::NAMESPACES;
use crate::storage::MemoryStorage;

static ALL: &[&ResourceDef] = &[
    &NAMESPACES,
    &CONFIGMAPS,
    &DEPLOYMENTS,
    &VALIDATING_ADMISSION_POLICIES,
    &VALIDATING_ADMISSION_POLICY_BINDINGS,
];

async fn registry() -> Registry {
    let registry = Registry::with_resources(Arc::new(MemoryStorage::new()), ALL);
    registry
        .ensure_default_namespaces()
        .await
        .expect("namespaces");
    registry
}

async fn create(
    registry: &Registry,
    def: &ResourceDef,
    obj: Value,
) -> Result<WriteOutcome, ApiError> {
    let namespace = obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    registry
        .create(def, &namespace, obj, &WriteOptions::default())
        .await
}

/// The kubernetes.io example: at most 5 replicas for Deployments.
fn demo_policy(extra: Value) -> Value {
    let mut spec = json!({
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= 5"}],
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "demo-policy.example.com"}, "spec": spec})
}

fn binding(name: &str, actions: &[&str], extra: Value) -> Value {
    let mut spec = json!({"policyName": "demo-policy.example.com", "validationActions": actions});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec})
}

fn deployment(namespace: &str, name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

#[tokio::test]
async fn a_deny_binding_refuses_with_upstreams_message_and_code() {
    let registry = registry().await;
    create(
        &registry,
        &VALIDATING_ADMISSION_POLICIES,
        demo_policy(json!({})),
    )
    .await
    .expect("policy");
    // A policy without a binding does nothing.
    create(&registry, &DEPLOYMENTS, deployment("default", "before", 6))
        .await
        .expect("no binding yet");
    create(
        &registry,
        &VALIDATING_ADMISSION_POLICY_BINDINGS,
        binding("demo-binding-test.example.com", &["Deny"], json!({})),
    )
    .await
    .expect("binding");
    create(&registry, &DEPLOYMENTS, deployment("default", "small", 5))
        .await
        .expect("5 replicas pass");
    let err = create(&registry, &DEPLOYMENTS, deployment("default", "big", 6))
        .await
        .expect_err("6 replicas are refused");
    assert_eq!(err.code, 422);
    assert_eq!(err.reason, "Invalid");
    assert_eq!(
        err.message,
        "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5"
    );
    // Updates are checked too.
    let mut grown = deployment("default", "small", 9);
    grown["metadata"]["resourceVersion"] = json!("");
    let err = registry
        .update(
            &DEPLOYMENTS,
            "default",
            "small",
            grown,
            crate::registry::update::Target::Main,
            &WriteOptions::default(),
        )
        .await
        .map(|_| ())
        .expect_err("update to 9");
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn warn_bindings_warn_and_reasons_choose_the_code() {
    let registry = registry().await;
    let policy = demo_policy(
        json!({"validations": [{"expression": "object.spec.replicas <= 5",
        "message": "at most 5 replicas", "reason": "Forbidden"}]}),
    );
    create(&registry, &VALIDATING_ADMISSION_POLICIES, policy)
        .await
        .expect("policy");
    create(
        &registry,
        &VALIDATING_ADMISSION_POLICY_BINDINGS,
        binding("warn", &["Warn", "Audit"], json!({})),
    )
    .await
    .expect("binding");
    let out = create(&registry, &DEPLOYMENTS, deployment("default", "big", 6))
        .await
        .expect("a warning does not refuse");
    assert_eq!(
        out.warnings,
        [
            "Validation failed for ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'warn': at most 5 replicas"
        ]
    );
    create(
        &registry,
        &VALIDATING_ADMISSION_POLICY_BINDINGS,
        binding("deny", &["Deny"], json!({})),
    )
    .await
    .expect("binding");
    let err = create(&registry, &DEPLOYMENTS, deployment("default", "bigger", 7))
        .await
        .expect_err("refused");
    assert_eq!((err.code, err.reason), (403, "Forbidden"));
}

#[tokio::test]
async fn params_come_from_the_bindings_config_map() {
    let registry = registry().await;
    let policy = demo_policy(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [{"expression": "object.spec.replicas <= int(params.data.maxReplicas)",
            "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'"}],
    }));
    create(&registry, &VALIDATING_ADMISSION_POLICIES, policy)
        .await
        .expect("policy");
    create(
        &registry,
        &VALIDATING_ADMISSION_POLICY_BINDINGS,
        binding(
            "limits",
            &["Deny"],
            json!({"paramRef": {"name": "replica-limit", "namespace": "default",
                "parameterNotFoundAction": "Deny"}}),
        ),
    )
    .await
    .expect("binding");
    let err = create(&registry, &DEPLOYMENTS, deployment("default", "a", 1))
        .await
        .expect_err("no params yet");
    assert_eq!(
        err.message,
        "deployments.apps \"a\" is forbidden: ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'limits' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    create(
        &registry,
        &CONFIGMAPS,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "replica-limit", "namespace": "default"},
            "data": {"maxReplicas": "3"}}),
    )
    .await
    .expect("params");
    create(&registry, &DEPLOYMENTS, deployment("default", "a", 3))
        .await
        .expect("within the param");
    let err = create(&registry, &DEPLOYMENTS, deployment("default", "b", 4))
        .await
        .expect_err("above the param");
    assert!(
        err.message.ends_with("denied request: at most 3 replicas"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn bindings_narrow_by_namespace_and_policies_never_guard_themselves() {
    let registry = registry().await;
    create(
        &registry,
        &NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "prod", "labels": {"env": "prod"}}}),
    )
    .await
    .expect("namespace");
    // Every resource, every operation: it must not lock out its own removal.
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "demo-policy.example.com"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
            "operations": ["*"], "resources": ["*"]}]},
        "validations": [{"expression": "false", "message": "no"}]}});
    create(&registry, &VALIDATING_ADMISSION_POLICIES, policy)
        .await
        .expect("policy");
    create(
        &registry,
        &VALIDATING_ADMISSION_POLICY_BINDINGS,
        binding(
            "prod-only",
            &["Deny"],
            json!({"matchResources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}}),
        ),
    )
    .await
    .expect("binding");
    create(&registry, &DEPLOYMENTS, deployment("default", "a", 1))
        .await
        .expect("default is not prod");
    create(&registry, &DEPLOYMENTS, deployment("prod", "a", 1))
        .await
        .expect_err("prod is guarded");
    registry
        .delete(
            &VALIDATING_ADMISSION_POLICY_BINDINGS,
            "",
            "prod-only",
            &Default::default(),
        )
        .await
        .expect("policy resources are exempt");
    create(&registry, &DEPLOYMENTS, deployment("prod", "a", 1))
        .await
        .expect("unbound again");
}
