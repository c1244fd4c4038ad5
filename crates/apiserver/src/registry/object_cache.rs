//! The objects admission reads (namespaces, service accounts, limit ranges, quotas, classes, admission configurations), decoded once and kept current from the store's watch: kube-apiserver's admission informers, but consistent with the store at the time of each read.
//!
//! Every pod create reads its namespace (twice), its service account, the namespace's
//! LimitRanges and ResourceQuotas and the PriorityClasses. Read from the store each time, each
//! read is a key lookup plus a JSON decode — on a busy server more work than the admission
//! logic itself. kube-apiserver's plugins read informer caches instead, accepting that a
//! just-written object may not be seen yet. This cache keeps their speed without that window:
//!
//! - One feeder task lists the cached resources at one revision, then watches the whole store
//!   from it (through the watch cache, so it costs one more watcher) and applies the events of
//!   cached keys, decoded once, as `Arc<Value>`.
//! - A read first asks the store for its current revision (an atomic load on SQLite and the
//!   memory store) and waits until the feeder has applied every event up to it, as
//!   kube-apiserver's consistent reads from cache do; then it answers from memory. If the
//!   feeder is not there yet within [`CATCH_UP_WAIT`] (not started, relisting, far behind),
//!   the read goes to the store as before — slower, never staler.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;

use crate::registry::decode_stored;
use crate::registry::resource::ResourceDef;
use crate::storage::{self, Event, Revision, Storage};

/// How long a read waits for the feeder to reach the store's revision before reading the
/// store itself.
pub const CATCH_UP_WAIT: Duration = Duration::from_millis(250);

/// How long the feeder waits before listing again after the store failed it.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// The plurals (with their group) admission plugins read; everything else is read live.
const CACHED: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "serviceaccounts"),
    ("", "limitranges"),
    ("", "resourcequotas"),
    ("scheduling.k8s.io", "priorityclasses"),
    ("node.k8s.io", "runtimeclasses"),
    ("storage.k8s.io", "storageclasses"),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
    (
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings",
    ),
];

/// Whether reads of `def` may be served by an [`ObjectCache`].
pub fn cacheable(def: &ResourceDef) -> bool {
    CACHED
        .iter()
        .any(|(group, plural)| def.group == *group && def.plural == *plural)
}

/// One cached resource: its entry, storage prefix and objects by storage key.
struct Resource {
    def: &'static ResourceDef,
    prefix: String,
    objects: BTreeMap<Arc<str>, Arc<Value>>,
}

/// A consistent in-memory copy of the resources admission reads. See the module docs.
pub struct ObjectCache {
    storage: Arc<dyn Storage>,
    defs: Vec<&'static ResourceDef>,
    resources: Arc<Mutex<Vec<Resource>>>,
    /// The revision up to which every event has been applied; `None` until the first list.
    applied: watch::Sender<Option<Revision>>,
    feeder: OnceLock<tokio::task::AbortHandle>,
}

impl std::fmt::Debug for ObjectCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectCache")
            .field("resources", &self.defs.len())
            .field("applied", &*self.applied.borrow())
            .finish()
    }
}

impl Drop for ObjectCache {
    fn drop(&mut self) {
        if let Some(feeder) = self.feeder.get() {
            feeder.abort();
        }
    }
}

