//! X.509 client certificates: a certificate signed by the cluster CA authenticates as its CN in its O groups (apiserver's `x509.Authenticator` with `CommonNameUserConversion`); issuing such certificates (the admin's in `kcm up`'s kubeconfig).
//!
//! The TLS layer asks for a client certificate but accepts any (checking only that the
//! client holds its key), as Go's `tls.RequestClientCert` in kube-apiserver: the chain is
//! verified here, per request, so a certificate from another CA gets upstream's 401 rather
//! than a failed handshake.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::DigitallySignedStruct;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use x509_parser::prelude::{ASN1Time, FromDer, X509Certificate};

use crate::auth::user::{ALL_AUTHENTICATED, UserInfo};

/// The peer certificate of a TLS connection, as the request extension the authentication
/// filter reads.
#[derive(Clone, Debug)]
pub struct PeerCertificate(pub Arc<Vec<u8>>);

/// Authenticates client certificates signed by one CA.
#[derive(Clone)]
pub struct ClientCertAuthenticator {
    /// The CA certificate, DER.
    ca_der: Arc<Vec<u8>>,
}

impl std::fmt::Debug for ClientCertAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertAuthenticator")
            .finish_non_exhaustive()
    }
}

impl ClientCertAuthenticator {
    /// Trusts the CA in `ca_pem`; `None` when it holds no certificate.
    pub fn new(ca_pem: &str) -> Option<Self> {
        crate::pki::first_cert_der(ca_pem).map(|der| Self {
            ca_der: Arc::new(der),
        })
    }

    /// The user `cert_der` authenticates as at `now` (Unix seconds), or why not: signed by
    /// the CA, within its validity, usable for client auth, with a common name.
    pub fn authenticate(&self, cert_der: &[u8], now: i64) -> Result<UserInfo, String> {
        let (_, ca) =
            X509Certificate::from_der(&self.ca_der).map_err(|e| format!("CA certificate: {e}"))?;
        let (_, cert) =
            X509Certificate::from_der(cert_der).map_err(|e| format!("client certificate: {e}"))?;
        if cert.issuer() != ca.subject() {
            return Err("x509: certificate signed by unknown authority".to_owned());
        }
        cert.verify_signature(Some(ca.public_key()))
            .map_err(|_| "x509: certificate signed by unknown authority".to_owned())?;
        let at = ASN1Time::from_timestamp(now).map_err(|e| e.to_string())?;
        if !cert.validity().is_valid_at(at) {
            return Err("x509: certificate has expired or is not yet valid".to_owned());
        }
        if let Ok(Some(eku)) = cert.extended_key_usage()
            && !eku.value.any
            && !eku.value.client_auth
        {
            return Err("x509: certificate specifies an incompatible key usage".to_owned());
        }
        let subject = cert.subject();
        let username = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .unwrap_or("")
            .to_owned();
        if username.is_empty() {
            return Err("x509: certificate has no common name".to_owned());
        }
        let mut groups: Vec<String> = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok())
            .map(str::to_owned)
            .collect();
        groups.push(ALL_AUTHENTICATED.to_owned());
        Ok(UserInfo {
            username,
            groups,
            ..UserInfo::default()
        })
    }
}

/// Requests a client certificate and accepts any, checking only the handshake signature
/// (proof the client holds the key); [`ClientCertAuthenticator`] judges the certificate.
#[derive(Debug)]
pub struct RequestClientCert {
    /// The algorithms handshake signatures may use.
    algorithms: WebPkiSupportedAlgorithms,
}

impl RequestClientCert {
    /// With the ring provider's algorithms.
    pub fn new() -> Self {
        Self {
            algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        }
    }
}

impl Default for RequestClientCert {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A client certificate for `user` in `groups`, signed by the CA whose key is `ca_key_pem`
/// (kcm's CA, subject `CN=kcm-ca`): `(certificate PEM, key PEM)`, valid for a year, as
/// kubeadm's `admin.conf` certificate.
pub fn issue(ca_key_pem: &str, user: &str, groups: &[&str]) -> Result<(String, String), String> {
    let ca_key = KeyPair::from_pem(ca_key_pem).map_err(|e| e.to_string())?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, crate::pki::CA_COMMON_NAME);
    let issuer = Issuer::new(ca_params, &ca_key);
    let key = KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    for group in groups {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *group);
    }
    params.distinguished_name.push(DnType::CommonName, user);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let (from, until) = (
        today.yesterday().map_err(|e| e.to_string())?,
        today
            .checked_add(jiff::Span::new().years(1))
            .map_err(|e| e.to_string())?,
    );
    // Midnight UTC of each date (rcgen's time type is not ours to name).
    params.not_before = rcgen::date_time_ymd(
        i32::from(from.year()),
        from.month().unsigned_abs(),
        from.day().unsigned_abs(),
    );
    params.not_after = rcgen::date_time_ymd(
        i32::from(until.year()),
        until.month().unsigned_abs(),
        until.day().unsigned_abs(),
    );
    let cert = params.signed_by(&key, &issuer).map_err(|e| e.to_string())?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA (subject `CN=kcm-ca`) and its key.
    fn ca() -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, crate::pki::CA_COMMON_NAME);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let cert = params.self_signed(&key).expect("signs");
        (cert.pem(), key.serialize_pem())
    }

    fn der(pem: &str) -> Vec<u8> {
        crate::pki::first_cert_der(pem).expect("pem")
    }

    #[test]
    fn certificates_of_the_ca_authenticate_their_cn_and_orgs() {
        let (ca_pem, ca_key) = ca();
        let (other_pem, other_key) = ca();
        let authn = ClientCertAuthenticator::new(&ca_pem).expect("ca");
        let now = jiff::Timestamp::now().as_second();
        let (admin, _) = issue(&ca_key, "kubernetes-admin", &["system:masters"]).expect("issues");
        let user = authn
            .authenticate(&der(&admin), now)
            .expect("authenticated");
        assert_eq!(user.username, "kubernetes-admin");
        assert_eq!(user.groups, ["system:masters", "system:authenticated"]);

        let (foreign, _) =
            issue(&other_key, "kubernetes-admin", &["system:masters"]).expect("issues");
        let err = authn
            .authenticate(&der(&foreign), now)
            .expect_err("other CA");
        assert!(err.contains("unknown authority"), "{err}");
        assert!(ClientCertAuthenticator::new(&other_pem).is_some());

        let err = authn
            .authenticate(&der(&admin), now + 2 * 365 * 24 * 3600)
            .expect_err("expired");
        assert!(err.contains("expired"), "{err}");
        assert!(authn.authenticate(b"junk", now).is_err());
    }
}
