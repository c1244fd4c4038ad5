//! Rows of the core and cluster kinds: Node, Namespace, Service, Endpoints, EndpointSlice,
//! Event, ConfigMap, Secret, ServiceAccount, Lease, PodDisruptionBudget, PriorityClass.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::since;
use super::fields::{bool_at, get, int_at, list_at, map_len_at, name, opt_int_at, str_at, time_at};
use super::labels::format_labels;

/// A node role label prefix: `node-role.kubernetes.io/<role>`.
const LABEL_NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
/// The older role label: `kubernetes.io/role=<role>`.
const NODE_LABEL_ROLE: &str = "kubernetes.io/role";

fn age(obj: &Value, now: Timestamp) -> Value {
    json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now))
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "<unknown>" } else { s }
}

/// upstream's `printNode`: STATUS from the Ready condition plus `SchedulingDisabled`,
/// ROLES from the role labels.
pub(super) fn node(obj: &Value, now: Timestamp) -> Row {
    // Only Ready is reported; the last condition of that type wins, as in upstream's map.
    let ready = list_at(obj, &["status", "conditions"])
        .iter()
        .rfind(|c| str_at(c, &["type"]) == "Ready");
    let mut status: Vec<&str> = Vec::new();
    match ready {
        Some(c) if str_at(c, &["status"]) == "True" => status.push("Ready"),
        Some(_) => status.push("NotReady"),
        None => status.push("Unknown"),
    }
    if bool_at(obj, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }

    let mut roles: BTreeSet<&str> = BTreeSet::new();
    if let Some(labels) = get(obj, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix(LABEL_NODE_ROLE_PREFIX) {
                if !role.is_empty() {
                    roles.insert(role);
                }
            } else if k == NODE_LABEL_ROLE
                && let Some(v) = v.as_str().filter(|v| !v.is_empty())
            {
                roles.insert(v);
            }
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_owned()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };

    let address = |ty: &str| {
        list_at(obj, &["status", "addresses"])
            .iter()
            .find(|a| str_at(a, &["type"]) == ty)
            .map_or("<none>", |a| str_at(a, &["address"]))
    };
    let info = |field: &str| or_unknown(str_at(obj, &["status", "nodeInfo", field]));
    Row::new(vec![
        json!(name(obj)),
        json!(status.join(",")),
        json!(roles),
        age(obj, now),
        json!(str_at(obj, &["status", "nodeInfo", "kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ])
}

/// upstream's `printNamespace`.
pub(super) fn namespace(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["status", "phase"])),
        age(obj, now),
    ])
}

/// upstream's `loadBalancerStatusStringer` (wide: never clipped): distinct ingress IPs or
/// hostnames, sorted.
fn load_balancer_ingress(obj: &Value) -> String {
    let set: BTreeSet<&str> = list_at(obj, &["status", "loadBalancer", "ingress"])
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
    set.into_iter().collect::<Vec<_>>().join(",")
}

/// upstream's `getServiceExternalIP`.
fn service_external_ip(obj: &Value, ty: &str) -> String {
    let external: Vec<&str> = list_at(obj, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match ty {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".to_owned()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let lb = load_balancer_ingress(obj);
            if !external.is_empty() {
                let mut all: Vec<&str> = if lb.is_empty() {
                    Vec::new()
                } else {
                    lb.split(',').collect()
                };
                all.extend(external);
                all.join(",")
            } else if !lb.is_empty() {
                lb
            } else {
                "<pending>".to_owned()
            }
        }
        "ExternalName" => str_at(obj, &["spec", "externalName"]).to_owned(),
        _ => "<unknown>".to_owned(),
    }
}

/// upstream's `printService` (type and protocol default as the API server defaults them).
pub(super) fn service(obj: &Value, now: Timestamp) -> Row {
    let ty = match str_at(obj, &["spec", "type"]) {
        "" => "ClusterIP",
        ty => ty,
    };
    let cluster_ip = list_at(obj, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
        .unwrap_or_else(|| str_at(obj, &["spec", "clusterIP"]));
    let ports: Vec<String> = list_at(obj, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]);
            let protocol = match str_at(p, &["protocol"]) {
                "" => "TCP",
                protocol => protocol,
            };
            match int_at(p, &["nodePort"]) {
                node_port if node_port > 0 => format!("{port}:{node_port}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_owned()
    } else {
        ports.join(",")
    };
    Row::new(vec![
        json!(name(obj)),
        json!(ty),
        json!(if cluster_ip.is_empty() {
            "<none>"
        } else {
            cluster_ip
        }),
        json!(service_external_ip(obj, ty)),
        json!(ports),
        age(obj, now),
        json!(format_labels(get(obj, &["spec", "selector"]))),
    ])
}

/// `host:port`, bracketing IPv6 addresses (Go's `net.JoinHostPort`).
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// upstream's `formatEndpoints` for all ports: at most three addresses, then `+ N more...`.
fn format_endpoints(obj: &Value) -> String {
    let subsets = list_at(obj, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_owned();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for subset in subsets {
        let addresses = list_at(subset, &["addresses"]);
        let ports = list_at(subset, &["ports"]);
        if ports.is_empty() {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_at(a, &["ip"]).to_owned());
            }
            continue;
        }
        for port in ports {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(str_at(a, &["ip"]), int_at(port, &["port"])));
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

/// upstream's `printEndpoints`.
pub(super) fn endpoints(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(format_endpoints(obj)),
        age(obj, now),
    ])
}

/// upstream's `listWithMoreString`.
fn list_with_more(list: &[String], more: bool, count: usize, max: usize) -> String {
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - max)
    } else if joined.is_empty() {
        "<unset>".to_owned()
    } else {
        joined
    }
}

