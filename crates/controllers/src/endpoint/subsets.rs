//! Building, repacking, comparing and truncating the subsets of an Endpoints object, as upstream's `RepackSubsets`, `addEndpointSubset`, `truncateEndpoints` and `podToEndpointAddressForService`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service,
    ServicePort,
};

use crate::endpointsliceutil::{
    ENDPOINTS_OVER_CAPACITY, is_pod_ready, refs_equal_ignoring_resource_version,
};

/// The most addresses (ready and not ready) an Endpoints object holds, as upstream's
/// `maxCapacity`; beyond it the controller truncates and annotates.
pub const MAX_CAPACITY: usize = 1000;

/// The value of [`ENDPOINTS_OVER_CAPACITY`] on truncated Endpoints.
pub const TRUNCATED: &str = "truncated";

/// The address of `pod` for `service`, as upstream's `podToEndpointAddressForService`: the
/// pod IP of the Service's (first) IP family — from `ipFamilies`, else from the cluster IP,
/// else (headless, old API servers) from the pod IP. `None` when the pod has no IP of that
/// family.
pub fn pod_to_endpoint_address(service: &Service, pod: &Pod) -> Option<EndpointAddress> {
    let spec = service.spec.as_ref();
    let status = pod.status.as_ref();
    let is_v6 = |s: &str| s.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6());
    let want_v6 = match spec
        .and_then(|s| s.ip_families.as_ref())
        .and_then(|f| f.first())
    {
        Some(family) => family == "IPv6",
        None => match spec.and_then(|s| s.cluster_ip.as_deref()) {
            Some(ip) if !ip.is_empty() && ip != "None" => is_v6(ip),
            _ => status.and_then(|s| s.pod_ip.as_deref()).is_some_and(is_v6),
        },
    };
    let ip = status?
        .pod_ips
        .iter()
        .flatten()
        .map(|p| p.ip.as_str())
        .find(|ip| is_v6(ip) == want_v6)?;
    Some(EndpointAddress {
        ip: ip.to_owned(),
        hostname: None,
        node_name: Some(
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
        ),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".to_owned()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
    })
}

/// The endpoint port of `service_port` resolved to `port` on one pod, as upstream's
/// `endpointPortFromServicePort`.
pub fn endpoint_port(service_port: &ServicePort, port: i32) -> EndpointPort {
    EndpointPort {
        name: service_port.name.clone().filter(|n| !n.is_empty()),
        port,
        protocol: service_port.protocol.clone(),
        app_protocol: service_port.app_protocol.clone(),
    }
}

/// Appends a one-address subset for `pod` (ready, or not ready unless `tolerate_unready`),
/// as upstream's `addEndpointSubset`; returns `(ready, not_ready)` counts added.
pub fn add_endpoint_subset(
    subsets: &mut Vec<EndpointSubset>,
    pod: &Pod,
    address: EndpointAddress,
    port: Option<EndpointPort>,
    tolerate_unready: bool,
) -> (usize, usize) {
    let ports = port.map(|p| vec![p]);
    if tolerate_unready || is_pod_ready(pod) {
        subsets.push(EndpointSubset {
            addresses: Some(vec![address]),
            not_ready_addresses: None,
            ports,
        });
        (1, 0)
    } else {
        subsets.push(EndpointSubset {
            addresses: None,
            not_ready_addresses: Some(vec![address]),
            ports,
        });
        (0, 1)
    }
}

/// An address's identity when repacking: IP and target UID.
type AddressKey = (String, String);

/// A port's identity when repacking (`EndpointPort` is not orderable): name, number,
/// protocol, app protocol; port `-1` is the sentinel for "no ports".
type PortKey = (Option<String>, i32, Option<String>, Option<String>);

fn address_key(address: &EndpointAddress) -> AddressKey {
    let uid = address
        .target_ref
        .as_ref()
        .and_then(|t| t.uid.clone())
        .unwrap_or_default();
    (address.ip.clone(), uid)
}

