//! Unit tests of the CA: the issued certificate parsed back (upstream's `authority_test.go` facts).

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use x509_parser::prelude::*;

use super::*;
use crate::certificates::request::parse_csr;

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

/// A CA valid 2020–`until_year`, as PEM certificate and key.
fn ca(until_year: i32) -> (String, String) {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, "test-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(until_year, 1, 1);
    (
        params.self_signed(&key).expect("ca").pem(),
        key.serialize_pem(),
    )
}

/// A request for CN `alice` in groups `devs` and `admins` (two `O` attributes).
fn alice_request() -> CertificateRequest {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(vec!["alice.example".to_owned()]).expect("params");
    params.distinguished_name.push(DnType::CommonName, "alice");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "devs");
    // rcgen keeps one value per type; the same OID under a custom type makes a second O.
    params
        .distinguished_name
        .push(DnType::CustomDnType(vec![2, 5, 4, 10]), "admins");
    let pem = params
        .serialize_request(&key)
        .expect("csr")
        .pem()
        .expect("pem");
    parse_csr(pem.as_bytes()).expect("parses")
}

const POLICY: SigningPolicy = SigningPolicy {
    ttl: SignedDuration::from_hours(24),
    backdate: SignedDuration::from_mins(5),
    short: SignedDuration::from_hours(8),
};

fn client_usages() -> Vec<String> {
    vec!["digital signature".to_owned(), "client auth".to_owned()]
}

#[test]
fn the_certificate_carries_the_requests_subject_names_and_the_csrs_usages() {
    let (ca_pem, ca_key) = ca(2030);
    let authority = CertificateAuthority::from_pem(&ca_pem, &ca_key).expect("ca");
    let pem = authority
        .sign(&alice_request(), &client_usages(), POLICY, now())
        .expect("signed");
    let (_, block) = parse_x509_pem(pem.as_bytes()).expect("pem");
    let (_, cert) = parse_x509_certificate(&block.contents).expect("der");
    let cns: Vec<_> = cert
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().expect("str"))
        .collect();
    assert_eq!(cns, ["alice"]);
    let orgs: Vec<_> = cert
        .subject()
        .iter_organization()
        .map(|a| a.as_str().expect("str"))
        .collect();
    assert_eq!(orgs, ["devs", "admins"]);
    assert_eq!(cert.issuer().to_string(), "CN=test-ca");
    assert_eq!(cert.version(), X509Version::V3);

    let ku = cert.key_usage().expect("ok").expect("key usage");
    assert!(ku.critical);
    assert!(ku.value.digital_signature() && !ku.value.key_encipherment());
    let eku = cert.extended_key_usage().expect("ok").expect("eku");
    assert!(eku.value.client_auth && !eku.value.server_auth);
    let bc = cert
        .basic_constraints()
        .expect("ok")
        .expect("basic constraints");
    assert!(bc.critical && !bc.value.ca);
    let san = cert.subject_alternative_name().expect("ok").expect("san");
    assert_eq!(
        san.value.general_names,
        [GeneralName::DNSName("alice.example")]
    );

    // Backdated 5 minutes; a long-lived certificate also ends 5 minutes early.
    assert_eq!(
        cert.validity().not_before.timestamp(),
        (now() - POLICY.backdate).as_second()
    );
    assert_eq!(
        cert.validity().not_after.timestamp(),
        (now() + POLICY.ttl - POLICY.backdate).as_second()
    );

    let (_, ca_block) = parse_x509_pem(ca_pem.as_bytes()).expect("pem");
    let (_, ca_cert) = parse_x509_certificate(&ca_block.contents).expect("der");
    cert.verify_signature(Some(ca_cert.public_key()))
        .expect("signed by the CA");
}

