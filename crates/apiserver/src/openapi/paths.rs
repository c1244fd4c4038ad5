//! Path items of a group-version document: one per collection, object and subresource, with upstream's operation ids, parameters and `x-kubernetes-*` extensions.
//!
//! kubectl reads two things from them: `kubectl explain` finds a resource's kind through the
//! `x-kubernetes-group-version-kind` of the operations on its collection path, and
//! `--validate=strict` asks the server to validate when the kind's `patch` operation lists a
//! `fieldValidation` query parameter (client-go's `supportsQueryParamV3`).

use serde_json::{Map, Value, json};

use crate::openapi::schemas::{CommonNames, gvk_json, reference};
use crate::registry::resource::{ResourceDef, Verbs};
use crate::registry::subresource::Subresource;

/// The media types answers are sent in.
const RESPONSE_TYPES: [&str; 1] = ["application/json"];
/// The media types objects may be sent in.
const REQUEST_TYPES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];
/// The media types of a patch body.
const PATCH_TYPES: [&str; 4] = [
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// Component names an operation set refers to, beyond the meta/v1 ones.
#[derive(Clone, Debug)]
pub struct ResourceNames<'a> {
    /// The kind's component, e.g. `io.k8s.api.apps.v1.Deployment`.
    pub kind: &'a str,
    /// Its list's component, e.g. `io.k8s.api.apps.v1.DeploymentList`.
    pub list: &'a str,
    /// `io.k8s.api.autoscaling.v1.Scale`, when the resource has `/scale`.
    pub scale: Option<&'a str>,
    /// `io.k8s.api.core.v1.Binding`, when the resource has `/binding`.
    pub binding: Option<&'a str>,
    /// `io.k8s.api.policy.v1.Eviction`, when the resource has `/eviction`.
    pub eviction: Option<&'a str>,
    /// The meta/v1 components.
    pub common: &'a CommonNames,
}

/// A query or path parameter.
fn param(name: &str, location: &str, ty: &str, description: &str) -> Value {
    let mut p = json!({
        "name": name,
        "in": location,
        "description": description,
        "schema": {"type": ty, "uniqueItems": true},
    });
    if location == "path" {
        p["required"] = json!(true);
    }
    p
}

fn pretty() -> Value {
    param(
        "pretty",
        "query",
        "string",
        "If 'true', then the output is pretty printed.",
    )
}

fn dry_run() -> Value {
    param(
        "dryRun",
        "query",
        "string",
        "When present, indicates that modifications should not be persisted. The only valid value is All: all dry run stages are processed.",
    )
}

fn field_manager() -> Value {
    param(
        "fieldManager",
        "query",
        "string",
        "The name of the actor or entity making these changes, recorded in managedFields.",
    )
}

/// The parameter kubectl's `--validate=strict` looks for on `patch` operations.
fn field_validation() -> Value {
    param(
        "fieldValidation",
        "query",
        "string",
        "How the server handles fields of the request body the schema does not know: Ignore drops them, Warn (the default) drops them and answers with a Warning header for each, Strict fails the request with BadRequest.",
    )
}

fn list_params() -> Vec<Value> {
    vec![
        param(
            "allowWatchBookmarks",
            "query",
            "boolean",
            "Ask a watch for BOOKMARK events carrying the latest resourceVersion.",
        ),
        param(
            "continue",
            "query",
            "string",
            "The continue token of the previous page of a paginated list.",
        ),
        param(
            "fieldSelector",
            "query",
            "string",
            "Restrict the returned objects by their fields.",
        ),
        param(
            "labelSelector",
            "query",
            "string",
            "Restrict the returned objects by their labels.",
        ),
        param(
            "limit",
            "query",
            "integer",
            "The most objects to return in one page; the rest is reached with continue.",
        ),
        param(
            "resourceVersion",
            "query",
            "string",
            "Which version of the collection to read or watch from.",
        ),
        param(
            "resourceVersionMatch",
            "query",
            "string",
            "How resourceVersion applies to a list: Exact or NotOlderThan.",
        ),
        param(
            "sendInitialEvents",
            "query",
            "boolean",
            "Start a watch with synthetic ADDED events for the current state.",
        ),
        param(
            "timeoutSeconds",
            "query",
            "integer",
            "End a list or watch call after this many seconds.",
        ),
        param(
            "watch",
            "query",
            "boolean",
            "Watch for changes instead of listing.",
        ),
    ]
}

