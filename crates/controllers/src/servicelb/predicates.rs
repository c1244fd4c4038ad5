//! Which Services want a load balancer, which changes need a sync, and which nodes serve as backends (upstream's `wantsLoadBalancer`, `needsCleanup`, `needsUpdate`, `getNodeConditionPredicate`, `shouldSyncNode`).

use k8s_openapi::api::core::v1::{Node, Service, ServicePort};

/// The finalizer that keeps a Service until its load balancer is gone
/// (`servicehelper.LoadBalancerCleanupFinalizer`).
pub const LOAD_BALANCER_CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// The label that keeps a node out of every load balancer (`v1.LabelNodeExcludeBalancers`).
pub const EXCLUDE_BALANCERS_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// The taint the cluster autoscaler puts on a node it is about to delete.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

fn service_type(service: &Service) -> &str {
    service
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("ClusterIP")
}

/// A `LoadBalancer` Service without `spec.loadBalancerClass`: a class names another
/// implementation, so the cloud's controller leaves the Service alone.
pub fn wants_load_balancer(service: &Service) -> bool {
    service_type(service) == "LoadBalancer"
        && service
            .spec
            .as_ref()
            .is_none_or(|s| s.load_balancer_class.is_none())
}

/// Whether `service` carries the cleanup finalizer.
pub fn has_lb_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER))
}

/// A Service with the finalizer whose load balancer must go: it is being deleted, or it is no
/// longer of type `LoadBalancer`.
pub fn needs_cleanup(service: &Service) -> bool {
    has_lb_finalizer(service)
        && (service.metadata.deletion_timestamp.is_some()
            || service_type(service) != "LoadBalancer")
}

/// An event [`needs_update`] asks for: reason and message.
pub type UpdateEvent = (&'static str, String);

fn port_equal_for_lb(x: &ServicePort, y: &ServicePort) -> bool {
    x.name == y.name
        && x.protocol == y.protocol
        && x.port == y.port
        && x.node_port == y.node_port
        && x.target_port == y.target_port
}

fn ports(service: &Service) -> &[ServicePort] {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default()
}

/// Whether a change from `old` to `new` needs the load balancer synced, and the events
/// upstream records on the way (`Type`, `LoadBalancerSourceRanges`, `LoadbalancerIP`,
/// `ExternalIP`, `UID`, `ExternalTrafficPolicy`, `HealthCheckNodePort`).
pub fn needs_update(old: &Service, new: &Service) -> (bool, Option<UpdateEvent>) {
    let (old_wants, new_wants) = (wants_load_balancer(old), wants_load_balancer(new));
    if !old_wants && !new_wants {
        return (false, None);
    }
    if old_wants != new_wants {
        return (
            true,
            Some((
                "Type",
                format!("{} -> {}", service_type(old), service_type(new)),
            )),
        );
    }
    let default_spec = Default::default();
    let o = old.spec.as_ref().unwrap_or(&default_spec);
    let n = new.spec.as_ref().unwrap_or(&default_spec);
    if o.load_balancer_source_ranges != n.load_balancer_source_ranges {
        return (
            true,
            Some((
                "LoadBalancerSourceRanges",
                format!(
                    "{} -> {}",
                    go_list(o.load_balancer_source_ranges.as_deref()),
                    go_list(n.load_balancer_source_ranges.as_deref())
                ),
            )),
        );
    }
    let (op, np) = (ports(old), ports(new));
    if op.len() != np.len()
        || op.iter().zip(np).any(|(x, y)| !port_equal_for_lb(x, y))
        || o.session_affinity != n.session_affinity
        || o.session_affinity_config != n.session_affinity_config
    {
        return (true, None);
    }
    if o.load_balancer_ip != n.load_balancer_ip {
        return (
            true,
            Some((
                "LoadbalancerIP",
                format!(
                    "{} -> {}",
                    o.load_balancer_ip.as_deref().unwrap_or_default(),
                    n.load_balancer_ip.as_deref().unwrap_or_default()
                ),
            )),
        );
    }
    let (oe, ne) = (
        o.external_ips.as_deref().unwrap_or_default(),
        n.external_ips.as_deref().unwrap_or_default(),
    );
    if oe.len() != ne.len() {
        return (
            true,
            Some(("ExternalIP", format!("Count: {} -> {}", oe.len(), ne.len()))),
        );
    }
    if let Some(added) = oe.iter().zip(ne).find(|(x, y)| x != y).map(|(_, y)| y) {
        return (true, Some(("ExternalIP", format!("Added: {added}"))));
    }
    if old.metadata.annotations != new.metadata.annotations {
        return (true, None);
    }
    if old.metadata.uid != new.metadata.uid {
        return (
            true,
            Some((
                "UID",
                format!(
                    "{} -> {}",
                    old.metadata.uid.as_deref().unwrap_or_default(),
                    new.metadata.uid.as_deref().unwrap_or_default()
                ),
            )),
        );
    }
    if o.external_traffic_policy != n.external_traffic_policy {
        return (
            true,
            Some((
                "ExternalTrafficPolicy",
                format!(
                    "{} -> {}",
                    o.external_traffic_policy.as_deref().unwrap_or_default(),
                    n.external_traffic_policy.as_deref().unwrap_or_default()
                ),
            )),
        );
    }
    if o.health_check_node_port != n.health_check_node_port {
        return (
            true,
            Some((
                "HealthCheckNodePort",
                format!(
                    "{} -> {}",
                    o.health_check_node_port.unwrap_or_default(),
                    n.health_check_node_port.unwrap_or_default()
                ),
            )),
        );
    }
    (false, None)
}

/// A string list as Go's `%v` prints it: `[a b]`.
fn go_list(list: Option<&[String]>) -> String {
    format!("[{}]", list.unwrap_or_default().join(" "))
}

fn ready_status(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// Whether `node` may be a load balancer backend: not labelled out, not about to be deleted
/// by the autoscaler, with conditions, and `Ready` unless it reports no `Ready` condition.
pub fn is_backend(node: &Node) -> bool {
    if node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(EXCLUDE_BALANCERS_LABEL))
    {
        return false;
    }
    if node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TO_BE_DELETED_TAINT))
    {
        return false;
    }
    let has_conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| !c.is_empty());
    has_conditions && ready_status(node).is_none_or(|s| s == "True")
}

