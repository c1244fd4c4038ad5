//! flowcontrol.apiserver.k8s.io/v1 flowschemas and prioritylevelconfigurations (+status): stored, defaulted and validated as upstream, with the mandatory and suggested bootstrap objects present at start ([`crate::resources::flowcontrol_bootstrap`]).
//!
//! kcm's API server does no API Priority and Fairness: requests are not classified or
//! queued, and no configuration controller maintains the objects' status after start.

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use serde_json::Value;

use crate::pointer::At;
use crate::registry::generation::Generation;
use crate::registry::resource::ResourceDef;
use crate::registry::strategy::{MetadataReset, Strategy, typed_roundtrip};
use crate::registry::subresource::Subresource;
use crate::resources::flowcontrol_bootstrap::{
    APF_FIELD_MANAGER, flow_schemas_with_status, priority_levels,
};
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::{FieldError, NameRule};

/// flowcontrol.apiserver.k8s.io/v1 flowschemas.
pub static FLOW_SCHEMAS: ResourceDef = ResourceDef::of::<FlowSchema>()
    .generation(Generation::Spec)
    .subresources(&[Subresource::Status])
    .decode_with(decode_flow_schema)
    .strategy(&FlowSchemaStrategy)
    .bootstrap_as(APF_FIELD_MANAGER, |_| flow_schemas_with_status())
    .printer(printers::FLOW_SCHEMA)
    .merge_schema(&kinds::METADATA_ONLY);

/// flowcontrol.apiserver.k8s.io/v1 prioritylevelconfigurations.
pub static PRIORITY_LEVEL_CONFIGURATIONS: ResourceDef =
    ResourceDef::of::<PriorityLevelConfiguration>()
        .generation(Generation::Spec)
        .subresources(&[Subresource::Status])
        .decode_with(decode_priority_level)
        .strategy(&PriorityLevelStrategy)
        .bootstrap_as(APF_FIELD_MANAGER, |_| priority_levels())
        .printer(printers::PRIORITY_LEVEL_CONFIGURATION)
        .merge_schema(&kinds::METADATA_ONLY);

/// `SetDefaults_FlowSchemaSpec`: matching precedence 1000.
fn decode_flow_schema(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<FlowSchema>(obj, |fs| {
        if let Some(spec) = fs.spec.as_mut() {
            match spec.matching_precedence {
                None | Some(0) => spec.matching_precedence = Some(1000),
                Some(_) => {}
            }
        }
    })
}

/// The v1 priority level defaults: a limited level's nominal shares 30 and lendable 0%,
/// queuing 64 queues, hand size 8, queue length 50; an exempt level's shares and lendable 0.
fn decode_priority_level(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<PriorityLevelConfiguration>(obj, |pl| {
        let Some(spec) = pl.spec.as_mut() else {
            return;
        };
        if let Some(limited) = spec.limited.as_mut() {
            limited.nominal_concurrency_shares.get_or_insert(30);
            limited.lendable_percent.get_or_insert(0);
            if let Some(queuing) = limited
                .limit_response
                .as_mut()
                .and_then(|r| r.queuing.as_mut())
            {
                for (field, default) in [
                    (&mut queuing.hand_size, 8),
                    (&mut queuing.queues, 64),
                    (&mut queuing.queue_length_limit, 50),
                ] {
                    if field.unwrap_or(0) == 0 {
                        *field = Some(default);
                    }
                }
            }
        }
        if let Some(exempt) = spec.exempt.as_mut() {
            exempt.nominal_concurrency_shares.get_or_insert(0);
            exempt.lendable_percent.get_or_insert(0);
        }
    })
}

/// A new object's status is empty (Go prints the empty status struct).
fn drop_status(obj: &mut Value) {
    obj["status"] = serde_json::json!({});
}

/// The FlowSchema strategy (upstream's `flowSchemaStrategy`, `ValidateFlowSchema`).
#[derive(Debug, Default)]
pub struct FlowSchemaStrategy;

