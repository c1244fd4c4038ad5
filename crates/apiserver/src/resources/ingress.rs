//! networking.k8s.io/v1 ingresses: validation of rules, paths (`pathType`), backends and TLS hosts with upstream's messages; status reset on create (upstream's `ingressStrategy`, `ValidateIngressCreate`).

use serde_json::{Value, json};

use crate::pointer::At;
use crate::registry::strategy::Strategy;
use crate::resources::go_values;
use crate::resources::net;
use crate::validation::{DNS1123_SUBDOMAIN_MESSAGE, FieldError, NameRule};

/// The legacy annotation naming an ingress class.
const INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// Path sequences an Exact or Prefix path may not contain.
const INVALID_PATH_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
/// Suffixes an Exact or Prefix path may not end with.
const INVALID_PATH_SUFFIXES: [&str; 2] = ["/..", "/."];

/// The Ingress strategy (upstream's `ingressStrategy`).
#[derive(Debug, Default)]
pub struct IngressStrategy;

impl Strategy for IngressStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        // A new Ingress has no load balancer yet; Go prints the empty status struct.
        obj["status"] = json!({"loadBalancer": {}});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_spec(obj.get("spec"));
        // ValidateIngressCreate: the legacy annotation and the field may not both be set.
        let class_name = obj.at("/spec/ingressClassName").and_then(Value::as_str);
        let annotation = obj
            .at("/metadata/annotations")
            .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
            .and_then(Value::as_str);
        if let (Some(_), Some(value)) = (class_name, annotation) {
            errs.push(FieldError::invalid(
                format!("annotations.{INGRESS_CLASS_ANNOTATION}"),
                value,
                "can not be set when the class field is also set",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_spec(new.get("spec"))
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let ingresses = new
            .at("/status/loadBalancer/ingress")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (i, ingress) in ingresses.iter().enumerate() {
            let path = format!("status.loadBalancer.ingress[{i}]");
            if let Some(ip) = ingress
                .get("ip")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                && net::parse_ip(ip).is_none()
            {
                errs.push(FieldError::invalid(
                    format!("{path}.ip"),
                    ip,
                    "must be a valid IP address",
                ));
            }
            if let Some(host) = ingress
                .get("hostname")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                for msg in NameRule::Subdomain.check(host) {
                    errs.push(FieldError::invalid(format!("{path}.hostname"), host, msg));
                }
                if net::parse_ip(host).is_some() {
                    errs.push(FieldError::invalid(
                        format!("{path}.hostname"),
                        host,
                        "must be a DNS name, not an IP address",
                    ));
                }
            }
        }
        errs
    }
}

fn items<'a>(v: Option<&'a Value>, key: &str) -> &'a [Value] {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Upstream's `ValidateIngressSpec`.
fn validate_spec(spec: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules = items(spec, "rules");
    let default_backend = spec
        .and_then(|s| s.get("defaultBackend"))
        .filter(|b| !b.is_null());
    match default_backend {
        Some(backend) => validate_backend(backend, "spec.defaultBackend", &mut errs),
        None if rules.is_empty() => {
            // Go prints the (nil or empty) rules slice with `%#v`.
            let rendered = if spec
                .and_then(|s| s.get("rules"))
                .is_some_and(Value::is_array)
            {
                "[]networking.IngressRule{}"
            } else {
                "[]networking.IngressRule(nil)"
            };
            errs.push(go_values::invalid(
                "spec",
                rendered.to_owned(),
                "either `defaultBackend` or `rules` must be specified",
            ));
        }
        None => {}
    }
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("spec.rules[{i}]");
        let host = rule.get("host").and_then(Value::as_str).unwrap_or("");
        if !host.is_empty() {
            validate_host(host, &format!("{path}.host"), &mut errs);
        }
        if let Some(http) = rule.get("http").filter(|h| !h.is_null()) {
            let paths = items(Some(http), "paths");
            if paths.is_empty() {
                errs.push(FieldError::required(format!("{path}.http.paths"), ""));
            }
            for (j, p) in paths.iter().enumerate() {
                validate_path(p, &format!("{path}.http.paths[{j}]"), &mut errs);
            }
        }
    }
    for (i, tls) in items(spec, "tls").iter().enumerate() {
        for (j, host) in items(Some(tls), "hosts").iter().enumerate() {
            let host = host.as_str().unwrap_or("");
            let path = format!("spec.tls[{i}].hosts[{j}]");
            if host.contains('*') {
                if !net::is_wildcard_dns1123_subdomain(host) {
                    errs.push(FieldError::invalid(
                        path,
                        host,
                        net::WILDCARD_DNS1123_SUBDOMAIN_MESSAGE,
                    ));
                }
            } else {
                for msg in NameRule::Subdomain.check(host) {
                    errs.push(FieldError::invalid(path.as_str(), host, msg));
                }
            }
        }
    }
    if let Some(class) = spec
        .and_then(|s| s.get("ingressClassName"))
        .and_then(Value::as_str)
    {
        for msg in NameRule::Subdomain.check(class) {
            errs.push(FieldError::invalid("spec.ingressClassName", class, msg));
        }
    }
    errs
}

