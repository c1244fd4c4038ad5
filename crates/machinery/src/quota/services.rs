//! The service evaluator's pure parts (kubernetes `pkg/quota/v1/evaluator/core/services.go`).

use k8s_openapi::api::core::v1::Service;

use super::resource_list::{Amount, ResourceList};

/// The names the service evaluator charges.
const SERVICE_RESOURCES: [&str; 4] = [
    "services",
    "count/services",
    "services.nodeports",
    "services.loadbalancers",
];

/// The names of `input` the service evaluator charges.
pub fn matching_resources<'a>(input: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    input
        .into_iter()
        .filter(|n| SERVICE_RESOURCES.contains(&n.as_str()))
        .cloned()
        .collect()
}

/// The service's usage (`serviceEvaluator.Usage`): one service; a NodePort or LoadBalancer
/// service one node port per port (a LoadBalancer that allocates no node ports only the
/// ports that name one).
pub fn usage(svc: &Service) -> ResourceList {
    let mut result = ResourceList::new();
    result.insert("services".to_owned(), Amount::count(1));
    result.insert("count/services".to_owned(), Amount::count(1));
    let spec = svc.spec.as_ref();
    let ports = spec.and_then(|s| s.ports.as_ref());
    let port_count = ports.map_or(0, Vec::len) as i64;
    match spec.and_then(|s| s.type_.as_deref()) {
        Some("NodePort") => {
            result.insert("services.nodeports".to_owned(), Amount::count(port_count));
        }
        Some("LoadBalancer") => {
            let allocates = spec.and_then(|s| s.allocate_load_balancer_node_ports) != Some(false);
            let node_ports = if allocates {
                port_count
            } else {
                ports
                    .into_iter()
                    .flatten()
                    .filter(|p| p.node_port.is_some_and(|n| n != 0))
                    .count() as i64
            };
            result.insert("services.nodeports".to_owned(), Amount::count(node_ports));
            result.insert("services.loadbalancers".to_owned(), Amount::count(1));
        }
        _ => {}
    }
    result
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::quota::resource_list::pretty_print;

    #[test]
    fn usage_by_type() {
        let cases = [
            (
                "cluster ip",
                json!({"ports": [{"port": 80}]}),
                "count/services=1,services=1",
            ),
            (
                "node port",
                json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 443}]}),
                "count/services=1,services=1,services.nodeports=2",
            ),
            (
                "load balancer",
                json!({"type": "LoadBalancer", "ports": [{"port": 80}]}),
                "count/services=1,services=1,services.loadbalancers=1,services.nodeports=1",
            ),
            (
                "load balancer without node ports",
                json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
                       "ports": [{"port": 80}, {"port": 81, "nodePort": 30001}]}),
                "count/services=1,services=1,services.loadbalancers=1,services.nodeports=1",
            ),
        ];
        for (name, spec, want) in cases {
            let svc: Service =
                serde_json::from_value(json!({"metadata": {}, "spec": spec})).expect("svc");
            assert_eq!(pretty_print(&usage(&svc)), want, "case {name}");
        }
    }
}
