//! Verb handlers: a resource request (method, path, query, body) mapped onto the registry and rendered as JSON or a watch stream.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, HeaderValue, WARNING};
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::auth::user::UserInfo;
use crate::error::GroupKind;
use crate::error::{ApiError, Result};
use crate::http::body::{self, decode_body, decode_object};
use crate::http::negotiate::Representation;
use crate::http::query::Query;
use crate::http::request_info::ResourceRequest;
use crate::http::{AppState, json_response};
use crate::registry::DefRef;
use crate::registry::delete::{DeleteOutcome, success_status};
use crate::registry::options::{WriteOptions, WriteOutcome};
use crate::registry::patch::PatchType;
use crate::registry::resource::{ResourceDef, Verbs};
use crate::registry::subresource::Subresource;
use crate::registry::update::Target;
use crate::validation::FieldError;

/// Handles one resource request; every answer about a deprecated resource carries its
/// deprecation `Warning`.
pub async fn handle(state: &Arc<AppState>, r: ResourceRequest, req: Request) -> Result<Response> {
    crate::http::request_info::validate_segments(&r)?;
    let def = state
        .registry
        .lookup(&r.group, &r.version, &r.resource)
        .ok_or_else(ApiError::path_not_found)?;
    let answer = serve(state, def.clone(), r, req).await;
    let Some(warning) = &def.deprecation else {
        return answer;
    };
    let mut response = answer.unwrap_or_else(IntoResponse::into_response);
    add_warning(&mut response, warning);
    Ok(response)
}

