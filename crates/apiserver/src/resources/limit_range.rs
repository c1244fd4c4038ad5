//! core/v1 limitranges: upstream's defaults for container limits (`SetDefaults_LimitRangeItem`) and the ordering rules between min, default request, default and max.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{LimitRange, LimitRangeItem};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use crate::registry::strategy::{Strategy, typed, typed_roundtrip_checked};
use crate::resources::quantities::{self, canonicalize_resource_list, milli_value};
use crate::validation::FieldError;

/// Limit types without a `/` (upstream's standard limit types).
const LIMIT_TYPES: [&str; 3] = ["Pod", "Container", "PersistentVolumeClaim"];

/// The LimitRange strategy (upstream's `limitrangeStrategy`).
#[derive(Debug, Default)]
pub struct LimitRangeStrategy;

impl Strategy for LimitRangeStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let Some(range) = typed::<LimitRange>(obj) else {
            return errs;
        };
        let limits = range.spec.map(|s| s.limits).unwrap_or_default();
        let mut types = BTreeSet::new();
        for (i, item) in limits.iter().enumerate() {
            validate_item(item, &format!("spec.limits[{i}]"), &mut types, &mut errs);
        }
        errs
    }
}

/// Decodes a LimitRange with canonical quantities and upstream's container defaults: the
/// default limit is the max, the default request the default limit or else the min.
pub fn decode_limit_range(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<LimitRange, quantities::Error>(obj, |range| {
        for (i, item) in range
            .spec
            .iter_mut()
            .flat_map(|s| s.limits.iter_mut())
            .enumerate()
        {
            let path = format!("spec.limits[{i}]");
            for (list, field) in [
                (&mut item.max, "max"),
                (&mut item.min, "min"),
                (&mut item.default, "default"),
                (&mut item.default_request, "defaultRequest"),
                (&mut item.max_limit_request_ratio, "maxLimitRequestRatio"),
            ] {
                canonicalize_resource_list(list.as_mut(), &format!("{path}.{field}"))?;
            }
            if item.type_ == "Container" {
                default_container_item(item);
            }
        }
        Ok(())
    })
}

