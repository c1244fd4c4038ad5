//! The attach/detach controller's core (upstream `pkg/controller/volume/attachdetach`): which CSI volumes each node should have attached, which it has, and what the reconciler does about the difference.
//!
//! Where to start: [`cache`] holds the desired state of the world (volumes pods scheduled to a
//! node need, upstream `cache/desired_state_of_world.go`) and the actual one (volumes attached,
//! with the time detach was first wanted, upstream `cache/actual_state_of_world.go`);
//! [`reconciler::reconcile`] (upstream `reconciler/reconciler.go`) turns the two, the nodes'
//! `volumesInUse` and health into attach and detach operations; [`naming`] spells the
//! VolumeAttachment and unique volume names the CSI attacher uses.
//! [`AttachDetachController`] (upstream `attach_detach_controller.go`) fills the two states from
//! the pod, node, claim, volume, VolumeAttachment and CSIDriver informers, runs the reconciler
//! every 100 ms (creating and deleting VolumeAttachments, waiting for the external attacher),
//! keeps the nodes' `status.volumesAttached` in step and re-checks attached volumes every
//! `--attach-detach-reconcile-sync-period`; [`client`] is its API seam.
//!
//! [`multi_attach`] keeps a volume that may be attached to one node only (access modes only
//! `ReadWriteOnce` / `ReadWriteOncePod`) off a second node while the first holds it, telling
//! the waiting pods why; [`metrics`] exposes upstream's `attachdetach_controller_*` families.
//!
//! kcm models no in-tree volume plugins and no CSI migration: only PersistentVolumes with
//! `spec.csi` whose driver needs attaching (no CSIDriver object, or `attachRequired` not false)
//! are attached, as upstream's CSI plugin decides with `CanAttach`.

pub mod cache;
pub mod client;
mod controller;
pub mod metrics;
pub mod multi_attach;
pub mod naming;
pub mod reconciler;

pub use controller::{
    AttachDetachCaches, AttachDetachController, AttachDetachControllerOptions,
    AttachDetachEventHandlers, CSI_TIMEOUT, EVENT_COMPONENT, FAILED_ATTACH_VOLUME, QUEUE_NAME,
    RECONCILER_LOOP_PERIOD, SUCCESSFUL_ATTACH_VOLUME,
};

/// `persistentvolume-attach-detach-controller`, upstream's `names.PersistentVolumeAttachDetachController`.
pub const CONTROLLER_NAME: &str = "persistentvolume-attach-detach-controller";

/// `attachdetach` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "attachdetach";

/// The node annotation the kubelet sets when it leaves attach and detach to this controller.
pub const CONTROLLER_MANAGED_ATTACH_DETACH_ANNOTATION: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";
