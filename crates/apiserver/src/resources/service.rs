//! core/v1 services: defaults, validation, immutable cluster IP (cluster IPs and node ports are allocated by the registry, `registry::service_alloc`).

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::pointer::At;
use crate::registry::resource::{ResourceDef, Rest};
use crate::registry::strategy::{Strategy, typed_roundtrip};
use crate::registry::subresource::Subresource;
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::{FieldError, NameRule};

/// The services resource.
pub static SERVICES: ResourceDef = ResourceDef::of::<Service>()
    .short_names(&["svc"])
    .categories(&["all"])
    .subresources(&[Subresource::Proxy, Subresource::Status])
    .decode_with(decode)
    .strategy(&ServiceStrategy)
    .rest(Rest::IpAndPortAllocation)
    .printer(printers::SERVICE)
    .merge_schema(&kinds::SERVICE);

/// The service strategy. Cluster IPs, node ports and health-check node ports are allocated by
/// the registry (`registry::service_alloc`): unique, from 10.96.0.0/12 and 30000-32767.
#[derive(Debug, Default)]
pub struct ServiceStrategy;

/// Decodes a Service with upstream's defaults (type, session affinity, traffic policies,
/// port protocol and target port); a status condition with no `lastTransitionTime` (Go's zero
/// time, which the e2e status lifecycle test sends) is kept, as `null`.
pub fn decode(mut obj: Value) -> Result<Value, String> {
    let held = super::zero_times::hold(&mut obj, "/status/conditions");
    let mut decoded = decode_typed(obj)?;
    super::zero_times::release(&mut decoded, "/status/conditions", &held);
    Ok(decoded)
}

fn decode_typed(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<Service>(obj, |svc| {
        let Some(spec) = svc.spec.as_mut() else {
            return;
        };
        let kind = spec
            .type_
            .get_or_insert_with(|| "ClusterIP".to_owned())
            .clone();
        spec.session_affinity
            .get_or_insert_with(|| "None".to_owned());
        if kind != "ExternalName" {
            spec.internal_traffic_policy
                .get_or_insert_with(|| "Cluster".to_owned());
        }
        if kind == "NodePort" || kind == "LoadBalancer" {
            spec.external_traffic_policy
                .get_or_insert_with(|| "Cluster".to_owned());
        }
        for port in spec.ports.iter_mut().flatten() {
            port.protocol.get_or_insert_with(|| "TCP".to_owned());
            if port.target_port.is_none() {
                port.target_port = Some(IntOrString::Int(port.port));
            }
        }
    })
}

/// Drops the node ports and health-check node port a Service keeps from its old type when its
/// new type has no use for them, as upstream's `dropTypeDependentFields` (values the user
/// changed are left for validation to refuse).
fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
    let kind = |svc: &Value| {
        svc.at("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_owned()
    };
    let needs_node_ports = |svc: &Value| match kind(svc).as_str() {
        "NodePort" => true,
        "LoadBalancer" => svc
            .at("/spec/allocateLoadBalancerNodePorts")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        _ => false,
    };
    let needs_hc = |svc: &Value| {
        kind(svc) == "LoadBalancer"
            && svc
                .at("/spec/externalTrafficPolicy")
                .and_then(Value::as_str)
                == Some("Local")
    };
    if needs_node_ports(old) && !needs_node_ports(new) {
        let old_ports: Vec<i64> = old
            .at("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
            .collect();
        for port in new
            .pointer_mut("/spec/ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let value = port.get("nodePort").and_then(Value::as_i64);
            if value.is_some_and(|v| old_ports.contains(&v))
                && let Some(map) = port.as_object_mut()
            {
                map.remove("nodePort");
            }
        }
    }
    if needs_hc(old)
        && !needs_hc(new)
        && new.at("/spec/healthCheckNodePort") == old.at("/spec/healthCheckNodePort")
        && let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.remove("healthCheckNodePort");
    }
}

impl Strategy for ServiceStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035Label
    }

    /// `services/proxy` would reach a pod behind the Service; simulated pods answer nothing.
    fn connect_refusal(&self, obj: &Value, _sub: Subresource) -> Option<String> {
        let name = crate::object::name(obj);
        Some(format!(
            "service {name:?} cannot be proxied: its endpoints are pods on simulated nodes, which run no containers to answer"
        ))
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"loadBalancer": {}});
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        let kind = spec
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_owned();
        if kind == "ExternalName" {
            return;
        }
        // The cluster IP itself is allocated by the registry (`registry::service_alloc`); a
        // headless Service only mirrors `None` into `clusterIPs`.
        if spec.get("clusterIP").and_then(Value::as_str) == Some("None") {
            spec["clusterIPs"] = json!(["None"]);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        drop_type_dependent_fields(new, old);
        // A Service turning ExternalName drops its cluster IPs (releasing them), as upstream's
        // `dropTypeDependentFields`.
        if new.at("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                    spec.remove(field);
                }
            }
            return;
        }
        // An update that omits the allocated IPs keeps them, as upstream's service REST does.
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            let missing = new
                .at(&format!("/spec/{field}"))
                .is_none_or(|v| v.is_null() || v == "");
            if missing
                && let Some(v) = old.at(&format!("/spec/{field}"))
                && let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.insert(field.to_owned(), v.clone());
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let kind = obj
            .at("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP");
        const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
        if !TYPES.contains(&kind) {
            errs.push(FieldError::not_supported("spec.type", kind, &TYPES));
        }
        let headless = obj.at("/spec/clusterIP").and_then(Value::as_str) == Some("None");
        let ports = obj
            .at("/spec/ports")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if ports.is_empty() && kind != "ExternalName" && !headless {
            errs.push(FieldError::required("spec.ports", ""));
        }
        for (i, p) in ports.iter().enumerate() {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            if !(1..=65535).contains(&port) {
                errs.push(FieldError::invalid(
                    format!("spec.ports[{i}].port"),
                    port,
                    "must be between 1 and 65535, inclusive",
                ));
            }
            if kind == "ClusterIP" && p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                errs.push(FieldError::forbidden(
                    format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
            if ports.len() > 1
                && p.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
            {
                errs.push(FieldError::required(format!("spec.ports[{i}].name"), ""));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let old_ip = old
            .at("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("");
        let new_ip = new
            .at("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !old_ip.is_empty() && old_ip != new_ip && new.at("/spec/type") == old.at("/spec/type") {
            errs.push(FieldError::invalid(
                "spec.clusterIPs[0]",
                new_ip,
                "may not change once set",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_defaults_ports_and_leaves_the_ip_to_the_registry() {
        let s = ServiceStrategy;
        let mut svc =
            decode(json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}))
                .expect("decodes");
        s.prepare_for_create(&mut svc);
        assert!(svc["spec"].get("clusterIP").is_none());
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
        let mut headless =
            decode(json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}}))
                .expect("decodes");
        s.prepare_for_create(&mut headless);
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    }

    #[test]
    fn update_keeps_cluster_ip() {
        let s = ServiceStrategy;
        let old = json!({"spec": {"clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"]}});
        let mut new = json!({"spec": {"ports": [{"port": 80}]}});
        s.prepare_for_update(&mut new, &old);
        assert_eq!(new["spec"]["clusterIP"], "10.96.0.5");
        assert!(s.validate_update(&new, &old).is_empty());
    }
}
