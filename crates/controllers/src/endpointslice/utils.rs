//! Turning pods into endpoints and Services into slices, as upstream's `k8s.io/endpointslice/utils.go`.

use crate::endpointsliceutil::slices::endpoint_slice_prefix;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::endpointsliceutil::{
    ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6, ENDPOINTS_LAST_CHANGE_TRIGGER_TIME, IS_HEADLESS_SERVICE,
    LABEL_MANAGED_BY, LABEL_SERVICE_NAME, LABEL_TOPOLOGY_ZONE, find_port, format_rfc3339_nano,
    is_pod_ready, maps_equal, should_set_hostname,
};

/// The address type and port list a group of slices shares (upstream's `endpointMeta`).
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointMeta {
    /// The ports, in canonical order.
    pub ports: Vec<EndpointPort>,
    /// `IPv4` or `IPv6`.
    pub address_type: String,
}

/// The endpoint of `pod` for `service` in a slice of `address_type`, as upstream's
/// `podToEndpoint`: the pod's IPs of that family; `serving` is the pod's readiness,
/// `terminating` its deletion, and `ready` is `serving && !terminating` unless the Service
/// publishes not-ready addresses (then always true). Node name, zone (from the node's
/// `topology.kubernetes.io/zone` label) and hostname (headless subdomain) when known.
pub fn pod_to_endpoint(
    pod: &Pod,
    node: Option<&Node>,
    service: &Service,
    address_type: &str,
) -> Endpoint {
    let serving = is_pod_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let publish = service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let ready = publish || (serving && !terminating);
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let zone = node
        .and_then(|n| n.metadata.labels.as_ref())
        .and_then(|l| l.get(LABEL_TOPOLOGY_ZONE))
        .filter(|z| !z.is_empty())
        .cloned();
    let hostname = should_set_hostname(pod, service)
        .then(|| pod.spec.as_ref().and_then(|s| s.hostname.clone()))
        .flatten();
    Endpoint {
        addresses: endpoint_addresses(pod, address_type),
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".to_owned()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
        node_name,
        zone,
        hostname,
        ..Endpoint::default()
    }
}

/// The pod's IPs of `address_type`, re-formatted canonically, as upstream's
/// `getEndpointAddresses`.
pub fn endpoint_addresses(pod: &Pod, address_type: &str) -> Vec<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ips.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|ip| ip.ip.parse::<IpAddr>().ok())
        .filter(|ip| match ip {
            IpAddr::V6(_) => address_type == ADDRESS_TYPE_IPV6,
            IpAddr::V4(_) => address_type == ADDRESS_TYPE_IPV4,
        })
        .map(|ip| ip.to_string())
        .collect()
}

/// The endpoint ports of `pod` for `service`, as upstream's `getEndpointPorts`: each Service
/// port with its target port resolved on the pod (ports that do not resolve are left out); a
/// headless Service without ports has none.
pub fn endpoint_ports(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let Some(spec) = service.spec.as_ref() else {
        return Vec::new();
    };
    spec.ports
        .iter()
        .flatten()
        .filter_map(|service_port| {
            let port = find_port(pod, service_port)?;
            Some(EndpointPort {
                name: Some(service_port.name.clone().unwrap_or_default()),
                port: Some(port),
                protocol: Some(
                    service_port
                        .protocol
                        .clone()
                        .unwrap_or_else(|| "TCP".to_owned()),
                ),
                app_protocol: service_port.app_protocol.clone(),
            })
        })
        .collect()
}

/// A new, unnamed slice for `service` (`generateName` `<service>-`), owned by it, labelled,
/// with `meta`'s ports and address type, as upstream's `newEndpointSlice`.
pub fn new_endpoint_slice(
    service: &Service,
    meta: &EndpointMeta,
    controller_name: &str,
) -> EndpointSlice {
    let name = service.metadata.name.clone().unwrap_or_default();
    let mut slice = EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(endpoint_slice_prefix(&name)),
            namespace: service.metadata.namespace.clone(),
            owner_references: Some(vec![service_controller_ref(service)]),
            labels: Some(BTreeMap::new()),
            ..ObjectMeta::default()
        },
        address_type: meta.address_type.clone(),
        endpoints: Some(Vec::new()),
        ports: Some(meta.ports.clone()),
    };
    let (labels, _) = endpoint_slice_labels(&slice, service, controller_name);
    slice.metadata.labels = Some(labels);
    slice
}

/// The controller reference a Service puts on its slices (`v1`, `Service`, controller,
/// blockOwnerDeletion), as upstream's `metav1.NewControllerRef`.
pub fn service_controller_ref(service: &Service) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Service".to_owned(),
        name: service.metadata.name.clone().unwrap_or_default(),
        uid: service.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `slice` is owned by `service` (a `v1` `Service` owner with its UID), as upstream's
/// `ownedBy`.
pub fn owned_by(slice: &EndpointSlice, service: &Service) -> bool {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    slice
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.kind == "Service" && o.api_version == "v1")
}

