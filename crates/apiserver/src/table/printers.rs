//! The printer of every kind kcm knows, as upstream's `AddHandlers` pairs column definitions with a row function; a [`ResourceDef`](crate::registry::resource::ResourceDef) names one.
//!
//! Printers read an object in its stored form (events.k8s.io/v1 events are printed from the
//! core/v1 object they are stored as). Kinds kcm does not serve yet have their printer here
//! too, so serving one is a matter of naming it in the entry.

use super::{Printer, autoscaling, cluster, columns, core, pod, workloads};

/// NAME and AGE, for kinds without a printer (upstream's default table convertor).
pub const GENERIC: Printer = Printer::GENERIC;
/// core/v1 Pod: READY, STATUS, RESTARTS, AGE; IP, NODE, ... wide.
pub const POD: Printer = Printer::new(columns::POD, pod::row);
/// core/v1 PodTemplate.
pub const POD_TEMPLATE: Printer = Printer::new(columns::POD_TEMPLATE, workloads::pod_template);
/// core/v1 ReplicationController.
pub const REPLICATION_CONTROLLER: Printer = Printer::new(
    columns::REPLICATION_CONTROLLER,
    workloads::replication_controller,
);
/// apps/v1 ReplicaSet.
pub const REPLICA_SET: Printer = Printer::new(columns::REPLICA_SET, workloads::replica_set);
/// apps/v1 Deployment.
pub const DEPLOYMENT: Printer = Printer::new(columns::DEPLOYMENT, workloads::deployment);
/// apps/v1 DaemonSet.
pub const DAEMON_SET: Printer = Printer::new(columns::DAEMON_SET, workloads::daemon_set);
/// apps/v1 StatefulSet.
pub const STATEFUL_SET: Printer = Printer::new(columns::STATEFUL_SET, workloads::stateful_set);
/// batch/v1 Job.
pub const JOB: Printer = Printer::new(columns::JOB, workloads::job);
/// batch/v1 CronJob.
pub const CRON_JOB: Printer = Printer::new(columns::CRON_JOB, workloads::cron_job);
/// apps/v1 ControllerRevision.
pub const CONTROLLER_REVISION: Printer =
    Printer::new(columns::CONTROLLER_REVISION, workloads::controller_revision);
/// core/v1 Node.
pub const NODE: Printer = Printer::new(columns::NODE, core::node);
/// core/v1 Namespace.
pub const NAMESPACE: Printer = Printer::new(columns::NAMESPACE, core::namespace);
/// core/v1 Service.
pub const SERVICE: Printer = Printer::new(columns::SERVICE, core::service);
/// core/v1 Endpoints.
pub const ENDPOINTS: Printer = Printer::new(columns::ENDPOINTS, core::endpoints);
/// discovery.k8s.io/v1 EndpointSlice.
pub const ENDPOINT_SLICE: Printer = Printer::new(columns::ENDPOINT_SLICE, core::endpoint_slice);
/// core/v1 Event (and events.k8s.io/v1 Event, stored as core/v1).
pub const EVENT: Printer = Printer::new(columns::EVENT, core::event);
/// core/v1 ConfigMap.
pub const CONFIG_MAP: Printer = Printer::new(columns::CONFIG_MAP, core::config_map);
/// core/v1 Secret.
pub const SECRET: Printer = Printer::new(columns::SECRET, core::secret);
/// core/v1 ServiceAccount.
pub const SERVICE_ACCOUNT: Printer = Printer::new(columns::SERVICE_ACCOUNT, core::service_account);
/// coordination.k8s.io/v1 Lease.
pub const LEASE: Printer = Printer::new(columns::LEASE, core::lease);
/// policy/v1 PodDisruptionBudget.
pub const POD_DISRUPTION_BUDGET: Printer =
    Printer::new(columns::POD_DISRUPTION_BUDGET, core::pod_disruption_budget);
/// scheduling.k8s.io/v1 PriorityClass.
pub const PRIORITY_CLASS: Printer = Printer::new(columns::PRIORITY_CLASS, core::priority_class);

/// core/v1 PersistentVolume.
pub const PERSISTENT_VOLUME: Printer =
    Printer::new(columns::PERSISTENT_VOLUME, cluster::persistent_volume);
/// core/v1 PersistentVolumeClaim.
pub const PERSISTENT_VOLUME_CLAIM: Printer = Printer::new(
    columns::PERSISTENT_VOLUME_CLAIM,
    cluster::persistent_volume_claim,
);
/// core/v1 ResourceQuota.
pub const RESOURCE_QUOTA: Printer = Printer::new(columns::RESOURCE_QUOTA, cluster::resource_quota);
/// core/v1 ComponentStatus.
pub const COMPONENT_STATUS: Printer =
    Printer::new(columns::COMPONENT_STATUS, cluster::component_status);
/// autoscaling HorizontalPodAutoscaler (both versions, printed from the stored v2 form).
pub const HORIZONTAL_POD_AUTOSCALER: Printer = Printer::new(
    columns::HORIZONTAL_POD_AUTOSCALER,
    autoscaling::horizontal_pod_autoscaler,
);
/// node.k8s.io/v1 RuntimeClass.
pub const RUNTIME_CLASS: Printer = Printer::new(columns::RUNTIME_CLASS, cluster::runtime_class);
/// NAME and CREATED AT: upstream's default table convertor, which built-in kinds without a
/// printer of their own use (limitranges).
pub const CREATED_AT: Printer = Printer::new(columns::CREATED_AT, cluster::created_at);

/// Every printer above, named, for tests over all of them.
#[cfg(test)]
pub(super) const ALL: &[(&str, Printer)] = &[
    ("generic", GENERIC),
    ("pods", POD),
    ("podtemplates", POD_TEMPLATE),
    ("replicationcontrollers", REPLICATION_CONTROLLER),
    ("replicasets", REPLICA_SET),
    ("deployments", DEPLOYMENT),
    ("daemonsets", DAEMON_SET),
    ("statefulsets", STATEFUL_SET),
    ("jobs", JOB),
    ("cronjobs", CRON_JOB),
    ("controllerrevisions", CONTROLLER_REVISION),
    ("nodes", NODE),
    ("namespaces", NAMESPACE),
    ("services", SERVICE),
    ("endpoints", ENDPOINTS),
    ("endpointslices", ENDPOINT_SLICE),
    ("events", EVENT),
    ("configmaps", CONFIG_MAP),
    ("secrets", SECRET),
    ("serviceaccounts", SERVICE_ACCOUNT),
    ("leases", LEASE),
    ("poddisruptionbudgets", POD_DISRUPTION_BUDGET),
    ("priorityclasses", PRIORITY_CLASS),
    ("persistentvolumes", PERSISTENT_VOLUME),
    ("persistentvolumeclaims", PERSISTENT_VOLUME_CLAIM),
    ("resourcequotas", RESOURCE_QUOTA),
    ("componentstatuses", COMPONENT_STATUS),
    ("horizontalpodautoscalers", HORIZONTAL_POD_AUTOSCALER),
    ("runtimeclasses", RUNTIME_CLASS),
    ("limitranges", CREATED_AT),
];
