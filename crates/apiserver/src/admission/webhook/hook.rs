//! One webhook of a configuration, compiled for dispatch: its rules, parsed selectors, compiled match conditions, policies and client (TLS trusting its `caBundle`), as upstream's `WebhookAccessor`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcm_machinery::labels::Selector;
use serde_json::Value;

use crate::admission::match_conditions::{FailurePolicy, MatchConditions};
use crate::admission::webhook::client;

/// The default `timeoutSeconds`.
pub const DEFAULT_TIMEOUT_SECONDS: i64 = 10;
/// The largest `timeoutSeconds` (validation refuses more; a stored larger value is clamped).
pub const MAX_TIMEOUT_SECONDS: i64 = 30;

/// Where the webhook is called.
#[derive(Clone, Debug)]
pub enum Target {
    /// `clientConfig.url`: `https://host[:port][/path]`.
    Url {
        /// Host to connect to and verify (IPv6 without brackets).
        host: String,
        /// Port (443 by default).
        port: u16,
        /// `host[:port]` as written.
        authority: String,
        /// Path (with any query), `/` when empty.
        path: String,
    },
    /// `clientConfig.service`: a Service's endpoint, verified as `<name>.<namespace>.svc`.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The request path (`/` when unset).
        path: String,
        /// The Service port (443 by default).
        port: i64,
    },
}

/// One webhook, ready to be matched and called. Shared as `Arc<Hook>` by every request until
/// its configuration changes.
#[derive(Debug)]
pub struct Hook {
    /// Upstream's accessor uid: `<configuration>/<webhook>/<index>` (reinvocation tracks it).
    pub uid: String,
    /// The configuration's name.
    pub configuration: String,
    /// The webhook's name.
    pub name: String,
    /// The rules; a request must match one.
    pub rules: Vec<RuleWithOperations>,
    /// `failurePolicy`.
    pub failure_policy: FailurePolicy,
    /// `namespaceSelector`, or why it does not parse (an internal error when used).
    pub namespace_selector: Result<Selector, String>,
    /// `objectSelector`, or why it does not parse.
    pub object_selector: Result<Selector, String>,
    /// `sideEffects` (`None`, `NoneOnDryRun`, `Some`, `Unknown`).
    pub side_effects: String,
    /// `timeoutSeconds`, bounded to 1..=30.
    pub timeout: Duration,
    /// `admissionReviewVersions`, in preference order.
    pub review_versions: Vec<String>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke_if_needed: bool,
    /// Where the webhook is, or why the client config is unusable (a call error, decided by
    /// the failure policy).
    pub target: Result<Target, String>,
    /// The TLS configuration trusting `caBundle`, or why it could not be built.
    pub tls: Result<Arc<rustls::ClientConfig>, String>,
    /// `matchConditions`, compiled.
    pub match_conditions: Arc<MatchConditions>,
}

impl Hook {
    /// Compiles the `index`th webhook `hook` of the configuration named `configuration`.
    pub fn compile(configuration: &str, index: usize, hook: &Value) -> Self {
        let name = hook
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let rules = hook
            .get("rules")
            .cloned()
            .and_then(|r| serde_json::from_value::<Vec<RuleWithOperations>>(r).ok())
            .unwrap_or_default();
        let selector = |key: &str| -> Result<Selector, String> {
            let selector: LabelSelector = match hook.get(key) {
                Some(v) if !v.is_null() => {
                    serde_json::from_value(v.clone()).map_err(|e| e.to_string())?
                }
                // The API defaults both selectors to `{}`: everything.
                _ => LabelSelector::default(),
            };
            Selector::from_label_selector(&selector).map_err(|e| e.to_string())
        };
        let timeout = hook
            .get("timeoutSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            .clamp(1, MAX_TIMEOUT_SECONDS);
        let review_versions = hook
            .get("admissionReviewVersions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        let client_config = hook.get("clientConfig");
        let ca_bundle = client_config
            .and_then(|c| c.get("caBundle"))
            .and_then(Value::as_str);
        Self {
            uid: format!("{configuration}/{name}/{index}"),
            configuration: configuration.to_owned(),
            rules,
            failure_policy: FailurePolicy::parse(hook.get("failurePolicy").and_then(Value::as_str)),
            namespace_selector: selector("namespaceSelector"),
            object_selector: selector("objectSelector"),
            side_effects: hook
                .get("sideEffects")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            timeout: Duration::from_secs(timeout.unsigned_abs()),
            review_versions,
            reinvoke_if_needed: hook.get("reinvocationPolicy").and_then(Value::as_str)
                == Some("IfNeeded"),
            target: target(client_config),
            tls: client::tls_config(ca_bundle).map_err(|e| e.to_string()),
            match_conditions: MatchConditions::from_json(hook.get("matchConditions")),
            name,
        }
    }

    /// Whether a dry-run request may be sent (`sideEffects` `None` or `NoneOnDryRun`).
    pub fn supports_dry_run(&self) -> bool {
        matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun")
    }
}

/// The webhooks of one configuration object (`webhooks[]`), compiled.
pub fn compile_configuration(config: &Value) -> Vec<Arc<Hook>> {
    let name = crate::object::name(config);
    config
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, hook)| Arc::new(Hook::compile(name, i, hook)))
        .collect()
}

