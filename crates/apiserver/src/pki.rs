//! The server's TLS identity: a CA and a serving certificate for localhost, generated into the data dir on first start and reused afterwards.

use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the TLS identity could not be loaded or created.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a PKI file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Generating a key or certificate failed.
    #[error("generating {what}: {source}")]
    Generate {
        /// Which certificate.
        what: &'static str,
        /// The rcgen error.
        #[source]
        source: rcgen::Error,
    },
    /// A stored PEM file does not hold what it should.
    #[error("parsing {path}: {why}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// rustls refused the certificate or key.
    #[error("configuring TLS: {0}")]
    Tls(#[source] rustls::Error),
}

/// PEM-encoded CA certificate, serving certificate and serving key.
#[derive(Clone)]
pub struct Pki {
    /// The CA certificate clients trust (`certificate-authority-data`).
    pub ca_pem: String,
    /// The serving certificate, signed by the CA.
    pub cert_pem: String,
    /// The serving certificate's private key.
    pub key_pem: String,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki")
            .field("ca_pem", &self.ca_pem)
            .finish_non_exhaustive()
    }
}

/// The CA's subject common name (client certificates kcm issues name it as their issuer).
pub const CA_COMMON_NAME: &str = "kcm-ca";
/// The CA key file in the PKI directory.
pub const CA_KEY_FILE: &str = "ca.key";

/// The CA certificate file in the PKI directory.
pub const CA_CERT_FILE: &str = "ca.crt";

const CA_CERT: &str = CA_CERT_FILE;
const CA_KEY: &str = CA_KEY_FILE;
const SERVING_CERT: &str = "apiserver.crt";
const SERVING_KEY: &str = "apiserver.key";

/// Loads the identity from `dir` or, if any file is missing, generates a new CA and serving
/// certificate (SANs: `localhost`, `127.0.0.1`, `::1` and `extra_ips`) and writes them there
/// (keys with mode 0600).
pub fn load_or_create(dir: &Path, extra_ips: &[IpAddr]) -> Result<Pki> {
    let paths = [CA_CERT, CA_KEY, SERVING_CERT, SERVING_KEY].map(|f| dir.join(f));
    if paths.iter().all(|p| p.exists()) {
        let read = |p: &Path| {
            fs::read_to_string(p).map_err(|source| Error::Io {
                op: "reading",
                path: p.to_path_buf(),
                source,
            })
        };
        return Ok(Pki {
            ca_pem: read(&paths[0])?,
            cert_pem: read(&paths[2])?,
            key_pem: read(&paths[3])?,
        });
    }
    let (pki, ca_key_pem) = generate(extra_ips)?;
    create_dir(dir)?;
    write_file(&paths[0], pki.ca_pem.as_bytes(), 0o644)?;
    write_file(&paths[1], ca_key_pem.as_bytes(), 0o600)?;
    write_file(&paths[2], pki.cert_pem.as_bytes(), 0o644)?;
    write_file(&paths[3], pki.key_pem.as_bytes(), 0o600)?;
    Ok(pki)
}

/// Generates a CA and a serving certificate; returns them and the CA key.
fn generate(extra_ips: &[IpAddr]) -> Result<(Pki, String)> {
    let gen_err = |what| move |source| Error::Generate { what, source };
    let ca_key = KeyPair::generate().map_err(gen_err("CA key"))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(gen_err("CA"))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(gen_err("CA"))?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    for ip in extra_ips {
        let s = ip.to_string();
        if !ip.is_unspecified() && !names.contains(&s) {
            names.push(s);
        }
    }
    let key = KeyPair::generate().map_err(gen_err("serving key"))?;
    let mut params = CertificateParams::new(names).map_err(gen_err("serving certificate"))?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kcm-apiserver");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(gen_err("serving certificate"))?;
    Ok((
        Pki {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        },
        ca_key.serialize_pem(),
    ))
}

/// The rustls server configuration (HTTP/2 and HTTP/1.1 by ALPN) for this identity.
pub fn server_config(pki: &Pki) -> Result<rustls::ServerConfig> {
    server_config_with(pki, Arc::new(rustls::server::NoClientAuth))
}

/// [`server_config`] with `client_auth` deciding whether and how client certificates are
/// asked for.
pub fn server_config_with(
    pki: &Pki,
    client_auth: Arc<dyn rustls::server::danger::ClientCertVerifier>,
) -> Result<rustls::ServerConfig> {
    let parse_err = |why: String| Error::Parse {
        path: PathBuf::from(SERVING_CERT),
        why,
    };
    let certs = rustls_pemfile::certs(&mut pki.cert_pem.as_bytes())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| parse_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(parse_err("no certificate found".to_owned()));
    }
    let key = rustls_pemfile::private_key(&mut pki.key_pem.as_bytes())
        .map_err(|e| parse_err(e.to_string()))?
        .ok_or_else(|| parse_err("no private key found".to_owned()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(Error::Tls)?
        .with_client_cert_verifier(client_auth)
        .with_single_cert(certs, key)
        .map_err(Error::Tls)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The DER bytes of the first certificate in a PEM string.
pub fn first_cert_der(pem: &str) -> Option<Vec<u8>> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .and_then(|c| c.ok())
        .map(|c| c.as_ref().to_vec())
}

/// Creates `dir` (and parents) with mode 0700 on Unix.
pub fn create_dir(dir: &Path) -> Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|source| Error::Io {
        op: "creating",
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes a file atomically (temporary file, fsync, rename) with `mode` on Unix.
pub fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    let io = |op| {
        move |source| Error::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    };
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(&tmp).map_err(io("creating"))?;
    file.write_all(contents).map_err(io("writing"))?;
    file.sync_all().map_err(io("syncing"))?;
    drop(file);
    fs::rename(&tmp, path).map_err(io("renaming"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_once_then_reused() {
        let dir = std::env::temp_dir().join(format!("kcm-pki-test-{}", uuid::Uuid::new_v4()));
        let first = load_or_create(&dir, &[]).expect("generates");
        let second = load_or_create(&dir, &[]).expect("loads");
        assert_eq!(first.ca_pem, second.ca_pem);
        assert_eq!(first.cert_pem, second.cert_pem);
        assert!(server_config(&second).is_ok());
        assert!(first_cert_der(&first.ca_pem).is_some());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.join(CA_KEY))
                .expect("key")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
