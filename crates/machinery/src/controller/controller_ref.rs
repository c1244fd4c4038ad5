//! Owner-reference helpers: finding an object's controller and building a controller reference.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::GroupVersionKind;

/// The owner reference with `controller: true`, if any, as apimachinery's
/// `metav1.GetControllerOfNoCopy`. At most one such reference is valid; the first is returned.
pub fn get_controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// A controller reference to `owner` of kind `gvk`, with `controller` and
/// `blockOwnerDeletion` set, as apimachinery's `metav1.NewControllerRef`.
pub fn new_controller_ref(owner: &ObjectMeta, gvk: &GroupVersionKind) -> OwnerReference {
    OwnerReference {
        api_version: gvk.api_version(),
        kind: gvk.kind.clone(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[cfg(test)]
mod tests {
    use kcm_testing::{MetaBuilder, ObjectMetaBuilder, OwnerRefBuilder, meta};

    use super::*;

    /// A reference to ReplicaSet `rs-<uid>`, controller flag unset.
    fn rs_ref(uid: &str) -> OwnerRefBuilder {
        kcm_testing::owner_ref("apps/v1", "ReplicaSet", &format!("rs-{uid}"), uid)
    }

    #[test]
    fn finds_the_controller_among_owners() {
        let owned = ObjectMetaBuilder::default()
            .owner(rs_ref("a"))
            .owner(rs_ref("b").controller(false))
            .owner(rs_ref("c").controller(true))
            .build();
        assert_eq!(get_controller_of(&owned).map(|r| r.uid.as_str()), Some("c"));
        let orphan = ObjectMetaBuilder::default()
            .owner(rs_ref("a").controller(false))
            .build();
        assert!(get_controller_of(&orphan).is_none());
        assert!(get_controller_of(&ObjectMeta::default()).is_none());
    }

    #[test]
    fn controller_ref_for_core_and_grouped_kinds() {
        let owner = meta("web").uid("123").build();
        let rs = new_controller_ref(&owner, &GroupVersionKind::gvk("apps", "v1", "ReplicaSet"));
        assert_eq!(rs.api_version, "apps/v1");
        assert_eq!(rs.kind, "ReplicaSet");
        assert_eq!((rs.name.as_str(), rs.uid.as_str()), ("web", "123"));
        assert_eq!(rs.controller, Some(true));
        assert_eq!(rs.block_owner_deletion, Some(true));
        let rc = new_controller_ref(
            &owner,
            &GroupVersionKind::gvk("", "v1", "ReplicationController"),
        );
        assert_eq!(rc.api_version, "v1");
    }
}