/// The client config's target.
fn target(config: Option<&Value>) -> Result<Target, String> {
    let config = config.ok_or("clientConfig is missing")?;
    if let Some(url) = config.get("url").and_then(Value::as_str) {
        return parse_url(url);
    }
    let service = config
        .get("service")
        .filter(|s| !s.is_null())
        .ok_or("exactly one of url or service is required")?;
    let text = |key: &str| service.get(key).and_then(Value::as_str).unwrap_or("");
    let path = match text("path") {
        "" => "/".to_owned(),
        p => p.to_owned(),
    };
    Ok(Target::Service {
        namespace: text("namespace").to_owned(),
        name: text("name").to_owned(),
        path,
        port: service.get("port").and_then(Value::as_i64).unwrap_or(443),
    })
}

/// Splits an `https://` URL into host, port and path.
fn parse_url(url: &str) -> Result<Target, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("invalid url {url:?}: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!(
            "invalid url {url:?}: 'https' is the only allowed URL scheme"
        ));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("invalid url {url:?}: host must be specified"))?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let path = uri
        .path_and_query()
        .map(|p| p.as_str())
        .filter(|p| !p.is_empty())
        .unwrap_or("/")
        .to_owned();
    Ok(Target::Url {
        host,
        port: authority.port_u16().unwrap_or(443),
        authority: authority.as_str().to_owned(),
        path,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_defaulted_webhook_compiles() {
        let config = json!({"metadata": {"name": "cfg"}, "webhooks": [{
            "name": "deny.example.com",
            "clientConfig": {"url": "https://127.0.0.1:8443/validate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["pods"], "scope": "*"}],
            "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 3,
            "admissionReviewVersions": ["v1"],
            "namespaceSelector": {}, "objectSelector": {"matchLabels": {"team": "a"}},
            "matchConditions": [{"name": "always", "expression": "true"}]
        }]});
        let hooks = compile_configuration(&config);
        assert_eq!(hooks.len(), 1);
        let hook = &hooks[0];
        assert_eq!(hook.uid, "cfg/deny.example.com/0");
        assert_eq!(hook.failure_policy, FailurePolicy::Ignore);
        assert_eq!(hook.timeout, Duration::from_secs(3));
        assert!(hook.supports_dry_run());
        assert!(
            hook.namespace_selector
                .as_ref()
                .expect("ns")
                .is_everything()
        );
        assert!(!hook.object_selector.as_ref().expect("obj").is_everything());
        assert!(!hook.match_conditions.is_empty());
        assert_eq!(hook.rules.len(), 1);
        match hook.target.as_ref().expect("url") {
            Target::Url {
                host, port, path, ..
            } => assert_eq!(
                (host.as_str(), *port, path.as_str()),
                ("127.0.0.1", 8443, "/validate")
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn targets_parse_or_explain() {
        let t = target(Some(&json!({"url": "https://[::1]/hook"}))).expect("ipv6");
        assert!(matches!(t, Target::Url { ref host, port: 443, .. } if host == "::1"));
        let t = target(Some(
            &json!({"service": {"namespace": "ns", "name": "svc"}}),
        ))
        .expect("service");
        assert!(
            matches!(t, Target::Service { ref path, port: 443, .. } if path == "/"),
            "{t:?}"
        );
        assert!(target(Some(&json!({"url": "http://x/"}))).is_err());
        assert!(target(Some(&json!({}))).is_err());
        assert!(target(None).is_err());
    }

    #[test]
    fn timeouts_are_bounded_and_policies_default_to_fail() {
        let hook = Hook::compile("c", 0, &json!({"name": "h", "timeoutSeconds": 300}));
        assert_eq!(hook.timeout, Duration::from_secs(30));
        assert_eq!(hook.failure_policy, FailurePolicy::Fail);
        assert!(!hook.supports_dry_run());
        let hook = Hook::compile("c", 0, &json!({"name": "h"}));
        assert_eq!(hook.timeout, Duration::from_secs(10));
    }
}
