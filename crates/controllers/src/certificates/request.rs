//! What the certificate controllers read from a CertificateSigningRequest: the parsed PKCS#10 request, its conditions, and the kubelet request shapes (upstream's `pkg/apis/certificates/helpers.go` and `certificate_controller_utils.go`).

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestStatus,
};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

/// `kubernetes.io/kube-apiserver-client`.
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// `kubernetes.io/kube-apiserver-client-kubelet`.
pub const KUBE_APISERVER_CLIENT_KUBELET_SIGNER: &str =
    "kubernetes.io/kube-apiserver-client-kubelet";
/// `kubernetes.io/kubelet-serving`.
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// `kubernetes.io/legacy-unknown` (certificates.k8s.io/v1beta1's default).
pub const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// The OID of the subjectAltName extension.
const SAN_OID: &str = "2.5.29.17";

/// A PKCS#10 request, decoded: what the approver and the signers check, and the raw parts the
/// signer copies into the certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertificateRequest {
    /// The subject's last common name (Go's `pkix.Name.CommonName`), empty when none.
    pub common_name: String,
    /// The subject's organizations, in order.
    pub organizations: Vec<String>,
    /// DNS subjectAltNames.
    pub dns_names: Vec<String>,
    /// Email subjectAltNames.
    pub email_addresses: Vec<String>,
    /// IP subjectAltNames.
    pub ip_addresses: Vec<IpAddr>,
    /// URI subjectAltNames.
    pub uris: Vec<String>,
    /// The subject, DER, as requested.
    pub subject_der: Vec<u8>,
    /// The SubjectPublicKeyInfo, DER.
    pub public_key_der: Vec<u8>,
    /// The requested subjectAltName extension's value (DER), if any.
    pub san_extension: Option<Vec<u8>>,
    /// Whether the request's self-signature verifies.
    pub signature_valid: bool,
}

/// Decodes the first PEM block of `pem`, which must be a `CERTIFICATE REQUEST`, as upstream's
/// `ParseCSR`; the error is its message.
pub fn parse_csr(pem: &[u8]) -> Result<CertificateRequest, String> {
    const NOT_A_REQUEST: &str = "PEM block type must be CERTIFICATE REQUEST";
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| NOT_A_REQUEST.to_owned())?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(NOT_A_REQUEST.to_owned());
    }
    let (_, request) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|err| format!("x509: malformed certificate request: {err}"))?;
    let info = &request.certification_request_info;
    let text = |attr: &x509_parser::x509::AttributeTypeAndValue<'_>| {
        attr.as_str().map(str::to_owned).unwrap_or_default()
    };
    let mut parsed = CertificateRequest {
        common_name: info
            .subject
            .iter_common_name()
            .last()
            .map(text)
            .unwrap_or_default(),
        organizations: info.subject.iter_organization().map(text).collect(),
        subject_der: info.subject.as_raw().to_vec(),
        public_key_der: info.subject_pki.raw.to_vec(),
        signature_valid: request.verify_signature().is_ok(),
        ..CertificateRequest::default()
    };
    for attribute in info.iter_attributes() {
        let x509_parser::cri_attributes::ParsedCriAttribute::ExtensionRequest(requested) =
            attribute.parsed_attribute()
        else {
            continue;
        };
        for extension in &requested.extensions {
            if extension.oid.to_id_string() != SAN_OID {
                continue;
            }
            parsed.san_extension = Some(extension.value.to_vec());
            let ParsedExtension::SubjectAlternativeName(san) = extension.parsed_extension() else {
                continue;
            };
            for name in &san.general_names {
                match name {
                    GeneralName::DNSName(dns) => parsed.dns_names.push((*dns).to_owned()),
                    GeneralName::RFC822Name(email) => {
                        parsed.email_addresses.push((*email).to_owned());
                    }
                    GeneralName::URI(uri) => parsed.uris.push((*uri).to_owned()),
                    GeneralName::IPAddress(bytes) => {
                        if let Ok(v4) = <[u8; 4]>::try_from(*bytes) {
                            parsed.ip_addresses.push(IpAddr::from(v4));
                        } else if let Ok(v6) = <[u8; 16]>::try_from(*bytes) {
                            parsed.ip_addresses.push(IpAddr::from(v6));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(parsed)
}

/// The usages of `csr`'s spec as a set.
pub fn usages_of(csr: &CertificateSigningRequest) -> BTreeSet<&str> {
    csr.spec
        .usages
        .iter()
        .flatten()
        .map(String::as_str)
        .collect()
}

fn set<'a>(items: &[&'a str]) -> BTreeSet<&'a str> {
    items.iter().copied().collect()
}

/// Whether the request names exactly the organization `system:nodes`.
fn is_system_nodes(req: &CertificateRequest) -> bool {
    req.organizations == ["system:nodes"]
}

const ORGANIZATION_NOT_SYSTEM_NODES: &str = "subject organization is not system:nodes";
const COMMON_NAME_NOT_SYSTEM_NODE: &str = "subject common name does not begin with system:node:";

/// Upstream's `ValidateKubeletServingCSR`: organization `system:nodes`, a DNS or IP SAN and no
/// email or URI one, usages digital signature + server auth (+ key encipherment), common name
/// `system:node:*`. The error is upstream's message.
pub fn validate_kubelet_serving_csr(
    req: &CertificateRequest,
    usages: &BTreeSet<&str>,
) -> Result<(), String> {
    if !is_system_nodes(req) {
        return Err(ORGANIZATION_NOT_SYSTEM_NODES.to_owned());
    }
    if req.dns_names.is_empty() && req.ip_addresses.is_empty() {
        return Err("DNS or IP subjectAltName is required".to_owned());
    }
    if !req.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".to_owned());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".to_owned());
    }
    let required = set(&["digital signature", "key encipherment", "server auth"]);
    if *usages != required && *usages != set(&["digital signature", "server auth"]) {
        return Err(format!("usages did not match {}", go_list(&required)));
    }
    if !req.common_name.starts_with("system:node:") {
        return Err(COMMON_NAME_NOT_SYSTEM_NODE.to_owned());
    }
    Ok(())
}

