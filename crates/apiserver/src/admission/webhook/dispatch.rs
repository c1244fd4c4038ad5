//! What both webhook plugins share: whether a webhook is called for a request (upstream's `Webhook.ShouldCallHook`: rules, selectors, match conditions) and one call (side effects and dry run, the review, the client with its timeout, the response's checks).

use std::time::Duration;

use crate::admission::attributes::Attributes;
use crate::admission::match_conditions::{Input, Outcome};
use crate::admission::source::ObjectSource;
use crate::admission::webhook::client::{self, Endpoint};
use crate::admission::webhook::errors::{self, Error};
use crate::admission::webhook::hook::{Hook, Target};
use crate::admission::webhook::review::{self, Response, Version};
use crate::admission::webhook::{namespace_selector, object_selector, resolver, rules};
use crate::error::{ApiError, Result};

/// The most a webhook may answer: its review is parsed in memory, and a peer must not be
/// able to make the API server allocate without bound.
pub const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;
/// The longest warning kept from a webhook (longer ones are cut, as upstream's recorder does
/// once warnings grow large).
const MAX_WARNING_LEN: usize = 4096;

/// Whether `hook` is called for the request: one of its rules matches, its namespace and
/// object selectors select the request, and its match conditions hold. An error refuses
/// the request (a selector that does not parse, a missing namespace, a match condition that
/// fails under `failurePolicy: Fail`).
///
/// Rules are checked first (upstream checks selectors first but ignores their errors when no
/// rule matches; the outcome is the same, and rules cost no read).
pub async fn should_call(
    hook: &Hook,
    a: &Attributes<'_>,
    source: &dyn ObjectSource,
    request: &serde_json::Value,
) -> Result<bool> {
    if !hook.rules.iter().any(|r| rules::matches(r, a)) {
        return Ok(false);
    }
    let namespace_selector = hook
        .namespace_selector
        .as_ref()
        .map_err(ApiError::internal)?;
    if !namespace_selector::matches(namespace_selector, a, source).await? {
        return Ok(false);
    }
    let object_selector = hook.object_selector.as_ref().map_err(ApiError::internal)?;
    if !object_selector::matches(object_selector, a) {
        return Ok(false);
    }
    let input = Input {
        object: a.object.as_ref(),
        old_object: a.old_object,
        request,
    };
    match hook.match_conditions.evaluate(input, hook.failure_policy) {
        Outcome::Matches => Ok(true),
        Outcome::Skip { failed } => {
            tracing::debug!(webhook = %hook.name, condition = ?failed, "match conditions exclude the request");
            Ok(false)
        }
        Outcome::Error(e) => {
            tracing::warn!(webhook = %hook.name, error = %e, "Failed evaluating match conditions, failing closed");
            Err(a.forbidden(&e.to_string()))
        }
    }
}

/// Calls `hook` with the review of `a` (whose `request` part, uid included, is `request`)
/// and returns its checked answer; allowed or not is the caller's to judge.
pub async fn call(
    hook: &Hook,
    a: &Attributes<'_>,
    source: &dyn ObjectSource,
    request: serde_json::Value,
    uid: &str,
    mutating: bool,
) -> Result<Response, Error> {
    if a.dry_run && !hook.supports_dry_run() {
        if hook.side_effects.is_empty() {
            return Err(Error::calling(&hook.name, "Webhook SideEffects is nil"));
        }
        return Err(errors::dry_run_unsupported(&hook.name));
    }
    let version = Version::choose(&hook.review_versions).ok_or_else(|| {
        Error::calling(
            &hook.name,
            "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)",
        )
    })?;
    let tls = hook
        .tls
        .clone()
        .map_err(|e| Error::calling(&hook.name, format!("could not get REST client: {e}")))?;
    let target = hook
        .target
        .as_ref()
        .map_err(|e| Error::calling(&hook.name, format!("could not get REST client: {e}")))?;
    let endpoint = endpoint(target, hook.timeout, source)
        .await
        .map_err(|e| Error::calling(&hook.name, format!("failed to call webhook: {e}")))?;
    let body = review::body(version, request, a);
    let answer = tokio::time::timeout(
        hook.timeout,
        client::post(&endpoint, tls, body, MAX_RESPONSE_BYTES),
    )
    .await;
    let bytes = match answer {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            return Err(Error::calling(
                &hook.name,
                format!("failed to call webhook: {e}"),
            ));
        }
        Err(_) => {
            return Err(Error::calling(
                &hook.name,
                format!(
                    "failed to call webhook: Post \"{}\": context deadline exceeded",
                    endpoint.url()
                ),
            ));
        }
    };
    review::verify(&bytes, uid, version, mutating).map_err(|e| {
        Error::calling(
            &hook.name,
            format!("received invalid webhook response: {e}"),
        )
    })
}

