//! The plugin through the registry: policies and bindings created through the API mutate later writes.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::Registry;
use crate::registry::options::{WriteOptions, WriteOutcome};
use crate::registry::resource::ResourceDef;
use crate::resources::admissionregistration::{
    MUTATING_ADMISSION_POLICIES, MUTATING_ADMISSION_POLICY_BINDINGS,
};
use crate::resources::apps::DEPLOYMENTS;
use crate::resources::core::CONFIGMAPS;
use crate::resources::namespace::NAMESPACES;
use crate::storage::MemoryStorage;

static ALL: &[&ResourceDef] = &[
    &NAMESPACES,
    &CONFIGMAPS,
    &DEPLOYMENTS,
    &MUTATING_ADMISSION_POLICIES,
    &MUTATING_ADMISSION_POLICY_BINDINGS,
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

/// A policy named `name` on Deployment creates and updates with `mutations`, and `extra`
/// spec fields.
fn policy(name: &str, mutations: Value, extra: Value) -> Value {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "reinvocationPolicy": "Never",
        "mutations": mutations,
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec})
}

fn apply(expression: &str) -> Value {
    json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}})
}

fn json_patch(expression: &str) -> Value {
    json!({"patchType": "JSONPatch", "jsonPatch": {"expression": expression}})
}

fn binding(name: &str, policy: &str, extra: Value) -> Value {
    let mut spec = json!({"policyName": policy});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec})
}

fn deployment(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}})
}

/// Both of upstream's conformance policies, bound in a labelled namespace only.
#[tokio::test]
async fn apply_configurations_mutate_creates_in_the_bound_namespace() {
    let registry = registry().await;
    create(
        &registry,
        &NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "marked", "labels": {"e2e-unique": "true"}}}),
    )
    .await
    .expect("namespace");
    let marked = json!({"namespaceSelector": {"matchLabels": {"e2e-unique": "true"}}});
    let mut annotate = policy(
        "annotate.example.com",
        json!([apply(
            r#"Object{metadata: Object.metadata{annotations: {"mutated-by": "admission-policy"}}}"#
        )]),
        json!({}),
    );
    annotate["spec"]["matchConstraints"]["namespaceSelector"] = marked["namespaceSelector"].clone();
    create(&registry, &MUTATING_ADMISSION_POLICIES, annotate)
        .await
        .expect("policy");
    create(
        &registry,
        &MUTATING_ADMISSION_POLICIES,
        policy(
            "replicas.example.com",
            json!([apply("Object{spec: Object.spec{replicas: 1337}}")]),
            json!({}),
        ),
    )
    .await
    .expect("policy");
    // Policies without bindings do nothing.
    let plain = create(&registry, &DEPLOYMENTS, deployment("marked", "before"))
        .await
        .expect("create");
    assert_eq!(plain.object["spec"]["replicas"], 1);
    for (name, policy) in [
        ("annotate", "annotate.example.com"),
        ("replicas", "replicas.example.com"),
    ] {
        create(
            &registry,
            &MUTATING_ADMISSION_POLICY_BINDINGS,
            binding(name, policy, json!({"matchResources": marked})),
        )
        .await
        .expect("binding");
    }
    let created = create(&registry, &DEPLOYMENTS, deployment("marked", "marker"))
        .await
        .expect("create");
    assert_eq!(
        created.object["metadata"]["annotations"]["mutated-by"],
        "admission-policy"
    );
    assert_eq!(created.object["spec"]["replicas"], 1337);
    // The rest of the object is as sent, with its defaults.
    assert_eq!(created.object["spec"]["strategy"]["type"], "RollingUpdate");
    let elsewhere = create(&registry, &DEPLOYMENTS, deployment("default", "marker"))
        .await
        .expect("create");
    assert_eq!(elsewhere.object["spec"]["replicas"], 1);
    assert_eq!(elsewhere.object["metadata"].get("annotations"), None);
}

/// A JSON patch built from a param and a variable, with `jsonpatch.escapeKey`.
#[tokio::test]
async fn json_patches_read_params_and_variables() {
    let registry = registry().await;
    create(
        &registry,
        &CONFIGMAPS,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "team", "namespace": "default"}, "data": {"owner": "blue"}}),
    )
    .await
    .expect("param");
    create(
        &registry,
        &MUTATING_ADMISSION_POLICIES,
        policy(
            "owner.example.com",
            json!([json_patch(
                r#"[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("example.com/owner"), value: variables.owner}]"#
            )]),
            json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "variables": [{"name": "owner", "expression": "params.data.owner"}]}),
        ),
    )
    .await
    .expect("policy");
    create(
        &registry,
        &MUTATING_ADMISSION_POLICY_BINDINGS,
        binding(
            "owner",
            "owner.example.com",
            json!({"paramRef": {"name": "team", "parameterNotFoundAction": "Deny"}}),
        ),
    )
    .await
    .expect("binding");
    let created = create(&registry, &DEPLOYMENTS, deployment("default", "web"))
        .await
        .expect("create");
    assert_eq!(
        created.object["metadata"]["labels"],
        json!({"app": "web", "example.com/owner": "blue"})
    );
}

