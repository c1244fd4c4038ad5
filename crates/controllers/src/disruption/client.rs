//! The calls the disruption controller makes directly: the budget's status write, and an owner's `scale` subresource.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kcm_machinery::controller::api_status::{self, error_message};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;

/// An owner's scale: its UID and desired replicas (`controllerAndScale`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleOf {
    /// The owner's UID (compared with the pod's controller reference).
    pub uid: String,
    /// `spec.replicas`.
    pub replicas: i32,
}

/// The calls, as upstream's `kubeClient` and `scaleNamespacer`.
#[async_trait]
pub trait DisruptionClient: Send + Sync {
    /// Replaces the budget's status (`UpdateStatus`), conditioned on its resourceVersion.
    async fn update_status(&self, pdb: &PodDisruptionBudget) -> Result<(), kube::Error>;

    /// The `scale` of `namespace/name` of `api_version`/`kind`: `Ok(None)` when it does not
    /// exist; an error (upstream's words) when the kind has no `scale` subresource.
    async fn get_scale(
        &self,
        namespace: &str,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> Result<Option<ScaleOf>, String>;
}

/// [`DisruptionClient`] over a `kube::Client`.
pub struct ApiDisruptionClient {
    client: kube::Client,
}

impl ApiDisruptionClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiDisruptionClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiDisruptionClient")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl DisruptionClient for ApiDisruptionClient {
    async fn update_status(&self, pdb: &PodDisruptionBudget) -> Result<(), kube::Error> {
        let name = pdb.metadata.name.as_deref().unwrap_or_default();
        let namespace = pdb.metadata.namespace.as_deref().unwrap_or_default();
        Api::<PodDisruptionBudget>::namespaced(self.client.clone(), namespace)
            .replace_status(name, &PostParams::default(), pdb)
            .await
            .map(|_| ())
    }

    async fn get_scale(
        &self,
        namespace: &str,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> Result<Option<ScaleOf>, String> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| {
                format!(
                    "no matches for kind \"{kind}\" in group \"{group}\": {}",
                    error_message(&e)
                )
            })?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        match api.get_scale(name).await {
            Ok(scale) => Ok(Some(ScaleOf {
                uid: scale.metadata.uid.unwrap_or_default(),
                replicas: scale.spec.and_then(|s| s.replicas).unwrap_or(0),
            })),
            Err(kube::Error::Api(s)) if s.code == 404 => {
                if caps.subresources.iter().any(|(r, _)| r.plural == "scale") {
                    Ok(None)
                } else {
                    let gr = if group.is_empty() {
                        resource.plural.clone()
                    } else {
                        format!("{}.{group}", resource.plural)
                    };
                    Err(format!("{gr} does not implement the scale subresource"))
                }
            }
            Err(e) => Err(error_message(&e)),
        }
    }
}

/// What [`FakeDisruptionClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// Every status written, in order.
    updates: Vec<PodDisruptionBudget>,
    /// Scales by `namespace/kind/name`.
    scales: HashMap<String, ScaleOf>,
    /// Whether status writes fail with a 409.
    conflict: bool,
}

/// A [`DisruptionClient`] recording status writes and answering scales from memory.
#[derive(Debug, Default)]
pub struct FakeDisruptionClient {
    state: Mutex<FakeState>,
}

impl FakeDisruptionClient {
    /// A fake with no scales.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every status written so far.
    pub fn updates(&self) -> Vec<PodDisruptionBudget> {
        self.state().updates.clone()
    }

    /// Serves `scale` for `namespace/kind/name`.
    pub fn set_scale(&self, namespace: &str, kind: &str, name: &str, scale: ScaleOf) {
        self.state()
            .scales
            .insert(format!("{namespace}/{kind}/{name}"), scale);
    }

    /// Makes status writes fail with a 409 Conflict (or succeed again).
    pub fn set_conflict(&self, conflict: bool) {
        self.state().conflict = conflict;
    }
}

#[async_trait]
impl DisruptionClient for FakeDisruptionClient {
    async fn update_status(&self, pdb: &PodDisruptionBudget) -> Result<(), kube::Error> {
        let mut state = self.state();
        if state.conflict {
            let name = pdb.metadata.name.as_deref().unwrap_or_default();
            return Err(kube::Error::Api(
                api_status::conflict(
                    "poddisruptionbudgets.policy",
                    name,
                    "the object has been modified",
                )
                .boxed(),
            ));
        }
        state.updates.push(pdb.clone());
        Ok(())
    }

    async fn get_scale(
        &self,
        namespace: &str,
        _api_version: &str,
        kind: &str,
        name: &str,
    ) -> Result<Option<ScaleOf>, String> {
        Ok(self
            .state()
            .scales
            .get(&format!("{namespace}/{kind}/{name}"))
            .cloned())
    }
}
