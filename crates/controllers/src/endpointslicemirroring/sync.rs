//! Syncing one Endpoints' mirrored slices (upstream `syncEndpoints` and `deleteMirroredSlices`).

use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm_machinery::informer::keys::split_meta_namespace_key;

use super::controller::{CONTROLLER_NAME, EndpointSliceMirroringController};
use super::utils::MANAGED_BY;
use super::utils::should_mirror;
use super::{Error, Result};
use crate::endpointsliceutil::slices::SERVICE_NAME_INDEX;
use crate::endpointsliceutil::{list_namespace, managed_by, service_controller_key};

impl EndpointSliceMirroringController {
    /// Syncs the mirrored slices of Endpoints `key`, as upstream's `syncEndpoints`: deleted
    /// when the Endpoints is gone or not to be mirrored, or its Service is gone or has a
    /// selector; otherwise (unless the slice cache is older than this controller's writes)
    /// reconciled.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_endpoints(key).await;
        self.metrics.sync_duration(start.elapsed().as_secs_f64());
        tracing::debug!(controller = CONTROLLER_NAME, key, elapsed = ?start.elapsed(), "Finished syncing EndpointSlices for Endpoints");
        result
    }

    async fn sync_endpoints(&self, key: &str) -> Result<()> {
        let (namespace, name) = match split_meta_namespace_key(key) {
            Ok((namespace, name)) => (namespace.unwrap_or_default().to_owned(), name.to_owned()),
            Err(source) => {
                return Err(Error::InvalidKey {
                    key: key.to_owned(),
                    source,
                });
            }
        };
        let Some(endpoints) = self.endpoints.get_by_key(key) else {
            tracing::debug!(
                endpoints = key,
                "Endpoints not found, cleaning up any mirrored EndpointSlices"
            );
            return self.delete_mirrored_slices(&namespace, &name).await;
        };
        if !should_mirror(&endpoints) {
            tracing::debug!(
                endpoints = key,
                "Endpoints should not be mirrored, cleaning up any mirrored EndpointSlices"
            );
            return self.delete_mirrored_slices(&namespace, &name).await;
        }
        let Some(service) = self.services.get_by_key(key) else {
            tracing::debug!(
                service = key,
                "Service not found, cleaning up any mirrored EndpointSlices"
            );
            return self.delete_mirrored_slices(&namespace, &name).await;
        };
        if service.spec.as_ref().is_some_and(|s| s.selector.is_some()) {
            tracing::debug!(
                service = key,
                "Service now has selector, cleaning up any mirrored EndpointSlices"
            );
            return self.delete_mirrored_slices(&namespace, &name).await;
        }
        let slices = self.mirrored_slices(&namespace, &name);
        if self.tracker.stale_slices(&service, &slices) {
            return Err(Error::StaleCache);
        }
        self.reconciler.reconcile(&endpoints, &slices).await
    }

    /// Deletes every slice mirrored for `namespace/name` and forgets its tracker, as
    /// upstream's `deleteMirroredSlices`.
    async fn delete_mirrored_slices(&self, namespace: &str, name: &str) -> Result<()> {
        self.tracker.delete_service(namespace, name);
        let slices = self.mirrored_slices(namespace, name);
        self.reconciler
            .delete_endpoints(namespace, name, &slices)
            .await
    }

    /// The cached slices this controller mirrored for `namespace/name`, as upstream's
    /// `endpointSlicesMirroredForService`.
    fn mirrored_slices(&self, namespace: &str, name: &str) -> Vec<Arc<EndpointSlice>> {
        let key = format!("{namespace}/{name}");
        let candidates = match self.slices.by_index(SERVICE_NAME_INDEX, &key) {
            Ok(found) => found,
            Err(_) => list_namespace(&self.slices, namespace)
                .into_iter()
                .filter(|s| service_controller_key(s).as_deref() == Some(key.as_str()))
                .collect(),
        };
        candidates
            .into_iter()
            .filter(|s| managed_by(s) == MANAGED_BY)
            .collect()
    }
}
