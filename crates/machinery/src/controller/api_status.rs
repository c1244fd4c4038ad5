//! Classifying API errors by the `Status` the server returned, as apimachinery's `api/errors`.
//!
//! Controllers branch on a few kinds of failure: a pod already gone (NotFound, ignored on
//! delete), a patch the server found invalid (ignored on release), a namespace being
//! terminated (creations will keep failing; no event). [`ApiStatus`] lets any error type that
//! wraps a `kube` error expose its [`Status`] so these predicates work on it.

use kube::core::Status;
use kube::core::response::{StatusCause, StatusDetails, StatusSummary, reason};

/// The cause type the namespace lifecycle admission plugin attaches when a namespace is being
/// deleted, as core/v1 `NamespaceTerminatingCause`.
pub const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// An error that may carry the API server's [`Status`], as apimachinery's `APIStatus`.
pub trait ApiStatus {
    /// The status the server returned, if this error came from an API response.
    fn api_status(&self) -> Option<&Status>;

    /// True for a 404 NotFound, as apimachinery's `IsNotFound`: the NotFound reason, or code
    /// 404 with a reason that is not one of the known ones (e.g. a proxy's plain-text error).
    fn is_not_found(&self) -> bool {
        self.api_status()
            .is_some_and(|s| reason_or_code(s, reason::NOT_FOUND, 404))
    }

    /// True for a 422 Invalid, as apimachinery's `IsInvalid`.
    fn is_invalid(&self) -> bool {
        self.api_status()
            .is_some_and(|s| reason_or_code(s, reason::INVALID, 422))
    }

    /// True for a 409 Conflict, as apimachinery's `IsConflict`.
    fn is_conflict(&self) -> bool {
        self.api_status()
            .is_some_and(|s| reason_or_code(s, reason::CONFLICT, 409))
    }

    /// True for a 403 Forbidden, as apimachinery's `IsForbidden`.
    fn is_forbidden(&self) -> bool {
        self.api_status()
            .is_some_and(|s| reason_or_code(s, reason::FORBIDDEN, 403))
    }

    /// True for an AlreadyExists (by reason only), as apimachinery's `IsAlreadyExists`.
    fn is_already_exists(&self) -> bool {
        self.api_status()
            .is_some_and(|s| s.reason == reason::ALREADY_EXISTS)
    }

    /// True when the status details name a cause of type `cause`, as apimachinery's
    /// `HasStatusCause`.
    fn has_status_cause(&self, cause: &str) -> bool {
        self.api_status()
            .and_then(|s| s.details.as_ref())
            .is_some_and(|d| d.causes.iter().any(|c| c.reason == cause))
    }

    /// True when the request failed because its namespace is being deleted
    /// (`HasStatusCause(err, NamespaceTerminatingCause)` upstream).
    fn is_namespace_terminating(&self) -> bool {
        self.has_status_cause(NAMESPACE_TERMINATING_CAUSE)
    }
}

/// The status has `expected` as its reason, or has `code` and a reason apimachinery does not
/// know (its `reasonAndCodeForError` + `knownReasons` check).
fn reason_or_code(status: &Status, expected: &str, code: u16) -> bool {
    status.reason == expected || (!reason::is_known(&status.reason) && status.code == code)
}

impl ApiStatus for Status {
    fn api_status(&self) -> Option<&Status> {
        Some(self)
    }
}

impl ApiStatus for kube::Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            kube::Error::Api(status) => Some(status),
            _ => None,
        }
    }
}

/// The message a Go client would print for `err`: the server's message for API errors
/// (`StatusError.Error()`), the error's own text otherwise.
pub fn error_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

fn failure(code: u16, reason: &str, message: String, details: Option<StatusDetails>) -> Status {
    Status {
        status: Some(StatusSummary::Failure),
        code,
        message,
        metadata: None,
        reason: reason.to_owned(),
        details,
    }
}

fn details(resource: &str, name: &str, causes: Vec<StatusCause>) -> StatusDetails {
    StatusDetails {
        name: name.to_owned(),
        group: String::new(),
        kind: resource.to_owned(),
        uid: String::new(),
        causes,
        retry_after_seconds: 0,
    }
}

/// A 404 NotFound status for `resource` `name`, as apimachinery's `NewNotFound`.
pub fn not_found(resource: &str, name: &str) -> Status {
    failure(
        404,
        "NotFound",
        format!("{resource} \"{name}\" not found"),
        Some(details(resource, name, Vec::new())),
    )
}

