//! Builders the certificate controllers' unit tests share.

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

pub(crate) use super::request::tests::csr_pem;

/// CSR `name` for `signer` with `usages`, requested by `username`, carrying `pem`.
pub(crate) fn csr(
    name: &str,
    signer: &str,
    usages: &[&str],
    username: &str,
    pem: &str,
) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem.as_bytes().to_vec()),
            signer_name: signer.to_owned(),
            usages: Some(usages.iter().map(|u| (*u).to_owned()).collect()),
            username: Some(username.to_owned()),
            groups: Some(vec!["system:authenticated".to_owned()]),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    }
}

/// A condition of `type_` with status `status`, last updated at `at` when given.
pub(crate) fn condition(
    type_: &str,
    status: &str,
    at: Option<jiff::Timestamp>,
) -> CertificateSigningRequestCondition {
    CertificateSigningRequestCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        last_update_time: at.map(Time),
        ..CertificateSigningRequestCondition::default()
    }
}

/// `csr` with `conditions` added to its status.
pub(crate) fn with_conditions(
    mut csr: CertificateSigningRequest,
    conditions: Vec<CertificateSigningRequestCondition>,
) -> CertificateSigningRequest {
    csr.status
        .get_or_insert_with(CertificateSigningRequestStatus::default)
        .conditions
        .get_or_insert_default()
        .extend(conditions);
    csr
}
