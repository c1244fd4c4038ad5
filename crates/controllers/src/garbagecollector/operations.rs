//! The collector's API calls: GET, DELETE with preconditions, PATCH with a merge-patch fallback, finalizer removal (upstream `operations.go`).
//!
//! [`MetadataClient`] is the seam: [`ApiMetadataClient`] talks to the server through
//! `kube::Api<PartialObjectMeta<DynamicObject>>` (the metadata-only representation, as
//! upstream's metadata client), [`super::fake::FakeMetadataClient`] keeps objects in memory.
//! [`Operations`] adds what upstream layers on top: the REST mapping, cluster-scoped
//! namespaces cleared, the resourceVersion precondition on deletes, retries on conflict.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::ApiStatus;
use kube::api::{
    Api, DeleteParams, ObjectMeta, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::core::{DynamicObject, PartialObjectMeta};
use serde_json::Value;

use super::discovery::{RestMapper, RestMapping};
use super::graph::ObjectIdentity;
use super::patch::finalizers_json_merge;
use super::{Error, Result};

/// A patch body and its content type.
#[derive(Clone, Debug, PartialEq)]
pub enum PatchBody {
    /// `application/strategic-merge-patch+json`.
    Strategic(Value),
    /// `application/merge-patch+json`.
    Merge(Value),
}

/// The requests the collector makes, on objects of any resource, seeing only metadata.
#[async_trait]
pub trait MetadataClient: Send + Sync {
    /// GETs `name` (in `namespace`; empty for cluster-scoped resources).
    async fn get(
        &self,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, kube::Error>;

    /// DELETEs `name` with `params` (preconditions, propagation policy).
    async fn delete(
        &self,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
        params: &DeleteParams,
    ) -> Result<(), kube::Error>;

    /// PATCHes `name`; returns the object's metadata as stored.
    async fn patch(
        &self,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
        patch: &PatchBody,
    ) -> Result<ObjectMeta, kube::Error>;
}

/// [`MetadataClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiMetadataClient {
    client: kube::Client,
}

impl std::fmt::Debug for ApiMetadataClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiMetadataClient").finish_non_exhaustive()
    }
}

impl ApiMetadataClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(
        &self,
        resource: &RestMapping,
        namespace: &str,
    ) -> Api<PartialObjectMeta<DynamicObject>> {
        if resource.namespaced && !namespace.is_empty() {
            Api::namespaced_with(self.client.clone(), namespace, &resource.resource)
        } else {
            Api::all_with(self.client.clone(), &resource.resource)
        }
    }
}

#[async_trait]
impl MetadataClient for ApiMetadataClient {
    async fn get(
        &self,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, kube::Error> {
        Ok(self.api(resource, namespace).get(name).await?.metadata)
    }

    async fn delete(
        &self,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
        params: &DeleteParams,
    ) -> Result<(), kube::Error> {
        self.api(resource, namespace).delete(name, params).await?;
        Ok(())
    }

    async fn patch(
        &self,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
        patch: &PatchBody,
    ) -> Result<ObjectMeta, kube::Error> {
        let api = self.api(resource, namespace);
        let params = PatchParams::default();
        let patched = match patch {
            PatchBody::Strategic(v) => api.patch(name, &params, &Patch::Strategic(v)).await?,
            PatchBody::Merge(v) => api.patch(name, &params, &Patch::Merge(v)).await?,
        };
        Ok(patched.metadata)
    }
}

/// client-go's `retry.DefaultBackoff` for `RetryOnConflict`: 4 attempts, 10 ms growing ×5,
/// 10 % jitter.
pub const CONFLICT_RETRY_STEPS: usize = 4;
const CONFLICT_RETRY_INITIAL: Duration = Duration::from_millis(10);
const CONFLICT_RETRY_FACTOR: u32 = 5;
const CONFLICT_RETRY_JITTER: f64 = 0.1;

/// True for a 415 UnsupportedMediaType (the resource takes no strategic merge patch).
fn is_unsupported_media_type(err: &Error) -> bool {
    err.api_status()
        .is_some_and(|s| s.reason == "UnsupportedMediaType" || s.code == 415)
}

/// The collector's API operations on graph identities.
#[derive(Clone)]
pub struct Operations {
    client: Arc<dyn MetadataClient>,
    mapper: Arc<RestMapper>,
}

impl std::fmt::Debug for Operations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operations")
            .field("mapped_kinds", &self.mapper.len())
            .finish_non_exhaustive()
    }
}

impl Operations {
    /// Operations through `client`, resolving kinds with `mapper`.
    pub fn new(client: Arc<dyn MetadataClient>, mapper: Arc<RestMapper>) -> Self {
        Self { client, mapper }
    }

    /// The REST mapper.
    pub fn mapper(&self) -> &Arc<RestMapper> {
        &self.mapper
    }

    /// The client.
    pub fn client(&self) -> &Arc<dyn MetadataClient> {
        &self.client
    }

    /// The resource serving `api_version`/`kind`, as upstream's `apiResource`.
    pub fn api_resource(&self, api_version: &str, kind: &str) -> Result<RestMapping> {
        self.mapper
            .mapping(api_version, kind)
            .ok_or_else(|| Error::RestMapping {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
    }

    /// The namespace to address `item` in: none for cluster-scoped resources, as upstream's
    /// `resourceDefaultNamespace`.
    fn namespace<'a>(mapping: &RestMapping, item: &'a ObjectIdentity) -> &'a str {
        if mapping.namespaced {
            &item.namespace
        } else {
            ""
        }
    }

