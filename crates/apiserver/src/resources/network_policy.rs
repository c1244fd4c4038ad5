//! networking.k8s.io/v1 networkpolicies: scheme defaults (`policyTypes`, port protocol TCP) and validation of selectors, ports and peers (upstream's `SetDefaults_NetworkPolicy`, `ValidateNetworkPolicySpec`).

use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use crate::registry::strategy::{Strategy, typed_roundtrip};
use crate::resources::{label_selector, net};
use crate::validation::FieldError;

/// Decodes a NetworkPolicy with the scheme defaults: an absent pod selector is the empty
/// one (a value field upstream), `policyTypes` defaults to `Ingress` (plus `Egress` when
/// egress rules are given), and ports' protocol to TCP.
pub fn decode(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<NetworkPolicy>(obj, |np| {
        let spec = np.spec.get_or_insert_with(Default::default);
        spec.pod_selector.get_or_insert_with(LabelSelector::default);
        if spec.policy_types.as_ref().is_none_or(Vec::is_empty) {
            let mut types = vec!["Ingress".to_owned()];
            if spec.egress.as_ref().is_some_and(|e| !e.is_empty()) {
                types.push("Egress".to_owned());
            }
            spec.policy_types = Some(types);
        }
        let ingress_ports = spec
            .ingress
            .iter_mut()
            .flatten()
            .flat_map(|r| r.ports.iter_mut().flatten());
        let egress_ports = spec
            .egress
            .iter_mut()
            .flatten()
            .flat_map(|r| r.ports.iter_mut().flatten());
        for port in ingress_ports.chain(egress_ports) {
            port.protocol.get_or_insert_with(|| "TCP".to_owned());
        }
    })
}

/// The NetworkPolicy strategy.
#[derive(Debug, Default)]
pub struct NetworkPolicyStrategy;

impl Strategy for NetworkPolicyStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec");
        errs.extend(label_selector::validate(
            spec.and_then(|s| s.get("podSelector")),
            "spec.podSelector",
        ));
        for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
            for (i, rule) in list(spec, direction).iter().enumerate() {
                let rule_path = format!("spec.{direction}[{i}]");
                for (j, port) in list(Some(rule), "ports").iter().enumerate() {
                    validate_port(port, &format!("{rule_path}.ports[{j}]"), &mut errs);
                }
                for (j, peer) in list(Some(rule), peers).iter().enumerate() {
                    validate_peer(peer, &format!("{rule_path}.{peers}[{j}]"), &mut errs);
                }
            }
        }
        let types = list(spec, "policyTypes");
        if types.len() > 2 {
            errs.push(FieldError::invalid(
                "spec.policyTypes",
                Value::Array(types.to_vec()),
                "may not specify more than two policyTypes",
            ));
            return errs;
        }
        for (i, t) in types.iter().enumerate() {
            let t = t.as_str().unwrap_or("");
            if t != "Ingress" && t != "Egress" {
                errs.push(FieldError::not_supported(
                    format!("spec.policyTypes[{i}]"),
                    t,
                    &["Ingress", "Egress"],
                ));
            }
        }
        errs
    }
}