/// A rule's host: a DNS name (a wildcard one when it holds `*`), never an IP address.
fn validate_host(host: &str, path: &str, errs: &mut Vec<FieldError>) {
    if net::parse_ip(host).is_some() {
        errs.push(FieldError::invalid(
            path,
            host,
            "must be a DNS name, not an IP address",
        ));
    }
    if host.contains('*') {
        if !net::is_wildcard_dns1123_subdomain(host) {
            errs.push(FieldError::invalid(
                path,
                host,
                net::WILDCARD_DNS1123_SUBDOMAIN_MESSAGE,
            ));
        }
    } else if !kcm_machinery::labels::is_dns1123_subdomain(host) {
        errs.push(FieldError::invalid(path, host, DNS1123_SUBDOMAIN_MESSAGE));
    }
}

/// Upstream's `validateHTTPIngressPath`.
fn validate_path(p: &Value, path: &str, errs: &mut Vec<FieldError>) {
    // The typed decode reads a missing pathType as "": both are "not specified".
    let Some(path_type) = p
        .get("pathType")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        errs.push(FieldError::required(
            format!("{path}.pathType"),
            "pathType must be specified",
        ));
        return;
    };
    let value = p.get("path").and_then(Value::as_str).unwrap_or("");
    let path_field = format!("{path}.path");
    match path_type {
        "Exact" | "Prefix" => {
            if !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    path_field.as_str(),
                    value,
                    "must be an absolute path",
                ));
            }
            if !value.is_empty() {
                for seq in INVALID_PATH_SEQUENCES {
                    if value.contains(seq) {
                        errs.push(FieldError::invalid(
                            path_field.as_str(),
                            value,
                            format!("must not contain '{seq}'"),
                        ));
                    }
                }
                for suffix in INVALID_PATH_SUFFIXES {
                    if value.ends_with(suffix) {
                        errs.push(FieldError::invalid(
                            path_field.as_str(),
                            value,
                            format!("cannot end with '{suffix}'"),
                        ));
                    }
                }
            }
        }
        "ImplementationSpecific" => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    path_field.as_str(),
                    value,
                    "must be an absolute path",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.pathType"),
            other,
            &["Exact", "ImplementationSpecific", "Prefix"],
        )),
    }
    match p.get("backend") {
        Some(backend) => validate_backend(backend, &format!("{path}.backend"), errs),
        None => validate_backend(&Value::Null, &format!("{path}.backend"), errs),
    }
}

