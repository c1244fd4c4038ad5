//! Request paths parsed into what they address (group, version, namespace, resource, name, subresource), as upstream's `RequestInfoFactory`.

/// What a request path addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/healthz`, `/livez`, `/readyz` (and their `/...` sub-checks).
    Health,
    /// `/version`.
    Version,
    /// `/metrics`: the API server's Prometheus metrics.
    Metrics,
    /// `/api`: the core API versions.
    CoreVersions,
    /// `/apis`: every API group.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`: the resources of a group version.
    Resources {
        /// API group (empty for core).
        group: String,
        /// API version.
        version: String,
    },
    /// `/openapi/v3`: the index of OpenAPI v3 documents.
    OpenApiV3Index,
    /// `/openapi/v3/{path}`: one group-version's document, e.g. `apis/apps/v1`.
    OpenApiV3(String),
    /// `/openapi/v2`: the Swagger 2.0 document of every served kind.
    OpenApiV2,
    /// A resource request.
    Resource(ResourceRequest),
    /// Anything else (404).
    Unknown,
}

/// A request for a resource, a named object or a subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceRequest {
    /// API group (empty for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace from the path (`/namespaces/{ns}/...`), if any.
    pub namespace: Option<String>,
    /// Plural resource name.
    pub resource: String,
    /// Object name, if the path names one.
    pub name: Option<String>,
    /// Subresource, if any.
    pub subresource: Option<String>,
    /// Whether the legacy `/watch/` prefix was used.
    pub watch_prefix: bool,
}

/// Subresources of namespaces that are not namespaced resources (`/namespaces/{ns}/status`).
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// Parses a request path.
pub fn parse(path: &str) -> Route {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    match parts.as_slice() {
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["version"] => Route::Version,
        ["metrics"] => Route::Metrics,
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3Index,
        ["openapi", "v3", rest @ ..] => Route::OpenApiV3(rest.join("/")),
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_owned()),
        ["api", version] => Route::Resources {
            group: String::new(),
            version: (*version).to_owned(),
        },
        ["apis", group, version] => Route::Resources {
            group: (*group).to_owned(),
            version: (*version).to_owned(),
        },
        ["api", version, rest @ ..] => resource(String::new(), version, rest),
        ["apis", group, version, rest @ ..] => resource((*group).to_owned(), version, rest),
        _ => Route::Unknown,
    }
}

fn resource(group: String, version: &str, rest: &[&str]) -> Route {
    let mut rest = rest;
    let mut watch_prefix = false;
    if let ["watch", tail @ ..] = rest {
        watch_prefix = true;
        rest = tail;
    }
    let mut req = ResourceRequest {
        group,
        version: version.to_owned(),
        watch_prefix,
        ..Default::default()
    };
    // `/namespaces/{ns}/{resource}...` is a namespaced resource unless the third segment is
    // one of the namespace's own subresources.
    if let ["namespaces", ns, tail @ ..] = rest
        && let Some(first) = tail.first()
        && !NAMESPACE_SUBRESOURCES.contains(first)
    {
        req.namespace = Some((*ns).to_owned());
        rest = tail;
    }
    match rest {
        [resource] => req.resource = (*resource).to_owned(),
        [resource, name] => {
            req.resource = (*resource).to_owned();
            req.name = Some((*name).to_owned());
        }
        [resource, name, sub] => {
            req.resource = (*resource).to_owned();
            req.name = Some((*name).to_owned());
            req.subresource = Some((*sub).to_owned());
        }
        // `.../{name}/proxy/{path...}`: the path goes to the proxied object.
        [resource, name, "proxy", _, ..] => {
            req.resource = (*resource).to_owned();
            req.name = Some((*name).to_owned());
            req.subresource = Some("proxy".to_owned());
        }
        _ => return Route::Unknown,
    }
    Route::Resource(req)
}

