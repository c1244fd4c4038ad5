//! The CA a signer signs with and the certificate it issues: upstream's `authority.CertificateAuthority.Sign` with the `PermissiveSigningPolicy` (subject, key and SANs from the request; usages from the CSR; backdated validity capped by the CA's).
//!
//! The certificate is assembled in DER here rather than through rcgen's parameters: the
//! subject must be the request's exactly — rcgen keeps one value per attribute type, which
//! would drop all but one of several `O` groups.

use jiff::{SignedDuration, Timestamp};
use rcgen::{KeyPair, SigningKey};
use x509_parser::extensions::ParsedExtension;

use super::request::CertificateRequest;

/// A signing CA: its certificate's parts the issued certificates refer to, and its key.
pub struct CertificateAuthority {
    /// The CA certificate's subject (DER), the issuer of what it signs.
    subject_der: Vec<u8>,
    /// The CA certificate's NotAfter; nothing it signs outlives it.
    not_after: Timestamp,
    /// The CA certificate's subject key identifier, the issued certificates' authority key
    /// identifier.
    key_id: Option<Vec<u8>>,
    /// The signature algorithm identifier (DER) matching `key`.
    algorithm_der: &'static [u8],
    /// The CA's private key.
    key: KeyPair,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// How an issued certificate's validity is set, as upstream's `PermissiveSigningPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigningPolicy {
    /// The certificate's lifetime.
    pub ttl: SignedDuration,
    /// NotBefore is this long before now.
    pub backdate: SignedDuration,
    /// Lifetimes under this are not shortened by the backdate.
    pub short: SignedDuration,
}

const ECDSA_SHA256: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
];
const ECDSA_SHA384: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03,
];
const RSA_SHA256: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00,
];
const ED25519: &[u8] = &[0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70];

const OID_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x0f];
const OID_EXT_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];
const OID_BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
const OID_AUTHORITY_KEY_ID: &[u8] = &[0x55, 0x1d, 0x23];
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];

/// The key usages of the certificates API and their bit in X.509's KeyUsage (Go's
/// `keyUsageDict`).
const KEY_USAGES: [(&str, u16); 10] = [
    ("signing", 1),
    ("digital signature", 1),
    ("content commitment", 1 << 1),
    ("key encipherment", 1 << 2),
    ("key agreement", 1 << 4),
    ("data encipherment", 1 << 3),
    ("cert sign", 1 << 5),
    ("crl sign", 1 << 6),
    ("encipher only", 1 << 7),
    ("decipher only", 1 << 8),
];

/// The extended key usages, in Go's `x509.ExtKeyUsage` order (how it sorts them), with their
/// OID (DER content).
const EXT_KEY_USAGES: [(&[&str], &[u8]); 12] = [
    (&["any"], &[0x55, 0x1d, 0x25, 0x00]),
    (
        &["server auth"],
        &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01],
    ),
    (
        &["client auth"],
        &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02],
    ),
    (
        &["code signing"],
        &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03],
    ),
    (
        &["email protection", "s/mime"],
        &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x04],
    ),
    (
        &["ipsec end system"],
        &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x05],
    ),
    (
        &["ipsec tunnel"],
        &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x06],
    ),
    (
        &["ipsec user"],
        &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x07],
    ),
    (
        &["timestamping"],
        &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x08],
    ),
    (
        &["ocsp signing"],
        &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x09],
    ),
    (
        &["microsoft sgc"],
        &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x0a, 0x03, 0x03],
    ),
    (
        &["netscape sgc"],
        &[0x60, 0x86, 0x48, 0x01, 0x86, 0xf8, 0x42, 0x04, 0x01],
    ),
];

