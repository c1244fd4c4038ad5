//! Canonical `resource.Quantity` values, as kube-apiserver stores and serves them.
//!
//! kube-apiserver parses every quantity on decode and prints it canonically on encode
//! (`0.5` → `500m`, `1.5Gi` → `1536Mi`), and `SetDefaults_ResourceList` rounds ResourceList
//! values up to milli scale (`0.0001` → `1m`). An unparsable quantity fails the decode, so the
//! request is a 400 with apimachinery's message. This module does the same for the objects
//! whose quantities the controllers read: pod specs (pods and templates) and nodes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EnvVar, Node, PodSpec, PodTemplateSpec, ResourceFieldSelector, ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kcm_machinery::quantity;

use crate::validation::FieldError;

/// A quantity field that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Displays apimachinery's own message, as kube-apiserver's decode error does.
    #[error("{source}")]
    Invalid {
        /// Where the value is, e.g. `spec.containers[app].resources.limits[cpu]`.
        field: String,
        /// Why it does not parse.
        source: quantity::Error,
    },
}

/// Results of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Replaces `q` with its canonical form.
fn canonicalize(q: &mut Quantity, field: impl FnOnce() -> String) -> Result<()> {
    match quantity::canonicalize(q.0.trim()) {
        Ok(c) => {
            if c != q.0 {
                q.0 = c;
            }
            Ok(())
        }
        Err(source) => Err(Error::Invalid {
            field: field(),
            source,
        }),
    }
}

/// Canonicalizes a ResourceList, each value rounded up to milli scale first.
pub fn canonicalize_resource_list(
    list: Option<&mut BTreeMap<String, Quantity>>,
    field: &str,
) -> Result<()> {
    for (name, q) in list.into_iter().flatten() {
        match quantity::canonicalize_resource_list_value(q.0.trim()) {
            Ok(c) => {
                if c != q.0 {
                    q.0 = c;
                }
            }
            Err(source) => {
                return Err(Error::Invalid {
                    field: format!("{field}[{name}]"),
                    source,
                });
            }
        }
    }
    Ok(())
}

fn canonicalize_requirements(r: Option<&mut ResourceRequirements>, field: &str) -> Result<()> {
    if let Some(r) = r {
        canonicalize_resource_list(r.limits.as_mut(), &format!("{field}.limits"))?;
        canonicalize_resource_list(r.requests.as_mut(), &format!("{field}.requests"))?;
    }
    Ok(())
}

fn canonicalize_divisor(selector: Option<&mut ResourceFieldSelector>, field: &str) -> Result<()> {
    if let Some(d) = selector.and_then(|s| s.divisor.as_mut()) {
        canonicalize(d, || format!("{field}.resourceFieldRef.divisor"))?;
    }
    Ok(())
}

fn canonicalize_env(env: Option<&mut Vec<EnvVar>>, field: &str) -> Result<()> {
    for e in env.into_iter().flatten() {
        let selector = e
            .value_from
            .as_mut()
            .and_then(|v| v.resource_field_ref.as_mut());
        canonicalize_divisor(selector, &format!("{field}.env[{}].valueFrom", e.name))?;
    }
    Ok(())
}

fn canonicalize_volume(v: &mut Volume, field: &str) -> Result<()> {
    if let Some(q) = v.empty_dir.as_mut().and_then(|e| e.size_limit.as_mut()) {
        canonicalize(q, || format!("{field}.emptyDir.sizeLimit"))?;
    }
    if let Some(r) = v
        .ephemeral
        .as_mut()
        .and_then(|e| e.volume_claim_template.as_mut())
        .and_then(|t| t.spec.resources.as_mut())
    {
        let field = format!("{field}.ephemeral.volumeClaimTemplate.spec.resources");
        canonicalize_resource_list(r.limits.as_mut(), &format!("{field}.limits"))?;
        canonicalize_resource_list(r.requests.as_mut(), &format!("{field}.requests"))?;
    }
    for item in v
        .downward_api
        .as_mut()
        .and_then(|d| d.items.as_mut())
        .into_iter()
        .flatten()
    {
        canonicalize_divisor(
            item.resource_field_ref.as_mut(),
            &format!("{field}.downwardAPI"),
        )?;
    }
    for source in v
        .projected
        .as_mut()
        .and_then(|p| p.sources.as_mut())
        .into_iter()
        .flatten()
    {
        for item in source
            .downward_api
            .as_mut()
            .and_then(|d| d.items.as_mut())
            .into_iter()
            .flatten()
        {
            canonicalize_divisor(
                item.resource_field_ref.as_mut(),
                &format!("{field}.projected"),
            )?;
        }
    }
    Ok(())
}

