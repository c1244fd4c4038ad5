//! autoscaling horizontalpodautoscalers: upstream's v2 defaults (one minimum replica, an 80% CPU target, the scaling behavior), the spec validation, and the status reset on create; v1 requests are converted to v2 to be defaulted and validated.

use k8s_openapi::api::autoscaling::v1;
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
    MetricSpec, MetricTarget,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use crate::pointer::At;
use crate::registry::strategy::{Strategy, typed, typed_roundtrip, typed_roundtrip_checked};
use crate::resources::hpa_conversion::{
    CONDITIONS_ANNOTATION, DEFAULT_CPU_UTILIZATION, METRIC_STATUSES_ANNOTATION, v1_to_v2, v2_to_v1,
};
use crate::resources::quantities::{self, milli_value};
use crate::validation::FieldError;

/// The smallest `minReplicas` (scaling to zero is an alpha feature, off by default).
const MIN_REPLICAS_LOWER_BOUND: i64 = 1;
/// The longest scaling policy period.
const MAX_PERIOD_SECONDS: i64 = 1800;
/// The longest stabilization window.
const MAX_STABILIZATION_WINDOW_SECONDS: i64 = 3600;
/// Metric source types, sorted as upstream lists them.
const METRIC_SOURCE_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// The version of the request an [`HpaStrategy`] serves; objects are validated in their v2
/// form either way (upstream validates the internal form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpaVersion {
    /// autoscaling/v1.
    V1,
    /// autoscaling/v2, the stored form.
    V2,
}

/// The HorizontalPodAutoscaler strategy (upstream's `autoscalerStrategy`).
#[derive(Debug)]
pub struct HpaStrategy(pub HpaVersion);

impl HpaStrategy {
    fn as_v2(&self, obj: &Value) -> Value {
        match self.0 {
            HpaVersion::V1 => v1_to_v2(obj.clone()),
            HpaVersion::V2 => obj.clone(),
        }
    }
}

impl Strategy for HpaStrategy {
    /// An HPA starts with an empty status; the alpha per-rule `tolerance` (gate off by
    /// default in v1.33) is dropped.
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
        for rules in ["scaleUp", "scaleDown"] {
            if let Some(r) = obj
                .pointer_mut(&format!("/spec/behavior/{rules}"))
                .and_then(Value::as_object_mut)
            {
                r.remove("tolerance");
            }
        }
    }

    /// The status stays as stored. Through v1 the stored status is partly in annotations
    /// (`current-metrics`, `conditions`): they are the status's, not the client's, so they
    /// are kept too (upstream keeps the internal status whole).
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if self.0 != HpaVersion::V1 {
            return;
        }
        for key in [METRIC_STATUSES_ANNOTATION, CONDITIONS_ANNOTATION] {
            let kept = old
                .at("/metadata/annotations")
                .and_then(|a| a.get(key))
                .cloned();
            let meta = crate::object::metadata_mut(new);
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(annotations) = annotations.as_object_mut() {
                match kept {
                    Some(v) => {
                        annotations.insert(key.to_owned(), v);
                    }
                    None => {
                        annotations.remove(key);
                    }
                }
            }
            if meta
                .get("annotations")
                .and_then(Value::as_object)
                .is_some_and(|a| a.is_empty())
            {
                meta.remove("annotations");
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match self
            .as_v2(obj)
            .get("spec")
            .and_then(typed::<HorizontalPodAutoscalerSpec>)
        {
            Some(spec) => validate_spec(&spec, &mut errs),
            None => errs.push(FieldError::required("spec", "")),
        }
        errs
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for field in ["currentReplicas", "desiredReplicas"] {
            crate::resources::job::nonnegative(
                &mut errs,
                &format!("status.{field}"),
                new.at(&format!("/status/{field}")).and_then(Value::as_i64),
            );
        }
        errs
    }
}

/// Decodes an autoscaling/v2 HPA with upstream's defaults (`SetDefaults_HorizontalPodAutoscaler`).
pub fn decode_hpa_v2(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<HorizontalPodAutoscaler, quantities::Error>(obj, |hpa| {
        default_spec(&mut hpa.spec);
        Ok(())
    })
}

