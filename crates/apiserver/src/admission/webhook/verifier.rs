//! The webhook server's certificate check: WebPKI against the `caBundle`, and also a self-signed certificate the bundle holds as-is, used as the serving certificate (what `openssl req -x509` makes, a CA certificate Go's TLS accepts as its own leaf but WebPKI refuses as `CaUsedAsEndEntity`).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, SignatureScheme};
use x509_parser::prelude::{ASN1Time, FromDer, GeneralName, X509Certificate};

/// Verifies as WebPKI does, and accepts a certificate of the bundle presented as it is, if it
/// is valid now and names the server.
#[derive(Debug)]
pub struct BundleVerifier {
    /// The WebPKI verifier over the bundle's roots.
    inner: Arc<dyn ServerCertVerifier>,
    /// The bundle's certificates, DER.
    bundle: Vec<CertificateDer<'static>>,
}

impl BundleVerifier {
    /// Wraps `inner` (built over the same roots) with `bundle`.
    pub fn new(inner: Arc<dyn ServerCertVerifier>, bundle: Vec<CertificateDer<'static>>) -> Self {
        Self { inner, bundle }
    }
}

impl ServerCertVerifier for BundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if !self
            .bundle
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return self.inner.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            );
        }
        let (_, cert) = X509Certificate::from_der(end_entity.as_ref())
            .map_err(|_| Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let at = i64::try_from(now.as_secs())
            .ok()
            .and_then(|s| ASN1Time::from_timestamp(s).ok())
            .ok_or(Error::InvalidCertificate(CertificateError::Expired))?;
        if !cert.validity().is_valid_at(at) {
            return Err(Error::InvalidCertificate(CertificateError::Expired));
        }
        if !names(&cert, server_name) {
            return Err(Error::InvalidCertificate(CertificateError::NotValidForName));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Whether the certificate's subject alternative names include `server_name` (DNS names
/// case-insensitively, with a leading `*.` matching one label; IP addresses exactly). The
/// common name is not read, as Go's TLS no longer does.
fn names(cert: &X509Certificate<'_>, server_name: &ServerName<'_>) -> bool {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return false;
    };
    san.value
        .general_names
        .iter()
        .any(|name| match (name, server_name) {
            (GeneralName::DNSName(pattern), ServerName::DnsName(host)) => {
                dns_matches(pattern, host.as_ref())
            }
            (GeneralName::IPAddress(bytes), ServerName::IpAddress(ip)) => {
                let ip: std::net::IpAddr = (*ip).into();
                match ip {
                    std::net::IpAddr::V4(v4) => *bytes == v4.octets().as_slice(),
                    std::net::IpAddr::V6(v6) => *bytes == v6.octets().as_slice(),
                }
            }
            _ => false,
        })
}

/// A DNS SAN pattern against a host name.
fn dns_matches(pattern: &str, host: &str) -> bool {
    let (pattern, host) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    match pattern.strip_prefix("*.") {
        Some(rest) => host
            .split_once('.')
            .is_some_and(|(label, tail)| !label.is_empty() && tail == rest),
        None => pattern == host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed CA certificate (as `openssl req -x509` makes) for `sans`.
    fn ca_cert(sans: &[&str]) -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        for san in sans {
            params.subject_alt_names.push(match san.parse() {
                Ok(ip) => rcgen::SanType::IpAddress(ip),
                Err(_) => rcgen::SanType::DnsName((*san).try_into().expect("dns")),
            });
        }
        params.self_signed(&key).expect("cert").der().clone()
    }

    fn verifier(bundle: Vec<CertificateDer<'static>>) -> BundleVerifier {
        let mut roots = rustls::RootCertStore::empty();
        for cert in &bundle {
            roots.add(cert.clone()).expect("root");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("verifier");
        BundleVerifier::new(inner, bundle)
    }

    #[test]
    fn a_self_signed_ca_serving_as_itself_is_trusted_for_its_names_only() {
        let cert = ca_cert(&["127.0.0.1", "hook.default.svc"]);
        let v = verifier(vec![cert.clone()]);
        let now = UnixTime::now();
        let check = |name: &str| {
            let name = ServerName::try_from(name.to_owned()).expect("name");
            v.verify_server_cert(&cert, &[], &name, &[], now)
        };
        assert!(check("127.0.0.1").is_ok());
        assert!(check("hook.default.svc").is_ok());
        assert_eq!(
            check("other.default.svc").map(|_| ()),
            Err(Error::InvalidCertificate(CertificateError::NotValidForName))
        );
        assert!(check("127.0.0.2").is_err());

        // A certificate not in the bundle goes through WebPKI, which refuses it.
        let stranger = ca_cert(&["127.0.0.1"]);
        let name = ServerName::try_from("127.0.0.1").expect("name");
        assert!(
            v.verify_server_cert(&stranger, &[], &name, &[], now)
                .is_err()
        );
    }

    #[test]
    fn wildcards_match_one_label() {
        assert!(dns_matches("*.default.svc", "hook.default.svc"));
        assert!(dns_matches("Hook.Default.svc", "hook.default.svc"));
        assert!(!dns_matches("*.default.svc", "a.hook.default.svc"));
        assert!(!dns_matches("*.default.svc", "default.svc"));
    }
}
