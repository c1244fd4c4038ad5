//! The simulated CSI driver's attacher: the CSIDriver `kcm up` publishes for [`CSI_DRIVER`], which VolumeAttachments it reports attached, and the loop that does so (the external-attacher sidecar's part).
//!
//! The simulated provisioner ([`super::provisioner`]) makes volumes with a CSI source of
//! [`CSI_DRIVER`]; the driver requires attach, so the attach/detach controller creates a
//! VolumeAttachment for every node that mounts one, and [`Attacher`] marks it attached (unless
//! the fault annotation says `never`). A deleted VolumeAttachment carries no finalizer of the
//! attacher, so it goes at once: the detach is immediate.
//!
//! The driver's name differs from the provisioner name [`PROVISIONER`](super::class::PROVISIONER)
//! (`sim.kcm.io/hostpath`): a CSI driver name must be a DNS subdomain (it is the CSIDriver's
//! object name), which a `/` is not.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSIDriverSpec, StorageClass, VolumeAttachment, VolumeAttachmentStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::controller::api_status::ApiStatus;
use kcm_machinery::controller::{ErrorPolicy, run_controller};
use kcm_machinery::informer::{
    DeletedObject, Indexer, ResourceEventHandler, SharedInformerFactory,
};
use kcm_machinery::workqueue::{QueueConfig, RateLimitingQueue, default_controller_rate_limiter};
use tokio_util::sync::CancellationToken;

use super::client::VolumeClient;
use super::{Synced, watch};

/// The simulated CSI driver: `spec.csi.driver` of the volumes the simulated provisioner makes,
/// the VolumeAttachments' `spec.attacher`, and the published CSIDriver's name.
pub const CSI_DRIVER: &str = "hostpath.sim.kcm.io";

/// Fault annotation on a PersistentVolume or its StorageClass: `never` leaves its
/// VolumeAttachments unattached, so pods using it wait (`FailedAttachVolume`).
pub const ANNOTATION_ATTACH: &str = "sim.kcm.io/attach";

/// How many VolumeAttachments are handled at once.
const WORKERS: usize = 2;

/// Why an attach step failed (the queue retries it).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the VolumeAttachment's status failed.
    #[error("marking VolumeAttachment {attachment} attached: {source}")]
    Status {
        /// The VolumeAttachment's name.
        attachment: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// The CSIDriver of the simulated driver: attach required, so the attach/detach controller
/// creates a VolumeAttachment for every node that mounts one of its volumes.
pub fn csi_driver() -> CSIDriver {
    CSIDriver {
        metadata: ObjectMeta {
            name: Some(CSI_DRIVER.to_owned()),
            ..Default::default()
        },
        spec: CSIDriverSpec {
            attach_required: Some(true),
            ..Default::default()
        },
    }
}

/// Whether the attacher should report `attachment` attached: it is for [`CSI_DRIVER`], not
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
    attachment.spec.attacher == CSI_DRIVER
        && attachment.metadata.deletion_timestamp.is_none()
        && !attachment.status.as_ref().is_some_and(|s| s.attached)
        && !volume.is_some_and(|v| never(&v.metadata))
        && !class.is_some_and(|c| never(&c.metadata))
}

/// The status the attacher writes: attached, with no error, and the node-side device the
/// kubelet would stage (the external attacher's `attachmentMetadata` from
/// `ControllerPublishVolume`).
pub fn attached_status(attachment: &VolumeAttachment) -> VolumeAttachmentStatus {
    let volume = attachment
        .spec
        .source
        .persistent_volume_name
        .clone()
        .unwrap_or_default();
    VolumeAttachmentStatus {
        attached: true,
        attachment_metadata: Some([("devicePath".to_owned(), format!("/dev/sim/{volume}"))].into()),
        ..Default::default()
    }
}

