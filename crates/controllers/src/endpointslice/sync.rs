//! Syncing one Service's EndpointSlices (upstream `syncService` of `endpointslice_controller.go`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm_machinery::events::EventType;
use kcm_machinery::informer::keys::split_meta_namespace_key;

use super::controller::{CONTROLLER_NAME, EndpointSliceController, MANAGED_BY, SERVICE_NAME_INDEX};
use super::{Error, Result};
use crate::endpointsliceutil::services::selector_matches;
use crate::endpointsliceutil::{list_namespace, managed_by};

impl EndpointSliceController {
    /// Syncs the EndpointSlices of Service `key`, as upstream's `syncService`, and counts the
    /// result in `endpoint_slice_controller_syncs` (`success`, `stale` or `error`).
    ///
    /// - Service gone: its trackers and metrics are forgotten (its slices go with it, by
    ///   owner reference).
    /// - ExternalName, or no selector: nothing.
    /// - A slice cache older than this controller's writes: [`Error::StaleCache`], retried.
    /// - Otherwise the [`Reconciler`](super::Reconciler) writes what differs; a failure is
    ///   also a `FailedToUpdateEndpointSlices` warning on the Service.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_service(key).await;
        self.metrics.sync(match &result {
            Ok(()) => "success",
            Err(err) if err.is_stale_cache() => "stale",
            Err(_) => "error",
        });
        tracing::debug!(controller = CONTROLLER_NAME, key, elapsed = ?start.elapsed(), "Finished syncing service endpoint slices");
        result
    }

    async fn sync_service(&self, key: &str) -> Result<()> {
        let (namespace, name) = match split_meta_namespace_key(key) {
            Ok((namespace, name)) => (namespace.unwrap_or_default().to_owned(), name.to_owned()),
            Err(source) => {
                return Err(Error::InvalidKey {
                    key: key.to_owned(),
                    source,
                });
            }
        };
        let Some(service) = self.services.get_by_key(key) else {
            self.trigger_times.delete_service(&namespace, &name);
            self.reconciler.delete_service(&namespace, &name);
            self.tracker.delete_service(&namespace, &name);
            return Ok(());
        };
        let spec = service.spec.as_ref();
        if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
            return Ok(());
        }
        let Some(selector) = spec.and_then(|s| s.selector.as_ref()) else {
            // Slices of a Service without a selector are created out of band.
            return Ok(());
        };

        let empty = Default::default();
        let pods: Vec<Arc<Pod>> = list_namespace(&self.pods, &namespace)
            .into_iter()
            .filter(|p| selector_matches(selector, p.metadata.labels.as_ref().unwrap_or(&empty)))
            .collect();

        let slices = self.service_slices(&namespace, &name);
        if self.tracker.stale_slices(&service, &slices) {
            return Err(Error::StaleCache);
        }
        // Computed even when nothing is written, so the tracker's state stays current.
        let trigger_time = self
            .trigger_times
            .compute_endpoint_last_change_trigger_time(&namespace, &service, &pods);

        if let Err(err) = self
            .reconciler
            .reconcile(&service, &pods, &slices, trigger_time)
            .await
        {
            self.recorder.event(
                &service_reference(&service),
                EventType::Warning,
                "FailedToUpdateEndpointSlices",
                format!("Error updating Endpoint Slices for Service {namespace}/{name}: {err}"),
            );
            return Err(err);
        }
        Ok(())
    }

    /// The cached slices of Service `namespace/name` managed by this controller and not being
    /// deleted (slices pending deletion would otherwise keep the controller stuck).
    fn service_slices(&self, namespace: &str, name: &str) -> Vec<Arc<EndpointSlice>> {
        let key = format!("{namespace}/{name}");
        let candidates = match self.slices.by_index(SERVICE_NAME_INDEX, &key) {
            Ok(found) => found,
            Err(_) => list_namespace(&self.slices, namespace)
                .into_iter()
                .filter(|s| {
                    crate::endpointsliceutil::service_controller_key(s).as_deref()
                        == Some(key.as_str())
                })
                .collect(),
        };
        candidates
            .into_iter()
            .filter(|s| managed_by(s) == MANAGED_BY && s.metadata.deletion_timestamp.is_none())
            .collect()
    }
}

/// A reference to `service` for events.
fn service_reference(service: &Service) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Service".to_owned()),
        namespace: service.metadata.namespace.clone(),
        name: service.metadata.name.clone(),
        uid: service.metadata.uid.clone(),
        resource_version: service.metadata.resource_version.clone(),
        field_path: None,
    }
}
