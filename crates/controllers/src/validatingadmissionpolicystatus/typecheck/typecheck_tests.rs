use serde_json::{Value, json};

use super::*;
use crate::validatingadmissionpolicystatus::FakeSchemaSource;

/// An `apps/v1` document with Deployment (`spec.replicas`) and a `v1` one with ConfigMap.
fn source() -> FakeSchemaSource {
    let apps = json!({"components": {"schemas": {
        "io.k8s.api.apps.v1.Deployment": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
            "properties": {"spec": {"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}},
        },
        "io.k8s.api.apps.v1.DeploymentSpec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        "io.k8s.api.apps.v1.ReplicaSet": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "ReplicaSet"}],
            "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "minReadySeconds": {"type": "integer"}}}},
        },
    }}});
    let core = json!({"components": {"schemas": {
        "io.k8s.api.core.v1.ConfigMap": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "ConfigMap"}],
            "properties": {"data": {"type": "object", "additionalProperties": {"type": "string"}}},
        },
    }}});
    FakeSchemaSource::default()
        .with_resource("apps", "v1", "deployments", "Deployment")
        .with_resource("apps", "v1", "replicasets", "ReplicaSet")
        .with_resource("", "v1", "configmaps", "ConfigMap")
        .with_document("apps", "v1", apps)
        .with_document("", "v1", core)
}

fn policy(spec: Value) -> ValidatingAdmissionPolicy {
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p", "generation": 1},
        "spec": spec,
    }))
    .expect("policy")
}

fn rules(groups: &[&str], versions: &[&str], resources: &[&str]) -> Value {
    json!({"resourceRules": [{
        "apiGroups": groups, "apiVersions": versions, "resources": resources,
        "operations": ["CREATE"],
    }]})
}

async fn warnings(spec: Value) -> Vec<ExpressionWarning> {
    TypeChecker::new(Arc::new(source()))
        .check(&policy(spec))
        .await
}

#[tokio::test]
async fn a_well_typed_policy_has_no_warnings() {
    let w = warnings(json!({
        "matchConstraints": rules(&["apps"], &["v1"], &["deployments"]),
        "validations": [{"expression": "object.spec.replicas > 1", "messageExpression": "'got ' + string(object.spec.replicas)"}],
    }))
    .await;
    assert!(w.is_empty(), "{w:?}");
}

#[tokio::test]
async fn type_confusion_warns_on_the_expression_and_the_message_expression() {
    // The e2e test "should type check validation expressions".
    let w = warnings(json!({
        "matchConstraints": rules(&["apps"], &["v1"], &["deployments"]),
        "validations": [{
            "expression": "object.spec.replicas > '1'",
            "messageExpression": "'wants replicas > 1, got ' + object.spec.replicas",
        }],
    }))
    .await;
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(w[0].field_ref, "spec.validations[0].expression");
    assert_eq!(
        w[0].warning,
        "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'\n | object.spec.replicas > '1'\n | .....................^\n"
    );
    assert_eq!(w[1].field_ref, "spec.validations[0].messageExpression");
    assert!(
        w[1].warning
            .contains("found no matching overload for '_+_' applied to '(string, int)'"),
        "{}",
        w[1].warning
    );
}

#[tokio::test]
async fn each_matched_kind_is_checked_and_named() {
    let w = warnings(json!({
        "matchConstraints": rules(&["apps"], &["v1"], &["replicasets", "deployments", "deployments/scale", "*"]),
        "validations": [
            {"expression": "object.spec.minReadySeconds > 0"},
            {"expression": "object.spec.replicas > 'x'"},
        ],
    }))
    .await;
    assert_eq!(w.len(), 2, "{w:?}");
    // Only Deployment lacks minReadySeconds.
    assert_eq!(w[0].field_ref, "spec.validations[0].expression");
    assert!(
        w[0].warning
            .starts_with("apps/v1, Kind=Deployment: ERROR: "),
        "{}",
        w[0].warning
    );
    assert!(w[0].warning.contains("undefined field 'minReadySeconds'"));
    assert!(!w[0].warning.contains("ReplicaSet"));
    // Both fail the second, in kind order, one block each.
    let blocks: Vec<&str> = w[1].warning.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{}", w[1].warning);
    assert!(blocks[0].starts_with("apps/v1, Kind=Deployment: "));
    assert!(blocks[1].starts_with("apps/v1, Kind=ReplicaSet: "));
}

#[tokio::test]
async fn wildcards_and_unknown_resources_are_not_checked() {
    for constraints in [
        rules(&["*"], &["v1"], &["deployments"]),
        rules(&["apps"], &["*"], &["deployments"]),
        rules(&["apps"], &["v1"], &["*"]),
        rules(&["apps"], &["v1"], &["widgets"]),
        json!({}),
    ] {
        let w = warnings(json!({
            "matchConstraints": constraints,
            "validations": [{"expression": "object.spec.replicas > 'x'"}],
        }))
        .await;
        assert!(w.is_empty(), "{constraints}: {w:?}");
    }
}

#[tokio::test]
async fn variables_carry_their_types_and_params_need_a_param_kind() {
    let w = warnings(json!({
        "matchConstraints": rules(&["apps"], &["v1"], &["deployments"]),
        "variables": [
            {"name": "replicas", "expression": "object.spec.replicas"},
            {"name": "odd", "expression": "variables.replicas % 2 == 1"},
        ],
        "validations": [
            {"expression": "variables.odd && variables.replicas > 1"},
            {"expression": "variables.replicas > 'x'"},
            {"expression": "variables.missing"},
            {"expression": "params.max > 1"},
        ],
    }))
    .await;
    let refs: Vec<&str> = w.iter().map(|w| w.field_ref.as_str()).collect();
    assert_eq!(
        refs,
        [
            "spec.validations[1].expression",
            "spec.validations[2].expression",
            "spec.validations[3].expression"
        ],
        "{w:?}"
    );
    assert!(w[1].warning.contains("undefined field 'missing'"));
    assert!(w[2].warning.contains("undeclared reference to 'params'"));

    // With a paramKind whose schema is published, params is typed by it.
    let w = warnings(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": rules(&["apps"], &["v1"], &["deployments"]),
        "validations": [
            {"expression": "params.data['max'] == '3'"},
            {"expression": "params.data['max'] > 3"},
        ],
    }))
    .await;
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].field_ref, "spec.validations[1].expression");
    assert!(w[0].warning.contains("'_>_' applied to '(string, int)'"));
}

#[tokio::test]
async fn at_most_ten_kinds_are_checked() {
    let mut source = FakeSchemaSource::default();
    let mut resources = Vec::new();
    for i in 0..12 {
        let resource = format!("r{i:02}");
        source = source.with_resource("g", "v1", &resource, &format!("K{i:02}"));
        resources.push(resource);
    }
    let policy = policy(json!({"matchConstraints": {"resourceRules": [{
        "apiGroups": ["g"], "apiVersions": ["v1"], "resources": resources, "operations": ["*"],
    }]}}));
    let gvks = types_to_check(&policy, &source).await;
    assert_eq!(gvks.len(), MAX_TYPES_TO_CHECK);
    assert_eq!(gvks[0].to_string(), "g/v1, Kind=K00");
    assert_eq!(gvks[9].kind, "K09");
}
