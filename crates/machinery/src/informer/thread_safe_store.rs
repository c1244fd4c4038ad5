//! A key → `Arc<K>` map with named indices behind one lock, as client-go's `threadSafeMap`.
//!
//! Why an `RwLock` over a `HashMap`: readers (listers, many workers) vastly outnumber the one
//! writer (the informer's pop loop), every read is short (clone an `Arc` or a few), and no
//! operation awaits while holding it. Keys are `Arc<str>` so the items map and every index set
//! share one allocation per object.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::index::{self, Indexers, StoreIndex};

/// A thread-safe store of shared objects keyed by string, with indices.
///
/// Objects are stored and returned as `Arc<K>`: readers share them and must not (cannot)
/// mutate them.
pub struct ThreadSafeStore<K> {
    state: RwLock<State<K>>,
}

struct State<K> {
    /// Every cached object by key.
    items: HashMap<Arc<str>, Arc<K>>,
    /// Invariant: for every index, `key` is in the set of value `v` iff `items[key]` yields `v`.
    index: StoreIndex<K>,
}

impl<K> ThreadSafeStore<K> {
    /// An empty store with the given index functions.
    pub fn new(indexers: Indexers<K>) -> Self {
        Self {
            state: RwLock::new(State {
                items: HashMap::new(),
                index: StoreIndex::new(indexers),
            }),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, State<K>> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State<K>> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Inserts or replaces the object under `key`, updating the indices; returns the object it
    /// replaced.
    pub fn add(&self, key: Arc<str>, obj: Arc<K>) -> Option<Arc<K>> {
        let mut state = self.write();
        let state = &mut *state;
        let old = state.items.insert(key.clone(), obj.clone());
        state
            .index
            .update_indices(old.as_deref(), Some(obj.as_ref()), &key);
        old
    }

    /// Removes the object under `key`, returning it.
    pub fn delete(&self, key: &str) -> Option<Arc<K>> {
        let mut state = self.write();
        let state = &mut *state;
        let (key, old) = state.items.remove_entry(key)?;
        state.index.update_indices(Some(old.as_ref()), None, &key);
        Some(old)
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read().items.get(key).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.read().items.contains_key(key)
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().items.values().cloned().collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<String> {
        self.read().items.keys().map(|k| k.to_string()).collect()
    }

    /// Every `(key, object)` pair, read atomically.
    pub fn entries(&self) -> Vec<(Arc<str>, Arc<K>)> {
        self.read()
            .items
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.read().items.len()
    }

    /// True when no object is stored.
    pub fn is_empty(&self) -> bool {
        self.read().items.is_empty()
    }

    /// Replaces the whole content with `items` and rebuilds the indices, as client-go's
    /// `threadSafeMap.Replace`.
    pub fn replace(&self, items: impl IntoIterator<Item = (Arc<str>, Arc<K>)>) {
        let mut state = self.write();
        let state = &mut *state;
        state.items = items.into_iter().collect();
        state.index.reset();
        for (key, obj) in &state.items {
            state.index.update_indices(None, Some(obj.as_ref()), key);
        }
    }

    /// The objects that share at least one value of index `name` with `obj`, as client-go's
    /// `Index`.
    pub fn index(&self, name: &str, obj: &K) -> index::Result<Vec<Arc<K>>> {
        let state = self.read();
        let values = (state.index.func(name)?)(obj);
        let mut keys: Vec<&Arc<str>> = Vec::new();
        for value in &values {
            if let Some(set) = state.index.keys_for(name, value)? {
                keys.extend(set.iter());
            }
        }
        if values.len() > 1 {
            keys.sort_unstable();
            keys.dedup();
        }
        Ok(keys
            .into_iter()
            .filter_map(|k| state.items.get(k).cloned())
            .collect())
    }

    /// The keys of the objects whose index `name` yields `value`, as client-go's `IndexKeys`.
    pub fn index_keys(&self, name: &str, value: &str) -> index::Result<Vec<String>> {
        let state = self.read();
        Ok(state
            .index
            .keys_for(name, value)?
            .map(|set| set.iter().map(|k| k.to_string()).collect())
            .unwrap_or_default())
    }

    /// The objects whose index `name` yields `value`, as client-go's `ByIndex`.
    pub fn by_index(&self, name: &str, value: &str) -> index::Result<Vec<Arc<K>>> {
        let state = self.read();
        Ok(state
            .index
            .keys_for(name, value)?
            .map(|set| {
                set.iter()
                    .filter_map(|k| state.items.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Every value index `name` currently holds, as client-go's `ListIndexFuncValues`.
    pub fn list_index_func_values(&self, name: &str) -> Vec<String> {
        self.read().index.values(name)
    }

    /// The names of the registered index functions.
    pub fn index_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.read().index.indexers().keys().cloned().collect();
        names.sort();
        names
    }

    /// Registers more index functions and indexes the objects already stored, as client-go's
    /// `AddIndexers` (which since 1.27 also works on a populated store).
    pub fn add_indexers(&self, indexers: Indexers<K>) -> index::Result<()> {
        let mut state = self.write();
        let state = &mut *state;
        state.index.add_indexers(&indexers)?;
        for (key, obj) in &state.items {
            for name in indexers.keys() {
                state.index.update_single_index(name, obj.as_ref(), key);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Indexes a `(name, labels)` test object by each of its labels.
    fn by_label() -> Indexers<(String, Vec<String>)> {
        let mut indexers: Indexers<(String, Vec<String>)> = HashMap::new();
        indexers.insert(
            "label".into(),
            Arc::new(|o: &(String, Vec<String>)| o.1.clone()),
        );
        indexers
    }

    fn obj(name: &str, labels: &[&str]) -> Arc<(String, Vec<String>)> {
        Arc::new((
            name.to_owned(),
            labels.iter().map(|s| s.to_string()).collect(),
        ))
    }

    fn sorted(keys: Vec<String>) -> BTreeSet<String> {
        keys.into_iter().collect()
    }

    #[test]
    fn update_moves_keys_between_index_values() {
        // As client-go's TestThreadSafeStoreIndexingFunctionsWithMultipleValues.
        let store = ThreadSafeStore::new(by_label());
        store.add("a".into(), obj("a", &["x", "y"]));
        store.add("b".into(), obj("b", &["y"]));
        assert_eq!(
            sorted(store.index_keys("label", "y").expect("index")),
            sorted(vec!["a".into(), "b".into()])
        );
        store.add("a".into(), obj("a", &["z"]));
        assert_eq!(
            sorted(store.index_keys("label", "y").expect("index")),
            sorted(vec!["b".into()])
        );
        assert!(store.index_keys("label", "x").expect("index").is_empty());
        assert_eq!(
            sorted(store.list_index_func_values("label")),
            sorted(vec!["y".into(), "z".into()])
        );
        store.delete("b");
        assert!(store.by_index("label", "y").expect("index").is_empty());
        assert_eq!(store.len(), 1);
    }

    /// A long-running informer must not keep anything of deleted objects: after every object
    /// is deleted, the store holds no key and no index holds any value.
    #[test]
    fn deleting_every_object_leaves_no_key_and_no_index_value() {
        let store = ThreadSafeStore::new(by_label());
        for i in 0..100 {
            let name = format!("o{i}");
            let labels = [format!("l{}", i % 7), format!("own-{i}")];
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            store.add(name.as_str().into(), obj(&name, &labels));
        }
        assert_eq!(store.list_index_func_values("label").len(), 107);
        for i in 0..100 {
            let name = format!("o{i}");
            assert!(store.delete(&name).is_some(), "{name} was stored");
        }
        assert!(store.is_empty());
        assert!(store.list_keys().is_empty());
        assert!(
            store.list_index_func_values("label").is_empty(),
            "emptied index values are dropped"
        );
        assert!(store.by_index("label", "l0").expect("index").is_empty());
        assert!(
            store.delete("o0").is_none(),
            "a second delete finds nothing"
        );
    }

    #[test]
    fn index_returns_objects_sharing_any_value() {
        let store = ThreadSafeStore::new(by_label());
        store.add("a".into(), obj("a", &["x", "y"]));
        store.add("b".into(), obj("b", &["y", "z"]));
        store.add("c".into(), obj("c", &["w"]));
        let mut got: Vec<String> = store
            .index("label", &obj("q", &["x", "z"]))
            .expect("index")
            .iter()
            .map(|o| o.0.clone())
            .collect();
        got.sort();
        assert_eq!(got, vec!["a".to_owned(), "b".to_owned()]);
        assert!(matches!(
            store.index("missing", &obj("q", &[])),
            Err(index::Error::NotFound { .. })
        ));
    }

    #[test]
    fn replace_rebuilds_indices() {
        let store = ThreadSafeStore::new(by_label());
        store.add("a".into(), obj("a", &["x"]));
        store.replace(vec![("b".into(), obj("b", &["y"]))]);
        assert!(store.get("a").is_none());
        assert!(store.index_keys("label", "x").expect("index").is_empty());
        assert_eq!(store.index_keys("label", "y").expect("index"), vec!["b"]);
    }

    #[test]
    fn add_indexers_indexes_existing_objects() {
        let store = ThreadSafeStore::new(HashMap::new());
        store.add("a".into(), obj("a", &["x"]));
        store.add_indexers(by_label()).expect("no conflict");
        assert_eq!(store.index_keys("label", "x").expect("index"), vec!["a"]);
        assert!(matches!(
            store.add_indexers(by_label()),
            Err(index::Error::Conflict { .. })
        ));
        assert_eq!(store.index_names(), vec!["label".to_owned()]);
    }

    #[test]
    fn readers_share_the_stored_object() {
        let store = ThreadSafeStore::new(HashMap::new());
        let o = obj("a", &[]);
        store.add("a".into(), o.clone());
        let got = store.get("a").expect("stored");
        assert!(Arc::ptr_eq(&o, &got));
    }
}
