//! What a simulated node looks like: its Node object, its heartbeat Lease and its status.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};

/// Annotation on a Node: `stopped` halts its Lease renewals and status posts until removed.
pub const ANNOTATION_HEARTBEAT: &str = "sim.kcm.io/heartbeat";
/// Annotation every simulated node carries, so `kcm sim` only manages its own nodes.
pub const ANNOTATION_SIMULATED: &str = "sim.kcm.io/simulated";
/// Annotation the kubelet sets when the attach/detach controller attaches its volumes
/// (`--enable-controller-attach-detach`, on by default); the simulated kubelet leaves it to kcm.
pub const ANNOTATION_CONTROLLER_MANAGED_ATTACH_DETACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";
/// The namespace of node heartbeat Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// How long a node Lease is valid (the kubelet's default `nodeLeaseDurationSeconds`).
pub const NODE_LEASE_DURATION_SECONDS: i32 = 40;
/// The zones simulated nodes are spread over, round-robin.
pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// The default prefix of simulated node names (`kcm-node-0`, `kcm-node-1`, ...).
pub const DEFAULT_NODE_PREFIX: &str = "kcm-node";

/// The shape of the simulated nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTemplate {
    /// Node names are `<name_prefix>-<index>`.
    pub name_prefix: String,
    /// CPU capacity, e.g. `8`.
    pub cpu: String,
    /// Memory capacity, e.g. `32Gi`.
    pub memory: String,
    /// Pod capacity, e.g. `110`.
    pub pods: String,
    /// The kubelet version reported in `nodeInfo`.
    pub kubelet_version: String,
}

impl Default for NodeTemplate {
    fn default() -> Self {
        Self {
            name_prefix: DEFAULT_NODE_PREFIX.into(),
            cpu: "8".into(),
            memory: "32Gi".into(),
            pods: "110".into(),
            kubelet_version: "v1.36.0".into(),
        }
    }
}

impl NodeTemplate {
    /// The name of the `index`-th simulated node.
    pub fn node_name(&self, index: usize) -> String {
        format!("{}-{index}", self.name_prefix)
    }
}

/// The `index`-th node's pod CIDR: `10.244.<index>.0/24` (up to 65536 nodes over two octets).
pub fn pod_cidr(index: usize) -> (Ipv4Addr, String) {
    let hi = ((index >> 8) & 0xff) as u8;
    let lo = (index & 0xff) as u8;
    let base = Ipv4Addr::new(10, 244u8.wrapping_add(hi), lo, 0);
    (base, format!("{base}/24"))
}

/// The `index`-th node's InternalIP: `10.0.<hi>.<lo>` offset by 10.
pub fn internal_ip(index: usize) -> Ipv4Addr {
    let n = index + 10;
    Ipv4Addr::new(10, 0, ((n >> 8) & 0xff) as u8, (n & 0xff) as u8)
}

/// The node's conditions as a healthy kubelet posts them, with heartbeat `now`.
pub fn healthy_conditions(now: jiff::Timestamp, since: jiff::Timestamp) -> Vec<NodeCondition> {
    let condition = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(since)),
    };
    vec![
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        condition(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        ),
    ]
}

/// The Node object the `index`-th simulated node registers.
pub fn build_node(index: usize, template: &NodeTemplate, now: jiff::Timestamp) -> Node {
    let name = template.node_name(index);
    let zone = ZONES[index % ZONES.len()];
    let labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
        ("topology.kubernetes.io/zone", zone),
        ("topology.kubernetes.io/region", "kcm"),
        ("node.kubernetes.io/instance-type", "kcm-sim"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let annotations = [
        // node.alpha.kubernetes.io/ttl is the TTL controller's, not the kubelet's.
        (ANNOTATION_SIMULATED.to_string(), "true".to_string()),
        (
            ANNOTATION_CONTROLLER_MANAGED_ATTACH_DETACH.to_string(),
            "true".to_string(),
        ),
    ]
    .into_iter()
    .collect();
    let resources: BTreeMap<String, Quantity> = [
        ("cpu", template.cpu.as_str()),
        ("memory", template.memory.as_str()),
        ("pods", template.pods.as_str()),
        ("ephemeral-storage", "100Gi"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
    .collect();
    let (_, cidr) = pod_cidr(index);
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(cidr.clone()),
            pod_cidrs: Some(vec![cidr]),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(resources.clone()),
            allocatable: Some(resources),
            conditions: Some(healthy_conditions(now, now)),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: internal_ip(index).to_string(),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: name.clone(),
                },
            ]),
            node_info: Some(NodeSystemInfo {
                architecture: "amd64".into(),
                boot_id: format!("kcm-sim-boot-{index}"),
                container_runtime_version: "kcm-sim://0.1.0".into(),
                kernel_version: "6.1.0-kcm-sim".into(),
                kube_proxy_version: String::new(),
                kubelet_version: template.kubelet_version.clone(),
                machine_id: format!("kcm-sim-{index:08}"),
                operating_system: "linux".into(),
                os_image: "kcm simulated node".into(),
                system_uuid: format!("kcm-sim-{index:08}"),
                swap: None,
            }),
            phase: None,
            ..Default::default()
        }),
    }
}