/// The slice that comes closest to full when `num_endpoints` are added, if one has room, as
/// upstream's `getSliceToFill`.
pub fn slice_to_fill<'a>(
    slices: &[&'a EndpointSlice],
    num_endpoints: usize,
    max_endpoints: usize,
) -> Option<&'a EndpointSlice> {
    let mut closest_diff = max_endpoints;
    let mut closest = None;
    for slice in slices {
        let Some(diff) =
            max_endpoints.checked_sub(num_endpoints + slice.endpoints.as_ref().map_or(0, Vec::len))
        else {
            continue;
        };
        if diff < closest_diff {
            closest_diff = diff;
            closest = Some(*slice);
            if diff == 0 {
                break;
            }
        }
    }
    closest
}

/// Sets (or clears, for `None`) the trigger-time annotation, as upstream's
/// `addTriggerTimeAnnotation`.
pub fn add_trigger_time_annotation(
    slice: &mut EndpointSlice,
    trigger_time: Option<jiff::Timestamp>,
) {
    let annotations = slice.metadata.annotations.get_or_insert_default();
    match trigger_time {
        Some(time) => {
            annotations.insert(
                ENDPOINTS_LAST_CHANGE_TRIGGER_TIME.to_owned(),
                format_rfc3339_nano(time),
            );
        }
        None => {
            annotations.remove(ENDPOINTS_LAST_CHANGE_TRIGGER_TIME);
        }
    }
}

/// Whether `label` is one the controller owns on slices (Service name, managed-by,
/// headless).
fn is_reserved_label(label: &str) -> bool {
    label == LABEL_SERVICE_NAME || label == LABEL_MANAGED_BY || label == IS_HEADLESS_SERVICE
}

/// The labels `slice` should have for `service`, and whether its user labels differ from the
/// Service's, as upstream's `setEndpointSliceLabels`: the Service's labels (reserved ones
/// skipped), the headless label when the Service has no cluster IP, the Service name and
/// `managed-by`.
pub fn endpoint_slice_labels(
    slice: &EndpointSlice,
    service: &Service,
    controller_name: &str,
) -> (BTreeMap<String, String>, bool) {
    let slice_labels: BTreeMap<String, String> = slice
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| !is_reserved_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in service.metadata.labels.iter().flatten() {
        if is_reserved_label(key) {
            tracing::info!(service = ?service.metadata.name, label = %key, "Service using reserved endpoint slices label");
            continue;
        }
        labels.insert(key.clone(), value.clone());
    }
    let updated = !maps_equal(Some(&slice_labels), Some(&labels));
    if is_service_ip_set(service) {
        labels.remove(IS_HEADLESS_SERVICE);
    } else {
        labels.insert(IS_HEADLESS_SERVICE.to_owned(), String::new());
    }
    labels.insert(
        LABEL_SERVICE_NAME.to_owned(),
        service.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(LABEL_MANAGED_BY.to_owned(), controller_name.to_owned());
    (labels, updated)
}

/// Whether the Service has a cluster IP (neither empty nor `None`).
pub fn is_service_ip_set(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty() && ip != "None")
}

/// The address types of a Service's slices, as upstream's `getAddressTypesForService`: from
/// `ipFamilies`; without them, the cluster IP's family; a headless Service without families
/// gets both (until an API server defaults them).
pub fn address_types_for_service(service: &Service) -> BTreeSet<String> {
    let spec = service.spec.as_ref();
    let mut types = BTreeSet::new();
    for family in spec
        .and_then(|s| s.ip_families.as_ref())
        .into_iter()
        .flatten()
    {
        match family.as_str() {
            "IPv4" => {
                types.insert(ADDRESS_TYPE_IPV4.to_owned());
            }
            "IPv6" => {
                types.insert(ADDRESS_TYPE_IPV6.to_owned());
            }
            _ => {}
        }
    }
    if !types.is_empty() {
        return types;
    }
    if is_service_ip_set(service) {
        let ip = spec
            .and_then(|s| s.cluster_ip.as_deref())
            .unwrap_or_default();
        let v6 = ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6());
        types.insert(
            if v6 {
                ADDRESS_TYPE_IPV6
            } else {
                ADDRESS_TYPE_IPV4
            }
            .to_owned(),
        );
        return types;
    }
    types.insert(ADDRESS_TYPE_IPV4.to_owned());
    types.insert(ADDRESS_TYPE_IPV6.to_owned());
    types
}

/// Whether `existing` is the placeholder this controller would create (same namespace,
/// owners, labels, address type, no ports or endpoints), as upstream's
/// `placeholderSliceCompare`.
pub fn is_same_placeholder(existing: &EndpointSlice, placeholder: &EndpointSlice) -> bool {
    existing.metadata.namespace == placeholder.metadata.namespace
        && maps_equal(
            existing.metadata.labels.as_ref(),
            placeholder.metadata.labels.as_ref(),
        )
        && existing
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            == placeholder
                .metadata
                .owner_references
                .clone()
                .unwrap_or_default()
        && existing.address_type == placeholder.address_type
        && existing.endpoints.as_ref().is_none_or(Vec::is_empty)
        && existing.ports.as_ref().is_none_or(Vec::is_empty)
        && placeholder.endpoints.as_ref().is_none_or(Vec::is_empty)
}

