//! core/v1 pods: defaults, Pending status on create, the update rules, graceful deletion.

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use serde_json::{Value, json};

use crate::pointer::At;
use crate::registry::generation::Generation;
use crate::registry::resource::{ResourceDef, SelectableField};
use crate::registry::strategy::{Strategy, typed, typed_roundtrip_checked};
use crate::registry::subresource::Subresource;
use crate::resources::pod_defaults::default_pod_spec;
use crate::resources::quantities;
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::FieldError;

/// The pods resource.
pub static PODS: ResourceDef = ResourceDef::of::<Pod>()
    .generation(Generation::Spec)
    .short_names(&["po"])
    .categories(&["all"])
    .subresources(&[
        Subresource::Attach,
        Subresource::Binding,
        Subresource::Eviction,
        Subresource::Exec,
        Subresource::Log,
        Subresource::PortForward,
        Subresource::Proxy,
        Subresource::Status,
    ])
    .fields(&[
        SelectableField::string("spec.nodeName", "/spec/nodeName"),
        SelectableField::string("spec.restartPolicy", "/spec/restartPolicy"),
        SelectableField::string("spec.schedulerName", "/spec/schedulerName"),
        SelectableField::string("spec.serviceAccountName", "/spec/serviceAccountName"),
        SelectableField::boolean("spec.hostNetwork", "/spec/hostNetwork"),
        SelectableField::string("status.phase", "/status/phase"),
        SelectableField::string("status.podIP", "/status/podIP"),
        SelectableField::string("status.nominatedNodeName", "/status/nominatedNodeName"),
    ])
    .decode_with(decode)
    .strategy(&PodStrategy)
    .printer(printers::POD)
    .merge_schema(&kinds::POD);

/// Seconds the DefaultTolerationSeconds admission plugin tolerates not-ready and unreachable
/// nodes for (`--default-not-ready-toleration-seconds`, `--default-unreachable-toleration-seconds`).
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The node taint key for a not-ready node.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The node taint key for an unreachable node.
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// The pod strategy (upstream's `podStrategy`).
#[derive(Debug, Default)]
pub struct PodStrategy;

/// Decodes a pod: quantities canonicalized, the pod spec defaults applied.
pub fn decode(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<Pod, quantities::Error>(obj, |pod| {
        if let Some(spec) = pod.spec.as_mut() {
            quantities::canonicalize_pod_spec(spec, "spec")?;
            default_pod_spec(spec);
        }
        Ok(())
    })
}

