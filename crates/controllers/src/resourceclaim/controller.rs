//! The ResourceClaim controller: constants, construction (indexes, the created-claim cache), `Run`, the pod and claim handlers, `syncPod`/`handleClaim` and `syncClaim` (upstream `controller.go`).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus, ResourceClaimTemplate,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::split_meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Resource;
use tokio_util::sync::CancellationToken;

use super::claims::{
    CLAIM_POD_OWNER_INDEX, DELETE_PROTECTION_FINALIZER, NameError, POD_CLAIM_NAME_ANNOTATION,
    POD_RESOURCE_CLAIM_INDEX, add_claim_pod_owner_indexer, add_pod_resource_claim_indexer,
    can_be_reserved, claim_name, claim_pod_owner_index, generate_name, is_allocated, is_for_pod,
    is_pod_done, is_reserved_for_pod, ns_name, owning_pod, pod_claims, reserved_for,
    spec_has_prioritized_list, spec_needs_admin_access,
};
use super::client::{ApiResourceClaimClient, ResourceClaimClient};
use super::metrics::ResourceClaimMetrics;
use super::{ClaimError, Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of this controller (upstream `names.ResourceClaimController`).
pub const CONTROLLER_NAME: &str = "resourceclaim-controller";

/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "resource-claim-controller";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "resource_claim";

/// The source component of its events.
pub const EVENT_COMPONENT: &str = "resource_claim";

/// `--concurrent-resourceclaim-syncs`' default (upstream's
/// `RecommendedDefaultResourceClaimControllerConfiguration`).
pub const DEFAULT_CONCURRENT_RESOURCE_CLAIM_SYNCS: u32 = 50;

/// The warning on a pod whose claim cannot be made.
pub const FAILED_RESOURCE_CLAIM_CREATION: &str = "FailedResourceClaimCreation";

/// How many deleted pod UIDs are remembered (upstream's `maxUIDCacheEntries`).
const MAX_UID_CACHE_ENTRIES: usize = 500;

const CLAIM_KEY_PREFIX: &str = "claim:";
const POD_KEY_PREFIX: &str = "pod:";

/// Every failed sync is requeued rate-limited, as upstream's `processNextWorkItem`.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("resource claim sync failed");

/// The feature gates the controller honours (upstream's `resourceclaim.Features`); both are on
/// by default in v1.36.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// `DRAAdminAccess`: templates may ask for admin access.
    pub admin_access: bool,
    /// `DRAPrioritizedList`: templates may hold `firstAvailable` lists.
    pub prioritized_list: bool,
}

impl Default for Features {
    fn default() -> Self {
        Self {
            admin_access: true,
            prioritized_list: true,
        }
    }
}

/// Wiring of a [`ResourceClaimController`].
#[derive(Clone, Default)]
pub struct ResourceClaimControllerOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where creates are counted; `None` counts nothing.
    pub controller_metrics: Option<Arc<ResourceClaimMetrics>>,
    /// The feature gates.
    pub features: Features,
}

impl std::fmt::Debug for ResourceClaimControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceClaimControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .field("controller_metrics", &self.controller_metrics.is_some())
            .field("features", &self.features)
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// Caches of the controller's own
// ---------------------------------------------------------------------------------------------

