//! The column definitions of every printer, as upstream's `AddHandlers` declares them.

use super::docs;

/// One `meta.k8s.io/v1` `TableColumnDefinition`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    /// The header, as upstream spells it (kubectl upper-cases it).
    pub name: &'static str,
    /// The OpenAPI type of the cells: `string`, `integer`, `boolean`, ...
    pub ty: &'static str,
    /// An OpenAPI format hint: `name` for the object's name column, else empty.
    pub format: &'static str,
    /// What the column shows.
    pub description: &'static str,
    /// 0 for default output, 1 for the extra `-o wide` columns.
    pub priority: i32,
}

const fn col(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty,
        format: "",
        description,
        priority: 0,
    }
}

const fn wide(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty,
        format: "",
        description,
        priority: 1,
    }
}

const NAME: Column = Column {
    name: "Name",
    ty: "string",
    format: "name",
    description: docs::NAME,
    priority: 0,
};
const AGE: Column = col("Age", "string", docs::CREATION_TIMESTAMP);
const CONTAINERS: Column = wide(
    "Containers",
    "string",
    "Names of each container in the template.",
);
const IMAGES: Column = wide(
    "Images",
    "string",
    "Images referenced by each container in the template.",
);

pub(super) const POD: &[Column] = &[
    NAME,
    col(
        "Ready",
        "string",
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    col(
        "Status",
        "string",
        "The aggregate status of the containers in this pod.",
    ),
    col(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    AGE,
    wide("IP", "string", docs::POD_IP),
    wide("Node", "string", docs::POD_NODE_NAME),
    wide("Nominated Node", "string", docs::POD_NOMINATED_NODE_NAME),
    wide("Readiness Gates", "string", docs::POD_READINESS_GATES),
];

pub(super) const POD_TEMPLATE: &[Column] = &[
    NAME,
    col(
        "Containers",
        "string",
        "Names of each container in the template.",
    ),
    col(
        "Images",
        "string",
        "Images referenced by each container in the template.",
    ),
    col("Pod Labels", "string", "The labels for the pod template."),
];

pub(super) const POD_DISRUPTION_BUDGET: &[Column] = &[
    NAME,
    col(
        "Min Available",
        "string",
        "The minimum number of pods that must be available.",
    ),
    col(
        "Max Unavailable",
        "string",
        "The maximum number of pods that may be unavailable.",
    ),
    col(
        "Allowed Disruptions",
        "integer",
        "Calculated number of pods that may be disrupted at this time.",
    ),
    AGE,
];

pub(super) const REPLICATION_CONTROLLER: &[Column] = &[
    NAME,
    col("Desired", "integer", docs::RC_SPEC_REPLICAS),
    col("Current", "integer", docs::RC_STATUS_REPLICAS),
    col("Ready", "integer", docs::RC_STATUS_READY_REPLICAS),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", docs::RC_SPEC_SELECTOR),
];

pub(super) const REPLICA_SET: &[Column] = &[
    NAME,
    col("Desired", "integer", docs::RS_SPEC_REPLICAS),
    col("Current", "integer", docs::RS_STATUS_REPLICAS),
    col("Ready", "integer", docs::RS_STATUS_READY_REPLICAS),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", docs::RS_SPEC_SELECTOR),
];

pub(super) const DAEMON_SET: &[Column] = &[
    NAME,
    col("Desired", "integer", docs::DS_DESIRED),
    col("Current", "integer", docs::DS_CURRENT),
    col("Ready", "integer", docs::DS_READY),
    col("Up-to-date", "integer", docs::DS_UPDATED),
    col("Available", "integer", docs::DS_AVAILABLE),
    col("Node Selector", "string", docs::POD_NODE_SELECTOR),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", docs::DS_SELECTOR),
];

pub(super) const JOB: &[Column] = &[
    NAME,
    col("Status", "string", "Status of the job."),
    col("Completions", "string", docs::JOB_SUCCEEDED),
    col("Duration", "string", "Time required to complete the job."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", docs::JOB_SELECTOR),
];

pub(super) const CRON_JOB: &[Column] = &[
    NAME,
    col("Schedule", "string", docs::CRONJOB_SCHEDULE),
    col("Timezone", "string", docs::CRONJOB_TIME_ZONE),
    col("Suspend", "boolean", docs::CRONJOB_SUSPEND),
    col("Active", "integer", docs::CRONJOB_ACTIVE),
    col("Last Schedule", "string", docs::CRONJOB_LAST_SCHEDULE),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", docs::JOB_SELECTOR),
];

pub(super) const SERVICE: &[Column] = &[
    NAME,
    col("Type", "string", docs::SVC_TYPE),
    col("Cluster-IP", "string", docs::SVC_CLUSTER_IP),
    col("External-IP", "string", docs::SVC_EXTERNAL_IPS),
    col("Port(s)", "string", docs::SVC_PORTS),
    AGE,
    wide("Selector", "string", docs::SVC_SELECTOR),
];

pub(super) const STATEFUL_SET: &[Column] = &[
    NAME,
    col("Ready", "string", "Number of the pod with ready state"),
    AGE,
    CONTAINERS,
    IMAGES,
];

pub(super) const ENDPOINTS: &[Column] = &[
    NAME,
    col("Endpoints", "string", docs::ENDPOINTS_SUBSETS),
    AGE,
];

pub(super) const NODE: &[Column] = &[
    NAME,
    col("Status", "string", "The status of the node"),
    col("Roles", "string", "The roles of the node"),
    AGE,
    col("Version", "string", docs::NODE_KUBELET_VERSION),
    wide("Internal-IP", "string", docs::NODE_ADDRESSES),
    wide("External-IP", "string", docs::NODE_ADDRESSES),
    wide("OS-Image", "string", docs::NODE_OS_IMAGE),
    wide("Kernel-Version", "string", docs::NODE_KERNEL_VERSION),
    wide("Container-Runtime", "string", docs::NODE_CONTAINER_RUNTIME),
];

pub(super) const EVENT: &[Column] = &[
    col("Last Seen", "string", docs::EVENT_LAST_TIMESTAMP),
    col("Type", "string", docs::EVENT_TYPE),
    col("Reason", "string", docs::EVENT_REASON),
    col("Object", "string", docs::EVENT_INVOLVED_OBJECT),
    wide("Subobject", "string", docs::OBJECT_REFERENCE_FIELD_PATH),
    wide("Source", "string", docs::EVENT_SOURCE),
    col("Message", "string", docs::EVENT_MESSAGE),
    wide("First Seen", "string", docs::EVENT_FIRST_TIMESTAMP),
    wide("Count", "string", docs::EVENT_COUNT),
    Column {
        priority: 1,
        ..NAME
    },
];

pub(super) const NAMESPACE: &[Column] = &[
    NAME,
    col("Status", "string", "The status of the namespace"),
    AGE,
];

pub(super) const SECRET: &[Column] = &[
    NAME,
    col("Type", "string", docs::SECRET_TYPE),
    col("Data", "string", docs::SECRET_DATA),
    AGE,
];

pub(super) const SERVICE_ACCOUNT: &[Column] = &[
    NAME,
    col("Secrets", "string", docs::SERVICE_ACCOUNT_SECRETS),
    AGE,
];

pub(super) const DEPLOYMENT: &[Column] = &[
    NAME,
    col("Ready", "string", "Number of the pod with ready state"),
    col("Up-to-date", "string", docs::DEPLOY_UPDATED),
    col("Available", "string", docs::DEPLOY_AVAILABLE),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", docs::DEPLOY_SELECTOR),
];

pub(super) const CONFIG_MAP: &[Column] = &[NAME, col("Data", "string", docs::CONFIG_MAP_DATA), AGE];

pub(super) const LEASE: &[Column] = &[NAME, col("Holder", "string", docs::LEASE_HOLDER), AGE];

pub(super) const CONTROLLER_REVISION: &[Column] = &[
    NAME,
    col("Controller", "string", "Controller of the object"),
    col("Revision", "string", docs::CONTROLLER_REVISION_REVISION),
    AGE,
];

pub(super) const PRIORITY_CLASS: &[Column] = &[
    NAME,
    col("Value", "integer", docs::PRIORITY_CLASS_VALUE),
    col(
        "Global-Default",
        "boolean",
        docs::PRIORITY_CLASS_GLOBAL_DEFAULT,
    ),
    AGE,
    col(
        "PreemptionPolicy",
        "string",
        docs::PRIORITY_CLASS_PREEMPTION_POLICY,
    ),
];

pub(super) const ENDPOINT_SLICE: &[Column] = &[
    NAME,
    col("AddressType", "string", docs::ENDPOINT_SLICE_ADDRESS_TYPE),
    col("Ports", "string", docs::ENDPOINT_SLICE_PORTS),
    col("Endpoints", "string", docs::ENDPOINT_SLICE_ENDPOINTS),
    AGE,
];

pub(super) const PERSISTENT_VOLUME: &[Column] = &[
    NAME,
    col("Capacity", "string", docs::PV_CAPACITY),
    col("Access Modes", "string", docs::PV_ACCESS_MODES),
    col("Reclaim Policy", "string", docs::PV_RECLAIM_POLICY),
    col("Status", "string", docs::PV_PHASE),
    col("Claim", "string", docs::PV_CLAIM_REF),
    col("StorageClass", "string", "StorageClass of the pv"),
    col(
        "VolumeAttributesClass",
        "string",
        "VolumeAttributesClass of the pv",
    ),
    col("Reason", "string", docs::PV_REASON),
    AGE,
    wide("VolumeMode", "string", docs::PV_VOLUME_MODE),
];

pub(super) const PERSISTENT_VOLUME_CLAIM: &[Column] = &[
    NAME,
    col("Status", "string", docs::PVC_PHASE),
    col("Volume", "string", docs::PVC_VOLUME_NAME),
    col("Capacity", "string", docs::PVC_CAPACITY),
    col("Access Modes", "string", docs::PVC_ACCESS_MODES),
    col("StorageClass", "string", "StorageClass of the pvc"),
    col(
        "VolumeAttributesClass",
        "string",
        "VolumeAttributesClass of the pvc",
    ),
    AGE,
    wide("VolumeMode", "string", docs::PVC_VOLUME_MODE),
];

pub(super) const RESOURCE_QUOTA: &[Column] = &[
    NAME,
    AGE,
    col(
        "Request",
        "string",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
    ),
    col(
        "Limit",
        "string",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
    ),
];

pub(super) const COMPONENT_STATUS: &[Column] = &[
    NAME,
    col("Status", "string", "Status of the component conditions"),
    col("Message", "string", "Message of the component conditions"),
    col("Error", "string", "Error of the component conditions"),
];

pub(super) const HORIZONTAL_POD_AUTOSCALER: &[Column] = &[
    NAME,
    col("Reference", "string", docs::HPA_SCALE_TARGET_REF),
    col("Targets", "string", docs::HPA_METRICS),
    col("MinPods", "string", docs::HPA_MIN_REPLICAS),
    col("MaxPods", "string", docs::HPA_MAX_REPLICAS),
    col("Replicas", "string", docs::HPA_CURRENT_REPLICAS),
    AGE,
];

pub(super) const RUNTIME_CLASS: &[Column] = &[NAME, col("Handler", "string", ""), AGE];

/// Kinds without a printer: the object's name and creation time, as upstream's
/// `rest.DefaultTableConvertor` (`kubectl get roles` prints `NAME  CREATED AT`).
pub(super) const GENERIC: &[Column] = &[NAME, col("Created At", "date", docs::CREATION_TIMESTAMP)];

// ---- Issue 17b: RBAC, networking, storage, discovery, certificates, admission, flowcontrol,
// apiregistration (upstream's `AddHandlers`, and kube-aggregator's APIService table) ----

pub(super) const ROLE_BINDING: &[Column] = &[
    NAME,
    col("Role", "string", docs::ROLE_BINDING_ROLE_REF),
    AGE,
    wide("Users", "string", "Users in the roleBinding"),
    wide("Groups", "string", "Groups in the roleBinding"),
    wide(
        "ServiceAccounts",
        "string",
        "ServiceAccounts in the roleBinding",
    ),
];

pub(super) const CLUSTER_ROLE_BINDING: &[Column] = &[
    NAME,
    col("Role", "string", docs::CLUSTER_ROLE_BINDING_ROLE_REF),
    AGE,
    wide("Users", "string", "Users in the clusterRoleBinding"),
    wide("Groups", "string", "Groups in the clusterRoleBinding"),
    wide(
        "ServiceAccounts",
        "string",
        "ServiceAccounts in the clusterRoleBinding",
    ),
];

pub(super) const INGRESS: &[Column] = &[
    NAME,
    col("Class", "string", docs::INGRESS_CLASS),
    col(
        "Hosts",
        "string",
        "Hosts that incoming requests are matched against before the ingress rule",
    ),
    col(
        "Address",
        "string",
        "Address is a list containing ingress points for the load-balancer",
    ),
    col("Ports", "string", "Ports of TLS configurations that open"),
    AGE,
];

pub(super) const INGRESS_CLASS: &[Column] = &[
    NAME,
    col(
        "Controller",
        "string",
        "Controller that is responsible for handling this class",
    ),
    col(
        "Parameters",
        "string",
        "A reference to a resource with additional parameters",
    ),
    AGE,
];

pub(super) const NETWORK_POLICY: &[Column] = &[
    NAME,
    col("Pod-Selector", "string", docs::NETWORK_POLICY_POD_SELECTOR),
    AGE,
];

pub(super) const SERVICE_CIDR: &[Column] =
    &[NAME, col("CIDRs", "string", docs::SERVICE_CIDR_CIDRS), AGE];

/// Upstream declares no AGE column for IPAddresses (its row function computes one that
/// the table drops).
pub(super) const IP_ADDRESS: &[Column] = &[
    NAME,
    col("ParentRef", "string", docs::IP_ADDRESS_PARENT_REF),
];

pub(super) const STORAGE_CLASS: &[Column] = &[
    NAME,
    col("Provisioner", "string", docs::STORAGE_CLASS_PROVISIONER),
    col(
        "ReclaimPolicy",
        "string",
        docs::STORAGE_CLASS_RECLAIM_POLICY,
    ),
    col(
        "VolumeBindingMode",
        "string",
        docs::STORAGE_CLASS_VOLUME_BINDING_MODE,
    ),
    col(
        "AllowVolumeExpansion",
        "string",
        docs::STORAGE_CLASS_ALLOW_VOLUME_EXPANSION,
    ),
    AGE,
];

pub(super) const VOLUME_ATTRIBUTES_CLASS: &[Column] = &[
    NAME,
    col(
        "DriverName",
        "string",
        docs::VOLUME_ATTRIBUTES_CLASS_DRIVER_NAME,
    ),
    AGE,
];

/// DeviceClasses and ResourceClaimTemplates (upstream's columns of both).
pub(super) const NAME_AND_AGE: &[Column] = &[NAME, AGE];

pub(super) const RESOURCE_CLAIM: &[Column] = &[
    NAME,
    col(
        "State",
        "string",
        "A summary of the current state (allocated, pending, reserved, etc.).",
    ),
    AGE,
];

pub(super) const RESOURCE_SLICE: &[Column] = &[
    NAME,
    col("Node", "string", docs::RESOURCE_SLICE_NODE_NAME),
    col("Driver", "string", docs::RESOURCE_SLICE_DRIVER),
    col("Pool", "string", docs::RESOURCE_POOL_NAME),
    AGE,
];

pub(super) const CSI_DRIVER: &[Column] = &[
    NAME,
    col(
        "AttachRequired",
        "boolean",
        docs::CSI_DRIVER_ATTACH_REQUIRED,
    ),
    col(
        "PodInfoOnMount",
        "boolean",
        docs::CSI_DRIVER_POD_INFO_ON_MOUNT,
    ),
    col(
        "StorageCapacity",
        "boolean",
        docs::CSI_DRIVER_STORAGE_CAPACITY,
    ),
    col("TokenRequests", "string", docs::CSI_DRIVER_TOKEN_REQUESTS),
    col(
        "RequiresRepublish",
        "boolean",
        docs::CSI_DRIVER_REQUIRES_REPUBLISH,
    ),
    col("Modes", "string", docs::CSI_DRIVER_VOLUME_LIFECYCLE_MODES),
    AGE,
];

pub(super) const CSI_NODE: &[Column] = &[
    NAME,
    col(
        "Drivers",
        "integer",
        "Drivers indicates the number of CSI drivers registered on the node",
    ),
    AGE,
];

pub(super) const CSI_STORAGE_CAPACITY: &[Column] = &[
    NAME,
    col(
        "StorageClassName",
        "string",
        docs::CSI_STORAGE_CAPACITY_STORAGE_CLASS_NAME,
    ),
    col("Capacity", "string", docs::CSI_STORAGE_CAPACITY_CAPACITY),
];

pub(super) const VOLUME_ATTACHMENT: &[Column] = &[
    NAME,
    Column {
        format: "name",
        ..col("Attacher", "string", docs::VOLUME_ATTACHMENT_ATTACHER)
    },
    col("PV", "string", docs::VOLUME_ATTACHMENT_PV),
    col("Node", "string", docs::VOLUME_ATTACHMENT_NODE),
    col("Attached", "boolean", docs::VOLUME_ATTACHMENT_ATTACHED),
    AGE,
];

pub(super) const CERTIFICATE_SIGNING_REQUEST: &[Column] = &[
    NAME,
    AGE,
    col("SignerName", "string", docs::CSR_SIGNER_NAME),
    col("Requestor", "string", docs::CSR_REQUEST),
    col("RequestedDuration", "string", docs::CSR_EXPIRATION_SECONDS),
    col("Condition", "string", docs::CSR_CONDITIONS),
];

pub(super) const WEBHOOK_CONFIGURATION: &[Column] = &[
    NAME,
    col(
        "Webhooks",
        "integer",
        "Webhooks indicates the number of webhooks registered in this configuration",
    ),
    AGE,
];

pub(super) const VALIDATING_ADMISSION_POLICY: &[Column] = &[
    NAME,
    col(
        "Validations",
        "integer",
        "Validations indicates the number of validation rules defined in this configuration",
    ),
    col(
        "ParamKind",
        "string",
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    AGE,
];

pub(super) const MUTATING_ADMISSION_POLICY: &[Column] = &[
    NAME,
    col(
        "Mutations",
        "integer",
        "Mutation indicates the number of mutations rules defined in this configuration",
    ),
    col(
        "ParamKind",
        "string",
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    AGE,
];

/// The validating and the mutating policy bindings' columns (upstream defines the same ones
/// twice).
pub(super) const VALIDATING_ADMISSION_POLICY_BINDING: &[Column] = &[
    NAME,
    col(
        "PolicyName",
        "string",
        "PolicyName indicates the policy definition which the policy binding binded to",
    ),
    col(
        "ParamRef",
        "string",
        "ParamRef indicates the param resource which sets the configration param",
    ),
    AGE,
];

pub(super) const FLOW_SCHEMA: &[Column] = &[
    NAME,
    col("PriorityLevel", "string", docs::FLOW_SCHEMA_PRIORITY_LEVEL),
    col(
        "MatchingPrecedence",
        "string",
        docs::FLOW_SCHEMA_MATCHING_PRECEDENCE,
    ),
    col(
        "DistinguisherMethod",
        "string",
        docs::FLOW_SCHEMA_DISTINGUISHER_METHOD,
    ),
    AGE,
    col(
        "MissingPL",
        "string",
        "references a broken or non-existent PriorityLevelConfiguration",
    ),
];

pub(super) const PRIORITY_LEVEL_CONFIGURATION: &[Column] = &[
    NAME,
    col("Type", "string", docs::PRIORITY_LEVEL_TYPE),
    col(
        "NominalConcurrencyShares",
        "string",
        docs::PRIORITY_LEVEL_NOMINAL_CONCURRENCY_SHARES,
    ),
    col("Queues", "string", docs::PRIORITY_LEVEL_QUEUES),
    col("HandSize", "string", docs::PRIORITY_LEVEL_HAND_SIZE),
    col(
        "QueueLengthLimit",
        "string",
        docs::PRIORITY_LEVEL_QUEUE_LENGTH_LIMIT,
    ),
    AGE,
];

pub(super) const API_SERVICE: &[Column] = &[
    NAME,
    col(
        "Service",
        "string",
        "The reference to the service that hosts the API endpoint.",
    ),
    col("Available", "string", "Whether this service is available."),
    AGE,
];
