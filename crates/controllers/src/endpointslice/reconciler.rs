//! Turning the pods a Service selects into the minimal set of EndpointSlice writes, as upstream's `k8s.io/endpointslice` `Reconciler`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::informer::store::Indexer;

use super::metrics::{EfficiencyInfo, EndpointSliceMetrics};
use super::utils::{
    EndpointMeta, add_trigger_time_annotation, address_types_for_service, endpoint_ports,
    endpoint_slice_labels, is_same_placeholder, new_endpoint_slice, owned_by, pod_to_endpoint,
    slice_to_fill,
};
use super::{Error, Result};
use crate::endpointsliceutil::{
    EndpointSet, EndpointSliceClient, EndpointSliceTracker, PortMapKey,
    endpoints_equal_beyond_hash, managed_by, should_pod_be_in_endpoints, sort_ports,
};

/// The writes one reconciliation decided on.
#[derive(Debug, Default)]
struct Changes {
    /// New slices (unnamed, `generateName` set).
    to_create: Vec<EndpointSlice>,
    /// Existing slices, changed.
    to_update: Vec<EndpointSlice>,
    /// Existing slices no longer needed.
    to_delete: Vec<Arc<EndpointSlice>>,
}

/// Turns desired state into EndpointSlice writes, as upstream's `Reconciler`: endpoints are
/// grouped by address type and by port list, kept in the slice they are already in when
/// possible (an endpoint that changes is rewritten in place; only slices that change are
/// written), new endpoints first fill slices that are being written anyway (fullest first),
/// then the one unchanged slice they fit best, then new slices of at most
/// `max_endpoints_per_slice`; creations replace deletions by updates where they can.
pub struct Reconciler {
    /// Slice writes. Test seam: [`crate::endpointsliceutil::FakeEndpointSliceClient`].
    client: Arc<dyn EndpointSliceClient>,
    /// The node cache, for zones (and to skip pods on nodes that do not exist).
    nodes: Indexer<Node>,
    /// `--max-endpoints-per-slice`.
    max_endpoints_per_slice: usize,
    /// The generations this controller wrote (shared with the controller's handlers).
    tracker: Arc<EndpointSliceTracker>,
    /// The `endpoint_slice_controller_*` metrics and their per-Service cache.
    metrics: Arc<EndpointSliceMetrics>,
    /// The `managed-by` value of the slices this reconciler owns.
    controller_name: String,
}

impl std::fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconciler")
            .field("max_endpoints_per_slice", &self.max_endpoints_per_slice)
            .field("controller_name", &self.controller_name)
            .finish_non_exhaustive()
    }
}

impl Reconciler {
    /// A reconciler writing through `client`, as upstream's `NewReconciler`.
    pub fn new(
        client: Arc<dyn EndpointSliceClient>,
        nodes: Indexer<Node>,
        max_endpoints_per_slice: usize,
        tracker: Arc<EndpointSliceTracker>,
        metrics: Arc<EndpointSliceMetrics>,
        controller_name: &str,
    ) -> Self {
        Self {
            client,
            nodes,
            max_endpoints_per_slice: max_endpoints_per_slice.max(1),
            tracker,
            metrics,
            controller_name: controller_name.to_owned(),
        }
    }

    /// The `managed-by` value of this reconciler's slices.
    pub fn controller_name(&self) -> &str {
        &self.controller_name
    }

    /// Whether `slice` is managed by this reconciler's controller, as upstream's
    /// `ManagedByController`.
    pub fn managed_by_controller(&self, slice: &EndpointSlice) -> bool {
        managed_by(slice) == self.controller_name
    }

    /// Whether exactly one of the two is managed by this controller, as upstream's
    /// `ManagedByChanged`.
    pub fn managed_by_changed(&self, a: &EndpointSlice, b: &EndpointSlice) -> bool {
        self.managed_by_controller(a) != self.managed_by_controller(b)
    }