/// Serves one request to `def`.
async fn serve(
    state: &Arc<AppState>,
    served: DefRef,
    r: ResourceRequest,
    req: Request,
) -> Result<Response> {
    let registry = &state.registry;
    let def: &ResourceDef = &served;
    // Namespaced resources are addressed under /namespaces/{ns}/ (or across all namespaces
    // for collection reads); cluster-scoped ones never are.
    if !def.namespaced && r.namespace.is_some() {
        return Err(ApiError::path_not_found());
    }
    let method = req.method().clone();
    if def.namespaced && r.namespace.is_none() {
        let all_namespaces_read =
            r.name.is_none() && (method == Method::GET || method == Method::DELETE);
        if !all_namespaces_read {
            return Err(ApiError::path_not_found());
        }
    }
    let sub = match r.subresource.as_deref() {
        None => None,
        Some(name) => Some(
            def.subresources
                .iter()
                .copied()
                .find(|s| s.name() == name)
                .ok_or_else(ApiError::path_not_found)?,
        ),
    };
    let query = Query::parse(req.uri().query())?;
    let headers = req.headers().clone();
    // Set by the authentication filter; absent only when the router runs without it.
    let user = req.extensions().get::<Arc<UserInfo>>().cloned();
    let media = body::media_type(&headers);
    let ns = r.namespace.clone().unwrap_or_default();
    let gr = def.group_resource();
    let limit = state.max_body_bytes;
    let read_body = |req: Request| async move {
        let (parts, body) = req.into_parts();
        body::read(body, &parts.headers, limit).await
    };

    // A resource serves only its verbs: the others are 405, as upstream, which installs no
    // handler for them. A collection GET is a list or a watch, known once the query is read.
    if sub.is_none()
        && let Some(verb) = main_verb(&method, r.name.is_some())
        && !def.serves(verb)
    {
        return Err(method_not_allowed(def, &method));
    }
    match (&method, r.name.as_deref(), sub) {
        (_, Some(name), Some(sub)) if sub.is_connect() => {
            if !sub.verbs().contains(&connect_verb(&method)) {
                return Err(method_not_allowed(def, &method));
            }
            // Only pods declare `log` (a custom resource cannot): it streams container logs.
            if sub == Subresource::Log {
                let opts = crate::registry::pod_log::PodLogOptions::from_query(|k| query.get(k))?;
                let answer = registry
                    .pod_log(&ns, name, opts, state.watch.shutdown.clone())
                    .await?;
                return Ok(log_response(answer));
            }
            let answer = registry.connect(def, &ns, name, sub).await?;
            Ok(json_response(StatusCode::OK, &answer))
        }
        (&Method::GET, None, None) => {
            let opts = query.list_options(def, r.watch_prefix)?;
            if opts.watch && !def.serves(Verbs::WATCH) {
                return Err(method_not_allowed(def, &method));
            }
            let repr = Representation::negotiate(def, &headers, query.get("includeObject"))?;
            if opts.watch {
                let rx = registry
                    .watch(
                        served.clone(),
                        r.namespace.clone(),
                        opts,
                        state.watch.clone(),
                    )
                    .await?;
                return Ok(watch_response(rx, repr, served));
            }
            let list = registry.list(def, r.namespace.as_deref(), &opts).await?;
            Ok(repr.render(def, StatusCode::OK, &list))
        }
        (&Method::POST, None, None) => {
            let repr = Representation::negotiate(def, &headers, query.get("includeObject"))?;
            let mut opts = write_options(&query, &headers, None, user)?;
            let bytes = read_body(req).await?;
            let (obj, findings) = decode_body(&bytes, &media)?;
            opts.decoding = findings;
            let outcome = registry.create(def, &ns, obj, &opts).await?;
            Ok(written(repr, def, StatusCode::CREATED, &outcome))
        }
        (&Method::DELETE, None, None) => {
            let list_opts = query.list_options(def, false)?;
            let mut opts = query.delete_options()?;
            let bytes = read_body(req).await?;
            if !bytes.is_empty() {
                opts.merge_body(&decode_object(&bytes, &media)?)?;
            }
            let list = registry
                .delete_collection(def, r.namespace.as_deref(), &list_opts, &opts)
                .await?;
            Ok(json_response(StatusCode::OK, &list))
        }
        (&Method::GET, Some(name), None | Some(Subresource::Status | Subresource::Approval)) => {
            let repr = Representation::negotiate(def, &headers, query.get("includeObject"))?;
            let obj = registry.get(def, &ns, name).await?;
            Ok(repr.render(def, StatusCode::OK, &obj))
        }
        (&Method::PUT, Some(name), None | Some(Subresource::Status | Subresource::Approval)) => {
            let repr = Representation::negotiate(def, &headers, query.get("includeObject"))?;
            let target = write_target(sub);
            let mut opts = write_options(&query, &headers, None, user)?;
            let bytes = read_body(req).await?;
            let (obj, findings) = decode_body(&bytes, &media)?;
            opts.decoding = findings;
            let outcome = registry.update(def, &ns, name, obj, target, &opts).await?;
            let code = if outcome.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(written(repr, def, code, &outcome))
        }
        (&Method::PATCH, Some(name), None | Some(Subresource::Status | Subresource::Approval)) => {
            let repr = Representation::negotiate(def, &headers, query.get("includeObject"))?;
            let target = write_target(sub);
            let patch_type = patch_type(&headers, def)?;
            let opts = write_options(&query, &headers, Some(patch_type), user)?;
            let bytes = read_body(req).await?;
            let outcome = registry
                .patch(def, &ns, name, patch_type, &bytes, target, &opts)
                .await?;
            let code = if outcome.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(written(repr, def, code, &outcome))
        }
        (&Method::DELETE, Some(name), None) => {
            let mut opts = query.delete_options()?;
            let bytes = read_body(req).await?;
            if !bytes.is_empty() {
                opts.merge_body(&decode_object(&bytes, &media)?)?;
            }
            let outcome = registry.delete(def, &ns, name, &opts).await?;
            let warning = def
                .strategy
                .orphan_warning()
                .filter(|_| opts.propagation_policy.is_none() && opts.orphan_dependents.is_none());
            let render = |obj: Value| {
                if def.strategy.returns_deleted_object() {
                    obj
                } else {
                    success_status(gr, &obj)
                }
            };
            let mut response = match outcome {
                DeleteOutcome::Deleted(obj) | DeleteOutcome::AlreadyDeleting(obj) => {
                    json_response(StatusCode::OK, &render(obj))
                }
                DeleteOutcome::Pending(obj) => {
                    // Upstream answers 202 only to the legacy orphanDependents=false.
                    let code = if opts.orphan_dependents == Some(false) {
                        StatusCode::ACCEPTED
                    } else {
                        StatusCode::OK
                    };
                    json_response(code, &obj)
                }
            };
            if let Some(warning) = warning {
                add_warning(&mut response, warning);
            }
            Ok(response)
        }
        (&Method::GET, Some(name), Some(Subresource::Scale)) => {
            let scale = registry.get_scale(def, &ns, name).await?;
            Ok(json_response(StatusCode::OK, &scale))
        }
        (&Method::PUT, Some(name), Some(Subresource::Scale)) => {
            let opts = write_options(&query, &headers, None, user)?;
            let bytes = read_body(req).await?;
            let scale = decode_object(&bytes, &media)?;
            let scale = registry.update_scale(def, &ns, name, scale, &opts).await?;
            Ok(json_response(StatusCode::OK, &scale))
        }
        (&Method::PATCH, Some(name), Some(Subresource::Scale)) => {
            let patch_type = patch_type(&headers, def)?;
            let opts = write_options(&query, &headers, Some(patch_type), user)?;
            let bytes = read_body(req).await?;
            let scale = registry
                .patch_scale(def, &ns, name, patch_type, &bytes, &opts)
                .await?;
            Ok(json_response(StatusCode::OK, &scale))
        }
        (&Method::POST, Some(name), Some(Subresource::Binding)) => {
            let dry_run = query.dry_run()?;
            let bytes = read_body(req).await?;
            let binding = decode_object(&bytes, &media)?;
            registry.bind(def, &ns, name, &binding, dry_run).await?;
            Ok(json_response(StatusCode::CREATED, &created_status()))
        }
        (&Method::POST, Some(name), Some(Subresource::Eviction)) => {
            let dry_run = query.dry_run()?;
            let bytes = read_body(req).await?;
            let eviction = decode_object(&bytes, &media)?;
            registry.evict(def, &ns, name, &eviction, dry_run).await?;
            Ok(json_response(StatusCode::CREATED, &created_status()))
        }
        (&Method::POST, Some(name), Some(Subresource::Token)) => {
            let dry_run = query.dry_run()?;
            let bytes = read_body(req).await?;
            let request = decode_object(&bytes, &media)?;
            let answer = registry
                .create_token(def, &ns, name, request, dry_run)
                .await?;
            Ok(json_response(StatusCode::CREATED, &answer))
        }
        (&Method::PUT, Some(name), Some(Subresource::Finalize)) => {
            let dry_run = query.dry_run()?;
            let bytes = read_body(req).await?;
            let obj = decode_object(&bytes, &media)?;
            let ns_obj = registry.finalize_namespace(def, name, obj, dry_run).await?;
            Ok(json_response(StatusCode::OK, &ns_obj))
        }
        _ => Err(method_not_allowed(def, &method)),
    }
}

