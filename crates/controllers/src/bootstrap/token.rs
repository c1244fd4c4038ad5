//! Bootstrap token Secrets as the bootstrap controllers read them (upstream's `cluster-bootstrap/token/api` constants and `token/util`/`secret` helpers): the name, the token fields, usages and expiration, and the detached JWS that signs `cluster-info`.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
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
/// The namespace of the `cluster-info` ConfigMap.
pub const CONFIG_MAP_NAMESPACE: &str = "kube-public";
/// The name of the ConfigMap the signer signs.
pub const CONFIG_MAP_NAME: &str = "cluster-info";
/// The ConfigMap key whose content is signed.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// The prefix of a signature's key, followed by the token ID.
pub const JWS_SIGNATURE_KEY_PREFIX: &str = "jws-kubeconfig-";

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

/// The token ID a Secret's name carries: `bootstrap-token-<6 of [a-z0-9]>`, as upstream's
/// `ParseName`.
pub fn token_id_of_name(name: &str) -> Option<&str> {
    let id = name.strip_prefix(SECRET_NAME_PREFIX)?;
    (id.len() == 6
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
    .then_some(id)
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

/// The token ID and secret of a Secret that may sign `cluster-info` now, as upstream's
/// `validateSecretForSigning`: the name's ID equals `token-id`, a secret is set, the token
/// has not expired and `usage-bootstrap-signing` is `true`.
pub fn signing_token(secret: &Secret, now: Timestamp) -> Option<(String, String)> {
    let name_id = token_id_of_name(secret.metadata.name.as_deref()?)?;
    let id = data(secret, TOKEN_ID_KEY).filter(|id| !id.is_empty())?;
    if id != name_id {
        return None;
    }
    let token_secret = data(secret, TOKEN_SECRET_KEY).filter(|s| !s.is_empty())?;
    if expiration(secret, now).1 {
        return None;
    }
    (data(secret, USAGE_SIGNING_KEY).as_deref() == Some("true")).then_some((id, token_secret))
}

/// The detached JWS (`header..signature`, HS256 keyed by the token secret, `kid` the token
/// ID) of `content`, as upstream's `jws.ComputeDetachedSignature`.
pub fn detached_signature(content: &str, token_id: &str, token_secret: &str) -> String {
    // go-jose writes the protected header's keys sorted.
    let header = serde_json::json!({"alg": "HS256", "kid": token_id}).to_string();
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.as_bytes()),
        URL_SAFE_NO_PAD.encode(content.as_bytes())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token_secret.as_bytes());
    let tag = ring::hmac::sign(&key, signing_input.as_bytes());
    format!(
        "{}..{}",
        URL_SAFE_NO_PAD.encode(header.as_bytes()),
        URL_SAFE_NO_PAD.encode(tag.as_ref())
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    #[test]
    fn signatures_match_upstreams_vectors() {
        let content = "Hello from the other side. I must have called a thousand times.";
        assert_eq!(
            detached_signature(content, "joshua", "my voice is my passcode"),
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8"
        );
        assert_eq!(
            detached_signature("", "joshua", "my voice is my passcode"),
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk"
        );
        assert_eq!(
            detached_signature(content, "joshua", ""),
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8"
        );
    }

    fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(TOKEN_SECRET_NAMESPACE.to_owned()),
                ..Default::default()
            },
            type_: Some(SECRET_TYPE_BOOTSTRAP_TOKEN.to_owned()),
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        }
    }

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
    fn only_valid_unexpired_signing_tokens_sign() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let good = [
            (TOKEN_ID_KEY, "abcdef"),
            (TOKEN_SECRET_KEY, "0123456789abcdef"),
            (USAGE_SIGNING_KEY, "true"),
        ];
        assert_eq!(
            signing_token(&secret("bootstrap-token-abcdef", &good), now),
            Some(("abcdef".to_owned(), "0123456789abcdef".to_owned()))
        );
        // The name's ID must match, and be a token ID.
        assert_eq!(
            signing_token(&secret("bootstrap-token-zzzzzz", &good), now),
            None
        );
        assert_eq!(signing_token(&secret("token-abcdef", &good), now), None);
        assert_eq!(token_id_of_name("bootstrap-token-ABCDEF"), None);
        // No signing usage, no secret, or expired: no signature.
        assert_eq!(
            signing_token(&secret("bootstrap-token-abcdef", &good[..2]), now),
            None
        );
        assert_eq!(
            signing_token(&secret("bootstrap-token-abcdef", &[good[0], good[2]]), now),
            None
        );
        let mut expired = good.to_vec();
        expired.push((EXPIRATION_KEY, "2025-01-01T00:00:00Z"));
        assert_eq!(
            signing_token(&secret("bootstrap-token-abcdef", &expired), now),
            None
        );
    }
}
