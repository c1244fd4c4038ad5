//! The informer cache: objects keyed `namespace/name` with named indices, as client-go's `cache`.

use std::fmt;
use std::sync::Arc;

use kube::Resource;

use super::delta_fifo::KnownObjects;
use super::index::{self, Indexers, namespace_indexers};
use super::keys::{self, meta_namespace_key};
use super::thread_safe_store::ThreadSafeStore;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a cache operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The object has no valid key.
    #[error("cache: {0}")]
    Key(#[from] keys::Error),
    /// An index operation failed.
    #[error("cache: {0}")]
    Index(#[from] index::Error),
}

/// A thread-safe cache of `Arc<K>` keyed by [`meta_namespace_key`], with named indices, as
/// client-go's `Indexer` (and, without extra indices, its `Store`).
///
/// Cheap to clone: clones share one cache. Every read returns `Arc<K>` handles to the cached
/// objects; nothing is deep-copied and nothing handed out can mutate the cache. The informer
/// that owns an `Indexer` is its only writer; other holders should only read (the data may
/// be stale by the time it is used).
pub struct Indexer<K> {
    store: Arc<ThreadSafeStore<K>>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<K> fmt::Debug for Indexer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Indexer")
            .field("len", &self.store.len())
            .field("indices", &self.store.index_names())
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> Default for Indexer<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource + Send + Sync + 'static> Indexer<K> {
    /// An empty cache with the built-in `namespace` index, as client-go's
    /// `NewIndexer(MetaNamespaceKeyFunc, Indexers{NamespaceIndex: MetaNamespaceIndexFunc})`.
    pub fn new() -> Self {
        Self::with_indexers(namespace_indexers())
    }

    /// An empty cache with exactly the given index functions.
    pub fn with_indexers(indexers: Indexers<K>) -> Self {
        Self {
            store: Arc::new(ThreadSafeStore::new(indexers)),
        }
    }

    /// Inserts or replaces `obj` under its key.
    pub fn add(&self, obj: Arc<K>) -> Result<()> {
        let key = meta_namespace_key(obj.as_ref())?;
        self.store.add(Arc::from(key), obj);
        Ok(())
    }

    /// Same as [`Self::add`] (client-go's `Update`).
    pub fn update(&self, obj: Arc<K>) -> Result<()> {
        self.add(obj)
    }

    /// Removes the object with `obj`'s key.
    pub fn delete(&self, obj: &K) -> Result<()> {
        let key = meta_namespace_key(obj)?;
        self.store.delete(&key);
        Ok(())
    }

    /// The cached object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>> {
        let key = meta_namespace_key(obj)?;
        Ok(self.store.get(&key))
    }

    /// Replaces the whole content with `objs`, as client-go's `Store.Replace`.
    pub fn replace(&self, objs: impl IntoIterator<Item = Arc<K>>) -> Result<()> {
        let items = objs
            .into_iter()
            .map(|o| Ok((Arc::from(meta_namespace_key(o.as_ref())?), o)))
            .collect::<Result<Vec<_>>>()?;
        self.store.replace(items);
        Ok(())
    }
}

impl<K> Indexer<K> {
    /// Inserts or replaces `obj` under a key already computed (the informer's hot path).
    pub(crate) fn add_with_key(&self, key: Arc<str>, obj: Arc<K>) -> Option<Arc<K>> {
        self.store.add(key, obj)
    }

    /// Removes the object under `key`, returning it.
    pub(crate) fn delete_key(&self, key: &str) -> Option<Arc<K>> {
        self.store.delete(key)
    }

    /// The cached object under `key` (`namespace/name` or `name`).
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.store.get(key)
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.list()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<String> {
        self.store.list_keys()
    }

    /// The number of cached objects.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// The objects whose index `index_name` yields `value`, as client-go's `ByIndex`.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>> {
        Ok(self.store.by_index(index_name, value)?)
    }

    /// The keys of the objects whose index `index_name` yields `value`, as client-go's
    /// `IndexKeys`.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<String>> {
        Ok(self.store.index_keys(index_name, value)?)
    }

    /// The objects sharing a value of index `index_name` with `obj`, as client-go's `Index`.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        Ok(self.store.index(index_name, obj)?)
    }

    /// Every value index `index_name` holds, as client-go's `ListIndexFuncValues`.
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.store.list_index_func_values(index_name)
    }

    /// The names of the registered indices.
    pub fn index_names(&self) -> Vec<String> {
        self.store.index_names()
    }

    /// Registers more index functions (e.g. an index by controller owner UID); objects already
    /// cached are indexed too. A name already registered is an error.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        Ok(self.store.add_indexers(indexers)?)
    }
}

