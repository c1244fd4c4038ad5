//! The authorization filter (apiserver's `WithAuthorization` over `RequestInfoFactory`): every request's verb and target, decided by the authorizer before any handler runs; 403 with upstream's message otherwise.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::Method;

use crate::auth::authorizer::{Attributes, Decision, Target};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, GroupResource};
use crate::http::AppState;
use crate::http::request_info::{Route, parse};

/// A request's authorization attributes, owned (upstream's `RequestInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestAttributes {
    /// The verb.
    pub verb: String,
    /// `Some` for resource requests: `(namespace, group, resource, subresource, name)`.
    pub resource: Option<[String; 5]>,
    /// The path (non-resource requests).
    pub path: String,
}

impl RequestAttributes {
    /// The attributes of `method` on `path` with `query`, as upstream's `NewRequestInfo`:
    /// a collection GET is `list` (`watch` with `watch=true` or the `/watch/` prefix), a
    /// named one `get`; POST `create`, PUT `update`, PATCH `patch`; DELETE `delete` or, on a
    /// collection, `deletecollection`. A namespace's own requests are in that namespace; a
    /// list with a `metadata.name` field selector names its object.
    pub fn of(method: &Method, path: &str, query: Option<&str>) -> Self {
        let Route::Resource(r) = parse(path) else {
            return Self {
                verb: method.as_str().to_ascii_lowercase(),
                resource: None,
                path: path.to_owned(),
            };
        };
        let pairs = || form_urlencoded(query.unwrap_or(""));
        let named = r.name.is_some();
        let verb = match *method {
            Method::GET | Method::HEAD if named => "get",
            Method::GET | Method::HEAD => {
                let watch = r.watch_prefix
                    || pairs().any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
                if watch { "watch" } else { "list" }
            }
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if named => "delete",
            Method::DELETE => "deletecollection",
            _ => "",
        };
        let mut name = r.name.clone().unwrap_or_default();
        if (verb == "list" || verb == "watch")
            && let Some((_, selector)) = pairs().find(|(k, _)| k == "fieldSelector")
            && let Some(n) = selector
                .split(',')
                .find_map(|term| term.strip_prefix("metadata.name="))
        {
            name = n.to_owned();
        }
        let mut namespace = r.namespace.clone().unwrap_or_default();
        if r.group.is_empty() && r.resource == "namespaces" && named {
            namespace = name.clone();
        }
        Self {
            verb: verb.to_owned(),
            resource: Some([
                namespace,
                r.group,
                r.resource,
                r.subresource.unwrap_or_default(),
                name,
            ]),
            path: path.to_owned(),
        }
    }

    /// As the authorizer's [`Attributes`] for `user`.
    pub fn for_user<'a>(&'a self, user: &'a UserInfo) -> Attributes<'a> {
        let target = match &self.resource {
            Some([namespace, group, resource, subresource, name]) => Target::Resource {
                namespace,
                group,
                resource,
                subresource,
                name,
            },
            None => Target::NonResource { path: &self.path },
        };
        Attributes {
            user,
            verb: &self.verb,
            target,
        }
    }

    /// The 403 for `user`, with upstream's message (`responsewriters.Forbidden`).
    pub fn forbidden(&self, user: &UserInfo, reason: &str) -> ApiError {
        let user = &user.username;
        let verb = &self.verb;
        let suffix = if reason.is_empty() {
            String::new()
        } else {
            format!(": {reason}")
        };
        match &self.resource {
            None => {
                let message = format!(
                    "forbidden: User {user:?} cannot {verb} path {:?}{suffix}",
                    self.path
                );
                ApiError::forbidden(
                    GroupResource {
                        group: "",
                        resource: "",
                    },
                    "",
                    "",
                )
                .with_message(message)
            }
            Some([namespace, group, resource, subresource, name]) => {
                let shown = if subresource.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}/{subresource}")
                };
                let why = if namespace.is_empty() {
                    format!(
                        "User {user:?} cannot {verb} resource {shown:?} in API group {group:?} at the cluster scope{suffix}"
                    )
                } else {
                    format!(
                        "User {user:?} cannot {verb} resource {shown:?} in API group {group:?} in the namespace {namespace:?}{suffix}"
                    )
                };
                ApiError::forbidden(GroupResource { group, resource }, name, &why)
            }
        }
    }
}