/// Canonicalizes every quantity of a pod spec: container, init and ephemeral container
/// resources, pod-level `resources`, `overhead`, emptyDir `sizeLimit`, ephemeral volume claim
/// resources and downward API divisors. `field` is the spec's path (`spec`,
/// `spec.template.spec`).
pub fn canonicalize_pod_spec(spec: &mut PodSpec, field: &str) -> Result<()> {
    for (kind, containers) in [
        ("containers", Some(&mut spec.containers)),
        ("initContainers", spec.init_containers.as_mut()),
    ] {
        for c in containers.into_iter().flatten() {
            let path = format!("{field}.{kind}[{}]", c.name);
            canonicalize_requirements(c.resources.as_mut(), &format!("{path}.resources"))?;
            canonicalize_env(c.env.as_mut(), &path)?;
        }
    }
    for c in spec.ephemeral_containers.iter_mut().flatten() {
        let path = format!("{field}.ephemeralContainers[{}]", c.name);
        canonicalize_requirements(c.resources.as_mut(), &format!("{path}.resources"))?;
        canonicalize_env(c.env.as_mut(), &path)?;
    }
    canonicalize_requirements(spec.resources.as_mut(), &format!("{field}.resources"))?;
    canonicalize_resource_list(spec.overhead.as_mut(), &format!("{field}.overhead"))?;
    for v in spec.volumes.iter_mut().flatten() {
        canonicalize_volume(v, &format!("{field}.volumes[{}]", v.name))?;
    }
    Ok(())
}

/// Canonicalizes the quantities of a workload's pod template (`spec.template.spec`).
pub fn canonicalize_template(template: &mut PodTemplateSpec) -> Result<()> {
    match template.spec.as_mut() {
        Some(spec) => canonicalize_pod_spec(spec, "spec.template.spec"),
        None => Ok(()),
    }
}

/// The value of a quantity in thousandths (`1Gi` is `1073741824000`), rounded toward zero,
/// for comparing sizes (a claim's new request against its old one). `None` when it does not
/// parse or does not fit 128 bits.
pub fn milli_value(s: &str) -> Option<i128> {
    let q = quantity::parse(s.trim()).ok()?;
    let (negative, magnitude, exponent): (bool, i128, i32) = match q.amount() {
        quantity::Amount::Int { value, scale } => (*value < 0, i128::from(*value).abs(), scale + 3),
        quantity::Amount::Dec { neg, abs, scale } => {
            let mut n: i128 = 0;
            for word in abs.iter().rev() {
                n = n.checked_mul(1 << 64)?.checked_add(i128::from(*word))?;
            }
            (*neg, n, 3 - scale)
        }
    };
    let ten = |e: i32| 10i128.checked_pow(e.unsigned_abs());
    let milli = if exponent >= 0 {
        magnitude.checked_mul(ten(exponent)?)?
    } else {
        ten(exponent).map_or(0, |d| magnitude / d)
    };
    Some(if negative { -milli } else { milli })
}

/// Upstream's `ValidateResourceQuantityValue` for the value of `field`: not negative and,
/// for a resource counted in whole units (`whole`), an integer. An unparsable value is the
/// decode's error, not validation's.
pub fn validate_quantity_value(field: &str, value: &str, whole: bool, errs: &mut Vec<FieldError>) {
    let Some(milli) = milli_value(value) else {
        return;
    };
    if milli < 0 {
        errs.push(FieldError::invalid(
            field,
            value,
            "must be greater than or equal to 0",
        ));
    }
    if whole && milli % 1000 != 0 {
        errs.push(FieldError::invalid(field, value, "must be an integer"));
    }
}

