//! Admission: kube-apiserver's in-tree admission plugins behind one [`Plugin`] trait, run as a [`Chain`] in upstream's order (every mutating phase before any validating phase).
//!
//! Start at [`interfaces`] (the plugin trait), [`source`] (what a plugin may read) and
//! [`attributes`] (upstream's `admission.Attributes`: operation, resource, subresource,
//! namespace, name, object, old object, user, dry run, and the warnings collected). The
//! [`plugins`] file names every plugin in upstream's `AllOrderedPlugins` order with the
//! default-on set, and [`chain`] builds the configured chain from
//! `--enable-admission-plugins` / `--disable-admission-plugins`. One file per plugin below;
//! [`webhook`] holds the two webhook plugins; [`match_conditions`] the CEL conditions they
//! share; [`validating_policy`] and [`mutating_policy`] the two admission policy plugins (the
//! mutating one runs on the validating one's matching, params and CEL runtime).

pub mod attributes;
pub mod chain;
pub mod default_storage_class;
pub mod default_toleration_seconds;
pub mod interfaces;
pub mod limit_ranger;
pub mod match_conditions;
pub mod mutating_policy;
pub mod namespace_lifecycle;
pub mod persistent_volume_claim_resize;
pub mod plugins;
pub mod pod_security;
pub mod priority;
pub mod reinvocation;
pub mod resource_quota;
pub mod runtime_class;
pub mod service_account;
pub mod source;
pub mod storage_object_in_use_protection;
pub mod taint_nodes_by_condition;
#[cfg(test)]
pub mod testing;
pub mod validating_policy;
pub mod webhook;

pub use attributes::{Attributes, Operation};
pub use chain::Chain;
pub use interfaces::Plugin;
pub use plugins::{AdmissionConfig, Error};
pub use source::ObjectSource;