/// Whether a node change may change the backend set: schedulability, labels, or readiness.
pub fn should_sync_node(old: &Node, new: &Node) -> bool {
    let unschedulable = |n: &Node| n.spec.as_ref().and_then(|s| s.unschedulable);
    unschedulable(old) != unschedulable(new)
        || old.metadata.labels != new.metadata.labels
        || ready_status(old) != ready_status(new)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, ServiceSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn svc(type_: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("s".to_owned()),
                namespace: Some("default".to_owned()),
                uid: Some("u1".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(type_.to_owned()),
                ports: Some(vec![ServicePort {
                    port: 80,
                    protocol: Some("TCP".to_owned()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    fn spec(s: &mut Service) -> &mut ServiceSpec {
        s.spec.get_or_insert_with(Default::default)
    }

    #[test]
    fn only_classless_load_balancers_are_wanted() {
        assert!(wants_load_balancer(&svc("LoadBalancer")));
        assert!(!wants_load_balancer(&svc("NodePort")));
        let mut classed = svc("LoadBalancer");
        spec(&mut classed).load_balancer_class = Some("example.com/lb".to_owned());
        assert!(!wants_load_balancer(&classed));
    }

    #[test]
    fn cleanup_needs_the_finalizer_and_a_deletion_or_a_type_change() {
        let mut lb = svc("LoadBalancer");
        assert!(!needs_cleanup(&lb));
        lb.metadata.finalizers = Some(vec![LOAD_BALANCER_CLEANUP_FINALIZER.to_owned()]);
        assert!(!needs_cleanup(&lb));
        let mut deleted = lb.clone();
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().expect("time"),
            ));
        assert!(needs_cleanup(&deleted));
        let mut now_cluster_ip = lb;
        spec(&mut now_cluster_ip).type_ = Some("ClusterIP".to_owned());
        assert!(needs_cleanup(&now_cluster_ip));
    }

    /// Upstream's `TestNeedsUpdate` cases.
    #[test]
    fn needs_update_as_upstream() {
        type Change = fn(&mut Service, &mut Service);
        let cases: Vec<(&str, Change, bool, Option<&str>)> = vec![
            ("no change", |_, _| {}, false, None),
            (
                "type changed to NodePort",
                |_, n| spec(n).type_ = Some("NodePort".to_owned()),
                true,
                Some("Type"),
            ),
            (
                "both not load balancers",
                |o, n| {
                    spec(o).type_ = Some("ClusterIP".to_owned());
                    spec(n).type_ = Some("NodePort".to_owned());
                },
                false,
                None,
            ),
            (
                "source ranges changed",
                |_, n| spec(n).load_balancer_source_ranges = Some(vec!["10.0.0.0/8".to_owned()]),
                true,
                Some("LoadBalancerSourceRanges"),
            ),
            (
                "port added",
                |_, n| {
                    spec(n)
                        .ports
                        .get_or_insert_with(Vec::new)
                        .push(ServicePort {
                            port: 81,
                            ..ServicePort::default()
                        })
                },
                true,
                None,
            ),
            (
                "node port changed",
                |_, n| spec(n).ports.as_mut().expect("ports")[0].node_port = Some(30001),
                true,
                None,
            ),
            (
                "session affinity changed",
                |_, n| spec(n).session_affinity = Some("ClientIP".to_owned()),
                true,
                None,
            ),
            (
                "load balancer IP changed",
                |_, n| spec(n).load_balancer_ip = Some("192.0.2.5".to_owned()),
                true,
                Some("LoadbalancerIP"),
            ),
            (
                "external IP added",
                |_, n| spec(n).external_ips = Some(vec!["1.2.3.4".to_owned()]),
                true,
                Some("ExternalIP"),
            ),
            (
                "external IP replaced",
                |o, n| {
                    spec(o).external_ips = Some(vec!["1.2.3.4".to_owned()]);
                    spec(n).external_ips = Some(vec!["1.2.3.5".to_owned()]);
                },
                true,
                Some("ExternalIP"),
            ),
            (
                "annotations changed",
                |_, n| {
                    n.metadata.annotations =
                        Some(BTreeMap::from([("a".to_owned(), "b".to_owned())]))
                },
                true,
                None,
            ),
            (
                "uid changed",
                |_, n| n.metadata.uid = Some("u2".to_owned()),
                true,
                Some("UID"),
            ),
            (
                "external traffic policy changed",
                |_, n| spec(n).external_traffic_policy = Some("Local".to_owned()),
                true,
                Some("ExternalTrafficPolicy"),
            ),
            (
                "health check node port changed",
                |_, n| spec(n).health_check_node_port = Some(30100),
                true,
                Some("HealthCheckNodePort"),
            ),
            (
                "status-only change",
                |_, n| n.metadata.resource_version = Some("9".to_owned()),
                false,
                None,
            ),
        ];
        for (name, change, want, want_event) in cases {
            let (mut old, mut new) = (svc("LoadBalancer"), svc("LoadBalancer"));
            change(&mut old, &mut new);
            let (got, event) = needs_update(&old, &new);
            assert_eq!(got, want, "{name}");
            assert_eq!(event.map(|(reason, _)| reason), want_event, "{name}");
        }
        let (mut old, mut new) = (svc("LoadBalancer"), svc("LoadBalancer"));
        spec(&mut old).load_balancer_source_ranges = Some(vec!["1.0.0.0/8".to_owned()]);
        spec(&mut new).load_balancer_source_ranges =
            Some(vec!["1.0.0.0/8".to_owned(), "2.0.0.0/8".to_owned()]);
        assert_eq!(
            needs_update(&old, &new).1.expect("event").1,
            "[1.0.0.0/8] -> [1.0.0.0/8 2.0.0.0/8]"
        );
        assert_eq!(
            needs_update(&svc("LoadBalancer"), &svc("NodePort"))
                .1
                .expect("event")
                .1,
            "LoadBalancer -> NodePort"
        );
    }

    fn node(ready: Option<&str>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                conditions: Some(
                    ready
                        .map(|s| NodeCondition {
                            type_: "Ready".to_owned(),
                            status: s.to_owned(),
                            ..NodeCondition::default()
                        })
                        .into_iter()
                        .chain([NodeCondition {
                            type_: "MemoryPressure".to_owned(),
                            status: "False".to_owned(),
                            ..NodeCondition::default()
                        }])
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
        }
    }

    /// Upstream's `TestNodeConditionPredicate` cases.
    #[test]
    fn backends_are_ready_nodes_not_excluded() {
        assert!(is_backend(&node(Some("True"))));
        assert!(!is_backend(&node(Some("False"))));
        assert!(!is_backend(&node(Some("Unknown"))));
        // No Ready condition among others: accepted, as upstream.
        assert!(is_backend(&node(None)));
        let mut bare = node(Some("True"));
        bare.status = Some(NodeStatus::default());
        assert!(!is_backend(&bare), "no conditions at all");
        let mut excluded = node(Some("True"));
        excluded.metadata.labels = Some(BTreeMap::from([(
            EXCLUDE_BALANCERS_LABEL.to_owned(),
            String::new(),
        )]));
        assert!(!is_backend(&excluded));
        let mut doomed = node(Some("True"));
        doomed.spec = Some(NodeSpec {
            taints: Some(vec![Taint {
                key: TO_BE_DELETED_TAINT.to_owned(),
                effect: "NoSchedule".to_owned(),
                ..Taint::default()
            }]),
            ..NodeSpec::default()
        });
        assert!(!is_backend(&doomed));
        // Unschedulable nodes still serve (upstream dropped that filter).
        let mut cordoned = node(Some("True"));
        cordoned
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        assert!(is_backend(&cordoned));
    }

    #[test]
    fn node_syncs_follow_schedulability_labels_and_readiness() {
        let base = node(Some("True"));
        assert!(!should_sync_node(&base, &base.clone()));
        assert!(should_sync_node(&base, &node(Some("False"))));
        let mut labelled = base.clone();
        labelled.metadata.labels = Some(BTreeMap::from([("a".to_owned(), "b".to_owned())]));
        assert!(should_sync_node(&base, &labelled));
        let mut cordoned = base.clone();
        cordoned
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        assert!(should_sync_node(&base, &cordoned));
    }
}