fn list<'a>(v: Option<&'a Value>, key: &str) -> &'a [Value] {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Upstream's `ValidateNetworkPolicyPort`.
fn validate_port(port: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(protocol) = port.get("protocol").and_then(Value::as_str)
        && !["TCP", "UDP", "SCTP"].contains(&protocol)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.protocol"),
            protocol,
            &["TCP", "UDP", "SCTP"],
        ));
    }
    let end_port = port.get("endPort").and_then(Value::as_i64);
    match port.get("port") {
        Some(Value::Number(n)) => {
            let number = n.as_i64().unwrap_or(0);
            for msg in net::port_num_errors(number) {
                errs.push(FieldError::invalid(format!("{path}.port"), number, msg));
            }
            if let Some(end) = end_port {
                if end < number {
                    errs.push(FieldError::invalid(
                        format!("{path}.endPort"),
                        number,
                        "must be greater than or equal to `port`",
                    ));
                }
                for msg in net::port_num_errors(end) {
                    errs.push(FieldError::invalid(format!("{path}.endPort"), end, msg));
                }
            }
        }
        Some(Value::String(name)) => {
            if let Some(end) = end_port {
                errs.push(FieldError::invalid(
                    format!("{path}.endPort"),
                    end,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for msg in net::port_name_errors(name) {
                errs.push(FieldError::invalid(
                    format!("{path}.port"),
                    name.as_str(),
                    msg,
                ));
            }
        }
        _ => {
            if let Some(end) = end_port {
                errs.push(FieldError::invalid(
                    format!("{path}.endPort"),
                    end,
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
}

/// Upstream's `ValidateNetworkPolicyPeer` and `ValidateIPBlock`.
fn validate_peer(peer: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let present = |k: &str| peer.get(k).filter(|v| !v.is_null());
    let mut peers = 0;
    for selector in ["podSelector", "namespaceSelector"] {
        if let Some(s) = present(selector) {
            peers += 1;
            errs.extend(label_selector::validate(
                Some(s),
                &format!("{path}.{selector}"),
            ));
        }
    }
    let ip_block = present("ipBlock");
    if let Some(block) = ip_block {
        peers += 1;
        validate_ip_block(block, &format!("{path}.ipBlock"), errs);
    }
    if peers == 0 {
        errs.push(FieldError::required(path, "must specify a peer"));
    } else if peers > 1 && ip_block.is_some() {
        errs.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

fn validate_ip_block(block: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let cidr = block.get("cidr").and_then(Value::as_str).unwrap_or("");
    if cidr.is_empty() {
        errs.push(FieldError::required(format!("{path}.cidr"), ""));
        return;
    }
    let Some(outer) = net::parse_cidr(cidr) else {
        errs.push(FieldError::invalid(
            format!("{path}.cidr"),
            cidr,
            net::INVALID_CIDR,
        ));
        return;
    };
    for (i, except) in list(Some(block), "except").iter().enumerate() {
        let except = except.as_str().unwrap_or("");
        let except_path = format!("{path}.except[{i}]");
        match net::parse_cidr(except) {
            None => errs.push(FieldError::invalid(except_path, except, net::INVALID_CIDR)),
            Some(inner) if !net::strict_subset(outer, inner) => errs.push(FieldError::invalid(
                except_path,
                except,
                "must be a strict subset of `cidr`",
            )),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults() {
        let np = decode(json!({"metadata": {"name": "p"},
            "spec": {"egress": [{"ports": [{"port": 53}]}]}}))
        .expect("decodes");
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(np["spec"]["podSelector"], json!({}));
        let bare = decode(json!({"metadata": {"name": "p"}})).expect("decodes");
        assert_eq!(bare["spec"]["policyTypes"], json!(["Ingress"]));
        let explicit = decode(json!({"spec": {"policyTypes": ["Egress"], "podSelector": {}}}))
            .expect("decodes");
        assert_eq!(explicit["spec"]["policyTypes"], json!(["Egress"]));
    }

    #[test]
    fn validation() {
        struct Case {
            name: &'static str,
            spec: Value,
            errors: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "valid",
                spec: json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
                    "ports": [{"port": 80, "endPort": 90, "protocol": "TCP"}]}], "policyTypes": ["Ingress"]}),
                errors: &[],
            },
            Case {
                name: "bad ports",
                spec: json!({"podSelector": {}, "ingress": [{"ports": [{"protocol": "ICMP", "port": "web", "endPort": 8080}]}]}),
                errors: &[
                    r#"spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP""#,
                    "spec.ingress[0].ports[0].endPort: Invalid value: 8080: may not be specified when `port` is non-numeric",
                ],
            },
            Case {
                name: "empty and mixed peers",
                spec: json!({"podSelector": {}, "egress": [{"to": [{}, {"podSelector": {}, "ipBlock": {"cidr": "10.0.0.0/8", "except": ["192.168.0.0/16"]}}]}]}),
                errors: &[
                    "spec.egress[0].to[0]: Required value: must specify a peer",
                    r#"spec.egress[0].to[1].ipBlock.except[0]: Invalid value: "192.168.0.0/16": must be a strict subset of `cidr`"#,
                    "spec.egress[0].to[1]: Forbidden: may not specify both ipBlock and another peer",
                ],
            },
            Case {
                name: "bad policy type",
                spec: json!({"podSelector": {}, "policyTypes": ["Sideways"]}),
                errors: &[
                    r#"spec.policyTypes[0]: Unsupported value: "Sideways": supported values: "Ingress", "Egress""#,
                ],
            },
        ];
        for case in cases {
            let errs: Vec<String> = NetworkPolicyStrategy
                .validate(&json!({"spec": case.spec}))
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(errs, case.errors, "{}", case.name);
        }
    }
}
