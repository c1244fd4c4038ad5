//! What an API error means for list/watch, as apimachinery's `api/errors` predicates.

use std::error::Error as StdError;

use kube::core::Status;

/// The Kubernetes `Status` behind an API error, if it is one.
pub fn status(err: &kube::Error) -> Option<&Status> {
    match err {
        kube::Error::Api(status) => Some(status),
        _ => None,
    }
}

/// True for a 410 Gone / `Expired` error: the requested resourceVersion is too old, as
/// client-go's `isExpiredError` (`IsResourceExpired || IsGone`).
pub fn is_expired(err: &kube::Error) -> bool {
    status(err).is_some_and(is_expired_status)
}

/// As [`is_expired`], for a `Status` (e.g. from a watch `ERROR` event).
pub fn is_expired_status(status: &Status) -> bool {
    status.code == 410 || status.reason == "Expired" || status.reason == "Gone"
}

/// True when the requested resourceVersion is newer than the server has, as client-go's
/// `isTooLargeResourceVersionError` (the `ResourceVersionTooLarge` cause, or the message
/// older servers used with a 504).
pub fn is_too_large_resource_version(err: &kube::Error) -> bool {
    let Some(status) = status(err) else {
        return false;
    };
    let causes = status.details.as_ref().map(|d| d.causes.as_slice());
    if causes
        .into_iter()
        .flatten()
        .any(|c| c.reason == "ResourceVersionTooLarge")
    {
        return true;
    }
    if status.code != 504 && status.reason != "Timeout" {
        return false;
    }
    causes
        .into_iter()
        .flatten()
        .any(|c| c.message == "Too large resource version")
        || status.message.contains("Too large resource version")
}

/// True for 429 Too Many Requests.
pub fn is_too_many_requests(err: &kube::Error) -> bool {
    status(err).is_some_and(|s| s.code == 429 || s.reason == "TooManyRequests")
}

/// True for 404 Not Found.
pub fn is_not_found(err: &kube::Error) -> bool {
    status(err).is_some_and(|s| s.code == 404 || s.reason == "NotFound")
}

/// True for a 500 `InternalError`.
pub fn is_internal_error(err: &kube::Error) -> bool {
    status(err).is_some_and(|s| s.reason == "InternalError")
}

/// True when the connection to the API server was refused, as apimachinery's
/// `IsConnectionRefused` (looks through the error's sources for an I/O error).
pub fn is_connection_refused(err: &kube::Error) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = e.source();
    }
    false
}

/// True when a watch may be retried after a backoff without relisting, as client-go's
/// `isWatchErrorRetriable`: the server is unreachable or overloaded, not the data stale.
pub fn is_watch_error_retriable(err: &kube::Error) -> bool {
    is_connection_refused(err) || is_too_many_requests(err)
}

#[cfg(test)]
mod tests {
    use kube::core::response::{StatusCause, StatusDetails};

    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            reason: reason.into(),
            ..Status::default()
        }))
    }

    #[test]
    fn classification_table() {
        struct Case {
            name: &'static str,
            err: kube::Error,
            expired: bool,
            too_large: bool,
            retriable: bool,
        }
        let mut too_large = Status {
            code: 504,
            reason: "Timeout".into(),
            ..Status::default()
        };
        too_large.details = Some(StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: vec![StatusCause {
                reason: "ResourceVersionTooLarge".into(),
                message: "Too large resource version".into(),
                field: String::new(),
            }],
            retry_after_seconds: 0,
        });
        let cases = [
            Case {
                name: "410 gone",
                err: api(410, "Gone"),
                expired: true,
                too_large: false,
                retriable: false,
            },
            Case {
                name: "expired reason",
                err: api(0, "Expired"),
                expired: true,
                too_large: false,
                retriable: false,
            },
            Case {
                name: "too large rv",
                err: kube::Error::Api(Box::new(too_large)),
                expired: false,
                too_large: true,
                retriable: false,
            },
            Case {
                name: "429",
                err: api(429, "TooManyRequests"),
                expired: false,
                too_large: false,
                retriable: true,
            },
            Case {
                name: "connection refused",
                err: kube::Error::ReadEvents(std::io::Error::from(
                    std::io::ErrorKind::ConnectionRefused,
                )),
                expired: false,
                too_large: false,
                retriable: true,
            },
            Case {
                name: "500",
                err: api(500, "InternalError"),
                expired: false,
                too_large: false,
                retriable: false,
            },
        ];
        for c in cases {
            assert_eq!(is_expired(&c.err), c.expired, "{}: expired", c.name);
            assert_eq!(
                is_too_large_resource_version(&c.err),
                c.too_large,
                "{}: too large",
                c.name
            );
            assert_eq!(
                is_watch_error_retriable(&c.err),
                c.retriable,
                "{}: retriable",
                c.name
            );
        }
        assert!(is_not_found(&api(404, "NotFound")));
        assert!(is_internal_error(&api(500, "InternalError")));
    }
}