impl<K: Send + Sync> KnownObjects<K> for Indexer<K> {
    fn known_entries(&self) -> Vec<(Arc<str>, Arc<K>)> {
        self.store.entries()
    }

    fn get_known(&self, key: &str) -> Option<Arc<K>> {
        self.store.get(key)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use k8s_openapi::api::core::v1::Pod;
    use kcm_testing::MetaBuilder;

    use super::*;
    use crate::informer::index::NAMESPACE_INDEX;

    fn pod(ns: &str, name: &str, owner: &str) -> Arc<Pod> {
        kcm_testing::pod(name)
            .namespace(ns)
            .label("owner", owner)
            .arc()
    }

    fn keys(objs: Vec<Arc<Pod>>) -> BTreeSet<String> {
        objs.iter()
            .map(|p| meta_namespace_key(p.as_ref()).expect("key"))
            .collect()
    }

    #[test]
    fn add_get_delete_by_namespace_key() {
        let cache = Indexer::<Pod>::new();
        cache.add(pod("ns", "a", "x")).expect("add");
        cache.add(pod("other", "a", "x")).expect("add");
        assert_eq!(cache.len(), 2);
        assert!(cache.get_by_key("ns/a").is_some());
        assert!(cache.get_by_key("a").is_none());
        cache.delete(&pod("ns", "a", "x")).expect("delete");
        assert!(cache.get_by_key("ns/a").is_none());
        assert_eq!(cache.list_keys(), vec!["other/a".to_owned()]);
    }

    #[test]
    fn namespace_index_is_built_in() {
        let cache = Indexer::<Pod>::new();
        cache.add(pod("ns", "a", "x")).expect("add");
        cache.add(pod("ns", "b", "x")).expect("add");
        cache.add(pod("other", "c", "x")).expect("add");
        assert_eq!(
            keys(cache.by_index(NAMESPACE_INDEX, "ns").expect("index")),
            BTreeSet::from(["ns/a".to_owned(), "ns/b".to_owned()])
        );
        assert!(matches!(
            cache.by_index("nope", "ns"),
            Err(Error::Index(index::Error::NotFound { .. }))
        ));
    }

    #[test]
    fn custom_index_by_label_follows_updates() {
        let cache = Indexer::<Pod>::new();
        let mut indexers: Indexers<Pod> = HashMap::new();
        indexers.insert(
            "owner".into(),
            Arc::new(|p: &Pod| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("owner").cloned())
                    .into_iter()
                    .collect()
            }),
        );
        cache.add(pod("ns", "a", "x")).expect("add");
        cache.add_indexers(indexers).expect("add indexers");
        cache.add(pod("ns", "b", "x")).expect("add");
        assert_eq!(
            BTreeSet::from_iter(cache.index_keys("owner", "x").expect("index")),
            BTreeSet::from(["ns/a".to_owned(), "ns/b".to_owned()])
        );
        cache.update(pod("ns", "a", "y")).expect("update");
        assert_eq!(cache.index_keys("owner", "x").expect("index"), vec!["ns/b"]);
        assert_eq!(
            keys(cache.index("owner", &pod("q", "q", "y")).expect("index")),
            BTreeSet::from(["ns/a".to_owned()])
        );
    }

    #[test]
    fn replace_swaps_content() {
        let cache = Indexer::<Pod>::new();
        cache.add(pod("ns", "a", "x")).expect("add");
        cache
            .replace([pod("ns", "b", "x"), pod("ns", "c", "x")])
            .expect("replace");
        assert_eq!(
            keys(cache.list()),
            BTreeSet::from(["ns/b".to_owned(), "ns/c".to_owned()])
        );
        assert_eq!(
            keys(cache.by_index(NAMESPACE_INDEX, "ns").expect("index")),
            BTreeSet::from(["ns/b".to_owned(), "ns/c".to_owned()])
        );
    }

    #[test]
    fn objects_without_a_name_are_rejected() {
        let cache = Indexer::<Pod>::new();
        let err = cache.add(Arc::new(Pod::default())).expect_err("no name");
        assert!(matches!(err, Error::Key(keys::Error::MissingName { .. })));
        assert!(cache.is_empty());
    }
}
