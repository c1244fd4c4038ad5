//! metrics.k8s.io/v1beta1 `nodes` and `pods` (NodeMetrics, PodMetrics) as metrics-server serves them, computed on every read from the stored pods and nodes and the registered [`UsageSource`](crate::registry::usage::UsageSource).
//!
//! Upstream serves this group from metrics-server through the aggregator; kcm serves it
//! itself, so it is listed in discovery and gets a local `v1beta1.metrics.k8s.io`
//! APIService like every built-in group. Without a usage source (a bare `kcm apiserver`)
//! reads answer `503 ServiceUnavailable`, as the aggregator does when metrics-server is
//! down. As metrics-server: only running pods are reported, each PodMetrics carries its
//! pod's labels (so label selectors work), a node reports the usage of the pods bound to it
//! plus its system overhead, quantities are in nanocores and Ki.

use std::borrow::Cow;
use std::collections::BTreeMap;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::schemars::generate::SchemaGenerator;
use k8s_openapi::schemars::{JsonSchema, Schema, json_schema};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::pointer::At;
use crate::registry::computed::{Computed, ServerView};
use crate::registry::resource::{ResourceDef, Verbs};
use crate::registry::usage::Usage;
use crate::resources::{core, pod};
use crate::storage::{self, Storage};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// The window metrics-server reports usage over (its default `--metric-resolution`).
const WINDOW: &str = "15s";

/// A quantity map (`cpu`, `memory`).
type ResourceList = BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;

/// metrics.k8s.io/v1beta1 NodeMetrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeMetrics {
    /// The node's name and labels.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// When the usage was measured (the end of the window).
    pub timestamp: Option<Time>,
    /// The window the usage was averaged over.
    pub window: Option<String>,
    /// CPU and memory used.
    #[serde(default)]
    pub usage: ResourceList,
}

/// The usage of one container.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerMetrics {
    /// The container's name.
    pub name: String,
    /// CPU and memory used.
    #[serde(default)]
    pub usage: ResourceList,
}

/// metrics.k8s.io/v1beta1 PodMetrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodMetrics {
    /// The pod's name, namespace and labels.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// When the usage was measured (the end of the window).
    pub timestamp: Option<Time>,
    /// The window the usage was averaged over.
    pub window: Option<String>,
    /// Per-container usage.
    #[serde(default)]
    pub containers: Vec<ContainerMetrics>,
}

impl Resource for NodeMetrics {
    const API_VERSION: &'static str = "metrics.k8s.io/v1beta1";
    const GROUP: &'static str = "metrics.k8s.io";
    const KIND: &'static str = "NodeMetrics";
    const VERSION: &'static str = "v1beta1";
    const URL_PATH_SEGMENT: &'static str = "nodes";
    type Scope = ClusterResourceScope;
}

impl Resource for PodMetrics {
    const API_VERSION: &'static str = "metrics.k8s.io/v1beta1";
    const GROUP: &'static str = "metrics.k8s.io";
    const KIND: &'static str = "PodMetrics";
    const VERSION: &'static str = "v1beta1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = NamespaceResourceScope;
}

fn usage_schema() -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string", "format": "quantity"},
    })
}

impl JsonSchema for NodeMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "NodeMetrics sets resource usage metrics of a node.",
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": generator.subschema_for::<ObjectMeta>(),
                "timestamp": generator.subschema_for::<Time>(),
                "window": {"type": "string"},
                "usage": usage_schema(),
            },
        })
    }
}

impl JsonSchema for PodMetrics {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "PodMetrics sets resource usage metrics of a pod.",
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": generator.subschema_for::<ObjectMeta>(),
                "timestamp": generator.subschema_for::<Time>(),
                "window": {"type": "string"},
                "containers": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "usage": usage_schema(),
                        },
                    },
                },
            },
        })
    }
}

/// metrics.k8s.io/v1beta1 nodes.
pub static NODE_METRICS: ResourceDef = ResourceDef::of::<NodeMetrics>()
    .verbs(Verbs::READ_ONLY)
    .computed(&NodeMetricsComputed)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// metrics.k8s.io/v1beta1 pods.
pub static POD_METRICS: ResourceDef = ResourceDef::of::<PodMetrics>()
    .verbs(Verbs::READ_ONLY)
    .computed(&PodMetricsComputed)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// Renders a usage as metrics-server does: CPU in nanocores, memory in Ki when whole.