impl CertificateAuthority {
    /// The CA of PEM certificate `cert_pem` and PKCS#8 PEM key `key_pem`; the key must be
    /// the certificate's.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, String> {
        let (_, block) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
            .map_err(|err| format!("no CA certificate PEM block: {err}"))?;
        let (_, cert) = x509_parser::parse_x509_certificate(&block.contents)
            .map_err(|err| format!("parsing the CA certificate: {err}"))?;
        let key = load_key(key_pem)?;
        if cert.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err("tls: private key does not match public key".to_owned());
        }
        let algorithm_der = if key.is_compatible(&rcgen::PKCS_ECDSA_P256_SHA256) {
            ECDSA_SHA256
        } else if key.is_compatible(&rcgen::PKCS_ECDSA_P384_SHA384) {
            ECDSA_SHA384
        } else if key.is_compatible(&rcgen::PKCS_RSA_SHA256) {
            RSA_SHA256
        } else if key.is_compatible(&rcgen::PKCS_ED25519) {
            ED25519
        } else {
            return Err("unsupported CA key algorithm".to_owned());
        };
        let key_id = cert
            .extensions()
            .iter()
            .find_map(|ext| match ext.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(id) => Some(id.0.to_vec()),
                _ => None,
            });
        let not_after = Timestamp::from_second(cert.validity().not_after.timestamp())
            .map_err(|err| format!("the CA certificate's NotAfter: {err}"))?;
        Ok(Self {
            subject_der: cert.tbs_certificate.subject.as_raw().to_vec(),
            not_after,
            key_id,
            algorithm_der,
            key,
        })
    }

    /// The CA certificate's NotAfter.
    pub fn not_after(&self) -> Timestamp {
        self.not_after
    }

    /// Issues a certificate (PEM) for `req` with `usages` under `policy` at `now`, as
    /// upstream's `Sign`: the request must be self-signed validly; the certificate is no CA,
    /// carries only the usages, basic constraints, the authority key id and the request's
    /// SANs, and ends no later than the CA.
    pub fn sign(
        &self,
        req: &CertificateRequest,
        usages: &[String],
        policy: SigningPolicy,
        now: Timestamp,
    ) -> Result<String, String> {
        let not_before = now - policy.backdate;
        if not_before >= self.not_after {
            return Err(format!(
                "the signer has expired: NotAfter={}",
                self.not_after
            ));
        }
        if !req.signature_valid {
            return Err("unable to verify certificate request signature".to_owned());
        }
        let (key_usage, ext_key_usages) = key_usages_from_strings(usages)?;
        let mut not_after = if policy.ttl < policy.short {
            now + policy.ttl
        } else {
            now + policy.ttl - policy.backdate
        };
        if not_after >= self.not_after {
            not_after = self.not_after;
        }
        if now >= self.not_after {
            return Err(format!(
                "refusing to sign a certificate that expired in the past: NotAfter={}",
                self.not_after
            ));
        }

        let mut extensions = Vec::new();
        if key_usage != 0 {
            extensions.push(extension(OID_KEY_USAGE, true, &key_usage_bits(key_usage)));
        }
        if !ext_key_usages.is_empty() {
            let oids: Vec<u8> = ext_key_usages
                .iter()
                .flat_map(|oid| der(0x06, oid))
                .collect();
            extensions.push(extension(OID_EXT_KEY_USAGE, false, &der(0x30, &oids)));
        }
        // Not a CA: an empty BasicConstraints (cA defaults to false), critical, as Go writes it.
        extensions.push(extension(OID_BASIC_CONSTRAINTS, true, &der(0x30, &[])));
        if let Some(id) = &self.key_id {
            extensions.push(extension(
                OID_AUTHORITY_KEY_ID,
                false,
                &der(0x30, &der(0x80, id)),
            ));
        }
        if let Some(san) = &req.san_extension {
            let subject_empty = req.subject_der == [0x30, 0x00];
            extensions.push(extension(OID_SUBJECT_ALT_NAME, subject_empty, san));
        }

        let mut tbs = Vec::new();
        tbs.extend(der(0xa0, &der(0x02, &[2])));
        tbs.extend(der(0x02, &serial_number()));
        tbs.extend(self.algorithm_der);
        tbs.extend(&self.subject_der);
        tbs.extend(der(0x30, &[time(not_before), time(not_after)].concat()));
        tbs.extend(&req.subject_der);
        tbs.extend(&req.public_key_der);
        tbs.extend(der(0xa3, &der(0x30, &extensions.concat())));
        let tbs = der(0x30, &tbs);

        let signature = self
            .key
            .sign(&tbs)
            .map_err(|err| format!("failed to sign certificate: {err}"))?;
        let mut bits = vec![0u8];
        bits.extend(signature);
        let cert = der(
            0x30,
            &[tbs, self.algorithm_der.to_vec(), der(0x03, &bits)].concat(),
        );
        Ok(pem_encode("CERTIFICATE", &cert))
    }
}

/// The CA's private key from the first key block of `pem`: PKCS#8 (`PRIVATE KEY`), PKCS#1
/// (`RSA PRIVATE KEY`, as kubeadm writes its CA key) or SEC1 (`EC PRIVATE KEY`, possibly after
/// an `EC PARAMETERS` block, as openssl writes it) — the forms Go's `tls.X509KeyPair` takes.
/// The key library reads only PKCS#8, so the other two are wrapped in it first.
fn load_key(pem: &str) -> Result<KeyPair, String> {
    let bad = |why: &dyn std::fmt::Display| format!("parsing the CA key: {why}");
    for block in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|err| bad(&err))?;
        let pkcs8 = match block.label.as_str() {
            "PRIVATE KEY" => block.contents,
            "RSA PRIVATE KEY" => pkcs8_wrap(RSA_ALGORITHM, &block.contents),
            "EC PRIVATE KEY" => {
                let curve =
                    sec1_curve(&block.contents).ok_or_else(|| bad(&"no curve in EC key"))?;
                let mut algorithm = der(0x06, EC_PUBLIC_KEY_OID);
                algorithm.extend(der(0x06, &curve));
                pkcs8_wrap(&der(0x30, &algorithm), &block.contents)
            }
            _ => continue,
        };
        return KeyPair::from_pem(&pem_encode("PRIVATE KEY", &pkcs8)).map_err(|err| bad(&err));
    }
    Err(bad(&"no private key PEM block"))
}

