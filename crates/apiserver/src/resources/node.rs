//! node.k8s.io/v1 runtimeclasses: a DNS-label handler that never changes, and canonical overhead quantities.

use k8s_openapi::api::node::v1::RuntimeClass;
use serde_json::Value;

use crate::pointer::At;
use crate::registry::resource::ResourceDef;
use crate::registry::strategy::{Strategy, typed_roundtrip_checked};
use crate::resources::quantities::{self, canonicalize_resource_list, milli_value};
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::{FieldError, NameRule};

/// node.k8s.io/v1 runtimeclasses.
pub static RUNTIME_CLASSES: ResourceDef = ResourceDef::of::<RuntimeClass>()
    .decode_with(decode_runtime_class)
    .strategy(&RuntimeClassStrategy)
    .printer(printers::RUNTIME_CLASS)
    .merge_schema(&kinds::METADATA_ONLY);

/// The RuntimeClass strategy (upstream's `strategy` of `pkg/registry/node/runtimeclass`).
#[derive(Debug, Default)]
pub struct RuntimeClassStrategy;

impl Strategy for RuntimeClassStrategy {
    /// upstream's `ValidateRuntimeClass`: the handler is a DNS label; the fixed overhead is
    /// not negative.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let handler = obj.get("handler").and_then(Value::as_str).unwrap_or("");
        for msg in NameRule::Label.check(handler) {
            errs.push(FieldError::invalid("handler", handler, msg));
        }
        for (name, q) in obj
            .at("/overhead/podFixed")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if q.as_str().and_then(milli_value).is_some_and(|v| v < 0) {
                errs.push(FieldError::invalid(
                    format!("overhead.podFixed[{name}]"),
                    q.clone(),
                    "must be greater than or equal to 0",
                ));
            }
        }
        errs
    }

    /// upstream's `ValidateRuntimeClassUpdate`: the handler is immutable.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("handler") != old.get("handler") {
            errs.push(FieldError::invalid(
                "handler",
                new.get("handler").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs
    }
}

/// Decodes a RuntimeClass with canonical overhead quantities.
pub fn decode_runtime_class(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<RuntimeClass, quantities::Error>(obj, |rc| {
        if let Some(overhead) = rc.overhead.as_mut() {
            canonicalize_resource_list(overhead.pod_fixed.as_mut(), "overhead.podFixed")?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_handler_is_a_label_and_immutable() {
        let rc = decode_runtime_class(json!({"metadata": {"name": "gvisor"}, "handler": "runsc",
            "overhead": {"podFixed": {"memory": "0.5Gi"}}}))
        .expect("decodes");
        assert_eq!(rc["overhead"]["podFixed"]["memory"], "512Mi");
        assert!(RuntimeClassStrategy.validate(&rc).is_empty());
        let bad = json!({"handler": "Run_SC"});
        assert_eq!(
            RuntimeClassStrategy.validate(&bad)[0].to_string(),
            format!(
                "handler: Invalid value: \"Run_SC\": {}",
                crate::validation::DNS1123_LABEL_MESSAGE
            )
        );
        let mut changed = rc.clone();
        changed["handler"] = json!("kata");
        assert_eq!(
            RuntimeClassStrategy.validate_update(&changed, &rc)[0].to_string(),
            "handler: Invalid value: \"kata\": field is immutable"
        );
    }
}
