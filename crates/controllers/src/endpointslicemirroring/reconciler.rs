//! Mirroring one Endpoints into EndpointSlices, one slice per subset port list and address type, as upstream's `endpointslicemirroring/reconciler.go`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, ObjectReference};
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::events::{EventRecorder, EventType};

use super::metrics::MirroringMetrics;
use super::reconciler_helpers::{DesiredCalc, SlicesByAction, TotalsByAction, recycle_slices};
use super::utils::{AddrTypePortMapKey, mirrored_annotations, new_endpoint_slice};
use super::{Error, Result};
use crate::endpointsliceutil::{
    EndpointSet, EndpointSliceClient, EndpointSliceTracker, LABEL_MANAGED_BY, LABEL_SERVICE_NAME,
    PortMapKey, endpoints_equal_beyond_hash, maps_equal,
};

/// The event reason for addresses that are not IPs (upstream's `InvalidIPAddress`).
pub const INVALID_IP_ADDRESS: &str = "InvalidIPAddress";
/// The event reason for subsets over the mirroring limit (upstream's
/// `TooManyAddressesToMirror`).
pub const TOO_MANY_ADDRESSES_TO_MIRROR: &str = "TooManyAddressesToMirror";

/// Turns an Endpoints into slice writes, as upstream's mirroring `reconciler`.
pub struct MirroringReconciler {
    /// Slice writes.
    client: Arc<dyn EndpointSliceClient>,
    /// The generations this controller wrote.
    tracker: Arc<EndpointSliceTracker>,
    /// Warnings about addresses that could not be mirrored.
    recorder: Arc<dyn EventRecorder>,
    /// `--mirroring-max-endpoints-per-subset`: at most this many addresses of one subset are
    /// mirrored, so a subset maps to one slice.
    max_endpoints_per_subset: usize,
    /// The controller's metrics.
    metrics: Arc<MirroringMetrics>,
}

impl std::fmt::Debug for MirroringReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirroringReconciler")
            .field("max_endpoints_per_subset", &self.max_endpoints_per_subset)
            .finish_non_exhaustive()
    }
}

impl MirroringReconciler {
    /// A reconciler writing through `client`.
    pub fn new(
        client: Arc<dyn EndpointSliceClient>,
        tracker: Arc<EndpointSliceTracker>,
        recorder: Arc<dyn EventRecorder>,
        max_endpoints_per_subset: usize,
        metrics: Arc<MirroringMetrics>,
    ) -> Self {
        Self {
            client,
            tracker,
            recorder,
            max_endpoints_per_subset: max_endpoints_per_subset.max(1),
            metrics,
        }
    }

