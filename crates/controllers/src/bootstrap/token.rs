//! Bootstrap token Secrets as the bootstrap controllers read them: the fields and helpers of [`kcm_machinery::bootstrap_token`] (shared with the API server's bootstrap token authenticator), and the detached JWS that signs `cluster-info`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
pub use kcm_machinery::bootstrap_token::{
    EXPIRATION_KEY, SECRET_NAME_PREFIX, SECRET_TYPE_BOOTSTRAP_TOKEN, TOKEN_ID_KEY,
    TOKEN_SECRET_KEY, TOKEN_SECRET_NAMESPACE, USAGE_SIGNING_KEY, data, expiration,
    token_id_of_name,
};

/// The namespace of the `cluster-info` ConfigMap.
pub const CONFIG_MAP_NAMESPACE: &str = "kube-public";
/// The name of the ConfigMap the signer signs.
pub const CONFIG_MAP_NAME: &str = "cluster-info";
/// The ConfigMap key whose content is signed.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// The prefix of a signature's key, followed by the token ID.
pub const JWS_SIGNATURE_KEY_PREFIX: &str = "jws-kubeconfig-";

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

    use kcm_testing::bootstrap_token_secret as secret;

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
