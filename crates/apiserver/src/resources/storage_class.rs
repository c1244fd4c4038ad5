//! storage.k8s.io/v1 storageclasses: reclaim policy and binding mode defaults, provisioner and parameter validation, the immutable fields (upstream's `SetDefaults_StorageClass`, `ValidateStorageClass[Update]`).

use k8s_openapi::api::storage::v1::StorageClass;
use kcm_machinery::labels::validate_label_key;
use serde_json::Value;

use crate::registry::strategy::{Strategy, typed_roundtrip};
use crate::validation::FieldError;

/// Most provisioner parameters upstream accepts.
const MAX_PARAMETERS: usize = 512;
/// Their largest total size (keys and values).
const MAX_PARAMETERS_SIZE: usize = 256 * 1024;

/// Decodes a StorageClass with the scheme defaults: `reclaimPolicy: Delete`,
/// `volumeBindingMode: Immediate`.
pub fn decode(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<StorageClass>(obj, |sc| {
        sc.reclaim_policy.get_or_insert_with(|| "Delete".to_owned());
        sc.volume_binding_mode
            .get_or_insert_with(|| "Immediate".to_owned());
    })
}

/// Upstream's `validateProvisioner`: the field `field` (a StorageClass's `provisioner`, a
/// VolumeAttributesClass's `driverName`) is required and a qualified name.
pub(crate) fn validate_provisioner(obj: &Value, field: &str, errs: &mut Vec<FieldError>) {
    let provisioner = obj.get(field).and_then(Value::as_str).unwrap_or("");
    if provisioner.is_empty() {
        errs.push(FieldError::required(field, ""));
    } else if let Err(e) = validate_label_key(&provisioner.to_lowercase()) {
        // A provisioner is a qualified name, as a label key (`IsQualifiedName`).
        errs.push(FieldError::invalid(field, provisioner, e.to_string()));
    }
}

/// Upstream's `validateParameters`: at most 512 non-empty keys of at most 256 KiB in all;
/// at least one unless `allow_empty`.
pub(crate) fn validate_parameters(obj: &Value, allow_empty: bool, errs: &mut Vec<FieldError>) {
    let params = obj.get("parameters").and_then(Value::as_object);
    if let Some(params) = params {
        if params.len() > MAX_PARAMETERS {
            errs.push(FieldError::too_long("parameters", MAX_PARAMETERS));
            return;
        }
        let mut size = 0;
        for (k, v) in params {
            if k.is_empty() {
                errs.push(FieldError::invalid(
                    "parameters",
                    k.as_str(),
                    "field can not be empty.",
                ));
            }
            size += k.len() + v.as_str().map_or(0, str::len);
        }
        if size > MAX_PARAMETERS_SIZE {
            errs.push(FieldError::too_long("parameters", MAX_PARAMETERS_SIZE));
        }
    }
    if !allow_empty && params.is_none_or(|p| p.is_empty()) {
        errs.push(FieldError::required(
            "parameters",
            "must contain at least one key/value pair",
        ));
    }
}

/// The StorageClass strategy.
#[derive(Debug, Default)]
pub struct StorageClassStrategy;

impl Strategy for StorageClassStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_provisioner(obj, "provisioner", &mut errs);
        validate_parameters(obj, true, &mut errs);
        match obj.get("reclaimPolicy").and_then(Value::as_str) {
            None | Some("Delete" | "Retain") => {}
            Some(other) => errs.push(FieldError::not_supported(
                "reclaimPolicy",
                other,
                &["Delete", "Retain"],
            )),
        }
        match obj.get("volumeBindingMode").and_then(Value::as_str) {
            None => errs.push(FieldError::required("volumeBindingMode", "")),
            Some("Immediate" | "WaitForFirstConsumer") => {}
            Some(other) => errs.push(FieldError::not_supported(
                "volumeBindingMode",
                other,
                &["Immediate", "WaitForFirstConsumer"],
            )),
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let same = |k: &str| new.get(k) == old.get(k);
        // Upstream compares maps with DeepEqual, where nil and empty are equal.
        let params = |o: &Value| {
            o.get("parameters")
                .filter(|p| p.as_object().is_some_and(|m| !m.is_empty()))
                .cloned()
        };
        if params(new) != params(old) {
            errs.push(FieldError::forbidden(
                "parameters",
                "updates to parameters are forbidden.",
            ));
        }
        if !same("provisioner") {
            errs.push(FieldError::forbidden(
                "provisioner",
                "updates to provisioner are forbidden.",
            ));
        }
        if !same("reclaimPolicy") {
            errs.push(FieldError::forbidden(
                "reclaimPolicy",
                "updates to reclaimPolicy are forbidden.",
            ));
        }
        if !same("volumeBindingMode") {
            errs.push(FieldError::invalid(
                "volumeBindingMode",
                new.get("volumeBindingMode").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_and_validation() {
        let sc = decode(json!({"metadata": {"name": "fast"}, "provisioner": "ebs.csi.aws.com"}))
            .expect("decodes");
        assert_eq!(
            (
                sc["reclaimPolicy"].as_str(),
                sc["volumeBindingMode"].as_str()
            ),
            (Some("Delete"), Some("Immediate"))
        );
        assert!(StorageClassStrategy.validate(&sc).is_empty());
        let bad = json!({"reclaimPolicy": "Recycle", "volumeBindingMode": "Later"});
        let errs: Vec<String> = StorageClassStrategy
            .validate(&bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "provisioner: Required value",
                r#"reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain""#,
                r#"volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer""#,
            ]
        );
    }

    #[test]
    fn provisioner_parameters_and_policies_are_immutable() {
        let old = json!({"provisioner": "a.example.com", "parameters": {"type": "gp3"},
            "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"});
        let mut new = old.clone();
        new["allowVolumeExpansion"] = json!(true);
        assert!(StorageClassStrategy.validate_update(&new, &old).is_empty());
        let new = json!({"provisioner": "b.example.com", "parameters": {"type": "io2"},
            "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"});
        let errs: Vec<String> = StorageClassStrategy
            .validate_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "parameters: Forbidden: updates to parameters are forbidden.",
                "provisioner: Forbidden: updates to provisioner are forbidden.",
                "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
                r#"volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable"#,
            ]
        );
    }
}
