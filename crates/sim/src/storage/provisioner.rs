//! The simulated provisioner: a PersistentVolume for every claim of a [`PROVISIONER`](super::class::PROVISIONER) class, bound to it, as the PV controller and an external provisioner would.
//!
//! For each claim whose class (named, or the default class) has the simulated provisioner,
//! once the class's binding mode allows it (at once for `Immediate`; once a pod using the claim
//! is scheduled for `WaitForFirstConsumer`, the volume then pinned to that pod's node):
//! create PV `pvc-<claim uid>` (the claim's request as capacity, its access modes, a
//! `claimRef` to it, the class's reclaim policy, a hostPath), mark the PV `Bound`, set the
//! claim's `volumeName` (and its class, when it named none) and binding annotations, and mark
//! the claim `Bound`. A deleted claim's volume is marked `Released`, and deleted when its
//! reclaim policy is `Delete`. Nothing here blocks pods: the simulated kubelet runs pods
//! whether their claims are bound or not, and the StatefulSet controller does not wait for
//! binding either.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus, PersistentVolumeSpec,
    PersistentVolumeStatus, Pod, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::controller::api_status::ApiStatus;
use kcm_machinery::controller::{ErrorPolicy, run_workers};
use kcm_machinery::informer::{
    DeletedObject, Indexer, ResourceEventHandler, SharedInformerFactory, wait_until_synced,
};
use kcm_machinery::workqueue::{QueueConfig, RateLimitingQueue, default_controller_rate_limiter};
use tokio_util::sync::CancellationToken;

use super::class::{PROVISIONER, WAIT_FOR_FIRST_CONSUMER, binding_mode, class_of};
use super::client::VolumeClient;
use crate::NO_RESYNC;

/// The annotation naming the node a `WaitForFirstConsumer` claim is provisioned on (set by
/// kube-scheduler upstream; read here when present).
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// The annotation a provisioner stamps on the PVs it made.
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
/// Where simulated volumes "live" on their node.
pub const HOST_PATH_ROOT: &str = "/var/lib/kcm-sim/volumes";
/// How many claims are bound at once.
const WORKERS: usize = 4;

/// Why a provisioning step failed (the queue retries it).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{step} for {object}: {source}")]
    Api {
        /// What was being done (`creating volume`, `binding claim`, ...).
        step: &'static str,
        /// The object, `namespace/name` or a PV name.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// One unit of work: a claim to bind, or a volume whose claim may be gone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    /// A claim, `namespace/name`.
    Claim(String),
    /// A PersistentVolume, by name.
    Volume(String),
}

/// The caches the provisioner reads.
#[derive(Clone, Default)]
pub struct StorageCaches {
    /// PersistentVolumeClaims.
    pub claims: Indexer<PersistentVolumeClaim>,
    /// PersistentVolumes.
    pub volumes: Indexer<PersistentVolume>,
    /// StorageClasses.
    pub classes: Indexer<StorageClass>,
    /// Pods (to find a `WaitForFirstConsumer` claim's node).
    pub pods: Indexer<Pod>,
}

/// The simulated provisioner and binder.
pub struct Provisioner {
    client: Arc<dyn VolumeClient>,
    caches: StorageCaches,
    queue: RateLimitingQueue<Item>,
    synced: Vec<Arc<dyn Fn() -> bool + Send + Sync>>,
}

impl std::fmt::Debug for Provisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provisioner").finish_non_exhaustive()
    }
}

/// The event handlers: claims, pods and classes enqueue claims; deleted claims enqueue
/// their volumes.
#[derive(Clone)]
pub struct ProvisionerHandlers {
    queue: RateLimitingQueue<Item>,
    claims: Indexer<PersistentVolumeClaim>,
}

impl std::fmt::Debug for ProvisionerHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvisionerHandlers")
            .finish_non_exhaustive()
    }
}

fn key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

impl ProvisionerHandlers {
    fn claim(&self, claim: &PersistentVolumeClaim) {
        self.queue.add(Item::Claim(key(&claim.metadata)));
    }

    fn pod(&self, pod: &Pod) {
        let scheduled = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if !scheduled {
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        for claim in claim_names(pod) {
            self.queue.add(Item::Claim(format!("{namespace}/{claim}")));
        }
    }
}

/// The claims `pod` mounts: those its `persistentVolumeClaim` volumes name, and
/// `<pod>-<volume>` for each generic ephemeral volume (the claim the ephemeral volume
/// controller makes for it).
fn claim_names(pod: &Pod) -> Vec<String> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|volume| {
            if let Some(claim) = &volume.persistent_volume_claim {
                Some(claim.claim_name.clone())
            } else if volume.ephemeral.is_some() {
                Some(format!("{pod_name}-{}", volume.name))
            } else {
                None
            }
        })
        .collect()
}

