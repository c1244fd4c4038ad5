//! discovery.k8s.io/v1 endpointslices: port defaults, address-type, endpoint and port validation with upstream's messages, an immutable address type (upstream's `ValidateEndpointSlice[Update]`, `SetDefaults_EndpointPort`).

use std::collections::HashSet;
use std::net::IpAddr;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{Value, json};

use crate::pointer::At;
use crate::registry::strategy::{Strategy, typed_roundtrip};
use crate::validation::{FieldError, NameRule};

/// Most endpoints in one slice.
const MAX_ENDPOINTS: usize = 1000;
/// Most addresses of one endpoint.
const MAX_ADDRESSES: usize = 100;
/// Most ports in one slice.
const MAX_PORTS: usize = 20000;

/// Decodes an EndpointSlice with the scheme defaults (ports named `""` and TCP); a missing
/// `addressType` or endpoint `addresses` reads as empty, as Go's zero values, so validation
/// answers 422 instead of a decode error.
pub fn decode(mut obj: Value) -> Result<Value, String> {
    if let Some(map) = obj.as_object_mut() {
        map.entry("addressType").or_insert_with(|| json!(""));
        let endpoints = map.entry("endpoints").or_insert_with(|| json!([]));
        if endpoints.is_null() {
            *endpoints = json!([]);
        }
        for endpoint in endpoints.as_array_mut().into_iter().flatten() {
            if let Some(e) = endpoint.as_object_mut() {
                e.entry("addresses").or_insert_with(|| json!([]));
            }
        }
    }
    typed_roundtrip::<EndpointSlice>(obj, |slice| {
        for port in slice.ports.iter_mut().flatten() {
            port.name.get_or_insert_with(String::new);
            port.protocol.get_or_insert_with(|| "TCP".to_owned());
        }
    })
}

/// The EndpointSlice strategy.
#[derive(Debug, Default)]
pub struct EndpointSliceStrategy;

