//! Turning a bearer token into a [`UserInfo`] (apiserver's `authenticator.Token`): the seam `tokenreviews` and the request filter share.

use std::fmt::Debug;

use crate::auth::user::UserInfo;

/// Authenticates bearer tokens.
pub trait Authenticator: Send + Sync + Debug {
    /// The user `token` authenticates as, or `None` when it authenticates nobody.
    fn authenticate_token(&self, token: &str) -> Option<UserInfo>;
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

impl Authenticator for StaticToken {
    fn authenticate_token(&self, token: &str) -> Option<UserInfo> {
        (!token.is_empty() && constant_time_eq(token.as_bytes(), self.token.as_bytes()))
            .then(|| self.user.clone())
    }
}

/// Authenticates nobody: a registry built without a token (tests of other layers).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTokens;

impl Authenticator for NoTokens {
    fn authenticate_token(&self, _token: &str) -> Option<UserInfo> {
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

    #[test]
    fn a_static_token_authenticates_its_user_only() {
        let auth = StaticToken::new("s3cret", UserInfo::admin());
        assert_eq!(auth.authenticate_token("s3cret"), Some(UserInfo::admin()));
        assert_eq!(auth.authenticate_token("s3cre"), None);
        assert_eq!(auth.authenticate_token(""), None);
        assert_eq!(NoTokens.authenticate_token("s3cret"), None);
        assert!(!format!("{auth:?}").contains("s3cret"));
    }

    #[test]
    fn compares_secrets() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
