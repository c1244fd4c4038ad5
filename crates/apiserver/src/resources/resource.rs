//! resource.k8s.io/v1 deviceclasses, resourceclaims (+status), resourceclaimtemplates, resourceslices: Dynamic Resource Allocation's API, served by default since v1.34.
//!
//! Stored with upstream's generations, printers and field selectors, device taints defaulted
//! with a `timeAdded`; not validated beyond object metadata (upstream's DRA validation, device
//! selectors' CEL included, is not done). The resourceclaim and device taint eviction
//! controllers, the simulated scheduler's DynamicResources plugin and the simulated driver
//! `gpu.sim.kcm.io` (kcm-sim) act on them.

use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};

use crate::registry::generation::Generation;
use crate::registry::resource::{ResourceDef, SelectableField};
use crate::registry::subresource::Subresource;
use crate::resources::resource_claim::ResourceClaimStrategy;
use crate::resources::resource_slice::ResourceSliceStrategy;
use crate::strategic_merge::kinds;
use crate::table::printers;

/// resource.k8s.io/v1 deviceclasses.
pub static DEVICE_CLASSES: ResourceDef = ResourceDef::of::<DeviceClass>()
    .generation(Generation::Spec)
    .printer(printers::DEVICE_CLASS)
    .merge_schema(&kinds::METADATA_ONLY);

/// resource.k8s.io/v1 resourceclaims.
pub static RESOURCE_CLAIMS: ResourceDef = ResourceDef::of::<ResourceClaim>()
    .subresources(&[Subresource::Status])
    .strategy(&ResourceClaimStrategy)
    .printer(printers::RESOURCE_CLAIM)
    .merge_schema(&kinds::METADATA_ONLY);

/// resource.k8s.io/v1 resourceclaimtemplates.
pub static RESOURCE_CLAIM_TEMPLATES: ResourceDef = ResourceDef::of::<ResourceClaimTemplate>()
    .printer(printers::RESOURCE_CLAIM_TEMPLATE)
    .merge_schema(&kinds::METADATA_ONLY);

/// resource.k8s.io/v1 resourceslices, selectable by node and driver (upstream's
/// `GetAttrs`: kubelets list their node's slices).
pub static RESOURCE_SLICES: ResourceDef = ResourceDef::of::<ResourceSlice>()
    .generation(Generation::Spec)
    .strategy(&ResourceSliceStrategy)
    .fields(&[
        SelectableField::string("spec.nodeName", "/spec/nodeName"),
        SelectableField::string("spec.driver", "/spec/driver"),
    ])
    .printer(printers::RESOURCE_SLICE)
    .merge_schema(&kinds::METADATA_ONLY);