/// `rsaEncryption` with its NULL parameters (AlgorithmIdentifier DER).
const RSA_ALGORITHM: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
];
/// `id-ecPublicKey` (OID content).
const EC_PUBLIC_KEY_OID: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

/// A PKCS#8 PrivateKeyInfo (version 0) of `key` under `algorithm`.
fn pkcs8_wrap(algorithm: &[u8], key: &[u8]) -> Vec<u8> {
    let mut info = der(0x02, &[0]);
    info.extend(algorithm);
    info.extend(der(0x04, key));
    der(0x30, &info)
}

/// The named curve (OID content) of a SEC1 ECPrivateKey: its `[0] parameters`.
fn sec1_curve(key: &[u8]) -> Option<Vec<u8>> {
    let (tag, body, _) = read_tlv(key)?;
    if tag != 0x30 {
        return None;
    }
    let mut rest = body;
    while !rest.is_empty() {
        let (tag, content, next) = read_tlv(rest)?;
        if tag == 0xa0 {
            let (oid_tag, oid, _) = read_tlv(content)?;
            return (oid_tag == 0x06).then(|| oid.to_vec());
        }
        rest = next;
    }
    None
}

/// One DER TLV off the front of `input`: tag, content, what follows.
fn read_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The KeyUsage bits and the sorted extended key usage OIDs of `usages`, as upstream's
/// `keyUsagesFromStrings`; unknown usages are an error.
fn key_usages_from_strings(usages: &[String]) -> Result<(u16, Vec<&'static [u8]>), String> {
    let mut bits = 0u16;
    let mut ext = [false; EXT_KEY_USAGES.len()];
    let mut unrecognized = Vec::new();
    for usage in usages {
        if let Some((_, bit)) = KEY_USAGES.iter().find(|(name, _)| name == usage) {
            bits |= bit;
        } else if let Some(i) = EXT_KEY_USAGES
            .iter()
            .position(|(names, _)| names.contains(&usage.as_str()))
        {
            ext[i] = true;
        } else {
            unrecognized.push(format!("{usage:?}"));
        }
    }
    if !unrecognized.is_empty() {
        return Err(format!(
            "unrecognized usage values: [{}]",
            unrecognized.join(" ")
        ));
    }
    let oids = EXT_KEY_USAGES
        .iter()
        .zip(ext)
        .filter(|(_, set)| *set)
        .map(|((_, oid), _)| *oid)
        .collect();
    Ok((bits, oids))
}

/// The KeyUsage BIT STRING (DER) of `bits`, trimmed as Go's `marshalKeyUsage`.
fn key_usage_bits(bits: u16) -> Vec<u8> {
    let mut bytes = [0u8; 2];
    for i in 0..9 {
        if bits & (1 << i) != 0 {
            bytes[i / 8] |= 0x80 >> (i % 8);
        }
    }
    let len = if bytes[1] != 0 { 2 } else { 1 };
    let last = bytes[len - 1];
    let unused = last.trailing_zeros().min(7) as u8;
    let mut content = vec![unused];
    content.extend(&bytes[..len]);
    der(0x03, &content)
}

/// One Extension (DER): the OID, `critical` when true, the value in an OCTET STRING.
fn extension(oid: &[u8], critical: bool, value: &[u8]) -> Vec<u8> {
    let mut content = der(0x06, oid);
    if critical {
        content.extend([0x01, 0x01, 0xff]);
    }
    content.extend(der(0x04, value));
    der(0x30, &content)
}

/// A random positive 128-bit serial number (INTEGER content), as upstream's.
fn serial_number() -> Vec<u8> {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    if bytes.iter().all(|b| *b == 0) {
        bytes[15] = 1;
    }
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(15);
    let mut serial = bytes[first..].to_vec();
    if serial[0] & 0x80 != 0 {
        serial.insert(0, 0);
    }
    serial
}

/// A validity time (DER): UTCTime through 2049, GeneralizedTime after, as RFC 5280 asks.
fn time(t: Timestamp) -> Vec<u8> {
    let t = t.round(jiff::Unit::Second).unwrap_or(t);
    let utc = t.to_zoned(jiff::tz::TimeZone::UTC);
    if (1950..2050).contains(&utc.year()) {
        der(0x17, utc.strftime("%y%m%d%H%M%SZ").to_string().as_bytes())
    } else {
        der(0x18, utc.strftime("%Y%m%d%H%M%SZ").to_string().as_bytes())
    }
}

/// `der` as a PEM block labelled `label`, 64 base64 characters a line.
fn pem_encode(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// A DER TLV: `tag`, the definite length, `content`.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let len = content.len();
    let mut out = vec![tag];
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let first = bytes
            .iter()
            .position(|b| *b != 0)
            .unwrap_or(bytes.len() - 1);
        out.push(0x80 | (bytes.len() - first) as u8);
        out.extend(&bytes[first..]);
    }
    out.extend(content);
    out
}

#[cfg(test)]
#[path = "authority_tests.rs"]
mod tests;
