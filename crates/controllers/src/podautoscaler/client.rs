//! The API calls the HPA controller makes: the target's `scale` subresource (any kind that serves one, found through discovery as upstream's RESTMapper) and the HPA's `/status`, with a recording fake.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{CrossVersionObjectReference, HorizontalPodAutoscaler};
use kcm_machinery::controller::api_status::error_message;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;

/// Why a call failed, worded for the HPA's conditions and events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// `scaleTargetRef.apiVersion` does not parse.
    #[error("invalid API version in scale target reference: {0}")]
    InvalidApiVersion(String),
    /// Discovery knows no resource of the target's kind.
    #[error("unable to determine resource for scale target reference: {0}")]
    NoMapping(String),
    /// The API server refused or failed the call.
    #[error("{0}")]
    Api(String),
}

/// The calls, as upstream's `scaleNamespacer` and `hpaNamespacer`.
#[async_trait]
pub trait HpaClient: Send + Sync {
    /// Reads the `scale` subresource of `target` in `namespace`.
    async fn get_scale(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
    ) -> Result<Scale, ClientError>;
    /// Writes the `scale` subresource of `target` in `namespace`.
    async fn update_scale(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
        scale: &Scale,
    ) -> Result<Scale, ClientError>;
    /// Writes the HPA's status (`PUT .../status`, the resourceVersion of `hpa` as precondition).
    async fn update_status(&self, hpa: &HorizontalPodAutoscaler) -> Result<(), ClientError>;
}

/// `group/version` split as `schema.ParseGroupVersion` (`v1` is the core group).
fn parse_group_version(api_version: &str) -> Result<(String, String), ClientError> {
    let parts: Vec<&str> = api_version.split('/').collect();
    match parts.as_slice() {
        [version] if !version.is_empty() => Ok((String::new(), (*version).to_owned())),
        [group, version] if !group.is_empty() && !version.is_empty() => {
            Ok(((*group).to_owned(), (*version).to_owned()))
        }
        _ => Err(ClientError::InvalidApiVersion(format!(
            "unexpected GroupVersion string: {api_version}"
        ))),
    }
}

/// [`HpaClient`] over a `kube::Client`; resources of a kind are looked up once through
/// discovery and remembered.
pub struct ApiHpaClient {
    client: kube::Client,
    /// Discovered resources by `apiVersion/kind`. Held only to read or insert.
    resources: Mutex<HashMap<String, ApiResource>>,
}

impl std::fmt::Debug for ApiHpaClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiHpaClient").finish_non_exhaustive()
    }
}

impl ApiHpaClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            resources: Mutex::new(HashMap::new()),
        }
    }

    async fn scale_api(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
    ) -> Result<Api<DynamicObject>, ClientError> {
        let (group, version) = parse_group_version(target.api_version.as_deref().unwrap_or(""))?;
        let key = format!("{group}/{version}/{}", target.kind);
        let cached = self
            .resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        let resource = match cached {
            Some(resource) => resource,
            None => {
                let gvk = GroupVersionKind::gvk(&group, &version, &target.kind);
                let (resource, _) = kube::discovery::pinned_kind(&self.client, &gvk)
                    .await
                    .map_err(|e| {
                        ClientError::NoMapping(format!(
                            "no matches for kind \"{}\" in group \"{group}\": {}",
                            target.kind,
                            error_message(&e)
                        ))
                    })?;
                self.resources
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key, resource.clone());
                resource
            }
        };
        Ok(Api::namespaced_with(
            self.client.clone(),
            namespace,
            &resource,
        ))
    }
}

#[async_trait]
impl HpaClient for ApiHpaClient {
    async fn get_scale(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
    ) -> Result<Scale, ClientError> {
        self.scale_api(namespace, target)
            .await?
            .get_scale(&target.name)
            .await
            .map_err(|e| ClientError::Api(error_message(&e)))
    }