/// UIDs of pods seen deleted, the oldest forgotten first (upstream's `uidCache`).
#[derive(Debug, Default)]
struct UidCache {
    /// Insertion order; every element is in `set`, and `order.len() <= MAX_UID_CACHE_ENTRIES`.
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl UidCache {
    fn add(&mut self, uid: &str) {
        if !self.set.insert(uid.to_owned()) {
            return;
        }
        self.order.push_back(uid.to_owned());
        while self.order.len() > MAX_UID_CACHE_ENTRIES {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }

    fn has(&self, uid: &str) -> bool {
        self.set.contains(uid)
    }
}

/// State the handlers and the workers share.
#[derive(Debug, Default)]
struct Shared {
    /// Pods known to be deleted.
    deleted: UidCache,
    /// Claims this controller created that the informer has not delivered yet, by
    /// `namespace/name` (upstream's mutation cache over the claim informer): without it a
    /// retry after a failed pod status update would create a second claim.
    created: HashMap<String, Arc<ResourceClaim>>,
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Creates ResourceClaims for the templates in pod specs and keeps `status.reservedFor` true,
/// as upstream's resourceclaim `Controller`.
pub struct ResourceClaimController {
    /// The requests. Test seam: [`super::FakeResourceClaimClient`].
    client: Arc<dyn ResourceClaimClient>,
    /// The pod informer's cache, indexed by [`POD_RESOURCE_CLAIM_INDEX`] (read only).
    pods: Indexer<Pod>,
    /// The claim informer's cache, indexed by [`CLAIM_POD_OWNER_INDEX`] (read only).
    claims: Indexer<ResourceClaim>,
    /// The template informer's cache (read only).
    templates: Indexer<ResourceClaimTemplate>,
    /// The informers `run` waits for.
    caches_synced: Vec<InformerSynced>,
    /// `pod:<ns>/<name>` and `claim:<ns>/<name>` keys.
    queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    handlers: ResourceClaimEventHandlers,
    /// Deleted pods and created claims, shared with the handlers.
    shared: Arc<Mutex<Shared>>,
    /// Where `FailedResourceClaimCreation` warnings go.
    recorder: Arc<dyn EventRecorder>,
    /// The create counter, if recorded.
    metrics: Option<Arc<ResourceClaimMetrics>>,
    /// The feature gates.
    features: Features,
}

impl std::fmt::Debug for ResourceClaimController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceClaimController")
            .field("queue_len", &self.queue.len())
            .field("features", &self.features)
            .finish_non_exhaustive()
    }
}

impl ResourceClaimController {
    /// The controller kube-controller-manager runs, over the factory's pod, claim and template
    /// informers, as upstream's `NewController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: ResourceClaimControllerOptions,
    ) -> Self {
        let pods = factory.pods();
        let claims = factory.informer_for::<ResourceClaim>();
        let templates = factory.informer_for::<ResourceClaimTemplate>();
        let mut controller = Self::with_caches(
            pods.indexer().clone(),
            claims.indexer().clone(),
            templates.indexer().clone(),
            Arc::new(ApiResourceClaimClient::new(client)),
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&pods, controller.handlers.clone())
            .register(&claims, controller.handlers.clone())
            .wait_for(&templates)
            .finish();
        controller
    }

