//! storage.k8s.io/v1 csidrivers, csinodes and csistoragecapacities: CSIDriver defaults and immutable fields, driver and node validation, canonical capacities (upstream's `SetDefaults_CSIDriver`, `ValidateCSIDriver`, `ValidateCSINode`, `ValidateCSIStorageCapacity`).

use std::collections::HashSet;

use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kcm_machinery::quantity;
use serde_json::Value;

use crate::pointer::At;
use crate::registry::strategy::{Strategy, typed_roundtrip, typed_roundtrip_checked};
use crate::resources::label_selector;
use crate::validation::{FieldError, NameRule};

/// Longest CSI driver name.
const MAX_DRIVER_NAME: usize = 63;
/// Longest CSINode driver `nodeID`.
const MAX_NODE_ID: usize = 192;

/// Decodes a CSIDriver with the scheme defaults: attach required, no pod info, no
/// capacity tracking, `ReadWriteOnceWithFSType`, persistent volumes only, no republish,
/// SELinux mount off (the `SELinuxMountReadWriteOncePod` gate is on in v1.33).
pub fn decode_driver(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<CSIDriver>(obj, |d| {
        let spec = &mut d.spec;
        spec.attach_required.get_or_insert(true);
        spec.pod_info_on_mount.get_or_insert(false);
        spec.storage_capacity.get_or_insert(false);
        spec.fs_group_policy
            .get_or_insert_with(|| "ReadWriteOnceWithFSType".to_owned());
        if spec
            .volume_lifecycle_modes
            .as_ref()
            .is_none_or(Vec::is_empty)
        {
            spec.volume_lifecycle_modes = Some(vec!["Persistent".to_owned()]);
        }
        spec.requires_republish.get_or_insert(false);
        spec.se_linux_mount.get_or_insert(false);
    })
}

/// Decodes a CSIStorageCapacity with its quantities in canonical form.
pub fn decode_capacity(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<CSIStorageCapacity, quantity::Error>(obj, |c| {
        for q in [c.capacity.as_mut(), c.maximum_volume_size.as_mut()]
            .into_iter()
            .flatten()
        {
            *q = Quantity(quantity::canonicalize(q.0.trim())?);
        }
        Ok(())
    })
}

/// Upstream's `ValidateCSIDriverName`.
fn driver_name_errors(name: &str, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(field, ""));
    }
    if name.len() > MAX_DRIVER_NAME {
        errs.push(FieldError::too_long(field, MAX_DRIVER_NAME));
    }
    for msg in NameRule::Subdomain.check(&name.to_lowercase()) {
        errs.push(FieldError::invalid(field, name, msg));
    }
    errs
}

/// The CSIDriver strategy.
#[derive(Debug, Default)]
pub struct CsiDriverStrategy;

