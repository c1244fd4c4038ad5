//! The ResourceClaim controller's metrics (`resourceclaim_controller_creates_total`, `resourceclaim_controller_resource_claims`), as upstream's `resourceclaim/metrics`.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::ResourceClaim;
use kcm_machinery::informer::store::Indexer;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::claims::{
    EXTENDED_RESOURCE_CLAIM_ANNOTATION, POD_CLAIM_NAME_ANNOTATION, is_allocated,
    spec_needs_admin_access,
};

/// The subsystem of every metric here (upstream's `ResourceClaimSubsystem`).
pub const SUBSYSTEM: &str = "resourceclaim_controller";

/// The gauge's full name.
pub const RESOURCE_CLAIMS: &str = "resourceclaim_controller_resource_claims";

/// The gauge's help text, as upstream's `NumResourceClaimsDesc`.
pub const RESOURCE_CLAIMS_HELP: &str = "Number of ResourceClaims, categorized by allocation status, admin access, and source. Source can be 'resource_claim_template' (created from a template), 'extended_resource' (extended resources), or empty (manually created by a user).";

/// The labels of `resourceclaim_controller_creates_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CreateLabels {
    /// `success` or `failure`.
    status: String,
    /// `true` when the template asks for admin access.
    admin_access: String,
}

/// The create counter. Build one per process, [`register`](Self::register) it and hand the
/// `Arc` to the controller's options.
#[derive(Debug, Default)]
pub struct ResourceClaimMetrics {
    /// Create requests by outcome and admin access (upstream's `ResourceClaimCreate`).
    creates: Family<CreateLabels, Counter>,
}

impl ResourceClaimMetrics {
    /// A zeroed counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `resourceclaim_controller_creates_total`.
    pub fn register(&self, registry: &mut Registry) {
        registry.sub_registry_with_prefix(SUBSYSTEM).register(
            "creates",
            "Number of ResourceClaims creation requests, categorized by creation status and admin access",
            self.creates.clone(),
        );
    }

    /// Counts one create request: `success` or `failure`, with or without admin access.
    pub fn create(&self, success: bool, admin_access: bool) {
        self.creates
            .get_or_create(&CreateLabels {
                status: if success { "success" } else { "failure" }.to_owned(),
                admin_access: admin_access.to_string(),
            })
            .inc();
    }

    /// The count of `(success, admin_access)` so far.
    pub fn creates(&self, success: bool, admin_access: bool) -> u64 {
        self.creates
            .get_or_create(&CreateLabels {
                status: if success { "success" } else { "failure" }.to_owned(),
                admin_access: admin_access.to_string(),
            })
            .get()
    }
}

/// One claim's gauge labels: `(allocated, admin_access, source)`.
pub type ClaimLabels = (bool, bool, &'static str);

/// The `source` label of a claim: made from a template, for extended resources, or by a user.
pub fn claim_source(claim: &ResourceClaim) -> &'static str {
    let annotations = claim.metadata.annotations.as_ref();
    if annotations.is_some_and(|a| a.contains_key(POD_CLAIM_NAME_ANNOTATION)) {
        "resource_claim_template"
    } else if annotations
        .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION))
        .is_some_and(|v| v == "true")
    {
        "extended_resource"
    } else {
        ""
    }
}

/// The claims of `claims` counted by [`ClaimLabels`].
pub fn count_claims<'a>(
    claims: impl IntoIterator<Item = &'a ResourceClaim>,
) -> BTreeMap<ClaimLabels, u64> {
    let mut counts = BTreeMap::new();
    for claim in claims {
        let labels = (
            is_allocated(claim),
            spec_needs_admin_access(&claim.spec),
            claim_source(claim),
        );
        *counts.entry(labels).or_insert(0) += 1;
    }
    counts
}

/// Computes `resourceclaim_controller_resource_claims` from the claim cache on each scrape, as
/// upstream's custom collector over the claim lister.
#[derive(Debug)]
pub struct ResourceClaimsCollector {
    /// The claim informer's cache (read only).
    claims: Indexer<ResourceClaim>,
}

impl ResourceClaimsCollector {
    /// A collector over `claims`.
    pub fn new(claims: Indexer<ResourceClaim>) -> Self {
        Self { claims }
    }
}

impl Collector for ResourceClaimsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let claims = self.claims.list();
        let counts = count_claims(claims.iter().map(|c| c.as_ref()));
        if counts.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            RESOURCE_CLAIMS,
            RESOURCE_CLAIMS_HELP,
            None,
            MetricType::Gauge,
        )?;
        for ((allocated, admin, source), n) in counts {
            let allocated = allocated.to_string();
            let admin = admin.to_string();
            let labels = [
                ("admin_access", admin.as_str()),
                ("allocated", allocated.as_str()),
                ("source", source),
            ];
            let sample = family.encode_family(&labels)?;
            ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX)).encode(sample)?;
        }
        Ok(())
    }
}
