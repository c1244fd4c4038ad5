//! certificates.k8s.io/v1 certificatesigningrequests, with `/status` (the signer's) and `/approval` (the approver's) subresources.

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

use crate::registry::resource::{ResourceDef, SelectableField};
use crate::registry::subresource::Subresource;
use crate::resources::csr::{self, CsrStrategy};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// certificates.k8s.io/v1 certificatesigningrequests.
pub static CERTIFICATE_SIGNING_REQUESTS: ResourceDef =
    ResourceDef::of::<CertificateSigningRequest>()
        .short_names(&["csr"])
        .subresources(&[Subresource::Approval, Subresource::Status])
        .fields(&[SelectableField::string(
            "spec.signerName",
            "/spec/signerName",
        )])
        .decode_with(csr::decode)
        .strategy(&CsrStrategy)
        .printer(printers::CERTIFICATE_SIGNING_REQUEST)
        .merge_schema(&kinds::METADATA_ONLY);
