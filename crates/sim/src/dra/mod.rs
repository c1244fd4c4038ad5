//! Simulated Dynamic Resource Allocation: the driver `gpu.sim.kcm.io` and what the scheduler and
//! the simulated kubelets share about ResourceClaims.
//!
//! Where to start: [`Driver`] publishes one ResourceSlice per simulated node
//! ([`node_resource_slice`]: pool = node name, devices `gpu-0..`) owned by its Node, and the
//! DeviceClass [`DRIVER`] ([`device_class`]) whose selector is `device.driver ==
//! "gpu.sim.kcm.io"`. [`cel`] evaluates the simple CEL selector forms it needs. The scheduler's
//! allocation lives in [`crate::scheduler::dynamic_resources`]; which claim a pod's
//! entry names and whether it is reserved for the pod come from [`kcm_machinery::dra`].

pub mod cel;
pub mod client;
pub mod driver;

pub use client::{DraClient, FakeDra, KubeDraClient};
pub use driver::{DEFAULT_DEVICES_PER_NODE, Driver, device_class, node_resource_slice, slice_name};

pub use kcm_machinery::dra::{DELETE_PROTECTION_FINALIZER, RESERVED_FOR_MAX_SIZE};

/// The simulated driver's name, also the name of its DeviceClass and its attribute domain.
pub const DRIVER: &str = "gpu.sim.kcm.io";
