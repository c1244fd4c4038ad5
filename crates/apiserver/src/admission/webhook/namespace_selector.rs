//! Whether a request is selected by a webhook's `namespaceSelector`: the labels of the request's namespace (a Namespace's own labels when it is the object written), as upstream's `predicates/namespace.Matcher`.

use kcm_machinery::labels::Selector;

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::source::ObjectSource;
use crate::error::{ApiError, Result};
use crate::object;
use crate::resources::namespace::NAMESPACES;

/// Whether `selector` selects the request. Cluster-scoped requests other than namespaces are
/// always selected; an empty selector selects everything; a missing namespace is upstream's
/// 404 (`namespaces "x" not found`).
pub async fn matches(
    selector: &Selector,
    a: &Attributes<'_>,
    source: &dyn ObjectSource,
) -> Result<bool> {
    let is_namespace = a.resource.group.is_empty() && a.resource.plural == "namespaces";
    if a.namespace.is_empty() && !is_namespace {
        return Ok(true);
    }
    if selector.is_everything() {
        return Ok(true);
    }
    // A namespace being created or updated is judged by its new labels (the stored one does
    // not have them yet); a namespace being deleted by the stored one.
    if is_namespace
        && a.subresource.is_empty()
        && matches!(a.operation, Operation::Create | Operation::Update)
    {
        let labels = a.object.as_ref().map(object::labels).unwrap_or_default();
        return Ok(selector.matches(&labels));
    }
    let name = if is_namespace && a.namespace.is_empty() {
        a.name
    } else {
        a.namespace
    };
    let namespace = if name == a.namespace {
        a.namespace_object(source).await?
    } else {
        source.get(&NAMESPACES, "", name).await?
    };
    match namespace {
        Some(ns) => Ok(selector.matches(&object::labels(&ns))),
        None => Err(ApiError::not_found(NAMESPACES.group_resource(), name)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;
    use crate::registry::resource::ResourceDef;
    use crate::resources::admissionregistration::VALIDATING_WEBHOOK_CONFIGURATIONS;
    use crate::resources::pod::PODS;

    fn namespace(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}})
    }

    /// As upstream's `TestGetNamespaceLabels` and `TestNotExemptClusterScopedResource`.
    #[tokio::test]
    async fn the_namespace_labels_decide() {
        struct Case {
            name: &'static str,
            selector: &'static str,
            op: Operation,
            def: &'static ResourceDef,
            ns: &'static str,
            object: Option<Value>,
            want: Result<bool, u16>,
        }
        let cases = [
            Case {
                name: "the pod's namespace matches",
                selector: "env=prod",
                op: Operation::Create,
                def: &PODS,
                ns: "prod",
                object: Some(json!({})),
                want: Ok(true),
            },
            Case {
                name: "the pod's namespace does not match",
                selector: "env=prod",
                op: Operation::Create,
                def: &PODS,
                ns: "dev",
                object: Some(json!({})),
                want: Ok(false),
            },
            Case {
                name: "a missing namespace is a 404",
                selector: "env=prod",
                op: Operation::Create,
                def: &PODS,
                ns: "gone",
                object: Some(json!({})),
                want: Err(404),
            },
            Case {
                name: "a cluster-scoped object is never exempted",
                selector: "env=prod",
                op: Operation::Create,
                def: &VALIDATING_WEBHOOK_CONFIGURATIONS,
                ns: "",
                object: Some(json!({})),
                want: Ok(true),
            },
            Case {
                name: "a namespace created is judged by its own new labels",
                selector: "env=prod",
                op: Operation::Create,
                def: &NAMESPACES,
                ns: "",
                object: Some(namespace("fresh", json!({"env": "prod"}))),
                want: Ok(true),
            },
            Case {
                name: "a namespace deleted is judged by the stored one",
                selector: "env=prod",
                op: Operation::Delete,
                def: &NAMESPACES,
                ns: "",
                object: None,
                want: Ok(false),
            },
        ];
        let source = Objects::new(vec![
            (&NAMESPACES, namespace("prod", json!({"env": "prod"}))),
            (&NAMESPACES, namespace("dev", json!({"env": "dev"}))),
        ]);
        let user = UserInfo::admin();
        for case in cases {
            let selector = Selector::parse(case.selector).expect("selector");
            // A namespace request's name is the namespace (here `dev` for the delete).
            let name = match case.object.as_ref() {
                Some(o) if !object::name(o).is_empty() => object::name(o).to_owned(),
                _ => "dev".to_owned(),
            };
            let a = Attributes::new(case.op, case.def, case.ns, &name, case.object, &user);
            let got = matches(&selector, &a, &source).await.map_err(|e| e.code);
            assert_eq!(got, case.want, "{}", case.name);
        }
    }
}
