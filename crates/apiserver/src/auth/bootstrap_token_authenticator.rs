//! Authenticating bootstrap tokens (`abcdef.0123456789abcdef`), as upstream's `plugin/pkg/auth/authenticator/token/bootstrap` with `--enable-bootstrap-token-auth`: the token names a `bootstrap.kubernetes.io/token` Secret in `kube-system` that holds it, has not expired and is marked for authentication; its user is `system:bootstrap:<token-id>` in `system:bootstrappers` and the Secret's `auth-extra-groups`.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Secret;
use kcm_machinery::bootstrap_token::{
    SECRET_NAME_PREFIX, SECRET_TYPE_BOOTSTRAP_TOKEN, TOKEN_ID_KEY, TOKEN_SECRET_KEY,
    TOKEN_SECRET_NAMESPACE, USAGE_AUTHENTICATION_KEY, USER_PREFIX, data, expiration, groups,
    parse_token,
};

use crate::auth::authenticator::{Authenticator, constant_time_eq};
use crate::auth::service_account_authenticator::Clock;
use crate::auth::user::{ALL_AUTHENTICATED, UserInfo};
use crate::storage::Storage;

/// Authenticates bootstrap tokens against their Secrets in the store.
pub struct BootstrapTokenAuthenticator {
    /// Where the token Secrets are read (by key, uncached: a deleted token stops at once).
    storage: Arc<dyn Storage>,
    /// Now, for the expiration.
    clock: Clock,
}

impl std::fmt::Debug for BootstrapTokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapTokenAuthenticator")
            .finish_non_exhaustive()
    }
}

impl BootstrapTokenAuthenticator {
    /// Tokens of the Secrets in `storage`, expiring by `clock`.
    pub fn new(storage: Arc<dyn Storage>, clock: Clock) -> Self {
        Self { storage, clock }
    }

    /// The token's user, or why a token of bootstrap form is refused (logged at debug, as
    /// upstream's `tokenErrorf`; the request then fails as any unknown token does).
    async fn check(&self, token_id: &str, token_secret: &str) -> Result<UserInfo, String> {
        let name = format!("{SECRET_NAME_PREFIX}{token_id}");
        let key = crate::resources::core::SECRETS.storage_key(TOKEN_SECRET_NAMESPACE, &name);
        let stored = self
            .storage
            .get(&key)
            .await
            .map_err(|e| format!("reading secret {name}: {e}"))?
            .ok_or_else(|| format!("no secret of name {name} to match bootstrap bearer token"))?;
        let secret: Secret = serde_json::from_slice(&stored.value)
            .map_err(|e| format!("decoding secret {name}: {e}"))?;
        let refuse = |why: &str| {
            Err(format!(
                "bootstrap secret {TOKEN_SECRET_NAMESPACE}/{name} {why}"
            ))
        };
        if secret.metadata.deletion_timestamp.is_some() {
            return refuse("is deleted and awaiting removal");
        }
        if secret.type_.as_deref() != Some(SECRET_TYPE_BOOTSTRAP_TOKEN) || secret.data.is_none() {
            return refuse(&format!(
                "has invalid type, expected {SECRET_TYPE_BOOTSTRAP_TOKEN}."
            ));
        }
        let held = data(&secret, TOKEN_SECRET_KEY).unwrap_or_default();
        if !constant_time_eq(held.as_bytes(), token_secret.as_bytes()) {
            return refuse(&format!("has invalid value for key {TOKEN_SECRET_KEY}."));
        }
        if data(&secret, TOKEN_ID_KEY).as_deref() != Some(token_id) {
            return refuse(&format!("has invalid value for key {TOKEN_ID_KEY}."));
        }
        let now = jiff::Timestamp::from_second((self.clock)()).unwrap_or(jiff::Timestamp::MAX);
        if expiration(&secret, now).1 {
            return refuse("has expired.");
        }
        if data(&secret, USAGE_AUTHENTICATION_KEY).as_deref() != Some("true") {
            return refuse(&format!("not marked {USAGE_AUTHENTICATION_KEY}=true."));
        }
        let mut groups = groups(&secret)
            .map_err(|e| format!("bootstrap secret {name} has invalid groups: {e}"))?;
        groups.push(ALL_AUTHENTICATED.to_owned());
        Ok(UserInfo {
            username: format!("{USER_PREFIX}{token_id}"),
            groups,
            ..UserInfo::default()
        })
    }
}