/// The node's heartbeat Lease, owned by the Node (as the kubelet creates it).
pub fn build_lease(node: &Node, now: jiff::Timestamp) -> Lease {
    let name = node.metadata.name.clone().unwrap_or_default();
    Lease {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(NODE_LEASE_NAMESPACE.into()),
            owner_references: node.metadata.uid.clone().map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: name.clone(),
                    uid,
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name),
            lease_duration_seconds: Some(NODE_LEASE_DURATION_SECONDS),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

/// The condition types a healthy simulated kubelet reports, with their healthy status.
pub const MANAGED_CONDITIONS: [(&str, &str); 4] = [
    ("MemoryPressure", "False"),
    ("DiskPressure", "False"),
    ("PIDPressure", "False"),
    ("Ready", "True"),
];

/// Whether every condition the simulated kubelet manages has its healthy status (so a node
/// someone marked `Ready=Unknown`, as the node lifecycle controller does, is not healthy).
pub fn conditions_healthy(node: &Node) -> bool {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    MANAGED_CONDITIONS.iter().all(|(type_, status)| {
        conditions
            .iter()
            .any(|c| c.type_ == *type_ && c.status == *status)
    })
}

/// The conditions to post now: the healthy ones with heartbeat `now`, keeping each one's
/// `lastTransitionTime` when `existing` already had that status (as the kubelet's
/// condition setters do), followed by any other condition `existing` carries.
pub fn refresh_conditions(existing: &[NodeCondition], now: jiff::Timestamp) -> Vec<NodeCondition> {
    let mut conditions = healthy_conditions(now, now);
    for c in &mut conditions {
        if let Some(old) = existing
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
            && old.last_transition_time.is_some()
        {
            c.last_transition_time = old.last_transition_time.clone();
        }
    }
    conditions.extend(
        existing
            .iter()
            .filter(|o| !MANAGED_CONDITIONS.iter().any(|(t, _)| *t == o.type_))
            .cloned(),
    );
    conditions
}

/// The base address of a `/24` pod CIDR such as `10.244.3.0/24`; `None` for anything else
/// (the simulated kubelet allocates pod IPs from one /24).
pub fn parse_cidr24(cidr: &str) -> Option<Ipv4Addr> {
    let (addr, bits) = cidr.split_once('/')?;
    if bits != "24" {
        return None;
    }
    let addr: Ipv4Addr = addr.parse().ok()?;
    let [a, b, c, _] = addr.octets();
    Some(Ipv4Addr::new(a, b, c, 0))
}

/// `lease` renewed by its node at `now`, as the kubelet's lease controller writes it:
/// holder, duration and renew time set, and the Node as owner when it was missing.
pub fn renewed_lease(lease: &Lease, node: &Node, now: jiff::Timestamp) -> Lease {
    let mut lease = lease.clone();
    let name = node.metadata.name.clone().unwrap_or_default();
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(name.clone());
    spec.lease_duration_seconds = Some(NODE_LEASE_DURATION_SECONDS);
    spec.renew_time = Some(MicroTime(now));
    let owned = lease
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|refs| !refs.is_empty());
    if !owned && let Some(uid) = node.metadata.uid.clone() {
        lease.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name,
            uid,
            ..Default::default()
        }]);
    }
    lease
}

/// The annotation that says what became of the node's machine in the simulated cloud:
/// `deleted` or `shutdown`. Either silences the kubelet as [`ANNOTATION_HEARTBEAT`] does; the
/// cloud node lifecycle controller then deletes (`deleted`) or taints (`shutdown`) the Node.
pub const ANNOTATION_INSTANCE: &str = "sim.kcm.io/instance";

