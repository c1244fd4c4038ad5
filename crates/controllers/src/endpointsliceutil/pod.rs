//! Which pods belong in endpoints and which pod changes matter, as upstream's `k8s.io/endpointslice/util` pod helpers and `FindPort`.

use k8s_openapi::api::core::v1::{Container, Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub use kcm_machinery::controller::is_pod_ready;

/// The protocol the API server defaults an absent one to.
const DEFAULT_PROTOCOL: &str = "TCP";

/// Whether `pod` belongs in an Endpoints or EndpointSlice object, as upstream's
/// `ShouldPodBeInEndpoints`: not terminal (Succeeded or Failed), has an IP, and is not being
/// deleted unless `include_terminating`.
pub fn should_pod_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let has_ip = status.is_some_and(|s| {
        s.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty())
            || s.pod_ips.as_ref().is_some_and(|ips| !ips.is_empty())
    });
    if !has_ip {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// Whether the endpoint of `pod` carries the pod's hostname for `service`, as upstream's
/// `ShouldSetHostname`: the pod has a hostname and its subdomain names the Service (in the
/// same namespace).
pub fn should_set_hostname(pod: &Pod, service: &Service) -> bool {
    let spec = pod.spec.as_ref();
    let hostname = spec.and_then(|s| s.hostname.as_deref()).unwrap_or_default();
    let subdomain = spec
        .and_then(|s| s.subdomain.as_deref())
        .unwrap_or_default();
    !hostname.is_empty()
        && subdomain == service.metadata.name.as_deref().unwrap_or_default()
        && service.metadata.namespace == pod.metadata.namespace
}

/// The container port `service_port` targets on `pod`, as upstream's `FindPort`: a numeric
/// target port as is; a named one looked up (same name and protocol) in the containers, then
/// in the sidecars (init containers restarting `Always`). `None` when no port has that name.
pub fn find_port(pod: &Pod, service_port: &ServicePort) -> Option<i32> {
    match &service_port.target_port {
        // The API server defaults an absent target port to the port; Go's zero value is 0.
        None => Some(0),
        Some(IntOrString::Int(port)) => Some(*port),
        Some(IntOrString::String(name)) => {
            let protocol = service_port.protocol.as_deref().unwrap_or(DEFAULT_PROTOCOL);
            let spec = pod.spec.as_ref()?;
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .find_map(|c| named_port(c, name, protocol))
        }
    }
}

fn named_port(container: &Container, name: &str, protocol: &str) -> Option<i32> {
    container.ports.iter().flatten().find_map(|p| {
        let p_protocol = p.protocol.as_deref().unwrap_or(DEFAULT_PROTOCOL);
        (p.name.as_deref() == Some(name) && p_protocol == protocol).then_some(p.container_port)
    })
}

/// How a pod update concerns endpoints, as upstream's `podEndpointsChanged`: `(pod_changed,
/// labels_changed)`. The pod changed when its deletion timestamp, readiness or IPs changed;
/// its labels "changed" when the labels, hostname or subdomain did (any of which may change
/// the Services it belongs to, or its endpoint's identity).
pub fn pod_endpoints_changed(old: &Pod, new: &Pod) -> (bool, bool) {
    let spec_str = |pod: &Pod, f: fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<&String>| {
        pod.spec.as_ref().and_then(f).cloned().unwrap_or_default()
    };
    let labels_changed =
        !super::maps_equal(old.metadata.labels.as_ref(), new.metadata.labels.as_ref())
            || spec_str(old, |s| s.hostname.as_ref()) != spec_str(new, |s| s.hostname.as_ref())
            || spec_str(old, |s| s.subdomain.as_ref()) != spec_str(new, |s| s.subdomain.as_ref());

    if old.metadata.deletion_timestamp != new.metadata.deletion_timestamp {
        return (true, labels_changed);
    }
    if is_pod_ready(old) != is_pod_ready(new) {
        return (true, labels_changed);
    }
    let ips = |pod: &Pod| -> Vec<String> {
        pod.status
            .as_ref()
            .and_then(|s| s.pod_ips.as_ref())
            .map(|ips| ips.iter().map(|ip| ip.ip.clone()).collect())
            .unwrap_or_default()
    };
    // Name, namespace, UID and node name are immutable once the pod has an IP.
    (ips(old) != ips(new), labels_changed)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerPort, PodIP};
    use kcm_testing::prelude::*;

    use super::*;

    fn with_ip(builder: PodBuilder, ip: &str) -> PodBuilder {
        builder.with(|p| {
            let status = p.status.get_or_insert_default();
            status.pod_ip = Some(ip.to_owned());
            status.pod_ips = Some(vec![PodIP { ip: ip.to_owned() }]);
        })
    }

    #[test]
    fn pods_in_endpoints_like_upstream() {
        let now = jiff::Timestamp::from_second(1_700_000_000).expect("ts");
        struct Case {
            name: &'static str,
            pod: Pod,
            include_terminating: bool,
            want: bool,
        }
        let cases = [
            Case {
                name: "running with an IP",
                pod: with_ip(pod("p").phase("Running"), "1.2.3.4").build(),
                include_terminating: false,
                want: true,
            },
            Case {
                name: "no IP",
                pod: pod("p").phase("Running").build(),
                include_terminating: false,
                want: false,
            },
            Case {
                name: "failed",
                pod: with_ip(pod("p").phase("Failed"), "1.2.3.4").build(),
                include_terminating: true,
                want: false,
            },
            Case {
                name: "succeeded",
                pod: with_ip(pod("p").phase("Succeeded"), "1.2.3.4").build(),
                include_terminating: true,
                want: false,
            },
            Case {
                name: "terminating, excluded",
                pod: with_ip(pod("p").phase("Running").deleted_at(now), "1.2.3.4").build(),
                include_terminating: false,
                want: false,
            },
            Case {
                name: "terminating, included",
                pod: with_ip(pod("p").phase("Running").deleted_at(now), "1.2.3.4").build(),
                include_terminating: true,
                want: true,
            },
            Case {
                name: "pending with an IP",
                pod: with_ip(pod("p").phase("Pending"), "1.2.3.4").build(),
                include_terminating: false,
                want: true,
            },
        ];
        for case in cases {
            assert_eq!(
                should_pod_be_in_endpoints(&case.pod, case.include_terminating),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn hostname_only_for_the_named_subdomain() {
        let svc = service("web").namespace("ns").build();
        let p = |host: Option<&str>, sub: Option<&str>, ns: &str| {
            pod("p")
                .namespace(ns)
                .with(|p| {
                    let spec = p.spec.get_or_insert_default();
                    spec.hostname = host.map(str::to_owned);
                    spec.subdomain = sub.map(str::to_owned);
                })
                .build()
        };
        assert!(should_set_hostname(&p(Some("h"), Some("web"), "ns"), &svc));
        assert!(!should_set_hostname(&p(None, Some("web"), "ns"), &svc));
        assert!(!should_set_hostname(
            &p(Some("h"), Some("other"), "ns"),
            &svc
        ));
        assert!(!should_set_hostname(
            &p(Some("h"), Some("web"), "elsewhere"),
            &svc
        ));
    }

    #[test]
    fn named_ports_resolve_per_pod() {
        let port = |name: &str, number: i32, protocol: &str| ContainerPort {
            name: Some(name.to_owned()),
            container_port: number,
            protocol: Some(protocol.to_owned()),
            ..ContainerPort::default()
        };
        let p =
            pod("p")
                .container(container("app").with(|c| {
                    c.ports = Some(vec![port("http", 8080, "TCP"), port("dns", 53, "UDP")])
                }))
                .init_container(
                    container("sidecar")
                        .restart_policy("Always")
                        .with(|c| c.ports = Some(vec![port("metrics", 9090, "TCP")])),
                )
                .init_container(
                    container("init").with(|c| c.ports = Some(vec![port("setup", 7000, "TCP")])),
                )
                .build();
        let svc_port = |target: IntOrString, protocol: &str| ServicePort {
            port: 80,
            target_port: Some(target),
            protocol: Some(protocol.to_owned()),
            ..ServicePort::default()
        };
        struct Case {
            name: &'static str,
            port: ServicePort,
            want: Option<i32>,
        }
        let cases = [
            Case {
                name: "number",
                port: svc_port(IntOrString::Int(81), "TCP"),
                want: Some(81),
            },
            Case {
                name: "named",
                port: svc_port(IntOrString::String("http".into()), "TCP"),
                want: Some(8080),
            },
            Case {
                name: "named, other protocol",
                port: svc_port(IntOrString::String("http".into()), "UDP"),
                want: None,
            },
            Case {
                name: "named udp",
                port: svc_port(IntOrString::String("dns".into()), "UDP"),
                want: Some(53),
            },
            Case {
                name: "sidecar",
                port: svc_port(IntOrString::String("metrics".into()), "TCP"),
                want: Some(9090),
            },
            Case {
                name: "plain init container",
                port: svc_port(IntOrString::String("setup".into()), "TCP"),
                want: None,
            },
            Case {
                name: "missing",
                port: svc_port(IntOrString::String("nope".into()), "TCP"),
                want: None,
            },
        ];
        for case in cases {
            assert_eq!(find_port(&p, &case.port), case.want, "{}", case.name);
        }
    }

    #[test]
    fn endpoint_relevant_changes() {
        let base = with_ip(
            pod("p").labels(&[("app", "a")]).phase("Running"),
            "10.0.0.1",
        );
        let old = base.clone().build();
        struct Case {
            name: &'static str,
            new: Pod,
            want: (bool, bool),
        }
        let now = jiff::Timestamp::from_second(1_700_000_000).expect("ts");
        let cases = [
            Case {
                name: "nothing",
                new: base.clone().annotation("x", "y").build(),
                want: (false, false),
            },
            Case {
                name: "ready",
                new: base.clone().ready().build(),
                want: (true, false),
            },
            Case {
                name: "ip",
                new: with_ip(base.clone(), "10.0.0.2").build(),
                want: (true, false),
            },
            Case {
                name: "deleted",
                new: base.clone().deleted_at(now).build(),
                want: (true, false),
            },
            Case {
                name: "labels",
                new: base.clone().labels(&[("app", "b")]).build(),
                want: (false, true),
            },
            Case {
                name: "hostname",
                new: base
                    .clone()
                    .with(|p| p.spec.get_or_insert_default().hostname = Some("h".into()))
                    .build(),
                want: (false, true),
            },
            Case {
                name: "labels and ready",
                new: base.clone().labels(&[("x", "y")]).ready().build(),
                want: (true, true),
            },
        ];
        for case in cases {
            assert_eq!(
                pod_endpoints_changed(&old, &case.new),
                case.want,
                "{}",
                case.name
            );
        }
    }
}
