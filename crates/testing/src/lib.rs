//! Fluent builders of Kubernetes objects for kcm's unit tests, integration tests and benches.
//!
//! Where to start: `use kcm_testing::prelude::*;`, then one entry function per kind —
//! [`pod`], [`replica_set`], [`deployment`], [`node`], [`service`], [`namespace`] — chained
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
//! templates) through [`PodSpecBuilder`]; `with(|obj| ...)` covers the rare field no setter
//! names. The parts objects are made of have their own small builders: [`owner_ref`] /
//! [`controller_ref_of`], [`selector`], [`pod_template`], [`container`],
//! [`container_status`], [`pod_condition`], [`node_condition`], [`taint`], [`toleration`].
//!
//! This crate depends on `k8s-openapi` and `jiff` only, never on another kcm crate, so every
//! crate of the workspace (machinery included) can dev-depend on it without a cycle.

mod conditions;
mod container;
mod deployment;
mod meta;
mod namespace;
mod node;
mod owner;
mod pod;
mod pod_spec;
mod replica_set;
mod selector;
mod service;
mod taint;
mod template;

pub use conditions::{NodeConditionBuilder, PodConditionBuilder, node_condition, pod_condition};
pub use container::{ContainerBuilder, ContainerStatusBuilder, container, container_status};
pub use deployment::{DeploymentBuilder, deployment};
pub use meta::{MetaBuilder, ObjectMetaBuilder, labels, meta, quantities};
pub use namespace::{NamespaceBuilder, namespace};
pub use node::{NodeBuilder, node};
pub use owner::{OwnerRefBuilder, controller_ref_of, owner_ref, owner_ref_of};
pub use pod::{PodBuilder, pod};
pub use pod_spec::PodSpecBuilder;
pub use replica_set::{ReplicaSetBuilder, replica_set};
pub use selector::{SelectorBuilder, label_selector, selector};
pub use service::{ServiceBuilder, service};
pub use taint::{TaintBuilder, TolerationBuilder, taint, toleration};
pub use template::{PodTemplateBuilder, pod_template};

/// Everything a test needs in one import: the entry functions, the builder traits and the
/// builder types.
pub mod prelude {
    pub use super::*;
}