/// A 409 AlreadyExists status for `resource` `name`, as apimachinery's `NewAlreadyExists`.
pub fn already_exists(resource: &str, name: &str) -> Status {
    failure(
        409,
        "AlreadyExists",
        format!("{resource} \"{name}\" already exists"),
        Some(details(resource, name, Vec::new())),
    )
}

/// A 422 Invalid status for `resource` `name`, as apimachinery's `NewInvalid`.
pub fn invalid(resource: &str, name: &str, message: &str) -> Status {
    failure(
        422,
        "Invalid",
        format!("{resource} \"{name}\" is invalid: {message}"),
        Some(details(resource, name, Vec::new())),
    )
}

/// A 409 Conflict status for `resource` `name`, as apimachinery's `NewConflict`.
pub fn conflict(resource: &str, name: &str, message: &str) -> Status {
    failure(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on {resource} \"{name}\": {message}"),
        Some(details(resource, name, Vec::new())),
    )
}

/// A 500 InternalError status, as apimachinery's `NewInternalError`.
pub fn internal_error(message: &str) -> Status {
    failure(
        500,
        "InternalError",
        format!("Internal error occurred: {message}"),
        Some(details("", "", Vec::new())),
    )
}

/// The 403 Forbidden status the namespace lifecycle admission plugin returns when creating
/// `resource` `name` in a namespace that is being deleted; its details carry the
/// [`NAMESPACE_TERMINATING_CAUSE`].
pub fn namespace_terminating(resource: &str, name: &str, namespace: &str) -> Status {
    let reason = format!(
        "unable to create new content in namespace {namespace} because it is being terminated"
    );
    let cause = StatusCause {
        reason: NAMESPACE_TERMINATING_CAUSE.to_owned(),
        message: reason.clone(),
        field: "metadata.namespace".to_owned(),
    };
    failure(
        403,
        "Forbidden",
        format!("{resource} \"{name}\" is forbidden: {reason}"),
        Some(details(resource, name, vec![cause])),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_statuses() {
        struct Case {
            name: &'static str,
            status: Status,
            not_found: bool,
            invalid: bool,
            terminating: bool,
        }
        let cases = [
            Case {
                name: "not found",
                status: not_found("pods", "a"),
                not_found: true,
                invalid: false,
                terminating: false,
            },
            Case {
                name: "bare 404 without a known reason",
                status: Status::failure("nope", "").with_code(404),
                not_found: true,
                invalid: false,
                terminating: false,
            },
            Case {
                name: "unparsable 404 body",
                status: Status::failure("404 page not found", "Failed to parse error data")
                    .with_code(404),
                not_found: true,
                invalid: false,
                terminating: false,
            },
            Case {
                name: "known reason wins over the code",
                status: Status::failure("gone", "Gone").with_code(404),
                not_found: false,
                invalid: false,
                terminating: false,
            },
            Case {
                name: "invalid",
                status: invalid("pods", "a", "metadata.uid: Invalid value"),
                not_found: false,
                invalid: true,
                terminating: false,
            },
            Case {
                name: "namespace terminating",
                status: namespace_terminating("pods", "", "gone"),
                not_found: false,
                invalid: false,
                terminating: true,
            },
            Case {
                name: "plain forbidden is not terminating",
                status: Status::failure("quota", "Forbidden").with_code(403),
                not_found: false,
                invalid: false,
                terminating: false,
            },
        ];
        for case in cases {
            let err = kube::Error::Api(case.status.clone().boxed());
            assert_eq!(err.is_not_found(), case.not_found, "{}", case.name);
            assert_eq!(err.is_invalid(), case.invalid, "{}", case.name);
            assert_eq!(
                err.is_namespace_terminating(),
                case.terminating,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn terminating_status_reads_like_upstream() {
        let status = namespace_terminating("pods", "web-1", "shop");
        assert_eq!(status.code, 403);
        assert!(status.is_forbidden());
        assert_eq!(
            status.message,
            "pods \"web-1\" is forbidden: unable to create new content in namespace shop because it is being terminated"
        );
    }

    #[test]
    fn non_api_errors_have_no_status() {
        let err = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert!(err.api_status().is_none());
        assert!(!err.is_not_found());
        assert_eq!(error_message(&err), err.to_string());
        let api = kube::Error::Api(not_found("pods", "x").boxed());
        assert_eq!(error_message(&api), "pods \"x\" not found");
    }
}
