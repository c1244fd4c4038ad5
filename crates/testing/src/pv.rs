//! PersistentVolumes: [`pv`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeSpec, PersistentVolumeStatus,
};

use crate::meta::{MetaBuilder, quantities};

/// Builds a [`PersistentVolume`]. Start with [`pv`].
#[derive(Clone, Debug, Default)]
pub struct PvBuilder {
    volume: PersistentVolume,
}

/// A volume named `name`; no spec or status.
pub fn pv(name: &str) -> PvBuilder {
    PvBuilder::default().name(name)
}

impl PvBuilder {
    fn spec_mut(&mut self) -> &mut PersistentVolumeSpec {
        self.volume.spec.get_or_insert_default()
    }

    /// Sets `spec.capacity.storage`.
    pub fn capacity(mut self, size: &str) -> Self {
        self.spec_mut().capacity = Some(quantities(&[("storage", size)]));
        self
    }

    /// Sets `spec.claimRef` to claim `namespace/name` with `uid`.
    pub fn claim_ref(mut self, namespace: &str, name: &str, uid: &str) -> Self {
        self.spec_mut().claim_ref = Some(ObjectReference {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..ObjectReference::default()
        });
        self
    }

    /// Sets `spec.volumeAttributesClassName`.
    pub fn volume_attributes_class(mut self, class: &str) -> Self {
        self.spec_mut().volume_attributes_class_name = Some(class.into());
        self
    }

    /// Sets `status.phase` (`Pending`, `Available`, `Bound`, `Released`, `Failed`).
    pub fn phase(mut self, phase: &str) -> Self {
        self.volume
            .status
            .get_or_insert_with(PersistentVolumeStatus::default)
            .phase = Some(phase.into());
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut PersistentVolume)) -> Self {
        f(&mut self.volume);
        self
    }

    /// The volume.
    pub fn build(self) -> PersistentVolume {
        self.volume
    }

    /// The volume, shared as caches hand it out.
    pub fn arc(self) -> Arc<PersistentVolume> {
        Arc::new(self.build())
    }
}

meta_builder!(PvBuilder => volume);
from_builder!(PvBuilder => PersistentVolume);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_claim_ref_class_and_phase() {
        let v = pv("pv-1")
            .capacity("1Gi")
            .claim_ref("ns", "data", "u1")
            .volume_attributes_class("gold")
            .phase("Bound")
            .build();
        let spec = v.spec.unwrap_or_default();
        assert_eq!(
            spec.capacity.and_then(|c| c.get("storage").cloned()),
            Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                "1Gi".into()
            ))
        );
        let claim = spec.claim_ref.unwrap_or_default();
        assert_eq!(claim.name.as_deref(), Some("data"));
        assert_eq!(claim.uid.as_deref(), Some("u1"));
        assert_eq!(spec.volume_attributes_class_name.as_deref(), Some("gold"));
        assert_eq!(v.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    }
}
