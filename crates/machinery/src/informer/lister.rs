//! Typed listers: read-only queries over an informer's cache, as client-go's generated listers.

use std::fmt;
use std::sync::Arc;

use kube::Resource;

use super::index::NAMESPACE_INDEX;
use super::keys::object_key;
use super::store::Indexer;
use crate::labels::Selector;

/// Reads one resource from an informer's cache, never from the API server, as client-go's
/// `Lister` / `ResourceIndexer`. Cheap to clone. Results are shared `Arc<K>` handles: do not
/// expect them to reflect writes made a moment ago (see the informer's freshness), and never
/// try to mutate them — clone the inner object to build an update.
pub struct Lister<K> {
    indexer: Indexer<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
        }
    }
}

impl<K> fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister")
            .field("indexer", &self.indexer)
            .finish()
    }
}

impl<K: Resource> Lister<K> {
    /// A lister over `indexer`.
    pub fn new(indexer: Indexer<K>) -> Self {
        Self { indexer }
    }

    /// The object `namespace/name`; an empty `namespace` means a cluster-scoped object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(&object_key(namespace, name))
    }

    /// The cluster-scoped object `name` (nodes, namespaces, ...).
    pub fn get_cluster(&self, name: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(name)
    }

    /// The objects of `namespace` matched by `selector`, as client-go's
    /// `ListAllByNamespace`; an empty `namespace` lists every namespace.
    pub fn list(&self, namespace: &str, selector: &Selector) -> Vec<Arc<K>> {
        if namespace.is_empty() {
            return self.list_all(selector);
        }
        let in_namespace = match self.indexer.by_index(NAMESPACE_INDEX, namespace) {
            Ok(objs) => objs,
            // Without the namespace index, filter everything (client-go does the same).
            Err(_) => self
                .indexer
                .list()
                .into_iter()
                .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
                .collect(),
        };
        filter(in_namespace, selector)
    }

    /// Every object matched by `selector`, as client-go's `ListAll`.
    pub fn list_all(&self, selector: &Selector) -> Vec<Arc<K>> {
        filter(self.indexer.list(), selector)
    }

    /// The objects whose index `index_name` yields `value` (e.g. an owner-UID index).
    pub fn by_index(&self, index_name: &str, value: &str) -> super::store::Result<Vec<Arc<K>>> {
        self.indexer.by_index(index_name, value)
    }

    /// The cache this lister reads.
    pub fn indexer(&self) -> &Indexer<K> {
        &self.indexer
    }
}

fn filter<K: Resource>(mut objs: Vec<Arc<K>>, selector: &Selector) -> Vec<Arc<K>> {
    if selector.is_everything() {
        return objs;
    }
    objs.retain(|o| selector.matches_opt(o.meta().labels.as_ref()));
    objs
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use k8s_openapi::api::core::v1::{Node, Pod};
    use kcm_testing::MetaBuilder;

    use super::*;
    use crate::informer::keys::meta_namespace_key;

    fn pod(ns: &str, name: &str, app: &str) -> Arc<Pod> {
        kcm_testing::pod(name).namespace(ns).label("app", app).arc()
    }

    fn keys(objs: Vec<Arc<Pod>>) -> BTreeSet<String> {
        objs.iter()
            .map(|o| meta_namespace_key(o.as_ref()).expect("key"))
            .collect()
    }

    fn lister() -> Lister<Pod> {
        let indexer = Indexer::new();
        for p in [
            pod("ns", "a", "web"),
            pod("ns", "b", "db"),
            pod("other", "c", "web"),
        ] {
            indexer.add(p).expect("add");
        }
        Lister::new(indexer)
    }

    #[test]
    fn get_by_namespace_and_name() {
        let l = lister();
        assert!(l.get("ns", "a").is_some());
        assert!(l.get("other", "a").is_none());
        let nodes = Indexer::<Node>::new();
        nodes.add(kcm_testing::node("n1").arc()).expect("add");
        let nodes = Lister::new(nodes);
        assert!(nodes.get_cluster("n1").is_some());
        assert!(nodes.get("", "n1").is_some());
    }

    #[test]
    fn list_filters_by_namespace_and_selector() {
        struct Case {
            name: &'static str,
            namespace: &'static str,
            selector: &'static str,
            want: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "namespace, everything",
                namespace: "ns",
                selector: "",
                want: &["ns/a", "ns/b"],
            },
            Case {
                name: "namespace, selector",
                namespace: "ns",
                selector: "app=web",
                want: &["ns/a"],
            },
            Case {
                name: "all namespaces",
                namespace: "",
                selector: "app in (web)",
                want: &["ns/a", "other/c"],
            },
            Case {
                name: "no match",
                namespace: "ns",
                selector: "app=cache",
                want: &[],
            },
        ];
        let l = lister();
        for c in cases {
            let selector = Selector::parse(c.selector).expect("selector");
            assert_eq!(
                keys(l.list(c.namespace, &selector)),
                c.want.iter().map(|s| s.to_string()).collect(),
                "{}",
                c.name
            );
        }
        assert_eq!(keys(l.list_all(&Selector::everything())).len(), 3);
        assert!(l.list_all(&Selector::nothing()).is_empty());
    }
}