    /// A controller over bare caches, adding its indexes (unit tests fill them and call the
    /// handlers and [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        pods: Indexer<Pod>,
        claims: Indexer<ResourceClaim>,
        templates: Indexer<ResourceClaimTemplate>,
        client: Arc<dyn ResourceClaimClient>,
        recorder: Arc<dyn EventRecorder>,
        options: ResourceClaimControllerOptions,
    ) -> Self {
        if let Err(err) = add_pod_resource_claim_indexer(&pods) {
            tracing::error!(controller = CONTROLLER_NAME, %err, "could not initialize ResourceClaim controller");
        }
        if let Err(err) = add_claim_pod_owner_indexer(&claims) {
            tracing::error!(controller = CONTROLLER_NAME, %err, "could not initialize ResourceClaim controller");
        }
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics,
            },
        );
        let shared = Arc::new(Mutex::new(Shared::default()));
        Self {
            client,
            handlers: ResourceClaimEventHandlers {
                queue: queue.clone(),
                pods: pods.clone(),
                claims: claims.clone(),
                shared: Arc::clone(&shared),
            },
            pods,
            claims,
            templates,
            caches_synced: Vec::new(),
            queue,
            shared,
            recorder,
            metrics: options.controller_metrics,
            features: options.features,
        }
    }

    /// The handlers to register with the pod and claim informers.
    pub fn event_handlers(&self) -> &ResourceClaimEventHandlers {
        &self.handlers
    }

    /// The work queue.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The claim cache (for the `resourceclaim_controller_resource_claims` collector).
    pub fn claim_cache(&self) -> &Indexer<ResourceClaim> {
        &self.claims
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers a claim this controller created until the informer delivers it.
    #[cfg(test)]
    pub(super) fn remember_created(&self, claim: ResourceClaim) {
        let key = ns_name(
            claim.metadata.namespace.as_deref(),
            claim.metadata.name.as_deref(),
        );
        self.shared().created.insert(key, Arc::new(claim));
    }

    /// Waits for the caches, then runs `workers` workers until `cancel` fires, as upstream's
    /// `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        run_controller(
            CONTROLLER_NAME,
            "resource claim controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        )
        .await;
    }

    /// Takes one key and syncs it through the shared worker, as upstream's
    /// `processNextWorkItem`. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |key| async move { self.sync(&key).await },
        )
        .await
    }

    /// Syncs one `pod:` or `claim:` key, as upstream's `syncHandler`.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let Some(sep) = key.find(':') else {
            return Err(Error::UnexpectedKey(key.to_owned()));
        };
        let (prefix, object) = key.split_at(sep + 1);
        let (namespace, name) =
            split_meta_namespace_key(object).map_err(|source| Error::InvalidKey {
                key: key.to_owned(),
                source,
            })?;
        let namespace = namespace.unwrap_or_default();
        match prefix {
            POD_KEY_PREFIX => self.sync_pod(namespace, name).await,
            CLAIM_KEY_PREFIX => self.sync_claim(namespace, name).await,
            _ => Err(Error::UnexpectedKey(key.to_owned())),
        }
    }

    /// Upstream's `syncPod`: the claims of a live pod made and recorded in its status; once
    /// it is scheduled, its allocated claims reserved for it.
    async fn sync_pod(&self, namespace: &str, name: &str) -> Result<()> {
        let pod_key = format!("{namespace}/{name}");
        let Some(pod) = self.pods.get_by_key(&pod_key) else {
            tracing::trace!(pod = pod_key, "nothing to do for pod, it is gone");
            return Ok(());
        };
        if pod.metadata.deletion_timestamp.is_some() {
            tracing::trace!(
                pod = pod_key,
                "nothing to do for pod, it is marked for deletion"
            );
            return Ok(());
        }

        let mut new_pod_claims = BTreeMap::new();
        for entry in pod_claims(&pod) {
            if let Err(source) = self.handle_claim(&pod, entry, &mut new_pod_claims).await {
                self.recorder.event(
                    &pod.object_ref(&()),
                    EventType::Warning,
                    FAILED_RESOURCE_CLAIM_CREATION,
                    format!("PodResourceClaim {}: {source}", entry.name),
                );
                return Err(Error::PodClaim {
                    pod: pod_key,
                    pod_claim: entry.name.clone(),
                    source,
                });
            }
        }

        if !new_pod_claims.is_empty() {
            let statuses: Vec<PodResourceClaimStatus> = new_pod_claims
                .into_iter()
                .map(|(name, claim)| PodResourceClaimStatus {
                    name,
                    resource_claim_name: Some(claim),
                })
                .collect();
            self.client
                .apply_pod_claim_statuses(namespace, name, &statuses)
                .await
                .map_err(|source| Error::ApplyPodStatus {
                    pod: pod_key.clone(),
                    source,
                })?;
        }

        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if node_name.is_none_or(str::is_empty) {
            tracing::trace!(
                pod = pod_key,
                "nothing to do for pod, scheduler will deal with it"
            );
            return Ok(());
        }

        for entry in pod_claims(&pod) {
            let (claim_name, check_owner) = claim_name(&pod, entry)?;
            let Some(claim_name) = claim_name else {
                continue;
            };
            let Some(claim) = self.claims.get_by_key(&format!("{namespace}/{claim_name}")) else {
                return Ok(());
            };
            if check_owner {
                is_for_pod(&pod, &claim)?;
            }
            if is_allocated(&claim) && !is_reserved_for_pod(&pod, &claim) && can_be_reserved(&claim)
            {
                tracing::debug!(pod = pod_key, claim = claim_name, "reserve claim for pod");
                self.reserve_for_pod(&pod, &claim).await?;
            }
        }
        Ok(())
    }

    /// Upstream's `handleClaim`: the claim of one entry, found or made from its template; a
    /// claim made or found anew is added to `new_pod_claims` (entry name to claim name).
    async fn handle_claim(
        &self,
        pod: &Pod,
        entry: &PodResourceClaim,
        new_pod_claims: &mut BTreeMap<String, String>,
    ) -> Result<(), ClaimError> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        match claim_name(pod, entry) {
            Err(NameError::ClaimNotFound { .. }) => {}
            Err(err) => return Err(ClaimError::Check(err)),
            Ok((None, _)) => return Ok(()),
            Ok((Some(name), check_owner)) => {
                if !name.is_empty()
                    && let Some(claim) = self.claims.get_by_key(&format!("{namespace}/{name}"))
                {
                    match check_owner.then(|| is_for_pod(pod, &claim)).transpose() {
                        Ok(_) => {
                            tracing::trace!(
                                pod_claim = entry.name,
                                claim = name,
                                "claim already created"
                            );
                            return Ok(());
                        }
                        Err(err) => tracing::error!(
                            %err, pod_claim = entry.name, claim = name,
                            "claim that was created for the pod is no longer owned by the pod, creating a new one"
                        ),
                    }
                }
            }
        }

        let Some(template_name) = &entry.resource_claim_template_name else {
            return Ok(());
        };

        // A claim made earlier whose name did not reach the pod status is reused.
        let claim = match self.find_pod_resource_claim(pod, entry) {
            Some(claim) => claim,
            None => self.create_claim(pod, entry, template_name).await?,
        };
        new_pod_claims.insert(
            entry.name.clone(),
            claim.metadata.name.clone().unwrap_or_default(),
        );
        Ok(())
    }

    /// Makes the claim of `entry` from template `template_name`.
    async fn create_claim(
        &self,
        pod: &Pod,
        entry: &PodResourceClaim,
        template_name: &str,
    ) -> Result<Arc<ResourceClaim>, ClaimError> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let Some(template) = self
            .templates
            .get_by_key(&format!("{namespace}/{template_name}"))
        else {
            return Err(ClaimError::TemplateNotFound {
                template: template_name.to_owned(),
            });
        };
        let admin_access = spec_needs_admin_access(&template.spec.spec);
        if !self.features.admin_access && admin_access {
            return Err(ClaimError::AdminAccessDisabled);
        }
        if !self.features.prioritized_list && spec_has_prioritized_list(&template.spec.spec) {
            return Err(ClaimError::PrioritizedListDisabled);
        }
        let template_meta = template.spec.metadata.clone().unwrap_or_default();
        let mut annotations = template_meta.annotations.unwrap_or_default();
        annotations.insert(POD_CLAIM_NAME_ANNOTATION.to_owned(), entry.name.clone());
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let claim = ResourceClaim {
            metadata: ObjectMeta {
                generate_name: Some(generate_name(&pod_name, &entry.name)),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".to_owned(),
                    kind: "Pod".to_owned(),
                    name: pod_name,
                    uid: pod.metadata.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                annotations: Some(annotations),
                labels: template_meta.labels,
                ..ObjectMeta::default()
            },
            spec: template.spec.spec.clone(),
            status: None,
        };
        match self.client.create_claim(namespace, &claim).await {
            Ok(created) => {
                if let Some(metrics) = &self.metrics {
                    metrics.create(true, admin_access);
                }
                let created = Arc::new(created);
                let key = ns_name(Some(namespace), created.metadata.name.as_deref());
                self.shared().created.insert(key, Arc::clone(&created));
                tracing::debug!(
                    pod = ?pod.metadata.name,
                    claim = ?created.metadata.name,
                    "created ResourceClaim from template"
                );
                Ok(created)
            }
            Err(source) => {
                if let Some(metrics) = &self.metrics {
                    metrics.create(false, admin_access);
                }
                Err(ClaimError::Create {
                    claim: String::new(),
                    source,
                })
            }
        }
    }

    /// A claim the pod controls made for `entry` (by annotation, or the `<pod>-<entry>` name of
    /// Kubernetes <= 1.27), as upstream's `findPodResourceClaim`; the first by name if several.
    fn find_pod_resource_claim(
        &self,
        pod: &Pod,
        entry: &PodResourceClaim,
    ) -> Option<Arc<ResourceClaim>> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let mut candidates = self
            .claims
            .by_index(CLAIM_POD_OWNER_INDEX, uid)
            .unwrap_or_default();
        {
            let shared = self.shared();
            for claim in shared.created.values() {
                let known = candidates.iter().any(|c| {
                    c.metadata.name == claim.metadata.name
                        && c.metadata.namespace == claim.metadata.namespace
                });
                if !known && claim_pod_owner_index(claim).iter().any(|u| u == uid) {
                    candidates.push(Arc::clone(claim));
                }
            }
        }
        candidates.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let deterministic = format!(
            "{}-{}",
            pod.metadata.name.as_deref().unwrap_or_default(),
            entry.name
        );
        candidates.into_iter().find(|claim| {
            match claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION))
            {
                Some(pod_claim) => *pod_claim == entry.name,
                None => claim.metadata.name.as_deref() == Some(deterministic.as_str()),
            }
        })
    }

    /// Adds `pod` to the claim's `status.reservedFor` (upstream's `reserveForPod`).
    async fn reserve_for_pod(&self, pod: &Pod, claim: &ResourceClaim) -> Result<()> {
        let mut claim = claim.clone();
        let status = claim
            .status
            .get_or_insert_with(ResourceClaimStatus::default);
        status
            .reserved_for
            .get_or_insert_with(Vec::new)
            .push(ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".to_owned(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
            });
        self.client
            .update_claim_status(&claim)
            .await
            .map(|_| ())
            .map_err(|source| Error::Reserve {
                claim: ns_name(
                    claim.metadata.namespace.as_deref(),
                    claim.metadata.name.as_deref(),
                ),
                source,
            })
    }

    /// Whether a `reservedFor` pod entry stays: not if the pod is known deleted, is gone (the
    /// API server is asked when the cache does not know it), was replaced or is done.
    async fn keep_reservation(
        &self,
        namespace: &str,
        entry: &ResourceClaimConsumerReference,
    ) -> Result<bool> {
        if self.shared().deleted.has(&entry.uid) {
            return Ok(false);
        }
        let pod_key = format!("{namespace}/{}", entry.name);
        match self.pods.get_by_key(&pod_key) {
            Some(pod) if pod.metadata.uid.as_deref() != Some(entry.uid.as_str()) => {
                tracing::trace!(
                    pod = pod_key,
                    "remove reservation because pod got replaced with new instance"
                );
                Ok(false)
            }
            Some(pod) if is_pod_done(&pod) => {
                tracing::trace!(
                    pod = pod_key,
                    "remove reservation because pod will not run anymore"
                );
                Ok(false)
            }
            Some(_) => Ok(true),
            None => {
                // Not in the cache (yet?): removing a pod the scheduler is placing would be
                // wrong, so the server decides.
                let pod = self
                    .client
                    .get_pod(namespace, &entry.name)
                    .await
                    .map_err(|source| Error::GetPod {
                        pod: pod_key.clone(),
                        source,
                    })?;
                let same =
                    pod.is_some_and(|p| p.metadata.uid.as_deref() == Some(entry.uid.as_str()));
                if !same {
                    tracing::trace!(
                        pod = pod_key,
                        "remove reservation because pod is gone or got replaced"
                    );
                }
                Ok(same)
            }
        }
    }

    /// Upstream's `syncClaim`: stale pod reservations dropped; an allocation nobody uses any
    /// more cleared (with its finalizer); a generated claim whose pod is done deleted.
    async fn sync_claim(&self, namespace: &str, name: &str) -> Result<()> {
        let claim_key = format!("{namespace}/{name}");
        let Some(claim) = self.claims.get_by_key(&claim_key) else {
            tracing::trace!(claim = claim_key, "nothing to do for claim, it is gone");
            return Ok(());
        };

        let reserved = reserved_for(&claim);
        let mut valid = Vec::with_capacity(reserved.len());
        for entry in reserved {
            let is_pod =
                entry.api_group.as_deref().is_none_or(str::is_empty) && entry.resource == "pods";
            // Other consumers are kept: the controller cannot look them up.
            if !is_pod || self.keep_reservation(namespace, entry).await? {
                valid.push(entry.clone());
            }
        }

        let has_finalizer = |c: &ResourceClaim| {
            c.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == DELETE_PROTECTION_FINALIZER)
        };
        tracing::trace!(
            claim = claim_key,
            current_count = reserved.len(),
            updated_count = valid.len(),
            builtin_controller = has_finalizer(&claim),
            "claim reserved for counts"
        );
        if valid.len() < reserved.len() {
            let mut updated = (*claim).clone();
            let status = updated
                .status
                .get_or_insert_with(ResourceClaimStatus::default);
            let unused = valid.is_empty();
            status.reserved_for = (!unused).then_some(valid.clone());
            // The transition from used to unused deallocates what the scheduler allocated, so
            // a later consumer may be placed elsewhere and the devices are free for others.
            if unused && has_finalizer(&claim) {
                status.allocation = None;
            }
            let updated = self
                .client
                .update_claim_status(&updated)
                .await
                .map_err(|source| Error::UpdateStatus {
                    claim: claim_key.clone(),
                    source,
                })?;
            if has_finalizer(&updated) && !is_allocated(&updated) {
                self.remove_finalizer(updated, &claim_key).await?;
            }
        } else if has_finalizer(&claim)
            && claim.metadata.deletion_timestamp.is_some()
            && valid.is_empty()
        {
            let mut updated = (*claim).clone();
            if is_allocated(&updated) {
                // Allocated, unused and now deleted: the allocation goes first.
                if let Some(status) = updated.status.as_mut() {
                    status.allocation = None;
                }
                updated = self
                    .client
                    .update_claim_status(&updated)
                    .await
                    .map_err(|source| Error::UpdateStatus {
                        claim: claim_key.clone(),
                        source,
                    })?;
            }
            self.remove_finalizer(updated, &claim_key).await?;
        }

        if valid.is_empty() {
            // Not reserved: a claim generated for a pod that will not run goes. The garbage
            // collector would too, but only once the pod itself is deleted.
            match owning_pod(&claim) {
                Some(owner) => {
                    match self.pods.get_by_key(&format!("{namespace}/{}", owner.name)) {
                        Some(pod) => {
                            if pod.metadata.uid.as_deref() != Some(owner.uid.as_str())
                                || is_pod_done(&pod)
                            {
                                tracing::debug!(
                                    claim = claim_key,
                                    pod = owner.name,
                                    "deleting unused generated claim"
                                );
                                self.client.delete_claim(namespace, name).await.map_err(
                                    |source| Error::Delete {
                                        claim: claim_key.clone(),
                                        source,
                                    },
                                )?;
                            } else {
                                tracing::trace!(
                                    claim = claim_key,
                                    "wrong pod content, not deleting claim"
                                );
                            }
                        }
                        None => {
                            // Perhaps not known *yet*; the garbage collector handles a pod
                            // that is truly gone.
                            tracing::trace!(
                                claim = claim_key,
                                pod = owner.name,
                                "pod for claim not found"
                            );
                        }
                    }
                }
                None => tracing::trace!(claim = claim_key, "claim not generated for a pod"),
            }
        }
        Ok(())
    }

    /// Drops the scheduler's finalizer from `claim`.
    async fn remove_finalizer(&self, mut claim: ResourceClaim, claim_key: &str) -> Result<()> {
        if let Some(finalizers) = claim.metadata.finalizers.as_mut() {
            finalizers.retain(|f| f != DELETE_PROTECTION_FINALIZER);
        }
        self.client
            .update_claim(&claim)
            .await
            .map(|_| ())
            .map_err(|source| Error::Update {
                claim: claim_key.to_owned(),
                source,
            })
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The pod and claim handlers, as upstream's `enqueuePod` and `enqueueResourceClaim`. Cheap to
/// clone.
#[derive(Clone)]
pub struct ResourceClaimEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
    /// The pod cache, for the pods using a claim.
    pods: Indexer<Pod>,
    /// The claim cache, to tell whether a pod needs work.
    claims: Indexer<ResourceClaim>,
    /// Deleted pods and created claims, shared with the controller.
    shared: Arc<Mutex<Shared>>,
}

