//! What a webhook call can end in besides success: a call error (decided by the failure policy, upstream's `ErrCallingWebhook`) or a refusal (the webhook's own Status, `ToStatusErr`; or dry run refused, `NewDryRunUnsupportedErr`).

use serde_json::Value;

use crate::error::{ApiError, GroupResource, StatusCause, StatusDetails};

/// How a call to one webhook failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The webhook could not be called, or answered nonsense: the failure policy decides.
    #[error("failed calling webhook \"{webhook}\": {reason}")]
    Calling {
        /// The webhook's name.
        webhook: String,
        /// Why (`failed to call webhook: ...`, `received invalid webhook response: ...`).
        reason: String,
    },
    /// The request is refused whatever the failure policy (the webhook denied it, or it
    /// cannot be sent a dry run).
    #[error("{0}")]
    Rejected(ApiError),
}

impl Error {
    /// A call error of `webhook`.
    pub fn calling(webhook: &str, reason: impl Into<String>) -> Self {
        Error::Calling {
            webhook: webhook.to_owned(),
            reason: reason.into(),
        }
    }

    /// The API error answered when the failure policy is `Fail` (a call error is upstream's
    /// `NewInternalError`).
    pub fn into_api_error(self) -> ApiError {
        match self {
            Error::Calling { .. } => ApiError::internal(self.to_string()),
            Error::Rejected(e) => e,
        }
    }
}

/// 400: the webhook has side effects and the request is a dry run.
pub fn dry_run_unsupported(webhook: &str) -> Error {
    Error::Rejected(ApiError::bad_request(format!(
        "admission webhook \"{webhook}\" does not support dry run"
    )))
}