/// Expands `subsets` and repacks them into the canonical layout, as upstream's
/// `RepackSubsets`: addresses are de-duplicated by IP and target UID (not ready wins over
/// ready), grouped by the exact set of ports they offer, and everything is sorted (addresses
/// by IP then UID; ports and subsets in a fixed order of their own, where upstream orders by
/// hash). Addresses offering no port stay, in a subset without ports.
pub fn repack_subsets(subsets: &[EndpointSubset]) -> Vec<EndpointSubset> {
    let mut all_addresses: BTreeMap<AddressKey, EndpointAddress> = BTreeMap::new();
    let mut ports_by_key: BTreeMap<PortKey, EndpointPort> = BTreeMap::new();
    // For each port, the addresses offering it and whether each is ready.
    let mut port_to_addresses: BTreeMap<PortKey, BTreeMap<AddressKey, bool>> = BTreeMap::new();

    let sentinel = EndpointPort {
        port: -1,
        ..EndpointPort::default()
    };
    for subset in subsets {
        let ports: Vec<&EndpointPort> = match subset.ports.as_deref() {
            Some(ports) if !ports.is_empty() => ports.iter().collect(),
            _ => vec![&sentinel],
        };
        for port in ports {
            let port_key: PortKey = (
                port.name.clone().filter(|n| !n.is_empty()),
                port.port,
                port.protocol.clone(),
                port.app_protocol.clone(),
            );
            let listed = subset.addresses.iter().flatten().map(|a| (a, true)).chain(
                subset
                    .not_ready_addresses
                    .iter()
                    .flatten()
                    .map(|a| (a, false)),
            );
            for (address, ready) in listed {
                // A port is known only through the addresses offering it.
                ports_by_key
                    .entry(port_key.clone())
                    .or_insert_with(|| port.clone());
                let readiness = port_to_addresses.entry(port_key.clone()).or_default();
                let key = address_key(address);
                all_addresses
                    .entry(key.clone())
                    .or_insert_with(|| address.clone());
                // Not ready always trumps ready.
                let entry = readiness.entry(key).or_insert(ready);
                if *entry {
                    *entry = ready;
                }
            }
        }
    }

    // Group the ports by the exact set of addresses (with readiness) offering them.
    let mut groups: BTreeMap<Vec<(AddressKey, bool)>, Vec<PortKey>> = BTreeMap::new();
    for (port, addresses) in port_to_addresses {
        let set: Vec<(AddressKey, bool)> = addresses.into_iter().collect();
        groups.entry(set).or_default().push(port);
    }

    let mut result: Vec<EndpointSubset> = groups
        .into_iter()
        .map(|(addresses, ports)| {
            let (mut ready, mut not_ready) = (Vec::new(), Vec::new());
            for (key, is_ready) in addresses {
                if let Some(address) = all_addresses.get(&key) {
                    if is_ready {
                        ready.push(address.clone());
                    } else {
                        not_ready.push(address.clone());
                    }
                }
            }
            let ports: Vec<EndpointPort> = if ports.len() == 1 && ports[0].1 == -1 {
                Vec::new()
            } else {
                ports
                    .iter()
                    .filter_map(|k| ports_by_key.get(k).cloned())
                    .collect()
            };
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect();
    result.sort_by_key(subset_order_key);
    result
}

/// The fixed order of repacked subsets: by their first address, then by their ports.
fn subset_order_key(subset: &EndpointSubset) -> (Option<AddressKey>, Vec<PortKey>) {
    let first = subset
        .addresses
        .iter()
        .flatten()
        .chain(subset.not_ready_addresses.iter().flatten())
        .map(address_key)
        .min();
    let ports = subset
        .ports
        .iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone(),
                p.port,
                p.protocol.clone(),
                p.app_protocol.clone(),
            )
        })
        .collect();
    (first, ports)
}

/// Whether two subset lists are equal apart from the resourceVersion of their target
/// references, as upstream's `endpointSubsetsEqualIgnoreResourceVersion` (absent and empty
/// lists, and absent and empty strings, are equal, as `Semantic.DeepEqual` and a JSON round
/// trip see them).
pub fn subsets_equal_ignoring_resource_version(a: &[EndpointSubset], b: &[EndpointSubset]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            addresses_equal(x.addresses.as_deref(), y.addresses.as_deref())
                && addresses_equal(
                    x.not_ready_addresses.as_deref(),
                    y.not_ready_addresses.as_deref(),
                )
                && ports_equal(x.ports.as_deref(), y.ports.as_deref())
        })
}