/// Where a call goes: the URL's host, or a ready endpoint of the Service (verified as
/// `<name>.<namespace>.svc`); the path carries upstream's `timeout` parameter.
async fn endpoint(
    target: &Target,
    timeout: Duration,
    source: &dyn ObjectSource,
) -> Result<Endpoint, String> {
    let with_timeout = |path: &str| {
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}timeout={}s", timeout.as_secs())
    };
    match target {
        Target::Url {
            host,
            port,
            authority,
            path,
        } => Ok(Endpoint {
            host: host.clone(),
            port: *port,
            server_name: host.clone(),
            authority: authority.clone(),
            path_and_query: with_timeout(path),
        }),
        Target::Service {
            namespace,
            name,
            path,
            port,
        } => {
            let server_name = format!("{name}.{namespace}.svc");
            let authority = format!("{server_name}:{port}");
            let address = resolver::resolve(source, namespace, name, *port)
                .await
                .map_err(|e| format!("Post \"https://{authority}{}\": {e}", with_timeout(path)))?;
            Ok(Endpoint {
                host: address.host,
                port: address.port,
                server_name,
                authority,
                path_and_query: with_timeout(path),
            })
        }
    }
}

/// Adds a webhook's warnings to the request's (empty ones dropped, long ones cut).
pub fn add_warnings(a: &mut Attributes<'_>, warnings: Vec<String>) {
    for mut w in warnings.into_iter().filter(|w| !w.trim().is_empty()) {
        if w.len() > MAX_WARNING_LEN {
            let mut cut = MAX_WARNING_LEN;
            while !w.is_char_boundary(cut) {
                cut -= 1;
            }
            w.truncate(cut);
        }
        a.add_warning(w);
    }
}

/// A fresh review uid.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::attributes::Operation;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;
    use crate::resources::pod::PODS;

    fn hook(side_effects: &str, versions: &[&str]) -> Hook {
        Hook::compile(
            "c",
            0,
            &json!({"name": "h", "sideEffects": side_effects,
                "admissionReviewVersions": versions,
                "clientConfig": {"url": "https://127.0.0.1:1/"}}),
        )
    }

    /// As upstream's dispatchers: a dry run is refused (400) by a webhook with side effects,
    /// and is a call error when side effects are unset; no review version in common is a call
    /// error. None of these reach the network.
    #[tokio::test]
    async fn calls_refused_before_the_network() {
        let user = UserInfo::admin();
        let a = Attributes::new(Operation::Create, &PODS, "ns", "p", Some(json!({})), &user)
            .with_dry_run(true);
        let source = Objects::default();
        let run = |hook: Hook| {
            let a = &a;
            let source = &source;
            async move { call(&hook, a, source, json!({}), "u", false).await }
        };
        match run(hook("Some", &["v1"])).await {
            Err(Error::Rejected(e)) => {
                assert_eq!(e.code, 400);
                assert_eq!(
                    e.message,
                    "admission webhook \"h\" does not support dry run"
                );
            }
            other => panic!("{other:?}"),
        }
        match run(hook("", &["v1"])).await {
            Err(e @ Error::Calling { .. }) => assert_eq!(
                e.to_string(),
                "failed calling webhook \"h\": Webhook SideEffects is nil"
            ),
            other => panic!("{other:?}"),
        }
        match run(hook("NoneOnDryRun", &["v2"])).await {
            Err(e @ Error::Calling { .. }) => assert!(
                e.to_string().ends_with(
                    "webhook does not accept known AdmissionReview versions (v1, v1beta1)"
                ),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn long_warnings_are_cut_and_empty_ones_dropped() {
        let user = UserInfo::admin();
        let mut a = Attributes::new(Operation::Create, &PODS, "ns", "p", None, &user);
        add_warnings(
            &mut a,
            vec![" ".to_owned(), "é".repeat(3000), "ok".to_owned()],
        );
        assert_eq!(a.warnings().len(), 2);
        assert!(a.warnings()[0].len() <= MAX_WARNING_LEN);
        assert_eq!(a.warnings()[1], "ok");
    }
}