impl Strategy for PodStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        let qos = obj
            .get("spec")
            .and_then(typed::<PodSpec>)
            .map(|s| qos_class(&s))
            .unwrap_or("BestEffort");
        obj["status"] = json!({"phase": "Pending", "qosClass": qos});
        let spec = &mut obj["spec"];
        if spec.is_object() {
            let sa = spec
                .get("serviceAccountName")
                .and_then(Value::as_str)
                .unwrap_or("default")
                .to_owned();
            spec["serviceAccountName"] = Value::String(sa.clone());
            spec["serviceAccount"] = Value::String(sa);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match obj.get("spec").and_then(typed::<PodSpec>) {
            Some(spec) => validate_pod_spec(&spec, "spec", &mut errs),
            None => errs.push(FieldError::required("spec", "")),
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if !spec_update_allowed(new.get("spec"), old.get("spec")) {
            errs.push(FieldError::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            ));
        }
        errs
    }

    fn graceful_delete_period(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        Some(pod_grace_period(obj, requested))
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// The grace period a pod delete gets, as upstream's `podStrategy.CheckGracefulDelete`: the
/// requested one, else `terminationGracePeriodSeconds`; 0 for unscheduled or terminated pods;
/// negative becomes 1.
pub fn pod_grace_period(obj: &Value, requested: Option<i64>) -> i64 {
    let mut period = requested.unwrap_or_else(|| {
        obj.at("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    });
    let node = obj
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        period = 0;
    }
    let phase = obj
        .at("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    if phase == "Failed" || phase == "Succeeded" {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    period
}

/// The pod's QoS class (upstream's `qos.GetPodQOS`, simplified to cpu and memory).
fn qos_class(spec: &PodSpec) -> &'static str {
    let containers: Vec<_> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .collect();
    let mut any_set = false;
    let mut guaranteed = true;
    for c in &containers {
        let res = c.resources.clone().unwrap_or_default();
        let requests = res.requests.unwrap_or_default();
        let limits = res.limits.unwrap_or_default();
        for name in ["cpu", "memory"] {
            let req = requests.get(name);
            let lim = limits.get(name);
            if req.is_some() || lim.is_some() {
                any_set = true;
            }
            match (req, lim) {
                (Some(r), Some(l)) if r == l => {}
                (None, Some(_)) => {}
                _ => guaranteed = false,
            }
        }
    }
    if !any_set {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Validates a pod spec at `path` (`ValidatePodSpec`, the parts controllers depend on).
pub fn validate_pod_spec(spec: &PodSpec, path: &str, errs: &mut Vec<FieldError>) {
    if spec.containers.is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut names = std::collections::BTreeSet::new();
    for (list, field) in [
        (spec.containers.as_slice(), "containers"),
        (
            spec.init_containers.as_deref().unwrap_or(&[]),
            "initContainers",
        ),
    ] {
        for (i, c) in list.iter().enumerate() {
            let cpath = format!("{path}.{field}[{i}]");
            if c.name.is_empty() {
                errs.push(FieldError::required(format!("{cpath}.name"), ""));
            } else {
                for msg in crate::validation::NameRule::Label.check(&c.name) {
                    errs.push(FieldError::invalid(
                        format!("{cpath}.name"),
                        c.name.as_str(),
                        msg,
                    ));
                }
                if !names.insert(c.name.clone()) {
                    errs.push(FieldError::duplicate(
                        format!("{cpath}.name"),
                        c.name.as_str(),
                    ));
                }
            }
            if c.image.as_deref().unwrap_or("").trim().is_empty() {
                errs.push(FieldError::required(format!("{cpath}.image"), ""));
            }
        }
    }
    if let Some(policy) = spec.restart_policy.as_deref()
        && !["Always", "OnFailure", "Never"].contains(&policy)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            policy,
            &["Always", "OnFailure", "Never"],
        ));
    }
    if let Some(grace) = spec.termination_grace_period_seconds
        && grace < 0
    {
        errs.push(FieldError::invalid(
            format!("{path}.terminationGracePeriodSeconds"),
            grace,
            "must be greater than or equal to 0",
        ));
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let tpath = format!("{path}.tolerations[{i}]");
        let op = t.operator.as_deref().unwrap_or("Equal");
        if op != "Equal" && op != "Exists" {
            errs.push(FieldError::not_supported(
                format!("{tpath}.operator"),
                op,
                &["Equal", "Exists"],
            ));
        }
        if op == "Exists" && !t.value.as_deref().unwrap_or("").is_empty() {
            errs.push(FieldError::invalid(
                format!("{tpath}.operator"),
                op,
                "value must be empty when `operator` is 'Exists'",
            ));
        }
        if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
            errs.push(FieldError::invalid(
                format!("{tpath}.effect"),
                t.effect.clone().unwrap_or_default(),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
    }
}

/// Whether a pod spec update only touches what upstream lets change: container images,
/// `activeDeadlineSeconds`, added tolerations, removed scheduling gates.
fn spec_update_allowed(new: Option<&Value>, old: Option<&Value>) -> bool {
    let (Some(new), Some(old)) = (new, old) else {
        return new == old;
    };
    let mut masked = old.clone();
    for field in ["containers", "initContainers"] {
        if let (Some(Value::Array(m)), Some(Value::Array(n))) =
            (masked.get_mut(field), new.get(field))
        {
            if m.len() != n.len() {
                return false;
            }
            for (mc, nc) in m.iter_mut().zip(n) {
                if let Some(image) = nc.get("image") {
                    mc["image"] = image.clone();
                }
            }
        }
    }
    for field in ["activeDeadlineSeconds", "schedulingGates"] {
        match new.get(field) {
            Some(v) => masked[field] = v.clone(),
            None => {
                if let Some(m) = masked.as_object_mut() {
                    m.remove(field);
                }
            }
        }
    }
    // Tolerations may only be added to.
    let old_tol = old
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let new_tol = new
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !old_tol.iter().all(|t| new_tol.contains(t)) {
        return false;
    }
    if let Some(m) = masked.as_object_mut() {
        match new.get("tolerations") {
            Some(t) => {
                m.insert("tolerations".to_owned(), t.clone());
            }
            None => {
                m.remove("tolerations");
            }
        }
    }
    &masked == new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_period_rules() {
        let cases = [
            (
                "requested wins",
                json!({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30}}),
                Some(5),
                5,
            ),
            (
                "spec default",
                json!({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30}}),
                None,
                30,
            ),
            (
                "unscheduled is immediate",
                json!({"spec": {"terminationGracePeriodSeconds": 30}}),
                Some(10),
                0,
            ),
            (
                "terminal is immediate",
                json!({"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}}),
                Some(10),
                0,
            ),
            (
                "negative becomes one",
                json!({"spec": {"nodeName": "n"}}),
                Some(-3),
                1,
            ),
        ];
        for (name, obj, requested, want) in cases {
            assert_eq!(pod_grace_period(&obj, requested), want, "case {name}");
        }
    }

    #[test]
    fn spec_update_rules() {
        let old = json!({"containers": [{"name": "c", "image": "a"}], "nodeName": "", "tolerations": [{"key": "k"}]});
        let image = json!({"containers": [{"name": "c", "image": "b"}], "nodeName": "", "tolerations": [{"key": "k"}]});
        let node = json!({"containers": [{"name": "c", "image": "a"}], "nodeName": "x", "tolerations": [{"key": "k"}]});
        let more_tol = json!({"containers": [{"name": "c", "image": "a"}], "nodeName": "", "tolerations": [{"key": "k"}, {"key": "j"}]});
        let less_tol = json!({"containers": [{"name": "c", "image": "a"}], "nodeName": ""});
        assert!(spec_update_allowed(Some(&image), Some(&old)));
        assert!(!spec_update_allowed(Some(&node), Some(&old)));
        assert!(spec_update_allowed(Some(&more_tol), Some(&old)));
        assert!(!spec_update_allowed(Some(&less_tol), Some(&old)));
    }

    #[test]
    fn qos_classes() {
        let spec = |res: Value| -> PodSpec {
            serde_json::from_value(json!({"containers": [{"name": "c", "resources": res}]}))
                .expect("spec")
        };
        assert_eq!(qos_class(&spec(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&spec(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
    }
}
