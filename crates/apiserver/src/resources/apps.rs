//! apps/v1 workloads: deployments, replicasets, statefulsets, daemonsets (defaults, selector rules, status reset), and controllerrevisions.

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_machinery::labels::Selector;
use serde_json::Value;

use crate::object;
use crate::pointer::At;
use crate::registry::generation::Generation;
use crate::registry::resource::{ResourceDef, SelectableField};
use crate::registry::strategy::{Strategy, keep_requested_meta, typed, typed_roundtrip_checked};
use crate::registry::subresource::Subresource;
use crate::resources::pod::validate_pod_spec;
use crate::resources::pod_defaults::default_template;
use crate::resources::quantities::{self, canonicalize_template};
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::FieldError;

/// The deployments resource.
pub static DEPLOYMENTS: ResourceDef = ResourceDef::of::<Deployment>()
    .generation(Generation::Spec)
    .short_names(&["deploy"])
    .categories(&["all"])
    .subresources(&[Subresource::Status, Subresource::Scale])
    .decode_with(decode_deployment)
    .strategy(&WorkloadStrategy(Workload::Deployment))
    .printer(printers::DEPLOYMENT)
    .merge_schema(&kinds::DEPLOYMENT);

/// The replicasets resource.
pub static REPLICASETS: ResourceDef = ResourceDef::of::<ReplicaSet>()
    .generation(Generation::Spec)
    .short_names(&["rs"])
    .categories(&["all"])
    .subresources(&[Subresource::Status, Subresource::Scale])
    .fields(&[SelectableField::string(
        "status.replicas",
        "/status/replicas",
    )])
    .decode_with(decode_replica_set)
    .strategy(&WorkloadStrategy(Workload::ReplicaSet))
    .printer(printers::REPLICA_SET)
    .merge_schema(&kinds::TEMPLATED_WORKLOAD);

/// The statefulsets resource.
pub static STATEFULSETS: ResourceDef = ResourceDef::of::<StatefulSet>()
    .generation(Generation::Spec)
    .short_names(&["sts"])
    .categories(&["all"])
    .subresources(&[Subresource::Status, Subresource::Scale])
    .decode_with(decode_stateful_set)
    .strategy(&WorkloadStrategy(Workload::StatefulSet))
    .printer(printers::STATEFUL_SET)
    .merge_schema(&kinds::TEMPLATED_WORKLOAD);

/// The daemonsets resource.
pub static DAEMONSETS: ResourceDef = ResourceDef::of::<DaemonSet>()
    .generation(Generation::Spec)
    .short_names(&["ds"])
    .categories(&["all"])
    .subresources(&[Subresource::Status])
    .decode_with(decode_daemon_set)
    .strategy(&WorkloadStrategy(Workload::DaemonSet))
    .printer(printers::DAEMON_SET)
    .merge_schema(&kinds::TEMPLATED_WORKLOAD);

/// The controllerrevisions resource.
pub static CONTROLLER_REVISIONS: ResourceDef = ResourceDef::of::<ControllerRevision>()
    .strategy(&ControllerRevisionStrategy)
    .printer(printers::CONTROLLER_REVISION)
    .merge_schema(&kinds::METADATA_ONLY);

/// The ControllerRevision strategy: `data` is required and never changes, the revision is
/// not negative (upstream's `ValidateControllerRevision` / `...Update`).
#[derive(Debug, Default)]
pub struct ControllerRevisionStrategy;