fn non_empty(s: Option<&String>) -> Option<&str> {
    s.map(String::as_str).filter(|s| !s.is_empty())
}

fn addresses_equal(a: Option<&[EndpointAddress]>, b: Option<&[EndpointAddress]>) -> bool {
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.ip == y.ip
                && non_empty(x.hostname.as_ref()) == non_empty(y.hostname.as_ref())
                && non_empty(x.node_name.as_ref()) == non_empty(y.node_name.as_ref())
                && refs_equal_ignoring_resource_version(
                    x.target_ref.as_ref(),
                    y.target_ref.as_ref(),
                )
        })
}

fn ports_equal(a: Option<&[EndpointPort]>, b: Option<&[EndpointPort]>) -> bool {
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            non_empty(x.name.as_ref()) == non_empty(y.name.as_ref())
                && x.port == y.port
                && x.protocol == y.protocol
                && x.app_protocol == y.app_protocol
        })
}

/// The number of addresses, ready and not ready, across `subsets`.
pub fn address_count(subsets: &[EndpointSubset]) -> usize {
    subsets
        .iter()
        .map(|s| {
            s.addresses.as_ref().map_or(0, Vec::len)
                + s.not_ready_addresses.as_ref().map_or(0, Vec::len)
        })
        .sum()
}

/// Whether the over-capacity annotation is as it should be, as upstream's
/// `capacityAnnotationSetCorrectly`: subsets over capacity are never "correct" (they must be
/// truncated); under it, the annotation must be absent.
pub fn capacity_annotation_set_correctly(
    annotations: Option<&BTreeMap<String, String>>,
    subsets: &[EndpointSubset],
) -> bool {
    if address_count(subsets) > MAX_CAPACITY {
        return false;
    }
    !annotations.is_some_and(|a| a.contains_key(ENDPOINTS_OVER_CAPACITY))
}

/// Cuts `endpoints` down to [`MAX_CAPACITY`] addresses, as upstream's `truncateEndpoints`:
/// ready addresses first; each subset keeps its share (rounded up) of what is kept. True
/// when something was cut.
pub fn truncate_endpoints(endpoints: &mut Endpoints) -> bool {
    let subsets = endpoints.subsets.get_or_insert_default();
    let total_ready: usize = subsets
        .iter()
        .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
        .sum();
    let total_not_ready: usize = subsets
        .iter()
        .map(|s| s.not_ready_addresses.as_ref().map_or(0, Vec::len))
        .sum();
    if total_ready + total_not_ready <= MAX_CAPACITY {
        return false;
    }
    let truncate_ready = total_ready > MAX_CAPACITY;
    let (max, num_total) = if truncate_ready {
        (MAX_CAPACITY, total_ready)
    } else {
        (MAX_CAPACITY - total_ready, total_not_ready)
    };
    let mut can_be_added = max;
    for subset in subsets.iter_mut() {
        let in_subset = if truncate_ready {
            subset.addresses.as_ref().map_or(0, Vec::len)
        } else {
            subset.not_ready_addresses.as_ref().map_or(0, Vec::len)
        };
        // The subset's proportion of the kept addresses, rounded up (so the last subsets may
        // get fewer than their share).
        let share = (in_subset * max).div_ceil(num_total.max(1));
        let to_be_added = share.min(can_be_added);
        if truncate_ready {
            if let Some(addresses) = subset.addresses.as_mut() {
                addresses.truncate(to_be_added);
                can_be_added -= addresses.len();
            }
            subset.not_ready_addresses = Some(Vec::new());
        } else if let Some(addresses) = subset.not_ready_addresses.as_mut() {
            addresses.truncate(to_be_added);
            can_be_added -= addresses.len();
        }
    }
    true
}