/// Upstream's `validateIngressBackend`: exactly one of a service (with a port name or
/// number) or a typed resource.
fn validate_backend(backend: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let service = backend.get("service").filter(|s| !s.is_null());
    let resource = backend.get("resource").filter(|r| !r.is_null());
    match (service, resource) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            "",
            "cannot set both resource and service backends",
        )),
        (None, Some(resource)) => {
            let field = |k: &str| resource.get(k).and_then(Value::as_str).unwrap_or("");
            if field("kind").is_empty() {
                errs.push(FieldError::required(format!("{path}.resource.kind"), ""));
            }
            if field("name").is_empty() {
                errs.push(FieldError::required(format!("{path}.resource.name"), ""));
            }
        }
        (Some(service), None) => {
            let name = service.get("name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{path}.service.name"), ""));
            } else {
                for msg in NameRule::Dns1035Label.check(name) {
                    errs.push(FieldError::invalid(
                        format!("{path}.service.name"),
                        name,
                        msg,
                    ));
                }
            }
            let port_name = service
                .at("/port/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let port_number = service
                .at("/port/number")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            match (port_name.is_empty(), port_number == 0) {
                (false, false) => errs.push(FieldError::invalid(
                    path,
                    "",
                    "cannot set both port name & port number",
                )),
                (false, true) => {
                    for msg in net::port_name_errors(port_name) {
                        errs.push(FieldError::invalid(
                            format!("{path}.service.port.name"),
                            port_name,
                            msg,
                        ));
                    }
                }
                (true, false) => {
                    for msg in net::port_num_errors(port_number) {
                        errs.push(FieldError::invalid(
                            format!("{path}.service.port.number"),
                            port_number,
                            msg,
                        ));
                    }
                }
                (true, true) => errs.push(FieldError::required(
                    path,
                    "port name or number is required",
                )),
            }
        }
        (None, None) => errs.push(FieldError::invalid(
            path,
            "",
            "resource or service backend is required",
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ingress(paths: Value) -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"rules": [{"host": "web.example.com", "http": {"paths": paths}}]}})
    }

    fn backend() -> Value {
        json!({"service": {"name": "web", "port": {"number": 80}}})
    }

    #[test]
    fn path_types_and_paths() {
        struct Case {
            name: &'static str,
            path: Value,
            errors: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "prefix",
                path: json!({"path": "/", "pathType": "Prefix", "backend": backend()}),
                errors: &[],
            },
            Case {
                name: "no pathType",
                path: json!({"path": "/", "backend": backend()}),
                errors: &[
                    "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
                ],
            },
            Case {
                name: "unknown pathType",
                path: json!({"path": "/", "pathType": "Regex", "backend": backend()}),
                errors: &[
                    r#"spec.rules[0].http.paths[0].pathType: Unsupported value: "Regex": supported values: "Exact", "ImplementationSpecific", "Prefix""#,
                ],
            },
            Case {
                name: "relative exact path",
                path: json!({"path": "api", "pathType": "Exact", "backend": backend()}),
                errors: &[
                    r#"spec.rules[0].http.paths[0].path: Invalid value: "api": must be an absolute path"#,
                ],
            },
            Case {
                name: "dot segments",
                path: json!({"path": "/a/../b/.", "pathType": "Prefix", "backend": backend()}),
                errors: &[
                    r#"spec.rules[0].http.paths[0].path: Invalid value: "/a/../b/.": must not contain '/../'"#,
                    r#"spec.rules[0].http.paths[0].path: Invalid value: "/a/../b/.": cannot end with '/.'"#,
                ],
            },
            Case {
                name: "implementation specific without a path",
                path: json!({"pathType": "ImplementationSpecific", "backend": backend()}),
                errors: &[],
            },
            Case {
                name: "backend with both port forms",
                path: json!({"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"name": "http", "number": 80}}}}),
                errors: &[
                    r#"spec.rules[0].http.paths[0].backend: Invalid value: "": cannot set both port name & port number"#,
                ],
            },
            Case {
                name: "backend without port",
                path: json!({"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {}}}}),
                errors: &[
                    "spec.rules[0].http.paths[0].backend: Required value: port name or number is required",
                ],
            },
        ];
        for case in cases {
            let errs: Vec<String> = IngressStrategy
                .validate(&ingress(json!([case.path])))
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(errs, case.errors, "{}", case.name);
        }
    }

    #[test]
    fn rules_hosts_and_classes() {
        let empty = json!({"metadata": {"name": "x"}, "spec": {}});
        assert_eq!(
            IngressStrategy.validate(&empty)[0].to_string(),
            "spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"
        );
        let ip_host = json!({"spec": {"rules": [{"host": "10.0.0.1"}]}});
        assert_eq!(
            IngressStrategy.validate(&ip_host)[0].to_string(),
            r#"spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address"#
        );
        let wildcard = json!({"spec": {"rules": [{"host": "*.example.com"}], "tls": [{"hosts": ["*.example.com"]}]}});
        assert!(IngressStrategy.validate(&wildcard).is_empty());
        let both = json!({"metadata": {"annotations": {"kubernetes.io/ingress.class": "nginx"}},
            "spec": {"ingressClassName": "nginx", "defaultBackend": backend()}});
        assert_eq!(
            IngressStrategy.validate(&both)[0].to_string(),
            r#"annotations.kubernetes.io/ingress.class: Invalid value: "nginx": can not be set when the class field is also set"#
        );
        assert!(IngressStrategy.validate_update(&both, &both).is_empty());
    }

    #[test]
    fn create_drops_the_status() {
        let mut obj =
            json!({"spec": {}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
        IngressStrategy.prepare_for_create(&mut obj);
        assert_eq!(obj["status"], json!({"loadBalancer": {}}));
        let bad = json!({"status": {"loadBalancer": {"ingress": [{"ip": "nope"}]}}});
        assert_eq!(IngressStrategy.validate_status_update(&bad, &bad).len(), 1);
    }
}
