//! resource.k8s.io/v1 resourceclaims: the status (allocation, reservations) written only through `/status` by the scheduler and drivers (upstream's `resourceclaimStrategy.PrepareForCreate`). The spec's validation is not done.

use serde_json::{Value, json};

use crate::registry::strategy::Strategy;

/// The ResourceClaim strategy.
#[derive(Debug, Default)]
pub struct ResourceClaimStrategy;

impl Strategy for ResourceClaimStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        // The status starts empty; Go prints the empty status struct.
        obj["status"] = json!({});
    }
}
