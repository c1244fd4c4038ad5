//! Kubernetes `Status` errors: every failure the API server answers, with upstream code, reason, message and details.
//!
//! The constructors mirror apimachinery's `k8s.io/apimachinery/pkg/api/errors` (`NewNotFound`,
//! `NewConflict`, `NewInvalid`, ...): same HTTP code, same `reason`, same message wording, so
//! that clients (client-go's `errors.IsConflict`, kube-rs' `ErrorResponse`) behave as against a
//! real cluster.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderValue};
use serde_json::{Map, Value, json};

use crate::storage;
use crate::validation::FieldError;

/// The result type of request handling: any failure becomes a `Status` response.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// Upstream's optimistic-lock message (`registry.OptimisticLockErrorMsg`).
pub const OPTIMISTIC_LOCK_MESSAGE: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// A group and a resource (`deployments.apps`), as used in error messages and details.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupResource<'a> {
    /// The API group; empty for the core group.
    pub group: &'a str,
    /// The plural resource name, e.g. `pods`.
    pub resource: &'a str,
}

impl std::fmt::Display for GroupResource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// A group and a kind (`Deployment.apps`), as used in `Invalid` errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupKind<'a> {
    /// The API group; empty for the core group.
    pub group: &'a str,
    /// The kind, e.g. `Pod`.
    pub kind: &'a str,
}

impl std::fmt::Display for GroupKind<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

/// One entry of `details.causes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCause {
    /// The machine-readable cause (`FieldValueInvalid`, `NamespaceTerminating`, ...); the JSON
    /// field is `reason`.
    pub reason: String,
    /// A human-readable description.
    pub message: String,
    /// The field path the cause refers to, if any.
    pub field: String,
}

/// `Status.details`: which object the error is about, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusDetails {
    /// The object's name.
    pub name: String,
    /// The object's API group.
    pub group: String,
    /// The kind or (for most errors, as upstream) the plural resource.
    pub kind: String,
    /// The object's UID, when known.
    pub uid: String,
    /// Individual causes.
    pub causes: Vec<StatusCause>,
    /// Seconds the client should wait before retrying (429, 504).
    pub retry_after_seconds: Option<i32>,
}