fn delete_params() -> Vec<Value> {
    vec![
        dry_run(),
        param(
            "gracePeriodSeconds",
            "query",
            "integer",
            "Seconds before the object is deleted; 0 deletes immediately.",
        ),
        param(
            "orphanDependents",
            "query",
            "boolean",
            "Deprecated: use propagationPolicy.",
        ),
        param(
            "propagationPolicy",
            "query",
            "string",
            "Whether and how dependents are garbage collected: Orphan, Background or Foreground.",
        ),
    ]
}

fn content(types: &[&str], schema: Value) -> Value {
    let mut map = Map::new();
    for t in types {
        map.insert((*t).to_owned(), json!({"schema": schema.clone()}));
    }
    Value::Object(map)
}

fn responses(codes: &[(u16, &str)]) -> Value {
    let mut map = Map::new();
    for (code, schema) in codes {
        let description = match code {
            200 => "OK",
            201 => "Created",
            202 => "Accepted",
            _ => "",
        };
        map.insert(
            code.to_string(),
            json!({"description": description, "content": content(&RESPONSE_TYPES, reference(schema))}),
        );
    }
    map.insert("401".to_owned(), json!({"description": "Unauthorized"}));
    Value::Object(map)
}

/// `AppsV1`, `CoreV1`, `CoordinationV1`: the group/version part of operation ids.
fn op_prefix(info: &ResourceDef) -> String {
    let group = if info.group.is_empty() {
        "core"
    } else {
        info.group.split('.').next().unwrap_or(&info.group)
    };
    format!("{}{}", capitalize(group), capitalize(&info.version))
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// One operation.
struct Op<'a> {
    /// The resource verb that must be served for the operation to be listed (subresource
    /// operations need none: [`Verbs::NONE`]).
    requires: Verbs,
    verb: &'a str,
    action: &'a str,
    id: String,
    description: String,
    gvk: Value,
    params: Vec<Value>,
    body: Option<(&'a [&'a str], Value)>,
    responses: Value,
}

impl Op<'_> {
    fn render(self, tag: &str) -> (String, Value) {
        let mut op = json!({
            "tags": [tag],
            "description": self.description,
            "operationId": self.id,
            "responses": self.responses,
            "x-kubernetes-action": self.action,
            "x-kubernetes-group-version-kind": self.gvk,
        });
        if !self.params.is_empty() {
            op["parameters"] = Value::Array(self.params);
        }
        if let Some((types, schema)) = self.body {
            op["requestBody"] = json!({"content": content(types, schema), "required": true});
        }
        (self.verb.to_owned(), op)
    }
}

