//! networking.k8s.io/v1 servicecidrs and ipaddresses: the service IP ranges and allocated addresses (upstream's `ValidateServiceCIDR`, `ValidateIPAddress`), and the default `kubernetes` ServiceCIDR kube-apiserver keeps.

use serde_json::{Value, json};

use crate::pointer::At;
use crate::registry::resource::BootstrapContext;
use crate::registry::service_ip::ServiceIpRange;
use crate::registry::strategy::Strategy;
use crate::resources::{go_values, net};
use crate::validation::{FieldError, NameRule};

/// The name of the ServiceCIDR kube-apiserver creates from `--service-cluster-ip-range`.
pub const DEFAULT_SERVICE_CIDR_NAME: &str = "kubernetes";

/// The ServiceCIDRs every cluster starts with: the default one, created now.
pub fn bootstrap_service_cidrs(context: &BootstrapContext<'_>) -> Vec<Value> {
    vec![default_service_cidr(
        context.service_ip_range,
        &crate::object::now_rfc3339(),
    )]
}

/// The default ServiceCIDR, as upstream's `defaultservicecidr` controller creates it (Ready,
/// `range`: the one kcm allocates Service cluster IPs from).
pub fn default_service_cidr(range: &ServiceIpRange, now: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "ServiceCIDR",
        "metadata": {"name": DEFAULT_SERVICE_CIDR_NAME},
        "spec": {"cidrs": [range.as_str()]},
        "status": {"conditions": [{
            "type": "Ready",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "",
            "message": "Kubernetes default Service CIDR is ready",
        }]},
    })
}

/// The ServiceCIDR strategy: status reset on create, CIDRs immutable except growing from
/// one family to dual-stack.
#[derive(Debug, Default)]
pub struct ServiceCidrStrategy;

impl Strategy for ServiceCidrStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        // The status starts empty; Go prints the empty status struct.
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_cidrs(obj.get("spec"))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let cidrs = |o: &Value| -> Vec<String> {
            o.at("/spec/cidrs")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|c| c.as_str().unwrap_or("").to_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        let (new_cidrs, old_cidrs) = (cidrs(new), cidrs(old));
        let mut errs = Vec::new();
        if new_cidrs.len() == old_cidrs.len() {
            for (i, (n, o)) in new_cidrs.iter().zip(&old_cidrs).enumerate() {
                if n != o {
                    errs.push(FieldError::invalid(
                        format!("spec.cidrs[{i}]"),
                        n.as_str(),
                        "field is immutable",
                    ));
                }
            }
        } else if old_cidrs.len() == 1 && new_cidrs.len() == 2 {
            // Adding the other family (upgrading to dual-stack) is allowed.
            if new_cidrs[0] != old_cidrs[0] {
                errs.push(FieldError::invalid(
                    "spec.cidrs[0]",
                    new_cidrs[0].as_str(),
                    "field is immutable",
                ));
            }
            errs.extend(validate_cidrs(new.get("spec")));
        } else {
            errs.push(go_values::invalid(
                "spec.cidrs",
                go_values::string_slice("[]string", new.at("/spec/cidrs")),
                "field is immutable",
            ));
        }
        errs
    }
}