/// Decodes an autoscaling/v1 HPA (`minReplicas` 1), then shows it as the stored v2 form
/// with v2's defaults reads back through v1 (the implicit CPU target appears).
pub fn decode_hpa_v1(obj: Value) -> Result<Value, String> {
    let v1 = typed_roundtrip::<v1::HorizontalPodAutoscaler>(obj, |hpa| {
        hpa.spec.min_replicas.get_or_insert(1);
    })?;
    let v2 = decode_hpa_v2(v1_to_v2(v1))?;
    Ok(v2_to_v1(v2))
}

/// `SetDefaults_HorizontalPodAutoscaler` and `SetDefaults_HorizontalPodAutoscalerBehavior`.
fn default_spec(spec: &mut HorizontalPodAutoscalerSpec) {
    spec.min_replicas.get_or_insert(1);
    if spec.metrics.as_ref().is_none_or(Vec::is_empty) {
        spec.metrics = Some(vec![MetricSpec {
            type_: "Resource".to_owned(),
            resource: Some(k8s_openapi::api::autoscaling::v2::ResourceMetricSource {
                name: "cpu".to_owned(),
                target: MetricTarget {
                    type_: "Utilization".to_owned(),
                    average_utilization: Some(DEFAULT_CPU_UTILIZATION as i32),
                    ..Default::default()
                },
            }),
            ..Default::default()
        }]);
    }
    if let Some(behavior) = spec.behavior.as_mut() {
        let scale_up = HPAScalingRules {
            stabilization_window_seconds: Some(0),
            select_policy: Some("Max".to_owned()),
            policies: Some(vec![policy("Pods", 4), policy("Percent", 100)]),
            tolerance: None,
        };
        let scale_down = HPAScalingRules {
            stabilization_window_seconds: None,
            select_policy: Some("Max".to_owned()),
            policies: Some(vec![policy("Percent", 100)]),
            tolerance: None,
        };
        behavior.scale_up = Some(merge_rules(behavior.scale_up.take(), scale_up));
        behavior.scale_down = Some(merge_rules(behavior.scale_down.take(), scale_down));
    }
}

fn policy(kind: &str, value: i32) -> HPAScalingPolicy {
    HPAScalingPolicy {
        type_: kind.to_owned(),
        value,
        period_seconds: 15,
    }
}

/// upstream's `copyHPAScalingRules`: the given fields over the defaults.
fn merge_rules(given: Option<HPAScalingRules>, mut defaults: HPAScalingRules) -> HPAScalingRules {
    if let Some(given) = given {
        if given.select_policy.is_some() {
            defaults.select_policy = given.select_policy;
        }
        if given.stabilization_window_seconds.is_some() {
            defaults.stabilization_window_seconds = given.stabilization_window_seconds;
        }
        if given.policies.is_some() {
            defaults.policies = given.policies;
        }
        if given.tolerance.is_some() {
            defaults.tolerance = given.tolerance;
        }
    }
    defaults
}

/// upstream's `ValidateHorizontalPodAutoscalerSpec`.
fn validate_spec(spec: &HorizontalPodAutoscalerSpec, errs: &mut Vec<FieldError>) {
    let min = spec.min_replicas.map(i64::from);
    let max = i64::from(spec.max_replicas);
    if let Some(min) = min.filter(|m| *m < MIN_REPLICAS_LOWER_BOUND) {
        errs.push(FieldError::invalid(
            "spec.minReplicas",
            min,
            format!("must be greater than or equal to {MIN_REPLICAS_LOWER_BOUND}"),
        ));
    }
    if max < 1 {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            max,
            "must be greater than 0",
        ));
    }
    if let Some(min) = min
        && max < min
    {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            max,
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let target = &spec.scale_target_ref;
    validate_reference(&target.kind, &target.name, "spec.scaleTargetRef", errs);
    for (i, metric) in spec.metrics.iter().flatten().enumerate() {
        validate_metric(metric, &format!("spec.metrics[{i}]"), errs);
    }
    if let Some(behavior) = spec.behavior.as_ref() {
        for (rules, field) in [
            (&behavior.scale_up, "scaleUp"),
            (&behavior.scale_down, "scaleDown"),
        ] {
            if let Some(rules) = rules {
                validate_rules(rules, &format!("spec.behavior.{field}"), errs);
            }
        }
    }
}