/// `SetDefaults_LimitRangeItem` for a `Container` item (empty maps stay absent, as Go's
/// `omitempty` drops them).
fn default_container_item(item: &mut LimitRangeItem) {
    let mut default = item.default.clone().unwrap_or_default();
    for (k, v) in item.max.iter().flatten() {
        default.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let mut request = item.default_request.clone().unwrap_or_default();
    for (k, v) in default.iter().chain(item.min.iter().flatten()) {
        request.entry(k.clone()).or_insert_with(|| v.clone());
    }
    item.default = (!default.is_empty()).then_some(default);
    item.default_request = (!request.is_empty()).then_some(request);
}

/// upstream's `ValidateLimitRange` for one item.
fn validate_item(
    item: &LimitRangeItem,
    path: &str,
    types: &mut BTreeSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let type_path = format!("{path}.type");
    let ty = item.type_.as_str();
    match kcm_machinery::labels::validate_label_key(ty) {
        Err(e) => errs.push(FieldError::invalid(type_path.clone(), ty, e.to_string())),
        Ok(()) if !ty.contains('/') && !LIMIT_TYPES.contains(&ty) => {
            errs.push(FieldError::invalid(
                type_path.clone(),
                ty,
                "must be a standard limit type or fully qualified",
            ))
        }
        Ok(()) => {}
    }
    if !types.insert(ty.to_owned()) {
        errs.push(FieldError::duplicate(type_path, ty));
    }
    let map = |list: &Option<BTreeMap<String, Quantity>>| -> BTreeMap<String, (String, i128)> {
        list.iter()
            .flatten()
            .filter_map(|(k, q)| milli_value(&q.0).map(|m| (k.clone(), (q.0.clone(), m))))
            .collect()
    };
    let (min, max, ratio) = (
        map(&item.min),
        map(&item.max),
        map(&item.max_limit_request_ratio),
    );
    let (default, request) = if ty == "Pod" {
        for (list, field) in [
            (&item.default, "default"),
            (&item.default_request, "defaultRequest"),
        ] {
            if list.as_ref().is_some_and(|l| !l.is_empty()) {
                errs.push(FieldError::forbidden(
                    format!("{path}.{field}"),
                    "may not be specified when `type` is 'Pod'",
                ));
            }
        }
        (BTreeMap::new(), BTreeMap::new())
    } else {
        (map(&item.default), map(&item.default_request))
    };
    if ty == "PersistentVolumeClaim" && !min.contains_key("storage") && !max.contains_key("storage")
    {
        errs.push(FieldError::required(
            format!("{path}.limits"),
            "either minimum or maximum storage value is required, but neither was provided",
        ));
    }
    let keys: BTreeSet<&String> = [&min, &max, &default, &request, &ratio]
        .iter()
        .flat_map(|m| m.keys())
        .collect();
    for k in keys {
        let at = |field: &str| format!("{path}.{field}[{k}]");
        let (min, max, default, request, ratio) = (
            min.get(k),
            max.get(k),
            default.get(k),
            request.get(k),
            ratio.get(k),
        );
        if let (Some(lo), Some(hi)) = (min, max)
            && lo.1 > hi.1
        {
            errs.push(FieldError::invalid(
                at("min"),
                lo.0.as_str(),
                format!("min value {} is greater than max value {}", lo.0, hi.0),
            ));
        }
        if let (Some(req), Some(lo)) = (request, min)
            && lo.1 > req.1
        {
            errs.push(FieldError::invalid(
                at("defaultRequest"),
                req.0.as_str(),
                format!(
                    "min value {} is greater than default request value {}",
                    lo.0, req.0
                ),
            ));
        }
        if let (Some(req), Some(hi)) = (request, max)
            && req.1 > hi.1
        {
            errs.push(FieldError::invalid(
                at("defaultRequest"),
                req.0.as_str(),
                format!(
                    "default request value {} is greater than max value {}",
                    req.0, hi.0
                ),
            ));
        }
        if let (Some(req), Some(def)) = (request, default)
            && req.1 > def.1
        {
            errs.push(FieldError::invalid(
                at("defaultRequest"),
                req.0.as_str(),
                format!(
                    "default request value {} is greater than default limit value {}",
                    req.0, def.0
                ),
            ));
        }
        if let (Some(def), Some(lo)) = (default, min)
            && lo.1 > def.1
        {
            errs.push(FieldError::invalid(
                at("default"),
                lo.0.as_str(),
                format!("min value {} is greater than default value {}", lo.0, def.0),
            ));
        }
        if let (Some(def), Some(hi)) = (default, max)
            && def.1 > hi.1
        {
            errs.push(FieldError::invalid(
                at("default"),
                hi.0.as_str(),
                format!("default value {} is greater than max value {}", def.0, hi.0),
            ));
        }
        if let Some(r) = ratio
            && r.1 < 1000
        {
            errs.push(FieldError::invalid(
                at("maxLimitRequestRatio"),
                r.0.as_str(),
                format!("ratio {} is less than 1", r.0),
            ));
        }
        if let (Some(r), Some(lo), Some(hi)) = (ratio, min, max)
            && lo.1 > 0
        {
            let limit = hi.1 as f64 / lo.1 as f64;
            if r.1 as f64 / 1000.0 > limit {
                errs.push(FieldError::invalid(
                    at("maxLimitRequestRatio"),
                    r.0.as_str(),
                    format!("ratio {} is greater than max/min = {limit:.6}", r.0),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decoded(limits: Value) -> Value {
        decode_limit_range(
            json!({"metadata": {"name": "limits", "namespace": "default"},
            "spec": {"limits": limits}}),
        )
        .expect("decodes")
    }

    fn messages(limits: Value) -> Vec<String> {
        LimitRangeStrategy
            .validate(&decoded(limits))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn container_defaults_follow_max_then_min() {
        let obj = decoded(
            json!([{"type": "Container", "max": {"cpu": "2", "memory": "1Gi"},
            "min": {"cpu": "100m", "ephemeral-storage": "1Gi"}, "default": {"memory": "512Mi"}}]),
        );
        let item = &obj["spec"]["limits"][0];
        assert_eq!(item["default"], json!({"cpu": "2", "memory": "512Mi"}));
        assert_eq!(
            item["defaultRequest"],
            json!({"cpu": "2", "memory": "512Mi", "ephemeral-storage": "1Gi"})
        );
        let pod = decoded(json!([{"type": "Pod", "max": {"cpu": "2"}}]));
        assert_eq!(pod["spec"]["limits"][0].get("default"), None);
    }

    #[test]
    fn validation_messages_are_upstreams() {
        assert!(
            messages(json!([{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "1"}}]))
                .is_empty()
        );
        assert_eq!(
            messages(json!([{"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "2"}}])),
            [
                "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
                "spec.limits[0].defaultRequest[cpu]: Invalid value: \"1\": min value 2 is greater than default request value 1",
                "spec.limits[0].default[cpu]: Invalid value: \"2\": min value 2 is greater than default value 1",
            ]
        );
        assert_eq!(
            messages(
                json!([{"type": "Pod", "max": {"cpu": "1"}, "default": {"cpu": "1"}},
                {"type": "Pod", "max": {"cpu": "1"}}])
            ),
            [
                "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'",
                "spec.limits[1].type: Duplicate value: \"Pod\"",
            ]
        );
        assert_eq!(
            messages(json!([{"type": "PersistentVolumeClaim", "max": {"cpu": "1"}}])),
            [
                "spec.limits[0].limits: Required value: either minimum or maximum storage value is required, but neither was provided"
            ]
        );
        assert_eq!(
            messages(json!([{"type": "Widget"}])),
            [
                "spec.limits[0].type: Invalid value: \"Widget\": must be a standard limit type or fully qualified"
            ]
        );
    }
}