/// The webhook's denial as an API error (upstream's `ToStatusErr`): its Status with the
/// message prefixed by `admission webhook "<name>" denied the request` and then by
/// `<resource> "<object>" is forbidden` (`Internal error occurred` for a 500); a Status without
/// a code is 403 Forbidden, and one without a reason gets `Forbidden` (`InternalError` for a
/// 500), as upstream.
pub fn denied(
    webhook: &str,
    resource: GroupResource<'_>,
    object: &str,
    status: Option<&Value>,
) -> Error {
    let field = |key: &str| {
        status
            .and_then(|s| s.get(key))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let object = if object.is_empty() { "Unknown" } else { object };
    let code = match status.and_then(|s| s.get("code")).and_then(Value::as_u64) {
        None | Some(0) => 403,
        // A code HTTP cannot carry is answered as the failure it is.
        Some(c) => u16::try_from(c)
            .ok()
            .filter(|c| (100..600).contains(c))
            .unwrap_or(500),
    };
    let internal = code == 500;
    let denied_by = format!("admission webhook \"{webhook}\" denied the request");
    let why = match (field("message"), field("reason")) {
        (m, _) if !m.is_empty() => format!("{denied_by}: {m}"),
        (_, r) if !r.is_empty() => format!("{denied_by}: {r}"),
        _ => format!("{denied_by} without explanation"),
    };
    let message = if internal {
        format!("Internal error occurred: {why}")
    } else {
        format!("{resource} \"{object}\" is forbidden: {why}")
    };
    let reason = match known_reason(field("reason")) {
        "" if internal => "InternalError",
        "" => "Forbidden",
        known => known,
    };
    let mut err = ApiError::from_status(code, reason, message);
    err.details = Some(Box::new(
        match status
            .and_then(|s| s.get("details"))
            .filter(|d| d.is_object())
        {
            Some(d) => details(d),
            None if internal => StatusDetails {
                causes: vec![StatusCause {
                    reason: String::new(),
                    message: why,
                    field: String::new(),
                }],
                ..StatusDetails::default()
            },
            // Kind is the resource, as upstream's NewForbidden has it.
            None => StatusDetails {
                name: object.to_owned(),
                group: resource.group.to_owned(),
                kind: resource.resource.to_owned(),
                ..StatusDetails::default()
            },
        },
    ));
    Error::Rejected(err)
}

/// A webhook's `StatusReason` as one of the API's (`ApiError` carries static reasons; an
/// unknown one is dropped, which clients read as no reason).
fn known_reason(reason: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "StoreReadError",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    KNOWN.iter().copied().find(|k| *k == reason).unwrap_or("")
}

/// A Status's `details`.
fn details(d: &Value) -> StatusDetails {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    StatusDetails {
        name: text(d, "name"),
        group: text(d, "group"),
        kind: text(d, "kind"),
        uid: text(d, "uid"),
        causes: d
            .get("causes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| StatusCause {
                reason: text(c, "reason"),
                message: text(c, "message"),
                field: text(c, "field"),
            })
            .collect(),
        retry_after_seconds: d
            .get("retryAfterSeconds")
            .and_then(Value::as_i64)
            .and_then(|s| i32::try_from(s).ok()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rejected(e: Error) -> ApiError {
        match e {
            Error::Rejected(e) => e,
            other => panic!("{other:?}"),
        }
    }

    /// As upstream's `TestToStatusErr` table.
    #[test]
    fn denials_name_the_webhook() {
        struct Case {
            name: &'static str,
            status: Option<Value>,
            want_message: &'static str,
            want_code: u16,
            want_reason: &'static str,
        }
        let cases = [
            Case {
                name: "no status",
                status: None,
                want_message: "pods \"p\" is forbidden: admission webhook \"hook\" denied the request without explanation",
                want_code: 403,
                want_reason: "Forbidden",
            },
            Case {
                name: "a message and a code",
                status: Some(json!({"code": 403, "message": "no team label"})),
                want_message: "pods \"p\" is forbidden: admission webhook \"hook\" denied the request: no team label",
                want_code: 403,
                want_reason: "Forbidden",
            },
            Case {
                name: "only a reason",
                status: Some(json!({"code": 422, "reason": "Invalid"})),
                want_message: "pods \"p\" is forbidden: admission webhook \"hook\" denied the request: Invalid",
                want_code: 422,
                want_reason: "Invalid",
            },
            Case {
                name: "a 500 is an internal error",
                status: Some(json!({"code": 500, "message": "m"})),
                want_message: "Internal error occurred: admission webhook \"hook\" denied the request: m",
                want_code: 500,
                want_reason: "InternalError",
            },
            Case {
                name: "an invented reason is dropped, a nonsense code is 500",
                status: Some(json!({"code": 7, "reason": "Because", "message": "m"})),
                want_message: "Internal error occurred: admission webhook \"hook\" denied the request: m",
                want_code: 500,
                want_reason: "InternalError",
            },
        ];
        let pods = GroupResource {
            group: "",
            resource: "pods",
        };
        for case in cases {
            let err = rejected(denied("hook", pods, "p", case.status.as_ref()));
            assert_eq!(err.message, case.want_message, "{}", case.name);
            assert_eq!(err.code, case.want_code, "{}", case.name);
            assert_eq!(err.reason, case.want_reason, "{}", case.name);
        }
        let unnamed = rejected(denied("hook", pods, "", None));
        assert!(
            unnamed.message.starts_with("pods \"Unknown\" is forbidden"),
            "{}",
            unnamed.message
        );
    }

    #[test]
    fn call_errors_are_internal_errors_naming_the_webhook() {
        let err = Error::calling("hook", "failed to call webhook: boom").into_api_error();
        assert_eq!(err.code, 500);
        assert_eq!(
            err.message,
            "Internal error occurred: failed calling webhook \"hook\": failed to call webhook: boom"
        );
        let dry = rejected(dry_run_unsupported("hook"));
        assert_eq!(dry.code, 400);
        assert_eq!(
            dry.message,
            "admission webhook \"hook\" does not support dry run"
        );
    }
}
