//! VolumeAttributesClasses: [`volume_attributes_class`].

use std::sync::Arc;

use k8s_openapi::api::storage::v1::VolumeAttributesClass;

use crate::meta::MetaBuilder;

/// Builds a [`VolumeAttributesClass`]. Start with [`volume_attributes_class`].
#[derive(Clone, Debug, Default)]
pub struct VolumeAttributesClassBuilder {
    class: VolumeAttributesClass,
}

/// A class named `name`; no driver or parameters.
pub fn volume_attributes_class(name: &str) -> VolumeAttributesClassBuilder {
    VolumeAttributesClassBuilder::default().name(name)
}

impl VolumeAttributesClassBuilder {
    /// Sets `driverName`.
    pub fn driver(mut self, driver: &str) -> Self {
        self.class.driver_name = driver.into();
        self
    }

    /// Adds one parameter.
    pub fn parameter(mut self, key: &str, value: &str) -> Self {
        self.class
            .parameters
            .get_or_insert_default()
            .insert(key.into(), value.into());
        self
    }

    /// The class.
    pub fn build(self) -> VolumeAttributesClass {
        self.class
    }

    /// The class, shared as caches hand it out.
    pub fn arc(self) -> Arc<VolumeAttributesClass> {
        Arc::new(self.build())
    }
}

meta_builder!(VolumeAttributesClassBuilder => class);
from_builder!(VolumeAttributesClassBuilder => VolumeAttributesClass);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_and_parameters() {
        let c = volume_attributes_class("gold")
            .driver("sim.csi.kcm.io")
            .parameter("iops", "3000")
            .build();
        assert_eq!(c.metadata.name.as_deref(), Some("gold"));
        assert_eq!(c.driver_name, "sim.csi.kcm.io");
        assert_eq!(
            c.parameters.and_then(|p| p.get("iops").cloned()).as_deref(),
            Some("3000")
        );
    }
}