/// Refuses a namespace or name that cannot be a path segment, as upstream's
/// `path.IsValidPathSegmentName` in the store's key functions: `.` and `..`, and anything with
/// `/` or `%` (the path is not percent-decoded here, so an encoded `/` or `.` arrives as `%`).
/// 400 `Name parameter invalid: ...` (or `Namespace parameter invalid: ...`).
pub fn validate_segments(r: &ResourceRequest) -> Result<(), crate::error::ApiError> {
    for (what, value) in [("Namespace", &r.namespace), ("Name", &r.name)] {
        let Some(value) = value else {
            continue;
        };
        let mut why = Vec::new();
        if value == "." || value == ".." {
            why.push(format!("may not be '{value}'"));
        }
        for bad in ["/", "%"] {
            if value.contains(bad) {
                why.push(format!("may not contain '{bad}'"));
            }
        }
        if !why.is_empty() {
            return Err(crate::error::ApiError::bad_request(format!(
                "{what} parameter invalid: {value:?}: {}",
                why.join(";")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(
        group: &str,
        ns: Option<&str>,
        resource: &str,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Route {
        Route::Resource(ResourceRequest {
            group: group.to_owned(),
            version: "v1".to_owned(),
            namespace: ns.map(str::to_owned),
            resource: resource.to_owned(),
            name: name.map(str::to_owned),
            subresource: sub.map(str::to_owned),
            watch_prefix: false,
        })
    }

    #[test]
    fn paths() {
        let cases = [
            ("healthz", "/healthz", Route::Health),
            ("readyz check", "/readyz/ping", Route::Health),
            ("version", "/version", Route::Version),
            ("metrics", "/metrics", Route::Metrics),
            ("core versions", "/api", Route::CoreVersions),
            ("groups", "/apis", Route::Groups),
            ("group", "/apis/apps", Route::Group("apps".to_owned())),
            (
                "core resources",
                "/api/v1",
                Route::Resources {
                    group: String::new(),
                    version: "v1".to_owned(),
                },
            ),
            (
                "all pods",
                "/api/v1/pods",
                res("", None, "pods", None, None),
            ),
            (
                "namespaced pods",
                "/api/v1/namespaces/ns/pods",
                res("", Some("ns"), "pods", None, None),
            ),
            (
                "one pod",
                "/api/v1/namespaces/ns/pods/p",
                res("", Some("ns"), "pods", Some("p"), None),
            ),
            (
                "pod status",
                "/api/v1/namespaces/ns/pods/p/status",
                res("", Some("ns"), "pods", Some("p"), Some("status")),
            ),
            (
                "namespace",
                "/api/v1/namespaces/ns",
                res("", None, "namespaces", Some("ns"), None),
            ),
            (
                "namespace finalize",
                "/api/v1/namespaces/ns/finalize",
                res("", None, "namespaces", Some("ns"), Some("finalize")),
            ),
            (
                "deployment scale",
                "/apis/apps/v1/namespaces/ns/deployments/d/scale",
                res("apps", Some("ns"), "deployments", Some("d"), Some("scale")),
            ),
            (
                "too deep",
                "/api/v1/namespaces/ns/pods/p/status/x",
                Route::Unknown,
            ),
            (
                "pod proxy with a path",
                "/api/v1/namespaces/ns/pods/p/proxy/metrics/x",
                res("", Some("ns"), "pods", Some("p"), Some("proxy")),
            ),
            (
                "node proxy",
                "/api/v1/nodes/n/proxy/",
                res("", None, "nodes", Some("n"), Some("proxy")),
            ),
            ("root", "/", Route::Unknown),
            ("openapi index", "/openapi/v3", Route::OpenApiV3Index),
            (
                "openapi document",
                "/openapi/v3/apis/apps/v1",
                Route::OpenApiV3("apis/apps/v1".to_owned()),
            ),
            ("openapi v2", "/openapi/v2", Route::OpenApiV2),
            (
                "openapi v2 has no documents",
                "/openapi/v2/apis",
                Route::Unknown,
            ),
        ];
        for (name, path, want) in cases {
            assert_eq!(parse(path), want, "case {name}");
        }
    }

    #[test]
    fn segments_that_are_not_names_are_refused() {
        let cases = [
            ("plain", "/api/v1/namespaces/ns/pods/p", None),
            ("dot name", "/api/v1/namespaces/ns/pods/.", Some(400)),
            ("dot-dot name", "/api/v1/namespaces/ns/pods/..", Some(400)),
            (
                "dot-dot namespace",
                "/api/v1/namespaces/../pods/p",
                Some(400),
            ),
            (
                "encoded slash",
                "/api/v1/namespaces/ns/pods/a%2Fb",
                Some(400),
            ),
            (
                "encoded dot-dot",
                "/api/v1/namespaces/%2e%2e/pods",
                Some(400),
            ),
            ("dots inside", "/api/v1/namespaces/ns/pods/a..b", None),
        ];
        for (name, path, want) in cases {
            let Route::Resource(r) = parse(path) else {
                panic!("case {name}: not a resource");
            };
            assert_eq!(
                validate_segments(&r).err().map(|e| e.code),
                want,
                "case {name}"
            );
        }
    }

    #[test]
    fn legacy_watch_prefix() {
        let Route::Resource(r) = parse("/api/v1/watch/namespaces/ns/pods") else {
            panic!("not a resource");
        };
        assert!(r.watch_prefix);
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(r.resource, "pods");
    }
}