/// The simulated external attacher: watches VolumeAttachments and marks those of
/// [`CSI_DRIVER`] attached.
pub struct Attacher {
    client: Arc<dyn VolumeClient>,
    /// VolumeAttachments.
    attachments: Indexer<VolumeAttachment>,
    /// PersistentVolumes (the fault annotation).
    volumes: Indexer<PersistentVolume>,
    /// StorageClasses (the fault annotation).
    classes: Indexer<StorageClass>,
    /// VolumeAttachment names to look at.
    queue: RateLimitingQueue<String>,
    synced: Vec<Synced>,
}

impl std::fmt::Debug for Attacher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attacher").finish_non_exhaustive()
    }
}

/// Queues VolumeAttachments: each one added or changed, and all of a volume or class whose
/// annotations changed (a fault removed).
#[derive(Clone)]
struct AttacherHandlers {
    queue: RateLimitingQueue<String>,
    attachments: Indexer<VolumeAttachment>,
}

impl AttacherHandlers {
    fn attachment(&self, va: &VolumeAttachment) {
        if let Some(name) = va.metadata.name.clone() {
            self.queue.add(name);
        }
    }

    fn all(&self, volume: Option<&str>) {
        for va in self.attachments.list() {
            if volume.is_none() || va.spec.source.persistent_volume_name.as_deref() == volume {
                self.attachment(&va);
            }
        }
    }
}

impl ResourceEventHandler<VolumeAttachment> for AttacherHandlers {
    fn on_add(&self, va: Arc<VolumeAttachment>, _initial: bool) {
        self.attachment(&va);
    }
    fn on_update(&self, _old: Arc<VolumeAttachment>, new: Arc<VolumeAttachment>) {
        self.attachment(&new);
    }
    fn on_delete(&self, _obj: DeletedObject<VolumeAttachment>) {}
}

impl ResourceEventHandler<PersistentVolume> for AttacherHandlers {
    fn on_add(&self, _volume: Arc<PersistentVolume>, _initial: bool) {}
    fn on_update(&self, old: Arc<PersistentVolume>, new: Arc<PersistentVolume>) {
        if old.metadata.annotations != new.metadata.annotations {
            self.all(new.metadata.name.as_deref());
        }
    }
    fn on_delete(&self, _obj: DeletedObject<PersistentVolume>) {}
}

impl ResourceEventHandler<StorageClass> for AttacherHandlers {
    fn on_add(&self, _class: Arc<StorageClass>, _initial: bool) {}
    fn on_update(&self, old: Arc<StorageClass>, new: Arc<StorageClass>) {
        if old.metadata.annotations != new.metadata.annotations {
            self.all(None);
        }
    }
    fn on_delete(&self, _obj: DeletedObject<StorageClass>) {}
}