/// Whether the node's heartbeat is stopped by its annotation, or its machine is deleted or
/// shut down.
pub fn heartbeat_stopped(node: &Node) -> bool {
    let annotations = node.metadata.annotations.as_ref();
    annotations
        .and_then(|a| a.get(ANNOTATION_HEARTBEAT))
        .is_some_and(|v| v == "stopped")
        || annotations
            .and_then(|a| a.get(ANNOTATION_INSTANCE))
            .is_some_and(|v| v == "deleted" || v == "shutdown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_spread_over_zones_with_distinct_cidrs() {
        let now = jiff::Timestamp::UNIX_EPOCH;
        let nodes: Vec<Node> = (0..4)
            .map(|i| build_node(i, &NodeTemplate::default(), now))
            .collect();
        let zone = |n: &Node| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("topology.kubernetes.io/zone"))
                .cloned()
        };
        assert_eq!(zone(&nodes[0]).as_deref(), Some("zone-a"));
        assert_eq!(zone(&nodes[1]).as_deref(), Some("zone-b"));
        assert_eq!(zone(&nodes[3]).as_deref(), Some("zone-a"));
        let cidr = |n: &Node| n.spec.as_ref().and_then(|s| s.pod_cidr.clone());
        assert_eq!(cidr(&nodes[0]).as_deref(), Some("10.244.0.0/24"));
        assert_eq!(cidr(&nodes[1]).as_deref(), Some("10.244.1.0/24"));
        assert_eq!(pod_cidr(256).1, "10.245.0.0/24");
        let ready = nodes[0]
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone());
        assert_eq!(ready.as_deref(), Some("True"));
    }

    #[test]
    fn nodes_leave_attach_and_detach_to_the_controller() {
        let node = build_node(0, &NodeTemplate::default(), jiff::Timestamp::UNIX_EPOCH);
        let managed = node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_CONTROLLER_MANAGED_ATTACH_DETACH))
            .map(String::as_str);
        assert_eq!(managed, Some("true"));
    }

    #[test]
    fn lease_names_its_node_and_is_owned_by_it() {
        let now = jiff::Timestamp::UNIX_EPOCH;
        let mut node = build_node(0, &NodeTemplate::default(), now);
        node.metadata.uid = Some("u1".into());
        let lease = build_lease(&node, now);
        assert_eq!(lease.metadata.namespace.as_deref(), Some("kube-node-lease"));
        assert_eq!(
            lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref()),
            Some("kcm-node-0")
        );
        assert_eq!(
            lease
                .metadata
                .owner_references
                .as_ref()
                .map(|r| r[0].uid.as_str()),
            Some("u1")
        );
    }

    #[test]
    fn refreshed_conditions_keep_transitions_and_foreign_conditions() {
        let t0 = jiff::Timestamp::UNIX_EPOCH;
        let t1 = t0 + jiff::SignedDuration::from_secs(100);
        let mut existing = healthy_conditions(t0, t0);
        // The node lifecycle controller marked the node Unknown.
        if let Some(ready) = existing.iter_mut().find(|c| c.type_ == "Ready") {
            ready.status = "Unknown".into();
        }
        existing.push(kcm_testing::node_condition("NetworkUnavailable", "False").build());
        let mut node = build_node(0, &NodeTemplate::default(), t0);
        if let Some(status) = node.status.as_mut() {
            status.conditions = Some(existing.clone());
        }
        assert!(!conditions_healthy(&node));
        let refreshed = refresh_conditions(&existing, t1);
        let get = |t: &str| {
            refreshed
                .iter()
                .find(|c| c.type_ == t)
                .cloned()
                .expect("condition")
        };
        assert_eq!(get("MemoryPressure").last_transition_time, Some(Time(t0)));
        assert_eq!(get("MemoryPressure").last_heartbeat_time, Some(Time(t1)));
        assert_eq!(get("Ready").status, "True");
        assert_eq!(get("Ready").last_transition_time, Some(Time(t1)));
        assert_eq!(get("NetworkUnavailable").status, "False");
        if let Some(status) = node.status.as_mut() {
            status.conditions = Some(refreshed);
        }
        assert!(conditions_healthy(&node));
    }

    #[test]
    fn cidr_and_names() {
        assert_eq!(
            parse_cidr24("10.244.3.0/24"),
            Some(Ipv4Addr::new(10, 244, 3, 0))
        );
        assert_eq!(parse_cidr24("10.244.0.0/16"), None);
        assert_eq!(parse_cidr24("nonsense"), None);
        let template = NodeTemplate {
            name_prefix: "sim".into(),
            ..NodeTemplate::default()
        };
        assert_eq!(template.node_name(7), "sim-7");
        assert_eq!(
            build_node(7, &template, jiff::Timestamp::UNIX_EPOCH)
                .metadata
                .name
                .as_deref(),
            Some("sim-7")
        );
    }

    #[test]
    fn renewal_sets_renew_time_and_adopts_owner() {
        let t0 = jiff::Timestamp::UNIX_EPOCH;
        let t1 = t0 + jiff::SignedDuration::from_secs(10);
        let mut node = build_node(0, &NodeTemplate::default(), t0);
        let orphan = build_lease(&node, t0);
        assert!(orphan.metadata.owner_references.is_none());
        node.metadata.uid = Some("u1".into());
        let renewed = renewed_lease(&orphan, &node, t1);
        let spec = renewed.spec.as_ref().expect("spec");
        assert_eq!(spec.renew_time, Some(MicroTime(t1)));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(
            renewed
                .metadata
                .owner_references
                .as_ref()
                .map(|r| r[0].uid.as_str()),
            Some("u1")
        );
    }

    #[test]
    fn heartbeat_annotation() {
        let mut node = build_node(0, &NodeTemplate::default(), jiff::Timestamp::UNIX_EPOCH);
        assert!(!heartbeat_stopped(&node));
        node.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION_HEARTBEAT.into(), "stopped".into());
        assert!(heartbeat_stopped(&node));
    }
}
