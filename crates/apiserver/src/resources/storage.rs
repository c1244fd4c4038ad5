//! storage.k8s.io/v1 storageclasses, csidrivers, csinodes, csistoragecapacities, volumeattachments, volumeattributesclasses.
//!
//! Stored, defaulted and validated as upstream; no provisioner, attacher or CSI driver runs
//! in kcm, so nothing acts on them beyond the controllers that read them.

use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment, VolumeAttributesClass,
};

use crate::registry::generation::Generation;
use crate::registry::resource::ResourceDef;
use crate::registry::subresource::Subresource;
use crate::resources::csi::{self, CsiDriverStrategy, CsiNodeStrategy, CsiStorageCapacityStrategy};
use crate::resources::storage_class::{self, StorageClassStrategy};
use crate::resources::volume_attachment::VolumeAttachmentStrategy;
use crate::resources::volume_attributes_class::VolumeAttributesClassStrategy;
use crate::strategic_merge::kinds;
use crate::table::printers;

/// storage.k8s.io/v1 storageclasses.
pub static STORAGE_CLASSES: ResourceDef = ResourceDef::of::<StorageClass>()
    .short_names(&["sc"])
    .decode_with(storage_class::decode)
    .strategy(&StorageClassStrategy)
    .printer(printers::STORAGE_CLASS)
    .merge_schema(&kinds::METADATA_ONLY);

/// storage.k8s.io/v1 csidrivers.
pub static CSI_DRIVERS: ResourceDef = ResourceDef::of::<CSIDriver>()
    .generation(Generation::Spec)
    .decode_with(csi::decode_driver)
    .strategy(&CsiDriverStrategy)
    .printer(printers::CSI_DRIVER)
    .merge_schema(&kinds::METADATA_ONLY);

/// storage.k8s.io/v1 csinodes.
pub static CSI_NODES: ResourceDef = ResourceDef::of::<CSINode>()
    .strategy(&CsiNodeStrategy)
    .printer(printers::CSI_NODE)
    .merge_schema(&kinds::CSI_NODE);

/// storage.k8s.io/v1 csistoragecapacities.
pub static CSI_STORAGE_CAPACITIES: ResourceDef = ResourceDef::of::<CSIStorageCapacity>()
    .decode_with(csi::decode_capacity)
    .strategy(&CsiStorageCapacityStrategy)
    .printer(printers::CSI_STORAGE_CAPACITY)
    .merge_schema(&kinds::METADATA_ONLY);

/// storage.k8s.io/v1 volumeattachments.
pub static VOLUME_ATTACHMENTS: ResourceDef = ResourceDef::of::<VolumeAttachment>()
    .subresources(&[Subresource::Status])
    .strategy(&VolumeAttachmentStrategy)
    .printer(printers::VOLUME_ATTACHMENT)
    .merge_schema(&kinds::METADATA_ONLY);

/// storage.k8s.io/v1 volumeattributesclasses.
pub static VOLUME_ATTRIBUTES_CLASSES: ResourceDef = ResourceDef::of::<VolumeAttributesClass>()
    .short_names(&["vac"])
    .strategy(&VolumeAttributesClassStrategy)
    .printer(printers::VOLUME_ATTRIBUTES_CLASS)
    .merge_schema(&kinds::METADATA_ONLY);