/// An expression that fails refuses the request as upstream's dispatcher does under
/// `failurePolicy: Fail`, and is ignored under `Ignore`.
#[tokio::test]
async fn a_failing_mutation_refuses_unless_its_policy_ignores_failures() {
    let registry = registry().await;
    create(
        &registry,
        &MUTATING_ADMISSION_POLICIES,
        policy(
            "broken.example.com",
            json!([apply(
                "Object{spec: Object.spec{replicas: object.spec.nope}}"
            )]),
            json!({}),
        ),
    )
    .await
    .expect("policy");
    create(
        &registry,
        &MUTATING_ADMISSION_POLICY_BINDINGS,
        binding("broken", "broken.example.com", json!({})),
    )
    .await
    .expect("binding");
    let err = create(&registry, &DEPLOYMENTS, deployment("default", "web"))
        .await
        .expect_err("refused");
    assert_eq!((err.code, err.reason), (403, "Invalid"));
    assert_eq!(
        err.message,
        "policy 'broken.example.com' with binding 'broken' denied request: expression 'Object{spec: Object.spec{replicas: object.spec.nope}}' resulted in error: no such key: nope"
    );

    let mut ignored = registry
        .get(&MUTATING_ADMISSION_POLICIES, "", "broken.example.com")
        .await
        .expect("get");
    ignored["spec"]["failurePolicy"] = json!("Ignore");
    registry
        .update(
            &MUTATING_ADMISSION_POLICIES,
            "",
            "broken.example.com",
            ignored,
            crate::registry::update::Target::Main,
            &WriteOptions::default(),
        )
        .await
        .expect("update");
    let created = create(&registry, &DEPLOYMENTS, deployment("default", "web"))
        .await
        .expect("ignored");
    assert_eq!(created.object["spec"]["replicas"], 1);
}

/// `reinvocationPolicy: IfNeeded`: a policy applied before another changed the object is
/// applied again in the second round; `Never` is not.
#[tokio::test]
async fn if_needed_policies_see_later_changes() {
    for (reinvocation, want) in [("IfNeeded", json!("blue")), ("Never", Value::Null)] {
        let registry = registry().await;
        // "a-copy" runs first (by name) and copies a label that "b-label" sets after it.
        create(
            &registry,
            &MUTATING_ADMISSION_POLICIES,
            policy(
                "a-copy.example.com",
                json!([apply(
                    r#"Object{metadata: Object.metadata{annotations: {"copied": "team" in object.metadata.labels ? object.metadata.labels["team"] : ""}}}"#
                )]),
                json!({"reinvocationPolicy": reinvocation}),
            ),
        )
        .await
        .expect("policy");
        create(
            &registry,
            &MUTATING_ADMISSION_POLICIES,
            policy(
                "b-label.example.com",
                json!([apply(
                    r#"Object{metadata: Object.metadata{labels: {"team": "blue"}}}"#
                )]),
                json!({}),
            ),
        )
        .await
        .expect("policy");
        for (name, policy) in [("a", "a-copy.example.com"), ("b", "b-label.example.com")] {
            create(
                &registry,
                &MUTATING_ADMISSION_POLICY_BINDINGS,
                binding(name, policy, json!({})),
            )
            .await
            .expect("binding");
        }
        let created = create(&registry, &DEPLOYMENTS, deployment("default", "web"))
            .await
            .expect("create");
        let copied = &created.object["metadata"]["annotations"]["copied"];
        match reinvocation {
            "IfNeeded" => assert_eq!(*copied, want, "{reinvocation}"),
            _ => assert_eq!(*copied, json!(""), "{reinvocation}"),
        }
        assert_eq!(created.object["metadata"]["labels"]["team"], "blue");
    }
}

/// Policies never apply to policies, and a delete has no object to mutate.
#[tokio::test]
async fn policies_leave_policy_resources_and_deletes_alone() {
    let registry = registry().await;
    let everything = json!({"matchConstraints": {"resourceRules": [{"apiGroups": ["*"],
        "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]}});
    create(
        &registry,
        &MUTATING_ADMISSION_POLICIES,
        policy(
            "all.example.com",
            json!([apply(
                r#"Object{metadata: Object.metadata{labels: {"touched": "yes"}}}"#
            )]),
            everything,
        ),
    )
    .await
    .expect("policy");
    let bound = create(
        &registry,
        &MUTATING_ADMISSION_POLICY_BINDINGS,
        binding("all", "all.example.com", json!({})),
    )
    .await
    .expect("binding");
    assert_eq!(bound.object["metadata"].get("labels"), None);
    let cm = create(
        &registry,
        &CONFIGMAPS,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "default"}}),
    )
    .await
    .expect("create");
    assert_eq!(cm.object["metadata"]["labels"]["touched"], "yes");
    registry
        .delete(&CONFIGMAPS, "default", "c", &Default::default())
        .await
        .expect("deletes are not mutated");
}
