//! storage.k8s.io/v1 volumeattachments: spec immutable, status through `/status` only, attacher and source validation (upstream's `volumeAttachmentStrategy`, `ValidateVolumeAttachment`).

use serde_json::{Value, json};

use crate::registry::strategy::{MetadataReset, Strategy};
use crate::validation::{FieldError, NameRule};

/// The VolumeAttachment strategy.
#[derive(Debug, Default)]
pub struct VolumeAttachmentStrategy;

impl Strategy for VolumeAttachmentStrategy {
    /// `volumeAttachmentStatusStrategy.PrepareForUpdate` calls `ResetObjectMetaForStatus`.
    fn status_metadata_reset(&self) -> MetadataReset {
        MetadataReset::FOR_STATUS
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // The status starts empty; Go prints the empty status struct.
        obj["status"] = json!({"attached": false});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec");
        let field = |k: &str| {
            spec.and_then(|s| s.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let attacher = field("attacher");
        if attacher.is_empty() {
            errs.push(FieldError::required("spec.attacher", ""));
        } else {
            for msg in NameRule::Subdomain.check(&attacher.to_lowercase()) {
                errs.push(FieldError::invalid("spec.attacher", attacher, msg));
            }
        }
        let node = field("nodeName");
        if node.is_empty() {
            errs.push(FieldError::required("spec.nodeName", ""));
        } else {
            for msg in NameRule::Subdomain.check(node) {
                errs.push(FieldError::invalid("spec.nodeName", node, msg));
            }
        }
        let source = spec.and_then(|s| s.get("source"));
        let pv = source
            .and_then(|s| s.get("persistentVolumeName"))
            .filter(|v| !v.is_null());
        let inline = source
            .and_then(|s| s.get("inlineVolumeSpec"))
            .filter(|v| !v.is_null());
        match (pv, inline) {
            (None, None) => errs.push(FieldError::required(
                "spec.source",
                "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            )),
            (Some(_), Some(_)) => errs.push(FieldError::forbidden(
                "spec.source",
                "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            )),
            (Some(pv), None) => {
                if pv.as_str().unwrap_or("").is_empty() {
                    errs.push(FieldError::required(
                        "spec.source.persistentVolumeName",
                        "must specify non empty persistentVolumeName",
                    ));
                }
            }
            (None, Some(_)) => {}
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("spec") != old.get("spec") {
            errs.push(FieldError::invalid(
                "spec",
                new.get("spec").cloned().unwrap_or(Value::Null),
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
    fn attachments() {
        let va = json!({"spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
            "source": {"persistentVolumeName": "pv-1"}}});
        assert!(VolumeAttachmentStrategy.validate(&va).is_empty());
        let errs: Vec<String> = VolumeAttachmentStrategy
            .validate(&json!({"spec": {"source": {}}}))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "spec.attacher: Required value",
                "spec.nodeName: Required value",
                "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"
            ]
        );
        let mut moved = va.clone();
        moved["spec"]["nodeName"] = json!("n2");
        assert_eq!(
            VolumeAttachmentStrategy.validate_update(&moved, &va).len(),
            1
        );
        let mut status = json!({"status": {"attached": true}});
        VolumeAttachmentStrategy.prepare_for_create(&mut status);
        assert_eq!(status["status"], json!({"attached": false}));
    }
}
