//! The simulated default StorageClass `standard` and the class facts the simulator reads.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The provisioner name of the simulated volumes (a StorageClass's `provisioner`).
pub const PROVISIONER: &str = "sim.kcm.io/hostpath";

/// The provisioner of classes whose volumes are all made by hand (local volumes): claims of
/// such a class bind only to existing volumes.
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// The name of the default class `kcm up` and `kcm sim` create.
pub const DEFAULT_CLASS: &str = "standard";

/// The annotation marking the cluster's default StorageClass.
pub use kcm_machinery::storage::volume::IS_DEFAULT_STORAGE_CLASS_ANNOTATION as IS_DEFAULT_CLASS_ANNOTATION;

/// `volumeBindingMode: WaitForFirstConsumer`: provision once a pod using the claim is
/// scheduled, on that pod's node.
pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// `volumeBindingMode: Immediate` (the API default): provision as soon as the claim exists.
pub const IMMEDIATE: &str = "Immediate";

/// The default StorageClass `standard`: provisioner [`PROVISIONER`], marked default, volumes
/// deleted with their claims, bound when the first consumer is scheduled (as kind's
/// `standard` class), and expandable (`allowVolumeExpansion`: the simulated resizer grows
/// its volumes).
pub fn default_storage_class() -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(DEFAULT_CLASS.to_owned()),
            annotations: Some(BTreeMap::from([(
                IS_DEFAULT_CLASS_ANNOTATION.to_owned(),
                "true".to_owned(),
            )])),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                "kcm-sim".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        provisioner: PROVISIONER.to_owned(),
        reclaim_policy: Some("Delete".to_owned()),
        volume_binding_mode: Some(WAIT_FOR_FIRST_CONSUMER.to_owned()),
        allow_volume_expansion: Some(true),
        ..StorageClass::default()
    }
}

/// The binding mode of `class`, `Immediate` when unset.
pub fn binding_mode(class: &StorageClass) -> &str {
    class.volume_binding_mode.as_deref().unwrap_or(IMMEDIATE)
}

#[cfg(test)]
mod tests {
    use kcm_machinery::storage::volume::is_default_class;

    use super::*;

    #[test]
    fn the_default_class_is_default_expandable_and_waits_for_its_consumer() {
        let standard = default_storage_class();
        assert!(is_default_class(&standard));
        assert_eq!(standard.allow_volume_expansion, Some(true));
        assert_eq!(binding_mode(&standard), WAIT_FOR_FIRST_CONSUMER);
        assert_eq!(binding_mode(&StorageClass::default()), IMMEDIATE);
    }
}
