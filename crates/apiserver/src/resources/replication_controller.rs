//! core/v1 replicationcontrollers: upstream's defaults (selector and labels from the template, one replica), the RC spec and status rules, and orphaning by default on delete.

use k8s_openapi::api::core::v1::{ReplicationController, ReplicationControllerSpec};
use kcm_machinery::labels::Selector;
use serde_json::Value;

use crate::pointer::At;
use crate::registry::strategy::{Strategy, typed, typed_roundtrip_checked};
use crate::resources::job::nonnegative;
use crate::resources::pod::validate_pod_spec;
use crate::resources::pod_defaults::default_template;
use crate::resources::quantities::{self, canonicalize_template};
use crate::validation::FieldError;

/// The ReplicationController strategy (upstream's `rcStrategy`).
#[derive(Debug, Default)]
pub struct ReplicationControllerStrategy;

impl Strategy for ReplicationControllerStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match obj.get("spec").and_then(typed::<ReplicationControllerSpec>) {
            Some(spec) => validate_spec(&spec, &mut errs),
            None => errs.push(FieldError::required("spec", "")),
        }
        errs
    }

    /// upstream's `ValidateReplicationControllerStatus`.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let status = |f: &str| {
            new.at(&format!("/status/{f}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        for field in [
            "replicas",
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "observedGeneration",
        ] {
            nonnegative(&mut errs, &format!("status.{field}"), Some(status(field)));
        }
        let replicas = status("replicas");
        for field in ["fullyLabeledReplicas", "readyReplicas", "availableReplicas"] {
            if status(field) > replicas {
                errs.push(FieldError::invalid(
                    format!("status.{field}"),
                    status(field),
                    "cannot be greater than status.replicas",
                ));
            }
        }
        if status("availableReplicas") > status("readyReplicas") {
            errs.push(FieldError::invalid(
                "status.availableReplicas",
                status("availableReplicas"),
                "cannot be greater than readyReplicas",
            ));
        }
        errs
    }

    fn orphans_by_default(&self) -> bool {
        true
    }
}

/// Decodes a ReplicationController with `SetDefaults_ReplicationController`: an empty
/// selector and empty labels come from the template's labels; one replica.
pub fn decode_replication_controller(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<ReplicationController, quantities::Error>(obj, |rc| {
        if let Some(spec) = rc.spec.as_mut() {
            let labels = spec
                .template
                .as_ref()
                .and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.labels.clone());
            if let Some(labels) = labels {
                if spec.selector.as_ref().is_none_or(|s| s.is_empty()) {
                    spec.selector = Some(labels.clone());
                }
                if rc.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
                    rc.metadata.labels = Some(labels);
                }
            }
            spec.replicas.get_or_insert(1);
            if let Some(template) = spec.template.as_mut() {
                canonicalize_template(template)?;
                default_template(template);
            }
        }
        Ok(())
    })
}

/// upstream's `ValidateReplicationControllerSpec` and `ValidatePodTemplateSpecForRC`.
fn validate_spec(spec: &ReplicationControllerSpec, errs: &mut Vec<FieldError>) {
    nonnegative(
        errs,
        "spec.minReadySeconds",
        spec.min_ready_seconds.map(i64::from),
    );
    let selector_map = spec.selector.clone().unwrap_or_default();
    let selector = Selector::from_map(&selector_map).ok();
    if selector_map.is_empty() {
        errs.push(FieldError::required("spec.selector", ""));
    }
    nonnegative(errs, "spec.replicas", spec.replicas.map(i64::from));
    let Some(template) = spec.template.as_ref() else {
        errs.push(FieldError::required("spec.template", ""));
        return;
    };
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    if !selector_map.is_empty()
        && let Some(sel) = selector
        && !sel.matches(&labels)
    {
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            serde_json::to_value(&labels).unwrap_or(Value::Null),
            "`selector` does not match template `labels`",
        ));
    }
    let Some(pod_spec) = template.spec.as_ref() else {
        errs.push(FieldError::required("spec.template.spec", ""));
        return;
    };
    validate_pod_spec(pod_spec, "spec.template.spec", errs);
    let policy = pod_spec.restart_policy.as_deref().unwrap_or("Always");
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["Always"],
        ));
    }
    if pod_spec.active_deadline_seconds.is_some() {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in ReplicationController is not Supported",
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rc(spec: Value) -> Value {
        decode_replication_controller(json!({"apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": "web", "namespace": "default"}, "spec": spec}))
        .expect("decodes")
    }

    fn template(labels: Value) -> Value {
        json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn selector_labels_and_replicas_default_from_the_template() {
        let obj = rc(json!({"template": template(json!({"app": "web"}))}));
        assert_eq!(obj["spec"]["selector"], json!({"app": "web"}));
        assert_eq!(obj["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["template"]["spec"]["restartPolicy"], "Always");
        assert!(ReplicationControllerStrategy.validate(&obj).is_empty());
    }

    #[test]
    fn validation_messages_are_upstreams() {
        let cases = [
            (
                "no template",
                json!({"selector": {"app": "web"}}),
                vec!["spec.template: Required value"],
            ),
            (
                "selector mismatch and negative replicas",
                json!({"replicas": -1, "selector": {"app": "web"}, "template": template(json!({"app": "db"}))}),
                vec![
                    "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                    "spec.template.metadata.labels: Invalid value: {\"app\":\"db\"}: `selector` does not match template `labels`",
                ],
            ),
            (
                "no selector anywhere",
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}),
                vec!["spec.selector: Required value"],
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(
                messages(ReplicationControllerStrategy.validate(&rc(spec))),
                want,
                "{name}"
            );
        }
        let mut never = rc(json!({"template": template(json!({"app": "web"}))}));
        never["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        assert_eq!(
            messages(ReplicationControllerStrategy.validate(&never)),
            [
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
            ]
        );
    }

    #[test]
    fn status_counts_stay_within_replicas() {
        let new = json!({"status": {"replicas": 1, "readyReplicas": 2, "availableReplicas": 2}});
        assert_eq!(
            messages(ReplicationControllerStrategy.validate_status_update(&new, &new)),
            [
                "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 2: cannot be greater than status.replicas",
            ]
        );
    }
}
