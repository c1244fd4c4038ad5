//! core/v1 persistentvolumes: upstream's defaults, a `Pending` phase on create, the spec validation (capacity, access modes, exactly one volume source) and the immutable volume source.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec};
use serde_json::{Value, json};

use crate::object;
use crate::pointer::At;
use crate::registry::strategy::{Strategy, typed, typed_roundtrip_checked};
use crate::resources::quantities::{self, canonicalize_resource_list, milli_value};
use crate::validation::FieldError;

/// Access modes a volume or claim may ask for, in upstream's (sorted) order.
pub const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
/// Volume modes.
pub const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
/// Reclaim policies.
const RECLAIM_POLICIES: [&str; 3] = ["Delete", "Recycle", "Retain"];
/// The volume sources of a PersistentVolume, as JSON fields: exactly one must be set.
const VOLUME_SOURCES: [&str; 22] = [
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "nfs",
    "rbd",
    "quobyte",
    "cinder",
    "cephfs",
    "flexVolume",
    "flocker",
    "azureFile",
    "vsphereVolume",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "local",
    "storageos",
    "csi",
    "iscsi",
    "fc",
];

/// The PersistentVolume strategy (upstream's `persistentvolumeStrategy`).
#[derive(Debug, Default)]
pub struct PersistentVolumeStrategy;