/// Upstream's `ValidateKubeletClientCSR`: organization `system:nodes`, no SANs, common name
/// `system:node:*`, usages digital signature + client auth (+ key encipherment).
pub fn validate_kubelet_client_csr(
    req: &CertificateRequest,
    usages: &BTreeSet<&str>,
) -> Result<(), String> {
    if !is_system_nodes(req) {
        return Err(ORGANIZATION_NOT_SYSTEM_NODES.to_owned());
    }
    if !req.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".to_owned());
    }
    if !req.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".to_owned());
    }
    if !req.ip_addresses.is_empty() {
        return Err("IP subjectAltNames are not allowed".to_owned());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".to_owned());
    }
    if !req.common_name.starts_with("system:node:") {
        return Err(COMMON_NAME_NOT_SYSTEM_NODE.to_owned());
    }
    let required = set(&["client auth", "digital signature", "key encipherment"]);
    if *usages != required && *usages != set(&["client auth", "digital signature"]) {
        return Err(format!("usages did not match {}", go_list(&required)));
    }
    Ok(())
}

/// A sorted set as Go's `%v` prints a `[]string`: `[a b c]`.
fn go_list(items: &BTreeSet<&str>) -> String {
    format!("[{}]", items.iter().copied().collect::<Vec<_>>().join(" "))
}

/// Whether the status holds an `Approved` and whether it holds a `Denied` condition, of any
/// status, as upstream's `GetCertApprovalCondition`.
pub fn approval_conditions(status: Option<&CertificateSigningRequestStatus>) -> (bool, bool) {
    let mut approved = false;
    let mut denied = false;
    for condition in status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
    {
        approved |= condition.type_ == "Approved";
        denied |= condition.type_ == "Denied";
    }
    (approved, denied)
}

/// Approved and not denied (upstream's `IsCertificateRequestApproved`).
pub fn is_approved(csr: &CertificateSigningRequest) -> bool {
    let (approved, denied) = approval_conditions(csr.status.as_ref());
    approved && !denied
}

/// Whether a condition of `type_` has status `True` (upstream's `HasTrueCondition`).
pub fn has_true_condition(csr: &CertificateSigningRequest, type_: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Whether `status.certificate` is set (the CSR is issued).
pub fn is_issued(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
}

#[cfg(test)]
#[path = "request_tests.rs"]
pub(crate) mod tests;