/// `k=v&k=v` pairs, percent-decoded.
fn form_urlencoded(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k), percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Authorizes every request with the registry's authorizer; 403 unless allowed. Runs after
/// authentication (the user is in the extensions; without one the request is anonymous).
pub async fn authorize(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let user = req
        .extensions()
        .get::<Arc<UserInfo>>()
        .cloned()
        .unwrap_or_else(|| Arc::new(UserInfo::anonymous()));
    let attrs = RequestAttributes::of(req.method(), req.uri().path(), req.uri().query());
    match state
        .registry
        .authorizer()
        .authorize(&attrs.for_user(&user))
    {
        Decision::Allow(_) => next.run(req).await,
        Decision::Deny(reason) | Decision::NoOpinion(reason) => {
            attrs.forbidden(&user, &reason).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_attributes_as_upstream() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces/default/pods",
                None,
                "list",
                Some(["default", "", "pods", "", ""]),
            ),
            (
                "GET",
                "/api/v1/namespaces/default/pods",
                Some("watch=true"),
                "watch",
                Some(["default", "", "pods", "", ""]),
            ),
            (
                "GET",
                "/api/v1/watch/pods",
                None,
                "watch",
                Some(["", "", "pods", "", ""]),
            ),
            (
                "GET",
                "/api/v1/namespaces/default/pods/p",
                None,
                "get",
                Some(["default", "", "pods", "", "p"]),
            ),
            (
                "PUT",
                "/api/v1/namespaces/default/pods/p/status",
                None,
                "update",
                Some(["default", "", "pods", "status", "p"]),
            ),
            (
                "DELETE",
                "/apis/apps/v1/namespaces/a/deployments",
                None,
                "deletecollection",
                Some(["a", "apps", "deployments", "", ""]),
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                None,
                "patch",
                Some(["a", "apps", "deployments", "scale", "d"]),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns1",
                None,
                "get",
                Some(["ns1", "", "namespaces", "", "ns1"]),
            ),
            (
                "GET",
                "/api/v1/namespaces",
                None,
                "list",
                Some(["", "", "namespaces", "", ""]),
            ),
            (
                "GET",
                "/api/v1/namespaces/kube-system/configmaps",
                Some("fieldSelector=metadata.name%3Dx&watch=1"),
                "watch",
                Some(["kube-system", "", "configmaps", "", "x"]),
            ),
            (
                "POST",
                "/api/v1/namespaces/d/serviceaccounts/ci/token",
                None,
                "create",
                Some(["d", "", "serviceaccounts", "token", "ci"]),
            ),
            ("GET", "/apis", None, "get", None),
            ("GET", "/healthz", None, "get", None),
            ("POST", "/api", None, "post", None),
        ];
        for (method, path, query, verb, resource) in cases {
            let attrs = RequestAttributes::of(&method.parse().expect("method"), path, query);
            assert_eq!(attrs.verb, verb, "{method} {path}");
            assert_eq!(
                attrs.resource,
                resource.map(|r| r.map(str::to_owned)),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn forbidden_messages_are_upstreams() {
        let ci = UserInfo::service_account("default", "ci", "");
        let list = RequestAttributes::of(&Method::GET, "/api/v1/namespaces/default/pods", None);
        let err = list.forbidden(&ci, "");
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            r#"pods is forbidden: User "system:serviceaccount:default:ci" cannot list resource "pods" in API group "" in the namespace "default""#
        );
        let nodes = RequestAttributes::of(&Method::GET, "/api/v1/nodes/n1", None);
        assert_eq!(
            nodes.forbidden(&ci, "").message,
            r#"nodes "n1" is forbidden: User "system:serviceaccount:default:ci" cannot get resource "nodes" in API group "" at the cluster scope"#
        );
        let scale = RequestAttributes::of(
            &Method::PUT,
            "/apis/apps/v1/namespaces/a/deployments/d/scale",
            None,
        );
        assert_eq!(
            scale.forbidden(&ci, "").message,
            r#"deployments.apps "d" is forbidden: User "system:serviceaccount:default:ci" cannot update resource "deployments/scale" in API group "apps" in the namespace "a""#
        );
        let path = RequestAttributes::of(&Method::GET, "/metrics", None);
        assert_eq!(
            path.forbidden(&ci, "").message,
            r#"forbidden: User "system:serviceaccount:default:ci" cannot get path "/metrics""#
        );
    }
}
