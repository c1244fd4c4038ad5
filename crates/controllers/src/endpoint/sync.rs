//! Syncing one Service's Endpoints (upstream `syncService` of `endpoints_controller.go`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::events::EventType;
use kcm_machinery::informer::keys::{object_key, split_meta_namespace_key};

use super::controller::{CONTROLLER_NAME, EndpointController};
use super::subsets::{
    TRUNCATED, add_endpoint_subset, capacity_annotation_set_correctly, endpoint_port,
    pod_to_endpoint_address, repack_subsets, subsets_equal_ignoring_resource_version,
    truncate_endpoints,
};
use super::{Error, Result};
use crate::endpointsliceutil::services::selector_matches;
use crate::endpointsliceutil::{
    ENDPOINTS_LAST_CHANGE_TRIGGER_TIME, ENDPOINTS_OVER_CAPACITY, IS_HEADLESS_SERVICE, find_port,
    format_rfc3339_nano, list_namespace, maps_equal, should_pod_be_in_endpoints,
    should_set_hostname,
};

impl EndpointController {
    /// Syncs the Endpoints of Service `key`, as upstream's `syncService`.
    ///
    /// - Service gone: its Endpoints are deleted (NotFound is fine) and its trackers forgotten.
    /// - ExternalName, or no selector: nothing (those Endpoints are someone else's).
    /// - Otherwise the selected pods (not terminal, with an IP; terminating ones only with
    ///   `publishNotReadyAddresses`) become addresses per resolved port, ready or not ready,
    ///   repacked; the Endpoints is written only when its subsets, labels or capacity
    ///   annotation differ. A cache still showing a version this controller replaced is an
    ///   error (retried), not a write.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_service(key).await;
        tracing::debug!(controller = CONTROLLER_NAME, service = key, elapsed = ?start.elapsed(), "Finished syncing service endpoints");
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
            // The Service is gone: so are its Endpoints. (Deletions missed while no
            // controller ran are caught by the startup sweep.)
            match self.client.delete(&namespace, &name).await {
                Ok(()) => {}
                Err(err) if err.is_not_found() => {}
                Err(source) => {
                    return Err(Error::Delete {
                        key: key.to_owned(),
                        source,
                    });
                }
            }
            self.trigger_times.delete_service(&namespace, &name);
            self.stale_endpoints.delete(&namespace, &name);
            return Ok(());
        };
        let spec = service.spec.clone().unwrap_or_default();
        if spec.type_.as_deref() == Some("ExternalName") {
            return Ok(());
        }
        let Some(selector) = spec.selector.as_ref() else {
            // Endpoints of a Service without a selector are managed out of band.
            return Ok(());
        };

        let pods: Vec<Arc<Pod>> = list_namespace(&self.pods, &namespace)
            .into_iter()
            .filter(|p| {
                selector_matches(
                    selector,
                    p.metadata.labels.as_ref().unwrap_or(&Default::default()),
                )
            })
            .collect();

        // Computed even when nothing is written, so the tracker's state stays current.
        let trigger_time = self
            .trigger_times
            .compute_endpoint_last_change_trigger_time(&namespace, &service, &pods);

        let publish_not_ready = spec.publish_not_ready_addresses.unwrap_or(false);
        let headless = spec.cluster_ip.as_deref() == Some("None");
        let service_ports = spec.ports.clone().unwrap_or_default();
        let mut subsets = Vec::new();
        let (mut total_ready, mut total_not_ready) = (0, 0);
        for pod in &pods {
            if !should_pod_be_in_endpoints(pod, publish_not_ready) {
                continue;
            }
            let Some(mut address) = pod_to_endpoint_address(&service, pod) else {
                tracing::debug!(service = key, pod = ?pod.metadata.name, "Failed to find endpoint for service with ClusterIP on pod");
                continue;
            };
            if should_set_hostname(pod, &service) {
                address.hostname = pod.spec.as_ref().and_then(|s| s.hostname.clone());
            }
            if service_ports.is_empty() {
                // A headless Service may have no ports; its addresses still count.
                if headless {
                    let (r, n) =
                        add_endpoint_subset(&mut subsets, pod, address, None, publish_not_ready);
                    total_ready += r;
                    total_not_ready += n;
                }
                continue;
            }
            for service_port in &service_ports {
                let Some(port) = find_port(pod, service_port) else {
                    tracing::debug!(service = key, pod = ?pod.metadata.name, "Failed to find port for service");
                    continue;
                };
                let (r, n) = add_endpoint_subset(
                    &mut subsets,
                    pod,
                    address.clone(),
                    Some(endpoint_port(service_port, port)),
                    publish_not_ready,
                );
                total_ready += r;
                total_not_ready += n;
            }
        }
        let subsets = repack_subsets(&subsets);

        let current = self.endpoints.get_by_key(&object_key(&namespace, &name));
        if let Some(current) = &current
            && self.stale_endpoints.is_stale(current)
        {
            return Err(Error::StaleCache {
                key: key.to_owned(),
                resource_version: current
                    .metadata
                    .resource_version
                    .clone()
                    .unwrap_or_default(),
            });
        }
        let create = current.as_ref().is_none_or(|c| {
            c.metadata
                .resource_version
                .as_deref()
                .is_none_or(str::is_empty)
        });
        let current: Endpoints = match current {
            Some(current) => (*current).clone(),
            None => Endpoints {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.clone()),
                    labels: service.metadata.labels.clone(),
                    ..ObjectMeta::default()
                },
                subsets: None,
            },
        };

        // The headless label is the controller's, not the Service's: leave it out of the
        // comparison.
        let mut compare_labels = current.metadata.labels.clone();
        if let Some(labels) = compare_labels.as_mut() {
            labels.remove(IS_HEADLESS_SERVICE);
        }
        let current_subsets = current.subsets.clone().unwrap_or_default();
        if !create
            && subsets_equal_ignoring_resource_version(&current_subsets, &subsets)
            && maps_equal(compare_labels.as_ref(), service.metadata.labels.as_ref())
            && capacity_annotation_set_correctly(
                current.metadata.annotations.as_ref(),
                &current_subsets,
            )
        {
            tracing::trace!(service = key, "endpoints are equal, skipping update");
            return Ok(());
        }

        let mut new = current.clone();
        new.subsets = Some(subsets);
        new.metadata.labels = service.metadata.labels.clone();
        let annotations = new.metadata.annotations.get_or_insert_default();
        match trigger_time {
            Some(time) => {
                annotations.insert(
                    ENDPOINTS_LAST_CHANGE_TRIGGER_TIME.to_owned(),
                    format_rfc3339_nano(time),
                );
            }
            None => {
                annotations.remove(ENDPOINTS_LAST_CHANGE_TRIGGER_TIME);
            }
        }
        if truncate_endpoints(&mut new) {
            new.metadata
                .annotations
                .get_or_insert_default()
                .insert(ENDPOINTS_OVER_CAPACITY.to_owned(), TRUNCATED.to_owned());
        } else {
            new.metadata
                .annotations
                .get_or_insert_default()
                .remove(ENDPOINTS_OVER_CAPACITY);
        }
        let labels = new.metadata.labels.get_or_insert_default();
        let is_ip_set = spec
            .cluster_ip
            .as_deref()
            .is_some_and(|ip| !ip.is_empty() && ip != "None");
        if is_ip_set {
            labels.remove(IS_HEADLESS_SERVICE);
        } else {
            labels.insert(IS_HEADLESS_SERVICE.to_owned(), String::new());
        }
        // Empty maps are omitted on the wire, as Go's `omitempty` does (`labels: {}` otherwise).
        if new.metadata.labels.as_ref().is_some_and(|m| m.is_empty()) {
            new.metadata.labels = None;
        }
        if new
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|m| m.is_empty())
        {
            new.metadata.annotations = None;
        }

        tracing::debug!(
            service = key,
            ready_endpoints = total_ready,
            not_ready_endpoints = total_not_ready,
            "Update endpoints"
        );
        let written = if create {
            self.client.create(&namespace, &new).await.map(|_| None)
        } else {
            self.client.update(&namespace, &new).await.map(Some)
        };
        match written {
            Ok(updated) => {
                // Remember the replaced version: seeing it again in the cache means the
                // informer is behind this write (a no-op update keeps the version).
                if let Some(updated) = updated
                    && updated.metadata.resource_version != current.metadata.resource_version
                {
                    self.stale_endpoints.stale(&current);
                }
                Ok(())
            }
            Err(err) => {
                if create && err.is_forbidden() && err.is_namespace_terminating() {
                    // Creates keep failing in a terminating namespace: drop the item.
                    return Ok(());
                }
                let reference = ObjectReference {
                    kind: Some("Endpoints".to_owned()),
                    api_version: Some("v1".to_owned()),
                    namespace: Some(namespace.clone()),
                    name: Some(name.clone()),
                    uid: new.metadata.uid.clone(),
                    resource_version: new.metadata.resource_version.clone(),
                    ..ObjectReference::default()
                };
                let message = kcm_machinery::controller::api_status::error_message(&err);
                if create {
                    self.recorder.event(
                        &reference,
                        EventType::Warning,
                        "FailedToCreateEndpoint",
                        format!(
                            "Failed to create endpoint for service {namespace}/{name}: {message}"
                        ),
                    );
                    Err(Error::Create {
                        key: key.to_owned(),
                        source: err,
                    })
                } else {
                    self.recorder.event(
                        &reference,
                        EventType::Warning,
                        "FailedToUpdateEndpoint",
                        format!("Failed to update endpoint {namespace}/{name}: {message}"),
                    );
                    Err(Error::Update {
                        key: key.to_owned(),
                        source: err,
                    })
                }
            }
        }
    }
}