impl std::fmt::Debug for ResourceClaimEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceClaimEventHandlers")
            .finish_non_exhaustive()
    }
}

/// Whether the pod may still use its claims (upstream's `podNeedsClaims`).
fn pod_needs_claims(pod: &Pod, deleted: bool) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let unscheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    !(deleted
        || matches!(phase, Some("Succeeded" | "Failed"))
        || (pod.metadata.deletion_timestamp.is_some() && unscheduled))
}

impl ResourceClaimEventHandlers {
    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A pod with claims changed or went away: the claims of a pod done with them are queued
    /// (their reservations may go), and the pod is queued if it needs work.
    pub fn enqueue_pod(&self, pod: &Pod, deleted: bool) {
        if pod_claims(pod).is_empty() {
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        if deleted && let Some(uid) = pod.metadata.uid.as_deref() {
            self.shared().deleted.add(uid);
        }
        if !pod_needs_claims(pod, deleted) {
            for entry in pod_claims(pod) {
                if let Ok((Some(name), _)) = claim_name(pod, entry) {
                    self.queue
                        .add(format!("{CLAIM_KEY_PREFIX}{namespace}/{name}"));
                }
            }
        }
        if self.pod_needs_work(pod) {
            self.queue.add(format!(
                "{POD_KEY_PREFIX}{namespace}/{}",
                pod.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }

    /// Whether a new or changed pod has a claim to make or reserve (upstream's `podNeedsWork`).
    pub fn pod_needs_work(&self, pod: &Pod) -> bool {
        if pod.metadata.deletion_timestamp.is_some() {
            return false;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let scheduled = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        for entry in pod_claims(pod) {
            let (name, check_owner) = match claim_name(pod, entry) {
                Ok(found) => found,
                Err(_) => return true,
            };
            let Some(name) = name else {
                return false;
            };
            let Some(claim) = self.claims.get_by_key(&format!("{namespace}/{name}")) else {
                // A template's claim is the controller's to make; a plain one the user's.
                return entry.resource_claim_template_name.is_some();
            };
            if check_owner && is_for_pod(pod, &claim).is_err() {
                return false;
            }
            if !scheduled {
                continue;
            }
            if is_allocated(&claim) && !is_reserved_for_pod(pod, &claim) && can_be_reserved(&claim)
            {
                return true;
            }
        }
        false
    }

    /// A claim was added, changed or deleted: a live claim is queued (its reservations may be
    /// stale), and so are the pods using it that need work.
    pub fn enqueue_claim(&self, claim: &ResourceClaim, deleted: bool) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        // The informer has it now (or it is gone): the created-claim cache is done with it.
        self.shared().created.remove(&key);
        if !deleted {
            self.queue.add(format!("{CLAIM_KEY_PREFIX}{key}"));
        }
        match self.pods.by_index(POD_RESOURCE_CLAIM_INDEX, &key) {
            Ok(pods) => {
                for pod in pods {
                    self.enqueue_pod(&pod, false);
                }
            }
            Err(err) => tracing::error!(%err, claim = key, "listing pods from cache"),
        }
    }
}

impl ResourceEventHandler<Pod> for ResourceClaimEventHandlers {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.enqueue_pod(&pod, false);
    }

    fn on_update(&self, _old: Arc<Pod>, new: Arc<Pod>) {
        self.enqueue_pod(&new, false);
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.enqueue_pod(obj.object(), true);
    }
}

impl ResourceEventHandler<ResourceClaim> for ResourceClaimEventHandlers {
    fn on_add(&self, claim: Arc<ResourceClaim>, _is_in_initial_list: bool) {
        self.enqueue_claim(&claim, false);
    }

    fn on_update(&self, _old: Arc<ResourceClaim>, new: Arc<ResourceClaim>) {
        self.enqueue_claim(&new, false);
    }

    fn on_delete(&self, obj: DeletedObject<ResourceClaim>) {
        self.enqueue_claim(obj.object(), true);
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