/// `ValidateCrossVersionObjectReference`: kind and name required, path segments.
fn validate_reference(kind: &str, name: &str, path: &str, errs: &mut Vec<FieldError>) {
    for (value, field) in [(kind, "kind"), (name, "name")] {
        if value.is_empty() {
            errs.push(FieldError::required(format!("{path}.{field}"), ""));
        } else {
            for msg in crate::validation::NameRule::PathSegment.check(value) {
                errs.push(FieldError::invalid(format!("{path}.{field}"), value, msg));
            }
        }
    }
}

/// `validateMetricSpec`: a known type, its one source populated and valid.
fn validate_metric(m: &MetricSpec, path: &str, errs: &mut Vec<FieldError>) {
    if m.type_.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "must specify a metric source type",
        ));
    }
    if !METRIC_SOURCE_TYPES.contains(&m.type_.as_str()) {
        errs.push(FieldError::not_supported(
            format!("{path}.type"),
            m.type_.as_str(),
            &METRIC_SOURCE_TYPES,
        ));
    }
    let present: Vec<&str> = [
        ("object", m.object.is_some()),
        ("external", m.external.is_some()),
        ("pods", m.pods.is_some()),
        ("resource", m.resource.is_some()),
        ("containerResource", m.container_resource.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    if present.len() == 1 {
        if let Some(src) = m.object.as_ref() {
            let at = format!("{path}.object");
            validate_reference(
                &src.described_object.kind,
                &src.described_object.name,
                &format!("{at}.describedObject"),
                errs,
            );
            validate_metric_name(&src.metric.name, &format!("{at}.metric"), errs);
            validate_target(&src.target, &format!("{at}.target"), errs);
            if src.target.value.is_none() && src.target.average_value.is_none() {
                errs.push(FieldError::required(
                    format!("{at}.target.averageValue"),
                    "must set either a target value or averageValue",
                ));
            }
        }
        if let Some(src) = m.external.as_ref() {
            let at = format!("{path}.external");
            validate_metric_name(&src.metric.name, &format!("{at}.metric"), errs);
            validate_target(&src.target, &format!("{at}.target"), errs);
            if src.target.value.is_none() && src.target.average_value.is_none() {
                errs.push(FieldError::required(
                    format!("{at}.target.averageValue"),
                    "must set either a target value for metric or a per-pod target",
                ));
            }
            if src.target.value.is_some() && src.target.average_value.is_some() {
                errs.push(FieldError::forbidden(
                    format!("{at}.target.value"),
                    "may not set both a target value for metric and a per-pod target",
                ));
            }
        }
        if let Some(src) = m.pods.as_ref() {
            let at = format!("{path}.pods");
            validate_metric_name(&src.metric.name, &format!("{at}.metric"), errs);
            validate_target(&src.target, &format!("{at}.target"), errs);
            if src.target.average_value.is_none() {
                errs.push(FieldError::required(
                    format!("{at}.target.averageValue"),
                    "must specify a positive target averageValue",
                ));
            }
        }
        if let Some(src) = m.resource.as_ref() {
            validate_resource_target(&src.name, &src.target, &format!("{path}.resource"), errs);
        }
        if let Some(src) = m.container_resource.as_ref() {
            let at = format!("{path}.containerResource");
            validate_resource_target(&src.name, &src.target, &at, errs);
            if src.container.is_empty() {
                errs.push(FieldError::required(
                    format!("{at}.container"),
                    "must specify a container",
                ));
            } else {
                for msg in crate::validation::NameRule::Label.check(&src.container) {
                    errs.push(FieldError::invalid(
                        format!("{at}.container"),
                        src.container.as_str(),
                        msg,
                    ));
                }
            }
        }
    }
    let expected = match m.type_.as_str() {
        "Object" => Some("object"),
        "Pods" => Some("pods"),
        "Resource" => Some("resource"),
        "External" => Some("external"),
        "ContainerResource" => Some("containerResource"),
        _ => None,
    };
    if let Some(expected) = expected
        && !present.contains(&expected)
    {
        errs.push(FieldError::required(
            format!("{path}.{expected}"),
            "must populate information for the given metric source",
        ));
    }
    if present.len() != 1 {
        for other in present.iter().filter(|p| Some(**p) != expected) {
            errs.push(FieldError::forbidden(
                format!("{path}.{other}"),
                "must populate the given metric source only",
            ));
        }
    }
}

/// A Resource or ContainerResource source: a resource name and exactly one of a
/// utilization or an average value.
fn validate_resource_target(
    name: &str,
    target: &MetricTarget,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if name.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.name"),
            "must specify a resource name",
        ));
    }
    validate_target(target, &format!("{path}.target"), errs);
    match (
        target.average_utilization.is_some(),
        target.average_value.is_some(),
    ) {
        (false, false) => errs.push(FieldError::required(
            format!("{path}.target.averageUtilization"),
            "must set either a target raw value or a target utilization",
        )),
        (true, true) => errs.push(FieldError::forbidden(
            format!("{path}.target.averageValue"),
            "may not set both a target raw value and a target utilization",
        )),
        _ => {}
    }
}