impl Strategy for PersistentVolumeStrategy {
    /// A new volume is `Pending` since now; no `volumeAttributesClassName` (its feature gate
    /// is off by default in v1.33, so upstream drops the field).
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] =
            json!({"phase": "Pending", "lastPhaseTransitionTime": object::now_rfc3339()});
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("volumeAttributesClassName");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match obj.get("spec").and_then(typed::<PersistentVolumeSpec>) {
            Some(spec) => validate_spec(&spec, &obj["spec"], &mut errs),
            None => errs.push(FieldError::required("spec", "")),
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let source = |obj: &Value| {
            let mut spec = obj.get("spec").cloned().unwrap_or(Value::Null);
            if let Some(map) = spec.as_object_mut() {
                map.retain(|k, _| VOLUME_SOURCES.contains(&k.as_str()));
            }
            spec
        };
        if source(new) != source(old) {
            errs.push(FieldError::forbidden(
                "spec.persistentvolumesource",
                "spec.persistentvolumesource is immutable after creation",
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
        if old.at("/spec/nodeAffinity").is_some()
            && new.at("/spec/nodeAffinity") != old.at("/spec/nodeAffinity")
        {
            errs.push(FieldError::invalid(
                "nodeAffinity",
                new.at("/spec/nodeAffinity").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs
    }
}

/// Decodes a PersistentVolume with upstream's defaults: reclaim policy `Retain`, volume
/// mode `Filesystem`, canonical capacity.
pub fn decode_persistent_volume(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<PersistentVolume, quantities::Error>(obj, |pv| {
        if let Some(spec) = pv.spec.as_mut() {
            if spec
                .persistent_volume_reclaim_policy
                .as_deref()
                .unwrap_or("")
                .is_empty()
            {
                spec.persistent_volume_reclaim_policy = Some("Retain".to_owned());
            }
            spec.volume_mode
                .get_or_insert_with(|| "Filesystem".to_owned());
            canonicalize_resource_list(spec.capacity.as_mut(), "spec.capacity")?;
        }
        Ok(())
    })
}

/// upstream's `ValidatePersistentVolumeSpec` (for a stored volume, not an inline one).
fn validate_spec(spec: &PersistentVolumeSpec, raw: &Value, errs: &mut Vec<FieldError>) {
    let modes = spec.access_modes.as_deref().unwrap_or(&[]);
    if modes.is_empty() {
        errs.push(FieldError::required("spec.accessModes", ""));
    }
    validate_access_modes(modes, "spec.accessModes", errs);
    let capacity = spec.capacity.clone().unwrap_or_default();
    if capacity.is_empty() {
        errs.push(FieldError::required("spec.capacity", ""));
    }
    if !capacity.contains_key("storage") || capacity.len() > 1 {
        errs.push(FieldError::not_supported(
            "spec.capacity",
            serde_json::to_value(&capacity).unwrap_or(Value::Null),
            &["storage"],
        ));
    }
    for (name, q) in &capacity {
        if milli_value(&q.0).is_some_and(|v| v <= 0) {
            errs.push(FieldError::invalid(
                format!("spec.capacity[{name}]"),
                q.0.as_str(),
                "must be greater than zero",
            ));
        }
    }
    if let Some(class) = spec.storage_class_name.as_deref().filter(|c| !c.is_empty()) {
        for msg in crate::validation::NameRule::Subdomain.check(class) {
            errs.push(FieldError::invalid("spec.storageClassName", class, msg));
        }
    }
    if let Some(mode) = spec.volume_mode.as_deref()
        && !VOLUME_MODES.contains(&mode)
    {
        errs.push(FieldError::not_supported(
            "spec.volumeMode",
            mode,
            &VOLUME_MODES,
        ));
    }
    let policy = spec
        .persistent_volume_reclaim_policy
        .as_deref()
        .unwrap_or("");
    if !policy.is_empty() && !RECLAIM_POLICIES.contains(&policy) {
        errs.push(FieldError::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            policy,
            &RECLAIM_POLICIES,
        ));
    }
    let mut sources = 0;
    for source in VOLUME_SOURCES {
        if raw.get(source).is_some_and(|v| !v.is_null()) {
            sources += 1;
            if sources > 1 {
                errs.push(FieldError::forbidden(
                    format!("spec.{source}"),
                    "may not specify more than 1 volume type",
                ));
            }
        }
    }
    if sources == 0 {
        errs.push(FieldError::required("spec", "must specify a volume type"));
    }
    if let Some(host_path) = spec.host_path.as_ref()
        && host_path.path.trim_end_matches('/').is_empty()
        && policy == "Recycle"
    {
        errs.push(FieldError::forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "may not be 'recycle' for a hostPath mount of '/'",
        ));
    }
}

/// Every mode is known, and `ReadWriteOncePod` comes alone (upstream's access mode rules,
/// shared by volumes and claims).
pub fn validate_access_modes(modes: &[String], path: &str, errs: &mut Vec<FieldError>) {
    let (mut once_pod, mut others) = (false, false);
    for mode in modes {
        if !ACCESS_MODES.contains(&mode.as_str()) {
            errs.push(FieldError::not_supported(
                path,
                mode.as_str(),
                &ACCESS_MODES,
            ));
        } else if mode == "ReadWriteOncePod" {
            once_pod = true;
        } else {
            others = true;
        }
    }
    if once_pod && others {
        errs.push(FieldError::forbidden(
            path,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(spec: Value) -> Value {
        decode_persistent_volume(json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "pv-1"}, "spec": spec}))
        .expect("decodes")
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_and_pending_phase() {
        let mut obj = pv(
            json!({"capacity": {"storage": "1.5Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/data"}}),
        );
        assert_eq!(obj["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(obj["spec"]["volumeMode"], "Filesystem");
        assert_eq!(obj["spec"]["capacity"]["storage"], "1536Mi");
        PersistentVolumeStrategy.prepare_for_create(&mut obj);
        assert_eq!(obj["status"]["phase"], "Pending");
        assert!(obj["status"]["lastPhaseTransitionTime"].is_string());
        assert!(PersistentVolumeStrategy.validate(&obj).is_empty());
    }

    #[test]
    fn validation_messages_are_upstreams() {
        let cases = [
            (
                "nothing",
                json!({}),
                vec![
                    "spec.accessModes: Required value",
                    "spec.capacity: Required value",
                    "spec.capacity: Unsupported value: {}: supported values: \"storage\"",
                    "spec: Required value: must specify a volume type",
                ],
            ),
            (
                "two sources and a bad mode",
                json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteSometimes"],
                    "hostPath": {"path": "/a"}, "nfs": {"server": "s", "path": "/b"}}),
                vec![
                    "spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                    "spec.nfs: Forbidden: may not specify more than 1 volume type",
                ],
            ),
            (
                "once-pod with others",
                json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOncePod", "ReadOnlyMany"],
                    "local": {"path": "/mnt"}}),
                vec![
                    "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
                ],
            ),
            (
                "zero capacity",
                json!({"capacity": {"storage": "0"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/a"}}),
                vec!["spec.capacity[storage]: Invalid value: \"0\": must be greater than zero"],
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(
                messages(PersistentVolumeStrategy.validate(&pv(spec))),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn the_volume_source_is_immutable() {
        let old = pv(
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/a"}}),
        );
        let mut resized = old.clone();
        resized["spec"]["capacity"]["storage"] = json!("2Gi");
        resized["spec"]["claimRef"] = json!({"namespace": "default", "name": "data"});
        assert!(
            PersistentVolumeStrategy
                .validate_update(&resized, &old)
                .is_empty()
        );
        let mut moved = old.clone();
        moved["spec"]["hostPath"]["path"] = json!("/b");
        assert_eq!(
            messages(PersistentVolumeStrategy.validate_update(&moved, &old)),
            [
                "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"
            ]
        );
    }
}
