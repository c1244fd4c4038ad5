//! Deltas: the changes a DeltaFIFO accumulates per object, and deletion tombstones.
//!
//! A delete handler receives a [`DeletedObject`]: the object, or a tombstone when the deletion
//! was only inferred from a relist. Handlers never match on it by hand: [`DeletedObject::object`]
//! is the last known state either way (client-go's `obj.(*T)` or `tombstone.Obj.(*T)`), and
//! [`DeletedObject::key`] the cache key (client-go's `DeletionHandlingMetaNamespaceKeyFunc`).

use std::sync::Arc;

use kube::Resource;

use super::keys::{self, meta_namespace_key};

/// The kind of a [`Delta`], as client-go's `DeltaType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was created (a watch `ADDED` event).
    Added,
    /// The object changed (a watch `MODIFIED` event).
    Updated,
    /// The object was deleted (a watch `DELETED` event, or a relist that no longer has it).
    Deleted,
    /// The object was in a relist; it may or may not have changed.
    Replaced,
    /// A periodic resync re-delivered the cached object.
    Sync,
}

/// One change to one object, and the object's state after it (for a deletion, the last
/// state known), as client-go's `Delta`. Only a deletion can carry a tombstone.
#[derive(Debug)]
pub enum Delta<K> {
    /// The object was created.
    Added(Arc<K>),
    /// The object changed.
    Updated(Arc<K>),
    /// The object was deleted; a tombstone when the deletion was inferred from a relist.
    Deleted(DeletedObject<K>),
    /// The object was listed by a relist.
    Replaced(Arc<K>),
    /// A periodic resync re-delivered the cached object.
    Sync(Arc<K>),
}

// Manual impls: derive would require `K: Clone`/`K: PartialEq`.
impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(o) => Self::Added(o.clone()),
            Self::Updated(o) => Self::Updated(o.clone()),
            Self::Deleted(o) => Self::Deleted(o.clone()),
            Self::Replaced(o) => Self::Replaced(o.clone()),
            Self::Sync(o) => Self::Sync(o.clone()),
        }
    }
}

impl<K: PartialEq> PartialEq for Delta<K> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Added(a), Self::Added(b))
            | (Self::Updated(a), Self::Updated(b))
            | (Self::Replaced(a), Self::Replaced(b))
            | (Self::Sync(a), Self::Sync(b)) => a == b,
            (Self::Deleted(a), Self::Deleted(b)) => a == b,
            _ => false,
        }
    }
}

impl<K> Delta<K> {
    /// The kind of change.
    pub fn delta_type(&self) -> DeltaType {
        match self {
            Self::Added(_) => DeltaType::Added,
            Self::Updated(_) => DeltaType::Updated,
            Self::Deleted(_) => DeltaType::Deleted,
            Self::Replaced(_) => DeltaType::Replaced,
            Self::Sync(_) => DeltaType::Sync,
        }
    }

    /// The object's state after the change; for a tombstone, the last state known.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Added(o) | Self::Updated(o) | Self::Replaced(o) | Self::Sync(o) => o,
            Self::Deleted(d) => d.object(),
        }
    }
}

/// All changes to one object since it was last popped, oldest first, as client-go's
/// `Deltas`. A DeltaFIFO never holds an empty one.
pub type Deltas<K> = Vec<Delta<K>>;

/// Placed in a DeltaFIFO when an object was deleted but the watch event for the deletion was
/// missed (found out by a relist), as client-go's `DeletedFinalStateUnknown`. `obj` is the
/// last state the cache knew, which may be stale.
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The key the object was cached under.
    pub key: String,
    /// The last known state of the object.
    ///
    /// client-go allows this to be nil when the known-objects store lost the key between
    /// listing and reading it; here the store is read under the queue's lock, so the object is
    /// always known.
    pub obj: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            obj: self.obj.clone(),
        }
    }
}

impl<K: PartialEq> PartialEq for DeletedFinalStateUnknown<K> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.obj == other.obj
    }
}

/// What a delete handler receives: the deleted object, or a tombstone when the deletion was
/// inferred from a relist (client-go hands `interface{}` that may be a
/// `DeletedFinalStateUnknown`).
#[derive(Debug)]
pub enum DeletedObject<K> {
    /// The final state of the deleted object, from the watch event.
    Object(Arc<K>),
    /// The deletion was missed; this carries the key and the last known state.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(o) => Self::Object(o.clone()),
            Self::Tombstone(t) => Self::Tombstone(t.clone()),
        }
    }
}

impl<K: PartialEq> PartialEq for DeletedObject<K> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Object(a), Self::Object(b)) => a == b,
            (Self::Tombstone(a), Self::Tombstone(b)) => a == b,
            _ => false,
        }
    }
}

impl<K> DeletedObject<K> {
    /// The deleted object, or the tombstone's last known state.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Object(o) => o,
            Self::Tombstone(t) => &t.obj,
        }
    }

    /// Consumes `self`, returning the deleted object or the tombstone's last known state.
    pub fn into_object(self) -> Arc<K> {
        match self {
            Self::Object(o) => o,
            Self::Tombstone(t) => t.obj,
        }
    }

    /// True when the deletion was inferred from a relist.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Tombstone(_))
    }
}

impl<K: Resource> DeletedObject<K> {
    /// The key the object had in the informer caches, as client-go's
    /// `DeletionHandlingMetaNamespaceKeyFunc`: a tombstone's stored key (its last known state
    /// may be stale), else the object's `namespace/name`.
    pub fn key(&self) -> keys::Result<String> {
        match self {
            Self::Object(obj) => meta_namespace_key(obj.as_ref()),
            Self::Tombstone(tombstone) => Ok(tombstone.key.clone()),
        }
    }
}

/// [`DeletedObject::key`] as a free function, under client-go's name
/// (`DeletionHandlingMetaNamespaceKeyFunc`).
pub fn deletion_handling_key<K: Resource>(obj: &DeletedObject<K>) -> keys::Result<String> {
    obj.key()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn cm(namespace: &str, name: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        })
    }

    #[test]
    fn object_and_key_of_a_deletion_and_of_a_tombstone() {
        let obj = cm("ns", "a");
        let deleted = DeletedObject::Object(obj.clone());
        assert_eq!(deleted.key().as_deref(), Ok("ns/a"));
        assert_eq!(deletion_handling_key(&deleted).as_deref(), Ok("ns/a"));
        assert!(Arc::ptr_eq(deleted.object(), &obj));
        assert!(!deleted.is_tombstone());

        // A tombstone keeps the key it was stored under, even if its last state says otherwise.
        let tombstone = DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: "other/b".into(),
            obj: obj.clone(),
        });
        assert_eq!(tombstone.key().as_deref(), Ok("other/b"));
        assert!(Arc::ptr_eq(tombstone.object(), &obj));
        assert!(tombstone.is_tombstone());
        assert!(Arc::ptr_eq(&tombstone.into_object(), &obj));
    }

    #[test]
    fn an_object_without_a_name_has_no_key() {
        let nameless = Arc::new(ConfigMap::default());
        assert!(DeletedObject::Object(nameless).key().is_err());
    }
}
