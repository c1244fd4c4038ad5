//! The simulated CSI driver's attacher: the CSIDriver `kcm up` publishes for [`PROVISIONER`] and which VolumeAttachments it reports attached (the external-attacher sidecar's part).

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSIDriverSpec, StorageClass, VolumeAttachment, VolumeAttachmentStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::class::PROVISIONER;

/// Fault annotation on a PersistentVolume or its StorageClass: `never` leaves its
/// VolumeAttachments unattached, so pods using it wait (`FailedAttachVolume`).
pub const ANNOTATION_ATTACH: &str = "sim.kcm.io/attach";

/// The CSIDriver of the simulated driver: attach required, so the attach/detach controller
/// creates a VolumeAttachment for every node that mounts one of its volumes.
pub fn csi_driver() -> CSIDriver {
    CSIDriver {
        metadata: ObjectMeta {
            name: Some(PROVISIONER.to_owned()),
            ..Default::default()
        },
        spec: CSIDriverSpec {
            attach_required: Some(true),
            ..Default::default()
        },
    }
}

/// Whether the attacher should report `attachment` attached: it is for [`PROVISIONER`], not
/// attached yet, not being deleted, and neither its volume nor the volume's class says
/// [`ANNOTATION_ATTACH`]`=never`.
pub fn should_attach(
    attachment: &VolumeAttachment,
    volume: Option<&PersistentVolume>,
    class: Option<&StorageClass>,
) -> bool {
    let never = |meta: &ObjectMeta| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_ATTACH))
            .map(String::as_str)
            == Some("never")
    };
    attachment.spec.attacher == PROVISIONER
        && attachment.metadata.deletion_timestamp.is_none()
        && !attachment.status.as_ref().is_some_and(|s| s.attached)
        && !volume.is_some_and(|v| never(&v.metadata))
        && !class.is_some_and(|c| never(&c.metadata))
}

/// The status the attacher writes: attached, with no error.
pub fn attached_status() -> VolumeAttachmentStatus {
    VolumeAttachmentStatus {
        attached: true,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::storage::v1::{VolumeAttachmentSource, VolumeAttachmentSpec};

    fn attachment(attacher: &str) -> VolumeAttachment {
        VolumeAttachment {
            metadata: ObjectMeta {
                name: Some("csi-abc".into()),
                ..Default::default()
            },
            spec: VolumeAttachmentSpec {
                attacher: attacher.into(),
                node_name: "node-1".into(),
                source: VolumeAttachmentSource {
                    persistent_volume_name: Some("pv-1".into()),
                    ..Default::default()
                },
            },
            status: None,
        }
    }

    fn annotated(value: &str) -> ObjectMeta {
        ObjectMeta {
            annotations: Some([(ANNOTATION_ATTACH.to_owned(), value.to_owned())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_published_driver_requires_attach() {
        let driver = csi_driver();
        assert_eq!(driver.metadata.name.as_deref(), Some(PROVISIONER));
        assert_eq!(driver.spec.attach_required, Some(true));
    }

    #[test]
    fn only_its_own_unattached_attachments_are_attached() {
        assert!(should_attach(&attachment(PROVISIONER), None, None));
        assert!(!should_attach(
            &attachment("other.csi.example.com"),
            None,
            None
        ));
        let mut done = attachment(PROVISIONER);
        done.status = Some(attached_status());
        assert!(!should_attach(&done, None, None));
    }

    #[test]
    fn attach_never_on_the_volume_or_its_class_leaves_it_unattached() {
        let va = attachment(PROVISIONER);
        let pv = PersistentVolume {
            metadata: annotated("never"),
            ..Default::default()
        };
        assert!(!should_attach(&va, Some(&pv), None));
        let class = StorageClass {
            metadata: annotated("never"),
            ..Default::default()
        };
        assert!(!should_attach(&va, None, Some(&class)));
        let pv = PersistentVolume {
            metadata: annotated("always"),
            ..Default::default()
        };
        assert!(should_attach(&va, Some(&pv), None));
    }
}