    /// Forgets a deleted Service's metrics, as upstream's `DeleteService`.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        self.metrics.delete_service(namespace, name);
    }

    /// Makes `existing` (the Service's slices managed by this controller) hold exactly the
    /// endpoints of `pods`, as upstream's `Reconcile`: slices of address types the Service no
    /// longer has are deleted, each remaining type is reconciled on its own. Every failure is
    /// returned (aggregated) after the others were attempted.
    pub async fn reconcile(
        &self,
        service: &Service,
        pods: &[Arc<Pod>],
        existing: &[Arc<EndpointSlice>],
        trigger_time: Option<jiff::Timestamp>,
    ) -> Result<()> {
        let supported = address_types_for_service(service);
        let mut by_address_type: BTreeMap<&str, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
        let mut unsupported = Vec::new();
        for slice in existing {
            if supported.contains(&slice.address_type) {
                by_address_type
                    .entry(slice.address_type.as_str())
                    .or_default()
                    .push(Arc::clone(slice));
            } else {
                unsupported.push(Arc::clone(slice));
            }
        }
        let mut errors = Vec::new();
        for address_type in &supported {
            let slices = by_address_type
                .remove(address_type.as_str())
                .unwrap_or_default();
            if let Err(err) = self
                .reconcile_by_address_type(service, pods, &slices, trigger_time, address_type)
                .await
            {
                errors.push(err);
            }
        }
        for slice in unsupported {
            if let Err(err) = self.delete_slice(service, &slice).await {
                errors.push(err);
            }
        }
        match Error::aggregate(errors) {
            None => Ok(()),
            Some(err) => Err(err),
        }
    }

    /// Deletes `slice`, tolerating one already gone, as upstream's `deleteEndpointSlice`.
    async fn delete_slice(&self, service: &Service, slice: &EndpointSlice) -> Result<()> {
        let namespace = service.metadata.namespace.as_deref().unwrap_or_default();
        let name = slice.metadata.name.as_deref().unwrap_or_default();
        match self.client.delete(namespace, name).await {
            Ok(()) => {
                self.tracker.expect_deletion(slice);
                self.metrics.slice_changed("delete");
                Ok(())
            }
            Err(err) if err.is_not_found() => Ok(()),
            Err(source) => Err(Error::DeleteSlice {
                slice: name.to_owned(),
                service: service_key(service),
                source,
            }),
        }
    }

    /// Reconciles the slices of one address type, as upstream's `reconcileByAddressType`.
    async fn reconcile_by_address_type(
        &self,
        service: &Service,
        pods: &[Arc<Pod>],
        existing: &[Arc<EndpointSlice>],
        trigger_time: Option<jiff::Timestamp>,
        address_type: &str,
    ) -> Result<()> {
        let mut errors = Vec::new();
        let mut changes = Changes::default();

        // Existing state: owned slices by port list; slices of another owner (an old Service
        // of the same name) go.
        let mut existing_by_ports: BTreeMap<PortMapKey, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
        for slice in existing {
            if owned_by(slice, service) {
                let key = PortMapKey::new(slice.ports.as_deref().unwrap_or_default());
                existing_by_ports
                    .entry(key)
                    .or_default()
                    .push(Arc::clone(slice));
            } else {
                changes.to_delete.push(Arc::clone(slice));
            }
        }

        // Desired state: endpoints by port list.
        let publish_not_ready = service
            .spec
            .as_ref()
            .and_then(|s| s.publish_not_ready_addresses)
            .unwrap_or(false);
        let mut desired_meta: BTreeMap<PortMapKey, EndpointMeta> = BTreeMap::new();
        let mut desired: BTreeMap<PortMapKey, EndpointSet> = BTreeMap::new();
        for pod in pods {
            if !should_pod_be_in_endpoints(pod, true) {
                continue;
            }
            let mut ports = endpoint_ports(service, pod);
            sort_ports(&mut ports);
            let key = PortMapKey::new(&ports);
            let set = desired.entry(key.clone()).or_default();
            desired_meta.entry(key).or_insert_with(|| EndpointMeta {
                ports,
                address_type: address_type.to_owned(),
            });
            let node_name = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let node = self.nodes.get_by_key(&node_name);
            if node.is_none() && !publish_not_ready {
                // Requeue the Service, but write the slices without this pod: a pod bound to a
                // missing node must not hold the Service's endpoints hostage.
                let pod_name = pod.metadata.name.clone().unwrap_or_default();
                tracing::info!(pod = %pod_name, service = %service_key(service), node = %node_name, "skipping Pod for Service, Node not found");
                errors.push(Error::NodeNotFound {
                    pod: pod_name,
                    service: service_key(service),
                    node: node_name,
                });
                continue;
            }
            let endpoint = pod_to_endpoint(pod, node.as_deref(), service, address_type);
            if !endpoint.addresses.is_empty() {
                set.insert(endpoint);
            }
        }

        let mut efficiency = BTreeMap::new();
        let (mut total_added, mut total_removed) = (0, 0);
        for (key, mut set) in std::mem::take(&mut desired) {
            let num_endpoints = set.len();
            let slices = existing_by_ports.get(&key).cloned().unwrap_or_default();
            let meta = desired_meta.get(&key).cloned().unwrap_or(EndpointMeta {
                ports: Vec::new(),
                address_type: address_type.to_owned(),
            });
            let (pm, added, removed) =
                self.reconcile_by_port_mapping(service, &slices, &mut set, &meta);
            total_added += added;
            total_removed += removed;
            efficiency.insert(
                key.clone(),
                EfficiencyInfo {
                    endpoints: num_endpoints,
                    slices: (slices.len() + pm.to_create.len()).saturating_sub(pm.to_delete.len()),
                },
            );
            changes.to_create.extend(pm.to_create);
            changes.to_update.extend(pm.to_update);
            changes.to_delete.extend(pm.to_delete);
            desired.insert(key, EndpointSet::new());
        }
        // Port lists no longer desired: their slices go.
        for (key, slices) in &existing_by_ports {
            if !desired.contains_key(key) {
                changes.to_delete.extend(slices.iter().cloned());
            }
        }

        // A Service with no endpoints still gets one (placeholder) slice.
        if existing.len() == changes.to_delete.len() && changes.to_create.is_empty() {
            let placeholder = new_endpoint_slice(
                service,
                &EndpointMeta {
                    ports: Vec::new(),
                    address_type: address_type.to_owned(),
                },
                &self.controller_name,
            );
            if changes.to_delete.len() == 1
                && is_same_placeholder(&changes.to_delete[0], &placeholder)
            {
                // The placeholder is already there: keep it rather than delete and recreate.
                changes.to_delete.clear();
            } else {
                changes.to_create.push(placeholder);
            }
            efficiency.insert(
                PortMapKey::new(&[]),
                EfficiencyInfo {
                    endpoints: 0,
                    slices: 1,
                },
            );
        }

        self.metrics.endpoints_added(total_added);
        self.metrics.endpoints_removed(total_removed);
        self.metrics.update_service(
            service.metadata.namespace.as_deref().unwrap_or_default(),
            service.metadata.name.as_deref().unwrap_or_default(),
            address_type,
            efficiency,
            self.max_endpoints_per_slice,
        );

        // Topology hints are not computed here (no topology cache): hints left on slices are
        // removed, as upstream does when neither the annotation nor trafficDistribution asks
        // for them.
        remove_hints(&mut changes, existing);

        if let Err(err) = self.finalize(service, changes, trigger_time).await {
            errors.push(err);
        }
        match Error::aggregate(errors) {
            None => Ok(()),
            Some(err) => Err(err),
        }
    }

    /// Compares the endpoints of the existing slices of one port list with the desired ones,
    /// as upstream's `reconcileByPortMapping`; returns the changes and how many endpoints are
    /// added and removed.
    fn reconcile_by_port_mapping(
        &self,
        service: &Service,
        existing: &[Arc<EndpointSlice>],
        desired: &mut EndpointSet,
        meta: &EndpointMeta,
    ) -> (Changes, usize, usize) {
        let max = self.max_endpoints_per_slice;
        let by_name: BTreeMap<String, Arc<EndpointSlice>> = existing
            .iter()
            .map(|s| (s.metadata.name.clone().unwrap_or_default(), Arc::clone(s)))
            .collect();
        // Copies of the slices that change, by name.
        let mut modified: BTreeMap<String, EndpointSlice> = BTreeMap::new();
        let mut unchanged: BTreeSet<String> = BTreeSet::new();
        let mut to_update: BTreeSet<String> = BTreeSet::new();
        let mut to_delete: BTreeSet<String> = BTreeSet::new();
        let mut num_removed = 0;

        // 1. Keep desired endpoints where they are, rewrite changed ones, drop the rest.
        for (name, slice) in &by_name {
            let mut new_endpoints =
                Vec::with_capacity(slice.endpoints.as_ref().map_or(0, Vec::len));
            let mut endpoint_updated = false;
            for endpoint in slice.endpoints.iter().flatten() {
                if let Some(got) = desired.remove(endpoint) {
                    if !endpoints_equal_beyond_hash(&got, endpoint) {
                        endpoint_updated = true;
                    }
                    new_endpoints.push(got);
                }
            }
            let (labels, labels_changed) =
                endpoint_slice_labels(slice, service, &self.controller_name);
            if endpoint_updated
                || slice.endpoints.as_ref().map_or(0, Vec::len) != new_endpoints.len()
            {
                num_removed += slice
                    .endpoints
                    .as_ref()
                    .map_or(0, Vec::len)
                    .saturating_sub(new_endpoints.len());
                if new_endpoints.is_empty() {
                    to_delete.insert(name.clone());
                } else {
                    let mut copy = (**slice).clone();
                    copy.endpoints = Some(new_endpoints);
                    copy.metadata.labels = Some(labels);
                    modified.insert(name.clone(), copy);
                    to_update.insert(name.clone());
                }
            } else if labels_changed {
                let mut copy = (**slice).clone();
                copy.metadata.labels = Some(labels);
                modified.insert(name.clone(), copy);
                to_update.insert(name.clone());
            } else {
                // Unchanged slices can take leftover endpoints.
                unchanged.insert(name.clone());
            }
        }
        let num_added = desired.len();

        // 2. Fill the slices being written anyway, fullest first.
        if !desired.is_empty() && !to_update.is_empty() {
            let mut names: Vec<&String> = to_update.iter().collect();
            names.sort_by_key(|n| {
                std::cmp::Reverse(
                    modified
                        .get(*n)
                        .map_or(0, |s| s.endpoints.as_ref().map_or(0, Vec::len)),
                )
            });
            for name in names {
                let Some(slice) = modified.get_mut(name) else {
                    continue;
                };
                while slice.endpoints.as_ref().map_or(0, Vec::len) < max {
                    let Some(endpoint) = desired.pop_any() else {
                        break;
                    };
                    slice.endpoints.get_or_insert_default().push(endpoint);
                }
            }
        }

        // 3. Fit what is left into the unchanged slice it fills best, or new slices.
        let mut to_create = Vec::new();
        while !desired.is_empty() {
            let mut slice = None;
            if desired.len() < max && !unchanged.is_empty() {
                let candidates: Vec<&EndpointSlice> = unchanged
                    .iter()
                    .filter_map(|n| by_name.get(n).map(AsRef::as_ref))
                    .collect();
                slice = slice_to_fill(&candidates, desired.len(), max).cloned();
            }
            let mut slice =
                slice.unwrap_or_else(|| new_endpoint_slice(service, meta, &self.controller_name));
            while slice.endpoints.as_ref().map_or(0, Vec::len) < max {
                let Some(endpoint) = desired.pop_any() else {
                    break;
                };
                slice.endpoints.get_or_insert_default().push(endpoint);
            }
            match slice.metadata.name.clone().filter(|n| !n.is_empty()) {
                Some(name) => {
                    unchanged.remove(&name);
                    to_update.insert(name.clone());
                    modified.insert(name, slice);
                }
                None => to_create.push(slice),
            }
        }

        let changes = Changes {
            to_create,
            to_update: to_update
                .iter()
                .filter_map(|n| modified.remove(n))
                .collect(),
            to_delete: to_delete
                .iter()
                .filter_map(|n| by_name.get(n).cloned())
                .collect(),
        };
        (changes, num_added, num_removed)
    }

    /// Writes the changes, as upstream's `finalize`: a creation takes over a slice being
    /// deleted (same address type, owned by this Service) as an update instead; no slice is
    /// created for a Service being deleted (the garbage collector would race it).
    async fn finalize(
        &self,
        service: &Service,
        mut changes: Changes,
        trigger_time: Option<jiff::Timestamp>,
    ) -> Result<()> {
        let mut i = 0;
        while i < changes.to_delete.len() {
            let Some(last) = changes.to_create.last() else {
                break;
            };
            let doomed = &changes.to_delete[i];
            if doomed.address_type == last.address_type && owned_by(doomed, service) {
                if let Some(mut slice) = changes.to_create.pop() {
                    slice.metadata.name = doomed.metadata.name.clone();
                    changes.to_update.push(slice);
                }
                changes.to_delete.remove(i);
            } else {
                i += 1;
            }
        }

        let namespace = service.metadata.namespace.as_deref().unwrap_or_default();
        let changed = changes.to_create.len() + changes.to_update.len() + changes.to_delete.len();
        if service.metadata.deletion_timestamp.is_none() {
            for mut slice in changes.to_create {
                add_trigger_time_annotation(&mut slice, trigger_time);
                match self.client.create(namespace, &slice).await {
                    Ok(created) => {
                        self.tracker.update(&created);
                        self.metrics.slice_changed("create");
                    }
                    // Creates keep failing in a terminating namespace: drop the item.
                    Err(err) if err.is_namespace_terminating() => return Ok(()),
                    Err(source) => {
                        return Err(Error::CreateSlice {
                            service: service_key(service),
                            source,
                        });
                    }
                }
            }
        }
        for mut slice in changes.to_update {
            add_trigger_time_annotation(&mut slice, trigger_time);
            match self.client.update(namespace, &slice).await {
                Ok(updated) => {
                    self.tracker.update(&updated);
                    self.metrics.slice_changed("update");
                }
                Err(source) => {
                    return Err(Error::UpdateSlice {
                        slice: slice.metadata.name.clone().unwrap_or_default(),
                        service: service_key(service),
                        source,
                    });
                }
            }
        }
        for slice in changes.to_delete {
            self.delete_slice(service, &slice).await?;
        }
        self.metrics.slices_changed_per_sync(changed);
        Ok(())
    }
}

/// Removes topology hints from every slice about to be written, and writes unchanged slices
/// that carry hints, as upstream's `RemoveHintsFromSlices`.
fn remove_hints(changes: &mut Changes, existing: &[Arc<EndpointSlice>]) {
    for slice in changes
        .to_create
        .iter_mut()
        .chain(changes.to_update.iter_mut())
    {
        for endpoint in slice.endpoints.iter_mut().flatten() {
            endpoint.hints = None;
        }
    }
    let changed: BTreeSet<Option<String>> = changes
        .to_update
        .iter()
        .map(|s| s.metadata.name.clone())
        .chain(changes.to_delete.iter().map(|s| s.metadata.name.clone()))
        .collect();
    for slice in existing {
        if changed.contains(&slice.metadata.name)
            || slice.endpoints.iter().flatten().all(|e| e.hints.is_none())
        {
            continue;
        }
        let mut copy = (**slice).clone();
        for endpoint in copy.endpoints.iter_mut().flatten() {
            endpoint.hints = None;
        }
        changes.to_update.push(copy);
    }
}

/// `namespace/name` of a Service.
fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
#[path = "reconciler_tests.rs"]
mod tests;
