//! networking.k8s.io/v1 ingressclasses: the parameters scope default, the controller as a domain-prefixed path, immutable once set (upstream's `ValidateIngressClass`, `SetDefaults_IngressClass`).

use k8s_openapi::api::networking::v1::IngressClass;
use serde_json::Value;

use crate::pointer::At;
use crate::registry::strategy::{Strategy, typed_roundtrip};
use crate::validation::{FieldError, NameRule};

/// The longest controller name upstream accepts.
const MAX_CONTROLLER_LEN: usize = 250;

/// Decodes an IngressClass with the scheme default: parameters without a scope are
/// cluster-scoped.
pub fn decode(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<IngressClass>(obj, |class| {
        if let Some(params) = class.spec.as_mut().and_then(|s| s.parameters.as_mut()) {
            params.scope.get_or_insert_with(|| "Cluster".to_owned());
        }
    })
}

/// The IngressClass strategy.
#[derive(Debug, Default)]
pub struct IngressClassStrategy;

impl Strategy for IngressClassStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let controller = obj
            .at("/spec/controller")
            .and_then(Value::as_str)
            .unwrap_or("");
        if controller.len() > MAX_CONTROLLER_LEN {
            errs.push(FieldError::too_long("spec.controller", MAX_CONTROLLER_LEN));
        }
        errs.extend(domain_prefixed_path("spec.controller", controller));
        if let Some(params) = obj.at("/spec/parameters").filter(|p| !p.is_null()) {
            validate_parameters(params, &mut errs);
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let controller = |o: &Value| o.at("/spec/controller").cloned().unwrap_or(Value::Null);
        if controller(new) != controller(old) {
            errs.push(FieldError::invalid(
                "spec.controller",
                controller(new),
                "field is immutable",
            ));
        }
        errs
    }
}

/// Upstream's `IsDomainPrefixedPath`: `example.com/path`.
pub fn domain_prefixed_path(field: &str, value: &str) -> Vec<FieldError> {
    if value.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    let Some((host, path)) = value
        .split_once('/')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty())
    else {
        return vec![FieldError::invalid(
            field,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    let mut errs: Vec<FieldError> = NameRule::Subdomain
        .check(host)
        .into_iter()
        .map(|msg| FieldError::invalid(field, host, msg))
        .collect();
    let path_ok = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c));
    if !path_ok {
        errs.push(FieldError::invalid(
            field,
            path,
            "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        ));
    }
    errs
}

/// Upstream's `validateIngressClassParametersReference`.
fn validate_parameters(params: &Value, errs: &mut Vec<FieldError>) {
    let field = |k: &str| params.get(k).and_then(Value::as_str);
    if field("kind").unwrap_or("").is_empty() {
        errs.push(FieldError::required("spec.parameters.kind", ""));
    }
    if field("name").unwrap_or("").is_empty() {
        errs.push(FieldError::required("spec.parameters.name", ""));
    }
    match (field("scope"), field("namespace")) {
        (Some("Namespace"), None | Some("")) => errs.push(FieldError::required(
            "spec.parameters.namespace",
            "`parameters.scope` is set to 'Namespace'",
        )),
        (Some("Cluster"), Some(_)) => errs.push(FieldError::forbidden(
            "spec.parameters.namespace",
            "`parameters.scope` is set to 'Cluster'",
        )),
        (Some(scope), _) if scope != "Namespace" && scope != "Cluster" => errs.push(
            FieldError::not_supported("spec.parameters.scope", scope, &["Cluster", "Namespace"]),
        ),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn controller_and_parameters() {
        let class = |spec: Value| json!({"metadata": {"name": "nginx"}, "spec": spec});
        assert!(
            IngressClassStrategy
                .validate(&class(json!({"controller": "k8s.io/ingress-nginx"})))
                .is_empty()
        );
        assert_eq!(
            IngressClassStrategy.validate(&class(json!({"controller": "nginx"})))[0].to_string(),
            r#"spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")"#
        );
        assert_eq!(
            IngressClassStrategy.validate(&class(json!({})))[0].to_string(),
            "spec.controller: Required value"
        );
        let scoped = class(json!({"controller": "example.com/c",
            "parameters": {"kind": "P", "name": "p", "scope": "Namespace"}}));
        assert_eq!(
            IngressClassStrategy.validate(&scoped)[0].field,
            "spec.parameters.namespace"
        );
        let old = class(json!({"controller": "example.com/a"}));
        let new = class(json!({"controller": "example.com/b"}));
        assert_eq!(
            IngressClassStrategy.validate_update(&new, &old)[0].to_string(),
            r#"spec.controller: Invalid value: "example.com/b": field is immutable"#
        );
    }

    #[test]
    fn parameters_default_to_cluster_scope() {
        let class = decode(json!({"metadata": {"name": "c"},
            "spec": {"controller": "example.com/c", "parameters": {"kind": "P", "name": "p"}}}))
        .expect("decodes");
        assert_eq!(class["spec"]["parameters"]["scope"], "Cluster");
    }
}
