//! The calls the ResourceQuota controller makes directly: the status write, and counting the objects of resources it has no informer for.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};

/// The calls, as upstream's `rqClient` and the object-count evaluators' listers.
#[async_trait]
pub trait QuotaClient: Send + Sync {
    /// Replaces the quota's status (`UpdateStatus`), conditioned on its resourceVersion.
    async fn update_status(&self, quota: &ResourceQuota) -> Result<ResourceQuota, kube::Error>;

    /// How many objects of `group`/`resource` `namespace` holds.
    async fn count(&self, namespace: &str, group: &str, resource: &str)
    -> Result<i64, kube::Error>;
}

/// [`QuotaClient`] over a `kube::Client`.
pub struct ApiQuotaClient {
    /// The API client (cheap to clone).
    client: kube::Client,
    /// Each API group's preferred version, discovered once.
    versions: Mutex<HashMap<String, String>>,
}

impl ApiQuotaClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            versions: Mutex::new(HashMap::new()),
        }
    }

    /// The group's preferred version (`v1` for the core group).
    async fn version_of(&self, group: &str) -> Result<String, kube::Error> {
        if group.is_empty() {
            return Ok("v1".to_owned());
        }
        if let Some(v) = self
            .versions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(group)
        {
            return Ok(v.clone());
        }
        let groups = self.client.list_api_groups().await?;
        let version = groups
            .groups
            .iter()
            .find(|g| g.name == group)
            .and_then(|g| {
                g.preferred_version
                    .as_ref()
                    .map(|p| p.version.clone())
                    .or_else(|| g.versions.first().map(|v| v.version.clone()))
            })
            .ok_or_else(|| {
                kube::Error::Api(
                    kcm_machinery::controller::api_status::not_found("apigroups", group).boxed(),
                )
            })?;
        self.versions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(group.to_owned(), version.clone());
        Ok(version)
    }
}

impl std::fmt::Debug for ApiQuotaClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiQuotaClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl QuotaClient for ApiQuotaClient {
    async fn update_status(&self, quota: &ResourceQuota) -> Result<ResourceQuota, kube::Error> {
        let name = quota.metadata.name.as_deref().unwrap_or_default();
        let namespace = quota.metadata.namespace.as_deref().unwrap_or_default();
        Api::<ResourceQuota>::namespaced(self.client.clone(), namespace)
            .replace_status(name, &PostParams::default(), quota)
            .await
    }

    async fn count(
        &self,
        namespace: &str,
        group: &str,
        resource: &str,
    ) -> Result<i64, kube::Error> {
        let version = self.version_of(group).await?;
        let api_version = if group.is_empty() {
            version.clone()
        } else {
            format!("{group}/{version}")
        };
        let ar = ApiResource {
            group: group.to_owned(),
            version,
            api_version,
            kind: String::new(),
            plural: resource.to_owned(),
        };
        let api = Api::<DynamicObject>::namespaced_with(self.client.clone(), namespace, &ar);
        let mut params = ListParams::default().limit(500);
        let mut total = 0i64;
        loop {
            let page = api.list_metadata(&params).await?;
            total += page.items.len() as i64;
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(total),
            }
        }
    }
}

/// What [`FakeQuotaClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// Every status written, in order.
    updates: Vec<ResourceQuota>,
    /// Object counts by `namespace/group/resource`.
    counts: HashMap<String, i64>,
}

/// A [`QuotaClient`] recording status writes and answering counts from memory.
#[derive(Debug, Default)]
pub struct FakeQuotaClient {
    state: Mutex<FakeState>,
}

impl FakeQuotaClient {
    /// A fake with no objects.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every status written so far.
    pub fn updates(&self) -> Vec<ResourceQuota> {
        self.state().updates.clone()
    }

    /// Sets how many `group`/`resource` objects `namespace` holds.
    pub fn set_count(&self, namespace: &str, group: &str, resource: &str, n: i64) {
        self.state()
            .counts
            .insert(format!("{namespace}/{group}/{resource}"), n);
    }
}

#[async_trait]
impl QuotaClient for FakeQuotaClient {
    async fn update_status(&self, quota: &ResourceQuota) -> Result<ResourceQuota, kube::Error> {
        self.state().updates.push(quota.clone());
        Ok(quota.clone())
    }

    async fn count(
        &self,
        namespace: &str,
        group: &str,
        resource: &str,
    ) -> Result<i64, kube::Error> {
        Ok(self
            .state()
            .counts
            .get(&format!("{namespace}/{group}/{resource}"))
            .copied()
            .unwrap_or(0))
    }
}