/// Canonicalizes a node's `status.capacity` and `status.allocatable`.
pub fn canonicalize_node(node: &mut Node) -> Result<()> {
    if let Some(status) = node.status.as_mut() {
        canonicalize_resource_list(status.capacity.as_mut(), "status.capacity")?;
        canonicalize_resource_list(status.allocatable.as_mut(), "status.allocatable")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pod_spec_quantities_are_canonical() {
        let mut spec: PodSpec = serde_json::from_value(json!({
            "containers": [{
                "name": "app",
                "resources": {
                    "limits": {"cpu": "0.5", "memory": "1.5Gi"},
                    "requests": {"cpu": "0.0001", "memory": "1024Ki"}
                },
                "env": [{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1000m"}}}]
            }],
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "100.0m"}}}],
            "ephemeralContainers": [{"name": "debug", "resources": {"limits": {"cpu": "1e3"}}}],
            "resources": {"limits": {"cpu": "2.5"}},
            "overhead": {"cpu": "0.25"},
            "volumes": [
                {"name": "scratch", "emptyDir": {"sizeLimit": "0.5Gi"}},
                {"name": "claim", "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1000Mi"}}}}}}
            ]
        }))
        .expect("pod spec");
        canonicalize_pod_spec(&mut spec, "spec").expect("valid");
        let out = serde_json::to_value(&spec).expect("encodes");
        assert_eq!(
            out["containers"][0]["resources"]["limits"],
            json!({"cpu": "500m", "memory": "1536Mi"})
        );
        assert_eq!(
            out["containers"][0]["resources"]["requests"],
            json!({"cpu": "1m", "memory": "1Mi"})
        );
        assert_eq!(
            out["containers"][0]["env"][0]["valueFrom"]["resourceFieldRef"]["divisor"],
            "1"
        );
        assert_eq!(
            out["initContainers"][0]["resources"]["requests"]["cpu"],
            "100m"
        );
        assert_eq!(
            out["ephemeralContainers"][0]["resources"]["limits"]["cpu"],
            "1e3"
        );
        assert_eq!(out["resources"]["limits"]["cpu"], "2500m");
        assert_eq!(out["overhead"]["cpu"], "250m");
        assert_eq!(out["volumes"][0]["emptyDir"]["sizeLimit"], "512Mi");
        assert_eq!(
            out["volumes"][1]["ephemeral"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]
                ["storage"],
            "1000Mi"
        );
    }

    #[test]
    fn invalid_quantity_names_the_field() {
        let mut spec: PodSpec = serde_json::from_value(json!({
            "containers": [{"name": "app", "resources": {"limits": {"cpu": "lots"}}}]
        }))
        .expect("pod spec");
        let err = canonicalize_pod_spec(&mut spec, "spec").expect_err("invalid");
        let Error::Invalid { field, source } = &err;
        assert_eq!(field, "spec.containers[app].resources.limits[cpu]");
        assert_eq!(*source, quantity::Error::Format);
        assert_eq!(
            err.to_string(),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    #[test]
    fn milli_values_compare_sizes() {
        assert_eq!(milli_value("1Gi"), Some(1_073_741_824_000));
        assert_eq!(milli_value("500m"), Some(500));
        assert_eq!(milli_value("1.5"), Some(1500));
        assert_eq!(milli_value("-2k"), Some(-2_000_000));
        assert_eq!(milli_value("0"), Some(0));
        assert!(milli_value("2Gi") > milli_value("1500Mi"));
        assert_eq!(milli_value("lots"), None);
    }

    #[test]
    fn node_capacity_is_canonical() {
        let mut node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "status": {"capacity": {"cpu": "4", "memory": "8388608Ki"}, "allocatable": {"cpu": "3.5"}}
        }))
        .expect("node");
        canonicalize_node(&mut node).expect("valid");
        let status = node.status.expect("status");
        assert_eq!(status.capacity.expect("capacity")["memory"].0, "8Gi");
        assert_eq!(status.allocatable.expect("allocatable")["cpu"].0, "3500m");
    }
}