    /// GETs the live object `item` names (metadata only), as upstream's `getObject`.
    pub async fn get_object(&self, item: &ObjectIdentity) -> Result<ObjectMeta> {
        let mapping = self.api_resource(&item.api_version, &item.kind)?;
        self.client
            .get(&mapping, Self::namespace(&mapping, item), &item.name)
            .await
            .map_err(|e| Error::api("get", item, e))
    }

    /// PATCHes `item`, as upstream's `patchObject`.
    pub async fn patch_object(
        &self,
        item: &ObjectIdentity,
        patch: &PatchBody,
    ) -> Result<ObjectMeta> {
        let mapping = self.api_resource(&item.api_version, &item.kind)?;
        self.client
            .patch(&mapping, Self::namespace(&mapping, item), &item.name, patch)
            .await
            .map_err(|e| Error::api("patch", item, e))
    }

    /// Tries `strategic`; if the resource does not support strategic merge patches, GETs the
    /// object and sends the JSON merge patch `json_merge` computes from it, as upstream's
    /// `GarbageCollector.patch`.
    pub async fn patch(
        &self,
        item: &ObjectIdentity,
        strategic: Value,
        json_merge: impl FnOnce(&ObjectMeta) -> Value + Send,
    ) -> Result<ObjectMeta> {
        match self
            .patch_object(item, &PatchBody::Strategic(strategic))
            .await
        {
            Err(e) if is_unsupported_media_type(&e) => {
                let current = self.get_object(item).await?;
                let body = json_merge(&current);
                self.patch_object(item, &PatchBody::Merge(body)).await
            }
            other => other,
        }
    }

    /// DELETEs `item` with its uid (and, when known, the `resource_version` it was judged at)
    /// as preconditions, as upstream's `deleteObject`. If only the resourceVersion precondition
    /// failed and the live object still has the same owner references, it is deleted anyway:
    /// the decision did not depend on what changed. A 404 is returned as an error (callers
    /// turn it into a virtual delete event).
    pub async fn delete_object(
        &self,
        item: &ObjectIdentity,
        resource_version: &str,
        owners_at_resource_version: &[OwnerReference],
        policy: Option<PropagationPolicy>,
    ) -> Result<()> {
        let mapping = self.api_resource(&item.api_version, &item.kind)?;
        let namespace = Self::namespace(&mapping, item);
        let mut params = DeleteParams {
            propagation_policy: policy,
            preconditions: Some(Preconditions {
                uid: Some(item.uid.clone()),
                resource_version: (!resource_version.is_empty())
                    .then(|| resource_version.to_owned()),
            }),
            ..DeleteParams::default()
        };
        let result = self
            .client
            .delete(&mapping, namespace, &item.name, &params)
            .await;
        let err = match result {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if !err.is_conflict() || resource_version.is_empty() {
            return Err(Error::api("delete", item, err));
        }
        // Did only the resourceVersion move? Then the owners we judged are still the owners.
        let live = match self.client.get(&mapping, namespace, &item.name).await {
            Ok(live) => live,
            Err(get_err) if get_err.is_not_found() => {
                return Err(Error::api("delete", item, get_err));
            }
            Err(_) => return Err(Error::api("delete", item, err)),
        };
        let live_owners = live.owner_references.as_deref().unwrap_or_default();
        if live.uid.as_deref() == Some(item.uid.as_str())
            && live_owners == owners_at_resource_version
        {
            if let Some(p) = params.preconditions.as_mut() {
                p.resource_version = None;
            }
            return self
                .client
                .delete(&mapping, namespace, &item.name, &params)
                .await
                .map_err(|e| Error::api("delete", item, e));
        }
        Err(Error::api("delete", item, err))
    }

    /// Removes `finalizer` from `owner` with a resourceVersion-guarded merge patch, retrying on
    /// conflict with client-go's default backoff; a missing object or finalizer is success, as
    /// upstream's `removeFinalizer`.
    pub async fn remove_finalizer(&self, owner: &ObjectIdentity, finalizer: &str) -> Result<()> {
        let mut delay = CONFLICT_RETRY_INITIAL;
        for attempt in 1..=CONFLICT_RETRY_STEPS {
            let current = match self.get_object(owner).await {
                Ok(meta) => meta,
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(e),
            };
            if current.uid.as_deref().is_some_and(|u| u != owner.uid) {
                // Another object took the name: ours is gone.
                return Ok(());
            }
            let finalizers = current.finalizers.unwrap_or_default();
            if !finalizers.iter().any(|f| f == finalizer) {
                tracing::trace!(%owner, finalizer, "the finalizer is already removed from the object");
                return Ok(());
            }
            let remaining: Vec<String> =
                finalizers.into_iter().filter(|f| f != finalizer).collect();
            let body = finalizers_json_merge(
                current.resource_version.as_deref().unwrap_or_default(),
                &remaining,
            );
            match self.patch_object(owner, &PatchBody::Merge(body)).await {
                Ok(_) => return Ok(()),
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) if e.is_conflict() => {
                    if attempt == CONFLICT_RETRY_STEPS {
                        return Err(Error::FinalizerConflicts {
                            retries: CONFLICT_RETRY_STEPS,
                            owner: owner.to_string(),
                        });
                    }
                    let jitter = 1.0 + rand::random::<f64>() * CONFLICT_RETRY_JITTER;
                    tokio::time::sleep(delay.mul_f64(jitter)).await;
                    delay *= CONFLICT_RETRY_FACTOR;
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::FinalizerConflicts {
            retries: CONFLICT_RETRY_STEPS,
            owner: owner.to_string(),
        })
    }
}
