//! Bootstrap token Secrets (upstream's `k8s.io/cluster-bootstrap` `token/api` constants and `token/util`/`secret` helpers): the Secret's name and fields, the token's form, its expiration and the groups it authenticates into. The bootstrap controllers and the API server's bootstrap token authenticator read tokens through these.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;

/// The Secret type of bootstrap tokens.
pub const SECRET_TYPE_BOOTSTRAP_TOKEN: &str = "bootstrap.kubernetes.io/token";
/// Where bootstrap token Secrets live.
pub const TOKEN_SECRET_NAMESPACE: &str = "kube-system";
/// The prefix of a bootstrap token Secret's name, followed by its token ID.
pub const SECRET_NAME_PREFIX: &str = "bootstrap-token-";
/// The data key of the token ID.
pub const TOKEN_ID_KEY: &str = "token-id";
/// The data key of the token secret.
pub const TOKEN_SECRET_KEY: &str = "token-secret";
/// The data key of the RFC 3339 expiration.
pub const EXPIRATION_KEY: &str = "expiration";
/// The data key saying the token may sign `cluster-info`.
pub const USAGE_SIGNING_KEY: &str = "usage-bootstrap-signing";
/// The data key saying the token authenticates to the API server as a bearer token.
pub const USAGE_AUTHENTICATION_KEY: &str = "usage-bootstrap-authentication";
/// The data key of the comma-separated groups the token authenticates into besides
/// [`DEFAULT_GROUP`].
pub const EXTRA_GROUPS_KEY: &str = "auth-extra-groups";
/// The group every bootstrap token user is in.
pub const DEFAULT_GROUP: &str = "system:bootstrappers";
/// The prefix of a bootstrap token user's name, followed by the token ID.
pub const USER_PREFIX: &str = "system:bootstrap:";

/// The value of `key` in the Secret's data (or stringData), as text.
pub fn data(secret: &Secret, key: &str) -> Option<String> {
    if let Some(value) = secret.data.as_ref().and_then(|d| d.get(key)) {
        return String::from_utf8(value.0.clone()).ok();
    }
    secret
        .string_data
        .as_ref()
        .and_then(|d| d.get(key))
        .cloned()
}

/// Whether `s` is `len` characters of `[a-z0-9]`.
fn is_id(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// The token ID a Secret's name carries: `bootstrap-token-<6 of [a-z0-9]>`, as upstream's
/// `ParseName`.
pub fn token_id_of_name(name: &str) -> Option<&str> {
    let id = name.strip_prefix(SECRET_NAME_PREFIX)?;
    is_id(id, 6).then_some(id)
}

/// A bearer token's ID and secret when it has a bootstrap token's form,
/// `[a-z0-9]{6}.[a-z0-9]{16}` (upstream's `ParseToken`).
pub fn parse_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    (is_id(id, 6) && is_id(secret, 16)).then_some((id, secret))
}

/// When the token expires relative to `now`, as upstream's `GetExpiration`: no expiration
/// is `(None, false)`; an unparseable one or one at or before `now` is expired; otherwise
/// the time left.
pub fn expiration(secret: &Secret, now: Timestamp) -> (Option<Duration>, bool) {
    let Some(expiration) = data(secret, EXPIRATION_KEY).filter(|e| !e.is_empty()) else {
        return (None, false);
    };
    let Ok(at) = expiration.parse::<Timestamp>() else {
        tracing::debug!(
            secret = secret.metadata.name.as_deref().unwrap_or_default(),
            %expiration,
            "Unparseable expiration time; treating as expired"
        );
        return (None, true);
    };
    match at.duration_since(now).try_into() {
        Ok(left) if left > Duration::ZERO => (Some(left), false),
        _ => (None, true),
    }
}