/// The IPs of every ready address, sorted (tests and diagnostics).
pub fn ready_ips(subsets: &[EndpointSubset]) -> BTreeSet<String> {
    subsets
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .map(|a| a.ip.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(ip: &str, uid: &str) -> EndpointAddress {
        EndpointAddress {
            ip: ip.to_owned(),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                uid: Some(uid.to_owned()),
                ..ObjectReference::default()
            }),
            ..EndpointAddress::default()
        }
    }

    fn port(name: &str, number: i32) -> EndpointPort {
        EndpointPort {
            name: Some(name.to_owned()),
            port: number,
            protocol: Some("TCP".into()),
            app_protocol: None,
        }
    }

    fn subset(
        ready: &[EndpointAddress],
        not_ready: &[EndpointAddress],
        ports: &[EndpointPort],
    ) -> EndpointSubset {
        EndpointSubset {
            addresses: (!ready.is_empty()).then(|| ready.to_vec()),
            not_ready_addresses: (!not_ready.is_empty()).then(|| not_ready.to_vec()),
            ports: (!ports.is_empty()).then(|| ports.to_vec()),
        }
    }

    /// Cases from upstream's `TestPackSubsets`.
    #[test]
    fn repack_like_upstream() {
        let (a1, a2, a3) = (
            address("1.1.1.1", "a"),
            address("2.2.2.2", "b"),
            address("3.3.3.3", "c"),
        );
        let (p1, p2) = (port("p1", 111), port("p2", 222));
        struct Case {
            name: &'static str,
            given: Vec<EndpointSubset>,
            expect: Vec<EndpointSubset>,
        }
        let cases = [
            Case {
                name: "empty everything",
                given: vec![subset(&[], &[], &[])],
                expect: vec![],
            },
            Case {
                name: "empty ports",
                given: vec![subset(std::slice::from_ref(&a1), &[], &[])],
                expect: vec![subset(std::slice::from_ref(&a1), &[], &[])],
            },
            Case {
                name: "one set, one ip, one port",
                given: vec![subset(
                    std::slice::from_ref(&a1),
                    &[],
                    std::slice::from_ref(&p1),
                )],
                expect: vec![subset(
                    std::slice::from_ref(&a1),
                    &[],
                    std::slice::from_ref(&p1),
                )],
            },
            Case {
                name: "one set, two ips",
                given: vec![subset(
                    &[a2.clone(), a1.clone()],
                    &[],
                    std::slice::from_ref(&p1),
                )],
                expect: vec![subset(
                    &[a1.clone(), a2.clone()],
                    &[],
                    std::slice::from_ref(&p1),
                )],
            },
            Case {
                name: "two sets, same ip, different ports",
                given: vec![
                    subset(std::slice::from_ref(&a1), &[], std::slice::from_ref(&p1)),
                    subset(std::slice::from_ref(&a1), &[], std::slice::from_ref(&p2)),
                ],
                expect: vec![subset(
                    std::slice::from_ref(&a1),
                    &[],
                    &[p1.clone(), p2.clone()],
                )],
            },
            Case {
                name: "duplicate ready and not ready: not ready wins",
                given: vec![
                    subset(std::slice::from_ref(&a1), &[], std::slice::from_ref(&p1)),
                    subset(&[], std::slice::from_ref(&a1), std::slice::from_ref(&p1)),
                ],
                expect: vec![subset(
                    &[],
                    std::slice::from_ref(&a1),
                    std::slice::from_ref(&p1),
                )],
            },
            Case {
                name: "same ip, different uids are distinct",
                given: vec![subset(
                    &[a1.clone(), address("1.1.1.1", "z")],
                    &[],
                    std::slice::from_ref(&p1),
                )],
                expect: vec![subset(
                    &[a1.clone(), address("1.1.1.1", "z")],
                    &[],
                    std::slice::from_ref(&p1),
                )],
            },
            Case {
                name: "three sets, overlapping ports",
                given: vec![
                    subset(std::slice::from_ref(&a1), &[], std::slice::from_ref(&p1)),
                    subset(std::slice::from_ref(&a2), &[], std::slice::from_ref(&p2)),
                    subset(std::slice::from_ref(&a3), &[], std::slice::from_ref(&p1)),
                ],
                expect: vec![
                    subset(&[a1.clone(), a3.clone()], &[], std::slice::from_ref(&p1)),
                    subset(std::slice::from_ref(&a2), &[], std::slice::from_ref(&p2)),
                ],
            },
        ];
        for case in cases {
            assert_eq!(repack_subsets(&case.given), case.expect, "{}", case.name);
        }
    }

    /// Cases in the spirit of upstream's `TestTruncateEndpoints`.
    #[test]
    fn truncation_keeps_ready_first_and_proportions() {
        let addresses = |prefix: u8, n: usize| -> Vec<EndpointAddress> {
            (0..n)
                .map(|i| {
                    address(
                        &format!("10.{prefix}.{}.{}", i / 250, i % 250),
                        &format!("{prefix}-{i}"),
                    )
                })
                .collect()
        };
        struct Case {
            name: &'static str,
            subsets: Vec<(usize, usize)>,
            want_truncated: bool,
            want: Vec<(usize, usize)>,
        }
        let cases = [
            Case {
                name: "under capacity",
                subsets: vec![(50, 50)],
                want_truncated: false,
                want: vec![(50, 50)],
            },
            Case {
                name: "exactly capacity",
                subsets: vec![(600, 400)],
                want_truncated: false,
                want: vec![(600, 400)],
            },
            Case {
                name: "not ready cut",
                subsets: vec![(600, 600)],
                want_truncated: true,
                want: vec![(600, 400)],
            },
            Case {
                name: "ready over capacity drops not ready",
                subsets: vec![(1200, 10)],
                want_truncated: true,
                want: vec![(1000, 0)],
            },
            Case {
                name: "proportional over subsets",
                subsets: vec![(300, 300), (300, 300), (100, 100)],
                want_truncated: true,
                want: vec![(300, 129), (300, 129), (100, 42)],
            },
            Case {
                name: "ready proportional",
                subsets: vec![(1000, 10), (500, 10)],
                want_truncated: true,
                want: vec![(667, 0), (333, 0)],
            },
        ];
        for case in cases {
            let mut endpoints = Endpoints {
                subsets: Some(
                    case.subsets
                        .iter()
                        .enumerate()
                        .map(|(i, (r, n))| {
                            subset(
                                &addresses(u8::try_from(2 * i).unwrap_or(0), *r),
                                &addresses(u8::try_from(2 * i + 1).unwrap_or(0), *n),
                                &[port("p", 80)],
                            )
                        })
                        .collect(),
                ),
                ..Endpoints::default()
            };
            assert_eq!(
                truncate_endpoints(&mut endpoints),
                case.want_truncated,
                "{}",
                case.name
            );
            let got: Vec<(usize, usize)> = endpoints
                .subsets
                .unwrap_or_default()
                .iter()
                .map(|s| {
                    (
                        s.addresses.as_ref().map_or(0, Vec::len),
                        s.not_ready_addresses.as_ref().map_or(0, Vec::len),
                    )
                })
                .collect();
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn equality_ignores_resource_version_and_empties() {
        let mut a = address("1.1.1.1", "a");
        let with_rv = {
            let mut b = a.clone();
            if let Some(t) = b.target_ref.as_mut() {
                t.resource_version = Some("7".into());
            }
            b
        };
        let x = vec![subset(std::slice::from_ref(&a), &[], &[port("p", 80)])];
        let y = vec![subset(&[with_rv], &[], &[port("p", 80)])];
        assert!(subsets_equal_ignoring_resource_version(&x, &y));
        let mut z = y.clone();
        z[0].not_ready_addresses = Some(Vec::new());
        assert!(
            subsets_equal_ignoring_resource_version(&x, &z),
            "empty and absent"
        );
        a.ip = "9.9.9.9".into();
        assert!(!subsets_equal_ignoring_resource_version(
            &x,
            &[subset(&[a], &[], &[port("p", 80)])]
        ));
    }

    #[test]
    fn capacity_annotation() {
        let annotated =
            BTreeMap::from([(ENDPOINTS_OVER_CAPACITY.to_owned(), TRUNCATED.to_owned())]);
        assert!(capacity_annotation_set_correctly(None, &[]));
        assert!(!capacity_annotation_set_correctly(Some(&annotated), &[]));
    }
}
