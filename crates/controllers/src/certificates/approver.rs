//! `certificatesigningrequest-approving-controller` (`csrapproving`): approves kubelet client CSRs whose requester a SubjectAccessReview allows to ask for one (upstream `approver/sarapprove.go`).

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::client::CsrClient;
use super::request::{
    CertificateRequest, KUBE_APISERVER_CLIENT_KUBELET_SIGNER, approval_conditions, is_issued,
    parse_csr, usages_of, validate_kubelet_client_csr,
};
use super::{CsrHandler, Error, Result};

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "certificatesigningrequest-approving-controller";
/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "csrapproving";
/// The certificate controller instance's name (upstream's `"csrapproving"`).
pub const INSTANCE_NAME: &str = "csrapproving";
/// Workers: five, as kube-controller-manager starts it.
pub const WORKERS: usize = 5;

/// The reason of the condition the approver adds.
pub const REASON: &str = "AutoApproved";
/// The message when the node asked for its own client certificate.
pub const SELF_NODE_CLIENT_MESSAGE: &str =
    "Auto approving self kubelet client certificate after SubjectAccessReview.";
/// The message when someone else asked for a node's client certificate.
pub const NODE_CLIENT_MESSAGE: &str =
    "Auto approving kubelet client certificate after SubjectAccessReview.";

/// The approving handler, as upstream's `sarApprover`.
pub struct SarApprover {
    /// The SubjectAccessReviews and the approval write. Test seam: [`super::FakeCsrClient`].
    client: Arc<dyn CsrClient>,
}

impl std::fmt::Debug for SarApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SarApprover").finish_non_exhaustive()
    }
}

impl SarApprover {
    /// An approver writing through `client`.
    pub fn new(client: Arc<dyn CsrClient>) -> Self {
        Self { client }
    }

    /// Whether the CSR's requester may create `certificatesigningrequests/<subresource>`.
    async fn authorize(&self, csr: &CertificateSigningRequest, subresource: &str) -> Result<bool> {
        let review = SubjectAccessReview {
            metadata: ObjectMeta::default(),
            spec: SubjectAccessReviewSpec {
                user: csr.spec.username.clone(),
                uid: csr.spec.uid.clone(),
                groups: csr.spec.groups.clone(),
                extra: csr.spec.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    group: Some("certificates.k8s.io".to_owned()),
                    resource: Some("certificatesigningrequests".to_owned()),
                    verb: Some("create".to_owned()),
                    subresource: Some(subresource.to_owned()),
                    version: Some("*".to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            status: None,
        };
        self.client
            .subject_access_review(&review)
            .await
            .map_err(|source| Error::Authorize {
                csr: name_of(csr),
                source,
            })
    }
}

fn name_of(csr: &CertificateSigningRequest) -> String {
    csr.metadata.name.clone().unwrap_or_default()
}

/// A kubelet client CSR: the kubelet client signer and upstream's kubelet client shape.
fn is_node_client_cert(csr: &CertificateSigningRequest, req: &CertificateRequest) -> bool {
    csr.spec.signer_name == KUBE_APISERVER_CLIENT_KUBELET_SIGNER
        && validate_kubelet_client_csr(req, &usages_of(csr)).is_ok()
}

/// A kubelet client CSR the node asked for itself (its user is the requested common name).
fn is_self_node_client_cert(csr: &CertificateSigningRequest, req: &CertificateRequest) -> bool {
    csr.spec.username.as_deref() == Some(req.common_name.as_str()) && is_node_client_cert(csr, req)
}

#[async_trait]
impl CsrHandler for SarApprover {
    /// Upstream's `handle`: an issued, approved or denied CSR is left alone; a kubelet client
    /// CSR is approved when the review of `selfnodeclient` (the node's own) or `nodeclient`
    /// allows it, else retried quietly; any other CSR waits for a person.
    async fn handle(&self, mut csr: CertificateSigningRequest) -> Result<()> {
        if is_issued(&csr) {
            return Ok(());
        }
        let (approved, denied) = approval_conditions(csr.status.as_ref());
        if approved || denied {
            return Ok(());
        }
        let req = parse_csr(&csr.spec.request.0).map_err(|message| Error::Parse {
            csr: name_of(&csr),
            message,
        })?;
        let (subresource, kind, message) = if is_self_node_client_cert(&csr, &req) {
            (
                "selfnodeclient",
                "selfNodeClientCert",
                SELF_NODE_CLIENT_MESSAGE,
            )
        } else if is_node_client_cert(&csr, &req) {
            ("nodeclient", "nodeClientCert", NODE_CLIENT_MESSAGE)
        } else {
            return Ok(());
        };
        if !self.authorize(&csr, subresource).await? {
            return Err(Error::Ignorable(format!(
                "recognized csr {:?} as {kind} but subject access review was not approved",
                name_of(&csr)
            )));
        }
        csr.status
            .get_or_insert_default()
            .conditions
            .get_or_insert_default()
            .push(CertificateSigningRequestCondition {
                type_: "Approved".to_owned(),
                status: "True".to_owned(),
                reason: Some(REASON.to_owned()),
                message: Some(message.to_owned()),
                ..CertificateSigningRequestCondition::default()
            });
        self.client
            .update_approval(&csr)
            .await
            .map(|_| ())
            .map_err(|source| Error::UpdateApproval { source })
    }
}

#[cfg(test)]
#[path = "approver_tests.rs"]
mod tests;
