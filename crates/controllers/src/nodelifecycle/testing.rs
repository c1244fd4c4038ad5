//! Test helpers: informers that never talk to a server (caches seeded directly) and builders.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodCondition, PodSpec, PodStatus, Taint,
    Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kcm_machinery::informer::{NeverListerWatcher, SharedIndexInformer};

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
    let cond = |type_: &str, status: &str| NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        last_heartbeat_time: Some(Time(ts(heartbeat))),
        last_transition_time: Some(Time(ts(0))),
        ..NodeCondition::default()
    };
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".to_owned()),
            creation_timestamp: Some(Time(ts(0))),
            labels: Some(BTreeMap::from([(
                "topology.kubernetes.io/zone".to_owned(),
                zone.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: (!taints.is_empty()).then_some(taints),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![
                cond("Ready", ready),
                cond("MemoryPressure", "False"),
                cond("DiskPressure", "False"),
                cond("PIDPressure", "False"),
            ]),
            ..NodeStatus::default()
        }),
    }
}

/// A ready pod `default/name` on `node` with `tolerations`.
pub fn pod(name: &str, node: &str, tolerations: Vec<Toleration>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            tolerations: (!tolerations.is_empty()).then_some(tolerations),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".to_owned(),
                status: "True".to_owned(),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        }),
    }
}

/// A NoExecute toleration of `key` for `seconds` (forever with `None`).
pub fn tolerate(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some("NoExecute".to_owned()),
        toleration_seconds: seconds,
        ..Toleration::default()
    }
}
