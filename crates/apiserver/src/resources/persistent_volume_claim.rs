//! core/v1 persistentvolumeclaims: upstream's defaults, a `Pending` phase on create, the spec validation, and the update rule (the spec is immutable except a bound claim's storage request, which may grow).

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec};
use kcm_machinery::labels::Selector;
use serde_json::{Value, json};

use crate::pointer::At;
use crate::registry::strategy::{Strategy, typed, typed_roundtrip_checked};
use crate::resources::persistent_volume::{VOLUME_MODES, validate_access_modes};
use crate::resources::quantities::{self, canonicalize_resource_list, milli_value};
use crate::validation::FieldError;

/// The beta storage class annotation, which upstream still honours (and freezes).
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The PersistentVolumeClaim strategy (upstream's `persistentvolumeclaimStrategy`).
#[derive(Debug, Default)]
pub struct PersistentVolumeClaimStrategy;

impl Strategy for PersistentVolumeClaimStrategy {
    /// A new claim is `Pending` (upstream resets the status and defaults the phase on
    /// read); `volumeAttributesClassName` is dropped, its feature gate being off by default
    /// in v1.33.
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending"});
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("volumeAttributesClassName");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match obj.get("spec").and_then(typed::<PersistentVolumeClaimSpec>) {
            Some(spec) => validate_claim_spec(&spec, "spec", &mut errs),
            None => errs.push(FieldError::required("spec", "")),
        }
        errs
    }

    /// upstream's `ValidatePersistentVolumeClaimUpdate`: the spec may change only by binding
    /// (`volumeName`, once) and, for a bound claim, by its storage request, which may not
    /// shrink to or below the capacity it has (recovering from a failed expansion).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let mut new_spec = new.get("spec").cloned().unwrap_or(Value::Null);
        let mut old_spec = old.get("spec").cloned().unwrap_or(Value::Null);
        if old_spec
            .get("volumeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            match new_spec.get("volumeName").cloned() {
                Some(v) => old_spec["volumeName"] = v,
                None => {
                    if let Some(m) = old_spec.as_object_mut() {
                        m.remove("volumeName");
                    }
                }
            }
        }
        let annotation = |obj: &Value| {
            obj.at("/metadata/annotations")
                .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
                .cloned()
        };
        // A class set by the beta annotation may move to the field once, with the same value.
        let old_class = old_spec.get("storageClassName").cloned();
        let new_class = new_spec.get("storageClassName").cloned();
        if old_class.is_none()
            && new_class.is_some()
            && annotation(old).is_some_and(|a| Some(&a) == new_class.as_ref())
        {
            if let Some(m) = new_spec.as_object_mut() {
                m.remove("storageClassName");
            }
        } else if annotation(new) != annotation(old) {
            errs.push(FieldError::invalid(
                format!("metadata.annotations.{BETA_STORAGE_CLASS_ANNOTATION}"),
                annotation(new).unwrap_or_else(|| json!("")),
                "field is immutable",
            ));
        }
        let bound = new.at("/status/phase").and_then(Value::as_str) == Some("Bound");
        if bound {
            let old_request = old_spec.at("/resources/requests/storage").cloned();
            if let Some(requests) = new_spec
                .pointer_mut("/resources/requests")
                .and_then(Value::as_object_mut)
            {
                match old_request {
                    Some(v) => {
                        requests.insert("storage".to_owned(), v);
                    }
                    None => {
                        requests.remove("storage");
                    }
                }
            }
            if let Some(class) = old_spec.get("volumeAttributesClassName").cloned()
                && new_spec.get("volumeAttributesClassName").is_some()
            {
                new_spec["volumeAttributesClassName"] = class;
            }
        }
        if new_spec != old_spec {
            errs.push(FieldError::forbidden(
                "spec",
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            ));
        }
        let size = |obj: &Value, pointer: &str| {
            obj.at(pointer)
                .and_then(Value::as_str)
                .and_then(milli_value)
                .unwrap_or(0)
        };
        let new_size = size(new, "/spec/resources/requests/storage");
        let old_size = size(old, "/spec/resources/requests/storage");
        let status_size = size(old, "/status/capacity/storage");
        if new_size < old_size && new_size <= status_size {
            errs.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
        let mode = |obj: &Value| obj.at("/spec/volumeMode").cloned();
        if mode(new) != mode(old) {
            errs.push(FieldError::invalid(
                "volumeMode",
                mode(new).unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        let class = |obj: &Value| obj.at("/spec/volumeAttributesClassName").cloned();
        if class(new) != class(old) {
            errs.push(FieldError::forbidden(
                "spec.volumeAttributesClassName",
                "update is forbidden when the VolumeAttributesClass feature gate is disabled",
            ));
        }
        errs
    }
}

/// Decodes a PersistentVolumeClaim with upstream's defaults (volume mode `Filesystem`) and
/// canonical quantities.
pub fn decode_persistent_volume_claim(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<PersistentVolumeClaim, quantities::Error>(obj, |pvc| {
        if let Some(spec) = pvc.spec.as_mut() {
            default_claim_spec(spec)?;
        }
        if let Some(status) = pvc.status.as_mut() {
            canonicalize_resource_list(status.capacity.as_mut(), "status.capacity")?;
        }
        Ok(())
    })
}

/// `SetDefaults_PersistentVolumeClaimSpec` and canonical requests and limits.
fn default_claim_spec(spec: &mut PersistentVolumeClaimSpec) -> quantities::Result<()> {
    spec.volume_mode
        .get_or_insert_with(|| "Filesystem".to_owned());
    if let Some(resources) = spec.resources.as_mut() {
        canonicalize_resource_list(resources.requests.as_mut(), "spec.resources.requests")?;
        canonicalize_resource_list(resources.limits.as_mut(), "spec.resources.limits")?;
    }
    Ok(())
}

/// upstream's `ValidatePersistentVolumeClaimSpec`, at `path`.
fn validate_claim_spec(spec: &PersistentVolumeClaimSpec, path: &str, errs: &mut Vec<FieldError>) {
    let modes = spec.access_modes.as_deref().unwrap_or(&[]);
    if modes.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.accessModes"),
            "at least 1 access mode is required",
        ));
    }
    if let Some(selector) = spec.selector.as_ref()
        && let Err(e) = Selector::from_label_selector(selector)
    {
        errs.push(FieldError::invalid(
            format!("{path}.selector"),
            serde_json::to_value(selector).unwrap_or(Value::Null),
            e.to_string(),
        ));
    }
    validate_access_modes(modes, &format!("{path}.accessModes"), errs);
    let storage_path = format!("{path}.resources[storage]");
    match spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
    {
        None => errs.push(FieldError::required(storage_path, "")),
        Some(q) if milli_value(&q.0).is_some_and(|v| v <= 0) => errs.push(FieldError::invalid(
            storage_path,
            q.0.as_str(),
            "must be greater than zero",
        )),
        Some(_) => {}
    }
    if let Some(class) = spec.storage_class_name.as_deref().filter(|c| !c.is_empty()) {
        for msg in crate::validation::NameRule::Subdomain.check(class) {
            errs.push(FieldError::invalid(
                format!("{path}.storageClassName"),
                class,
                msg,
            ));
        }
    }
    if let Some(mode) = spec.volume_mode.as_deref()
        && !VOLUME_MODES.contains(&mode)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.volumeMode"),
            mode,
            &VOLUME_MODES,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(spec: Value) -> Value {
        let mut obj = decode_persistent_volume_claim(json!({"apiVersion": "v1",
            "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
            "spec": spec}))
        .expect("decodes");
        PersistentVolumeClaimStrategy.prepare_for_create(&mut obj);
        obj
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn rwo(size: &str) -> Value {
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}})
    }

    #[test]
    fn defaults_and_pending_phase() {
        let obj = claim(rwo("1.5Gi"));
        assert_eq!(obj["spec"]["volumeMode"], "Filesystem");
        assert_eq!(obj["spec"]["resources"]["requests"]["storage"], "1536Mi");
        assert_eq!(obj["status"], json!({"phase": "Pending"}));
        assert!(PersistentVolumeClaimStrategy.validate(&obj).is_empty());
    }

    #[test]
    fn validation_messages_are_upstreams() {
        let cases = [
            (
                "no access modes, no storage",
                json!({}),
                vec![
                    "spec.accessModes: Required value: at least 1 access mode is required",
                    "spec.resources[storage]: Required value",
                ],
            ),
            (
                "zero storage and a bad volume mode",
                json!({"accessModes": ["ReadWriteOnce"], "volumeMode": "Tape",
                    "resources": {"requests": {"storage": "0"}}}),
                vec![
                    "spec.resources[storage]: Invalid value: \"0\": must be greater than zero",
                    "spec.volumeMode: Unsupported value: \"Tape\": supported values: \"Block\", \"Filesystem\"",
                ],
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(
                messages(PersistentVolumeClaimStrategy.validate(&claim(spec))),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn an_unbound_claim_is_immutable_but_may_be_bound_once() {
        let old = claim(rwo("1Gi"));
        let mut bigger = old.clone();
        bigger["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(
            messages(PersistentVolumeClaimStrategy.validate_update(&bigger, &old)),
            [
                "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
            ]
        );
        let mut bound = old.clone();
        bound["spec"]["volumeName"] = json!("pv-1");
        assert!(
            PersistentVolumeClaimStrategy
                .validate_update(&bound, &old)
                .is_empty()
        );
        let mut rebound = bound.clone();
        rebound["spec"]["volumeName"] = json!("pv-2");
        assert!(
            !PersistentVolumeClaimStrategy
                .validate_update(&rebound, &bound)
                .is_empty()
        );
    }

    #[test]
    fn a_bound_claims_request_grows_but_not_below_its_capacity() {
        let mut old = claim(rwo("2Gi"));
        old["spec"]["volumeName"] = json!("pv-1");
        old["status"] = json!({"phase": "Bound", "capacity": {"storage": "2Gi"}});
        let mut grown = old.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("5Gi");
        assert!(
            PersistentVolumeClaimStrategy
                .validate_update(&grown, &old)
                .is_empty()
        );
        let mut shrunk = old.clone();
        shrunk["spec"]["resources"]["requests"]["storage"] = json!("1Gi");
        assert_eq!(
            messages(PersistentVolumeClaimStrategy.validate_update(&shrunk, &old)),
            [
                "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
            ]
        );
        let mut class = old.clone();
        class["spec"]["storageClassName"] = json!("fast");
        assert!(
            !PersistentVolumeClaimStrategy
                .validate_update(&class, &old)
                .is_empty()
        );
    }
}