#[test]
fn short_lived_certificates_keep_their_whole_ttl_and_none_outlives_the_ca() {
    let (ca_pem, ca_key) = ca(2030);
    let authority = CertificateAuthority::from_pem(&ca_pem, &ca_key).expect("ca");
    let short = SigningPolicy {
        ttl: SignedDuration::from_hours(1),
        ..POLICY
    };
    let not_after = |pem: String| {
        let (_, block) = parse_x509_pem(pem.as_bytes()).expect("pem");
        let (_, cert) = parse_x509_certificate(&block.contents).expect("der");
        cert.validity().not_after.timestamp()
    };
    let pem = authority
        .sign(&alice_request(), &client_usages(), short, now())
        .expect("signed");
    assert_eq!(not_after(pem), (now() + short.ttl).as_second());

    let (ca_pem, ca_key) = ca(2025);
    let authority = CertificateAuthority::from_pem(&ca_pem, &ca_key).expect("ca");
    let long = SigningPolicy {
        ttl: SignedDuration::from_hours(24 * 3650),
        ..POLICY
    };
    let pem = authority
        .sign(&alice_request(), &client_usages(), long, now())
        .expect("signed");
    assert_eq!(not_after(pem), authority.not_after().as_second());
}

#[test]
fn an_expired_ca_an_unknown_usage_or_a_forged_request_is_refused() {
    let (ca_pem, ca_key) = ca(2022);
    let expired = CertificateAuthority::from_pem(&ca_pem, &ca_key).expect("ca");
    let err = expired
        .sign(&alice_request(), &client_usages(), POLICY, now())
        .expect_err("expired");
    assert!(err.starts_with("the signer has expired"), "{err}");

    let (ca_pem, ca_key) = ca(2030);
    let authority = CertificateAuthority::from_pem(&ca_pem, &ca_key).expect("ca");
    let err = authority
        .sign(
            &alice_request(),
            &["client auth".to_owned(), "flying".to_owned()],
            POLICY,
            now(),
        )
        .expect_err("unknown usage");
    assert_eq!(err, r#"unrecognized usage values: ["flying"]"#);

    let forged = CertificateRequest {
        signature_valid: false,
        ..alice_request()
    };
    let err = authority
        .sign(&forged, &client_usages(), POLICY, now())
        .expect_err("forged");
    assert!(err.contains("signature"), "{err}");
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused() {
    let (ca_pem, _) = ca(2030);
    let (_, other_key) = ca(2030);
    let err = CertificateAuthority::from_pem(&ca_pem, &other_key).expect_err("mismatch");
    assert_eq!(err, "tls: private key does not match public key");
}

#[test]
fn key_usage_bits_are_trimmed_as_go_writes_them() {
    // digitalSignature | keyEncipherment: bits 0 and 2, 5 unused bits.
    assert_eq!(key_usage_bits(1 | 4), [0x03, 0x02, 0x05, 0xa0]);
    // decipherOnly is bit 8: a second byte, 7 unused bits.
    assert_eq!(key_usage_bits(1 << 8), [0x03, 0x03, 0x07, 0x00, 0x80]);
    assert_eq!(der(0x04, &[0; 200])[..3], [0x04, 0x81, 200]);
}

/// A CA certificate for `key` (any of the PEM forms [`load_key`] reads).
fn ca_for(key: &str) -> String {
    let key = load_key(key).expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, "kubernetes");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2030, 1, 1);
    params.self_signed(&key).expect("ca").pem()
}

/// kubeadm's CA key is PKCS#1 RSA; openssl's EC keys are SEC1 after an EC PARAMETERS block.
#[test]
fn pkcs1_rsa_and_sec1_ec_ca_keys_sign_too() {
    for (name, key) in [
        ("pkcs1 rsa", include_str!("testdata/rsa-pkcs1.key")),
        ("sec1 ec", include_str!("testdata/ec-sec1.key")),
    ] {
        let ca_pem = ca_for(key);
        let authority = CertificateAuthority::from_pem(&ca_pem, key).expect(name);
        let pem = authority
            .sign(&alice_request(), &client_usages(), POLICY, now())
            .expect(name);
        let (_, block) = parse_x509_pem(pem.as_bytes()).expect("pem");
        let (_, cert) = parse_x509_certificate(&block.contents).expect("der");
        let (_, ca_block) = parse_x509_pem(ca_pem.as_bytes()).expect("pem");
        let (_, ca_cert) = parse_x509_certificate(&ca_block.contents).expect("der");
        cert.verify_signature(Some(ca_cert.public_key()))
            .unwrap_or_else(|err| panic!("{name}: {err}"));
    }
    let err = CertificateAuthority::from_pem(&ca_for(include_str!("testdata/ec-sec1.key")), "junk")
        .expect_err("no key");
    assert!(err.contains("no private key PEM block"), "{err}");
}