/// An API error: rendered as a Kubernetes `Status` with `status: Failure`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// The HTTP status code, also `Status.code`.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, when the error is about an object.
    pub details: Option<Box<StatusDetails>>,
    /// `Status.metadata.continue`: a fresh token for an expired `continue` (410).
    pub continue_token: Option<String>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            continue_token: None,
        }
    }

    fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// An error with a given code, reason and message, as a `Status` another party (an
    /// admission webhook) answered.
    pub fn from_status(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(code, reason, message)
    }

    /// 404 NotFound: `pods "x" not found` (`NewNotFound`).
    pub fn not_found(gr: GroupResource<'_>, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{gr} \"{name}\" not found")).with_details(
            StatusDetails {
                name: name.to_owned(),
                group: gr.group.to_owned(),
                kind: gr.resource.to_owned(),
                ..Default::default()
            },
        )
    }

    /// 404 NotFound for a path that names no resource (`the server could not find the
    /// requested resource`).
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(StatusDetails::default())
    }

    /// 409 AlreadyExists: `pods "x" already exists` (`NewAlreadyExists`).
    pub fn already_exists(gr: GroupResource<'_>, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{gr} \"{name}\" already exists"),
        )
        .with_details(StatusDetails {
            name: name.to_owned(),
            group: gr.group.to_owned(),
            kind: gr.resource.to_owned(),
            ..Default::default()
        })
    }

    /// 409 Conflict: `Operation cannot be fulfilled on pods "x": {why}` (`NewConflict`).
    pub fn conflict(gr: GroupResource<'_>, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {gr} \"{name}\": {why}"),
        )
        .with_details(StatusDetails {
            name: name.to_owned(),
            group: gr.group.to_owned(),
            kind: gr.resource.to_owned(),
            ..Default::default()
        })
    }

    /// 409 Conflict with upstream's optimistic-lock message (a stale `resourceVersion`).
    pub fn stale(gr: GroupResource<'_>, name: &str) -> Self {
        Self::conflict(gr, name, OPTIMISTIC_LOCK_MESSAGE)
    }

    /// 422 Invalid: `Pod "x" is invalid: field: Invalid value: ...` (`NewInvalid`).
    pub fn invalid(gk: GroupKind<'_>, name: &str, errors: &[FieldError]) -> Self {
        let message = match errors {
            [] => format!("{gk} \"{name}\" is invalid"),
            [one] => format!("{gk} \"{name}\" is invalid: {one}"),
            many => {
                let joined: Vec<String> = many.iter().map(ToString::to_string).collect();
                format!("{gk} \"{name}\" is invalid: [{}]", joined.join(", "))
            }
        };
        Self::new(422, "Invalid", message).with_details(StatusDetails {
            name: name.to_owned(),
            group: gk.group.to_owned(),
            kind: gk.kind.to_owned(),
            causes: errors
                .iter()
                .map(|e| StatusCause {
                    reason: e.kind.cause().to_owned(),
                    message: e.body(),
                    field: e.field.clone(),
                })
                .collect(),
            ..Default::default()
        })
    }

    /// 400 BadRequest (`NewBadRequest`).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized, for requests without the bearer token.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden: `pods "x" is forbidden: {why}` (`NewForbidden`).
    pub fn forbidden(gr: GroupResource<'_>, name: &str, why: &str) -> Self {
        let message = if name.is_empty() {
            format!("{gr} is forbidden: {why}")
        } else {
            format!("{gr} \"{name}\" is forbidden: {why}")
        };
        Self::new(403, "Forbidden", message).with_details(StatusDetails {
            name: name.to_owned(),
            group: gr.group.to_owned(),
            kind: gr.resource.to_owned(),
            ..Default::default()
        })
    }

    /// 405 MethodNotAllowed (`NewMethodNotSupported`).
    pub fn method_not_allowed(gr: GroupResource<'_>, action: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "{action} is not supported on resources of kind {gr:?}",
                gr = gr.to_string()
            ),
        )
        .with_details(StatusDetails {
            group: gr.group.to_owned(),
            kind: gr.resource.to_owned(),
            ..Default::default()
        })
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 410 Expired (`NewResourceExpired`): a too-old `resourceVersion` or `continue`.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge (`NewRequestEntityTooLargeError`).
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 413 RequestEntityTooLarge for an object the store refuses to hold (etcd's
    /// `etcdserver: request is too large`, which kube-apiserver answers with 413).
    pub fn too_large_to_store() -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            "etcdserver: request is too large",
        )
    }

    /// 504 Timeout: `Timeout: {message}` (`NewTimeoutError` with no retry delay).
    pub fn timeout(message: &str) -> Self {
        Self::new(504, "Timeout", format!("Timeout: {message}"))
            .with_details(StatusDetails::default())
    }

    /// 415 UnsupportedMediaType (`NewUnsupportedMediaTypeError`).
    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({content_type:?}) - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 429 TooManyRequests (`NewTooManyRequests`).
    pub fn too_many_requests(message: impl Into<String>, retry_after: i32) -> Self {
        Self::new(429, "TooManyRequests", message).with_details(StatusDetails {
            retry_after_seconds: Some(retry_after),
            ..Default::default()
        })
    }

    /// 500 InternalError (`NewInternalError`).
    pub fn internal(why: impl std::fmt::Display) -> Self {
        let why = why.to_string();
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {why}"),
        )
        .with_details(StatusDetails {
            causes: vec![StatusCause {
                reason: String::new(),
                message: why,
                field: String::new(),
            }],
            ..Default::default()
        })
    }

    /// 504 Timeout for a `resourceVersion` newer than the store's (`NewTooLargeResourceVersionError`).
    pub fn too_large_resource_version(requested: i64, current: i64) -> Self {
        Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        )
        .with_details(StatusDetails {
            causes: vec![StatusCause {
                reason: "ResourceVersionTooLarge".to_owned(),
                message: "Too large resource version".to_owned(),
                field: String::new(),
            }],
            retry_after_seconds: Some(1),
            ..Default::default()
        })
    }

    /// Replaces the message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Adds a cause to the details (creating them if needed).
    pub fn with_cause(mut self, reason: &str, message: impl Into<String>, field: &str) -> Self {
        self.details
            .get_or_insert_with(Box::default)
            .causes
            .push(StatusCause {
                reason: reason.to_owned(),
                message: message.into(),
                field: field.to_owned(),
            });
        self
    }

    /// Maps a storage error about `name` to its API error, as upstream's `storeerr.Interpret*Error`.
    pub fn from_storage(err: storage::Error, gr: GroupResource<'_>, name: &str) -> Self {
        match err {
            storage::Error::AlreadyExists { .. } => Self::already_exists(gr, name),
            storage::Error::NotFound { .. } => Self::not_found(gr, name),
            storage::Error::Conflict { .. } => Self::stale(gr, name),
            storage::Error::Compacted {
                requested,
                compacted,
            } => Self::expired(format!(
                "too old resource version: {requested} ({compacted})"
            )),
            storage::Error::FutureRevision { requested, current } => {
                Self::too_large_resource_version(requested, current)
            }
            storage::Error::Backend(e) if e.is::<storage::size_limit::ValueTooLarge>() => {
                Self::too_large_to_store()
            }
            other => Self::internal(other),
        }
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut metadata = Map::new();
        if let Some(token) = &self.continue_token {
            metadata.insert("continue".to_owned(), Value::String(token.clone()));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": metadata,
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details_json(details);
        }
        status
    }
}