/// Whether `pod` mounts `claim`: a `persistentVolumeClaim` volume names it, or it is the claim
/// of one of the pod's generic ephemeral volumes and the pod controls it (as kube-scheduler
/// checks with `ephemeral.VolumeIsForPod`).
fn pod_mounts(pod: &Pod, claim: &PersistentVolumeClaim) -> bool {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let controlled_by_pod = || {
        claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == pod.metadata.uid.as_ref())
    };
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|volume| {
            volume
                .persistent_volume_claim
                .as_ref()
                .is_some_and(|c| c.claim_name == name)
                || (volume.ephemeral.is_some()
                    && format!("{pod_name}-{}", volume.name) == name
                    && controlled_by_pod())
        })
}

impl ResourceEventHandler<PersistentVolumeClaim> for ProvisionerHandlers {
    fn on_add(&self, claim: Arc<PersistentVolumeClaim>, _initial: bool) {
        self.claim(&claim);
    }
    fn on_update(&self, _old: Arc<PersistentVolumeClaim>, new: Arc<PersistentVolumeClaim>) {
        self.claim(&new);
    }
    fn on_delete(&self, obj: DeletedObject<PersistentVolumeClaim>) {
        if let Some(volume) = obj
            .object()
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
        {
            self.queue.add(Item::Volume(volume));
        }
    }
}

impl ResourceEventHandler<Pod> for ProvisionerHandlers {
    fn on_add(&self, pod: Arc<Pod>, _initial: bool) {
        self.pod(&pod);
    }
    fn on_update(&self, old: Arc<Pod>, new: Arc<Pod>) {
        let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
        if node(&old) != node(&new) {
            self.pod(&new);
        }
    }
    fn on_delete(&self, _obj: DeletedObject<Pod>) {}
}

impl ResourceEventHandler<StorageClass> for ProvisionerHandlers {
    fn on_add(&self, _class: Arc<StorageClass>, _initial: bool) {
        for claim in self.claims.list() {
            self.claim(&claim);
        }
    }
    fn on_update(&self, _old: Arc<StorageClass>, _new: Arc<StorageClass>) {}
    fn on_delete(&self, _obj: DeletedObject<StorageClass>) {}
}

/// The PV the provisioner makes for `claim` of `class`, named `name`, pinned to `node` when
/// given.
pub fn new_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
    name: &str,
) -> PersistentVolume {
    let spec = claim.spec.clone().unwrap_or_default();
    let request = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage").cloned())
        .unwrap_or_else(|| Quantity("1Gi".to_owned()));
    let node_affinity = node.map(|node| VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "kubernetes.io/hostname".to_owned(),
                    operator: "In".to_owned(),
                    values: Some(vec![node.to_owned()]),
                }]),
                match_fields: None,
            }],
        }),
    });
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(BTreeMap::from([(
                PROVISIONED_BY_ANNOTATION.to_owned(),
                PROVISIONER.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_owned(), request)])),
            access_modes: spec
                .access_modes
                .clone()
                .filter(|m| !m.is_empty())
                .or_else(|| Some(vec!["ReadWriteOnce".to_owned()])),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("PersistentVolumeClaim".to_owned()),
                namespace: claim.metadata.namespace.clone(),
                name: claim.metadata.name.clone(),
                uid: claim.metadata.uid.clone(),
                resource_version: claim.metadata.resource_version.clone(),
                ..ObjectReference::default()
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".to_owned()),
            ),
            storage_class_name: class.metadata.name.clone(),
            volume_mode: spec
                .volume_mode
                .clone()
                .or_else(|| Some("Filesystem".to_owned())),
            host_path: Some(HostPathVolumeSource {
                path: format!("{HOST_PATH_ROOT}/{name}"),
                type_: Some("DirectoryOrCreate".to_owned()),
            }),
            node_affinity,
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}