/// Adds the path items of one resource (collection, object, all-namespaces list,
/// subresources) to `paths`: the operations of the verbs it serves.
pub fn add_resource(paths: &mut Map<String, Value>, info: &ResourceDef, names: &ResourceNames) {
    let prefix = if info.group.is_empty() {
        format!("/api/{}", info.version)
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    let tag = op_prefix(info);
    let scope = if info.namespaced { "Namespaced" } else { "" };
    let kind = &*info.kind;
    let gvk = gvk_json(&info.group, &info.version, kind);
    let collection = if info.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", info.plural)
    } else {
        format!("{prefix}/{}", info.plural)
    };
    let common = names.common;
    let mut path_params = Vec::new();
    if info.namespaced {
        path_params.push(param(
            "namespace",
            "path",
            "string",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    path_params.push(pretty());
    let mut name_params = vec![param(
        "name",
        "path",
        "string",
        &format!("name of the {kind}"),
    )];
    name_params.extend(path_params.iter().cloned());

    let write_params = |patch: bool| {
        let mut p = vec![dry_run(), field_manager(), field_validation()];
        if patch {
            p.push(param(
                "force",
                "query",
                "boolean",
                "Force is going to \"force\" Apply requests: the applier takes the fields other managers own. Must be unset for non-apply patches.",
            ));
        }
        p
    };

    // The collection: list, create, delete collection.
    let ops = vec![
        Op {
            requires: Verbs::LIST,
            verb: "get",
            action: "list",
            id: format!("list{tag}{scope}{kind}"),
            description: format!("list or watch objects of kind {kind}"),
            gvk: gvk.clone(),
            params: list_params(),
            body: None,
            responses: responses(&[(200, names.list)]),
        },
        Op {
            requires: Verbs::CREATE,
            verb: "post",
            action: "post",
            id: format!("create{tag}{scope}{kind}"),
            description: format!("create a {kind}"),
            gvk: gvk.clone(),
            params: write_params(false),
            body: Some((&REQUEST_TYPES, reference(names.kind))),
            responses: responses(&[(200, names.kind), (201, names.kind), (202, names.kind)]),
        },
        Op {
            requires: Verbs::DELETE_COLLECTION,
            verb: "delete",
            action: "deletecollection",
            id: format!("delete{tag}Collection{scope}{kind}"),
            description: format!("delete collection of {kind}"),
            gvk: gvk.clone(),
            params: [delete_params(), list_params()].concat(),
            body: Some((&REQUEST_TYPES, reference(&common.delete_options))),
            responses: responses(&[(200, &common.status)]),
        },
    ];
    insert(paths, &collection, served(info, ops), &path_params, &tag);

    // One object: read, replace, patch, delete.
    let object = format!("{collection}/{{name}}");
    let ops = vec![
        Op {
            requires: Verbs::GET,
            verb: "get",
            action: "get",
            id: format!("read{tag}{scope}{kind}"),
            description: format!("read the specified {kind}"),
            gvk: gvk.clone(),
            params: Vec::new(),
            body: None,
            responses: responses(&[(200, names.kind)]),
        },
        Op {
            requires: Verbs::UPDATE,
            verb: "put",
            action: "put",
            id: format!("replace{tag}{scope}{kind}"),
            description: format!("replace the specified {kind}"),
            gvk: gvk.clone(),
            params: write_params(false),
            body: Some((&REQUEST_TYPES, reference(names.kind))),
            responses: responses(&[(200, names.kind), (201, names.kind)]),
        },
        Op {
            requires: Verbs::PATCH,
            verb: "patch",
            action: "patch",
            id: format!("patch{tag}{scope}{kind}"),
            description: format!("partially update the specified {kind}"),
            gvk: gvk.clone(),
            params: write_params(true),
            body: Some((&PATCH_TYPES, reference(&common.patch))),
            responses: responses(&[(200, names.kind), (201, names.kind)]),
        },
        Op {
            requires: Verbs::DELETE,
            verb: "delete",
            action: "delete",
            id: format!("delete{tag}{scope}{kind}"),
            description: format!("delete a {kind}"),
            gvk: gvk.clone(),
            params: delete_params(),
            body: Some((&REQUEST_TYPES, reference(&common.delete_options))),
            responses: responses(&[(200, &common.status), (202, &common.status)]),
        },
    ];
    insert(paths, &object, served(info, ops), &name_params, &tag);

    if info.namespaced {
        let ops = vec![Op {
            requires: Verbs::LIST,
            verb: "get",
            action: "list",
            id: format!("list{tag}{kind}ForAllNamespaces"),
            description: format!("list or watch objects of kind {kind}"),
            gvk: gvk.clone(),
            params: list_params(),
            body: None,
            responses: responses(&[(200, names.list)]),
        }];
        insert(
            paths,
            &format!("{prefix}/{}", info.plural),
            served(info, ops),
            &[pretty()],
            &tag,
        );
    }

    for sub in info.subresources {
        let path = format!("{object}/{}", sub.name());
        let sub_gvk = |group: &str, version: &str, kind: &str| gvk_json(group, version, kind);
        let ops = match sub {
            Subresource::Status => status_like_ops(
                &format!("{tag}{scope}{kind}Status"),
                &format!("status of the specified {kind}"),
                &gvk,
                names.kind,
                &write_params,
                common,
            ),
            Subresource::Approval => status_like_ops(
                &format!("{tag}{scope}{kind}Approval"),
                &format!("approval of the specified {kind}"),
                &gvk,
                names.kind,
                &write_params,
                common,
            ),
            Subresource::Scale => match names.scale {
                Some(scale) => status_like_ops(
                    &format!("{tag}{scope}{kind}Scale"),
                    &format!("scale of the specified {kind}"),
                    &sub_gvk("autoscaling", "v1", "Scale"),
                    scale,
                    &write_params,
                    common,
                ),
                None => continue,
            },
            Subresource::Binding => match names.binding {
                Some(binding) => vec![Op {
                    requires: Verbs::NONE,
                    verb: "post",
                    action: "post",
                    id: format!("create{tag}{scope}{kind}Binding"),
                    description: format!("create binding of a {kind}"),
                    gvk: sub_gvk("", "v1", "Binding"),
                    params: write_params(false),
                    body: Some((&REQUEST_TYPES, reference(binding))),
                    responses: responses(&[(200, binding), (201, binding), (202, binding)]),
                }],
                None => continue,
            },
            Subresource::Eviction => match names.eviction {
                Some(eviction) => vec![Op {
                    requires: Verbs::NONE,
                    verb: "post",
                    action: "post",
                    id: format!("create{tag}{scope}{kind}Eviction"),
                    description: format!("create eviction of a {kind}"),
                    gvk: sub_gvk("policy", "v1", "Eviction"),
                    params: write_params(false),
                    body: Some((&REQUEST_TYPES, reference(eviction))),
                    responses: responses(&[(200, eviction), (201, eviction), (202, eviction)]),
                }],
                None => continue,
            },
            // Connect subresources stream or proxy bytes, not objects; the documents leave
            // them out (kcm's simulated nodes do not serve them).
            Subresource::Log
            | Subresource::Exec
            | Subresource::Attach
            | Subresource::PortForward
            | Subresource::Proxy => continue,
            Subresource::Finalize => vec![Op {
                requires: Verbs::NONE,
                verb: "put",
                action: "put",
                id: format!("replace{tag}{scope}{kind}Finalize"),
                description: format!("replace finalize of the specified {kind}"),
                gvk: gvk.clone(),
                params: write_params(false),
                body: Some((&REQUEST_TYPES, reference(names.kind))),
                responses: responses(&[(200, names.kind), (201, names.kind)]),
            }],
        };
        insert(paths, &path, ops, &name_params, &tag);
    }
}

/// get/put/patch of a subresource holding `schema` (`/status`, `/scale`).
fn status_like_ops<'a>(
    id_suffix: &str,
    what: &str,
    gvk: &Value,
    schema: &'a str,
    write_params: &dyn Fn(bool) -> Vec<Value>,
    common: &'a CommonNames,
) -> Vec<Op<'a>> {
    vec![
        Op {
            requires: Verbs::NONE,
            verb: "get",
            action: "get",
            id: format!("read{id_suffix}"),
            description: format!("read {what}"),
            gvk: gvk.clone(),
            params: Vec::new(),
            body: None,
            responses: responses(&[(200, schema)]),
        },
        Op {
            requires: Verbs::NONE,
            verb: "put",
            action: "put",
            id: format!("replace{id_suffix}"),
            description: format!("replace {what}"),
            gvk: gvk.clone(),
            params: write_params(false),
            body: Some((&REQUEST_TYPES, reference(schema))),
            responses: responses(&[(200, schema), (201, schema)]),
        },
        Op {
            requires: Verbs::NONE,
            verb: "patch",
            action: "patch",
            id: format!("patch{id_suffix}"),
            description: format!("partially update {what}"),
            gvk: gvk.clone(),
            params: write_params(true),
            body: Some((&PATCH_TYPES, reference(&common.patch))),
            responses: responses(&[(200, schema), (201, schema)]),
        },
    ]
}

/// The operations whose verb `info` serves.
fn served<'a>(info: &ResourceDef, ops: Vec<Op<'a>>) -> Vec<Op<'a>> {
    ops.into_iter()
        .filter(|op| info.serves(op.requires))
        .collect()
}