/// Renders `details` as upstream's `StatusDetails` JSON (empty fields omitted).
pub fn details_json(details: &StatusDetails) -> Value {
    let mut out = Map::new();
    for (key, value) in [
        ("name", &details.name),
        ("group", &details.group),
        ("kind", &details.kind),
        ("uid", &details.uid),
    ] {
        if !value.is_empty() {
            out.insert(key.to_owned(), Value::String(value.clone()));
        }
    }
    if !details.causes.is_empty() {
        let causes = details
            .causes
            .iter()
            .map(|c| {
                let mut cause = Map::new();
                for (key, value) in [
                    ("reason", &c.reason),
                    ("message", &c.message),
                    ("field", &c.field),
                ] {
                    if !value.is_empty() {
                        cause.insert(key.to_owned(), Value::String(value.clone()));
                    }
                }
                Value::Object(cause)
            })
            .collect();
        out.insert("causes".to_owned(), Value::Array(causes));
    }
    if let Some(retry) = details.retry_after_seconds {
        out.insert("retryAfterSeconds".to_owned(), Value::from(retry));
    }
    Value::Object(out)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        let mut response = (code, body).into_response();
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // As upstream, only a positive delay becomes a `Retry-After` header.
        if let Some(retry) = self
            .details
            .as_ref()
            .and_then(|d| d.retry_after_seconds)
            .filter(|r| *r > 0)
            && let Ok(value) = HeaderValue::from_str(&retry.to_string())
        {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::FieldError;

    #[test]
    fn conflict_uses_upstream_wording() {
        let err = ApiError::stale(
            GroupResource {
                group: "apps",
                resource: "deployments",
            },
            "web",
        );
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let status = err.to_status();
        assert_eq!(status["details"]["kind"], "deployments");
        assert_eq!(status["details"]["group"], "apps");
        assert_eq!(status["reason"], "Conflict");
    }

    #[test]
    fn invalid_aggregates_field_errors() {
        let errs = vec![
            FieldError::required("metadata.name", "name or generateName is required"),
            FieldError::invalid("spec.replicas", -1i64, "must be greater than or equal to 0"),
        ];
        let err = ApiError::invalid(
            GroupKind {
                group: "apps",
                kind: "Deployment",
            },
            "web",
            &errs,
        );
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "Deployment.apps \"web\" is invalid: [metadata.name: Required value: name or generateName is required, spec.replicas: Invalid value: -1: must be greater than or equal to 0]"
        );
        let status = err.to_status();
        assert_eq!(status["details"]["causes"][1]["field"], "spec.replicas");
        assert_eq!(
            status["details"]["causes"][1]["reason"],
            "FieldValueInvalid"
        );
        assert_eq!(
            status["details"]["causes"][0]["message"],
            "Required value: name or generateName is required"
        );
    }

    #[test]
    fn not_found_core_group_has_no_suffix() {
        let err = ApiError::not_found(
            GroupResource {
                group: "",
                resource: "pods",
            },
            "x",
        );
        assert_eq!(err.message, "pods \"x\" not found");
        assert_eq!(err.to_status()["details"].get("group"), None);
    }
}