impl Strategy for CsiDriverStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = obj
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if name.len() > MAX_DRIVER_NAME {
            errs.push(FieldError::too_long("metadata.name", MAX_DRIVER_NAME));
        }
        let spec = obj.get("spec");
        if spec.and_then(|s| s.get("attachRequired")).is_none() {
            errs.push(FieldError::required("spec.attachedRequired", ""));
        }
        if let Some(policy) = spec
            .and_then(|s| s.get("fsGroupPolicy"))
            .and_then(Value::as_str)
            && !["File", "None", "ReadWriteOnceWithFSType"].contains(&policy)
        {
            errs.push(FieldError::not_supported(
                "spec.fsGroupPolicy",
                policy,
                &["File", "None", "ReadWriteOnceWithFSType"],
            ));
        }
        let modes = spec
            .and_then(|s| s.get("volumeLifecycleModes"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (i, mode) in modes.iter().enumerate() {
            let mode = mode.as_str().unwrap_or("");
            if mode != "Persistent" && mode != "Ephemeral" {
                errs.push(FieldError::not_supported(
                    format!("spec.volumeLifecycleModes[{i}]"),
                    mode,
                    &["Ephemeral", "Persistent"],
                ));
            }
        }
        let requests = spec
            .and_then(|s| s.get("tokenRequests"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut audiences = HashSet::new();
        for (i, request) in requests.iter().enumerate() {
            let audience = request
                .get("audience")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !audiences.insert(audience) {
                errs.push(FieldError::duplicate(
                    format!("spec.tokenRequests[{i}].audience"),
                    audience,
                ));
            }
            if let Some(seconds) = request.get("expirationSeconds").and_then(Value::as_i64)
                && seconds < 600
            {
                errs.push(FieldError::invalid(
                    format!("spec.tokenRequests[{i}].expirationSeconds"),
                    seconds,
                    "may not specify a duration less than 10 minutes",
                ));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        for (pointer, field) in [
            ("/spec/attachRequired", "spec.attachedRequired"),
            ("/spec/volumeLifecycleModes", "spec.volumeLifecycleModes"),
        ] {
            let value = new.at(pointer).cloned().unwrap_or(Value::Null);
            if Some(&value) != old.at(pointer) && !(value.is_null() && old.at(pointer).is_none()) {
                errs.push(FieldError::invalid(field, value, "field is immutable"));
            }
        }
        errs
    }
}

/// The CSINode strategy: one entry per driver, each with a node id.
#[derive(Debug, Default)]
pub struct CsiNodeStrategy;

impl Strategy for CsiNodeStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let drivers = obj
            .at("/spec/drivers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut names = HashSet::new();
        for (i, driver) in drivers.iter().enumerate() {
            let path = format!("spec.drivers[{i}]");
            let name = driver.get("name").and_then(Value::as_str).unwrap_or("");
            errs.extend(driver_name_errors(name, &format!("{path}.name")));
            if !names.insert(name) {
                errs.push(FieldError::duplicate(format!("{path}.name"), name));
            }
            let node_id = driver.get("nodeID").and_then(Value::as_str).unwrap_or("");
            if node_id.is_empty() {
                errs.push(FieldError::required(format!("{path}.nodeID"), ""));
            } else if node_id.len() > MAX_NODE_ID {
                errs.push(FieldError::too_long(format!("{path}.nodeID"), MAX_NODE_ID));
            }
        }
        errs
    }
}

/// The CSIStorageCapacity strategy.
#[derive(Debug, Default)]
pub struct CsiStorageCapacityStrategy;

impl Strategy for CsiStorageCapacityStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = label_selector::validate(obj.get("nodeTopology"), "nodeTopology");
        let class = obj
            .get("storageClassName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if class.is_empty() {
            errs.push(FieldError::required("storageClassName", ""));
        } else {
            for msg in NameRule::Subdomain.check(class) {
                errs.push(FieldError::invalid("storageClassName", class, msg));
            }
        }
        for field in ["capacity", "maximumVolumeSize"] {
            if let Some(q) = obj.get(field).and_then(Value::as_str)
                && q.starts_with('-')
            {
                errs.push(FieldError::invalid(
                    field,
                    q,
                    "must be greater than or equal to 0",
                ));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        // Only the capacities may change (ValidateCSIStorageCapacityUpdate).
        for field in ["storageClassName", "nodeTopology"] {
            if new.get(field) != old.get(field) {
                errs.push(FieldError::invalid(
                    field,
                    new.get(field).cloned().unwrap_or(Value::Null),
                    "field is immutable",
                ));
            }
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn driver_defaults_and_immutable_fields() {
        let d = decode_driver(json!({"metadata": {"name": "ebs.csi.aws.com"}, "spec": {}}))
            .expect("decodes");
        assert_eq!(
            d["spec"],
            json!({"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
                "fsGroupPolicy": "ReadWriteOnceWithFSType", "volumeLifecycleModes": ["Persistent"],
                "requiresRepublish": false, "seLinuxMount": false})
        );
        assert!(CsiDriverStrategy.validate(&d).is_empty());
        let mut changed = d.clone();
        changed["spec"]["attachRequired"] = json!(false);
        changed["spec"]["podInfoOnMount"] = json!(true);
        let errs: Vec<String> = CsiDriverStrategy
            .validate_update(&changed, &d)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            ["spec.attachedRequired: Invalid value: false: field is immutable"]
        );
    }

    #[test]
    fn nodes_and_capacities() {
        let node = json!({"spec": {"drivers": [{"name": "a.example.com", "nodeID": "n1"},
            {"name": "a.example.com"}]}});
        let errs: Vec<String> = CsiNodeStrategy
            .validate(&node)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                r#"spec.drivers[1].name: Duplicate value: "a.example.com""#,
                "spec.drivers[1].nodeID: Required value"
            ]
        );
        let cap = decode_capacity(
            json!({"metadata": {"name": "c", "namespace": "d"}, "storageClassName": "fast",
            "capacity": "1.5Gi"}),
        )
        .expect("decodes");
        assert_eq!(cap["capacity"], "1536Mi");
        assert!(CsiStorageCapacityStrategy.validate(&cap).is_empty());
        assert!(decode_capacity(json!({"storageClassName": "s", "capacity": "lots"})).is_err());
        assert_eq!(
            CsiStorageCapacityStrategy.validate(&json!({}))[0].to_string(),
            "storageClassName: Required value"
        );
    }
}
