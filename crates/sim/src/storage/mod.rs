//! Simulated storage: the default StorageClass `standard` and the external provisioner of its volumes (the PV controller binds them).
//!
//! Where to start: [`Provisioner`]. [`class::default_storage_class`] is what `kcm up` and
//! `kcm sim` create; [`client::VolumeClient`] is the seam the provisioner writes through.
//! [`Attacher`] is the simulated driver's external attacher: it publishes the CSIDriver and marks
//! the VolumeAttachments the attach/detach controller creates attached.

pub mod attacher;
pub mod class;
pub mod client;
pub mod provisioner;

pub use attacher::{Attacher, CSI_DRIVER};
pub use class::{DEFAULT_CLASS, PROVISIONER, default_storage_class};
pub use client::{FakeVolumes, KubeVolumeClient, VolumeClient};
pub use provisioner::{Item, Provisioner, StorageCaches};