/// upstream's `printEndpointSlice`.
pub(super) fn endpoint_slice(obj: &Value, now: Timestamp) -> Row {
    const MAX: usize = 3;
    let (mut ports, mut more, mut count) = (Vec::new(), false, 0);
    for port in list_at(obj, &["ports"]) {
        if ports.len() < MAX {
            let text = match (
                opt_int_at(port, &["port"]),
                get(port, &["name"]).and_then(Value::as_str),
            ) {
                (Some(p), _) => p.to_string(),
                (None, Some(name)) => name.to_owned(),
                (None, None) => "*".to_owned(),
            };
            ports.push(text);
        } else if ports.len() == MAX {
            more = true;
        }
        count += 1;
    }
    let ports = list_with_more(&ports, more, count, MAX);
    let (mut addresses, mut more, mut count) = (Vec::new(), false, 0);
    for endpoint in list_at(obj, &["endpoints"]) {
        for address in list_at(endpoint, &["addresses"]) {
            if addresses.len() < MAX {
                addresses.push(address.as_str().unwrap_or("").to_owned());
            } else if addresses.len() == MAX {
                more = true;
            }
            count += 1;
        }
    }
    let addresses = list_with_more(&addresses, more, count, MAX);
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["addressType"])),
        json!(ports),
        json!(addresses),
        age(obj, now),
    ])
}

/// A string field of a core/v1 Event, falling back to its events.k8s.io/v1 name.
fn event_str<'a>(obj: &'a Value, core: &[&str], events_v1: &[&str]) -> &'a str {
    match str_at(obj, core) {
        "" => str_at(obj, events_v1),
        s => s,
    }
}

/// upstream's `printEvent` (wide), for core/v1 Events and events.k8s.io/v1 Events (whose
/// fields upstream converts to the core ones before printing).
pub(super) fn event(obj: &Value, now: Timestamp) -> Row {
    let first_ts =
        time_at(obj, &["firstTimestamp"]).or_else(|| time_at(obj, &["deprecatedFirstTimestamp"]));
    let first = match first_ts {
        Some(t) => since(Some(t), now),
        None => since(time_at(obj, &["eventTime"]), now),
    };
    let last_ts =
        time_at(obj, &["lastTimestamp"]).or_else(|| time_at(obj, &["deprecatedLastTimestamp"]));
    let mut last = match last_ts {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = opt_int_at(obj, &["count"])
        .or_else(|| opt_int_at(obj, &["deprecatedCount"]))
        .unwrap_or(0);
    if let Some(series) = get(obj, &["series"]).filter(|s| s.is_object()) {
        last = since(time_at(series, &["lastObservedTime"]), now);
        count = int_at(series, &["count"]);
    } else if count == 0 {
        // Singleton events don't have a count set in the new API.
        count = 1;
    }

    let involved = get(obj, &["involvedObject"])
        .filter(|v| v.is_object())
        .or_else(|| get(obj, &["regarding"]));
    let kind = involved.map_or("", |i| str_at(i, &["kind"])).to_lowercase();
    let involved_name = involved.map_or("", |i| str_at(i, &["name"]));
    let target = if involved_name.is_empty() {
        kind
    } else {
        format!("{kind}/{involved_name}")
    };
    let field_path = involved.map_or("", |i| str_at(i, &["fieldPath"]));

    let component = event_str(
        obj,
        &["source", "component"],
        &["deprecatedSource", "component"],
    );
    let host = event_str(obj, &["source", "host"], &["deprecatedSource", "host"]);
    let component = if component.is_empty() {
        str_at(obj, &["reportingController"])
    } else {
        component
    };
    let host = if host.is_empty() {
        str_at(obj, &["reportingInstance"])
    } else {
        host
    };
    let source = if host.is_empty() {
        component.to_owned()
    } else {
        format!("{component}, {host}")
    };
    let message = event_str(obj, &["message"], &["note"]).trim();

    Row::new(vec![
        json!(last),
        json!(str_at(obj, &["type"])),
        json!(str_at(obj, &["reason"])),
        json!(target),
        json!(field_path),
        json!(source),
        json!(message),
        json!(first),
        json!(count),
        json!(name(obj)),
    ])
}

/// upstream's `printConfigMap`: DATA counts `data` and `binaryData`.
pub(super) fn config_map(obj: &Value, now: Timestamp) -> Row {
    let data = map_len_at(obj, &["data"]) + map_len_at(obj, &["binaryData"]);
    Row::new(vec![json!(name(obj)), json!(data), age(obj, now)])
}

/// upstream's `printSecret`.
pub(super) fn secret(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["type"])),
        json!(map_len_at(obj, &["data"])),
        age(obj, now),
    ])
}

