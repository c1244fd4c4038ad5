//! Authenticating ServiceAccount tokens: a verified JWT whose service account (and bound pod or secret) still exists with the uid it names, as upstream's `serviceaccount.JWTTokenAuthenticator` with the legacy-free `validator.Validate`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::auth::authenticator::Authenticator;
use crate::auth::service_account_token::{
    Claims, LEGACY_ISSUER, LegacyClaims, ObjectRef, TokenIssuer, unverified_issuer,
};
use crate::auth::user::UserInfo;
use crate::registry::resource::ResourceDef;
use crate::storage::Storage;

/// The extra keys upstream puts on a service account user.
pub const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
/// See [`EXTRA_POD_NAME`].
pub const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";
/// See [`EXTRA_POD_NAME`].
pub const EXTRA_NODE_NAME: &str = "authentication.kubernetes.io/node-name";
/// See [`EXTRA_POD_NAME`].
pub const EXTRA_CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// The label the authenticator keeps on a legacy token's Secret: the date (UTC,
/// `YYYY-MM-DD`) it last authenticated, updated at most once a day (upstream's
/// `LastUsedLabelKey`).
pub const LEGACY_TOKEN_LAST_USED_LABEL: &str = "kubernetes.io/legacy-token-last-used";
/// The label marking a legacy token's Secret invalid since a date; its token no longer
/// authenticates (upstream's `InvalidSinceLabelKey`).
pub const LEGACY_TOKEN_INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";

/// The current time in Unix seconds; injectable so tests choose it.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(|| jiff::Timestamp::now().as_second())
}

/// Authenticates the tokens a [`TokenIssuer`] signed, while their objects exist.
pub struct ServiceAccountAuthenticator {
    /// Verifies signatures and claims.
    issuer: Arc<TokenIssuer>,
    /// Where service accounts, pods and secrets are read (by key, uncached, so a deleted
    /// object's token stops working at once).
    storage: Arc<dyn Storage>,
    /// Now.
    clock: Clock,
}

