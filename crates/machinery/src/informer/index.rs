//! Index functions and the inverted indices a cache keeps for them, as client-go's `index.go`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::Resource;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an index operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An index with this name is already registered.
    #[error("indexer conflict: an index named {names:?} already exists")]
    Conflict {
        /// The names registered twice, sorted.
        names: Vec<String>,
    },
    /// No index function is registered under this name.
    #[error("index with name {name:?} does not exist")]
    NotFound {
        /// The name asked for.
        name: String,
    },
}

/// Computes the indexed values of an object (zero, one or several), as client-go's
/// `IndexFunc`. Must be deterministic: the same object always yields the same values.
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Named index functions, as client-go's `Indexers`.
pub type Indexers<K> = HashMap<String, IndexFunc<K>>;

/// The name of the built-in index by namespace, as client-go's `NamespaceIndex`.
pub const NAMESPACE_INDEX: &str = "namespace";

/// Indexes an object by its namespace (`""` for cluster-scoped objects), as client-go's
/// `MetaNamespaceIndexFunc`.
pub fn meta_namespace_index<K: Resource>(obj: &K) -> Vec<String> {
    vec![obj.meta().namespace.clone().unwrap_or_default()]
}

/// The built-in indexers every informer cache starts with: [`NAMESPACE_INDEX`].
pub fn namespace_indexers<K: Resource + 'static>() -> Indexers<K> {
    let mut indexers: Indexers<K> = HashMap::new();
    indexers.insert(
        NAMESPACE_INDEX.to_owned(),
        Arc::new(meta_namespace_index::<K>),
    );
    indexers
}

/// Maps an indexed value to the keys of the objects that have it, as client-go's `Index`.
/// Invariant: no value maps to an empty set (emptied sets are removed, so churn does not leak).
pub(crate) type Index = HashMap<String, HashSet<Arc<str>>>;

/// The index functions of a cache and the indices they maintain, as client-go's `storeIndex`.
pub(crate) struct StoreIndex<K> {
    /// Registered index functions by name.
    indexers: Indexers<K>,
    /// For every name in `indexers`, its index over the cache's current objects. A name may be
    /// missing until the first object is indexed under it; missing means empty.
    indices: HashMap<String, Index>,
}

impl<K> StoreIndex<K> {
    pub(crate) fn new(indexers: Indexers<K>) -> Self {
        Self {
            indexers,
            indices: HashMap::new(),
        }
    }

    /// Drops every index entry, keeping the functions.
    pub(crate) fn reset(&mut self) {
        self.indices.clear();
    }

    pub(crate) fn indexers(&self) -> &Indexers<K> {
        &self.indexers
    }

    /// Registers more index functions; a name already registered is an error and nothing is
    /// added. The caller indexes existing objects with [`Self::update_single_index`].
    pub(crate) fn add_indexers(&mut self, new: &Indexers<K>) -> Result<()> {
        let mut conflicts: Vec<String> = new
            .keys()
            .filter(|name| self.indexers.contains_key(*name))
            .cloned()
            .collect();
        if !conflicts.is_empty() {
            conflicts.sort();
            return Err(Error::Conflict { names: conflicts });
        }
        for (name, func) in new {
            self.indexers.insert(name.clone(), func.clone());
        }
        Ok(())
    }

    /// Moves `key` from the index values of `old` to those of `new` in every index, as
    /// client-go's `updateIndices`. `old` is `None` for an add, `new` is `None` for a delete.
    pub(crate) fn update_indices(&mut self, old: Option<&K>, new: Option<&K>, key: &Arc<str>) {
        let Self { indexers, indices } = self;
        for (name, func) in indexers.iter() {
            update_index(indices, name, func, old, new, key);
        }
    }

    /// As [`Self::update_indices`] for the one index `name` (used when an index is added to a
    /// populated cache).
    pub(crate) fn update_single_index(&mut self, name: &str, new: &K, key: &Arc<str>) {
        let Self { indexers, indices } = self;
        if let Some(func) = indexers.get(name) {
            update_index(indices, name, func, None, Some(new), key);
        }
    }

    /// The keys with `value` in index `name`: an error if there is no such index, empty if no
    /// object has the value.
    pub(crate) fn keys_for(&self, name: &str, value: &str) -> Result<Option<&HashSet<Arc<str>>>> {
        if !self.indexers.contains_key(name) {
            return Err(Error::NotFound {
                name: name.to_owned(),
            });
        }
        Ok(self.indices.get(name).and_then(|index| index.get(value)))
    }

    /// The index function `name`, or an error.
    pub(crate) fn func(&self, name: &str) -> Result<&IndexFunc<K>> {
        self.indexers.get(name).ok_or_else(|| Error::NotFound {
            name: name.to_owned(),
        })
    }

    /// Every value index `name` currently holds (empty for an unknown index, as client-go's
    /// `ListIndexFuncValues`).
    pub(crate) fn values(&self, name: &str) -> Vec<String> {
        self.indices
            .get(name)
            .map(|index| index.keys().cloned().collect())
            .unwrap_or_default()
    }
}

fn update_index<K>(
    indices: &mut HashMap<String, Index>,
    name: &str,
    func: &IndexFunc<K>,
    old: Option<&K>,
    new: Option<&K>,
    key: &Arc<str>,
) {
    let old_values = old.map(|o| func(o)).unwrap_or_default();
    let new_values = new.map(|n| func(n)).unwrap_or_default();
    // The common case: one value that did not change.
    if old_values.len() == 1 && new_values.len() == 1 && old_values[0] == new_values[0] {
        return;
    }
    if !indices.contains_key(name) {
        indices.insert(name.to_owned(), Index::new());
    }
    let Some(index) = indices.get_mut(name) else {
        return;
    };
    for value in &old_values {
        if let Some(set) = index.get_mut(value.as_str()) {
            set.remove(key);
            if set.is_empty() {
                index.remove(value.as_str());
            }
        }
    }
    for value in new_values {
        index.entry(value).or_default().insert(key.clone());
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kcm_testing::MetaBuilder;

    use super::*;

    fn pod(ns: &str, name: &str) -> Pod {
        kcm_testing::pod(name).namespace(ns).build()
    }

    #[test]
    fn namespace_index_func_returns_the_namespace() {
        assert_eq!(meta_namespace_index(&pod("ns", "a")), vec!["ns".to_owned()]);
        let mut cluster = pod("", "a");
        cluster.metadata.namespace = None;
        assert_eq!(meta_namespace_index(&cluster), vec![String::new()]);
    }

    #[test]
    fn emptied_index_values_are_removed() {
        let mut index = StoreIndex::new(namespace_indexers::<Pod>());
        let key: Arc<str> = Arc::from("ns/a");
        let p = pod("ns", "a");
        index.update_indices(None, Some(&p), &key);
        assert_eq!(index.values(NAMESPACE_INDEX), vec!["ns".to_owned()]);
        index.update_indices(Some(&p), None, &key);
        assert!(index.values(NAMESPACE_INDEX).is_empty());
        assert!(
            index
                .keys_for(NAMESPACE_INDEX, "ns")
                .expect("index exists")
                .is_none()
        );
    }

    #[test]
    fn add_indexers_rejects_conflicts() {
        let mut index = StoreIndex::new(namespace_indexers::<Pod>());
        let err = index
            .add_indexers(&namespace_indexers::<Pod>())
            .expect_err("conflict");
        assert_eq!(
            err,
            Error::Conflict {
                names: vec![NAMESPACE_INDEX.to_owned()]
            }
        );
        assert!(matches!(
            index.keys_for("nope", "x"),
            Err(Error::NotFound { .. })
        ));
    }
}