/// The write options of a request: the query's, with the field manager defaulted from the
/// `User-Agent` (its part before the first `/`, as upstream) except for apply, which must
/// name one; `force` is only for apply.
fn write_options(
    query: &Query,
    headers: &http::HeaderMap,
    patch: Option<PatchType>,
    user: Option<Arc<UserInfo>>,
) -> Result<WriteOptions> {
    let mut opts = query.write_options()?;
    opts.user = user;
    let patch_options = GroupKind {
        group: "meta.k8s.io",
        kind: "PatchOptions",
    };
    if patch == Some(PatchType::Apply) {
        if opts.field_manager.is_none() {
            return Err(ApiError::invalid(
                patch_options,
                "",
                &[FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            ));
        }
        return Ok(opts);
    }
    if query.get("force").is_some() && patch.is_some() {
        return Err(ApiError::invalid(
            patch_options,
            "",
            &[FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            )],
        ));
    }
    if opts.field_manager.is_none() {
        opts.field_manager = headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .and_then(|ua| ua.split('/').next())
            .map(|m| m.chars().take(128).collect::<String>())
            .filter(|m| !m.is_empty());
    }
    Ok(opts)
}

/// The part of the object a `PUT` or `PATCH` of the main resource or a status-like
/// subresource writes.
fn write_target(sub: Option<Subresource>) -> Target {
    match sub {
        Some(Subresource::Status) => Target::Status,
        Some(Subresource::Approval) => Target::Approval,
        _ => Target::Main,
    }
}