impl ObjectCache {
    /// A cache over `storage` of those of `served` that admission reads ([`cacheable`]). The
    /// feeder starts on the first read.
    pub fn new(storage: Arc<dyn Storage>, served: &[&'static ResourceDef]) -> Self {
        let defs: Vec<&'static ResourceDef> =
            served.iter().copied().filter(|d| cacheable(d)).collect();
        let resources = defs
            .iter()
            .map(|def| Resource {
                def,
                prefix: def.storage_prefix(None),
                objects: BTreeMap::new(),
            })
            .collect();
        Self {
            storage,
            defs,
            resources: Arc::new(Mutex::new(resources)),
            applied: watch::Sender::new(None),
            feeder: OnceLock::new(),
        }
    }

    /// The object at `key` of `def`: `Some(answer)` from memory when the cache holds `def`
    /// and is current, `None` when the caller must read the store.
    pub async fn get(&self, def: &ResourceDef, key: &str) -> Option<Option<Arc<Value>>> {
        self.read(def, |objects| objects.get(key).map(Arc::clone))
            .await
    }

    /// The objects of `def` under `prefix` in key order, as [`ObjectCache::get`].
    pub async fn list(&self, def: &ResourceDef, prefix: &str) -> Option<Vec<Arc<Value>>> {
        self.read(def, |objects| {
            objects
                .range::<str, _>((
                    std::ops::Bound::Included(prefix),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(|(key, _)| key.starts_with(prefix))
                .map(|(_, obj)| Arc::clone(obj))
                .collect()
        })
        .await
    }

    /// `f` of `def`'s objects once the cache is current; `None` if it does not hold `def` or
    /// is not current in time.
    async fn read<T>(
        &self,
        def: &ResourceDef,
        f: impl FnOnce(&BTreeMap<Arc<str>, Arc<Value>>) -> T,
    ) -> Option<T> {
        let index = self.index_of(def)?;
        if !self.current().await {
            return None;
        }
        Some(f(&lock(&self.resources)[index].objects))
    }

    /// Which cached resource `def` is (the very entry: another version of the same resource
    /// is read live).
    fn index_of(&self, def: &ResourceDef) -> Option<usize> {
        self.defs.iter().position(|d| std::ptr::eq(*d, def))
    }

    /// Starts the feeder if needed and waits until it has applied everything the store had
    /// when called; false if that takes longer than [`CATCH_UP_WAIT`].
    async fn current(&self) -> bool {
        self.start();
        let Ok(now) = self.storage.current_revision().await else {
            return false;
        };
        let caught_up = move |applied: &Option<Revision>| applied.is_some_and(|r| r >= now);
        // The usual case, without a receiver.
        if caught_up(&self.applied.borrow()) {
            return true;
        }
        let mut applied = self.applied.subscribe();
        if caught_up(&applied.borrow_and_update()) {
            return true;
        }
        matches!(
            tokio::time::timeout(CATCH_UP_WAIT, applied.wait_for(caught_up)).await,
            Ok(Ok(_))
        )
    }

    fn start(&self) {
        self.feeder.get_or_init(|| {
            let feeder = Feeder {
                storage: Arc::clone(&self.storage),
                resources: Arc::clone(&self.resources),
                applied: self.applied.clone(),
            };
            tokio::spawn(feeder.run()).abort_handle()
        });
    }
}

fn lock(resources: &Mutex<Vec<Resource>>) -> MutexGuard<'_, Vec<Resource>> {
    // A panic while holding the lock leaves whole maps behind (every mutation is one insert
    // or remove), so the data is still usable.
    resources
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Lists, then applies the store's events; lists again when the watch fails.
struct Feeder {
    storage: Arc<dyn Storage>,
    resources: Arc<Mutex<Vec<Resource>>>,
    applied: watch::Sender<Option<Revision>>,
}

impl Feeder {
    async fn run(self) {
        loop {
            match self.list_and_watch().await {
                Ok(()) => tracing::debug!("admission object cache: store watch ended; relisting"),
                Err(err) => {
                    tracing::warn!(%err, "admission object cache: relisting after a store error");
                    tokio::time::sleep(RETRY_DELAY).await;
                }
            }
        }
    }

    async fn list_and_watch(&self) -> storage::Result<()> {
        let revision = self.storage.current_revision().await?;
        let prefixes: Vec<(usize, String)> = lock(&self.resources)
            .iter()
            .enumerate()
            .map(|(i, r)| (i, r.prefix.clone()))
            .collect();
        let mut listed = Vec::with_capacity(prefixes.len());
        for (index, prefix) in prefixes {
            let page = self
                .storage
                .list(storage::ListOptions {
                    prefix,
                    revision: Some(revision),
                    ..storage::ListOptions::default()
                })
                .await?;
            listed.push((index, page.kvs));
        }
        let mut stream = self.storage.watch("", revision).await?;
        {
            let mut resources = lock(&self.resources);
            for (index, kvs) in listed {
                let resource = &mut resources[index];
                resource.objects = kvs
                    .iter()
                    .filter_map(|kv| decode(resource.def, kv).map(|obj| (kv.key.clone(), obj)))
                    .collect();
            }
        }
        self.applied.send_replace(Some(revision));
        while let Some(event) = stream.next().await {
            let event = event?;
            self.apply(&event);
            // Never backwards: a late event below a progress notification (etcd-io/etcd#15220)
            // changes an object but not how far the cache has come.
            let revision = event.revision();
            self.applied.send_if_modified(|applied| {
                let advance = applied.is_none_or(|a| a < revision);
                if advance {
                    *applied = Some(revision);
                }
                advance
            });
        }
        Ok(())
    }

    /// Applies one event to the resource its key belongs to, if any.
    fn apply(&self, event: &Event) {
        let Some(key) = event.key() else {
            return; // a progress notification: nothing to apply
        };
        let mut resources = lock(&self.resources);
        let Some(resource) = resources
            .iter_mut()
            .find(|r| key.starts_with(r.prefix.as_str()))
        else {
            return;
        };
        match event {
            Event::Put { kv, .. } => match decode(resource.def, kv) {
                Some(obj) => {
                    resource.objects.insert(kv.key.clone(), obj);
                }
                None => {
                    resource.objects.remove(key);
                }
            },
            Event::Delete { .. } => {
                resource.objects.remove(key);
            }
            Event::Progress { .. } => {}
        }
    }
}

/// A stored object decoded as the registry reads it; an undecodable one is left out (and
/// logged), as a read of it would fail.
fn decode(def: &ResourceDef, kv: &storage::KeyValue) -> Option<Arc<Value>> {
    match decode_stored(def, kv) {
        Ok(obj) => Some(Arc::new(obj)),
        Err(err) => {
            tracing::warn!(key = %kv.key, %err, "admission object cache: undecodable object");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use serde_json::json;

    use super::*;
    use crate::resources::core::SERVICEACCOUNTS;
    use crate::resources::namespace::NAMESPACES;
    use crate::resources::pod::PODS;
    use crate::storage::MemoryStorage;

    fn cache() -> (Arc<MemoryStorage>, ObjectCache) {
        let store = Arc::new(MemoryStorage::new());
        let cache = ObjectCache::new(store.clone(), &[&NAMESPACES, &SERVICEACCOUNTS, &PODS]);
        (store, cache)
    }

    fn bytes(v: Value) -> Bytes {
        Bytes::from(serde_json::to_vec(&v).expect("json"))
    }

    fn account(ns: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": ns}})
    }

    #[tokio::test]
    async fn a_write_is_seen_by_the_next_read_and_a_delete_too() {
        let (store, cache) = cache();
        let key = SERVICEACCOUNTS.storage_key("ns", "default");
        assert_eq!(cache.get(&SERVICEACCOUNTS, &key).await, Some(None));
        let rev = store
            .create(&key, bytes(account("ns", "default")))
            .await
            .expect("create");
        let got = cache
            .get(&SERVICEACCOUNTS, &key)
            .await
            .expect("served from the cache")
            .expect("found at once after the write");
        assert_eq!(got["metadata"]["resourceVersion"], json!(rev.to_string()));
        store.delete(&key, rev).await.expect("delete");
        assert_eq!(cache.get(&SERVICEACCOUNTS, &key).await, Some(None));
    }

    #[tokio::test]
    async fn lists_are_by_prefix_in_key_order_and_other_resources_are_not_cached() {
        let (store, cache) = cache();
        for (ns, name) in [("b", "x"), ("a", "z"), ("a", "y"), ("ab", "w")] {
            store
                .create(
                    &SERVICEACCOUNTS.storage_key(ns, name),
                    bytes(account(ns, name)),
                )
                .await
                .expect("create");
        }
        let names = |list: Vec<Arc<Value>>| -> Vec<String> {
            list.iter()
                .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_owned())
                .collect()
        };
        let in_a = cache
            .list(&SERVICEACCOUNTS, &SERVICEACCOUNTS.storage_prefix(Some("a")))
            .await
            .expect("cached");
        assert_eq!(names(in_a), ["y", "z"]);
        let all = cache
            .list(&SERVICEACCOUNTS, &SERVICEACCOUNTS.storage_prefix(None))
            .await
            .expect("cached");
        assert_eq!(names(all), ["y", "z", "w", "x"]);
        assert!(
            cache
                .get(&PODS, &PODS.storage_key("a", "p"))
                .await
                .is_none()
        );
        assert!(!cacheable(&PODS));
    }

    #[tokio::test]
    async fn objects_stored_before_the_first_read_are_listed() {
        let store = Arc::new(MemoryStorage::new());
        store
            .create(
                &NAMESPACES.storage_key("", "kube-system"),
                bytes(json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "kube-system"}})),
            )
            .await
            .expect("create");
        let cache = ObjectCache::new(store.clone(), &[&NAMESPACES]);
        let got = cache
            .get(&NAMESPACES, &NAMESPACES.storage_key("", "kube-system"))
            .await
            .expect("cached");
        assert_eq!(got.expect("listed")["metadata"]["name"], "kube-system");
    }

    #[tokio::test]
    async fn an_undecodable_object_is_left_out_without_stopping_the_cache() {
        let (store, cache) = cache();
        let bad = SERVICEACCOUNTS.storage_key("ns", "bad");
        store
            .create(&bad, Bytes::from_static(b"{not json"))
            .await
            .expect("create");
        let good = SERVICEACCOUNTS.storage_key("ns", "good");
        store
            .create(&good, bytes(account("ns", "good")))
            .await
            .expect("create");
        assert_eq!(cache.get(&SERVICEACCOUNTS, &bad).await, Some(None));
        assert!(matches!(
            cache.get(&SERVICEACCOUNTS, &good).await,
            Some(Some(_))
        ));
    }
}