/// Adds a path item of `ops` (none when no operation is served).
fn insert(paths: &mut Map<String, Value>, path: &str, ops: Vec<Op>, params: &[Value], tag: &str) {
    if ops.is_empty() {
        return;
    }
    let mut item = Map::new();
    for op in ops {
        let (verb, value) = op.render(tag);
        item.insert(verb, value);
    }
    item.insert("parameters".to_owned(), Value::Array(params.to_vec()));
    paths.insert(path.to_owned(), Value::Object(item));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::apps::DEPLOYMENTS;

    fn common() -> CommonNames {
        CommonNames {
            delete_options: "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions".to_owned(),
            status: "io.k8s.apimachinery.pkg.apis.meta.v1.Status".to_owned(),
            patch: "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".to_owned(),
        }
    }

    #[test]
    fn deployment_paths_carry_upstream_ids_gvks_and_field_validation() {
        let common = common();
        let names = ResourceNames {
            kind: "io.k8s.api.apps.v1.Deployment",
            list: "io.k8s.api.apps.v1.DeploymentList",
            scale: Some("io.k8s.api.autoscaling.v1.Scale"),
            binding: None,
            eviction: None,
            common: &common,
        };
        let mut paths = Map::new();
        add_resource(&mut paths, &DEPLOYMENTS, &names);
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        for want in [
            "/apis/apps/v1/namespaces/{namespace}/deployments",
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status",
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
            "/apis/apps/v1/deployments",
        ] {
            assert!(keys.contains(&want), "missing {want} in {keys:?}");
        }
        let object = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        assert_eq!(
            object["patch"]["operationId"],
            "patchAppsV1NamespacedDeployment"
        );
        assert_eq!(
            object["patch"]["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "kind": "Deployment", "version": "v1"})
        );
        let params = object["patch"]["parameters"].as_array().expect("params");
        assert!(
            params
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        let scale = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
        assert_eq!(
            scale["patch"]["x-kubernetes-group-version-kind"]["group"],
            "autoscaling"
        );
        assert_eq!(
            paths["/apis/apps/v1/deployments"]["get"]["operationId"],
            "listAppsV1DeploymentForAllNamespaces"
        );
    }

    #[test]
    fn only_served_verbs_get_operations() {
        use crate::registry::resource::fixtures::{ACCESS_REVIEWS, COMPONENT_STATUSES};
        let common = common();
        let names = ResourceNames {
            kind: "k",
            list: "l",
            scale: None,
            binding: None,
            eviction: None,
            common: &common,
        };
        let ops = |paths: &Map<String, Value>, path: &str| -> Vec<String> {
            paths.get(path).map_or_else(Vec::new, |item| {
                item.as_object()
                    .expect("item")
                    .keys()
                    .filter(|k| *k != "parameters")
                    .cloned()
                    .collect()
            })
        };
        let mut paths = Map::new();
        add_resource(&mut paths, &COMPONENT_STATUSES, &names);
        assert_eq!(ops(&paths, "/api/v1/componentstatuses"), ["get"]);
        assert_eq!(ops(&paths, "/api/v1/componentstatuses/{name}"), ["get"]);

        let mut paths = Map::new();
        add_resource(&mut paths, &ACCESS_REVIEWS, &names);
        let collection = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
        assert_eq!(ops(&paths, collection), ["post"]);
        assert_eq!(paths.len(), 1, "no object path: {:?}", paths.keys());
        assert_eq!(
            paths[collection]["post"]["operationId"],
            "createAuthorizationV1SelfSubjectAccessReview"
        );
    }
}
