//! The impersonation filter (apiserver's `WithImpersonation`): `Impersonate-User`, `-Group`, `-Uid` and `-Extra-*` headers, each checked against the `impersonate` verb before the request runs as the impersonated user.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::HeaderMap;

use crate::auth::authorizer::Decision;
use crate::auth::user::{
    ALL_AUTHENTICATED, ALL_SERVICE_ACCOUNTS, ALL_UNAUTHENTICATED, ANONYMOUS_USER, UserInfo,
    service_account_username, split_service_account_username,
};
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::authorization::RequestAttributes;

/// `Impersonate-User`.
pub const IMPERSONATE_USER: &str = "impersonate-user";
/// `Impersonate-Group` (repeatable).
pub const IMPERSONATE_GROUP: &str = "impersonate-group";
/// `Impersonate-Uid`.
pub const IMPERSONATE_UID: &str = "impersonate-uid";
/// The prefix of `Impersonate-Extra-<key>` (repeatable).
pub const IMPERSONATE_EXTRA_PREFIX: &str = "impersonate-extra-";

/// One thing a request asks to act as (upstream's impersonation `ObjectReference`s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Impersonation {
    /// A service account, from a `system:serviceaccount:NS:NAME` user name.
    ServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// Any other user name.
    User(String),
    /// A group.
    Group(String),
    /// A uid.
    Uid(String),
    /// One value of an extra attribute (key lower-cased and unescaped).
    Extra {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
}

impl Impersonation {
    /// The `impersonate` request the requester must be allowed, as the 5-tuple of
    /// [`RequestAttributes::resource`]: `(namespace, group, resource, subresource, name)`.
    fn attributes(&self) -> RequestAttributes {
        let (namespace, group, resource, subresource, name) = match self {
            Self::ServiceAccount { namespace, name } => {
                (namespace.as_str(), "", "serviceaccounts", "", name.as_str())
            }
            Self::User(name) => ("", "", "users", "", name.as_str()),
            Self::Group(name) => ("", "", "groups", "", name.as_str()),
            Self::Uid(uid) => ("", "authentication.k8s.io", "uids", "", uid.as_str()),
            Self::Extra { key, value } => (
                "",
                "authentication.k8s.io",
                "userextras",
                key.as_str(),
                value.as_str(),
            ),
        };
        RequestAttributes {
            verb: "impersonate".to_owned(),
            resource: Some([namespace, group, resource, subresource, name].map(str::to_owned)),
            path: String::new(),
        }
    }
}

