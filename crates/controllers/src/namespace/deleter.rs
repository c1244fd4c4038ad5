//! Emptying a namespace being deleted, then releasing its `kubernetes` finalizer (upstream `deletion/namespaced_resources_deleter.go`).
//!
//! One [`NamespacedResourcesDeleter::delete`] pass: re-read the namespace; make sure its phase
//! is `Terminating`; delete every pod and, once no pod remains, every object of every other
//! namespaced resource that can be deleted (`deletecollection` where served, else list and
//! delete each; upstream's `OrderedNamespaceDeletion`); write the status conditions
//! of the pass; and, when nothing is left, remove the finalizer through `/finalize` — after
//! which the API server removes the namespace itself, once no other finalizer holds it. When
//! objects remain that are expected to go (pods in their grace period, objects with
//! finalizers), the pass ends with [`Error::ResourcesRemaining`] carrying an estimate of how
//! long they need.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec};
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kube::core::Status;

use super::client::NamespaceClient;
use super::conditions::{ConditionUpdater, ContentTotals};
use super::{Error, Result};
use kcm_machinery::discovery::{DiscoveredResource, DiscoveryResult};
use kcm_machinery::discovery::{GroupResource, GroupVersionResource};

/// The finalizer the namespace controller owns in `spec.finalizers`, as core/v1
/// `FinalizerKubernetes`.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

/// The estimate, in seconds, used when the objects left carry finalizers and nothing better
/// is known, as upstream's `finalizerEstimateSeconds`.
pub const FINALIZER_ESTIMATE_SECONDS: i64 = 15;

/// The wall clock: deletion timestamps are compared with it and condition transition times
/// come from it (upstream's `time.Now()`); injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// What deleting one resource's objects left behind (upstream's `gvrDeletionMetadata`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct GvrDeletion {
    /// Seconds to wait before looking again; zero means no estimate, not "all gone".
    estimate: i64,
    /// How many objects remain.
    remaining: usize,
    /// How many remaining objects each finalizer holds.
    remaining_by_finalizer: BTreeMap<String, usize>,
}

/// What the resources deleted so far in a pass left behind (the accumulators of upstream's
/// `deleteAllContent`).
#[derive(Debug, Default)]
struct Leftovers {
    /// The longest wait any resource asked for, in seconds.
    estimate: i64,
    /// The objects and finalizers left, by resource and by finalizer.
    totals: ContentTotals,
}

impl Leftovers {
    /// Adds what deleting the objects of `gvr` left (and its failure, also recorded in
    /// `conditions` and `errors`).
    fn record(
        &mut self,
        gvr: GroupVersionResource,
        deletion: GvrDeletion,
        error: Option<Error>,
        conditions: &mut ConditionUpdater,
        errors: &mut Vec<Error>,
    ) {
        if let Some(error) = error {
            conditions.process_delete_content_err(error.condition_message());
            errors.push(error);
        }
        self.estimate = self.estimate.max(deletion.estimate);
        if deletion.remaining == 0 {
            return;
        }
        self.totals
            .remaining_by_resource
            .insert(gvr, deletion.remaining);
        for (finalizer, n) in deletion.remaining_by_finalizer {
            if n > 0 {
                *self
                    .totals
                    .remaining_by_finalizer
                    .entry(finalizer)
                    .or_default() += n;
            }
        }
    }
}

/// Deletes all content of namespaces being deleted, then finalizes them, as upstream's
/// `namespacedResourcesDeleter`.
pub struct NamespacedResourcesDeleter {
    /// Every request goes through it. Test seam: [`super::FakeNamespaceClient`].
    client: Arc<dyn NamespaceClient>,
    /// The `spec.finalizers` entry this deleter removes when a namespace is empty.
    finalizer_token: String,
    /// Wall-clock time (test seam).
    clock: Clock,
}

impl std::fmt::Debug for NamespacedResourcesDeleter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespacedResourcesDeleter")
            .field("finalizer_token", &self.finalizer_token)
            .finish_non_exhaustive()
    }
}

/// Which namespace write [`NamespacedResourcesDeleter::retry_on_conflict`] retries.
#[derive(Clone, Copy, Debug)]
enum NamespaceWrite {
    /// Set the phase to `Terminating` (upstream's `updateNamespaceStatusFunc`).
    Terminating,
    /// Remove the finalizer token (upstream's `finalizeNamespace`).
    Finalize,
}

