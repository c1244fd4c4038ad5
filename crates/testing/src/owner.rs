//! Owner references: [`owner_ref`] from parts, [`owner_ref_of`] / [`controller_ref_of`] from an object.

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// Builds an [`OwnerReference`]. Start with [`owner_ref`], [`owner_ref_of`] or
/// [`controller_ref_of`]; `OwnerRefBuilder::default()` has every field empty.
#[derive(Clone, Debug, Default)]
pub struct OwnerRefBuilder {
    owner: OwnerReference,
}

/// A reference to `kind` `name` (`uid`) of `api_version`; neither controller nor blocking.
pub fn owner_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerRefBuilder {
    OwnerRefBuilder::default()
        .api_version(api_version)
        .kind(kind)
        .name(name)
        .uid(uid)
}

/// A reference to `obj` (its type's apiVersion and kind, its name and UID, empty where
/// unset); neither controller nor blocking.
pub fn owner_ref_of<K: Metadata<Ty = ObjectMeta>>(obj: &K) -> OwnerRefBuilder {
    let m = obj.metadata();
    owner_ref(
        K::API_VERSION,
        K::KIND,
        m.name.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default(),
    )
}

/// The controller reference a controller stamps on what it creates from `obj`: as
/// apimachinery's `metav1.NewControllerRef`, `controller` and `blockOwnerDeletion` both true.
pub fn controller_ref_of<K: Metadata<Ty = ObjectMeta>>(obj: &K) -> OwnerReference {
    owner_ref_of(obj)
        .controller(true)
        .block_owner_deletion(true)
        .build()
}

impl OwnerRefBuilder {
    /// Sets `apiVersion`.
    pub fn api_version(mut self, api_version: &str) -> Self {
        self.owner.api_version = api_version.to_owned();
        self
    }

    /// Sets `kind`.
    pub fn kind(mut self, kind: &str) -> Self {
        self.owner.kind = kind.to_owned();
        self
    }

    /// Sets `name`.
    pub fn name(mut self, name: &str) -> Self {
        self.owner.name = name.to_owned();
        self
    }

    /// Sets `uid`.
    pub fn uid(mut self, uid: &str) -> Self {
        self.owner.uid = uid.to_owned();
        self
    }

    /// Sets `controller`.
    pub fn controller(mut self, controller: bool) -> Self {
        self.owner.controller = Some(controller);
        self
    }

    /// Sets `blockOwnerDeletion`.
    pub fn block_owner_deletion(mut self, block: bool) -> Self {
        self.owner.block_owner_deletion = Some(block);
        self
    }

    /// The reference.
    pub fn build(self) -> OwnerReference {
        self.owner
    }
}

from_builder!(OwnerRefBuilder => OwnerReference);

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;

    use super::*;

    #[test]
    fn owner_ref_leaves_the_flags_unset() {
        assert_eq!(
            owner_ref("v1", "ReplicationController", "rc", "u1").build(),
            OwnerReference {
                api_version: "v1".into(),
                kind: "ReplicationController".into(),
                name: "rc".into(),
                uid: "u1".into(),
                controller: None,
                block_owner_deletion: None,
            }
        );
    }

    #[test]
    fn controller_ref_of_names_the_object_and_sets_both_flags() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some("uid-web".into()),
                ..ObjectMeta::default()
            },
            ..ReplicaSet::default()
        };
        assert_eq!(
            controller_ref_of(&rs),
            OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "web".into(),
                uid: "uid-web".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }
        );
    }

    #[test]
    fn default_is_empty() {
        assert_eq!(
            OwnerRefBuilder::default().build(),
            OwnerReference::default()
        );
    }
}