/// upstream's `printServiceAccount`.
pub(super) fn service_account(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(list_at(obj, &["secrets"]).len()),
        age(obj, now),
    ])
}

/// upstream's `printLease`.
pub(super) fn lease(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "holderIdentity"])),
        age(obj, now),
    ])
}

/// An IntOrString as text; `N/A` when unset.
fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => "N/A".to_owned(),
    }
}

/// upstream's `printPodDisruptionBudget`.
pub(super) fn pod_disruption_budget(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(int_or_string(get(obj, &["spec", "minAvailable"]))),
        json!(int_or_string(get(obj, &["spec", "maxUnavailable"]))),
        json!(int_at(obj, &["status", "disruptionsAllowed"])),
        age(obj, now),
    ])
}

/// upstream's `printPriorityClass`.
pub(super) fn priority_class(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(int_at(obj, &["value"])),
        json!(bool_at(obj, &["globalDefault"])),
        age(obj, now),
        json!(str_at(obj, &["preemptionPolicy"])),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    fn texts(row: Row) -> Vec<String> {
        row.cells
            .iter()
            .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
            .collect()
    }

    #[test]
    fn node_rows() {
        struct Case {
            name: &'static str,
            node: Value,
            want: [&'static str; 3],
        }
        let cases = [
            Case {
                name: "ready control plane",
                node: json!({"metadata": {"labels": {
                    "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/master": ""}},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                want: ["Ready", "control-plane,master", "3d"],
            },
            Case {
                name: "cordoned, not ready, old role label",
                node: json!({"metadata": {"labels": {"kubernetes.io/role": "worker"}},
                    "spec": {"unschedulable": true},
                    "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
                want: ["NotReady,SchedulingDisabled", "worker", "3d"],
            },
            Case {
                name: "no conditions yet",
                node: json!({"metadata": {}, "spec": {"unschedulable": true}}),
                want: ["Unknown,SchedulingDisabled", "<none>", "3d"],
            },
        ];
        for mut case in cases {
            case.node["metadata"]["name"] = json!("n1");
            case.node["metadata"]["creationTimestamp"] = json!("2024-04-28T12:00:00Z");
            let got = texts(node(&case.node, now()));
            assert_eq!(got[1..4], case.want, "{}", case.name);
        }
        let full = json!({
            "metadata": {"name": "n1", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "status": {"nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "kcm-sim"},
                "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.1"}]}
        });
        assert_eq!(
            texts(node(&full, now())),
            [
                "n1",
                "Unknown",
                "<none>",
                "60m",
                "v1.32.0",
                "10.0.0.1",
                "<none>",
                "kcm-sim",
                "<unknown>",
                "<unknown>"
            ]
        );
    }

    #[test]
    fn service_rows() {
        let svc = json!({
            "metadata": {"name": "web", "creationTimestamp": "2024-05-01T11:59:00Z"},
            "spec": {"clusterIP": "10.96.0.10", "ports": [
                {"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}
            ], "selector": {"app": "web"}}
        });
        assert_eq!(
            texts(service(&svc, now())),
            [
                "web",
                "ClusterIP",
                "10.96.0.10",
                "<none>",
                "80/TCP,53/UDP",
                "60s",
                "app=web"
            ]
        );
        let lb = json!({
            "metadata": {"name": "lb"},
            "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.11"],
                     "ports": [{"port": 443, "nodePort": 30443}]},
            "status": {"loadBalancer": {}}
        });
        assert_eq!(
            texts(service(&lb, now()))[..5],
            [
                "lb",
                "LoadBalancer",
                "10.96.0.11",
                "<pending>",
                "443:30443/TCP"
            ]
        );
        let ext = json!({"metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "externalName": "example.com"}});
        assert_eq!(
            texts(service(&ext, now()))[..5],
            ["ext", "ExternalName", "<none>", "example.com", "<none>"]
        );
    }

    #[test]
    fn event_rows() {
        let ev = json!({
            "metadata": {"name": "web-1.17a"},
            "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{nginx}"},
            "reason": "Pulled", "type": "Normal", "message": "Successfully pulled image \"nginx\"\n",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2024-05-01T11:50:00Z", "lastTimestamp": "2024-05-01T11:58:00Z", "count": 3
        });
        assert_eq!(
            texts(event(&ev, now())),
            [
                "2m",
                "Normal",
                "Pulled",
                "pod/web-1",
                "spec.containers{nginx}",
                "kubelet, node-1",
                "Successfully pulled image \"nginx\"",
                "10m",
                "3",
                "web-1.17a"
            ]
        );
        let v1 = json!({
            "metadata": {"name": "rs.1"},
            "regarding": {"kind": "ReplicaSet", "name": "web-5d8f"},
            "reason": "SuccessfulCreate", "type": "Normal", "note": "Created pod: web-5d8f-x",
            "reportingController": "replicaset-controller",
            "eventTime": "2024-05-01T11:59:30.000000Z"
        });
        assert_eq!(
            texts(event(&v1, now())),
            [
                "30s",
                "Normal",
                "SuccessfulCreate",
                "replicaset/web-5d8f",
                "",
                "replicaset-controller",
                "Created pod: web-5d8f-x",
                "30s",
                "1",
                "rs.1"
            ]
        );
    }

    #[test]
    fn small_kinds() {
        let created = json!("2024-05-01T11:59:55Z");
        let cm = json!({"metadata": {"name": "cfg", "creationTimestamp": created},
            "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(texts(config_map(&cm, now())), ["cfg", "3", "5s"]);
        let s = json!({"metadata": {"name": "tok", "creationTimestamp": created},
            "type": "Opaque", "data": {"k": "dg=="}});
        assert_eq!(texts(secret(&s, now())), ["tok", "Opaque", "1", "5s"]);
        let l = json!({"metadata": {"name": "kcm", "creationTimestamp": created},
            "spec": {"holderIdentity": "host_1234"}});
        assert_eq!(texts(lease(&l, now())), ["kcm", "host_1234", "5s"]);
        let ns = json!({"metadata": {"name": "default", "creationTimestamp": created},
            "status": {"phase": "Active"}});
        assert_eq!(texts(namespace(&ns, now())), ["default", "Active", "5s"]);
        let sa = json!({"metadata": {"name": "default", "creationTimestamp": created}});
        assert_eq!(texts(service_account(&sa, now())), ["default", "0", "5s"]);
        let pdb = json!({"metadata": {"name": "web", "creationTimestamp": created},
            "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}});
        assert_eq!(
            texts(pod_disruption_budget(&pdb, now())),
            ["web", "50%", "N/A", "1", "5s"]
        );
        let pc = json!({"metadata": {"name": "high", "creationTimestamp": created},
            "value": 1000, "preemptionPolicy": "PreemptLowerPriority"});
        assert_eq!(
            texts(priority_class(&pc, now())),
            ["high", "1000", "false", "5s", "PreemptLowerPriority"]
        );
    }

    #[test]
    fn endpoints_rows() {
        let ep = json!({"metadata": {"name": "web"}, "subsets": [{
            "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "fd00::3"}, {"ip": "10.0.0.4"}],
            "ports": [{"port": 80}]
        }]});
        assert_eq!(
            texts(endpoints(&ep, now()))[1],
            "10.0.0.1:80,10.0.0.2:80,[fd00::3]:80 + 1 more..."
        );
        let none = json!({"metadata": {"name": "x"}});
        assert_eq!(texts(endpoints(&none, now()))[1], "<none>");
        let slice = json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "ports": [{"port": 80}, {"name": "metrics"}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}]});
        assert_eq!(
            texts(endpoint_slice(&slice, now()))[1..4],
            ["IPv4", "80,metrics", "10.0.0.1,10.0.0.2"]
        );
    }
}
