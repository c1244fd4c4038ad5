//! The one call the aggregation controller makes: a server-side apply of a ClusterRole's rules as field manager `clusterrole-aggregation-controller` (upstream's `applyClusterRoles`), with a recording fake.

use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, Patch, PatchParams};
use kube::core::Status;

/// The field manager of the apply, upstream's.
pub const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";

/// The call, as upstream's `client.RbacV1().ClusterRoles().Apply`.
#[async_trait]
pub trait AggregationClient: Send + Sync {
    /// Server-side applies `rules` as `name`'s rules, forcing conflicts (the controller owns
    /// an aggregated role's rules).
    async fn apply_rules(&self, name: &str, rules: &[PolicyRule]) -> Result<(), kube::Error>;
}

/// [`AggregationClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiAggregationClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiAggregationClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiAggregationClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiAggregationClient")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl AggregationClient for ApiAggregationClient {
    async fn apply_rules(&self, name: &str, rules: &[PolicyRule]) -> Result<(), kube::Error> {
        let patch = serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        });
        Api::<ClusterRole>::all(self.client.clone())
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(patch),
            )
            .await
            .map(|_| ())
    }
}

/// What [`FakeAggregationClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// Every apply, in order: `(name, rules)`.
    applies: Vec<(String, Vec<PolicyRule>)>,
    /// When set, every apply fails with this status.
    error: Option<Status>,
}

/// An [`AggregationClient`] recording applies.
#[derive(Debug, Default)]
pub struct FakeAggregationClient {
    state: Mutex<FakeState>,
}

impl FakeAggregationClient {
    /// A fake that accepts everything.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every apply so far.
    pub fn applies(&self) -> Vec<(String, Vec<PolicyRule>)> {
        self.state().applies.clone()
    }

    /// Makes every later apply fail with `status` (or succeed with `None`).
    pub fn set_error(&self, status: Option<Status>) {
        self.state().error = status;
    }
}

#[async_trait]
impl AggregationClient for FakeAggregationClient {
    async fn apply_rules(&self, name: &str, rules: &[PolicyRule]) -> Result<(), kube::Error> {
        let mut state = self.state();
        if let Some(status) = &state.error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        state.applies.push((name.to_owned(), rules.to_vec()));
        Ok(())
    }
}