impl NamespaceWrite {
    fn operation(self) -> &'static str {
        match self {
            NamespaceWrite::Terminating => "update status of",
            NamespaceWrite::Finalize => "finalize",
        }
    }
}

impl NamespacedResourcesDeleter {
    /// A deleter removing `finalizer_token` (kube-controller-manager: [`FINALIZER_KUBERNETES`])
    /// through `client`, as upstream's `NewNamespacedResourcesDeleter`.
    pub fn new(client: Arc<dyn NamespaceClient>, finalizer_token: &str) -> Self {
        Self {
            client,
            finalizer_token: finalizer_token.to_owned(),
            clock: Arc::new(Timestamp::now),
        }
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// One deletion pass over namespace `name`, as upstream's `Delete`. A namespace that is
    /// gone, not being deleted or already finalized needs nothing. Returns
    /// [`Error::ResourcesRemaining`] when content is still going away (the caller looks again
    /// after the estimate), any other error when a step failed (the caller retries with
    /// back-off), and `Ok` once the finalizer is removed.
    pub async fn delete(&self, name: &str) -> Result<()> {
        // Other controllers may edit the namespace during termination: start from the
        // server's latest copy, never a cache.
        let namespace = match self.client.get_namespace(name).await {
            Ok(ns) => ns,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(source) => {
                return Err(Error::Namespace {
                    operation: "get",
                    namespace: name.to_owned(),
                    source,
                });
            }
        };
        if namespace.metadata.deletion_timestamp.is_none() {
            return Ok(());
        }
        tracing::debug!(namespace = name, finalizer_token = %self.finalizer_token, "Namespace controller - syncNamespace");

        // A NotFound means the namespace is truly gone.
        let namespace = match self
            .retry_on_conflict(namespace, NamespaceWrite::Terminating)
            .await
        {
            Ok(ns) => ns,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        // The latest view says it is no longer being deleted.
        let Some(deleted_at) = namespace.metadata.deletion_timestamp.clone() else {
            return Ok(());
        };
        if finalized(&namespace) {
            return Ok(());
        }

        let (namespace, estimate) = self.delete_all_content(namespace, deleted_at.0).await?;
        if estimate > 0 {
            return Err(Error::ResourcesRemaining {
                namespace: name.to_owned(),
                estimate,
            });
        }

        // Content is gone: release our finalizer. A NotFound is possible only when another
        // controller sharing the token finished first.
        match self
            .retry_on_conflict(namespace, NamespaceWrite::Finalize)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Runs `write` on `namespace`, re-reading it after each conflict, until it succeeds or
    /// fails otherwise, as upstream's `retryOnConflictError`; a UID change between attempts
    /// (the namespace was deleted and recreated) stops it.
    async fn retry_on_conflict(
        &self,
        namespace: Namespace,
        write: NamespaceWrite,
    ) -> Result<Namespace> {
        let name = namespace.metadata.name.clone().unwrap_or_default();
        let mut latest = namespace;
        loop {
            let result = match write {
                NamespaceWrite::Terminating => self.mark_terminating(&latest).await,
                NamespaceWrite::Finalize => self.finalize(&latest).await,
            };
            match result {
                Ok(ns) => return Ok(ns),
                Err(e) if e.is_conflict() => {}
                Err(source) => {
                    return Err(Error::Namespace {
                        operation: write.operation(),
                        namespace: name,
                        source,
                    });
                }
            }
            let previous_uid = latest.metadata.uid.clone();
            latest = self
                .client
                .get_namespace(&name)
                .await
                .map_err(|source| Error::Namespace {
                    operation: "get",
                    namespace: name.clone(),
                    source,
                })?;
            if latest.metadata.uid != previous_uid {
                return Err(Error::UidChanged { namespace: name });
            }
        }
    }

    /// Sets the phase to `Terminating` unless it is already (or the namespace is not being
    /// deleted), as upstream's `updateNamespaceStatusFunc`.
    async fn mark_terminating(&self, namespace: &Namespace) -> Result<Namespace, kube::Error> {
        let phase = namespace.status.as_ref().and_then(|s| s.phase.as_deref());
        if namespace.metadata.deletion_timestamp.is_none() || phase == Some("Terminating") {
            return Ok(namespace.clone());
        }
        let mut terminating = namespace.clone();
        terminating
            .status
            .get_or_insert_with(Default::default)
            .phase = Some("Terminating".to_owned());
        self.client.update_status(&terminating).await
    }

    /// Writes `spec.finalizers` without the token (sorted, without duplicates) through
    /// `/finalize`, as upstream's `finalizeNamespace`.
    async fn finalize(&self, namespace: &Namespace) -> Result<Namespace, kube::Error> {
        let remaining: BTreeSet<String> = namespace
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.as_deref())
            .unwrap_or_default()
            .iter()
            .filter(|f| **f != self.finalizer_token)
            .cloned()
            .collect();
        let request = Namespace {
            metadata: namespace.metadata.clone(),
            spec: Some(NamespaceSpec {
                finalizers: Some(remaining.into_iter().collect()),
            }),
            status: None,
        };
        match self.client.finalize(&request).await {
            // Removed already: life is good.
            Err(e) if e.is_not_found() => Ok(request),
            other => other,
        }
    }

    /// Deletes the objects of every deletable namespaced resource, records the pass in the
    /// status conditions, and returns the namespace (as last written) with the estimate of
    /// seconds until what remains is gone, as upstream's `deleteAllContent`. Failures of one
    /// resource do not stop the others; all are returned together.
    async fn delete_all_content(
        &self,
        mut namespace: Namespace,
        deleted_at: Timestamp,
    ) -> Result<(Namespace, i64)> {
        let name = namespace.metadata.name.clone().unwrap_or_default();
        tracing::debug!(namespace = %name, "namespace controller - deleteAllContent");
        let mut errors = Vec::new();
        let mut conditions = ConditionUpdater::new();
        let now = (self.clock)();

        // Discovery errors are not fatal: there is often a set of resources to work on even
        // when the list is incomplete.
        let resources = match self.client.discover().await {
            Ok(discovery) => {
                if let Some((failed, message)) = partial_discovery_error(&discovery) {
                    conditions.process_discover_resources_err(failed, &message, now);
                    errors.push(Error::Discovery { message });
                }
                deletable_namespaced_resources(&discovery)
            }
            Err(e) => {
                let message = error_message(&e);
                conditions.process_discover_resources_err(0, &message, now);
                errors.push(Error::Discovery { message });
                Vec::new()
            }
        };

        // Pods first, and nothing else while any pod remains (KEP-5080, upstream's
        // `OrderedNamespaceDeletion`, locked on since v1.34): the policies, configuration and
        // credentials of a namespace outlive the workloads that use them.
        let (pods, others): (Vec<_>, Vec<_>) = resources.iter().partition(|r| is_pods(&r.gvr()));
        let mut left = Leftovers::default();
        for (phase, group) in [pods, others].into_iter().enumerate() {
            if phase > 0 && left.totals.remaining_by_resource.keys().any(is_pods) {
                tracing::debug!(namespace = %name, "namespace controller - pods still remain, delaying deletion of other resources");
                break;
            }
            for resource in group {
                let (deletion, error) = self
                    .delete_all_content_for_resource(resource, &name, deleted_at)
                    .await;
                left.record(
                    resource.gvr(),
                    deletion,
                    error,
                    &mut conditions,
                    &mut errors,
                );
            }
        }
        let Leftovers { estimate, totals } = left;
        conditions.process_content_totals(&totals, now);

        // Always written: a condition that cleared must show it. Other finalizers may keep
        // the namespace after ours is gone, and the conditions tell why.
        let status = namespace.status.get_or_insert_with(Default::default);
        if conditions.update(status, now) {
            match self.client.update_status(&namespace).await {
                Ok(updated) => namespace = updated,
                Err(e) => tracing::error!(
                    namespace = %name,
                    error = %error_message(&e),
                    "couldn't update status condition for namespace"
                ),
            }
        }

        let result = Error::aggregate(errors);
        tracing::debug!(namespace = %name, estimate, error = ?result.as_ref().map(ToString::to_string), "namespace controller - deleteAllContent");
        match result {
            Some(error) => Err(error),
            None => Ok((namespace, estimate)),
        }
    }

    /// Deletes every object of `resource` in `namespace` and checks what is left, as
    /// upstream's `deleteAllContentForGroupVersionResource`. Objects left over are expected
    /// when they are pods within their grace period or carry finalizers; otherwise they are
    /// an error.
    async fn delete_all_content_for_resource(
        &self,
        resource: &DiscoveredResource,
        namespace: &str,
        deleted_at: Timestamp,
    ) -> (GvrDeletion, Option<Error>) {
        let gvr = resource.gvr();
        tracing::trace!(namespace, resource = %gvr, "Namespace controller - deleteAllContentForGroupVersionResource");
        let estimate = match self
            .estimate_graceful_termination(&gvr, namespace, deleted_at)
            .await
        {
            Ok(estimate) => estimate,
            Err(e) => return (GvrDeletion::default(), Some(e)),
        };
        let with_estimate = GvrDeletion {
            estimate,
            ..GvrDeletion::default()
        };

        // The whole collection at once; else list and delete each object.
        let collection_deleted = match self.delete_collection(resource, namespace).await {
            Ok(supported) => supported,
            Err(e) => return (with_estimate, Some(e)),
        };
        if !collection_deleted && let Err(e) = self.delete_each_item(resource, namespace).await {
            return (with_estimate, Some(e));
        }

        // Verify nothing is left; leftovers are fine while the estimate is running.
        let items = match self.list_collection(resource, namespace).await {
            Ok(Some(items)) => items,
            Ok(None) => return (with_estimate, None),
            Err(e) => return (with_estimate, Some(e)),
        };
        tracing::trace!(namespace, resource = %gvr, items = items.len(), "Namespace controller - items remaining");
        if items.is_empty() {
            return (GvrDeletion::default(), None);
        }
        let mut by_finalizer: BTreeMap<String, usize> = BTreeMap::new();
        for item in &items {
            for finalizer in item.finalizers.as_deref().unwrap_or_default() {
                *by_finalizer.entry(finalizer.clone()).or_default() += 1;
            }
        }
        if estimate != 0 {
            return (
                GvrDeletion {
                    estimate,
                    remaining: items.len(),
                    remaining_by_finalizer: by_finalizer,
                },
                None,
            );
        }
        // Finalizers left are normal: allow the usual time for them (the garbage collector).
        if !by_finalizer.is_empty() {
            return (
                GvrDeletion {
                    estimate: FINALIZER_ESTIMATE_SECONDS,
                    remaining: items.len(),
                    remaining_by_finalizer: by_finalizer,
                },
                None,
            );
        }
        // Nothing should have kept these objects.
        (
            GvrDeletion {
                estimate,
                remaining: items.len(),
                remaining_by_finalizer: BTreeMap::new(),
            },
            Some(Error::ContentRemaining {
                namespace: namespace.to_owned(),
                gvr,
            }),
        )
    }

    /// `deletecollection` on `resource`; false when the resource does not serve it, as
    /// upstream's `deleteCollection` (a 405, or a 404 from resources listed by discovery but
    /// serving no collection verbs, also count as unsupported).
    async fn delete_collection(
        &self,
        resource: &DiscoveredResource,
        namespace: &str,
    ) -> Result<bool> {
        if !resource.supports_all(&["deletecollection"]) {
            return Ok(false);
        }
        match self
            .client
            .delete_collection(&resource.api_resource, namespace)
            .await
        {
            Ok(()) => Ok(true),
            Err(e) if is_method_not_supported(&e) || e.is_not_found() => Ok(false),
            Err(source) => Err(Error::Content {
                operation: "delete collection of",
                namespace: namespace.to_owned(),
                gvr: resource.gvr(),
                source,
            }),
        }
    }

    /// The metadata of every `resource` object in `namespace`; `None` when listing is not
    /// supported, as upstream's `listCollection`.
    async fn list_collection(
        &self,
        resource: &DiscoveredResource,
        namespace: &str,
    ) -> Result<Option<Vec<kube::api::ObjectMeta>>> {
        if !resource.supports_all(&["list"]) {
            return Ok(None);
        }
        match self.client.list(&resource.api_resource, namespace).await {
            Ok(items) => Ok(Some(items)),
            Err(e) if is_method_not_supported(&e) || e.is_not_found() => Ok(None),
            Err(source) => Err(Error::Content {
                operation: "list",
                namespace: namespace.to_owned(),
                gvr: resource.gvr(),
                source,
            }),
        }
    }

    /// Lists `resource` and deletes each object, as upstream's `deleteEachItem`; objects gone
    /// meanwhile (404) and resources refusing delete (405) are skipped.
    async fn delete_each_item(&self, resource: &DiscoveredResource, namespace: &str) -> Result<()> {
        let Some(items) = self.list_collection(resource, namespace).await? else {
            return Ok(());
        };
        for item in items {
            let name = item.name.as_deref().unwrap_or_default();
            match self
                .client
                .delete(&resource.api_resource, namespace, name)
                .await
            {
                Ok(()) => {}
                Err(e) if e.is_not_found() || is_method_not_supported(&e) => {}
                Err(source) => {
                    return Err(Error::Content {
                        operation: "delete",
                        namespace: namespace.to_owned(),
                        gvr: resource.gvr(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// Seconds the objects of `gvr` may still need to terminate gracefully: for pods, the
    /// longest grace period of the non-terminal pods, unless that much time has already passed
    /// since the namespace's deletion; zero for everything else, as upstream's
    /// `estimateGracefulTermination`.
    async fn estimate_graceful_termination(
        &self,
        gvr: &GroupVersionResource,
        namespace: &str,
        deleted_at: Timestamp,
    ) -> Result<i64> {
        if !is_pods(gvr) {
            return Ok(0);
        }
        let pods = self
            .client
            .list_pods(namespace)
            .await
            .map_err(|source| Error::Content {
                operation: "list pods to estimate the graceful termination of",
                namespace: namespace.to_owned(),
                gvr: gvr.clone(),
                source,
            })?;
        let estimate = pods
            .iter()
            .filter(|pod| {
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
            })
            .filter_map(|pod| {
                pod.spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .fold(0, i64::max);
        let since_deletion = (self.clock)().duration_since(deleted_at);
        if since_deletion >= SignedDuration::from_secs(estimate) {
            return Ok(0);
        }
        Ok(estimate)
    }
}

/// Whether `gvr` is core pods, which a pass deletes before everything else.
fn is_pods(gvr: &GroupVersionResource) -> bool {
    gvr.group_resource() == GroupResource::new("", "pods")
}

/// Whether `spec.finalizers` is empty, as upstream's `finalized`.
fn finalized(namespace: &Namespace) -> bool {
    namespace
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_none_or(Vec::is_empty)
}

/// A 405 MethodNotAllowed, as apimachinery's `IsMethodNotSupported`.
fn is_method_not_supported(err: &kube::Error) -> bool {
    err.api_status()
        .is_some_and(|s: &Status| s.reason == "MethodNotAllowed" || s.code == 405)
}

/// The number of failed group versions and client-go's `ErrGroupDiscoveryFailed` message,
/// when discovery was partial.
fn partial_discovery_error(discovery: &DiscoveryResult) -> Option<(usize, String)> {
    if discovery.failed.is_empty() {
        return None;
    }
    let mut groups: Vec<String> = discovery
        .failed
        .iter()
        .map(|(gv, e)| format!("{gv}: {}", error_message(e)))
        .collect();
    groups.sort();
    Some((
        discovery.failed.len(),
        format!(
            "unable to retrieve the complete list of server APIs: {}",
            groups.join(", ")
        ),
    ))
}

/// The namespaced resources of the server's preferred versions (for a resource missing from
/// its group's preferred version, the first version serving it) that support `delete`, in
/// group/resource order: upstream's `ServerPreferredNamespacedResources` filtered by
/// `SupportsAllVerbs{delete}`.
pub fn deletable_namespaced_resources(discovery: &DiscoveryResult) -> Vec<DiscoveredResource> {
    discovery
        .preferred()
        .into_values()
        .filter(|r| r.namespaced)
        .filter(|r| r.supports_all(&["delete"]))
        .cloned()
        .collect()
}

#[cfg(test)]
#[path = "deleter_tests.rs"]
mod tests;