    /// Makes `existing` (the slices mirrored for `endpoints`) mirror it, as upstream's
    /// `reconcile`: at most `max_endpoints_per_subset` addresses per subset (warning
    /// `TooManyAddressesToMirror` beyond), invalid IPs skipped (warning `InvalidIPAddress`),
    /// one slice per port list and address type.
    pub async fn reconcile(
        &self,
        endpoints: &Endpoints,
        existing: &[Arc<EndpointSlice>],
    ) -> Result<()> {
        let mut desired = DesiredCalc::new();
        let (mut invalid, mut skipped) = (0usize, 0usize);
        let key = endpoints_key(endpoints);
        for subset in endpoints.subsets.iter().flatten() {
            let multi = desired.init_ports(subset.ports.as_deref().unwrap_or_default());
            let total = subset.addresses.as_ref().map_or(0, Vec::len)
                + subset.not_ready_addresses.as_ref().map_or(0, Vec::len);
            let mut added = 0;
            let listed = subset.addresses.iter().flatten().map(|a| (a, true)).chain(
                subset
                    .not_ready_addresses
                    .iter()
                    .flatten()
                    .map(|a| (a, false)),
            );
            for (address, ready) in listed {
                if added >= self.max_endpoints_per_subset {
                    break;
                }
                if desired.add_address(address, &multi, ready) {
                    added += 1;
                } else {
                    invalid += 1;
                    tracing::warn!(endpoints = %key, ip = %address.ip, "Address in Endpoints is not a valid IP, it will not be mirrored to an EndpointSlice");
                }
            }
            skipped += total - added;
        }
        self.metrics.addresses_skipped(skipped);
        if invalid > 0 {
            self.recorder.event(
                &endpoints_reference(endpoints),
                EventType::Warning,
                INVALID_IP_ADDRESS,
                format!("Skipped {invalid} invalid IP addresses when mirroring to EndpointSlices"),
            );
        }
        if skipped > invalid {
            tracing::warn!(endpoints = %key, skipped, "addresses in Endpoints were skipped due to exceeding MaxEndpointsPerSubset");
            self.recorder.event(
                &endpoints_reference(endpoints),
                EventType::Warning,
                TOO_MANY_ADDRESSES_TO_MIRROR,
                format!(
                    "A max of {} addresses can be mirrored to EndpointSlices per Endpoints subset. {skipped} addresses were skipped",
                    self.max_endpoints_per_subset
                ),
            );
        }

        let mut existing_by_key: BTreeMap<AddrTypePortMapKey, Vec<Arc<EndpointSlice>>> =
            BTreeMap::new();
        for slice in existing {
            let key = (
                slice.address_type.clone(),
                PortMapKey::new(slice.ports.as_deref().unwrap_or_default()),
            );
            existing_by_key
                .entry(key)
                .or_default()
                .push(Arc::clone(slice));
        }

        let mut slices = SlicesByAction::default();
        let mut totals = TotalsByAction::default();
        let DesiredCalc {
            ports_by_key,
            endpoints_by_key,
        } = desired;
        for (key, set) in &endpoints_by_key {
            let ports = ports_by_key.get(key).cloned().unwrap_or_default();
            let existing = existing_by_key.get(key).cloned().unwrap_or_default();
            let (pm_slices, pm_totals) =
                self.reconcile_by_port_mapping(endpoints, &existing, set.clone(), &ports, &key.0);
            slices.append(pm_slices);
            totals.add(pm_totals);
        }
        // Port lists no longer desired: their slices go.
        for (key, existing) in existing_by_key {
            if !endpoints_by_key.contains_key(&key) {
                slices.to_delete.extend(existing);
            }
        }
        self.metrics.endpoints_changed(totals);
        self.finalize(endpoints, slices).await
    }

    /// One port list of one address type, as upstream's `reconcileByPortMapping`: all the
    /// desired endpoints go in the first existing slice (the others are deleted), written only
    /// if its endpoints, labels or annotations differ.
    fn reconcile_by_port_mapping(
        &self,
        endpoints: &Endpoints,
        existing: &[Arc<EndpointSlice>],
        mut desired: EndpointSet,
        ports: &[EndpointPort],
        address_type: &str,
    ) -> (SlicesByAction, TotalsByAction) {
        let mut slices = SlicesByAction::default();
        let mut totals = TotalsByAction::default();
        if desired.is_empty() {
            totals.removed = existing
                .iter()
                .map(|s| s.endpoints.as_ref().map_or(0, Vec::len))
                .sum();
            slices.to_delete = existing.to_vec();
            return (slices, totals);
        }
        let mut slice_name = String::new();
        if let Some((first, rest)) = existing.split_first() {
            slices.to_delete = rest.to_vec();
            totals = total_changes(first, &desired);
            let mut compare_labels = first.metadata.labels.clone().unwrap_or_default();
            compare_labels.remove(LABEL_MANAGED_BY);
            compare_labels.remove(LABEL_SERVICE_NAME);
            let annotations = mirrored_annotations(endpoints.metadata.annotations.as_ref());
            if totals == TotalsByAction::default()
                && maps_equal(endpoints.metadata.labels.as_ref(), Some(&compare_labels))
                && maps_equal(Some(&annotations), first.metadata.annotations.as_ref())
            {
                return (slices, totals);
            }
            slice_name = first.metadata.name.clone().unwrap_or_default();
        } else {
            totals.added = desired.len();
        }
        let mut slice = new_endpoint_slice(endpoints, ports, address_type, &slice_name);
        while slice.endpoints.as_ref().map_or(0, Vec::len) < self.max_endpoints_per_subset {
            let Some(endpoint) = desired.pop_any() else {
                break;
            };
            slice.endpoints.get_or_insert_default().push(endpoint);
        }
        if slice_name.is_empty() {
            slices.to_create.push(slice);
        } else {
            slices.to_update.push(slice);
        }
        (slices, totals)
    }

