//! Unit tests of the approver: upstream's `sarapprove_test.go` cases against a fake client.

use super::*;
use crate::certificates::client::{CsrAction, FakeCsrClient};
use crate::certificates::testing::{condition, csr, csr_pem, with_conditions};

const KUBELET_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];

fn node_csr(username: &str) -> CertificateSigningRequest {
    csr(
        "csr-1",
        KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
        KUBELET_USAGES,
        username,
        &csr_pem("system:node:n1", &["system:nodes"], &[]),
    )
}

fn reviewed_subresources(client: &FakeCsrClient) -> Vec<String> {
    client
        .actions()
        .into_iter()
        .filter_map(|a| match a {
            CsrAction::SubjectAccessReview(r) => r.spec.resource_attributes?.subresource,
            _ => None,
        })
        .collect()
}

fn approvals(client: &FakeCsrClient) -> Vec<CertificateSigningRequestCondition> {
    client
        .actions()
        .into_iter()
        .filter_map(|a| match a {
            CsrAction::UpdateApproval(csr) => csr.status?.conditions?.pop(),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_node_asking_for_its_own_client_certificate_is_approved_after_a_selfnodeclient_review() {
    let client = Arc::new(FakeCsrClient::new());
    client.allow("selfnodeclient", true);
    let approver = SarApprover::new(client.clone());
    approver
        .handle(node_csr("system:node:n1"))
        .await
        .expect("approved");
    assert_eq!(reviewed_subresources(&client), ["selfnodeclient"]);
    let approved = approvals(&client);
    assert_eq!(approved.len(), 1);
    assert_eq!(approved[0].type_, "Approved");
    assert_eq!(approved[0].status, "True");
    assert_eq!(approved[0].reason.as_deref(), Some("AutoApproved"));
    assert_eq!(
        approved[0].message.as_deref(),
        Some(SELF_NODE_CLIENT_MESSAGE)
    );
}

#[tokio::test]
async fn someone_else_asking_for_a_node_client_certificate_needs_nodeclient() {
    let client = Arc::new(FakeCsrClient::new());
    client.allow("nodeclient", true);
    let approver = SarApprover::new(client.clone());
    approver
        .handle(node_csr("system:bootstrap:abc"))
        .await
        .expect("approved");
    assert_eq!(reviewed_subresources(&client), ["nodeclient"]);
    let approved = approvals(&client);
    assert_eq!(
        approved[0].message.as_deref(),
        Some("Auto approving kubelet client certificate after SubjectAccessReview.")
    );
}

#[tokio::test]
async fn a_review_that_is_not_allowed_is_retried_quietly_without_approving() {
    let client = Arc::new(FakeCsrClient::new());
    let approver = SarApprover::new(client.clone());
    let err = approver
        .handle(node_csr("system:node:n1"))
        .await
        .expect_err("not approved");
    assert!(matches!(err, Error::Ignorable(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "recognized csr \"csr-1\" as selfNodeClientCert but subject access review was not approved"
    );
    assert!(approvals(&client).is_empty());
}

#[tokio::test]
async fn what_is_not_a_kubelet_client_request_is_left_for_a_person() {
    let cases = [
        (
            "another signer",
            csr(
                "c",
                "kubernetes.io/kube-apiserver-client",
                KUBELET_USAGES,
                "u",
                &csr_pem("system:node:n1", &["system:nodes"], &[]),
            ),
        ),
        (
            "not system:nodes",
            csr(
                "c",
                KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
                KUBELET_USAGES,
                "u",
                &csr_pem("system:node:n1", &["devs"], &[]),
            ),
        ),
        (
            "server auth usage",
            csr(
                "c",
                KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
                &["digital signature", "server auth"],
                "u",
                &csr_pem("system:node:n1", &["system:nodes"], &[]),
            ),
        ),
        (
            "already approved",
            with_conditions(node_csr("u"), vec![condition("Approved", "True", None)]),
        ),
        (
            "already denied",
            with_conditions(node_csr("u"), vec![condition("Denied", "True", None)]),
        ),
    ];
    for (name, request) in cases {
        let client = Arc::new(FakeCsrClient::new());
        client.allow("nodeclient", true);
        client.allow("selfnodeclient", true);
        SarApprover::new(client.clone())
            .handle(request)
            .await
            .expect(name);
        assert!(
            client.actions().is_empty(),
            "{name}: {:?}",
            client.actions()
        );
    }
}

#[tokio::test]
async fn a_request_that_does_not_parse_is_an_error() {
    let client = Arc::new(FakeCsrClient::new());
    let bad = csr(
        "c",
        KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
        KUBELET_USAGES,
        "u",
        "junk",
    );
    let err = SarApprover::new(client.clone())
        .handle(bad)
        .await
        .expect_err("unparsable");
    assert_eq!(
        err.to_string(),
        "unable to parse csr \"c\": PEM block type must be CERTIFICATE REQUEST"
    );
}

#[tokio::test]
async fn the_review_carries_the_requesters_identity() {
    let client = Arc::new(FakeCsrClient::new());
    client.allow("selfnodeclient", true);
    SarApprover::new(client.clone())
        .handle(node_csr("system:node:n1"))
        .await
        .expect("approved");
    let Some(CsrAction::SubjectAccessReview(review)) = client.actions().first().cloned() else {
        panic!("no review: {:?}", client.actions());
    };
    assert_eq!(review.spec.user.as_deref(), Some("system:node:n1"));
    assert_eq!(
        review.spec.groups,
        Some(vec!["system:authenticated".to_owned()])
    );
    let attributes = review.spec.resource_attributes.expect("attributes");
    assert_eq!(attributes.group.as_deref(), Some("certificates.k8s.io"));
    assert_eq!(
        attributes.resource.as_deref(),
        Some("certificatesigningrequests")
    );
    assert_eq!(attributes.verb.as_deref(), Some("create"));
    assert_eq!(attributes.version.as_deref(), Some("*"));
}
