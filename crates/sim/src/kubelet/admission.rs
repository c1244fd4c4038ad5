//! The kubelet's pod admission (upstream `lifecycle.predicateAdmitHandler`): a pod bound to a node whose admitted pods already hold one of its host ports is rejected, as the kubelet's `generalFilter` runs the scheduler's `NodePorts` check for pods that reach it without the scheduler (a `nodeName` set by hand, a StatefulSet pinned to a node).

use k8s_openapi::api::core::v1::{Pod, PodStatus};

/// The predicate's name: the rejected pod's `status.reason` and the event's reason.
pub const NODE_PORTS: &str = "NodePorts";

/// Upstream's `nodeports.ErrReason`.
const NODE_PORTS_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// One host port a container asks for: `(protocol, hostIP, port)`, protocol defaulting to
/// TCP and an empty host IP meaning every address (upstream's `HostPortInfo`).
fn host_ports(pod: &Pod) -> impl Iterator<Item = (&str, &str, i32)> {
    let spec = pod.spec.as_ref();
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    containers
        .iter()
        .chain(init)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|port| *port > 0)?;
            Some((
                p.protocol.as_deref().unwrap_or("TCP"),
                p.host_ip.as_deref().unwrap_or(""),
                port,
            ))
        })
}

/// Whether `pod` asks for a host port.
pub fn wants_host_ports(pod: &Pod) -> bool {
    host_ports(pod).next().is_some()
}

/// Whether one of `pod`'s host ports is held by one of `admitted` (upstream's
/// `fitsPorts`: the same protocol and port, on the same host IP or either on all of them).
pub fn host_port_conflict<'a>(pod: &Pod, admitted: impl IntoIterator<Item = &'a Pod>) -> bool {
    let wanted: Vec<_> = host_ports(pod).collect();
    if wanted.is_empty() {
        return false;
    }
    let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
    admitted.into_iter().any(|other| {
        host_ports(other).any(|(protocol, ip, port)| {
            wanted.iter().any(|(w_protocol, w_ip, w_port)| {
                *w_protocol == protocol
                    && *w_port == port
                    && (wildcard(ip) || wildcard(w_ip) || ip == *w_ip)
            })
        })
    })
}

/// The status the kubelet's `rejectPod` writes: `Failed`, the predicate as the reason,
/// `Pod was rejected: <message>`, the QoS class kept. Also the Warning event's message.
pub fn rejected_status(pod: &Pod) -> (PodStatus, String) {
    let message = format!("Predicate {NODE_PORTS} failed: {NODE_PORTS_REASON}");
    let current = pod.status.clone().unwrap_or_default();
    let status = PodStatus {
        phase: Some("Failed".into()),
        reason: Some(NODE_PORTS.into()),
        message: Some(format!("Pod was rejected: {message}")),
        qos_class: current
            .qos_class
            .or_else(|| Some(super::qos_class(pod).into())),
        observed_generation: pod.metadata.generation,
        ..PodStatus::default()
    };
    (status, message)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};

    use super::*;

    fn with_port(protocol: Option<&str>, host_ip: Option<&str>, port: i32) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(vec![ContainerPort {
                        container_port: 80,
                        host_port: Some(port),
                        host_ip: host_ip.map(Into::into),
                        protocol: protocol.map(Into::into),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn host_ports_conflict_on_protocol_port_and_overlapping_addresses() {
        let held = with_port(None, None, 21017);
        assert!(host_port_conflict(
            &with_port(Some("TCP"), None, 21017),
            [&held]
        ));
        assert!(host_port_conflict(
            &with_port(None, Some("10.0.0.10"), 21017),
            [&held]
        ));
        assert!(!host_port_conflict(
            &with_port(Some("UDP"), None, 21017),
            [&held]
        ));
        assert!(!host_port_conflict(&with_port(None, None, 21018), [&held]));
        let on_one_ip = with_port(None, Some("10.0.0.10"), 8080);
        assert!(!host_port_conflict(
            &with_port(None, Some("10.0.0.11"), 8080),
            [&on_one_ip]
        ));
        assert!(host_port_conflict(
            &with_port(None, Some("0.0.0.0"), 8080),
            [&on_one_ip]
        ));
        assert!(
            !host_port_conflict(&Pod::default(), [&held]),
            "no host port"
        );
    }

    #[test]
    fn a_rejected_pod_fails_with_the_predicate_as_its_reason() {
        let (status, message) = rejected_status(&with_port(None, None, 21017));
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(status.reason.as_deref(), Some("NodePorts"));
        assert_eq!(
            status.message.as_deref(),
            Some(
                "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
            )
        );
        assert_eq!(
            message,
            "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
        );
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
    }
}
