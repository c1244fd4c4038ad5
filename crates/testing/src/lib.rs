//! Fluent builders of Kubernetes objects for kcm's unit tests, integration tests and benches.
//!
//! Where to start: `use kcm_testing::prelude::*;`, then one entry function per kind —
//! [`pod`], [`replica_set`], [`deployment`], [`daemon_set`], [`stateful_set`],
//! [`replication_controller`], [`pvc`], [`pv`], [`volume_attributes_class`], [`job`], [`cron_job`], [`node`], [`service`],
//! [`namespace`] — chained
//! with setters and finished with `build()` (or `arc()` for the `Arc<T>` caches hand out):
//!
//! ```
//! use kcm_testing::prelude::*;
//!
//! let rs = replica_set("web").namespace("default").replicas(3).selecting(&[("app", "web")]).build();
//! let p = pod("web-1")
//!     .namespace("default")
//!     .labels(&[("app", "web")])
//!     .owner(controller_ref_of(&rs))
//!     .node("node-1")
//!     .phase("Running")
//!     .ready()
//!     .build();
//! assert_eq!(p.metadata.owner_references.as_ref().map(Vec::len), Some(1));
//! ```
//!
//! Every builder starts from the type's `Default` with only the name set: nothing is
//! defaulted behind the test's back (no namespace, UID, spec or status), so a fixture says
//! everything it relies on. A setter creates the `Option` it writes into on first use.
//! Metadata setters are shared through [`MetaBuilder`], pod-spec setters (pods and pod
//! templates) through [`PodSpecBuilder`], replicas/selector/template setters (ReplicaSets,
//! Deployments and StatefulSets) through [`WorkloadBuilder`]; `with(|obj| ...)` covers the rare field no setter
//! names. The parts objects are made of have their own small builders: [`owner_ref`] /
//! [`controller_ref_of`], [`object_ref_of`], [`selector`], [`pod_template`], [`container`],
//! [`container_status`], [`pod_condition`], [`node_condition`], [`job_condition`], [`taint`],
//! [`toleration`].
//!
//! This crate depends on `k8s-openapi` and `jiff` only, never on another kcm crate, so every
//! crate of the workspace (machinery included) can dev-depend on it without a cycle.

#[macro_use]
mod macros;

mod conditions;
mod container;
mod cron_job;
mod daemon_set;
mod deployment;
mod endpoints;
mod job;
mod meta;
mod namespace;
mod node;
mod object_ref;
mod owner;
mod pod;
mod pod_spec;
mod pv;
mod pvc;
mod replica_set;
mod replication_controller;
mod secret;
mod selector;
mod service;
mod stateful_set;
mod taint;
mod template;
mod volume_attributes_class;
mod workload;

pub use conditions::{
    ConditionBuilder, ConditionFields, JobConditionBuilder, NodeConditionBuilder,
    PodConditionBuilder, job_condition, node_condition, pod_condition,
};
pub use container::{ContainerBuilder, ContainerStatusBuilder, container, container_status};
pub use cron_job::{CronJobBuilder, cron_job};
pub use daemon_set::{DaemonSetBuilder, TEMPLATE_GENERATION_ANNOTATION, daemon_set};
pub use deployment::{DeploymentBuilder, deployment};
pub use endpoints::{
    EndpointSliceBuilder, EndpointsBuilder, SliceEndpointBuilder, endpoint_slice, endpoints,
    slice_endpoint,
};
pub use job::{JobBuilder, job};
pub use meta::{MetaBuilder, ObjectMetaBuilder, labels, meta, quantities};
pub use namespace::{NamespaceBuilder, namespace};
pub use node::{NodeBuilder, node};
pub use object_ref::object_ref_of;
pub use owner::{OwnerRefBuilder, controller_ref_of, owner_ref, owner_ref_of};
pub use pod::{PodBuilder, pod};
pub use pod_spec::PodSpecBuilder;
pub use pv::{PvBuilder, pv};
pub use pvc::{PvcBuilder, pvc};
pub use replica_set::{ReplicaSetBuilder, replica_set};
pub use replication_controller::{ReplicationControllerBuilder, replication_controller};
pub use secret::bootstrap_token_secret;
pub use selector::{SelectorBuilder, label_selector, selector};
pub use service::{ServiceBuilder, service};
pub use stateful_set::{StatefulSetBuilder, stateful_set};
pub use taint::{TaintBuilder, TolerationBuilder, taint, toleration};
pub use template::{PodTemplateBuilder, pod_template};
pub use volume_attributes_class::{VolumeAttributesClassBuilder, volume_attributes_class};
pub use workload::WorkloadBuilder;

/// Everything a test needs in one import: the entry functions, the builder traits and the
/// builder types.
pub mod prelude {
    pub use super::*;
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::prelude::*;

    /// Every object builder starts from the type's default with only the name set: no
    /// namespace, spec or status appears unless a setter asks for it.
    #[test]
    fn object_builders_default_to_a_name_and_nothing_else() {
        struct Case {
            name: &'static str,
            built: Value,
            want: Value,
        }
        let named = |api_version: &str, kind: &str| json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
        let json = |obj: Result<Value, serde_json::Error>| obj.unwrap_or_default();
        let cases = [
            Case {
                name: "pod",
                built: json(serde_json::to_value(pod("x").build())),
                want: named("v1", "Pod"),
            },
            Case {
                name: "unnamed pod",
                built: json(serde_json::to_value(PodBuilder::default().build())),
                want: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}),
            },
            Case {
                name: "replica set",
                built: json(serde_json::to_value(replica_set("x").build())),
                want: named("apps/v1", "ReplicaSet"),
            },
            Case {
                name: "deployment",
                built: json(serde_json::to_value(deployment("x").build())),
                want: named("apps/v1", "Deployment"),
            },
            Case {
                name: "job",
                built: json(serde_json::to_value(job("x").build())),
                want: named("batch/v1", "Job"),
            },
            Case {
                name: "cron job",
                built: json(serde_json::to_value(cron_job("x").build())),
                // v1.36's CronJob has a required spec, so the type always carries one.
                want: json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "x"},
                    "spec": {"jobTemplate": {}, "schedule": ""}}),
            },
            Case {
                name: "node",
                built: json(serde_json::to_value(node("x").build())),
                want: named("v1", "Node"),
            },
            Case {
                name: "unnamed node",
                built: json(serde_json::to_value(NodeBuilder::default().build())),
                want: json!({"apiVersion": "v1", "kind": "Node", "metadata": {}}),
            },
            Case {
                name: "service",
                built: json(serde_json::to_value(service("x").build())),
                want: named("v1", "Service"),
            },
            Case {
                name: "namespace",
                built: json(serde_json::to_value(namespace("x").build())),
                want: named("v1", "Namespace"),
            },
            Case {
                name: "metadata",
                built: json(serde_json::to_value(meta("x").build())),
                want: json!({"name": "x"}),
            },
            Case {
                name: "pod template",
                built: json(serde_json::to_value(pod_template().build())),
                want: json!({}),
            },
        ];
        for case in cases {
            assert_eq!(case.built, case.want, "{}", case.name);
        }
    }
}
