//! What core/v1 componentstatuses (`cs`, read-only, deprecated upstream since v1.19) report: the health of the store and of the scheduler and controller manager, computed on every read.
//!
//! Upstream names the components `scheduler`, `controller-manager` and `etcd-0` and probes
//! their `/healthz`. Here:
//! - `etcd-0` is kcm's own store (SQLite by default), probed with a read of its revision;
//!   the message says which store it is, since there is no etcd.
//! - `scheduler` and `controller-manager` answer through the probe the process that runs
//!   them registered (`Registry::components`: `kcm up` does); otherwise their
//!   leader-election Lease in `kube-system` (`kube-scheduler`, `kube-controller-manager`)
//!   says whether a leader is renewing it.

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::error::Result;
use crate::pointer::At;
use crate::registry::components::ComponentHealth;
use crate::registry::computed::{Computed, ServerView};
use crate::resources::policy::LEASES;
use crate::storage::Storage;

/// The components reported beside the store: name, and the leader-election Lease in
/// `kube-system` that speaks for them when no in-process probe is registered.
const COMPONENTS: [(&str, &str); 2] = [
    ("scheduler", "kube-scheduler"),
    ("controller-manager", "kube-controller-manager"),
];

/// Computes the three `ComponentStatus` objects.
#[derive(Debug)]
pub struct ComponentStatuses;

impl Computed for ComponentStatuses {
    fn objects<'a>(&'a self, server: &'a ServerView<'a>) -> BoxFuture<'a, Result<Vec<Value>>> {
        async move {
            let now = jiff::Timestamp::now();
            let mut out = Vec::with_capacity(COMPONENTS.len() + 1);
            for (name, lease) in COMPONENTS {
                let health = match server.components.probe(name) {
                    Some(health) => health,
                    None => lease_health(server.storage, lease, now).await,
                };
                out.push(component_status(name, &health));
            }
            out.push(component_status(
                "etcd-0",
                &store_health(server.storage).await,
            ));
            Ok(out)
        }
        .boxed()
    }
}

/// One `ComponentStatus` with its `Healthy` condition.
fn component_status(name: &str, health: &ComponentHealth) -> Value {
    let mut condition = json!({
        "type": "Healthy",
        "status": if health.healthy { "True" } else { "False" },
    });
    if !health.message.is_empty() {
        condition["message"] = json!(health.message);
    }
    if !health.error.is_empty() {
        condition["error"] = json!(health.error);
    }
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "conditions": [condition],
    })
}

/// The store answers a read of its revision.
async fn store_health(storage: &dyn Storage) -> ComponentHealth {
    match storage.current_revision().await {
        Ok(_) => ComponentHealth::healthy(format!(
            "ok (kcm stores objects in {}, not etcd)",
            storage.backend()
        )),
        Err(e) => ComponentHealth::unhealthy(format!("the {} store: {e}", storage.backend())),
    }
}

/// A component without an in-process probe is healthy while a leader renews its Lease
/// (`renewTime + leaseDurationSeconds` not past).
async fn lease_health(storage: &dyn Storage, lease: &str, now: jiff::Timestamp) -> ComponentHealth {
    let key = format!("kube-system/{lease}");
    let stored = storage
        .get(&LEASES.storage_key("kube-system", lease))
        .await
        .ok()
        .flatten()
        .and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok());
    let Some(obj) = stored else {
        return ComponentHealth::unhealthy(format!(
            "not running beside this API server: no probe is registered and no leader holds the Lease {key}"
        ));
    };
    let holder = obj
        .at("/spec/holderIdentity")
        .and_then(Value::as_str)
        .unwrap_or("");
    let renewed = obj
        .at("/spec/renewTime")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let duration = obj
        .at("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    match renewed {
        _ if holder.is_empty() => {
            ComponentHealth::unhealthy(format!("no leader holds the Lease {key}"))
        }
        Some(t) if t.as_second().saturating_add(duration) >= now.as_second() => {
            ComponentHealth::healthy(format!("ok (leader {holder} renews the Lease {key})"))
        }
        _ => ComponentHealth::unhealthy(format!(
            "the leader {holder} stopped renewing the Lease {key}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::ComponentStatus;

    use super::*;
    use crate::registry::Registry;
    use crate::registry::resource::ResourceDef;
    use crate::storage::MemoryStorage;
    use crate::strategic_merge::kinds;
    use crate::table::printers;

    /// The entry as `resources::core` declares it.
    static COMPONENT_STATUSES: ResourceDef = ResourceDef::of::<ComponentStatus>()
        .computed(&ComponentStatuses)
        .printer(printers::COMPONENT_STATUS)
        .merge_schema(&kinds::METADATA_ONLY);

    static ALL: &[&ResourceDef] = &[&COMPONENT_STATUSES, &LEASES];

    fn condition(list: &Value, name: &str) -> Value {
        list["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["metadata"]["name"] == name))
            .map(|i| i["conditions"][0].clone())
            .unwrap_or(Value::Null)
    }

    /// A scheduler Lease last renewed `ago` seconds ago, as stored.
    fn lease(ago: i64) -> bytes::Bytes {
        let renewed = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(ago);
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
            "spec": {"holderIdentity": "sched-1", "leaseDurationSeconds": 15,
                "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}});
        bytes::Bytes::from(lease.to_string())
    }

    #[tokio::test]
    async fn reports_the_store_probes_and_leases() {
        let storage = Arc::new(MemoryStorage::new());
        let registry = Registry::with_resources(storage.clone(), ALL);
        let list = registry
            .list(&COMPONENT_STATUSES, None, &Default::default())
            .await
            .expect("list");
        let names: Vec<&str> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["scheduler", "controller-manager", "etcd-0"]);
        assert_eq!(
            condition(&list, "etcd-0"),
            json!({"type": "Healthy", "status": "True",
                "message": "ok (kcm stores objects in memory, not etcd)"})
        );
        let scheduler = condition(&list, "scheduler");
        assert_eq!(scheduler["status"], "False");
        assert!(
            scheduler["error"]
                .as_str()
                .is_some_and(|e| e.contains("Lease kube-system/kube-scheduler")),
            "{scheduler}"
        );

        registry.components().register(
            "controller-manager",
            Arc::new(|| ComponentHealth::healthy("ok")),
        );
        let key = LEASES.storage_key("kube-system", "kube-scheduler");
        let rev = storage.create(&key, lease(2)).await.expect("lease");
        let list = registry
            .list(&COMPONENT_STATUSES, None, &Default::default())
            .await
            .expect("list");
        assert_eq!(
            condition(&list, "controller-manager"),
            json!({"type": "Healthy", "status": "True", "message": "ok"})
        );
        assert_eq!(
            condition(&list, "scheduler")["message"],
            "ok (leader sched-1 renews the Lease kube-system/kube-scheduler)"
        );

        storage
            .update(&key, rev, lease(60))
            .await
            .expect("stale lease");
        let one = registry
            .get(&COMPONENT_STATUSES, "", "scheduler")
            .await
            .expect("get");
        assert_eq!(one["conditions"][0]["status"], "False");
        assert_eq!(
            one["conditions"][0]["error"],
            "the leader sched-1 stopped renewing the Lease kube-system/kube-scheduler"
        );
    }
}