impl Strategy for FlowSchemaStrategy {
    /// `flowSchemaStatusStrategy.PrepareForUpdate` keeps all of the stored metadata.
    fn status_metadata_reset(&self) -> MetadataReset {
        MetadataReset::All
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        drop_status(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec");
        let level = spec
            .and_then(|s| s.at("/priorityLevelConfiguration/name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if level.is_empty() {
            errs.push(FieldError::required(
                "spec.priorityLevelConfiguration.name",
                "must reference a priority level",
            ));
        } else {
            for msg in NameRule::PathSegment.check(level) {
                errs.push(FieldError::invalid(
                    "spec.priorityLevelConfiguration.name",
                    level,
                    msg,
                ));
            }
        }
        let precedence = spec
            .and_then(|s| s.get("matchingPrecedence"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if precedence <= 0 {
            errs.push(FieldError::invalid(
                "spec.matchingPrecedence",
                precedence,
                "must be a positive value",
            ));
        } else if precedence > 10000 {
            errs.push(FieldError::invalid(
                "spec.matchingPrecedence",
                precedence,
                "must not be greater than 10000",
            ));
        }
        if let Some(method) = spec
            .and_then(|s| s.at("/distinguisherMethod/type"))
            .and_then(Value::as_str)
            && method != "ByNamespace"
            && method != "ByUser"
        {
            errs.push(FieldError::not_supported(
                "spec.distinguisherMethod.type",
                method,
                &["ByNamespace", "ByUser"],
            ));
        }
        let rules = spec
            .and_then(|s| s.get("rules"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (i, rule) in rules.iter().enumerate() {
            let path = format!("spec.rules[{i}]");
            let subjects = rule
                .get("subjects")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if subjects == 0 {
                errs.push(FieldError::required(
                    format!("{path}.subjects"),
                    "subjects must contain at least one value",
                ));
            }
            let resource = rule
                .get("resourceRules")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let non_resource = rule
                .get("nonResourceRules")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if resource == 0 && non_resource == 0 {
                errs.push(FieldError::required(
                    path,
                    "at least one of resourceRules and nonResourceRules has to be non-empty",
                ));
            }
        }
        errs
    }
}

/// The PriorityLevelConfiguration strategy (upstream's `ValidatePriorityLevelConfiguration`).
#[derive(Debug, Default)]
pub struct PriorityLevelStrategy;

impl Strategy for PriorityLevelStrategy {
    /// `priorityLevelConfigurationStatusStrategy.PrepareForUpdate` keeps all of the stored
    /// metadata.
    fn status_metadata_reset(&self) -> MetadataReset {
        MetadataReset::All
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        drop_status(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = obj
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let spec = obj.get("spec");
        let kind = spec
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if (name == "exempt") != (kind == "Exempt") {
            errs.push(FieldError::invalid(
                "spec.type",
                kind,
                "type must be 'Exempt' if and only if name is 'exempt'",
            ));
        }
        let limited = spec.and_then(|s| s.get("limited")).filter(|l| !l.is_null());
        let exempt = spec.and_then(|s| s.get("exempt")).filter(|e| !e.is_null());
        match kind {
            "Exempt" => {
                if limited.is_some() {
                    errs.push(FieldError::forbidden(
                        "spec.limited",
                        "must be nil if the type is not Limited",
                    ));
                }
            }
            "Limited" => {
                if exempt.is_some() {
                    errs.push(FieldError::forbidden(
                        "spec.exempt",
                        "must be nil if the type is Limited",
                    ));
                }
                match limited {
                    None => errs.push(FieldError::required(
                        "spec.limited",
                        "must not be empty when type is Limited",
                    )),
                    Some(l) => validate_limited(l, &mut errs),
                }
            }
            other => errs.push(FieldError::not_supported(
                "spec.type",
                other,
                &["Exempt", "Limited"],
            )),
        }
        errs
    }
}

fn validate_limited(limited: &Value, errs: &mut Vec<FieldError>) {
    let int = |v: &Value, k: &str| v.get(k).and_then(Value::as_i64);
    if let Some(shares) = int(limited, "nominalConcurrencyShares")
        && shares < 0
    {
        errs.push(FieldError::invalid(
            "spec.limited.nominalConcurrencyShares",
            shares,
            "must be a non-negative integer",
        ));
    }
    for field in ["lendablePercent", "borrowingLimitPercent"] {
        if let Some(p) = int(limited, field) {
            let bad = if field == "lendablePercent" {
                !(0..=100).contains(&p)
            } else {
                p < 0
            };
            if bad {
                let why = if field == "lendablePercent" {
                    "must be between 0 and 100, inclusive"
                } else {
                    "if specified, must be a non-negative integer"
                };
                errs.push(FieldError::invalid(format!("spec.limited.{field}"), p, why));
            }
        }
    }
    let response = limited.get("limitResponse");
    let kind = response
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let queuing = response
        .and_then(|r| r.get("queuing"))
        .filter(|q| !q.is_null());
    match kind {
        "Queue" => match queuing {
            None => errs.push(FieldError::required(
                "spec.limited.limitResponse.queuing",
                "must not be empty if limitResponse.type is 'Queue'",
            )),
            Some(q) => {
                let queues = int(q, "queues").unwrap_or(0);
                let hand = int(q, "handSize").unwrap_or(0);
                if queues <= 0 {
                    errs.push(FieldError::invalid(
                        "spec.limited.limitResponse.queuing.queues",
                        queues,
                        "must be positive",
                    ));
                }
                if hand <= 0 {
                    errs.push(FieldError::invalid(
                        "spec.limited.limitResponse.queuing.handSize",
                        hand,
                        "must be positive",
                    ));
                } else if hand > queues {
                    errs.push(FieldError::invalid(
                        "spec.limited.limitResponse.queuing.handSize",
                        hand,
                        format!("should not be greater than queues ({queues})"),
                    ));
                }
                if int(q, "queueLengthLimit").unwrap_or(0) <= 0 {
                    errs.push(FieldError::invalid(
                        "spec.limited.limitResponse.queuing.queueLengthLimit",
                        int(q, "queueLengthLimit").unwrap_or(0),
                        "must be positive",
                    ));
                }
            }
        },
        "Reject" => {
            if queuing.is_some() {
                errs.push(FieldError::forbidden(
                    "spec.limited.limitResponse.queuing",
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            "spec.limited.limitResponse.type",
            other,
            &["Queue", "Reject"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::flowcontrol_bootstrap::flow_schemas;

    #[test]
    fn defaults() {
        let fs = decode_flow_schema(json!({"metadata": {"name": "f"},
            "spec": {"priorityLevelConfiguration": {"name": "global-default"}}}))
        .expect("decodes");
        assert_eq!(fs["spec"]["matchingPrecedence"], 1000);
        let pl = decode_priority_level(json!({"metadata": {"name": "p"},
            "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}}))
        .expect("decodes");
        assert_eq!(
            pl["spec"]["limited"],
            json!({"nominalConcurrencyShares": 30, "lendablePercent": 0,
                "limitResponse": {"type": "Queue", "queuing": {"handSize": 8, "queues": 64, "queueLengthLimit": 50}}})
        );
        assert!(PriorityLevelStrategy.validate(&pl).is_empty());
    }

    #[test]
    fn validation() {
        let errs: Vec<String> = FlowSchemaStrategy
            .validate(&json!({"spec": {"priorityLevelConfiguration": {"name": ""}, "matchingPrecedence": 20000}}))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
                "spec.matchingPrecedence: Invalid value: 20000: must not be greater than 10000"
            ]
        );
        let errs: Vec<String> = PriorityLevelStrategy
            .validate(&json!({"metadata": {"name": "exempt"}, "spec": {"type": "Limited",
                "limited": {"limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 8, "queueLengthLimit": 1}}}}}))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                r#"spec.type: Invalid value: "Limited": type must be 'Exempt' if and only if name is 'exempt'"#,
                "spec.limited.limitResponse.queuing.handSize: Invalid value: 8: should not be greater than queues (4)"
            ]
        );
    }

    #[test]
    fn bootstrap_objects_decode_unchanged_and_validate() {
        // Upstream checks that defaulting leaves the bootstrap objects as they are.
        for pl in priority_levels() {
            let decoded = PRIORITY_LEVEL_CONFIGURATIONS
                .decode(pl.clone())
                .expect("decodes");
            assert_eq!(decoded, pl, "{}", pl["metadata"]["name"]);
            assert!(
                PriorityLevelStrategy.validate(&decoded).is_empty(),
                "{}",
                pl["metadata"]["name"]
            );
        }
        let levels: Vec<String> = priority_levels()
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_owned())
            .collect();
        for fs in flow_schemas() {
            let decoded = FLOW_SCHEMAS.decode(fs.clone()).expect("decodes");
            assert_eq!(decoded, fs, "{}", fs["metadata"]["name"]);
            assert!(
                FlowSchemaStrategy.validate(&decoded).is_empty(),
                "{}",
                fs["metadata"]["name"]
            );
            let level = fs["spec"]["priorityLevelConfiguration"]["name"]
                .as_str()
                .unwrap_or("");
            assert!(levels.iter().any(|l| l == level), "{level} exists");
        }
        let names: Vec<&str> = [
            "exempt",
            "catch-all",
            "system-leader-election",
            "workload-high",
        ]
        .to_vec();
        let all: Vec<Value> = priority_levels()
            .into_iter()
            .chain(flow_schemas())
            .collect();
        for name in names {
            assert!(all.iter().any(|o| o["metadata"]["name"] == name), "{name}");
        }
    }
}