impl Provisioner {
    /// A provisioner over the factory's claim, volume, class and pod informers.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(factory: &SharedInformerFactory, client: Arc<dyn VolumeClient>) -> Self {
        let claims = factory.informer_for::<PersistentVolumeClaim>();
        let volumes = factory.informer_for::<PersistentVolume>();
        let classes = factory.informer_for::<StorageClass>();
        let pods = factory.pods();
        let caches = StorageCaches {
            claims: claims.indexer().clone(),
            volumes: volumes.indexer().clone(),
            classes: classes.indexer().clone(),
            pods: pods.indexer().clone(),
        };
        let mut provisioner = Self::with_caches(caches, client);
        let handlers = provisioner.handlers();
        for err in [
            claims
                .add_event_handler_with_resync_period(handlers.clone(), NO_RESYNC)
                .err(),
            pods.add_event_handler_with_resync_period(handlers.clone(), NO_RESYNC)
                .err(),
            classes
                .add_event_handler_with_resync_period(handlers, NO_RESYNC)
                .err(),
        ]
        .into_iter()
        .flatten()
        {
            tracing::error!(%err, "registering a provisioner event handler");
        }
        provisioner.synced = vec![
            Arc::new(move || claims.has_synced()),
            Arc::new(move || volumes.has_synced()),
            Arc::new(move || classes.has_synced()),
            Arc::new(move || pods.has_synced()),
        ];
        provisioner
    }

    /// A provisioner over bare caches (tests fill them and call [`Self::sync`]).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(caches: StorageCaches, client: Arc<dyn VolumeClient>) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: "sim-provisioner".to_owned(),
                metrics: None,
            },
        );
        Self {
            client,
            caches,
            queue,
            synced: Vec::new(),
        }
    }

    /// The event handlers (registered by [`Self::new`]).
    pub fn handlers(&self) -> ProvisionerHandlers {
        ProvisionerHandlers {
            queue: self.queue.clone(),
            claims: self.caches.claims.clone(),
        }
    }

    /// Creates `class` if missing, waits for the caches, then binds claims until `cancel`.
    pub async fn run(self: Arc<Self>, class: Option<StorageClass>, cancel: CancellationToken) {
        if let Some(class) = class {
            // The class may not be servable yet (an API server without storage.k8s.io):
            // retry a few times, then carry on without it.
            for attempt in 0..10u32 {
                match self.client.ensure_storage_class(&class).await {
                    Ok(()) => break,
                    Err(err) => {
                        tracing::warn!(%err, attempt, "creating the default StorageClass");
                        tokio::select! {
                            _ = cancel.cancelled() => return,
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                }
            }
        }
        if !wait_until_synced("sim-provisioner", &cancel, || {
            self.synced.iter().all(|s| s())
        })
        .await
        {
            self.queue.shut_down();
            return;
        }
        let this = Arc::clone(&self);
        let sync = move |item: Item| {
            let this = Arc::clone(&this);
            async move { this.sync(&item).await }
        };
        run_workers(
            "sim-provisioner",
            &self.queue,
            ErrorPolicy::new("provisioning failed"),
            WORKERS,
            &cancel,
            sync,
        )
        .await;
    }

    /// One unit of work.
    pub async fn sync(&self, item: &Item) -> Result<(), Error> {
        match item {
            Item::Claim(key) => self.sync_claim(key).await,
            Item::Volume(name) => self.sync_volume(name).await,
        }
    }

    /// The node a `WaitForFirstConsumer` claim goes to: its selected-node annotation, or the
    /// node of a scheduled pod that uses it (directly or as a generic ephemeral volume).
    fn consumer_node(&self, claim: &PersistentVolumeClaim) -> Option<String> {
        if let Some(node) = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SELECTED_NODE_ANNOTATION))
        {
            return Some(node.clone());
        }
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        self.caches
            .pods
            .list()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .filter(|p| pod_mounts(p, claim))
            .find_map(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .filter(|n| !n.is_empty())
            })
    }

    async fn sync_claim(&self, key: &str) -> Result<(), Error> {
        let Some(claim) = self.caches.claims.get_by_key(key) else {
            return Ok(());
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let volume_name = claim.spec.as_ref().and_then(|s| s.volume_name.clone());
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        if volume_name.is_some() && phase == Some("Bound") {
            return Ok(());
        }
        let classes = self.caches.classes.list();
        let Some(class) = class_of(&claim, &classes) else {
            return Ok(());
        };
        if class.provisioner != PROVISIONER {
            return Ok(());
        }
        let node = if binding_mode(class) == WAIT_FOR_FIRST_CONSUMER {
            match self.consumer_node(&claim) {
                Some(node) => Some(node),
                // Waits for a pod using the claim to be scheduled.
                None => return Ok(()),
            }
        } else {
            None
        };
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let pv_name = volume_name.unwrap_or_else(|| format!("pvc-{uid}"));
        let api = |step: &'static str, object: String| {
            move |source| Error::Api {
                step,
                object,
                source,
            }
        };

        let volume = match self.caches.volumes.get_by_key(&pv_name) {
            Some(existing) => (*existing).clone(),
            None => {
                let volume = new_volume(&claim, class, node.as_deref(), &pv_name);
                match self.client.create_volume(&volume).await {
                    Ok(created) => created,
                    // Made by an earlier pass whose watch event has not arrived yet.
                    Err(err) if err.is_already_exists() => volume,
                    Err(err) => return Err(api("creating volume", pv_name.clone())(err)),
                }
            }
        };
        if volume.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
            let mut bound = volume.clone();
            bound.status = Some(PersistentVolumeStatus {
                phase: Some("Bound".to_owned()),
                ..PersistentVolumeStatus::default()
            });
            self.client
                .update_volume_status(&bound)
                .await
                .map_err(api("binding volume", pv_name.clone()))?;
        }

        let mut updated = (*claim).clone();
        if updated
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_ref())
            .is_none()
        {
            updated
                .spec
                .get_or_insert_with(Default::default)
                .volume_name = Some(pv_name.clone());
            let annotations = updated
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new);
            for (k, v) in [
                ("pv.kubernetes.io/bind-completed", "yes"),
                ("pv.kubernetes.io/bound-by-controller", "yes"),
                ("volume.kubernetes.io/storage-provisioner", PROVISIONER),
                ("volume.beta.kubernetes.io/storage-provisioner", PROVISIONER),
            ] {
                annotations.insert(k.to_owned(), v.to_owned());
            }
            if let Some(node) = &node {
                annotations.insert(SELECTED_NODE_ANNOTATION.to_owned(), node.clone());
            }
            updated = self
                .client
                .update_claim(&updated)
                .await
                .map_err(api("binding claim", key.to_owned()))?;
        }
        let volume_spec = volume.spec.clone().unwrap_or_default();
        updated.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Bound".to_owned()),
            access_modes: volume_spec.access_modes,
            capacity: volume_spec.capacity,
            ..PersistentVolumeClaimStatus::default()
        });
        self.client
            .update_claim_status(&updated)
            .await
            .map_err(api("marking claim bound", key.to_owned()))?;
        tracing::info!(claim = key, volume = %pv_name, node = ?node, "provisioned and bound");
        Ok(())
    }

    /// Releases a volume this provisioner made whose claim is gone, and deletes it when its
    /// reclaim policy is `Delete` (the PV controller's reclaim, simulated). The volume is
    /// marked `Released` first, as the PV controller does: the PV protection controller lets a
    /// deleted volume go only once it is no longer `Bound`.
    async fn sync_volume(&self, name: &str) -> Result<(), Error> {
        let Some(volume) = self.caches.volumes.get_by_key(name) else {
            return Ok(());
        };
        let ours = volume
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PROVISIONED_BY_ANNOTATION))
            .is_some_and(|p| p == PROVISIONER);
        let spec = volume.spec.clone().unwrap_or_default();
        if !ours {
            return Ok(());
        }
        let claim_ref = spec.claim_ref.unwrap_or_default();
        let claim_key = format!(
            "{}/{}",
            claim_ref.namespace.unwrap_or_default(),
            claim_ref.name.unwrap_or_default()
        );
        let claim_alive = self
            .caches
            .claims
            .get_by_key(&claim_key)
            .is_some_and(|c| c.metadata.uid == claim_ref.uid);
        if claim_alive {
            return Ok(());
        }
        if volume.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Released") {
            let mut released = (*volume).clone();
            released.status.get_or_insert_default().phase = Some("Released".to_owned());
            self.client
                .update_volume_status(&released)
                .await
                .map_err(|source| Error::Api {
                    step: "releasing volume",
                    object: name.to_owned(),
                    source,
                })?;
        }
        if spec.persistent_volume_reclaim_policy.as_deref() != Some("Delete") {
            return Ok(());
        }
        self.client
            .delete_volume(name)
            .await
            .map_err(|source| Error::Api {
                step: "deleting volume",
                object: name.to_owned(),
                source,
            })
    }
}

#[cfg(test)]
#[path = "provisioner_tests.rs"]
mod tests;