/// The impersonations `headers` ask for, in upstream's order (user, groups, extras, uid);
/// an error when groups, extras or a uid come without a user (upstream's
/// `buildImpersonationRequests`).
pub fn impersonation_requests(headers: &HeaderMap) -> Result<Vec<Impersonation>, String> {
    let mut out = Vec::new();
    let text = |v: &http::HeaderValue| {
        v.to_str()
            .map(str::to_owned)
            .map_err(|_| "impersonation headers must be visible ASCII".to_owned())
    };
    let user = match headers.get(IMPERSONATE_USER) {
        Some(v) => text(v)?,
        None => String::new(),
    };
    let has_user = !user.is_empty();
    if has_user {
        out.push(match split_service_account_username(&user) {
            Some((namespace, name)) => Impersonation::ServiceAccount {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
            None => Impersonation::User(user),
        });
    }
    let mut others = false;
    for group in headers.get_all(IMPERSONATE_GROUP) {
        others = true;
        out.push(Impersonation::Group(text(group)?));
    }
    let mut extra_keys: Vec<&str> = headers
        .keys()
        .filter_map(|k| k.as_str().strip_prefix(IMPERSONATE_EXTRA_PREFIX))
        .collect();
    // Header maps iterate in insertion order; a sorted order keeps the first failing check
    // (and so the 403's message) independent of how the client ordered its headers.
    extra_keys.sort_unstable();
    extra_keys.dedup();
    for key in extra_keys {
        let header = format!("{IMPERSONATE_EXTRA_PREFIX}{key}");
        for value in headers.get_all(header.as_str()) {
            others = true;
            out.push(Impersonation::Extra {
                key: percent_unescape(key),
                value: text(value)?,
            });
        }
    }
    if let Some(uid) = headers.get(IMPERSONATE_UID) {
        let uid = text(uid)?;
        if !uid.is_empty() {
            others = true;
            out.push(Impersonation::Uid(uid));
        }
    }
    if others && !has_user {
        return Err(format!(
            "requested {} without impersonating a user",
            out.iter()
                .map(|r| format!("{r:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(out)
}

/// The user a request acts as once `requests` are granted (the groups named, or a service
/// account's fixed groups when none are; `system:authenticated` added to a non-anonymous
/// user unless `system:(un)authenticated` is named, `system:unauthenticated` to anonymous).
pub fn impersonated_user(requests: &[Impersonation]) -> UserInfo {
    let groups_specified = requests
        .iter()
        .any(|r| matches!(r, Impersonation::Group(_)));
    let mut user = UserInfo::default();
    for r in requests {
        match r {
            Impersonation::ServiceAccount { namespace, name } => {
                user.username = service_account_username(namespace, name);
                if !groups_specified {
                    user.groups = vec![
                        ALL_SERVICE_ACCOUNTS.to_owned(),
                        format!("{ALL_SERVICE_ACCOUNTS}:{namespace}"),
                    ];
                }
            }
            Impersonation::User(name) => user.username = name.clone(),
            Impersonation::Group(g) => user.groups.push(g.clone()),
            Impersonation::Uid(uid) => user.uid = uid.clone(),
            Impersonation::Extra { key, value } => user
                .extra
                .entry(key.clone())
                .or_insert_with(Vec::new)
                .push(value.clone()),
        }
    }
    if user.username != ANONYMOUS_USER {
        if !user.in_group(ALL_AUTHENTICATED) && !user.in_group(ALL_UNAUTHENTICATED) {
            user.groups.push(ALL_AUTHENTICATED.to_owned());
        }
    } else if !user.in_group(ALL_UNAUTHENTICATED) {
        user.groups.push(ALL_UNAUTHENTICATED.to_owned());
    }
    user
}

/// Switches the request's user when it carries impersonation headers, each request allowed
/// the `impersonate` verb by the authorizer (403 with upstream's message for the first that
/// is not); the headers are removed before the request goes on. Runs after authentication
/// and before authorization, which then sees the impersonated user.
pub async fn impersonate(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let requests = match impersonation_requests(req.headers()) {
        Ok(r) if r.is_empty() => return next.run(req).await,
        Ok(r) => r,
        Err(why) => return ApiError::internal(why).into_response(),
    };
    let requester = req
        .extensions()
        .get::<Arc<UserInfo>>()
        .cloned()
        .unwrap_or_else(|| Arc::new(UserInfo::anonymous()));
    for r in &requests {
        let attrs = r.attributes();
        match state
            .registry
            .authorizer()
            .authorize(&attrs.for_user(&requester))
        {
            Decision::Allow(_) => {}
            Decision::Deny(reason) | Decision::NoOpinion(reason) => {
                return attrs.forbidden(&requester, &reason).into_response();
            }
        }
    }
    let user = impersonated_user(&requests);
    tracing::debug!(requester = %requester.username, acting_as = %user.username, "impersonation");
    let headers = req.headers_mut();
    headers.remove(IMPERSONATE_USER);
    headers.remove(IMPERSONATE_GROUP);
    headers.remove(IMPERSONATE_UID);
    let extras: Vec<_> = headers
        .keys()
        .filter(|k| k.as_str().starts_with(IMPERSONATE_EXTRA_PREFIX))
        .cloned()
        .collect();
    for k in extras {
        headers.remove(k);
    }
    req.extensions_mut().insert(Arc::new(user));
    next.run(req).await
}

/// Upstream's `unescapeExtraKey`: `%XX` escapes decoded (header names cannot carry `/`);
/// an invalid escape leaves the key as it is.
fn percent_unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let byte = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match byte {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => return key.to_owned(),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                v.parse().expect("value"),
            );
        }
        h
    }

    #[test]
    fn requests_are_parsed_in_upstreams_order() {
        let h = headers(&[
            ("Impersonate-Uid", "u-1"),
            ("Impersonate-Extra-Scopes", "view"),
            ("Impersonate-Extra-Scopes", "edit"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-User", "system:serviceaccount:ns1:ci"),
            ("Impersonate-Extra-Example.com%2fteam", "a"),
        ]);
        assert_eq!(
            impersonation_requests(&h).expect("valid"),
            vec![
                Impersonation::ServiceAccount {
                    namespace: "ns1".into(),
                    name: "ci".into()
                },
                Impersonation::Group("devs".into()),
                Impersonation::Extra {
                    key: "example.com/team".into(),
                    value: "a".into()
                },
                Impersonation::Extra {
                    key: "scopes".into(),
                    value: "view".into()
                },
                Impersonation::Extra {
                    key: "scopes".into(),
                    value: "edit".into()
                },
                Impersonation::Uid("u-1".into()),
            ]
        );
        assert!(
            impersonation_requests(&HeaderMap::new())
                .expect("none")
                .is_empty()
        );
    }

    #[test]
    fn groups_extras_or_uid_without_a_user_are_refused() {
        for h in [
            headers(&[("Impersonate-Group", "devs")]),
            headers(&[("Impersonate-Uid", "u")]),
            headers(&[("Impersonate-Extra-A", "b")]),
        ] {
            let err = impersonation_requests(&h).expect_err("no user");
            assert!(err.ends_with("without impersonating a user"), "{err}");
        }
    }

    #[test]
    fn impersonated_users_get_upstreams_groups() {
        let cases: [(&str, &[(&str, &str)], &str, &[&str]); 5] = [
            (
                "a user gets system:authenticated",
                &[("Impersonate-User", "bob")],
                "bob",
                &["system:authenticated"],
            ),
            (
                "named groups, then system:authenticated",
                &[("Impersonate-User", "bob"), ("Impersonate-Group", "devs")],
                "bob",
                &["devs", "system:authenticated"],
            ),
            (
                "a service account gets its fixed groups",
                &[("Impersonate-User", "system:serviceaccount:ns:sa")],
                "system:serviceaccount:ns:sa",
                &[
                    "system:serviceaccounts",
                    "system:serviceaccounts:ns",
                    "system:authenticated",
                ],
            ),
            (
                "system:unauthenticated named suppresses system:authenticated",
                &[
                    ("Impersonate-User", "bob"),
                    ("Impersonate-Group", "system:unauthenticated"),
                ],
                "bob",
                &["system:unauthenticated"],
            ),
            (
                "anonymous gets system:unauthenticated",
                &[("Impersonate-User", "system:anonymous")],
                "system:anonymous",
                &["system:unauthenticated"],
            ),
        ];
        for (name, pairs, username, groups) in cases {
            let requests = impersonation_requests(&headers(pairs)).expect(name);
            let user = impersonated_user(&requests);
            assert_eq!(user.username, username, "{name}");
            assert_eq!(user.groups, groups, "{name}");
        }
    }

    #[test]
    fn each_request_is_an_impersonate_check_on_upstreams_resource() {
        let cases = [
            (
                Impersonation::User("bob".into()),
                ["", "", "users", "", "bob"],
                r#"users "bob" is forbidden: User "eve" cannot impersonate resource "users" in API group "" at the cluster scope"#,
            ),
            (
                Impersonation::ServiceAccount {
                    namespace: "ns".into(),
                    name: "sa".into(),
                },
                ["ns", "", "serviceaccounts", "", "sa"],
                r#"serviceaccounts "sa" is forbidden: User "eve" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ns""#,
            ),
            (
                Impersonation::Group("devs".into()),
                ["", "", "groups", "", "devs"],
                r#"groups "devs" is forbidden: User "eve" cannot impersonate resource "groups" in API group "" at the cluster scope"#,
            ),
            (
                Impersonation::Uid("u".into()),
                ["", "authentication.k8s.io", "uids", "", "u"],
                r#"uids.authentication.k8s.io "u" is forbidden: User "eve" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope"#,
            ),
            (
                Impersonation::Extra {
                    key: "scopes".into(),
                    value: "v".into(),
                },
                ["", "authentication.k8s.io", "userextras", "scopes", "v"],
                r#"userextras.authentication.k8s.io "v" is forbidden: User "eve" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope"#,
            ),
        ];
        let eve = UserInfo {
            username: "eve".into(),
            ..UserInfo::default()
        };
        for (request, resource, message) in cases {
            let attrs = request.attributes();
            assert_eq!(attrs.verb, "impersonate");
            assert_eq!(attrs.resource, Some(resource.map(str::to_owned)));
            assert_eq!(attrs.forbidden(&eve, "").message, message);
        }
    }
}
