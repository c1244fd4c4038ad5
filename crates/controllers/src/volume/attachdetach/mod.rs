//! The attach/detach controller's core (upstream `pkg/controller/volume/attachdetach`): which CSI volumes each node should have attached, which it has, and what the reconciler does about the difference.
//!
//! Where to start: [`cache`] holds the desired state of the world (volumes pods scheduled to a
//! node need, upstream `cache/desired_state_of_world.go`) and the actual one (volumes attached,
//! with the time detach was first wanted, upstream `cache/actual_state_of_world.go`);
//! [`reconciler::reconcile`] (upstream `reconciler/reconciler.go`) turns the two, the nodes'
//! `volumesInUse` and health into attach and detach operations; [`naming`] spells the
//! VolumeAttachment and unique volume names the CSI attacher uses. The informer-driven
//! controller and its registration are not here yet.

pub mod cache;
pub mod naming;
pub mod reconciler;

/// `persistentvolume-attach-detach-controller`, upstream's `names.PersistentVolumeAttachDetachController`.
pub const CONTROLLER_NAME: &str = "persistentvolume-attach-detach-controller";

/// `attachdetach` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "attachdetach";

/// The node annotation the kubelet sets when it leaves attach and detach to this controller.
pub const CONTROLLER_MANAGED_ATTACH_DETACH_ANNOTATION: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";
