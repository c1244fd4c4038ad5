//! Test helpers: informers that never talk to a server (caches seeded directly) and builders.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use kcm_machinery::informer::{NeverListerWatcher, SharedIndexInformer};
use kcm_testing::{MetaBuilder, PodSpecBuilder, node_condition, pod_condition, toleration};

/// An informer that is never started; seed it through `indexer()`.
pub fn informer<K>() -> SharedIndexInformer<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + Send
        + Sync
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + 'static,
{
    SharedIndexInformer::new(NeverListerWatcher, std::time::Duration::ZERO)
}

/// Stores `obj` in the informer's cache (add or replace).
pub fn seed<K>(informer: &SharedIndexInformer<K>, obj: K)
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let obj = Arc::new(obj);
    if informer.indexer().update(obj.clone()).is_err() {
        let _ = informer.indexer().add(obj);
    }
}

/// The wall time `s` seconds after a fixed epoch.
pub fn ts(s: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_700_000_000 + s).expect("timestamp")
}

/// A node with a Ready condition of `ready` heartbeating at `heartbeat`, in `zone`.
pub fn node(name: &str, zone: &str, ready: &str, heartbeat: i64, taints: Vec<Taint>) -> Node {
    let cond = |type_: &str, status: &str| {
        node_condition(type_, status)
            .heartbeat(ts(heartbeat))
            .transitioned_at(ts(0))
    };
    let node = kcm_testing::node(name)
        .uid(format!("uid-{name}"))
        .resource_version("1")
        .created_at(ts(0))
        .label("topology.kubernetes.io/zone", zone)
        .default_spec()
        .condition(cond("Ready", ready))
        .condition(cond("MemoryPressure", "False"))
        .condition(cond("DiskPressure", "False"))
        .condition(cond("PIDPressure", "False"));
    if taints.is_empty() {
        node.build()
    } else {
        node.taints(taints).build()
    }
}

/// A ready pod `default/name` on `node` with `tolerations`.
pub fn pod(name: &str, node: &str, tolerations: Vec<Toleration>) -> Pod {
    tolerations
        .into_iter()
        .fold(kcm_testing::pod(name), |p, t| p.toleration(t))
        .namespace("default")
        .uid(format!("uid-{name}"))
        .resource_version("1")
        .node(node)
        .condition(pod_condition("Ready", "True"))
        .build()
}

/// A NoExecute toleration of `key` for `seconds` (forever with `None`).
pub fn tolerate(key: &str, seconds: Option<i64>) -> Toleration {
    let t = toleration(key).exists().effect("NoExecute");
    match seconds {
        Some(seconds) => t.seconds(seconds).build(),
        None => t.build(),
    }
}
