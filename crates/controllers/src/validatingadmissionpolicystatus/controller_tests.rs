use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use kcm_machinery::informer::store::Indexer;
use kube::core::Status;
use serde_json::{Value, json};

use super::*;
use crate::validatingadmissionpolicystatus::{FakeSchemaSource, FakeStatusClient};

fn source() -> FakeSchemaSource {
    FakeSchemaSource::default()
        .with_resource("apps", "v1", "deployments", "Deployment")
        .with_document(
            "apps",
            "v1",
            json!({"components": {"schemas": {"Deployment": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
                "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}},
            }}}}),
        )
}

fn policy(
    name: &str,
    generation: i64,
    observed: Option<i64>,
    expression: &str,
) -> ValidatingAdmissionPolicy {
    let mut policy: Value = json!({
        "metadata": {"name": name, "generation": generation},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "operations": ["CREATE"]}]},
            "validations": [{"expression": expression}],
        },
    });
    if let Some(observed) = observed {
        policy["status"] = json!({"observedGeneration": observed, "typeChecking": {}});
    }
    serde_json::from_value(policy).expect("policy")
}

fn controller(
    policies: Vec<ValidatingAdmissionPolicy>,
) -> (
    ValidatingAdmissionPolicyStatusController,
    Arc<FakeStatusClient>,
) {
    let cache = Indexer::default();
    for policy in policies {
        cache.add(Arc::new(policy)).expect("add");
    }
    let client = Arc::new(FakeStatusClient::new());
    let controller = ValidatingAdmissionPolicyStatusController::with_cache(
        cache,
        client.clone(),
        Arc::new(source()),
        None,
    );
    (controller, client)
}

#[tokio::test]
async fn an_unchecked_generation_gets_its_type_checking_and_observed_generation() {
    let (controller, client) = controller(vec![
        policy("good", 1, None, "object.spec.replicas > 1"),
        policy("bad", 3, Some(2), "object.spec.replicas > '1'"),
    ]);
    controller.sync("good").await.expect("sync good");
    controller.sync("bad").await.expect("sync bad");
    let applies = client.applies();
    assert_eq!(applies.len(), 2);
    assert_eq!((applies[0].0.as_str(), applies[0].1), ("good", 1));
    assert!(applies[0].2.is_empty());
    assert_eq!((applies[1].0.as_str(), applies[1].1), ("bad", 3));
    assert_eq!(applies[1].2.len(), 1);
    assert_eq!(applies[1].2[0].field_ref, "spec.validations[0].expression");
}

#[tokio::test]
async fn a_checked_generation_and_a_deleted_policy_are_left_alone() {
    let (controller, client) = controller(vec![policy(
        "seen",
        2,
        Some(2),
        "object.spec.replicas > '1'",
    )]);
    controller.sync("seen").await.expect("sync seen");
    controller.sync("gone").await.expect("sync gone");
    assert!(client.applies().is_empty());
}

#[tokio::test]
async fn a_failed_apply_is_an_error_so_the_key_is_retried() {
    let (controller, client) = controller(vec![policy("p", 1, None, "true")]);
    client.fail_with(Status::failure("etcd down", "InternalError").with_code(500));
    let err = controller.sync("p").await.expect_err("apply fails");
    assert!(
        err.to_string().contains("ValidatingAdmissionPolicy p"),
        "{err}"
    );
}

#[tokio::test]
async fn adds_and_updates_enqueue_the_policy_by_name() {
    let (controller, _client) = controller(Vec::new());
    let handlers = controller.event_handlers().clone();
    handlers.on_add(Arc::new(policy("a", 1, None, "true")), true);
    handlers.on_update(
        Arc::new(policy("b", 1, None, "true")),
        Arc::new(policy("b", 2, None, "true")),
    );
    assert_eq!(controller.queue().len(), 2);
}

#[test]
fn the_status_patch_has_an_empty_type_checking_without_warnings() {
    let patch = crate::validatingadmissionpolicystatus::client::status_patch("p", 4, &[]);
    assert_eq!(
        patch["status"],
        json!({"observedGeneration": 4, "typeChecking": {}})
    );
}
