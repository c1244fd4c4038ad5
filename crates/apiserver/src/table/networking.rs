//! Rows of the networking.k8s.io kinds: Ingress, IngressClass, NetworkPolicy, ServiceCIDR, IPAddress.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::since;
use super::fields::{get, list_at, name, str_at, time_at};
use super::labels::format_label_selector;

fn age(obj: &Value, now: Timestamp) -> Value {
    json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now))
}

/// upstream's `formatHosts`: up to three hosts, `*` when no rule names one.
fn format_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if list.len() == MAX {
            more = true;
        }
        let host = str_at(rule, &["host"]);
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_owned();
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", rules.len() - MAX)
    } else {
        joined
    }
}

/// upstream's `printIngress`. The address is printed unclipped, as the server prints wide.
pub(super) fn ingress(obj: &Value, now: Timestamp) -> Row {
    let class = get(obj, &["spec", "ingressClassName"])
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    // ingressLoadBalancerStatusStringer: the sorted set of IPs (or hostnames).
    let addresses: BTreeSet<&str> = list_at(obj, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| {
            let ip = str_at(i, &["ip"]);
            let host = str_at(i, &["hostname"]);
            if !ip.is_empty() {
                Some(ip)
            } else if !host.is_empty() {
                Some(host)
            } else {
                None
            }
        })
        .collect();
    let ports = if list_at(obj, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    Row::new(vec![
        json!(name(obj)),
        json!(class),
        json!(format_hosts(list_at(obj, &["spec", "rules"]))),
        json!(addresses.into_iter().collect::<Vec<_>>().join(",")),
        json!(ports),
        age(obj, now),
    ])
}

/// upstream's `printIngressClass`: PARAMETERS as `Kind[.group]/name`.
pub(super) fn ingress_class(obj: &Value, now: Timestamp) -> Row {
    let parameters = match get(obj, &["spec", "parameters"]).filter(|p| !p.is_null()) {
        None => "<none>".to_owned(),
        Some(p) => {
            let mut text = str_at(p, &["kind"]).to_owned();
            if let Some(group) = get(p, &["apiGroup"]).and_then(Value::as_str) {
                text = format!("{text}.{group}");
            }
            format!("{text}/{}", str_at(p, &["name"]))
        }
    };
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "controller"])),
        json!(parameters),
        age(obj, now),
    ])
}

/// upstream's `printNetworkPolicy`.
pub(super) fn network_policy(obj: &Value, now: Timestamp) -> Row {
    // The pod selector is a value field upstream: absent reads as the empty selector.
    let selector = get(obj, &["spec", "podSelector"])
        .cloned()
        .unwrap_or(json!({}));
    Row::new(vec![
        json!(name(obj)),
        json!(format_label_selector(Some(&selector))),
        age(obj, now),
    ])
}

/// upstream's `printServiceCIDR`.
pub(super) fn service_cidr(obj: &Value, now: Timestamp) -> Row {
    let cidrs: Vec<&str> = list_at(obj, &["spec", "cidrs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    Row::new(vec![
        json!(name(obj)),
        json!(cidrs.join(",")),
        age(obj, now),
    ])
}

/// upstream's `printIPAddress`: PARENTREF as `resource[.group][/namespace]/name`.
pub(super) fn ip_address(obj: &Value, _now: Timestamp) -> Row {
    let parent = match get(obj, &["spec", "parentRef"]).filter(|p| !p.is_null()) {
        None => "<none>".to_owned(),
        Some(p) => {
            let resource = str_at(p, &["resource"]);
            let group = str_at(p, &["group"]);
            let mut text = if group.is_empty() {
                resource.to_lowercase()
            } else {
                format!("{resource}.{group}").to_lowercase()
            };
            let namespace = str_at(p, &["namespace"]);
            if !namespace.is_empty() {
                text = format!("{text}/{namespace}");
            }
            format!("{text}/{}", str_at(p, &["name"]))
        }
    };
    Row::new(vec![json!(name(obj)), json!(parent)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    const CREATED: &str = "2024-05-01T11:59:00Z";

    #[test]
    fn ingress_rows() {
        let ing = json!({
            "metadata": {"name": "web", "creationTimestamp": CREATED},
            "spec": {"ingressClassName": "nginx",
                     "rules": [{"host": "a.example.com"}, {}, {"host": "b.example.com"},
                               {"host": "c.example.com"}, {"host": "d.example.com"}],
                     "tls": [{"hosts": ["a.example.com"]}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}, {"hostname": "lb.example.com"}, {"ip": "10.0.0.1"}]}}
        });
        assert_eq!(
            ingress(&ing, now()).cells,
            [
                json!("web"),
                json!("nginx"),
                json!("a.example.com,b.example.com,c.example.com + 2 more..."),
                json!("10.0.0.1,10.0.0.2,lb.example.com"),
                json!("80, 443"),
                json!("60s")
            ]
        );
        let bare = json!({"metadata": {"name": "x", "creationTimestamp": CREATED},
            "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}});
        let cells = ingress(&bare, now()).cells;
        assert_eq!(
            cells[1..5],
            [json!("<none>"), json!("*"), json!(""), json!("80")]
        );
    }

    #[test]
    fn small_networking_kinds() {
        let class = json!({"metadata": {"name": "nginx", "creationTimestamp": CREATED},
            "spec": {"controller": "k8s.io/ingress-nginx",
                     "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "p"}}});
        assert_eq!(
            ingress_class(&class, now()).cells[1..3],
            [
                json!("k8s.io/ingress-nginx"),
                json!("IngressParameters.k8s.example.com/p")
            ]
        );
        let policy = json!({"metadata": {"name": "deny", "creationTimestamp": CREATED},
            "spec": {"podSelector": {"matchLabels": {"app": "db"}}}});
        assert_eq!(network_policy(&policy, now()).cells[1], json!("app=db"));
        let all = json!({"metadata": {"name": "all", "creationTimestamp": CREATED}, "spec": {"podSelector": {}}});
        assert_eq!(network_policy(&all, now()).cells[1], json!("<none>"));
        let cidr = json!({"metadata": {"name": "kubernetes", "creationTimestamp": CREATED},
            "spec": {"cidrs": ["10.96.0.0/12", "fd00::/108"]}});
        assert_eq!(
            service_cidr(&cidr, now()).cells[1],
            json!("10.96.0.0/12,fd00::/108")
        );
        let ip = json!({"metadata": {"name": "10.96.0.10"},
            "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "kube-system", "name": "kube-dns"}}});
        assert_eq!(
            ip_address(&ip, now()).cells,
            [json!("10.96.0.10"), json!("services/kube-system/kube-dns")]
        );
    }
}
