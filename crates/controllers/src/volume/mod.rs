//! The storage controllers of kube-controller-manager (upstream's `pkg/controller/volume`) and what they share.
//!
//! Where to start: each controller has its module, laid out as the others in this crate.
//! - [`pvcprotection`]: `persistentvolumeclaim-protection-controller`, the
//!   `kubernetes.io/pvc-protection` finalizer, removed once no pod uses the claim.
//! - [`pvprotection`]: `persistentvolume-protection-controller`, the `kubernetes.io/pv-protection`
//!   finalizer, removed once the volume is not `Bound`.
//! - [`vacprotection`]: `volumeattributesclass-protection-controller`, the
//!   `kubernetes.io/vac-protection` finalizer, removed once no volume or claim names the class.
//! - [`ephemeral`]: `ephemeral-volume-controller`, the claim `<pod>-<volume>` of each generic
//!   ephemeral volume, owned by its pod.
//! - [`persistentvolume`]: `persistentvolume-binder-controller`, claims bound to volumes,
//!   external provisioners asked for new ones, released volumes reclaimed.
//! - [`expand`]: `persistentvolume-expander-controller`, claims whose request grew handed to
//!   their volume's external resizer.
//! - [`attachdetach`]: `persistentvolume-attach-detach-controller`, a VolumeAttachment for each
//!   CSI volume a pod on a controller-managed node needs, deleted once no pod does, and the
//!   nodes' `status.volumesAttached`.
//!
//! Shared: [`protection`] (the finalizers and when to add or remove one, upstream's
//! `protectionutil`), [`common`] (the pod-to-claim index and the generic ephemeral volume
//! naming rules, upstream's `volume/common` and `component-helpers/storage/ephemeral`) and
//! [`client`] (the writes these controllers make, with one recording fake for their tests).

pub mod attachdetach;
pub mod client;
pub mod common;
pub mod ephemeral;
pub mod expand;
pub mod persistentvolume;
pub mod protection;
pub mod pvcprotection;
pub mod pvprotection;
#[cfg(test)]
mod test_support;
pub mod vacprotection;