    async fn update_scale(
        &self,
        namespace: &str,
        target: &CrossVersionObjectReference,
        scale: &Scale,
    ) -> Result<Scale, ClientError> {
        self.scale_api(namespace, target)
            .await?
            .replace_scale(&target.name, &PostParams::default(), scale)
            .await
            .map_err(|e| ClientError::Api(error_message(&e)))
    }

    async fn update_status(&self, hpa: &HorizontalPodAutoscaler) -> Result<(), ClientError> {
        let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
        let name = hpa.metadata.name.as_deref().unwrap_or_default();
        Api::<HorizontalPodAutoscaler>::namespaced(self.client.clone(), namespace)
            .replace_status(name, &PostParams::default(), hpa)
            .await
            .map(|_| ())
            .map_err(|e| ClientError::Api(error_message(&e)))
    }
}

/// What [`FakeHpaClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// Scales by target name.
    scales: HashMap<String, Scale>,
    /// Every scale written, in order: `(target name, replicas)`.
    scale_updates: Vec<(String, i32)>,
    /// Every status written, in order.
    statuses: Vec<HorizontalPodAutoscaler>,
    /// When set, scale updates fail with this message.
    update_error: Option<String>,
}

/// A [`HpaClient`] serving scales from memory and recording writes.
#[derive(Debug, Default)]
pub struct FakeHpaClient {
    state: Mutex<FakeState>,
}

impl FakeHpaClient {
    /// A fake holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves a scale for `name` with `replicas` and `selector`.
    pub fn set_scale(&self, name: &str, replicas: i32, selector: &str) {
        let scale = Scale {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::autoscaling::v1::ScaleSpec {
                replicas: Some(replicas),
            }),
            status: Some(k8s_openapi::api::autoscaling::v1::ScaleStatus {
                replicas,
                selector: Some(selector.to_owned()),
            }),
        };
        self.state().scales.insert(name.to_owned(), scale);
    }

    /// Makes scale updates fail with `message`.
    pub fn fail_updates(&self, message: &str) {
        self.state().update_error = Some(message.to_owned());
    }

    /// Every scale write: `(target name, replicas)`.
    pub fn scale_updates(&self) -> Vec<(String, i32)> {
        self.state().scale_updates.clone()
    }

    /// Every status written.
    pub fn statuses(&self) -> Vec<HorizontalPodAutoscaler> {
        self.state().statuses.clone()
    }
}

#[async_trait]
impl HpaClient for FakeHpaClient {
    async fn get_scale(
        &self,
        _namespace: &str,
        target: &CrossVersionObjectReference,
    ) -> Result<Scale, ClientError> {
        parse_group_version(target.api_version.as_deref().unwrap_or(""))?;
        self.state()
            .scales
            .get(&target.name)
            .cloned()
            .ok_or_else(|| {
                ClientError::Api(format!("deployments.apps \"{}\" not found", target.name))
            })
    }

    async fn update_scale(
        &self,
        _namespace: &str,
        target: &CrossVersionObjectReference,
        scale: &Scale,
    ) -> Result<Scale, ClientError> {
        let mut state = self.state();
        if let Some(message) = &state.update_error {
            return Err(ClientError::Api(message.clone()));
        }
        let replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        state.scale_updates.push((target.name.clone(), replicas));
        state.scales.insert(target.name.clone(), scale.clone());
        Ok(scale.clone())
    }

    async fn update_status(&self, hpa: &HorizontalPodAutoscaler) -> Result<(), ClientError> {
        self.state().statuses.push(hpa.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_versions_parse_as_upstream() {
        assert_eq!(
            parse_group_version("apps/v1"),
            Ok(("apps".into(), "v1".into()))
        );
        assert_eq!(parse_group_version("v1"), Ok((String::new(), "v1".into())));
        for bad in ["", "a/b/c", "/v1", "apps/"] {
            assert!(parse_group_version(bad).is_err(), "{bad}");
        }
    }
}