#[cfg(test)]
mod tests {
    use kcm_testing::prelude::*;

    use super::*;

    #[test]
    fn endpoints_from_pods_like_upstream() {
        let node = node("node-1")
            .labels(&[(LABEL_TOPOLOGY_ZONE, "zone-a")])
            .build();
        let svc = service("web")
            .namespace("ns")
            .ip_families(&["IPv4"])
            .build();
        let ready = pod("p")
            .namespace("ns")
            .uid("u")
            .node("node-1")
            .ready()
            .pod_ips(&["10.0.0.1", "fd00::1"])
            .build();
        let ep = pod_to_endpoint(&ready, Some(&node), &svc, ADDRESS_TYPE_IPV4);
        assert_eq!(ep.addresses, ["10.0.0.1"]);
        assert_eq!(ep.zone.as_deref(), Some("zone-a"));
        assert_eq!(ep.node_name.as_deref(), Some("node-1"));
        assert_eq!(
            ep.conditions,
            Some(EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false)
            })
        );
        assert_eq!(endpoint_addresses(&ready, ADDRESS_TYPE_IPV6), ["fd00::1"]);

        let deleted_at = jiff::Timestamp::from_second(1_700_000_000).expect("ts");
        let terminating = pod("p")
            .namespace("ns")
            .ready()
            .deleted_at(deleted_at)
            .pod_ips(&["10.0.0.1"])
            .build();
        let ep = pod_to_endpoint(&terminating, None, &svc, ADDRESS_TYPE_IPV4);
        assert_eq!(
            ep.conditions,
            Some(EndpointConditions {
                ready: Some(false),
                serving: Some(true),
                terminating: Some(true)
            }),
            "a terminating pod is never ready"
        );
        let publishing = service("web")
            .namespace("ns")
            .publish_not_ready_addresses(true)
            .build();
        let unready = pod("p").namespace("ns").pod_ips(&["10.0.0.1"]).build();
        let ep = pod_to_endpoint(&unready, None, &publishing, ADDRESS_TYPE_IPV4);
        assert_eq!(
            ep.conditions.and_then(|c| c.ready),
            Some(true),
            "publishNotReadyAddresses"
        );
        assert_eq!(ep.zone, None);
    }

    #[test]
    fn address_types_like_upstream() {
        struct Case {
            name: &'static str,
            service: Service,
            want: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "families",
                service: service("s").ip_families(&["IPv6", "IPv4"]).build(),
                want: vec!["IPv4", "IPv6"],
            },
            Case {
                name: "v4 cluster IP",
                service: service("s").cluster_ip("10.96.0.1").build(),
                want: vec!["IPv4"],
            },
            Case {
                name: "v6 cluster IP",
                service: service("s").cluster_ip("fd00::1").build(),
                want: vec!["IPv6"],
            },
            Case {
                name: "headless without families",
                service: service("s").cluster_ip("None").build(),
                want: vec!["IPv4", "IPv6"],
            },
        ];
        for case in cases {
            let got: Vec<String> = address_types_for_service(&case.service)
                .into_iter()
                .collect();
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn labels_like_upstream() {
        let svc = service("web")
            .labels(&[("app", "web"), (LABEL_MANAGED_BY, "me")])
            .cluster_ip("None")
            .build();
        let slice = endpoint_slice("web-1").labels(&[("app", "web")]).build();
        let (labels, changed) =
            endpoint_slice_labels(&slice, &svc, "endpointslice-controller.k8s.io");
        assert!(
            !changed,
            "user labels equal; reserved ones are the controller's"
        );
        assert_eq!(
            labels.get(IS_HEADLESS_SERVICE).map(String::as_str),
            Some("")
        );
        assert_eq!(
            labels.get(LABEL_SERVICE_NAME).map(String::as_str),
            Some("web")
        );
        assert_eq!(
            labels.get(LABEL_MANAGED_BY).map(String::as_str),
            Some("endpointslice-controller.k8s.io")
        );
        let relabelled = service("web")
            .labels(&[("app", "web2")])
            .cluster_ip("10.0.0.1")
            .build();
        let (labels, changed) = endpoint_slice_labels(&slice, &relabelled, "x");
        assert!(changed);
        assert!(!labels.contains_key(IS_HEADLESS_SERVICE));
    }

    #[test]
    fn prefix_and_fill_like_upstream() {
        let with = |n: usize| {
            endpoint_slice("s")
                .with(|s| s.endpoints = Some(vec![Endpoint::default(); n]))
                .build()
        };
        let (a, b, c) = (with(90), with(95), with(50));
        let slices = [&a, &b, &c];
        assert_eq!(
            slice_to_fill(&slices, 5, 100).map(|s| s.endpoints.as_ref().map_or(0, Vec::len)),
            Some(95),
            "exactly full"
        );
        assert_eq!(
            slice_to_fill(&slices, 8, 100).map(|s| s.endpoints.as_ref().map_or(0, Vec::len)),
            Some(90),
            "closest to full"
        );
        assert_eq!(slice_to_fill(&slices, 60, 100), None, "no room");
    }
}
