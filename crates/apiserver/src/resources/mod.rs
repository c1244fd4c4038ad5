//! The served resources: one `Strategy` per resource, registered in [`all`].

pub mod apps;
pub mod core;
pub mod event;
pub mod namespace;
pub mod pod;
pub mod pod_defaults;
pub mod policy;
pub mod quantities;
pub mod service;
pub mod simple;

use std::sync::Arc;

use crate::registry::strategy::Strategy;

/// Every served resource, in discovery order.
pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![
        Arc::new(namespace::NamespaceStrategy),
        Arc::new(pod::PodStrategy),
        Arc::new(core::NodeStrategy),
        Arc::new(event::EventStrategy(event::EventVersion::Core)),
        Arc::new(core::configmaps()),
        Arc::new(core::SecretStrategy),
        Arc::new(service::ServiceStrategy),
        Arc::new(core::serviceaccounts()),
        Arc::new(core::endpoints()),
        Arc::new(apps::WorkloadStrategy(apps::Workload::Deployment)),
        Arc::new(apps::WorkloadStrategy(apps::Workload::ReplicaSet)),
        Arc::new(apps::WorkloadStrategy(apps::Workload::StatefulSet)),
        Arc::new(apps::WorkloadStrategy(apps::Workload::DaemonSet)),
        Arc::new(policy::leases()),
        Arc::new(event::EventStrategy(event::EventVersion::EventsV1)),
        Arc::new(policy::PdbStrategy),
    ]
}