impl Strategy for ControllerRevisionStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if obj.get("data").is_none_or(Value::is_null) {
            errs.push(FieldError::required("data", "data is mandatory"));
        }
        if let Some(revision) = obj.get("revision").and_then(Value::as_i64)
            && revision < 0
        {
            errs.push(FieldError::invalid(
                "revision",
                revision,
                "must be greater than or equal to 0",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("data") != old.get("data") {
            errs.push(FieldError::invalid(
                "data",
                new.get("data").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs
    }
}

/// Which workload a [`WorkloadStrategy`] serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 ReplicaSet.
    ReplicaSet,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
}

/// The strategy shared by the apps/v1 workloads (upstream's `deploymentStrategy`,
/// `rsStrategy`, `statefulSetStrategy`, `daemonSetStrategy`).
#[derive(Debug)]
pub struct WorkloadStrategy(pub Workload);

impl Strategy for WorkloadStrategy {
    /// Upstream's `deploymentStatusStrategy.PrepareForUpdate` resets only spec and labels, so
    /// a Deployment's annotations (`deployment.kubernetes.io/revision`) change through
    /// `/status`; the other workloads keep their stored metadata.
    fn prepare_for_status_update(&self, new: &mut Value, requested_meta: Option<&Value>) {
        if self.0 != Workload::Deployment {
            return;
        }
        keep_requested_meta(new, requested_meta, &["annotations"]);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // Status is the controller's: a new workload starts with an empty one.
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
        if self.0 == Workload::DaemonSet && template_generation(obj) < 1 {
            set_template_generation(obj, 1);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // Deployments also bump the generation on annotation changes, since annotations are
        // copied to their ReplicaSets (upstream's deploymentStrategy.PrepareForUpdate).
        if self.0 == Workload::Deployment
            && !object::spec_changed(new, old)
            && new.at("/metadata/annotations") != old.at("/metadata/annotations")
        {
            object::set_meta(new, "generation", object::generation(old) + 1);
        }
        // A DaemonSet counts its template changes (upstream's `spec.templateGeneration`, kept in
        // v1 as an annotation): the controller labels pods with it.
        if self.0 == Workload::DaemonSet {
            if new.at("/spec/template") != old.at("/spec/template") {
                set_template_generation(new, template_generation(old) + 1);
            } else if template_generation(new) == 0 {
                set_template_generation(new, template_generation(old));
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let Some(spec) = obj.get("spec") else {
            errs.push(FieldError::required("spec", ""));
            return errs;
        };
        if let Some(replicas) = spec.get("replicas").and_then(Value::as_i64)
            && replicas < 0
        {
            errs.push(FieldError::invalid(
                "spec.replicas",
                replicas,
                "must be greater than or equal to 0",
            ));
        }
        for field in [
            "minReadySeconds",
            "revisionHistoryLimit",
            "progressDeadlineSeconds",
        ] {
            if let Some(v) = spec.get(field).and_then(Value::as_i64)
                && v < 0
            {
                errs.push(FieldError::invalid(
                    format!("spec.{field}"),
                    v,
                    "must be greater than or equal to 0",
                ));
            }
        }
        let template_required = self.0 != Workload::ReplicaSet
            || spec.get("replicas").and_then(Value::as_i64) != Some(0);
        // Upstream validates a StatefulSet's template without its pod spec
        // (`ValidatePodTemplateSpecForStatefulSet`): its mounts name claim templates, which are
        // not volumes until the controller adds them to each pod.
        let pod_spec_checked = self.0 != Workload::StatefulSet;
        validate_selector_and_template(spec, template_required, pod_spec_checked, &mut errs);
        if self.0 == Workload::Deployment {
            validate_deployment_strategy(spec, &mut errs);
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let new_sel = new.at("/spec/selector");
        let old_sel = old.at("/spec/selector");
        if new_sel != old_sel {
            errs.push(FieldError::invalid(
                "spec.selector",
                new_sel.cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        if self.0 == Workload::StatefulSet {
            let allowed = [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "revisionHistoryLimit",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ];
            let strip = |v: Option<&Value>| {
                let mut v = v.cloned().unwrap_or(Value::Null);
                if let Some(m) = v.as_object_mut() {
                    for f in allowed {
                        m.remove(f);
                    }
                }
                v
            };
            if strip(new.get("spec")) != strip(old.get("spec")) {
                errs.push(FieldError::forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                ));
            }
        }
        errs
    }
}

/// The annotation a v1 DaemonSet carries its template generation in, as apps/v1
/// `DeprecatedTemplateGeneration`.
pub const DEPRECATED_TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// The template generation of a DaemonSet (0 when absent or not a number).
fn template_generation(obj: &Value) -> i64 {
    obj.at("/metadata/annotations")
        .and_then(|a| a.get(DEPRECATED_TEMPLATE_GENERATION))
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn set_template_generation(obj: &mut Value, generation: i64) {
    if generation < 1 {
        return;
    }
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Some(a) = annotations.as_object_mut() {
        a.insert(
            DEPRECATED_TEMPLATE_GENERATION.to_owned(),
            Value::String(generation.to_string()),
        );
    }
}

/// Decodes a Deployment with upstream's defaults (`SetDefaults_Deployment`) and the pod
/// template's.
pub fn decode_deployment(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<Deployment, quantities::Error>(obj, |d| {
        if let Some(spec) = d.spec.as_mut() {
            spec.replicas.get_or_insert(1);
            spec.revision_history_limit.get_or_insert(10);
            spec.progress_deadline_seconds.get_or_insert(600);
            let strategy = spec.strategy.get_or_insert_with(Default::default);
            let kind = strategy
                .type_
                .get_or_insert_with(|| "RollingUpdate".to_owned());
            if kind == "RollingUpdate" {
                let ru = strategy.rolling_update.get_or_insert_with(Default::default);
                ru.max_unavailable
                    .get_or_insert_with(|| IntOrString::String("25%".to_owned()));
                ru.max_surge
                    .get_or_insert_with(|| IntOrString::String("25%".to_owned()));
            }
            canonicalize_template(&mut spec.template)?;
            default_template(&mut spec.template);
        }
        Ok(())
    })
}

/// Decodes a ReplicaSet with upstream's defaults and the pod template's.
pub fn decode_replica_set(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<ReplicaSet, quantities::Error>(obj, |rs| {
        if let Some(spec) = rs.spec.as_mut() {
            spec.replicas.get_or_insert(1);
            if let Some(t) = spec.template.as_mut() {
                canonicalize_template(t)?;
                default_template(t);
            }
        }
        Ok(())
    })
}

/// Decodes a StatefulSet with upstream's defaults and the pod template's.
pub fn decode_stateful_set(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<StatefulSet, quantities::Error>(obj, |s| {
        if let Some(spec) = s.spec.as_mut() {
            spec.replicas.get_or_insert(1);
            spec.revision_history_limit.get_or_insert(10);
            spec.pod_management_policy
                .get_or_insert_with(|| "OrderedReady".to_owned());
            let us = spec.update_strategy.get_or_insert_with(Default::default);
            let kind = us.type_.get_or_insert_with(|| "RollingUpdate".to_owned());
            if kind == "RollingUpdate" {
                us.rolling_update
                    .get_or_insert_with(Default::default)
                    .partition
                    .get_or_insert(0);
            }
            let retention = spec
                .persistent_volume_claim_retention_policy
                .get_or_insert_with(Default::default);
            retention
                .when_deleted
                .get_or_insert_with(|| "Retain".to_owned());
            retention
                .when_scaled
                .get_or_insert_with(|| "Retain".to_owned());
            canonicalize_template(&mut spec.template)?;
            default_template(&mut spec.template);
        }
        Ok(())
    })
}

/// Decodes a DaemonSet with upstream's defaults and the pod template's.
pub fn decode_daemon_set(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<DaemonSet, quantities::Error>(obj, |ds| {
        if let Some(spec) = ds.spec.as_mut() {
            spec.revision_history_limit.get_or_insert(10);
            let us = spec.update_strategy.get_or_insert_with(Default::default);
            let kind = us.type_.get_or_insert_with(|| "RollingUpdate".to_owned());
            if kind == "RollingUpdate" {
                let ru = us.rolling_update.get_or_insert_with(Default::default);
                ru.max_unavailable.get_or_insert(IntOrString::Int(1));
                ru.max_surge.get_or_insert(IntOrString::Int(0));
            }
            canonicalize_template(&mut spec.template)?;
            default_template(&mut spec.template);
        }
        Ok(())
    })
}

/// The shared workload rule: a non-empty valid selector that matches the template's labels,
/// a template whose pods restart `Always` and, with `pod_spec_checked`, a valid pod spec.
fn validate_selector_and_template(
    spec: &Value,
    template_required: bool,
    pod_spec_checked: bool,
    errs: &mut Vec<FieldError>,
) {
    let selector = match spec.get("selector") {
        None | Some(Value::Null) => {
            errs.push(FieldError::required("spec.selector", ""));
            None
        }
        Some(raw) => match typed::<LabelSelector>(raw) {
            Some(ls)
                if ls.match_labels.as_ref().is_none_or(|m| m.is_empty())
                    && ls.match_expressions.as_ref().is_none_or(|e| e.is_empty()) =>
            {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    raw.clone(),
                    "empty selector is invalid for deployment",
                ));
                None
            }
            Some(ls) => match Selector::from_label_selector(&ls) {
                Ok(sel) => Some(sel),
                Err(e) => {
                    errs.push(FieldError::invalid(
                        "spec.selector",
                        raw.clone(),
                        e.to_string(),
                    ));
                    None
                }
            },
            None => {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    raw.clone(),
                    "invalid label selector",
                ));
                None
            }
        },
    };
    let template = spec.get("template").and_then(typed::<PodTemplateSpec>);
    let Some(template) = template else {
        if template_required {
            errs.push(FieldError::required("spec.template", ""));
        }
        return;
    };
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    if let Some(sel) = selector
        && !sel.matches(&labels)
    {
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            serde_json::to_value(&labels).unwrap_or(Value::Null),
            "`selector` does not match template `labels`",
        ));
    }
    match template.spec.as_ref() {
        Some(pod_spec) => {
            if pod_spec_checked {
                validate_pod_spec(pod_spec, "spec.template.spec", errs);
            }
            let policy = pod_spec.restart_policy.as_deref().unwrap_or("Always");
            if policy != "Always" {
                errs.push(FieldError::not_supported(
                    "spec.template.spec.restartPolicy",
                    policy,
                    &["Always"],
                ));
            }
        }
        None => errs.push(FieldError::required("spec.template.spec", "")),
    }
}

fn validate_deployment_strategy(spec: &Value, errs: &mut Vec<FieldError>) {
    let kind = spec
        .at("/strategy/type")
        .and_then(Value::as_str)
        .unwrap_or("RollingUpdate");
    match kind {
        "Recreate" => {
            if spec.at("/strategy/rollingUpdate").is_some() {
                errs.push(FieldError::forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let is_zero = |v: Option<&Value>| match v {
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s == "0%" || s == "0",
                _ => false,
            };
            if is_zero(spec.at("/strategy/rollingUpdate/maxUnavailable"))
                && is_zero(spec.at("/strategy/rollingUpdate/maxSurge"))
            {
                errs.push(FieldError::invalid(
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    spec.at("/strategy/rollingUpdate/maxUnavailable")
                        .cloned()
                        .unwrap_or(Value::Null),
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            "spec.strategy.type",
            other,
            &["Recreate", "RollingUpdate"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(selector: Value, labels: Value, replicas: i64) -> Value {
        decode_deployment(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": selector,
                "template": {"metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
            }
        }))
        .expect("decodes")
    }

    #[test]
    fn deployment_defaults() {
        let d = deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web"}),
            2,
        );
        assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
    }

    #[test]
    fn a_stateful_set_template_may_mount_its_claim_templates_a_deployment_may_not() {
        let spec = json!({
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                "restartPolicy": "Always",
                "containers": [{"name": "db", "image": "postgres",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}}],
        });
        let obj = json!({"metadata": {"name": "db"}, "spec": spec});
        let sts = WorkloadStrategy(Workload::StatefulSet).validate(&obj);
        assert!(sts.is_empty(), "{sts:?}");
        let deploy: Vec<String> = WorkloadStrategy(Workload::Deployment)
            .validate(&obj)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            deploy,
            ["spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"data\""]
        );
    }

    #[test]
    fn workload_validation() {
        let s = WorkloadStrategy(Workload::Deployment);
        let cases = [
            (
                "valid",
                json!({"matchLabels": {"app": "web"}}),
                json!({"app": "web"}),
                1,
                vec![],
            ),
            (
                "selector mismatch",
                json!({"matchLabels": {"app": "web"}}),
                json!({"app": "other"}),
                1,
                vec!["spec.template.metadata.labels"],
            ),
            (
                "negative replicas",
                json!({"matchLabels": {"app": "web"}}),
                json!({"app": "web"}),
                -1,
                vec!["spec.replicas"],
            ),
            (
                "empty selector",
                json!({}),
                json!({"app": "web"}),
                1,
                vec!["spec.selector"],
            ),
        ];
        for (name, selector, labels, replicas, fields) in cases {
            let errs = s.validate(&deployment(selector, labels, replicas));
            let got: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
            assert_eq!(got, fields, "case {name}");
        }
    }

    #[test]
    fn controller_revision_data_is_required_and_immutable() {
        let s = ControllerRevisionStrategy;
        let rev = json!({"metadata": {"name": "web-1"}, "revision": 1, "data": {"spec": {}}});
        assert!(s.validate(&rev).is_empty());
        let errs: Vec<String> = s
            .validate(&json!({"revision": -1}))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "data: Required value: data is mandatory",
                "revision: Invalid value: -1: must be greater than or equal to 0"
            ]
        );
        let mut changed = rev.clone();
        changed["data"] = json!({"spec": {"x": 1}});
        assert_eq!(s.validate_update(&changed, &rev).len(), 1);
    }

    #[test]
    fn selector_is_immutable() {
        let s = WorkloadStrategy(Workload::ReplicaSet);
        let old = json!({"spec": {"replicas": 0, "selector": {"matchLabels": {"a": "1"}}}});
        let new = json!({"spec": {"replicas": 0, "selector": {"matchLabels": {"a": "2"}}}});
        let errs = s.validate_update(&new, &old);
        assert!(
            errs.iter()
                .any(|e| e.field == "spec.selector" && e.detail == "field is immutable")
        );
    }

    /// Upstream's `daemonSetStrategy`: a new DaemonSet is template generation 1, a template
    /// change bumps it, other updates keep it (also when the request drops the annotation).
    #[test]
    fn daemon_sets_count_template_generations() {
        let s = WorkloadStrategy(Workload::DaemonSet);
        let generation = |v: &Value| template_generation(v);
        let mut created = json!({"metadata": {"name": "ds"}, "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "v1"}]}}}});
        s.prepare_for_create(&mut created);
        assert_eq!(generation(&created), 1);
        let mut relabelled = created.clone();
        relabelled["metadata"]["labels"] = json!({"x": "y"});
        s.prepare_for_update(&mut relabelled, &created);
        assert_eq!(generation(&relabelled), 1, "no template change");
        let mut stripped = created.clone();
        stripped["metadata"]["annotations"] = json!({});
        s.prepare_for_update(&mut stripped, &created);
        assert_eq!(generation(&stripped), 1, "kept from the stored object");
        let mut changed = created.clone();
        changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("v2");
        s.prepare_for_update(&mut changed, &created);
        assert_eq!(generation(&changed), 2);
        let mut other = json!({"metadata": {"name": "rs"}, "spec": {}});
        WorkloadStrategy(Workload::ReplicaSet).prepare_for_create(&mut other);
        assert_eq!(generation(&other), 0, "only DaemonSets");
    }
}