/// Upstream's `validateServiceCIDRSpec`.
fn validate_cidrs(spec: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let cidrs = spec
        .and_then(|s| s.get("cidrs"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if cidrs.is_empty() {
        errs.push(FieldError::required(
            "spec.cidrs",
            "at least one CIDR required",
        ));
        return errs;
    }
    if cidrs.len() > 2 {
        errs.push(FieldError::invalid(
            "spec",
            spec.cloned().unwrap_or(Value::Null),
            "may only hold up to 2 values",
        ));
        return errs;
    }
    let mut families = Vec::new();
    for (i, cidr) in cidrs.iter().enumerate() {
        let cidr = cidr.as_str().unwrap_or("");
        match net::parse_cidr(cidr) {
            Some((ip, _)) => families.push(ip.is_ipv6()),
            None => errs.push(FieldError::invalid(
                format!("spec.cidrs[{i}]"),
                cidr,
                net::INVALID_CIDR,
            )),
        }
    }
    if families.len() == 2 && families[0] == families[1] {
        errs.push(go_values::invalid(
            "spec.cidrs",
            go_values::string_slice("[]string", spec.and_then(|s| s.get("cidrs"))),
            "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
        ));
    }
    errs
}

/// The IPAddress strategy: the name is the address, canonical; the parent reference is
/// required and immutable.
#[derive(Debug, Default)]
pub struct IpAddressStrategy;

impl Strategy for IpAddressStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::IpAddress
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let Some(parent) = obj.at("/spec/parentRef").filter(|p| !p.is_null()) else {
            errs.push(FieldError::required("spec.parentRef", ""));
            return errs;
        };
        let field = |k: &str| parent.get(k).and_then(Value::as_str).unwrap_or("");
        let group = field("group");
        if !group.is_empty() {
            for msg in NameRule::Subdomain.check(group) {
                errs.push(FieldError::invalid("spec.parentRef.group", group, msg));
            }
        }
        for (key, required) in [("resource", true), ("name", true), ("namespace", false)] {
            let value = field(key);
            let path = format!("spec.parentRef.{key}");
            if value.is_empty() {
                if required {
                    errs.push(FieldError::required(path, ""));
                }
                continue;
            }
            for msg in NameRule::PathSegment.check(value) {
                errs.push(FieldError::invalid(path.as_str(), value, msg));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let parent = |o: &Value| o.at("/spec/parentRef").cloned().unwrap_or(Value::Null);
        if parent(new) != parent(old) {
            errs.push(FieldError::invalid(
                "spec.parentRef",
                parent(new),
                "field is immutable",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(cidrs: Value) -> Value {
        json!({"metadata": {"name": "c"}, "spec": {"cidrs": cidrs}})
    }

    #[test]
    fn service_cidrs() {
        let s = ServiceCidrStrategy;
        assert!(
            s.validate(&cidr(json!(["10.96.0.0/12", "fd00::/108"])))
                .is_empty()
        );
        assert_eq!(
            s.validate(&cidr(json!([])))[0].to_string(),
            "spec.cidrs: Required value: at least one CIDR required"
        );
        assert_eq!(
            s.validate(&cidr(json!(["10.0.0.0/8", "11.0.0.0/8"])))[0].to_string(),
            r#"spec.cidrs: Invalid value: []string{"10.0.0.0/8", "11.0.0.0/8"}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"#
        );
        assert_eq!(
            s.validate(&cidr(json!(["10.0.0.0/40"])))[0].field,
            "spec.cidrs[0]"
        );
        let old = cidr(json!(["10.96.0.0/12"]));
        assert!(
            s.validate_update(&cidr(json!(["10.96.0.0/12", "fd00::/108"])), &old)
                .is_empty()
        );
        assert_eq!(
            s.validate_update(&cidr(json!(["10.97.0.0/16"])), &old)[0].to_string(),
            r#"spec.cidrs[0]: Invalid value: "10.97.0.0/16": field is immutable"#
        );
        let range = ServiceIpRange::default();
        assert!(
            default_service_cidr(&range, "2024-05-01T00:00:00Z")["spec"]["cidrs"][0]
                == "10.96.0.0/12"
        );
    }

    #[test]
    fn ip_addresses() {
        let s = IpAddressStrategy;
        let ip = json!({"metadata": {"name": "10.96.0.10"},
            "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "kube-system", "name": "kube-dns"}}});
        assert!(s.validate(&ip).is_empty());
        assert_eq!(
            s.validate(&json!({"spec": {"parentRef": {"resource": "", "name": "a/b"}}}))
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "spec.parentRef.resource: Required value",
                r#"spec.parentRef.name: Invalid value: "a/b": may not contain '/'"#
            ]
        );
        let mut moved = ip.clone();
        moved["spec"]["parentRef"]["name"] = json!("other");
        assert_eq!(s.validate_update(&moved, &ip).len(), 1);
    }
}
