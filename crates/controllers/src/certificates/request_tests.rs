//! Unit tests of the request helpers: PKCS#10 decoding and upstream's kubelet request shapes (`helpers_test.go` facts).

use rcgen::{CertificateParams, DnType, KeyPair, SanType};

use super::*;

/// A PEM CSR for `cn` in `orgs` with `sans` (DNS names, or IPs when they parse as one).
pub(crate) fn csr_pem(cn: &str, orgs: &[&str], sans: &[&str]) -> String {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, cn);
    for org in orgs {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *org);
    }
    for san in sans {
        params.subject_alt_names.push(match san.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*san).try_into().expect("dns")),
        });
    }
    params
        .serialize_request(&key)
        .expect("csr")
        .pem()
        .expect("pem")
}

#[test]
fn a_request_is_decoded_with_its_subject_and_names() {
    let pem = csr_pem(
        "system:node:n1",
        &["system:nodes"],
        &["n1.example", "10.0.0.1"],
    );
    let req = parse_csr(pem.as_bytes()).expect("parses");
    assert_eq!(req.common_name, "system:node:n1");
    assert_eq!(req.organizations, ["system:nodes"]);
    assert_eq!(req.dns_names, ["n1.example"]);
    assert_eq!(
        req.ip_addresses,
        ["10.0.0.1".parse::<IpAddr>().expect("ip")]
    );
    assert!(req.signature_valid);
    assert!(req.san_extension.is_some());
}

#[test]
fn anything_but_a_certificate_request_block_is_refused() {
    for (name, input) in [
        ("empty", String::new()),
        ("not pem", "hello".to_owned()),
        (
            "a certificate",
            rcgen::generate_simple_self_signed(vec!["x".to_owned()])
                .expect("cert")
                .cert
                .pem(),
        ),
    ] {
        assert_eq!(
            parse_csr(input.as_bytes()).expect_err(name),
            "PEM block type must be CERTIFICATE REQUEST",
            "{name}"
        );
    }
}

#[test]
fn kubelet_client_requests_have_upstreams_shape() {
    let good = parse_csr(csr_pem("system:node:n1", &["system:nodes"], &[]).as_bytes()).expect("ok");
    let usages = BTreeSet::from(["digital signature", "key encipherment", "client auth"]);
    assert_eq!(validate_kubelet_client_csr(&good, &usages), Ok(()));
    let no_rsa = BTreeSet::from(["digital signature", "client auth"]);
    assert_eq!(validate_kubelet_client_csr(&good, &no_rsa), Ok(()));
    let cases = [
        (
            csr_pem("system:node:n1", &["devs"], &[]),
            usages.clone(),
            "subject organization is not system:nodes",
        ),
        (
            csr_pem("system:node:n1", &["system:nodes"], &["n1"]),
            usages.clone(),
            "DNS subjectAltNames are not allowed",
        ),
        (
            csr_pem("system:node:n1", &["system:nodes"], &["10.0.0.1"]),
            usages.clone(),
            "IP subjectAltNames are not allowed",
        ),
        (
            csr_pem("alice", &["system:nodes"], &[]),
            usages.clone(),
            "subject common name does not begin with system:node:",
        ),
        (
            csr_pem("system:node:n1", &["system:nodes"], &[]),
            BTreeSet::from(["client auth"]),
            "usages did not match [client auth digital signature key encipherment]",
        ),
    ];
    for (pem, usages, want) in cases {
        let req = parse_csr(pem.as_bytes()).expect("parses");
        assert_eq!(
            validate_kubelet_client_csr(&req, &usages),
            Err(want.to_owned())
        );
    }
}

#[test]
fn kubelet_serving_requests_need_a_dns_or_ip_name() {
    let usages = BTreeSet::from(["digital signature", "key encipherment", "server auth"]);
    let good = parse_csr(csr_pem("system:node:n1", &["system:nodes"], &["n1"]).as_bytes())
        .expect("parses");
    assert_eq!(validate_kubelet_serving_csr(&good, &usages), Ok(()));
    let no_names =
        parse_csr(csr_pem("system:node:n1", &["system:nodes"], &[]).as_bytes()).expect("parses");
    assert_eq!(
        validate_kubelet_serving_csr(&no_names, &usages),
        Err("DNS or IP subjectAltName is required".to_owned())
    );
    assert_eq!(
        validate_kubelet_serving_csr(&good, &BTreeSet::from(["server auth"])),
        Err("usages did not match [digital signature key encipherment server auth]".to_owned())
    );
}