/// A written object, with a `Warning` header per warning (`299 - "text"`, as upstream).
fn written(
    repr: Representation,
    def: &ResourceDef,
    code: StatusCode,
    outcome: &WriteOutcome,
) -> Response {
    let mut response = repr.render(def, code, &outcome.object);
    for warning in &outcome.warnings {
        add_warning(&mut response, warning);
    }
    response
}

/// Appends a `Warning` header (`299 - "text"`, as upstream).
fn add_warning(response: &mut Response, warning: &str) {
    let escaped = warning.replace('\\', "\\\\").replace('"', "\\\"");
    if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
        response.headers_mut().append(WARNING, v);
    }
}

/// The discovery verb of a request to a connect subresource (upstream's
/// `RequestInfoFactory` mapping of methods to verbs).
fn connect_verb(method: &Method) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// The `Status` a successful binding or eviction answers with.
fn created_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

fn patch_type(headers: &http::HeaderMap, def: &ResourceDef) -> Result<PatchType> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match PatchType::from_content_type(content_type) {
        // Custom resources have no Go struct tags to merge by: upstream answers 415 and lists
        // the patch types it does serve.
        Some(PatchType::StrategicMerge) if def.is_custom() => {
            let served: Vec<&str> = PatchType::MEDIA_TYPES
                .iter()
                .copied()
                .filter(|m| PatchType::from_content_type(m) != Some(PatchType::StrategicMerge))
                .collect();
            Err(ApiError::unsupported_media_type(content_type, &served))
        }
        Some(t) => Ok(t),
        None => Err(ApiError::unsupported_media_type(
            content_type,
            &PatchType::MEDIA_TYPES,
        )),
    }
}

/// The verb of a request to a resource's main paths (collection or `object`), a collection
/// GET counting as a list; `None` for methods no verb maps to.
fn main_verb(method: &Method, object: bool) -> Option<Verbs> {
    Some(match (method, object) {
        (&Method::GET, false) => Verbs::LIST,
        (&Method::POST, false) => Verbs::CREATE,
        (&Method::DELETE, false) => Verbs::DELETE_COLLECTION,
        (&Method::GET, true) => Verbs::GET,
        (&Method::PUT, true) => Verbs::UPDATE,
        (&Method::PATCH, true) => Verbs::PATCH,
        (&Method::DELETE, true) => Verbs::DELETE,
        _ => return None,
    })
}

fn method_not_allowed(def: &ResourceDef, method: &Method) -> ApiError {
    let action = match *method {
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "this method",
    };
    ApiError::method_not_allowed(def.group_resource(), action)
}

