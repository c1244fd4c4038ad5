//! PersistentVolumeClaims (and StatefulSet claim templates): [`pvc`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ModifyVolumeStatus, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, VolumeResourceRequirements,
};

use crate::meta::{MetaBuilder, quantities};

/// Builds a [`PersistentVolumeClaim`]. Start with [`pvc`].
#[derive(Clone, Debug, Default)]
pub struct PvcBuilder {
    claim: PersistentVolumeClaim,
}

/// A claim named `name`; no namespace, spec or status.
pub fn pvc(name: &str) -> PvcBuilder {
    PvcBuilder::default().name(name)
}

impl PvcBuilder {
    fn spec_mut(&mut self) -> &mut PersistentVolumeClaimSpec {
        self.claim.spec.get_or_insert_default()
    }

    fn status_mut(&mut self) -> &mut PersistentVolumeClaimStatus {
        self.claim.status.get_or_insert_default()
    }

    /// Requests `size` of storage (`ReadWriteOnce`).
    pub fn storage(mut self, size: &str) -> Self {
        let spec = self.spec_mut();
        spec.access_modes = Some(vec!["ReadWriteOnce".into()]);
        spec.resources = Some(VolumeResourceRequirements {
            requests: Some(quantities(&[("storage", size)])),
            ..Default::default()
        });
        self
    }

    /// Sets `spec.storageClassName`.
    pub fn storage_class(mut self, class: &str) -> Self {
        self.spec_mut().storage_class_name = Some(class.into());
        self
    }

    /// Sets `spec.volumeName` and `status.phase` `Bound`.
    pub fn bound_to(mut self, volume: &str) -> Self {
        self.spec_mut().volume_name = Some(volume.into());
        self.claim.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        self
    }

    /// Sets `status.phase`.
    pub fn phase(mut self, phase: &str) -> Self {
        self.status_mut().phase = Some(phase.into());
        self
    }

    /// Sets `spec.volumeAttributesClassName`.
    pub fn volume_attributes_class(mut self, class: &str) -> Self {
        self.spec_mut().volume_attributes_class_name = Some(class.into());
        self
    }

    /// Sets `status.currentVolumeAttributesClassName`.
    pub fn current_volume_attributes_class(mut self, class: &str) -> Self {
        self.status_mut().current_volume_attributes_class_name = Some(class.into());
        self
    }

    /// Sets `status.modifyVolumeStatus` to a modification towards `class` (`InProgress`).
    pub fn target_volume_attributes_class(mut self, class: &str) -> Self {
        self.status_mut().modify_volume_status = Some(ModifyVolumeStatus {
            status: "InProgress".into(),
            target_volume_attributes_class_name: Some(class.into()),
        });
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut PersistentVolumeClaim)) -> Self {
        f(&mut self.claim);
        self
    }

    /// The claim.
    pub fn build(self) -> PersistentVolumeClaim {
        self.claim
    }

    /// The claim, shared as caches hand it out.
    pub fn arc(self) -> Arc<PersistentVolumeClaim> {
        Arc::new(self.build())
    }
}

meta_builder!(PvcBuilder => claim);
from_builder!(PvcBuilder => PersistentVolumeClaim);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_and_binding() {
        let c = pvc("www")
            .namespace("ns")
            .storage("1Gi")
            .storage_class("standard")
            .bound_to("pv-1")
            .build();
        let spec = c.spec.unwrap_or_default();
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
        assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
        assert_eq!(spec.volume_name.as_deref(), Some("pv-1"));
        assert_eq!(c.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    }

    #[test]
    fn volume_attributes_classes_in_spec_and_status() {
        let c = pvc("data")
            .volume_attributes_class("gold")
            .current_volume_attributes_class("silver")
            .target_volume_attributes_class("gold")
            .phase("Pending")
            .build();
        assert_eq!(
            c.spec
                .and_then(|s| s.volume_attributes_class_name)
                .as_deref(),
            Some("gold")
        );
        let status = c.status.unwrap_or_default();
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert_eq!(
            status.current_volume_attributes_class_name.as_deref(),
            Some("silver")
        );
        assert_eq!(
            status
                .modify_volume_status
                .and_then(|m| m.target_volume_attributes_class_name)
                .as_deref(),
            Some("gold")
        );
    }
}