impl Attacher {
    /// An attacher over the factory's VolumeAttachment, volume and class informers.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(factory: &SharedInformerFactory, client: Arc<dyn VolumeClient>) -> Self {
        let attachments = factory.informer_for::<VolumeAttachment>();
        let volumes = factory.informer_for::<PersistentVolume>();
        let classes = factory.informer_for::<StorageClass>();
        let mut attacher = Self::with_caches(
            attachments.indexer().clone(),
            volumes.indexer().clone(),
            classes.indexer().clone(),
            client,
        );
        let handlers = AttacherHandlers {
            queue: attacher.queue.clone(),
            attachments: attacher.attachments.clone(),
        };
        attacher.synced = vec![
            watch("attacher", &attachments, handlers.clone()),
            watch("attacher", &volumes, handlers.clone()),
            watch("attacher", &classes, handlers),
        ];
        attacher
    }

    /// An attacher over bare caches (tests fill them and call [`Self::sync`]).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        attachments: Indexer<VolumeAttachment>,
        volumes: Indexer<PersistentVolume>,
        classes: Indexer<StorageClass>,
        client: Arc<dyn VolumeClient>,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: "sim-attacher".to_owned(),
                metrics: None,
            },
        );
        Self {
            client,
            attachments,
            volumes,
            classes,
            queue,
            synced: Vec::new(),
        }
    }

    /// Publishes the CSIDriver (retrying a few times), waits for the caches, then marks
    /// VolumeAttachments attached until `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let driver = csi_driver();
        if !super::ensure_with_retries("the simulated CSIDriver", &cancel, || {
            self.client.ensure_csi_driver(&driver)
        })
        .await
        {
            return;
        }
        let this = Arc::clone(&self);
        let sync = move |name: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&name).await }
        };
        run_controller(
            "sim-attacher",
            "the simulated CSI attacher",
            &self.queue,
            ErrorPolicy::new("attaching failed"),
            WORKERS,
            &cancel,
            || self.synced.iter().all(|s| s()),
            sync,
        )
        .await;
    }

    /// Marks VolumeAttachment `name` attached when [`should_attach`] says so.
    pub async fn sync(&self, name: &str) -> Result<(), Error> {
        let Some(va) = self.attachments.get_by_key(name) else {
            return Ok(());
        };
        let volume = va
            .spec
            .source
            .persistent_volume_name
            .as_deref()
            .and_then(|pv| self.volumes.get_by_key(pv));
        let class = volume
            .as_ref()
            .and_then(|pv| pv.spec.as_ref())
            .and_then(|s| s.storage_class_name.as_deref())
            .and_then(|c| self.classes.get_by_key(c));
        if !should_attach(&va, volume.as_deref(), class.as_deref()) {
            return Ok(());
        }
        let mut update = (*va).clone();
        update.status = Some(attached_status(&va));
        match self.client.update_volume_attachment_status(&update).await {
            Ok(_) => {
                tracing::debug!(attachment = name, node = va.spec.node_name, "attached");
                Ok(())
            }
            // Gone (detached meanwhile), or changed since the cache saw it (its update
            // event queues it again).
            Err(err) if err.is_not_found() || err.is_conflict() => Ok(()),
            Err(source) => Err(Error::Status {
                attachment: name.to_owned(),
                source,
            }),
        }
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
        assert_eq!(driver.metadata.name.as_deref(), Some(CSI_DRIVER));
        assert_eq!(driver.spec.attach_required, Some(true));
    }

    #[test]
    fn only_its_own_unattached_attachments_are_attached() {
        assert!(should_attach(&attachment(CSI_DRIVER), None, None));
        assert!(!should_attach(
            &attachment("other.csi.example.com"),
            None,
            None
        ));
        let mut done = attachment(CSI_DRIVER);
        done.status = Some(attached_status(&done));
        assert!(!should_attach(&done, None, None));
    }

    #[test]
    fn attach_never_on_the_volume_or_its_class_leaves_it_unattached() {
        let va = attachment(CSI_DRIVER);
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

    #[tokio::test]
    async fn the_loop_marks_its_attachments_attached_and_leaves_faulted_ones() {
        let client = Arc::new(super::super::FakeVolumes::new());
        let attachments = Indexer::new();
        let volumes = Indexer::new();
        let attacher = Attacher::with_caches(
            attachments.clone(),
            volumes.clone(),
            Indexer::new(),
            client.clone(),
        );
        attachments
            .add(Arc::new(attachment(CSI_DRIVER)))
            .expect("add");
        attacher.sync("csi-abc").await.expect("sync");
        let written = client.attachment("csi-abc").expect("status written");
        let status = written.status.expect("status");
        assert!(status.attached);
        assert_eq!(
            status
                .attachment_metadata
                .and_then(|m| m.get("devicePath").cloned())
                .as_deref(),
            Some("/dev/sim/pv-1")
        );

        let client = Arc::new(super::super::FakeVolumes::new());
        let attacher = Attacher::with_caches(
            attachments.clone(),
            volumes.clone(),
            Indexer::new(),
            client.clone(),
        );
        volumes
            .add(Arc::new(PersistentVolume {
                metadata: ObjectMeta {
                    name: Some("pv-1".into()),
                    ..annotated("never")
                },
                ..Default::default()
            }))
            .expect("add");
        attacher.sync("csi-abc").await.expect("sync");
        assert!(client.attachment("csi-abc").is_none());
        attacher
            .sync("missing")
            .await
            .expect("a gone attachment is fine");
    }
}
