//! Unit tests of the signers: upstream's `signer_test.go` cases against a fake client and a generated CA.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

use super::*;
use crate::certificates::client::{CsrAction, FakeCsrClient};
use crate::certificates::testing::{condition, csr, csr_pem, with_conditions};

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

fn authority() -> Arc<CaProvider> {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, "test-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2030, 1, 1);
    let cert = params.self_signed(&key).expect("ca");
    let ca = crate::certificates::authority::CertificateAuthority::from_pem(
        &cert.pem(),
        &key.serialize_pem(),
    )
    .expect("ca");
    Arc::new(CaProvider::fixed(ca))
}

fn signer(name: &'static str, client: Arc<FakeCsrClient>) -> Signer {
    Signer::new(name, authority(), client, Duration::from_secs(3600)).with_clock(Arc::new(now))
}

fn approved(csr: CertificateSigningRequest) -> CertificateSigningRequest {
    with_conditions(csr, vec![condition("Approved", "True", None)])
}

fn status_updates(client: &FakeCsrClient) -> Vec<CertificateSigningRequest> {
    client
        .actions()
        .into_iter()
        .filter_map(|a| match a {
            CsrAction::UpdateStatus(csr) => Some(*csr),
            _ => None,
        })
        .collect()
}

#[test]
fn the_requested_duration_is_honoured_between_ten_minutes_and_the_flag() {
    let s = signer(KUBE_APISERVER_CLIENT_SIGNER, Arc::new(FakeCsrClient::new()));
    let cases = [
        ("no duration", None, 3600),
        ("zero", Some(0), 600),
        ("negative", Some(-1), 600),
        ("just under min", Some(599), 600),
        ("at min", Some(600), 600),
        ("just over min", Some(601), 601),
        ("half the max", Some(1800), 1800),
        ("just under max", Some(3599), 3599),
        ("at max", Some(3600), 3600),
        ("just over max", Some(3601), 3600),
        ("double the max", Some(7200), 3600),
    ];
    for (name, requested, want) in cases {
        assert_eq!(
            s.duration(requested),
            SignedDuration::from_secs(want),
            "{name}"
        );
    }
}

#[tokio::test]
async fn an_approved_client_csr_gets_a_certificate_for_its_subject() {
    let client = Arc::new(FakeCsrClient::new());
    let request = approved(csr(
        "alice",
        KUBE_APISERVER_CLIENT_SIGNER,
        &["client auth"],
        "admin",
        &csr_pem("alice", &["devs"], &[]),
    ));
    signer(KUBE_APISERVER_CLIENT_SIGNER, client.clone())
        .handle(request)
        .await
        .expect("signed");
    let updates = status_updates(&client);
    assert_eq!(updates.len(), 1);
    let pem = updates[0]
        .status
        .as_ref()
        .and_then(|s| s.certificate.clone())
        .expect("certificate");
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem.0).expect("pem");
    let (_, cert) = x509_parser::parse_x509_certificate(&block.contents).expect("der");
    assert_eq!(cert.subject().to_string(), "CN=alice, O=devs");
    assert_eq!(
        cert.validity().not_after.timestamp(),
        (now() + SignedDuration::from_hours(1)).as_second(),
        "an hour, under the 8h short threshold, is not shortened"
    );
}

#[tokio::test]
async fn a_csr_breaking_its_signers_rules_fails_with_signer_validation_failure() {
    let cases = [
        (
            KUBE_APISERVER_CLIENT_SIGNER,
            csr(
                "c",
                KUBE_APISERVER_CLIENT_SIGNER,
                &["server auth"],
                "u",
                &csr_pem("alice", &[], &[]),
            ),
            "invalid usage for client certificate: server auth",
        ),
        (
            KUBE_APISERVER_CLIENT_SIGNER,
            csr(
                "c",
                KUBE_APISERVER_CLIENT_SIGNER,
                &["digital signature"],
                "u",
                &csr_pem("alice", &[], &[]),
            ),
            "missing required usage for client certificate: client auth",
        ),
        (
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
            csr(
                "c",
                KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
                &["digital signature", "client auth"],
                "u",
                &csr_pem("alice", &["system:nodes"], &[]),
            ),
            "subject common name does not begin with system:node:",
        ),
        (
            KUBELET_SERVING_SIGNER,
            csr(
                "c",
                KUBELET_SERVING_SIGNER,
                &["digital signature", "server auth"],
                "u",
                &csr_pem("system:node:n1", &["system:nodes"], &[]),
            ),
            "DNS or IP subjectAltName is required",
        ),
    ];
    for (signer_name, request, message) in cases {
        let client = Arc::new(FakeCsrClient::new());
        signer(signer_name, client.clone())
            .handle(approved(request))
            .await
            .expect(message);
        let updates = status_updates(&client);
        let status = updates[0].status.as_ref().expect("status");
        assert!(status.certificate.is_none(), "{message}");
        let failed = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Failed")
            .expect("failed condition");
        assert_eq!(failed.status, "True");
        assert_eq!(failed.reason.as_deref(), Some(SIGNER_VALIDATION_FAILURE));
        assert_eq!(failed.message.as_deref(), Some(message));
        assert_eq!(failed.last_update_time, Some(Time(now())));
    }
}

#[tokio::test]
async fn unapproved_failed_or_foreign_csrs_are_left_alone() {
    let client_csr = || {
        csr(
            "c",
            KUBE_APISERVER_CLIENT_SIGNER,
            &["client auth"],
            "u",
            &csr_pem("alice", &[], &[]),
        )
    };
    let cases = [
        ("pending", client_csr()),
        (
            "denied",
            with_conditions(client_csr(), vec![condition("Denied", "True", None)]),
        ),
        (
            "approved and denied",
            with_conditions(
                client_csr(),
                vec![
                    condition("Approved", "True", None),
                    condition("Denied", "True", None),
                ],
            ),
        ),
        (
            "failed",
            with_conditions(
                client_csr(),
                vec![
                    condition("Approved", "True", None),
                    condition("Failed", "True", None),
                ],
            ),
        ),
        (
            "another signer",
            approved(csr(
                "c",
                "example.com/other",
                &["client auth"],
                "u",
                &csr_pem("alice", &[], &[]),
            )),
        ),
    ];
    for (name, request) in cases {
        let client = Arc::new(FakeCsrClient::new());
        signer(KUBE_APISERVER_CLIENT_SIGNER, client.clone())
            .handle(request)
            .await
            .expect(name);
        assert!(client.actions().is_empty(), "{name}");
    }
}

#[tokio::test]
async fn legacy_unknown_signs_without_restrictions() {
    let client = Arc::new(FakeCsrClient::new());
    let request = approved(csr(
        "c",
        LEGACY_UNKNOWN_SIGNER,
        &["server auth", "client auth"],
        "u",
        &csr_pem("anything", &[], &["a.example"]),
    ));
    signer(LEGACY_UNKNOWN_SIGNER, client.clone())
        .handle(request)
        .await
        .expect("signed");
    let updates = status_updates(&client);
    assert!(
        updates[0]
            .status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .is_some()
    );
}
