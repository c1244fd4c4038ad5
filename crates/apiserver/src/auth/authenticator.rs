//! Turning a bearer token into a [`UserInfo`] (apiserver's `authenticator.Token`): the seam `tokenreviews` and the request filter share.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;

use crate::auth::user::UserInfo;

/// The audience of the API server itself (kube-apiserver's `--api-audiences`, which defaults
/// to the service account issuer): what a request's token must be for, and what a
/// TokenReview naming no audiences asks about.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Authenticates bearer tokens. Async because a ServiceAccount token is only valid while the
/// objects it is bound to exist, which takes a read of the store.
#[async_trait]
pub trait Authenticator: Send + Sync + Debug {
    /// The user `token` authenticates as, or `None` when it authenticates nobody.
    async fn authenticate_token(&self, token: &str) -> Option<UserInfo>;

    /// The user `token` authenticates as for one of `audiences` ([`API_AUDIENCE`] when
    /// empty), with the requested audiences it is valid for (what a TokenReview answers).
    /// By default the authenticator is audience-agnostic, as upstream's
    /// `WrapAudienceAgnosticToken`: its tokens are good for the API audience only.
    async fn authenticate_token_for(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Option<(UserInfo, Vec<String>)> {
        let granted = if audiences.is_empty() {
            vec![API_AUDIENCE.to_owned()]
        } else {
            audiences
                .iter()
                .filter(|a| *a == API_AUDIENCE)
                .cloned()
                .collect()
        };
        if granted.is_empty() {
            return None;
        }
        let user = self.authenticate_token(token).await?;
        Some((user, granted))
    }

    /// [`Self::authenticate_token_for`] with the reason a token this authenticator recognises
    /// is refused (expired, bound object deleted, bad signature): what a TokenReview reports
    /// in `status.error`. `Ok(None)`: not this authenticator's token.
    async fn review_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
        Ok(self.authenticate_token_for(token, audiences).await)
    }
}

/// Tries authenticators in order; the first that knows the token wins (upstream's
/// `union.New` of token authenticators).
#[derive(Debug, Default)]
pub struct Union(pub Vec<Arc<dyn Authenticator>>);

#[async_trait]
impl Authenticator for Union {
    async fn authenticate_token(&self, token: &str) -> Option<UserInfo> {
        for a in &self.0 {
            if let Some(user) = a.authenticate_token(token).await {
                return Some(user);
            }
        }
        None
    }

    async fn authenticate_token_for(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Option<(UserInfo, Vec<String>)> {
        for a in &self.0 {
            if let Some(found) = a.authenticate_token_for(token, audiences).await {
                return Some(found);
            }
        }
        None
    }

    /// The first authenticator that accepts the token wins; otherwise the refusals of those
    /// that recognised it, aggregated as upstream's `utilerrors.NewAggregate` prints them.
    async fn review_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
        let mut errors = Vec::new();
        for a in &self.0 {
            match a.review_token(token, audiences).await {
                Ok(Some(found)) => return Ok(Some(found)),
                Ok(None) => {}
                Err(why) => errors.push(why),
            }
        }
        match errors.len() {
            0 => Ok(None),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}

/// One static token for one user (kcm's admin token; upstream's `--token-auth-file` with one
/// line).
pub struct StaticToken {
    /// The secret.
    token: String,
    /// Who it authenticates as.
    user: UserInfo,
}

impl Debug for StaticToken {
    // The token is a secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticToken")
            .field("user", &self.user.username)
            .finish_non_exhaustive()
    }
}

impl StaticToken {
    /// `token` authenticates as `user`.
    pub fn new(token: impl Into<String>, user: UserInfo) -> Self {
        Self {
            token: token.into(),
            user,
        }
    }
}

#[async_trait]
impl Authenticator for StaticToken {
    async fn authenticate_token(&self, token: &str) -> Option<UserInfo> {
        (!token.is_empty() && constant_time_eq(token.as_bytes(), self.token.as_bytes()))
            .then(|| self.user.clone())
    }
}

/// Authenticates nobody: a registry built without a token (tests of other layers).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTokens;

#[async_trait]
impl Authenticator for NoTokens {
    async fn authenticate_token(&self, _token: &str) -> Option<UserInfo> {
        None
    }
}

/// Compares two secrets without an early exit on the first differing byte.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_static_token_authenticates_its_user_only() {
        let auth = StaticToken::new("s3cret", UserInfo::admin());
        assert_eq!(
            auth.authenticate_token("s3cret").await,
            Some(UserInfo::admin())
        );
        assert_eq!(auth.authenticate_token("s3cre").await, None);
        assert_eq!(auth.authenticate_token("").await, None);
        assert_eq!(NoTokens.authenticate_token("s3cret").await, None);
        assert!(!format!("{auth:?}").contains("s3cret"));
    }

    #[tokio::test]
    async fn a_union_asks_each_in_turn() {
        let bob = UserInfo {
            username: "bob".to_owned(),
            ..UserInfo::default()
        };
        let union = Union(vec![
            Arc::new(NoTokens),
            Arc::new(StaticToken::new("a", UserInfo::admin())),
            Arc::new(StaticToken::new("b", bob.clone())),
        ]);
        assert_eq!(union.authenticate_token("a").await, Some(UserInfo::admin()));
        assert_eq!(union.authenticate_token("b").await, Some(bob));
        assert_eq!(union.authenticate_token("c").await, None);
    }

    #[tokio::test]
    async fn audience_agnostic_tokens_are_for_the_api_audience_only() {
        let auth = StaticToken::new("s3cret", UserInfo::admin());
        let api = vec![API_AUDIENCE.to_owned()];
        let cases: [(&str, Vec<String>, Option<Vec<String>>); 4] = [
            ("no audiences: the API's", vec![], Some(api.clone())),
            ("the API audience", api.clone(), Some(api.clone())),
            (
                "the API audience among others: only it is granted",
                vec!["vault".to_owned(), API_AUDIENCE.to_owned()],
                Some(api.clone()),
            ),
            ("another audience only", vec!["vault".to_owned()], None),
        ];
        for (name, audiences, want) in cases {
            let got = auth
                .authenticate_token_for("s3cret", &audiences)
                .await
                .map(|(_, a)| a);
            assert_eq!(got, want, "{name}");
        }
        assert_eq!(auth.authenticate_token_for("nope", &[]).await, None);
    }

    #[test]
    fn compares_secrets() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
