//! The simulated default StorageClass `standard` and how claims find their class.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
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
pub const IS_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

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

/// Whether `class` is marked default.
pub fn is_default(class: &StorageClass) -> bool {
    class
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(IS_DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// The class of `claim`: the one it names, or (naming none) the default class, as the
/// `DefaultStorageClass` admission plugin would have set it. When several are default, the
/// newest wins (then the name), as upstream's `GetDefaultClass`.
pub fn class_of<'a>(
    claim: &PersistentVolumeClaim,
    classes: &'a [Arc<StorageClass>],
) -> Option<&'a Arc<StorageClass>> {
    match claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
    {
        Some("") => None,
        Some(name) => classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name)),
        None => classes.iter().filter(|c| is_default(c)).max_by(|a, b| {
            let t = |c: &StorageClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
            t(a).cmp(&t(b))
                .then_with(|| b.metadata.name.cmp(&a.metadata.name))
        }),
    }
}

/// The binding mode of `class`, `Immediate` when unset.
pub fn binding_mode(class: &StorageClass) -> &str {
    class.volume_binding_mode.as_deref().unwrap_or(IMMEDIATE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(class: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            spec: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimSpec {
                storage_class_name: class.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn claims_find_their_class() {
        let standard = Arc::new(default_storage_class());
        let mut fast = default_storage_class();
        fast.metadata.name = Some("fast".into());
        fast.metadata.annotations = None;
        let classes = vec![standard, Arc::new(fast)];
        let name = |c: Option<&Arc<StorageClass>>| c.and_then(|c| c.metadata.name.clone());
        assert_eq!(
            name(class_of(&claim(None), &classes)).as_deref(),
            Some("standard")
        );
        assert_eq!(
            name(class_of(&claim(Some("fast")), &classes)).as_deref(),
            Some("fast")
        );
        assert_eq!(
            name(class_of(&claim(Some("")), &classes)),
            None,
            "explicitly no class"
        );
        assert_eq!(name(class_of(&claim(Some("gone")), &classes)), None);
        assert!(is_default(&classes[0]));
        assert_eq!(classes[0].allow_volume_expansion, Some(true));
        assert_eq!(binding_mode(&classes[0]), WAIT_FOR_FIRST_CONSUMER);
        assert_eq!(binding_mode(&StorageClass::default()), IMMEDIATE);
    }
}