pub fn usage_list(usage: Usage) -> Value {
    let memory = if usage.memory_bytes.is_multiple_of(1024) {
        format!("{}Ki", usage.memory_bytes / 1024)
    } else {
        usage.memory_bytes.to_string()
    };
    json!({
        "cpu": format!("{}n", u128::from(usage.cpu_millis) * 1_000_000),
        "memory": memory,
    })
}

/// Every stored object of `def`.
async fn stored(storage: &dyn Storage, def: &ResourceDef) -> Result<Vec<Value>> {
    let listed = storage
        .list(storage::ListOptions {
            prefix: def.storage_prefix(None),
            ..storage::ListOptions::default()
        })
        .await
        .map_err(|e| ApiError::from_storage(e, def.group_resource(), ""))?;
    Ok(listed
        .kvs
        .iter()
        .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
        .collect())
}

/// The answer when nothing reports usage.
fn unavailable() -> ApiError {
    ApiError {
        code: 503,
        reason: "ServiceUnavailable",
        message: "the metrics API has no usage source: simulated pods report usage when the \
                  server runs in kcm up"
            .to_owned(),
        details: None,
        continue_token: None,
    }
}

fn metadata(obj: &Value, namespaced: bool, now: &str) -> Value {
    let mut meta = json!({
        "name": obj.at("/metadata/name").cloned().unwrap_or(Value::Null),
        "creationTimestamp": now,
    });
    if namespaced {
        meta["namespace"] = obj
            .at("/metadata/namespace")
            .cloned()
            .unwrap_or(Value::Null);
    }
    if let Some(labels) = obj.at("/metadata/labels") {
        meta["labels"] = labels.clone();
    }
    meta
}

/// The pods' per-container usages, keyed by the pod object.
fn pod_usages<'a>(
    pods: &'a [Value],
    source: &dyn crate::registry::usage::UsageSource,
    now: jiff::Timestamp,
) -> Vec<(&'a Value, Vec<(String, Usage)>)> {
    pods.iter()
        .filter_map(|p| source.pod(p, now).map(|u| (p, u)))
        .collect()
}

/// Computes the PodMetrics of every running pod.
#[derive(Debug)]
pub struct PodMetricsComputed;

