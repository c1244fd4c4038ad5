//! The signers' CA, re-read when its files change (upstream `signer/ca_provider.go`, whose dynamic content reloads rotated signing files).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::authority::CertificateAuthority;

/// The files and what was last loaded from them.
#[derive(Debug)]
struct Loaded {
    /// The certificate and key PEM the current CA was built from.
    pem: (String, String),
    /// The CA built from `pem`.
    ca: Arc<CertificateAuthority>,
}

/// The current signing CA, as upstream's `caProvider`: built from the files at start, rebuilt
/// when their content changes; a rotation that does not load (half written, mismatched key)
/// keeps the last good CA.
#[derive(Debug)]
pub struct CaProvider {
    /// The certificate and key files; `None` for a fixed CA.
    files: Option<(PathBuf, PathBuf)>,
    /// The last good CA and its source.
    loaded: Mutex<Loaded>,
}

impl CaProvider {
    /// A provider over `cert_file` and `key_file`, which must load now.
    pub fn from_files(cert_file: &Path, key_file: &Path) -> Result<Self, String> {
        let pem = read_pair(cert_file, key_file)?;
        let ca = Arc::new(CertificateAuthority::from_pem(&pem.0, &pem.1)?);
        Ok(Self {
            files: Some((cert_file.to_path_buf(), key_file.to_path_buf())),
            loaded: Mutex::new(Loaded { pem, ca }),
        })
    }

    /// A provider that always answers `ca` (tests).
    pub fn fixed(ca: CertificateAuthority) -> Self {
        Self {
            files: None,
            loaded: Mutex::new(Loaded {
                pem: (String::new(), String::new()),
                ca: Arc::new(ca),
            }),
        }
    }

    fn loaded(&self) -> MutexGuard<'_, Loaded> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The CA to sign with now (upstream's `currentCA`): the files are read again, and a
    /// changed pair that loads replaces the CA.
    pub fn current(&self) -> Arc<CertificateAuthority> {
        let Some((cert_file, key_file)) = &self.files else {
            return Arc::clone(&self.loaded().ca);
        };
        let pem = match read_pair(cert_file, key_file) {
            Ok(pem) => pem,
            Err(err) => {
                tracing::error!(%err, "keeping the loaded CSR signing CA");
                return Arc::clone(&self.loaded().ca);
            }
        };
        let mut loaded = self.loaded();
        if loaded.pem != pem {
            match CertificateAuthority::from_pem(&pem.0, &pem.1) {
                Ok(ca) => {
                    tracing::info!(cert = %cert_file.display(), "Reloaded the CSR signing CA");
                    *loaded = Loaded {
                        pem,
                        ca: Arc::new(ca),
                    };
                }
                Err(err) => tracing::error!(%err, "keeping the loaded CSR signing CA"),
            }
        }
        Arc::clone(&loaded.ca)
    }
}

fn read_pair(cert_file: &Path, key_file: &Path) -> Result<(String, String), String> {
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|err| format!("error reading {}: {err}", path.display()))
    };
    Ok((read(cert_file)?, read(key_file)?))
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

    use super::*;

    fn ca(cn: &str) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_after = rcgen::date_time_ymd(2030, 1, 1);
        (
            params.self_signed(&key).expect("ca").pem(),
            key.serialize_pem(),
        )
    }

    #[test]
    fn a_rotated_pair_replaces_the_ca_and_a_broken_one_keeps_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert_file, key_file) = (dir.path().join("ca.crt"), dir.path().join("ca.key"));
        let write = |(cert, key): &(String, String)| {
            std::fs::write(&cert_file, cert).expect("write");
            std::fs::write(&key_file, key).expect("write");
        };
        let first = ca("first");
        write(&first);
        let provider = CaProvider::from_files(&cert_file, &key_file).expect("loads");
        let a = provider.current();
        assert!(
            Arc::ptr_eq(&a, &provider.current()),
            "unchanged files, same CA"
        );

        write(&ca("second"));
        let b = provider.current();
        assert!(!Arc::ptr_eq(&a, &b), "rotated");

        // A certificate written without its key yet: the second CA stays.
        std::fs::write(&cert_file, ca("third").0).expect("write");
        assert!(
            Arc::ptr_eq(&b, &provider.current()),
            "mismatched pair ignored"
        );

        std::fs::remove_file(&key_file).expect("rm");
        assert!(Arc::ptr_eq(&b, &provider.current()), "missing file ignored");
        assert!(CaProvider::from_files(&cert_file, &key_file).is_err());
    }
}