    /// Writes the changes, as upstream's `finalize`: creations recycle deletions; nothing is
    /// created for an Endpoints being deleted.
    async fn finalize(&self, endpoints: &Endpoints, mut slices: SlicesByAction) -> Result<()> {
        recycle_slices(&mut slices);
        let namespace = endpoints.metadata.namespace.as_deref().unwrap_or_default();
        let key = endpoints_key(endpoints);
        if endpoints.metadata.deletion_timestamp.is_none() {
            for slice in &slices.to_create {
                match self.client.create(namespace, slice).await {
                    Ok(created) => {
                        self.tracker.update(&created);
                        self.metrics.slice_changed("create");
                    }
                    Err(err) if err.is_namespace_terminating() => return Ok(()),
                    Err(source) => {
                        return Err(Error::CreateSlice {
                            endpoints: key,
                            source,
                        });
                    }
                }
            }
        }
        for slice in &slices.to_update {
            match self.client.update(namespace, slice).await {
                Ok(updated) => {
                    self.tracker.update(&updated);
                    self.metrics.slice_changed("update");
                }
                Err(source) => {
                    return Err(Error::UpdateSlice {
                        slice: slice.metadata.name.clone().unwrap_or_default(),
                        endpoints: key,
                        source,
                    });
                }
            }
        }
        for slice in &slices.to_delete {
            let name = slice.metadata.name.as_deref().unwrap_or_default();
            if let Err(source) = self.client.delete(namespace, name).await {
                return Err(Error::DeleteSlice {
                    slice: name.to_owned(),
                    endpoints: key,
                    source,
                });
            }
            self.tracker.expect_deletion(slice);
            self.metrics.slice_changed("delete");
        }
        Ok(())
    }

    /// Deletes every slice mirrored for `namespace/name`, as upstream's `deleteEndpoints`.
    pub async fn delete_endpoints(
        &self,
        namespace: &str,
        name: &str,
        slices: &[Arc<EndpointSlice>],
    ) -> Result<()> {
        let mut errors = Vec::new();
        for slice in slices {
            let slice_name = slice.metadata.name.as_deref().unwrap_or_default();
            match self.client.delete(namespace, slice_name).await {
                Ok(()) => self.metrics.slice_changed("delete"),
                Err(err) => errors.push(err),
            }
        }
        match errors.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(Error::DeleteMirrored {
                endpoints: format!("{namespace}/{name}"),
                failed: slices.len(),
                source: first,
            }),
        }
    }
}

/// How an existing slice differs from the desired endpoints, as upstream's `totalChanges`.
fn total_changes(existing: &EndpointSlice, desired: &EndpointSet) -> TotalsByAction {
    let mut totals = TotalsByAction::default();
    let mut matches = 0;
    for endpoint in existing.endpoints.iter().flatten() {
        match desired.get(endpoint) {
            None => totals.removed += 1,
            Some(got) => {
                matches += 1;
                if !endpoints_equal_beyond_hash(got, endpoint) {
                    totals.updated += 1;
                }
            }
        }
    }
    totals.added = desired.len().saturating_sub(matches);
    totals
}

fn endpoints_key(endpoints: &Endpoints) -> String {
    format!(
        "{}/{}",
        endpoints.metadata.namespace.as_deref().unwrap_or_default(),
        endpoints.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A reference to `endpoints` for events.
fn endpoints_reference(endpoints: &Endpoints) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Endpoints".to_owned()),
        namespace: endpoints.metadata.namespace.clone(),
        name: endpoints.metadata.name.clone(),
        uid: endpoints.metadata.uid.clone(),
        resource_version: endpoints.metadata.resource_version.clone(),
        field_path: None,
    }
}