impl Computed for PodMetricsComputed {
    fn objects<'a>(&'a self, server: &'a ServerView<'a>) -> BoxFuture<'a, Result<Vec<Value>>> {
        async move {
            let source = server.usage.get().ok_or_else(unavailable)?;
            let pods = stored(server.storage, &pod::PODS).await?;
            let now = jiff::Timestamp::now();
            let stamp = crate::object::now_rfc3339();
            Ok(pod_usages(&pods, source.as_ref(), now)
                .into_iter()
                .map(|(pod, containers)| {
                    json!({
                        "kind": "PodMetrics",
                        "apiVersion": "metrics.k8s.io/v1beta1",
                        "metadata": metadata(pod, true, &stamp),
                        "timestamp": stamp,
                        "window": WINDOW,
                        "containers": containers.into_iter().map(|(name, usage)| json!({
                            "name": name,
                            "usage": usage_list(usage),
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect())
        }
        .boxed()
    }
}

/// Computes the NodeMetrics of every node.
#[derive(Debug)]
pub struct NodeMetricsComputed;

impl Computed for NodeMetricsComputed {
    fn objects<'a>(&'a self, server: &'a ServerView<'a>) -> BoxFuture<'a, Result<Vec<Value>>> {
        async move {
            let source = server.usage.get().ok_or_else(unavailable)?;
            let nodes = stored(server.storage, &core::NODES).await?;
            let pods = stored(server.storage, &pod::PODS).await?;
            let now = jiff::Timestamp::now();
            let stamp = crate::object::now_rfc3339();
            let mut per_node: BTreeMap<&str, Usage> = BTreeMap::new();
            for (pod, containers) in pod_usages(&pods, source.as_ref(), now) {
                let Some(node) = pod.at("/spec/nodeName").and_then(Value::as_str) else {
                    continue;
                };
                let total = per_node.entry(node).or_default();
                for (_, usage) in containers {
                    total.cpu_millis = total.cpu_millis.saturating_add(usage.cpu_millis);
                    total.memory_bytes = total.memory_bytes.saturating_add(usage.memory_bytes);
                }
            }
            Ok(nodes
                .iter()
                .map(|node| {
                    let name = crate::object::name(node);
                    let pods = per_node.get(name).copied().unwrap_or_default();
                    let overhead = source.node_overhead(node);
                    let usage = Usage {
                        cpu_millis: pods.cpu_millis.saturating_add(overhead.cpu_millis),
                        memory_bytes: pods.memory_bytes.saturating_add(overhead.memory_bytes),
                    };
                    json!({
                        "kind": "NodeMetrics",
                        "apiVersion": "metrics.k8s.io/v1beta1",
                        "metadata": metadata(node, false, &stamp),
                        "timestamp": stamp,
                        "window": WINDOW,
                        "usage": usage_list(usage),
                    })
                })
                .collect())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::registry::Registry;
    use crate::registry::list::ListOptions;
    use crate::registry::options::WriteOptions;
    use crate::registry::usage::UsageSource;
    use crate::storage::memory::MemoryStorage;

    /// Every running container uses 100m and 1Mi; nodes 50m and 2Mi on top.
    struct Flat;

    impl UsageSource for Flat {
        fn pod(&self, pod: &Value, _now: jiff::Timestamp) -> Option<Vec<(String, Usage)>> {
            if pod.at("/status/phase").and_then(Value::as_str) != Some("Running") {
                return None;
            }
            let containers = pod.at("/spec/containers")?.as_array()?;
            Some(
                containers
                    .iter()
                    .map(|c| {
                        let usage = Usage {
                            cpu_millis: 100,
                            memory_bytes: 1024 * 1024,
                        };
                        (c["name"].as_str().unwrap_or("").to_owned(), usage)
                    })
                    .collect(),
            )
        }

        fn node_overhead(&self, _node: &Value) -> Usage {
            Usage {
                cpu_millis: 50,
                memory_bytes: 2 * 1024 * 1024,
            }
        }
    }

    async fn seeded() -> Registry {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        let opts = WriteOptions::default();
        registry
            .create(
                &crate::resources::namespace::NAMESPACES,
                "",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
                &opts,
            )
            .await
            .expect("namespace");
        registry
            .create(
                &core::NODES,
                "",
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "a"}}}),
                &opts,
            )
            .await
            .expect("node");
        for (name, phase) in [
            ("web-1", "Running"),
            ("web-2", "Running"),
            ("pending", "Pending"),
        ] {
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": {"app": name.split('-').next()}},
                "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "x"}, {"name": "side", "image": "x"}]}});
            registry
                .create(&pod::PODS, "default", pod, &opts)
                .await
                .expect("pod");
            let mut stored = registry
                .get(&pod::PODS, "default", name)
                .await
                .expect("get");
            stored["status"] = json!({"phase": phase});
            registry
                .update(
                    &pod::PODS,
                    "default",
                    name,
                    stored,
                    crate::registry::update::Target::Status,
                    &opts,
                )
                .await
                .expect("status");
        }
        registry
    }

    #[test]
    fn usage_renders_as_metrics_server_does() {
        let v = usage_list(Usage {
            cpu_millis: 150,
            memory_bytes: 3 * 1024 * 1024,
        });
        assert_eq!(v, json!({"cpu": "150000000n", "memory": "3072Ki"}));
        assert_eq!(
            usage_list(Usage {
                cpu_millis: 0,
                memory_bytes: 1000
            })["memory"],
            "1000"
        );
    }

    #[tokio::test]
    async fn pods_and_nodes_report_the_sources_usage() {
        let registry = seeded().await;
        let err = registry
            .list(&POD_METRICS, Some("default"), &ListOptions::default())
            .await
            .expect_err("no source yet");
        assert_eq!(err.code, 503);

        registry.usage().set(Arc::new(Flat));
        let list = registry
            .list(&POD_METRICS, Some("default"), &ListOptions::default())
            .await
            .expect("pod metrics");
        let items = list["items"].as_array().expect("items");
        let names: Vec<&str> = items.iter().map(crate::object::name).collect();
        assert_eq!(names, ["web-1", "web-2"], "only running pods report");
        assert_eq!(items[0]["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(
            items[0]["containers"][1],
            json!({"name": "side", "usage": {"cpu": "100000000n", "memory": "1024Ki"}})
        );

        let elsewhere = registry
            .list(&POD_METRICS, Some("other"), &ListOptions::default())
            .await
            .expect("other namespace");
        assert_eq!(elsewhere["items"], json!([]));

        let node = registry
            .get(&NODE_METRICS, "", "n1")
            .await
            .expect("node metrics");
        // Two running pods of two containers at 100m/1Mi, plus 50m/2Mi overhead.
        assert_eq!(
            node["usage"],
            json!({"cpu": "450000000n", "memory": "6144Ki"})
        );
        assert_eq!(node["metadata"]["labels"], json!({"zone": "a"}));

        let got = registry.get(&POD_METRICS, "default", "pending").await;
        assert_eq!(got.map_err(|e| e.code).err(), Some(404));
    }
}