/// Streams encoded watch events, one chunk per event, flushed as they come, in the
/// negotiated representation.
/// A `pods/log` answer: plain text, streamed when following.
fn log_response(answer: crate::registry::pod_log::LogResponse) -> Response {
    use futures::StreamExt;
    let first = futures::stream::once(async move { answer.first });
    let body = match answer.follow {
        Some(rest) => Body::from_stream(first.chain(rest).map(Ok::<_, Infallible>)),
        None => Body::from_stream(first.map(Ok::<_, Infallible>)),
    };
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

fn watch_response(
    rx: tokio::sync::mpsc::Receiver<bytes::Bytes>,
    repr: Representation,
    def: DefRef,
) -> Response {
    let content_type = repr.watch_content_type();
    let stream = futures::stream::unfold(rx, move |mut rx| {
        let def = def.clone();
        async move {
            let line = rx.recv().await?;
            Some((Ok::<_, Infallible>(repr.render_watch_line(&def, line)), rx))
        }
    });
    let mut response = Response::new(Body::from_stream(stream));
    if let Ok(ct) = HeaderValue::from_str(&content_type) {
        response.headers_mut().insert(CONTENT_TYPE, ct);
    }
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::BodyExt;
    use tokio_util::sync::CancellationToken;
    use tower::ServiceExt;

    use super::*;
    use crate::http::{AppState, router};
    use crate::registry::Registry;
    use crate::registry::resource::fixtures;
    use crate::registry::watch::WatchSettings;
    use crate::storage::memory::MemoryStorage;

    const TOKEN: &str = "t0ken";

    fn state() -> Arc<AppState> {
        Arc::new(AppState {
            registry: Arc::new(Registry::with_resources(
                Arc::new(MemoryStorage::new()),
                fixtures::ALL,
            )),
            token: TOKEN.to_owned(),
            client_certs: None,
            metrics: Default::default(),
            limits: crate::http::limits::RequestLimits::unlimited(),
            max_body_bytes: 1 << 20,
            watch: WatchSettings {
                bookmark_interval: Duration::from_secs(60),
                shutdown: CancellationToken::new(),
            },
            server_address: "127.0.0.1:6443".to_owned(),
        })
    }

    async fn send(state: &Arc<AppState>, method: Method, uri: &str, body: &str) -> (u16, Value) {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .header(CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_owned()))
            .expect("request");
        let response = router(Arc::clone(state))
            .oneshot(req)
            .await
            .expect("answer");
        let code = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    #[tokio::test]
    async fn verbs_a_resource_does_not_serve_are_method_not_allowed() {
        let state = state();
        let cs = "/api/v1/componentstatuses";
        let reviews = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
        let review = r#"{"spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}}"#;
        struct Case {
            name: &'static str,
            method: Method,
            uri: String,
            body: &'static str,
            code: u16,
        }
        let cases = [
            Case {
                name: "read-only list",
                method: Method::GET,
                uri: cs.to_owned(),
                body: "",
                code: 200,
            },
            Case {
                name: "read-only get of a missing object",
                method: Method::GET,
                uri: format!("{cs}/etcd-0"),
                body: "",
                code: 404,
            },
            Case {
                name: "read-only watch",
                method: Method::GET,
                uri: format!("{cs}?watch=true"),
                body: "",
                code: 405,
            },
            Case {
                name: "read-only create",
                method: Method::POST,
                uri: cs.to_owned(),
                body: r#"{"metadata": {"name": "etcd-0"}}"#,
                code: 405,
            },
            Case {
                name: "read-only delete",
                method: Method::DELETE,
                uri: format!("{cs}/etcd-0"),
                body: "",
                code: 405,
            },
            Case {
                name: "read-only delete collection",
                method: Method::DELETE,
                uri: cs.to_owned(),
                body: "",
                code: 405,
            },
            Case {
                name: "create-only list",
                method: Method::GET,
                uri: reviews.to_owned(),
                body: "",
                code: 405,
            },
            Case {
                name: "create-only update",
                method: Method::PUT,
                uri: format!("{reviews}/x"),
                body: review,
                code: 405,
            },
            Case {
                name: "create-only create",
                method: Method::POST,
                uri: reviews.to_owned(),
                body: review,
                code: 201,
            },
        ];
        for case in cases {
            let (code, body) = send(&state, case.method, &case.uri, case.body).await;
            assert_eq!(code, case.code, "{}: {body}", case.name);
            if code == 405 {
                assert_eq!(body["reason"], "MethodNotAllowed", "{}", case.name);
            }
        }
        let (_, created) = send(&state, Method::POST, reviews, review).await;
        assert_eq!(created["status"]["allowed"], true);
    }
}