#[async_trait]
impl Authenticator for BootstrapTokenAuthenticator {
    async fn authenticate_token(&self, token: &str) -> Option<UserInfo> {
        // A token of another form is some other authenticator's.
        let (id, secret) = parse_token(token)?;
        match self.check(id, secret).await {
            Ok(user) => Some(user),
            Err(why) => {
                tracing::debug!(%why, "bootstrap token refused");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::storage::MemoryStorage;

    /// 2026-01-01T00:00:00Z.
    const NOW: i64 = 1_767_225_600;
    const TOKEN: &str = "abcdef.0123456789abcdef";

    fn b64(s: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn token_secret(fields: &[(&str, &str)]) -> Value {
        let data: serde_json::Map<String, Value> = fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String(b64(v))))
            .collect();
        json!({
            "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
            "type": SECRET_TYPE_BOOTSTRAP_TOKEN,
            "data": data,
        })
    }

    const GOOD: [(&str, &str); 4] = [
        (TOKEN_ID_KEY, "abcdef"),
        (TOKEN_SECRET_KEY, "0123456789abcdef"),
        (USAGE_AUTHENTICATION_KEY, "true"),
        (
            "auth-extra-groups",
            "system:bootstrappers:kubeadm:default-node-token",
        ),
    ];

    /// Who `token` authenticates as with `secret` stored as the token's Secret.
    async fn user_with(secret: Option<Value>, token: &str) -> Option<UserInfo> {
        let storage = Arc::new(MemoryStorage::new());
        if let Some(secret) = secret {
            storage
                .create(
                    &crate::resources::core::SECRETS
                        .storage_key("kube-system", "bootstrap-token-abcdef"),
                    serde_json::to_vec(&secret).expect("json").into(),
                )
                .await
                .expect("stored");
        }
        BootstrapTokenAuthenticator::new(storage, Arc::new(|| NOW))
            .authenticate_token(token)
            .await
    }

    #[tokio::test]
    async fn a_valid_token_is_its_bootstrap_user() {
        let user = user_with(Some(token_secret(&GOOD)), TOKEN)
            .await
            .expect("authenticated");
        assert_eq!(user.username, "system:bootstrap:abcdef");
        assert_eq!(
            user.groups,
            [
                "system:bootstrappers",
                "system:bootstrappers:kubeadm:default-node-token",
                "system:authenticated"
            ]
        );
        let mut unexpired = GOOD.to_vec();
        unexpired.push(("expiration", "2026-01-01T00:00:01Z"));
        assert!(
            user_with(Some(token_secret(&unexpired)), TOKEN)
                .await
                .is_some()
        );
    }

    #[tokio::test]
    async fn refused_as_upstreams_authenticator_refuses() {
        let with = |change: (&'static str, &'static str)| {
            let mut fields: Vec<(&str, &str)> = GOOD
                .iter()
                .copied()
                .filter(|(k, _)| *k != change.0)
                .collect();
            if !change.1.is_empty() {
                fields.push(change);
            }
            token_secret(&fields)
        };
        let cases = [
            ("no secret", None, TOKEN),
            (
                "wrong secret",
                Some(token_secret(&GOOD)),
                "abcdef.0123456789abcdee",
            ),
            (
                "other form",
                Some(token_secret(&GOOD)),
                "abcdef0123456789abcdef",
            ),
            ("id mismatch", Some(with((TOKEN_ID_KEY, "zzzzzz"))), TOKEN),
            (
                "not for authentication",
                Some(with((USAGE_AUTHENTICATION_KEY, "false"))),
                TOKEN,
            ),
            (
                "usage missing",
                Some(with((USAGE_AUTHENTICATION_KEY, ""))),
                TOKEN,
            ),
            (
                "expired",
                Some(with(("expiration", "2026-01-01T00:00:00Z"))),
                TOKEN,
            ),
            (
                "unparseable expiration",
                Some(with(("expiration", "soon"))),
                TOKEN,
            ),
            (
                "bad extra group",
                Some(with(("auth-extra-groups", "system:masters"))),
                TOKEN,
            ),
            (
                "wrong type",
                Some({
                    let mut s = token_secret(&GOOD);
                    s["type"] = json!("Opaque");
                    s
                }),
                TOKEN,
            ),
            (
                "being deleted",
                Some({
                    let mut s = token_secret(&GOOD);
                    s["metadata"]["deletionTimestamp"] = json!("2025-12-31T00:00:00Z");
                    s
                }),
                TOKEN,
            ),
        ];
        for (name, secret, token) in cases {
            assert_eq!(user_with(secret, token).await, None, "{name}");
        }
    }
}
