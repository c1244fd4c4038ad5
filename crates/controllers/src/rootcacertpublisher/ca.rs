//! Where the published CA comes from: `--root-ca-file` (PEM, checked), or the client configuration's CA certificates re-encoded as PEM.

use std::path::Path;

use base64::Engine as _;

/// Why the root CA could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The file could not be read.
    #[error("error reading root-ca-file at {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no PEM certificate (upstream's `certutil.ParseCertsPEM` check).
    #[error(
        "error parsing root-ca-file at {path}: data does not contain any valid RSA or ECDSA certificates"
    )]
    NoCertificates {
        /// The file.
        path: String,
    },
}

/// Reads `--root-ca-file`, as upstream's `readCA`: the file's bytes, published as they are,
/// once they parse as at least one PEM certificate.
pub fn read_ca_file(path: &Path) -> Result<Vec<u8>, CaError> {
    let display = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| CaError::Read {
        path: display.clone(),
        source,
    })?;
    let mut reader = bytes.as_slice();
    let any = rustls_pemfile::certs(&mut reader).any(|c| c.is_ok());
    if !any {
        return Err(CaError::NoCertificates { path: display });
    }
    Ok(bytes)
}

/// The PEM encoding of DER certificates (a client configuration's `root_cert`), 64-column
/// base64 as Go's `pem.Encode` writes it.
pub fn der_to_pem(certs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = String::new();
    for der in certs {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).unwrap_or_default());
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_round_trip_and_file_check() {
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["kcm-ca".to_owned()]).expect("params");
        let cert = params.self_signed(&key).expect("cert");
        let pem = der_to_pem(&[cert.der().to_vec()]);
        let text = String::from_utf8(pem.clone()).expect("utf8");
        assert!(text.starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert!(text.lines().all(|l| l.len() <= 64));
        let mut reader = pem.as_slice();
        let parsed: Vec<_> = rustls_pemfile::certs(&mut reader)
            .filter_map(Result::ok)
            .collect();
        assert_eq!(parsed[0].as_ref(), cert.der().as_ref());

        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("ca.crt");
        std::fs::write(&good, &pem).expect("write");
        assert_eq!(read_ca_file(&good).expect("reads"), pem);
        let bad = dir.path().join("bad.crt");
        std::fs::write(&bad, "not a certificate").expect("write");
        assert!(matches!(
            read_ca_file(&bad),
            Err(CaError::NoCertificates { .. })
        ));
        assert!(matches!(
            read_ca_file(&dir.path().join("missing")),
            Err(CaError::Read { .. })
        ));
    }
}
