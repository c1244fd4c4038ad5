//! ServiceAccount tokens: upstream's JWT claims, signed (ES256) with a key kept in the data dir, and their cryptographic validation (`pkg/serviceaccount/jwt.go` + `claims.go`).
//!
//! [`TokenIssuer::issue`] makes what `serviceaccounts/token` (TokenRequest) hands out;
//! [`TokenIssuer::verify`] checks signature, issuer, audience and the time claims, and
//! returns the claims, whose bound objects the
//! [`ServiceAccountAuthenticator`](crate::auth::service_account_authenticator::ServiceAccountAuthenticator)
//! then looks up in the store. Time is passed in (`now`, Unix seconds) so tests choose it.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rcgen::KeyPair;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::pki;

/// The issuer (and default API audience) of kube-apiserver's tokens in kind and kubeadm
/// clusters (`--service-account-issuer`).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The file the signing key is kept in, under the PKI directory (kubeadm's name).
pub const SIGNING_KEY_FILE: &str = "sa.key";
/// How far a token's time claims may be off (go-jose's `DefaultLeeway`, which upstream's
/// validation uses).
pub const LEEWAY_SECONDS: i64 = 60;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a key could not be loaded or a token not issued or verified.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing the key file failed.
    #[error("signing key: {0}")]
    Key(#[source] pki::Error),
    /// The key file does not hold a usable ECDSA P-256 key.
    #[error("signing key {path}: {why}")]
    BadKey {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// Signing or decoding failed (bad signature, malformed token, wrong issuer or audience).
    #[error("{0}")]
    Jwt(#[source] jsonwebtoken::errors::Error),
    /// The token is past its expiry (plus leeway).
    #[error("service account token has expired")]
    Expired,
    /// The token is not valid yet (`nbf`/`iat` in the future beyond the leeway).
    #[error("service account token is not valid yet")]
    NotYetValid,
    /// The claims are not a service account's.
    #[error("{0}")]
    Claims(&'static str),
}

/// A name and uid of an object a token names, as upstream's claims `ref`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// The object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// The `kubernetes.io` private claims.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The service account's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The service account.
    #[serde(default)]
    pub serviceaccount: ObjectRef,
    /// The pod the token is bound to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The secret the token is bound to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    /// The node the token is bound to (or the pod's node), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectRef>,
}

/// The claims of a bound service account token (upstream's `jwt.Claims` + `privateClaims`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer.
    pub iss: String,
    /// Subject: `system:serviceaccount:NS:NAME`.
    pub sub: String,
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry (Unix seconds).
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// Not before.
    pub nbf: i64,
    /// A unique id (upstream's credential id `JTI=...`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jti: String,
    /// The Kubernetes claims.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

impl Claims {
    /// The claims of a token for service account `namespace/name` (`uid`), valid from `now`
    /// for `expiration_seconds`, for `audiences`, bound to `pod`/`secret`/`node` if given
    /// (upstream's `serviceaccount.Claims`).
    pub fn new(
        issuer: &str,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: Vec<String>,
        now: i64,
        expiration_seconds: i64,
    ) -> Self {
        Self {
            iss: issuer.to_owned(),
            sub: crate::auth::user::service_account_username(namespace, name),
            aud: audiences,
            exp: now + expiration_seconds,
            iat: now,
            nbf: now,
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: KubernetesClaims {
                namespace: namespace.to_owned(),
                serviceaccount: ObjectRef {
                    name: name.to_owned(),
                    uid: uid.to_owned(),
                },
                pod: None,
                secret: None,
                node: None,
            },
        }
    }
}

/// The issuer of legacy, secret-based service account tokens (upstream's
/// `LegacyIssuer`); they carry no audience nor expiry.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// The claims of a legacy token kept in a `kubernetes.io/service-account-token` Secret
/// (upstream's `legacyPrivateClaims` with `iss` and `sub`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyClaims {
    /// Always [`LEGACY_ISSUER`].
    pub iss: String,
    /// `system:serviceaccount:NS:NAME`.
    pub sub: String,
    /// The service account's (and secret's) namespace.
    #[serde(rename = "kubernetes.io/serviceaccount/namespace", default)]
    pub namespace: String,
    /// The secret holding the token.
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name", default)]
    pub secret_name: String,
    /// The service account's name.
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name", default)]
    pub service_account_name: String,
    /// The service account's uid.
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid", default)]
    pub service_account_uid: String,
}

impl LegacyClaims {
    /// The claims of the token for `secret_name`, of service account `namespace/name` (`uid`)
    /// (upstream's `LegacyClaims`).
    pub fn new(namespace: &str, name: &str, uid: &str, secret_name: &str) -> Self {
        Self {
            iss: LEGACY_ISSUER.to_owned(),
            sub: crate::auth::user::service_account_username(namespace, name),
            namespace: namespace.to_owned(),
            secret_name: secret_name.to_owned(),
            service_account_name: name.to_owned(),
            service_account_uid: uid.to_owned(),
        }
    }
}

/// The `iss` claim of a JWT, read without verifying it, to pick the validation the token
/// needs (upstream's authenticator does the same with `jwt.ParseSigned`'s unsafe claims).
pub fn unverified_issuer(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(str::to_owned)
}

/// Signs and verifies service account tokens with one ECDSA P-256 key.
pub struct TokenIssuer {
    /// `iss` of issued tokens; the only issuer accepted.
    issuer: String,
    /// Audiences accepted when a request names none (upstream's `--api-audiences`).
    api_audiences: Vec<String>,
    /// Signs.
    encoding: EncodingKey,
    /// Verifies.
    decoding: DecodingKey,
    /// The key id: base64url SHA-256 of the public key's SubjectPublicKeyInfo, as upstream.
    kid: String,
    /// The public point's coordinates, base64url, for the JWKS.
    x: String,
    /// See `x`.
    y: String,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("issuer", &self.issuer)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl TokenIssuer {
    /// Loads the key from `pki_dir/sa.key`, or generates it there (mode 0600).
    pub fn load_or_create(pki_dir: &Path, issuer: &str) -> Result<Self> {
        let path = pki_dir.join(SIGNING_KEY_FILE);
        let bad = |why: String| Error::BadKey {
            path: path.display().to_string(),
            why,
        };
        let key = match std::fs::read_to_string(&path) {
            Ok(pem) => KeyPair::from_pem(&pem).map_err(|e| bad(e.to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = KeyPair::generate().map_err(|e| bad(e.to_string()))?;
                pki::create_dir(pki_dir).map_err(Error::Key)?;
                pki::write_file(&path, key.serialize_pem().as_bytes(), 0o600)
                    .map_err(Error::Key)?;
                key
            }
            Err(e) => return Err(bad(e.to_string())),
        };
        Self::from_key(&key, issuer).map_err(bad)
    }

    /// An issuer signing with `key` (must be ECDSA P-256).
    pub fn from_key(key: &KeyPair, issuer: &str) -> Result<Self, String> {
        if key.algorithm() != &rcgen::PKCS_ECDSA_P256_SHA256 {
            return Err("not an ECDSA P-256 key".to_owned());
        }
        // The uncompressed point: 0x04 || x (32 bytes) || y (32 bytes).
        let point = key.public_key_raw();
        if point.len() != 65 || point[0] != 4 {
            return Err("unexpected public key encoding".to_owned());
        }
        let x = URL_SAFE_NO_PAD.encode(&point[1..33]);
        let y = URL_SAFE_NO_PAD.encode(&point[33..65]);
        let decoding = DecodingKey::from_ec_components(&x, &y).map_err(|e| e.to_string())?;
        let digest = ring::digest::digest(
            &ring::digest::SHA256,
            &rcgen::PublicKeyData::subject_public_key_info(key),
        );
        Ok(Self {
            issuer: issuer.to_owned(),
            api_audiences: vec![issuer.to_owned()],
            encoding: EncodingKey::from_ec_der(&key.serialize_der()),
            decoding,
            kid: URL_SAFE_NO_PAD.encode(digest.as_ref()),
            x,
            y,
        })
    }

    /// A fresh issuer with an in-memory key (tests, in-memory servers).
    pub fn generate(issuer: &str) -> Result<Self> {
        let key = KeyPair::generate().map_err(|e| Error::BadKey {
            path: String::new(),
            why: e.to_string(),
        })?;
        Self::from_key(&key, issuer).map_err(|why| Error::BadKey {
            path: String::new(),
            why,
        })
    }

    /// The issuer URL.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The audiences of a token request that names none.
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }

    /// Signs `claims`.
    pub fn issue(&self, claims: &Claims) -> Result<String> {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).map_err(Error::Jwt)
    }

    /// Verifies `token` at `now` for one of `audiences` (the API audiences when empty):
    /// signature, issuer, audience, expiry and not-before (each with upstream's leeway),
    /// and that the claims name a service account.
    pub fn verify(&self, token: &str, audiences: &[String], now: i64) -> Result<Claims> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[&self.issuer]);
        let audiences = if audiences.is_empty() {
            &self.api_audiences[..]
        } else {
            audiences
        };
        validation.set_audience(audiences);
        // Time is checked below against the caller's clock.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .map_err(Error::Jwt)?
            .claims;
        if now > claims.exp + LEEWAY_SECONDS {
            return Err(Error::Expired);
        }
        if claims.nbf > now + LEEWAY_SECONDS || claims.iat > now + LEEWAY_SECONDS {
            return Err(Error::NotYetValid);
        }
        let k = &claims.kubernetes;
        if k.namespace.is_empty() || k.serviceaccount.name.is_empty() {
            return Err(Error::Claims(
                "service account token is missing its namespace or name",
            ));
        }
        if claims.sub
            != crate::auth::user::service_account_username(&k.namespace, &k.serviceaccount.name)
        {
            return Err(Error::Claims(
                "sub does not match the service account claims",
            ));
        }
        Ok(claims)
    }

    /// Signs legacy `claims` (no `kid`, as upstream's legacy tokens).
    pub fn issue_legacy(&self, claims: &LegacyClaims) -> Result<String> {
        jsonwebtoken::encode(&Header::new(Algorithm::ES256), claims, &self.encoding)
            .map_err(Error::Jwt)
    }

    /// Verifies a legacy token: signature, [`LEGACY_ISSUER`], and claims that name a
    /// service account and secret and agree with `sub` (upstream's `legacyValidator`'s
    /// claim checks; the objects are looked up by the authenticator).
    pub fn verify_legacy(&self, token: &str) -> Result<LegacyClaims> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[LEGACY_ISSUER]);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["iss", "sub"]);
        let claims = jsonwebtoken::decode::<LegacyClaims>(token, &self.decoding, &validation)
            .map_err(Error::Jwt)?
            .claims;
        if claims.namespace.is_empty() {
            return Err(Error::Claims("namespace claim is missing"));
        }
        if claims.secret_name.is_empty() {
            return Err(Error::Claims("secretName claim is missing"));
        }
        if claims.service_account_name.is_empty() || claims.service_account_uid.is_empty() {
            return Err(Error::Claims("serviceAccount claims are missing"));
        }
        if claims.sub
            != crate::auth::user::service_account_username(
                &claims.namespace,
                &claims.service_account_name,
            )
        {
            return Err(Error::Claims(
                "sub does not match the service account claims",
            ));
        }
        Ok(claims)
    }

    /// `/openid/v1/jwks`: the public key as a JSON Web Key Set.
    pub fn jwks(&self) -> Value {
        json!({"keys": [{
            "use": "sig",
            "kty": "EC",
            "kid": self.kid,
            "crv": "P-256",
            "alg": "ES256",
            "x": self.x,
            "y": self.y,
        }]})
    }

    /// `/.well-known/openid-configuration`, with the JWKS at `jwks_uri` (upstream's
    /// `openIDMetadata`).
    pub fn openid_configuration(&self, jwks_uri: &str) -> Value {
        json!({
            "issuer": self.issuer,
            "jwks_uri": jwks_uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;

    fn claims(aud: &str, now: i64, ttl: i64) -> Claims {
        Claims::new(
            DEFAULT_ISSUER,
            "default",
            "ci",
            "uid-1",
            vec![aud.to_owned()],
            now,
            ttl,
        )
    }

    #[test]
    fn claims_are_upstreams() {
        let c = claims(DEFAULT_ISSUER, NOW, 3600);
        let v = serde_json::to_value(&c).expect("serializes");
        assert_eq!(v["sub"], "system:serviceaccount:default:ci");
        assert_eq!(v["aud"], json!([DEFAULT_ISSUER]));
        assert_eq!(v["exp"], NOW + 3600);
        assert_eq!(
            v["kubernetes.io"],
            json!({"namespace": "default", "serviceaccount": {"name": "ci", "uid": "uid-1"}})
        );
    }

    #[test]
    fn verification_cases() {
        let issuer = TokenIssuer::generate(DEFAULT_ISSUER).expect("key");
        let other = TokenIssuer::generate(DEFAULT_ISSUER).expect("key");
        let foreign_issuer = TokenIssuer::generate("https://elsewhere").expect("key");
        let good = issuer
            .issue(&claims(DEFAULT_ISSUER, NOW, 3600))
            .expect("signs");
        struct Case {
            name: &'static str,
            token: String,
            audiences: Vec<String>,
            now: i64,
            ok: bool,
        }
        let cases = [
            Case {
                name: "valid",
                token: good.clone(),
                audiences: vec![],
                now: NOW + 10,
                ok: true,
            },
            Case {
                name: "expired within the leeway",
                token: good.clone(),
                audiences: vec![],
                now: NOW + 3600 + LEEWAY_SECONDS,
                ok: true,
            },
            Case {
                name: "expired",
                token: good.clone(),
                audiences: vec![],
                now: NOW + 3600 + LEEWAY_SECONDS + 1,
                ok: false,
            },
            Case {
                name: "not yet valid",
                token: good.clone(),
                audiences: vec![],
                now: NOW - LEEWAY_SECONDS - 1,
                ok: false,
            },
            Case {
                name: "wrong audience",
                token: issuer.issue(&claims("vault", NOW, 3600)).expect("signs"),
                audiences: vec![],
                now: NOW,
                ok: false,
            },
            Case {
                name: "requested audience",
                token: issuer.issue(&claims("vault", NOW, 3600)).expect("signs"),
                audiences: vec!["vault".to_owned()],
                now: NOW,
                ok: true,
            },
            Case {
                name: "signed by another key",
                token: other
                    .issue(&claims(DEFAULT_ISSUER, NOW, 3600))
                    .expect("signs"),
                audiences: vec![],
                now: NOW,
                ok: false,
            },
            Case {
                name: "another issuer",
                token: foreign_issuer
                    .issue(&claims(DEFAULT_ISSUER, NOW, 3600))
                    .expect("signs"),
                audiences: vec![],
                now: NOW,
                ok: false,
            },
            Case {
                name: "garbage",
                token: "a.b.c".to_owned(),
                audiences: vec![],
                now: NOW,
                ok: false,
            },
            Case {
                name: "tampered payload",
                token: {
                    let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
                    let mut c = claims(DEFAULT_ISSUER, NOW, 3600);
                    c.kubernetes.serviceaccount.name = "admin".to_owned();
                    c.sub = "system:serviceaccount:default:admin".to_owned();
                    parts[1] = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&c).expect("serializes"));
                    parts.join(".")
                },
                audiences: vec![],
                now: NOW,
                ok: false,
            },
        ];
        for case in cases {
            let got = issuer.verify(&case.token, &case.audiences, case.now);
            assert_eq!(got.is_ok(), case.ok, "{}: {got:?}", case.name);
        }
    }

    #[test]
    fn the_key_is_kept_in_the_data_dir() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = TokenIssuer::load_or_create(dir.path(), DEFAULT_ISSUER).expect("creates");
        let second = TokenIssuer::load_or_create(dir.path(), DEFAULT_ISSUER).expect("loads");
        assert_eq!(first.kid, second.kid);
        let token = first
            .issue(&claims(DEFAULT_ISSUER, NOW, 600))
            .expect("signs");
        assert!(second.verify(&token, &[], NOW).is_ok());
        let jwks = second.jwks();
        assert_eq!(jwks["keys"][0]["kid"], first.kid);
        assert_eq!(jwks["keys"][0]["kty"], "EC");
        let header = jsonwebtoken::decode_header(&token).expect("header");
        assert_eq!(header.kid.as_deref(), Some(first.kid.as_str()));
    }
}
