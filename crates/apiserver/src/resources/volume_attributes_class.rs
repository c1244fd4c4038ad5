//! storage.k8s.io/v1 volumeattributesclasses: driver and parameter validation, both immutable, a delete answered with the object (upstream's `volumeAttributesClassStrategy`, `ValidateVolumeAttributesClass[Update]`).

use serde_json::Value;

use crate::registry::strategy::Strategy;
use crate::resources::storage_class::{validate_parameters, validate_provisioner};
use crate::validation::FieldError;

/// The VolumeAttributesClass strategy.
#[derive(Debug, Default)]
pub struct VolumeAttributesClassStrategy;

impl Strategy for VolumeAttributesClassStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_provisioner(obj, "driverName", &mut errs);
        validate_parameters(obj, false, &mut errs);
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if new.get("driverName") != old.get("driverName") {
            errs.push(FieldError::forbidden(
                "driverName",
                "updates to driverName are forbidden.",
            ));
        }
        if new.get("parameters") != old.get("parameters") {
            errs.push(FieldError::forbidden(
                "parameters",
                "updates to parameters are forbidden.",
            ));
        }
        errs
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn driver_and_parameters_are_required_and_immutable() {
        let messages = |errs: Vec<FieldError>| -> Vec<String> {
            errs.iter().map(ToString::to_string).collect()
        };
        assert_eq!(
            messages(VolumeAttributesClassStrategy.validate(&json!({"metadata": {"name": "v"}}))),
            [
                "driverName: Required value",
                "parameters: Required value: must contain at least one key/value pair"
            ]
        );
        let old = json!({"driverName": "csi.example.com", "parameters": {"iops": "100"}});
        assert!(VolumeAttributesClassStrategy.validate(&old).is_empty());
        let new = json!({"driverName": "other.example.com", "parameters": {"iops": "200"}});
        assert_eq!(
            messages(VolumeAttributesClassStrategy.validate_update(&new, &old)),
            [
                "driverName: Forbidden: updates to driverName are forbidden.",
                "parameters: Forbidden: updates to parameters are forbidden."
            ]
        );
    }
}
