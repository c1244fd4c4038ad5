//! The serving certificate: loaded from `--tls-cert-file`/`--tls-private-key-file`, or
//! self-signed in memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::error::{Error, Result};

/// A certificate chain and its key, ready for a rustls server.
pub struct ServingCert {
    /// Leaf first, then intermediates.
    chain: Vec<CertificateDer<'static>>,
    /// The leaf's private key.
    key: PrivateKeyDer<'static>,
    /// The chain as PEM, for clients that want to trust a generated certificate.
    chain_pem: String,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert")
            .field("chain_len", &self.chain.len())
            .finish_non_exhaustive()
    }
}

fn generated() -> PathBuf {
    PathBuf::from("<generated>")
}

impl ServingCert {
    /// A self-signed certificate for `hosts` (DNS names or IP addresses), generated in memory,
    /// as kube-controller-manager does when no certificate is given.
    pub fn self_signed(hosts: Vec<String>) -> Result<Self> {
        let certified =
            rcgen::generate_simple_self_signed(hosts).map_err(|e| Error::Certificate {
                path: generated(),
                message: e.to_string(),
            })?;
        let chain_pem = certified.cert.pem();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            certified.signing_key.serialize_der(),
        ));
        Ok(Self {
            chain: vec![certified.cert.der().clone()],
            key,
            chain_pem,
        })
    }

    /// Reads a PEM chain (leaf first) and a PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub fn from_files(cert_file: &Path, key_file: &Path) -> Result<Self> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|e| Error::Certificate {
                path: path.to_owned(),
                message: e.to_string(),
            })
        };
        let cert_pem = read(cert_file)?;
        let key_pem = read(key_file)?;
        let chain = rustls_pemfile::certs(&mut cert_pem.as_slice())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Certificate {
                path: cert_file.to_owned(),
                message: e.to_string(),
            })?;
        if chain.is_empty() {
            return Err(Error::Certificate {
                path: cert_file.to_owned(),
                message: "no CERTIFICATE block found".to_owned(),
            });
        }
        let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
            .map_err(|e| Error::Certificate {
                path: key_file.to_owned(),
                message: e.to_string(),
            })?
            .ok_or_else(|| Error::Certificate {
                path: key_file.to_owned(),
                message: "no PRIVATE KEY block found".to_owned(),
            })?;
        Ok(Self {
            chain,
            key,
            chain_pem: String::from_utf8_lossy(&cert_pem).into_owned(),
        })
    }

    /// The certificate chain as PEM.
    pub fn chain_pem(&self) -> &str {
        &self.chain_pem
    }

    /// A rustls server configuration (TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`) serving this
    /// certificate. Fails when the key does not match the certificate.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_no_client_auth()
                    .with_single_cert(self.chain.clone(), self.key.clone_key())
            })
            .map_err(|e| Error::Certificate {
                path: generated(),
                message: e.to_string(),
            })?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The names a generated certificate covers: `localhost`, the loopback addresses, the host
/// name, and the bind address when it is a specific one.
pub fn self_signed_hosts(bind: std::net::IpAddr) -> Vec<String> {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if let Some(host) = hostname() {
        hosts.push(host);
    }
    if !bind.is_unspecified() && !bind.is_loopback() {
        hosts.push(bind.to_string());
    }
    hosts.dedup();
    hosts
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.parse::<std::net::IpAddr>().is_err())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_and_file_certificates_build_server_configs() {
        let cert = ServingCert::self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("generate");
        assert!(cert.chain_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let config = cert.server_config().expect("config");
        assert_eq!(config.alpn_protocols[1], b"http/1.1");

        let dir = tempfile::tempdir().expect("tempdir");
        let other = rcgen::generate_simple_self_signed(vec!["example".to_owned()]).expect("gen");
        let cert_file = dir.path().join("tls.crt");
        let key_file = dir.path().join("tls.key");
        std::fs::write(&cert_file, other.cert.pem()).expect("write");
        std::fs::write(&key_file, other.signing_key.serialize_pem()).expect("write");
        let loaded = ServingCert::from_files(&cert_file, &key_file).expect("load");
        loaded.server_config().expect("config from files");
        assert_eq!(loaded.chain_pem(), other.cert.pem());
    }

    #[test]
    fn bad_files_name_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").expect("write");
        let missing = dir.path().join("missing.pem");
        let err = ServingCert::from_files(&missing, &empty).expect_err("missing");
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let err = ServingCert::from_files(&empty, &empty).expect_err("empty");
        assert!(err.to_string().contains("no CERTIFICATE block"), "{err}");

        // A key that does not match the certificate is refused when building the config.
        let a = rcgen::generate_simple_self_signed(vec!["a".to_owned()]).expect("gen");
        let b = rcgen::generate_simple_self_signed(vec!["b".to_owned()]).expect("gen");
        let cert_file = dir.path().join("a.crt");
        let key_file = dir.path().join("b.key");
        std::fs::write(&cert_file, a.cert.pem()).expect("write");
        std::fs::write(&key_file, b.signing_key.serialize_pem()).expect("write");
        let mismatched = ServingCert::from_files(&cert_file, &key_file).expect("parse");
        assert!(mismatched.server_config().is_err());
    }

    #[test]
    fn generated_hosts_cover_loopback_and_specific_bind_addresses() {
        let any = self_signed_hosts("0.0.0.0".parse().expect("ip"));
        assert!(any.contains(&"localhost".to_owned()) && any.contains(&"127.0.0.1".to_owned()));
        assert!(!any.contains(&"0.0.0.0".to_owned()));
        let specific = self_signed_hosts("10.1.2.3".parse().expect("ip"));
        assert!(specific.contains(&"10.1.2.3".to_owned()));
    }
}
