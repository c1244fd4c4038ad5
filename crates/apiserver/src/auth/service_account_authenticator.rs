//! Authenticating ServiceAccount tokens: a verified JWT whose service account (and bound pod or secret) still exists with the uid it names, as upstream's `serviceaccount.JWTTokenAuthenticator` with the legacy-free `validator.Validate`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::auth::authenticator::Authenticator;
use crate::auth::service_account_token::{Claims, ObjectRef, TokenIssuer};
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
}
