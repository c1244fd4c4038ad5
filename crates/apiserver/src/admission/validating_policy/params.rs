//! The params a binding evaluates its policy with (upstream's `generic.CollectParams`): by `paramRef.name` or `selector`, in the request's namespace or `paramRef.namespace`, and `parameterNotFoundAction`.

use std::sync::Arc;

use kcm_machinery::labels::Selector;
use serde_json::Value;

use k8s_openapi::api::admissionregistration::v1::ParamRef;

use crate::admission::source::ObjectSource;
use crate::object;

/// The params to evaluate a policy of `param_kind` (`(apiVersion, kind)`) with for a binding
/// of `param_ref` on a request in `namespace`: one evaluation per param, or one with null
/// params when the policy has no `paramKind` or the binding no `paramRef`; empty when none
/// were found and the binding allows that. The error is upstream's configuration error text.
/// The validating and the mutating policies share it.
pub async fn collect(
    source: &dyn ObjectSource,
    param_kind: Option<&(String, String)>,
    param_ref: Option<&ParamRef>,
    namespace: &str,
) -> Result<Vec<Option<Arc<Value>>>, String> {
    let (Some((api_version, kind)), Some(param_ref)) = (param_kind, param_ref) else {
        return Ok(vec![None]);
    };
    let Some(def) = source.resource_for_kind(api_version, kind) else {
        return Err(format!(
            "paramKind kind `&ParamKind{{APIVersion:{api_version},Kind:{kind},}}` not known"
        ));
    };
    let ref_namespace = param_ref.namespace.as_deref().unwrap_or("");
    let param_namespace = if !def.namespaced {
        if !ref_namespace.is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
                    .to_owned(),
            );
        }
        ""
    } else if !ref_namespace.is_empty() {
        ref_namespace
    } else if !namespace.is_empty() {
        namespace
    } else {
        return Err(
            "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                .to_owned(),
        );
    };
    let name = param_ref.name.as_deref().unwrap_or("");
    let params: Vec<Arc<Value>> = if !name.is_empty() {
        if param_ref.selector.is_some() {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".to_owned());
        }
        source
            .get(&def, param_namespace, name)
            .await
            .map_err(|e| e.message)?
            .into_iter()
            .collect()
    } else if let Some(selector) = &param_ref.selector {
        let selector = Selector::from_label_selector(selector).map_err(|e| e.to_string())?;
        source
            .list(&def, param_namespace)
            .await
            .map_err(|e| e.message)?
            .into_iter()
            .filter(|p| selector.matches(&object::labels(p)))
            .collect()
    } else {
        return Err("one of name or selector must be provided".to_owned());
    };
    if params.is_empty() && param_ref.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".to_owned(),
        );
    }
    Ok(params.into_iter().map(Some).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::testing::Objects;
    use crate::admission::validating_policy::compiled::{Binding, Policy};
    use crate::resources::core::CONFIGMAPS;

    fn policy(kind: Option<(&str, &str)>) -> Policy {
        let mut spec = json!({"validations": [{"expression": "true"}]});
        if let Some((api_version, kind)) = kind {
            spec["paramKind"] = json!({"apiVersion": api_version, "kind": kind});
        }
        Policy::compile(&json!({"metadata": {"name": "p"}, "spec": spec})).expect("policy")
    }

    fn binding(param_ref: Value) -> Binding {
        Binding::decode(
            &json!({"metadata": {"name": "b"}, "spec": {"policyName": "p",
            "validationActions": ["Deny"], "paramRef": param_ref}}),
        )
        .expect("binding")
    }

    fn config_map(namespace: &str, name: &str, tier: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name,
            "namespace": namespace, "labels": {"tier": tier}}, "data": {"max": "3"}})
    }

    #[tokio::test]
    async fn params_are_found_as_upstream_collects_them() {
        let source = Objects::new(vec![
            (&CONFIGMAPS, config_map("default", "limits", "a")),
            (&CONFIGMAPS, config_map("default", "other", "b")),
            (&CONFIGMAPS, config_map("shared", "limits", "a")),
        ]);
        let names =
            |found: Result<Vec<Option<Arc<Value>>>, String>| -> Result<Vec<String>, String> {
                found.map(|ps| {
                    ps.iter()
                        .map(|p| {
                            p.as_ref().map_or("<null>".to_owned(), |p| {
                                format!("{}/{}", object::namespace(p), object::name(p))
                            })
                        })
                        .collect()
                })
            };
        let cm = Some(("v1", "ConfigMap"));
        let cases: Vec<(&str, Policy, Value, &str, Result<Vec<&str>, &str>)> = vec![
            (
                "no paramKind: one evaluation without params",
                policy(None),
                json!({"name": "limits", "parameterNotFoundAction": "Deny"}),
                "default",
                Ok(vec!["<null>"]),
            ),
            (
                "by name in the request's namespace",
                policy(cm),
                json!({"name": "limits", "parameterNotFoundAction": "Deny"}),
                "default",
                Ok(vec!["default/limits"]),
            ),
            (
                "by name in another namespace",
                policy(cm),
                json!({"name": "limits", "namespace": "shared", "parameterNotFoundAction": "Deny"}),
                "default",
                Ok(vec!["shared/limits"]),
            ),
            (
                "by selector",
                policy(cm),
                json!({"selector": {"matchLabels": {"tier": "b"}}, "parameterNotFoundAction": "Deny"}),
                "default",
                Ok(vec!["default/other"]),
            ),
            (
                "missing with Deny",
                policy(cm),
                json!({"name": "nope", "parameterNotFoundAction": "Deny"}),
                "default",
                Err("no params found for policy binding with `Deny` parameterNotFoundAction"),
            ),
            (
                "missing with Allow",
                policy(cm),
                json!({"name": "nope", "parameterNotFoundAction": "Allow"}),
                "default",
                Ok(vec![]),
            ),
            (
                "namespaced params for a cluster-scoped request",
                policy(cm),
                json!({"name": "limits", "parameterNotFoundAction": "Deny"}),
                "",
                Err(
                    "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources",
                ),
            ),
            (
                "unknown kind",
                policy(Some(("example.com/v1", "Limits"))),
                json!({"name": "limits", "parameterNotFoundAction": "Deny"}),
                "default",
                Err(
                    "paramKind kind `&ParamKind{APIVersion:example.com/v1,Kind:Limits,}` not known",
                ),
            ),
        ];
        for (name, policy, param_ref, namespace, want) in cases {
            let binding = binding(param_ref);
            let found = collect(
                &source,
                policy.param_kind.as_ref(),
                binding.param_ref.as_ref(),
                namespace,
            )
            .await;
            let got = names(found);
            let want = want
                .map(|v| v.into_iter().map(str::to_owned).collect())
                .map_err(str::to_owned);
            assert_eq!(got, want, "{name}");
        }
    }
}