impl std::fmt::Debug for ServiceAccountAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountAuthenticator")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl ServiceAccountAuthenticator {
    /// Tokens of `issuer`, checked against the objects in `storage` at `clock`'s time.
    pub fn new(issuer: Arc<TokenIssuer>, storage: Arc<dyn Storage>, clock: Clock) -> Self {
        Self {
            issuer,
            storage,
            clock,
        }
    }

    /// The token's user, or why it is refused (for logs and TokenReview errors).
    pub async fn authenticate(&self, token: &str) -> Result<UserInfo, String> {
        self.authenticate_for(token, &[])
            .await
            .map(|(user, _)| user)
    }

    /// The token's user for one of `audiences` (the API audiences when empty) and the
    /// audiences of those it carries (upstream's `jwtTokenAuthenticator`: the answer's
    /// audiences are the intersection of the requested and the token's), or why it is
    /// refused.
    pub async fn authenticate_for(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<(UserInfo, Vec<String>), String> {
        if unverified_issuer(token).as_deref() == Some(LEGACY_ISSUER) {
            let claims = self
                .issuer
                .verify_legacy(token)
                .map_err(|e| e.to_string())?;
            let user = self.check_legacy(token, &claims).await?;
            let wanted = if audiences.is_empty() {
                self.issuer.api_audiences()
            } else {
                audiences
            };
            // A legacy token has no audience: it is granted the ones asked for (upstream's
            // authenticator answers with the API audiences it was configured with).
            return Ok((user, wanted.to_vec()));
        }
        let claims = self
            .issuer
            .verify(token, audiences, (self.clock)())
            .map_err(|e| e.to_string())?;
        let wanted = if audiences.is_empty() {
            self.issuer.api_audiences()
        } else {
            audiences
        };
        let granted = wanted
            .iter()
            .filter(|a| claims.aud.contains(a))
            .cloned()
            .collect();
        let user = self.check_bound_objects(&claims).await?;
        Ok((user, granted))
    }

    /// upstream's `validator.Validate`: the service account, and the pod or secret the token
    /// is bound to, exist with the uids the claims name and are not being deleted.
    async fn check_bound_objects(&self, claims: &Claims) -> Result<UserInfo, String> {
        let k = &claims.kubernetes;
        let ns = &k.namespace;
        let sa = &k.serviceaccount;
        self.check(
            &crate::resources::core::SERVICEACCOUNTS,
            ns,
            sa,
            "service account",
        )
        .await?;
        let mut user = UserInfo::service_account(ns, &sa.name, &sa.uid);
        let mut extra = BTreeMap::new();
        if let Some(secret) = &k.secret {
            self.check(&crate::resources::core::SECRETS, ns, secret, "secret")
                .await?;
        }
        if let Some(pod) = &k.pod {
            self.check(&crate::resources::pod::PODS, ns, pod, "pod")
                .await?;
            extra.insert(EXTRA_POD_NAME.to_owned(), vec![pod.name.clone()]);
            extra.insert(EXTRA_POD_UID.to_owned(), vec![pod.uid.clone()]);
        }
        if let Some(node) = &k.node {
            extra.insert(EXTRA_NODE_NAME.to_owned(), vec![node.name.clone()]);
        }
        if !claims.jti.is_empty() {
            extra.insert(
                EXTRA_CREDENTIAL_ID.to_owned(),
                vec![format!("JTI={}", claims.jti)],
            );
        }
        user.extra = extra;
        Ok(user)
    }

    /// upstream's `legacyValidator.Validate`: the secret exists, is not being deleted and
    /// holds this very token; the service account exists with the uid the claims name and is
    /// not being deleted. The secret's last-used label is then set to today unless it names
    /// today or tomorrow (upstream's `patchSecretWithLastUsedDate`), even when the secret is
    /// marked invalid (`kubernetes.io/legacy-token-invalid-since`), which refuses the token.
    async fn check_legacy(&self, token: &str, claims: &LegacyClaims) -> Result<UserInfo, String> {
        let ns = &claims.namespace;
        let key = crate::resources::core::SECRETS.storage_key(ns, &claims.secret_name);
        let secret_name = &claims.secret_name;
        let stored = self
            .storage
            .get(&key)
            .await
            .map_err(|e| format!("reading secret {ns}/{secret_name}: {e}"))?
            .ok_or_else(|| format!("secret {ns}/{secret_name} has been deleted"))?;
        let mut secret: Value = serde_json::from_slice(&stored.value)
            .map_err(|e| format!("decoding secret {ns}/{secret_name}: {e}"))?;
        let meta = secret.get("metadata");
        if meta
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some_and(|t| !t.is_null())
        {
            return Err("service account token has been invalidated".to_owned());
        }
        let held = secret
            .pointer("/data/token")
            .and_then(Value::as_str)
            .and_then(|b64| {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.decode(b64).ok()
            })
            .unwrap_or_default();
        if !ring_eq(&held, token.as_bytes()) {
            return Err("service account token has been invalidated".to_owned());
        }
        let label = |name: &str| {
            secret
                .pointer("/metadata/labels")
                .and_then(|l| l.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let account = ObjectRef {
            name: claims.service_account_name.clone(),
            uid: claims.service_account_uid.clone(),
        };
        self.check(
            &crate::resources::core::SERVICEACCOUNTS,
            ns,
            &account,
            "service account",
        )
        .await?;
        // Marked invalid by the legacy token cleaner: refused, but the attempt still counts
        // as a use, so the cleaner does not delete a Secret someone still tries.
        let invalid = label(LEGACY_TOKEN_INVALID_SINCE_LABEL).is_some_and(|v| !v.is_empty());
        let now = jiff::Timestamp::from_second((self.clock)()).ok();
        let day = |t: jiff::Timestamp| t.strftime("%Y-%m-%d").to_string();
        let today = now.map(day);
        let tomorrow = now
            .and_then(|t| t.checked_add(jiff::SignedDuration::from_hours(24)).ok())
            .map(day);
        let last_used = label(LEGACY_TOKEN_LAST_USED_LABEL);
        if let Some(today) = today.filter(|t| last_used.as_ref() != Some(t))
            && last_used != tomorrow
        {
            if let Some(meta) = secret.get_mut("metadata").and_then(Value::as_object_mut) {
                let labels = meta
                    .entry("labels")
                    .or_insert_with(|| Value::Object(serde_json::Map::new()));
                if let Some(labels) = labels.as_object_mut() {
                    labels.insert(
                        LEGACY_TOKEN_LAST_USED_LABEL.to_owned(),
                        Value::String(today),
                    );
                }
            }
            // Best effort, as upstream's: a conflicting write labels it on a later use.
            match serde_json::to_vec(&secret) {
                Ok(value) => {
                    if let Err(e) = self
                        .storage
                        .update(&key, stored.mod_revision, value.into())
                        .await
                    {
                        tracing::debug!(error = %e, secret = %key, "updating the last-used label");
                    }
                }
                Err(e) => tracing::debug!(error = %e, "encoding secret"),
            }
        }
        if invalid {
            return Err(format!(
                "the token in secret {ns}/{secret_name} for service account {ns}/{} has been marked invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the '{LEGACY_TOKEN_INVALID_SINCE_LABEL}' label from the secret to temporarily allow use of this token",
                claims.service_account_name
            ));
        }
        Ok(UserInfo::service_account(
            ns,
            &claims.service_account_name,
            &claims.service_account_uid,
        ))
    }

    /// The object `r` names in `namespace` exists with its uid and is not being deleted.
    async fn check(
        &self,
        def: &ResourceDef,
        namespace: &str,
        r: &ObjectRef,
        what: &str,
    ) -> Result<(), String> {
        let key = def.storage_key(namespace, &r.name);
        let stored = self
            .storage
            .get(&key)
            .await
            .map_err(|e| format!("reading {what} {namespace}/{}: {e}", r.name))?;
        let Some(kv) = stored else {
            return Err(format!("{what} {namespace}/{} has been deleted", r.name));
        };
        let obj: Value = serde_json::from_slice(&kv.value)
            .map_err(|e| format!("decoding {what} {namespace}/{}: {e}", r.name))?;
        let meta = obj.get("metadata");
        let uid = meta
            .and_then(|m| m.get("uid"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if !r.uid.is_empty() && uid != r.uid {
            return Err(format!(
                "{what} UID ({uid}) does not match claim ({})",
                r.uid
            ));
        }
        if meta
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some_and(|t| !t.is_null())
        {
            return Err(format!("{what} {namespace}/{} is being deleted", r.name));
        }
        Ok(())
    }
}

/// Compares in time independent of where `a` and `b` differ (upstream's
/// `subtle.ConstantTimeCompare`).
fn ring_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[async_trait]
impl Authenticator for ServiceAccountAuthenticator {
    async fn authenticate_token(&self, token: &str) -> Option<UserInfo> {
        self.authenticate_token_for(token, &[])
            .await
            .map(|(user, _)| user)
    }

    async fn authenticate_token_for(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Option<(UserInfo, Vec<String>)> {
        self.review_token(token, audiences)
            .await
            .unwrap_or_else(|why| {
                tracing::debug!(%why, "service account token rejected");
                None
            })
    }

    async fn review_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
        // Not a JWT: another authenticator's token, not refused here nor worth a log line.
        if token.split('.').count() != 3 {
            return Ok(None);
        }
        self.authenticate_for(token, audiences).await.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::service_account_token::DEFAULT_ISSUER;
    use crate::storage::MemoryStorage;

    const NOW: i64 = 1_700_000_000;

    async fn put(storage: &MemoryStorage, def: &ResourceDef, name: &str, obj: Value) {
        storage
            .create(
                &def.storage_key("default", name),
                serde_json::to_vec(&obj).expect("json").into(),
            )
            .await
            .expect("stored");
    }

    #[tokio::test]
    async fn tokens_live_as_long_as_their_objects() {
        let storage = Arc::new(MemoryStorage::new());
        let sa = &crate::resources::core::SERVICEACCOUNTS;
        let pods = &crate::resources::pod::PODS;
        put(
            &storage,
            sa,
            "ci",
            json!({"metadata": {"name": "ci", "uid": "sa-1"}}),
        )
        .await;
        put(
            &storage,
            pods,
            "p",
            json!({"metadata": {"name": "p", "uid": "pod-1"}}),
        )
        .await;
        put(
            &storage,
            sa,
            "gone",
            json!({"metadata": {"name": "gone", "uid": "sa-2", "deletionTimestamp": "2024-01-01T00:00:00Z"}}),
        )
        .await;
        let issuer = Arc::new(TokenIssuer::generate(DEFAULT_ISSUER).expect("key"));
        let authn = ServiceAccountAuthenticator::new(
            Arc::clone(&issuer),
            storage.clone(),
            Arc::new(|| NOW),
        );
        let token = |name: &str, uid: &str, pod: Option<(&str, &str)>| {
            let mut c = Claims::new(
                DEFAULT_ISSUER,
                "default",
                name,
                uid,
                vec![DEFAULT_ISSUER.to_owned()],
                NOW,
                3600,
            );
            c.kubernetes.pod = pod.map(|(n, u)| ObjectRef {
                name: n.to_owned(),
                uid: u.to_owned(),
            });
            issuer.issue(&c).expect("signs")
        };
        struct Case {
            name: &'static str,
            token: String,
            ok: bool,
        }
        let cases = [
            Case {
                name: "live account",
                token: token("ci", "sa-1", None),
                ok: true,
            },
            Case {
                name: "recreated account",
                token: token("ci", "sa-0", None),
                ok: false,
            },
            Case {
                name: "deleted account",
                token: token("nobody", "sa-9", None),
                ok: false,
            },
            Case {
                name: "account being deleted",
                token: token("gone", "sa-2", None),
                ok: false,
            },
            Case {
                name: "live pod",
                token: token("ci", "sa-1", Some(("p", "pod-1"))),
                ok: true,
            },
            Case {
                name: "deleted pod",
                token: token("ci", "sa-1", Some(("q", "pod-2"))),
                ok: false,
            },
            Case {
                name: "recreated pod",
                token: token("ci", "sa-1", Some(("p", "pod-0"))),
                ok: false,
            },
            Case {
                name: "not a jwt",
                token: "admin-token".to_owned(),
                ok: false,
            },
        ];
        for case in cases {
            let got = authn.authenticate_token(&case.token).await;
            assert_eq!(got.is_some(), case.ok, "{}: {got:?}", case.name);
        }
        let user = authn
            .authenticate_token(&token("ci", "sa-1", Some(("p", "pod-1"))))
            .await
            .expect("authenticated");
        assert_eq!(user.username, "system:serviceaccount:default:ci");
        assert_eq!(user.uid, "sa-1");
        assert_eq!(user.extra[EXTRA_POD_NAME], ["p"]);
        assert!(user.extra[EXTRA_CREDENTIAL_ID][0].starts_with("JTI="));

        // Audiences: a token for `vault` and `ci` is refused by the API (requests) and
        // granted, by TokenReview, only the requested audiences it carries.
        let mut c = Claims::new(
            DEFAULT_ISSUER,
            "default",
            "ci",
            "sa-1",
            vec!["vault".to_owned(), "ci".to_owned()],
            NOW,
            3600,
        );
        c.kubernetes.pod = None;
        let vault = issuer.issue(&c).expect("signs");
        assert_eq!(
            authn.authenticate_token(&vault).await,
            None,
            "not for the API"
        );
        let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        let audience_cases: [(&str, Vec<String>, Option<Vec<String>>); 4] = [
            ("the API audience", vec![], None),
            ("one it carries", s(&["vault"]), Some(s(&["vault"]))),
            (
                "the intersection",
                s(&["x", "ci", "vault"]),
                Some(s(&["ci", "vault"])),
            ),
            ("none it carries", s(&["x"]), None),
        ];
        for (name, audiences, want) in audience_cases {
            let got = authn
                .authenticate_token_for(&vault, &audiences)
                .await
                .map(|(_, a)| a);
            assert_eq!(got, want, "{name}");
        }
        let api_token = token("ci", "sa-1", None);
        let (_, granted) = authn
            .authenticate_token_for(&api_token, &[])
            .await
            .expect("API token");
        assert_eq!(granted, [DEFAULT_ISSUER]);

        // A review says why a token of ours is refused, and ignores others' tokens.
        let why = authn
            .review_token(&vault, &[])
            .await
            .expect_err("not for the API");
        assert!(!why.is_empty());
        assert_eq!(authn.review_token("opaque", &[]).await, Ok(None));
        assert!(matches!(
            authn.review_token(&api_token, &[]).await,
            Ok(Some(_))
        ));
    }

    #[tokio::test]
    async fn legacy_tokens_live_while_their_secret_holds_them_and_is_not_invalid() {
        use base64::Engine;
        let storage = Arc::new(MemoryStorage::new());
        let secrets = &crate::resources::core::SECRETS;
        put(
            &storage,
            &crate::resources::core::SERVICEACCOUNTS,
            "ci",
            json!({"metadata": {"name": "ci", "uid": "sa-1"}}),
        )
        .await;
        let issuer = Arc::new(TokenIssuer::generate(DEFAULT_ISSUER).expect("key"));
        let authn = ServiceAccountAuthenticator::new(
            Arc::clone(&issuer),
            storage.clone(),
            Arc::new(|| NOW),
        );
        let legacy = |secret: &str, uid: &str| {
            issuer
                .issue_legacy(&LegacyClaims::new("default", "ci", uid, secret))
                .expect("signs")
        };
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let good = legacy("ci-token", "sa-1");
        put(
            &storage,
            secrets,
            "ci-token",
            json!({"metadata": {"name": "ci-token"}, "type": "kubernetes.io/service-account-token", "data": {"token": b64(&good)}}),
        )
        .await;
        let stale_uid = legacy("stale", "sa-0");
        put(
            &storage,
            secrets,
            "stale",
            json!({"metadata": {"name": "stale"}, "data": {"token": b64(&stale_uid)}}),
        )
        .await;
        let other = legacy("other", "sa-1");
        put(
            &storage,
            secrets,
            "other",
            json!({"metadata": {"name": "other"}, "data": {"token": b64("something else")}}),
        )
        .await;
        let invalid = legacy("invalid", "sa-1");
        put(
            &storage,
            secrets,
            "invalid",
            json!({"metadata": {"name": "invalid", "labels": {LEGACY_TOKEN_INVALID_SINCE_LABEL: "2023-01-01"}}, "data": {"token": b64(&invalid)}}),
        )
        .await;
        let cases = [
            ("held by its secret", good.clone(), true),
            ("account recreated", stale_uid, false),
            ("secret holds another token", other, false),
            ("secret deleted", legacy("nosuch", "sa-1"), false),
            ("marked invalid", invalid, false),
        ];
        for (name, token, ok) in cases {
            let got = authn.authenticate_token(&token).await;
            assert_eq!(got.is_some(), ok, "{name}: {got:?}");
        }
        let user = authn
            .authenticate_token(&good)
            .await
            .expect("authenticated");
        assert_eq!(user.username, "system:serviceaccount:default:ci");
        assert_eq!(user.uid, "sa-1");

        // The secret now says when its token was last used (NOW is 2023-11-14 UTC).
        let kv = storage
            .get(&secrets.storage_key("default", "ci-token"))
            .await
            .expect("read")
            .expect("stored");
        let secret: Value = serde_json::from_slice(&kv.value).expect("json");
        assert_eq!(
            secret["metadata"]["labels"][LEGACY_TOKEN_LAST_USED_LABEL],
            "2023-11-14"
        );
        // Used again the same day: no further write.
        authn
            .authenticate_token(&good)
            .await
            .expect("authenticated");
        let again = storage
            .get(&secrets.storage_key("default", "ci-token"))
            .await
            .expect("read")
            .expect("stored");
        assert_eq!(again.mod_revision, kv.mod_revision);
    }

    #[tokio::test]
    async fn an_invalidated_legacy_token_is_refused_with_upstreams_message_and_counts_as_used() {
        use base64::Engine;
        let storage = Arc::new(MemoryStorage::new());
        let secrets = &crate::resources::core::SECRETS;
        put(
            &storage,
            &crate::resources::core::SERVICEACCOUNTS,
            "ci",
            json!({"metadata": {"name": "ci", "uid": "sa-1"}}),
        )
        .await;
        let issuer = Arc::new(TokenIssuer::generate(DEFAULT_ISSUER).expect("key"));
        let authn = ServiceAccountAuthenticator::new(
            Arc::clone(&issuer),
            storage.clone(),
            Arc::new(|| NOW),
        );
        let token = issuer
            .issue_legacy(&LegacyClaims::new("default", "ci", "sa-1", "ci-token"))
            .expect("signs");
        let b64 = base64::engine::general_purpose::STANDARD.encode(&token);
        put(
            &storage,
            secrets,
            "ci-token",
            json!({"metadata": {"name": "ci-token", "labels": {
                LEGACY_TOKEN_INVALID_SINCE_LABEL: "2023-01-01",
                LEGACY_TOKEN_LAST_USED_LABEL: "2022-06-01",
            }}, "data": {"token": b64}}),
        )
        .await;
        let err = authn.authenticate(&token).await.expect_err("refused");
        assert_eq!(
            err,
            "the token in secret default/ci-token for service account default/ci has been \
             marked invalid. Use tokens from the TokenRequest API or manually created \
             secret-based tokens, or remove the 'kubernetes.io/legacy-token-invalid-since' \
             label from the secret to temporarily allow use of this token"
        );
        // The attempt counts as a use (NOW is 2023-11-14 UTC): the cleaner keeps the Secret.
        let kv = storage
            .get(&secrets.storage_key("default", "ci-token"))
            .await
            .expect("read")
            .expect("stored");
        let secret: Value = serde_json::from_slice(&kv.value).expect("json");
        assert_eq!(
            secret["metadata"]["labels"][LEGACY_TOKEN_LAST_USED_LABEL],
            "2023-11-14"
        );
        assert_eq!(
            secret["metadata"]["labels"][LEGACY_TOKEN_INVALID_SINCE_LABEL],
            "2023-01-01"
        );
        // A last-used date of tomorrow (a skewed clock elsewhere) is not rewritten.
        let token = issuer
            .issue_legacy(&LegacyClaims::new("default", "ci", "sa-1", "ci-token-2"))
            .expect("signs");
        put(
            &storage,
            secrets,
            "ci-token-2",
            json!({"metadata": {"name": "ci-token-2", "labels": {
                LEGACY_TOKEN_LAST_USED_LABEL: "2023-11-15",
            }}, "data": {"token": base64::engine::general_purpose::STANDARD.encode(&token)}}),
        )
        .await;
        let before = storage
            .get(&secrets.storage_key("default", "ci-token-2"))
            .await
            .expect("read")
            .expect("stored");
        authn.authenticate(&token).await.expect("valid");
        let after = storage
            .get(&secrets.storage_key("default", "ci-token-2"))
            .await
            .expect("read")
            .expect("stored");
        assert_eq!(after.mod_revision, before.mod_revision);
    }
}