impl Strategy for EndpointSliceStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let address_type = obj.get("addressType").and_then(Value::as_str).unwrap_or("");
        match address_type {
            "" => errs.push(FieldError::required("addressType", "")),
            "IPv4" | "IPv6" | "FQDN" => {}
            other => errs.push(FieldError::not_supported(
                "addressType",
                other,
                &["FQDN", "IPv4", "IPv6"],
            )),
        }
        validate_endpoints(obj, address_type, &mut errs);
        validate_ports(obj, &mut errs);
        errs
    }

    /// Bumps the generation when anything but metadata changed, or the labels did, as
    /// upstream's `PrepareForUpdate` (EndpointSlices have no spec: the EndpointSlice
    /// controllers' stale-cache tracking reads this generation).
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let labels_changed = new.at("/metadata/labels") != old.at("/metadata/labels");
        if labels_changed || differs_outside_metadata(new, old) {
            crate::object::set_meta(new, "generation", crate::object::generation(old) + 1);
        }
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("addressType") != old.get("addressType") {
            errs.push(FieldError::invalid(
                "addressType",
                new.get("addressType").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs
    }
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn validate_endpoints(obj: &Value, address_type: &str, errs: &mut Vec<FieldError>) {
    let endpoints = list(obj, "endpoints");
    if endpoints.len() > MAX_ENDPOINTS {
        errs.push(FieldError::too_many(
            "endpoints",
            endpoints.len(),
            MAX_ENDPOINTS,
        ));
        return;
    }
    for (i, endpoint) in endpoints.iter().enumerate() {
        let path = format!("endpoints[{i}]");
        let addresses = list(endpoint, "addresses");
        if addresses.is_empty() {
            errs.push(FieldError::required(
                format!("{path}.addresses"),
                "must contain at least 1 address",
            ));
        } else if addresses.len() > MAX_ADDRESSES {
            errs.push(FieldError::too_many(
                format!("{path}.addresses"),
                addresses.len(),
                MAX_ADDRESSES,
            ));
        }
        for (j, address) in addresses.iter().enumerate() {
            let address = address.as_str().unwrap_or("");
            let field = format!("{path}.addresses[{j}]");
            match address_type {
                "IPv4" => match address.parse::<IpAddr>() {
                    Ok(IpAddr::V4(_)) => errs.extend(special_ip_errors(address, &field)),
                    _ => errs.push(FieldError::invalid(
                        field,
                        address,
                        "must be a valid IPv4 address",
                    )),
                },
                "IPv6" => match address.parse::<IpAddr>() {
                    Ok(IpAddr::V6(_)) => errs.extend(special_ip_errors(address, &field)),
                    _ => errs.push(FieldError::invalid(
                        field,
                        address,
                        "must be a valid IPv6 address",
                    )),
                },
                "FQDN" => {
                    if address.is_empty() {
                        errs.push(FieldError::required(field, ""));
                    } else if !NameRule::Subdomain.check(address).is_empty() {
                        for msg in NameRule::Subdomain.check(address) {
                            errs.push(FieldError::invalid(field.as_str(), address, msg));
                        }
                    } else if !address.contains('.') {
                        errs.push(FieldError::invalid(
                            field,
                            address,
                            "should be a domain with at least two segments separated by dots",
                        ));
                    }
                }
                _ => {}
            }
        }
        if let Some(node) = endpoint.get("nodeName").and_then(Value::as_str) {
            for msg in NameRule::Subdomain.check(node) {
                errs.push(FieldError::invalid(format!("{path}.nodeName"), node, msg));
            }
        }
        if let Some(host) = endpoint.get("hostname").and_then(Value::as_str) {
            for msg in NameRule::Label.check(host) {
                errs.push(FieldError::invalid(format!("{path}.hostname"), host, msg));
            }
        }
    }
}

/// Upstream's `ValidateNonSpecialIP`: endpoints may not point at unspecified, loopback or
/// link-local addresses.
fn special_ip_errors(address: &str, field: &str) -> Vec<FieldError> {
    let Ok(ip) = address.parse::<IpAddr>() else {
        return Vec::new();
    };
    let why = match ip {
        ip if ip.is_unspecified() => "may not be unspecified (0.0.0.0, ::)",
        ip if ip.is_loopback() => "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        IpAddr::V4(v4) if v4.is_link_local() => {
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
        }
        IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => {
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
        }
        IpAddr::V4(v4) if v4.octets()[..3] == [224, 0, 0] => {
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"
        }
        IpAddr::V6(v6)
            if (v6.segments()[0] & 0xffc0) == 0xff00 && (v6.segments()[0] & 0x000f) == 2 =>
        {
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"
        }
        _ => return Vec::new(),
    };
    vec![FieldError::invalid(field, address, why)]
}

fn validate_ports(obj: &Value, errs: &mut Vec<FieldError>) {
    let ports = list(obj, "ports");
    if ports.len() > MAX_PORTS {
        errs.push(FieldError::too_many("ports", ports.len(), MAX_PORTS));
        return;
    }
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let path = format!("ports[{i}]");
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        if !name.is_empty() {
            for msg in NameRule::Label.check(name) {
                errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
            }
        }
        if !names.insert(name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), name));
        }
        match port.get("protocol").and_then(Value::as_str) {
            None => errs.push(FieldError::required(format!("{path}.protocol"), "")),
            Some("TCP" | "UDP" | "SCTP") => {}
            Some(other) => errs.push(FieldError::not_supported(
                format!("{path}.protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
        if let Some(app) = port.get("appProtocol").and_then(Value::as_str)
            && let Err(e) = kcm_machinery::labels::validate_label_key(app)
        {
            errs.push(FieldError::invalid(
                format!("{path}.appProtocol"),
                app,
                e.to_string(),
            ));
        }
    }
}

/// Whether two objects differ in anything but `metadata`, `apiVersion` and `kind`, compared
/// in place (serde_json's maps are ordered, so equal objects iterate alike).
fn differs_outside_metadata(a: &Value, b: &Value) -> bool {
    let outside =
        |(key, _): &(&String, &Value)| !matches!(key.as_str(), "metadata" | "apiVersion" | "kind");
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => a.iter().filter(outside).ne(b.iter().filter(outside)),
        _ => a != b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_follows_endpoints_ports_and_labels() {
        let old = json!({"metadata": {"name": "s", "generation": 3, "labels": {"a": "1"}},
            "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]});
        let bumped = |mut new: Value| {
            EndpointSliceStrategy.prepare_for_update(&mut new, &old);
            crate::object::generation(&new)
        };
        let mut same = old.clone();
        same["metadata"]["annotations"] = json!({"x": "y"});
        assert_eq!(bumped(same), 3, "annotations only");
        let mut endpoints = old.clone();
        endpoints["endpoints"][0]["conditions"] = json!({"ready": false});
        assert_eq!(bumped(endpoints), 4);
        let mut labels = old.clone();
        labels["metadata"]["labels"]["a"] = json!("2");
        assert_eq!(bumped(labels), 4);
    }

    #[test]
    fn ports_default_to_tcp_with_an_empty_name() {
        let slice = decode(
            json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]}),
        )
        .expect("decodes");
        assert_eq!(
            slice["ports"][0],
            json!({"name": "", "port": 80, "protocol": "TCP"})
        );
        assert!(EndpointSliceStrategy.validate(&slice).is_empty());
    }

    #[test]
    fn validation() {
        struct Case {
            name: &'static str,
            slice: Value,
            errors: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "no address type",
                slice: json!({}),
                errors: &["addressType: Required value"],
            },
            Case {
                name: "unknown address type",
                slice: json!({"addressType": "IPv5"}),
                errors: &[
                    r#"addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6""#,
                ],
            },
            Case {
                name: "bad endpoints",
                slice: json!({"addressType": "IPv4", "endpoints": [{"addresses": []},
                    {"addresses": ["fd00::1", "127.0.0.1"]}]}),
                errors: &[
                    "endpoints[0].addresses: Required value: must contain at least 1 address",
                    r#"endpoints[1].addresses[0]: Invalid value: "fd00::1": must be a valid IPv4 address"#,
                    r#"endpoints[1].addresses[1]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)"#,
                ],
            },
            Case {
                name: "duplicate ports, bad protocol",
                slice: json!({"addressType": "FQDN", "endpoints": [{"addresses": ["db.example.com"]}],
                    "ports": [{"name": "http", "protocol": "TCP"}, {"name": "http", "protocol": "ICMP"}]}),
                errors: &[
                    r#"ports[1].name: Duplicate value: "http""#,
                    r#"ports[1].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP""#,
                ],
            },
        ];
        for case in cases {
            let errs: Vec<String> = EndpointSliceStrategy
                .validate(&case.slice)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(errs, case.errors, "{}", case.name);
        }
        let old = json!({"addressType": "IPv4"});
        let new = json!({"addressType": "IPv6"});
        assert_eq!(
            EndpointSliceStrategy.validate_update(&new, &old)[0].to_string(),
            r#"addressType: Invalid value: "IPv6": field is immutable"#
        );
    }
}