fn validate_metric_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.name"),
            "must specify a metric name",
        ));
    } else {
        for msg in crate::validation::NameRule::PathSegment.check(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
        }
    }
}

/// `validateMetricTarget`.
fn validate_target(t: &MetricTarget, path: &str, errs: &mut Vec<FieldError>) {
    if t.type_.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "must specify a metric target type",
        ));
    }
    if !["Utilization", "Value", "AverageValue"].contains(&t.type_.as_str()) {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            t.type_.as_str(),
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    let positive = |q: &Quantity| milli_value(&q.0).is_some_and(|v| v > 0);
    for (q, field) in [(&t.value, "value"), (&t.average_value, "averageValue")] {
        if let Some(q) = q
            && !positive(q)
        {
            errs.push(FieldError::invalid(
                format!("{path}.{field}"),
                q.0.as_str(),
                "must be positive",
            ));
        }
    }
    if let Some(u) = t.average_utilization.filter(|u| *u < 1) {
        errs.push(FieldError::invalid(
            format!("{path}.averageUtilization"),
            u,
            "must be greater than 0",
        ));
    }
}

/// `validateScalingRules`.
fn validate_rules(rules: &HPAScalingRules, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(w) = rules.stabilization_window_seconds.map(i64::from) {
        if w < 0 {
            errs.push(FieldError::invalid(
                format!("{path}.stabilizationWindowSeconds"),
                w,
                "must be greater than or equal to zero",
            ));
        }
        if w > MAX_STABILIZATION_WINDOW_SECONDS {
            errs.push(FieldError::invalid(
                format!("{path}.stabilizationWindowSeconds"),
                w,
                format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(select) = rules.select_policy.as_deref()
        && !["Disabled", "Max", "Min"].contains(&select)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.selectPolicy"),
            select,
            &["Disabled", "Max", "Min"],
        ));
    }
    let policies = rules.policies.as_deref().unwrap_or(&[]);
    if policies.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, p) in policies.iter().enumerate() {
        let at = format!("{path}.policies[{i}]");
        if p.type_ != "Pods" && p.type_ != "Percent" {
            errs.push(FieldError::not_supported(
                format!("{at}.type"),
                p.type_.as_str(),
                &["Percent", "Pods"],
            ));
        }
        if p.value <= 0 {
            errs.push(FieldError::invalid(
                format!("{at}.value"),
                p.value,
                "must be greater than zero",
            ));
        }
        if p.period_seconds <= 0 {
            errs.push(FieldError::invalid(
                format!("{at}.periodSeconds"),
                p.period_seconds,
                "must be greater than zero",
            ));
        }
        if i64::from(p.period_seconds) > MAX_PERIOD_SECONDS {
            errs.push(FieldError::invalid(
                format!("{at}.periodSeconds"),
                p.period_seconds,
                format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hpa(spec: Value) -> Value {
        decode_hpa_v2(
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"}, "spec": spec}),
        )
        .expect("decodes")
    }

    fn target() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn v2_defaults_as_upstream() {
        let obj = hpa(
            json!({"scaleTargetRef": target(), "maxReplicas": 5, "behavior": {"scaleDown":
            {"stabilizationWindowSeconds": 60}}}),
        );
        let spec = &obj["spec"];
        assert_eq!(spec["minReplicas"], 1);
        assert_eq!(
            spec["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}])
        );
        assert_eq!(
            spec["behavior"],
            json!({
                "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                    {"type": "Pods", "value": 4, "periodSeconds": 15},
                    {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max", "policies": [
                    {"type": "Percent", "value": 100, "periodSeconds": 15}]}
            })
        );
        assert!(HpaStrategy(HpaVersion::V2).validate(&obj).is_empty());
        let no_behavior = hpa(json!({"scaleTargetRef": target(), "maxReplicas": 5}));
        assert_eq!(no_behavior["spec"].get("behavior"), None);
    }

    #[test]
    fn v1_decodes_with_the_implicit_cpu_target() {
        let v1 = decode_hpa_v1(
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "maxReplicas": 3}}),
        )
        .expect("decodes");
        assert_eq!(v1["spec"]["minReplicas"], 1);
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 80);
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
    }

    #[test]
    fn validation_messages_are_upstreams() {
        let cases = [
            (
                "min above max",
                json!({"scaleTargetRef": target(), "minReplicas": 5, "maxReplicas": 3}),
                vec![
                    "spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`",
                ],
            ),
            (
                "zero min and no target name",
                json!({"scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 0, "maxReplicas": 3}),
                vec![
                    "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
                    "spec.scaleTargetRef.name: Required value",
                ],
            ),
            (
                "zero utilization",
                json!({"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [{"type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}]}),
                vec![
                    "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
                ],
            ),
            (
                "wrong source for the type",
                json!({"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [{"type": "Pods",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
                vec![
                    "spec.metrics[0].pods: Required value: must populate information for the given metric source",
                ],
            ),
            (
                "bad policy",
                json!({"scaleTargetRef": target(), "maxReplicas": 3, "behavior": {"scaleUp":
                    {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 3600}]}}}),
                vec![
                    "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
                    "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 3600: must be less than or equal to 1800",
                ],
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(
                messages(HpaStrategy(HpaVersion::V2).validate(&hpa(spec))),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn a_v1_update_keeps_the_status_the_annotations_hold() {
        let mut stored = hpa(json!({"scaleTargetRef": target(), "maxReplicas": 3}));
        stored["status"] = json!({"currentReplicas": 1, "desiredReplicas": 1,
            "conditions": [{"type": "AbleToScale", "status": "True",
                "lastTransitionTime": "2024-05-01T00:00:00Z"}]});
        let old = v2_to_v1(stored);
        let mut new = old.clone();
        new["metadata"] = json!({"name": "web", "namespace": "default"});
        new["spec"]["maxReplicas"] = json!(4);
        HpaStrategy(HpaVersion::V1).prepare_for_update(&mut new, &old);
        let back = v1_to_v2(new);
        assert_eq!(back["spec"]["maxReplicas"], 4);
        assert_eq!(back["status"]["conditions"][0]["type"], "AbleToScale");
    }

    #[test]
    fn v1_requests_are_validated_as_v2() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "minReplicas": 4,
                "maxReplicas": 2, "targetCPUUtilizationPercentage": 50}});
        assert_eq!(
            messages(HpaStrategy(HpaVersion::V1).validate(&v1)),
            ["spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"]
        );
    }
}