/// Whether `group` may be an extra group of a bootstrap token, as upstream's
/// `ValidateBootstrapGroupName`: `system:bootstrappers:` followed by up to 256 of
/// `[a-z0-9:-]`, ending in `[a-z0-9]`.
fn valid_extra_group(group: &str) -> bool {
    let Some(rest) = group.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match rest.as_bytes().split_last() {
        Some((&last, init)) => {
            allowed(last)
                && init.len() <= 255
                && init.iter().all(|&b| allowed(b) || b == b':' || b == b'-')
        }
        None => false,
    }
}

/// The groups a bootstrap token Secret authenticates into, as upstream's `GetGroups`:
/// [`DEFAULT_GROUP`] and each of `auth-extra-groups`, sorted and without repeats; an extra
/// group of the wrong form is an error.
pub fn groups(secret: &Secret) -> Result<Vec<String>, String> {
    let mut groups = vec![DEFAULT_GROUP.to_owned()];
    let extra = data(secret, EXTRA_GROUPS_KEY).unwrap_or_default();
    if !extra.is_empty() {
        for group in extra.split(',') {
            if !valid_extra_group(group) {
                return Err(format!(
                    "bootstrap group {group:?} is invalid (must match \\Asystem:bootstrappers:[a-z0-9:-]{{0,255}}[a-z0-9]\\z)"
                ));
            }
            groups.push(group.to_owned());
        }
    }
    groups.sort();
    groups.dedup();
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    use kcm_testing::bootstrap_token_secret as secret;

    #[test]
    fn expiration_is_upstreams() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let cases = [
            (vec![], (None, false)),
            (
                vec![(EXPIRATION_KEY, "2026-01-01T00:00:10Z")],
                (Some(Duration::from_secs(10)), false),
            ),
            (vec![(EXPIRATION_KEY, "2026-01-01T00:00:00Z")], (None, true)),
            (vec![(EXPIRATION_KEY, "2025-12-31T23:00:00Z")], (None, true)),
            (vec![(EXPIRATION_KEY, "tomorrow")], (None, true)),
        ];
        for (data, want) in cases {
            assert_eq!(
                expiration(&secret("bootstrap-token-abcdef", &data), now),
                want,
                "{data:?}"
            );
        }
    }

    #[test]
    fn tokens_and_names_have_upstreams_form() {
        assert_eq!(
            parse_token("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        for bad in [
            "",
            "abcdef",
            "abcdef.",
            "abcde.0123456789abcdef",
            "abcdefg.0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcdef.0123456789abcdeF",
            "abcdef.0123456789abcde",
            "abcdef:0123456789abcdef",
            "abcdef.0123456789abcdef.x",
        ] {
            assert_eq!(parse_token(bad), None, "{bad:?}");
        }
        assert_eq!(token_id_of_name("bootstrap-token-abcdef"), Some("abcdef"));
        assert_eq!(token_id_of_name("bootstrap-token-ABCDEF"), None);
        assert_eq!(token_id_of_name("token-abcdef"), None);
    }

    #[test]
    fn groups_are_the_default_and_valid_extras_sorted() {
        assert_eq!(
            groups(&secret("bootstrap-token-abcdef", &[])),
            Ok(vec![DEFAULT_GROUP.to_owned()])
        );
        let extra = secret(
            "bootstrap-token-abcdef",
            &[(
                EXTRA_GROUPS_KEY,
                "system:bootstrappers:kubeadm:default-node-token,system:bootstrappers:a,system:bootstrappers:a",
            )],
        );
        assert_eq!(
            groups(&extra),
            Ok(vec![
                "system:bootstrappers".to_owned(),
                "system:bootstrappers:a".to_owned(),
                "system:bootstrappers:kubeadm:default-node-token".to_owned(),
            ])
        );
        for bad in [
            "system:masters",
            "system:bootstrappers:",
            "system:bootstrappers:ends-with-",
            "system:bootstrappers:Upper",
            "system:bootstrappers:a, system:bootstrappers:b",
        ] {
            let s = secret("bootstrap-token-abcdef", &[(EXTRA_GROUPS_KEY, bad)]);
            assert!(groups(&s).is_err(), "{bad:?}");
        }
    }
}
