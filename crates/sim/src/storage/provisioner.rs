//! The simulated external provisioner of [`PROVISIONER`] classes, as kubernetes-csi/external-provisioner behaves.
//!
//! The PV controller (`persistentvolume-binder-controller`) binds claims and volumes and asks
//! for provisioning by annotating a claim `volume.kubernetes.io/storage-provisioner:
//! <provisioner>`. For each claim so annotated with [`PROVISIONER`]
//! (of a `WaitForFirstConsumer` class only once `volume.kubernetes.io/selected-node` is set),
//! this creates PV `pvc-<claim uid>`: the claim's request as capacity, its access modes and
//! volume mode, a `claimRef` to it (the PV controller then completes the binding),
//! `pv.kubernetes.io/provisioned-by`, the class's reclaim policy (with
//! `external-provisioner.volume.kubernetes.io/finalizer` when it is `Delete`), a CSI source of
//! the simulated driver ([`CSI_DRIVER`], volume handle the PV's
//! name: so the attach/detach controller attaches it), and node affinity to the selected node. A volume it provisioned that the PV controller marked
//! `Released` is deleted when its policy is `Delete`, and loses the finalizer.
//!
//! The simulated scheduler's volume binding (`crate::scheduler::volumes`), as kube-scheduler's,
//! sets `selected-node` on the unbound delayed-binding claims of a pod it schedules, or binds
//! them to existing volumes on the node.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::controller::api_status::ApiStatus;
use kcm_machinery::controller::{ErrorPolicy, run_controller};
use kcm_machinery::informer::{
    DeletedObject, Indexer, ResourceEventHandler, SharedInformerFactory,
};
use kcm_machinery::storage::volume::claim_reference;
use kcm_machinery::workqueue::{QueueConfig, RateLimitingQueue, default_controller_rate_limiter};
use tokio_util::sync::CancellationToken;

use super::attacher::CSI_DRIVER;
use super::class::{PROVISIONER, WAIT_FOR_FIRST_CONSUMER, binding_mode};
use super::client::VolumeClient;
use super::{Synced, watch};

/// The deprecated beta spelling of [`STORAGE_PROVISIONER_ANNOTATION`].
pub use kcm_machinery::storage::volume::ANN_BETA_STORAGE_PROVISIONER as BETA_STORAGE_PROVISIONER_ANNOTATION;
/// The annotation a provisioner stamps on the PVs it made.
pub use kcm_machinery::storage::volume::ANN_DYNAMICALLY_PROVISIONED as PROVISIONED_BY_ANNOTATION;
/// The annotation naming the node a `WaitForFirstConsumer` claim is provisioned on (set by
/// the scheduler's volume binding).
pub use kcm_machinery::storage::volume::ANN_SELECTED_NODE as SELECTED_NODE_ANNOTATION;
/// The annotation by which the PV controller asks a provisioner for a claim's volume.
pub use kcm_machinery::storage::volume::ANN_STORAGE_PROVISIONER as STORAGE_PROVISIONER_ANNOTATION;
/// The finalizer an external provisioner keeps on the `Delete` volumes it made until it has
/// deleted their storage.
pub const PROVISIONER_FINALIZER: &str = "external-provisioner.volume.kubernetes.io/finalizer";
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
}

/// The simulated provisioner and binder.
pub struct Provisioner {
    client: Arc<dyn VolumeClient>,
    caches: StorageCaches,
    queue: RateLimitingQueue<Item>,
    synced: Vec<Synced>,
}

impl std::fmt::Debug for Provisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provisioner").finish_non_exhaustive()
    }
}

/// The event handlers: claims and classes enqueue claims; deleted claims enqueue
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

impl ResourceEventHandler<PersistentVolume> for ProvisionerHandlers {
    fn on_add(&self, volume: Arc<PersistentVolume>, _initial: bool) {
        self.queue.add(Item::Volume(
            volume.metadata.name.clone().unwrap_or_default(),
        ));
    }
    fn on_update(&self, _old: Arc<PersistentVolume>, new: Arc<PersistentVolume>) {
        self.queue
            .add(Item::Volume(new.metadata.name.clone().unwrap_or_default()));
    }
    fn on_delete(&self, _obj: DeletedObject<PersistentVolume>) {}
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
    let reclaim_policy = class
        .reclaim_policy
        .clone()
        .unwrap_or_else(|| "Delete".to_owned());
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
            finalizers: (reclaim_policy == "Delete")
                .then(|| vec![PROVISIONER_FINALIZER.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_owned(), request)])),
            access_modes: spec
                .access_modes
                .clone()
                .filter(|m| !m.is_empty())
                .or_else(|| Some(vec!["ReadWriteOnce".to_owned()])),
            claim_ref: Some(claim_reference(claim)),
            persistent_volume_reclaim_policy: Some(reclaim_policy),
            storage_class_name: class.metadata.name.clone(),
            volume_mode: spec
                .volume_mode
                .clone()
                .or_else(|| Some("Filesystem".to_owned())),
            csi: Some(CSIPersistentVolumeSource {
                driver: CSI_DRIVER.to_owned(),
                volume_handle: name.to_owned(),
                ..CSIPersistentVolumeSource::default()
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
        let caches = StorageCaches {
            claims: claims.indexer().clone(),
            volumes: volumes.indexer().clone(),
            classes: classes.indexer().clone(),
        };
        let mut provisioner = Self::with_caches(caches, client);
        let handlers = provisioner.handlers();
        provisioner.synced = vec![
            watch("provisioner", &claims, handlers.clone()),
            watch("provisioner", &volumes, handlers.clone()),
            watch("provisioner", &classes, handlers),
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
        // The class may not be servable yet (an API server without storage.k8s.io): retried a
        // few times, then the provisioner carries on without it.
        if let Some(class) = class
            && !super::ensure_with_retries("the default StorageClass", &cancel, || {
                self.client.ensure_storage_class(&class)
            })
            .await
        {
            return;
        }
        let this = Arc::clone(&self);
        let sync = move |item: Item| {
            let this = Arc::clone(&this);
            async move { this.sync(&item).await }
        };
        run_controller(
            "sim-provisioner",
            "the simulated provisioner",
            &self.queue,
            ErrorPolicy::new("provisioning failed"),
            WORKERS,
            &cancel,
            || self.synced.iter().all(|s| s()),
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

    async fn sync_claim(&self, key: &str) -> Result<(), Error> {
        let Some(claim) = self.caches.claims.get_by_key(key) else {
            return Ok(());
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let spec = claim.spec.clone().unwrap_or_default();
        if spec.volume_name.as_deref().is_some_and(|v| !v.is_empty()) {
            // Bound, or pre-bound by the user: nothing to provision.
            return Ok(());
        }
        let Some(class_name) = spec.storage_class_name.as_deref().filter(|c| !c.is_empty()) else {
            return Ok(());
        };
        let Some(class) = self.caches.classes.get_by_key(class_name) else {
            return Ok(());
        };
        let annotations = claim.metadata.annotations.clone().unwrap_or_default();
        let mut node = annotations.get(SELECTED_NODE_ANNOTATION).cloned();
        let delayed = binding_mode(&class) == WAIT_FOR_FIRST_CONSUMER;
        if delayed && node.is_none() {
            // The scheduler selects the node once a pod using the claim is scheduled.
            return Ok(());
        }
        if !delayed {
            node = None;
        }
        let asked = [
            STORAGE_PROVISIONER_ANNOTATION,
            BETA_STORAGE_PROVISIONER_ANNOTATION,
        ]
        .iter()
        .any(|a| annotations.get(*a).is_some_and(|p| p == PROVISIONER));
        if !asked || class.provisioner != PROVISIONER {
            return Ok(());
        }
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let pv_name = format!("pvc-{uid}");
        if self.caches.volumes.get_by_key(&pv_name).is_some() {
            return Ok(());
        }
        let volume = new_volume(&claim, &class, node.as_deref(), &pv_name);
        match self.client.create_volume(&volume).await {
            Ok(_) => {
                tracing::info!(claim = key, volume = %pv_name, node = ?node, "provisioned volume");
                Ok(())
            }
            // Made by an earlier pass whose watch event has not arrived yet.
            Err(err) if err.is_already_exists() => Ok(()),
            Err(source) => Err(Error::Api {
                step: "creating volume",
                object: pv_name,
                source,
            }),
        }
    }

    /// Deletes a volume this provisioner made once the PV controller marked it `Released`, if
    /// its reclaim policy is `Delete`, then drops the provisioner's finalizer, as
    /// external-provisioner's `deleteVolumeOperation`.
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
        let released = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
        if !ours || !released || spec.persistent_volume_reclaim_policy.as_deref() != Some("Delete")
        {
            return Ok(());
        }
        let api = |step: &'static str| {
            move |source| Error::Api {
                step,
                object: name.to_owned(),
                source,
            }
        };
        // The finalizer goes first: the copy in the cache is the one before the deletion.
        let has_finalizer = volume
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == PROVISIONER_FINALIZER);
        if has_finalizer {
            let mut updated = (*volume).clone();
            if let Some(finalizers) = updated.metadata.finalizers.as_mut() {
                finalizers.retain(|f| f != PROVISIONER_FINALIZER);
            }
            match self.client.update_volume(&updated).await {
                Ok(_) => {}
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(api("removing the provisioner finalizer of volume")(err)),
            }
        }
        if volume.metadata.deletion_timestamp.is_none() {
            self.client
                .delete_volume(name)
                .await
                .map_err(api("deleting volume"))?;
        }
        tracing::info!(volume = name, "deleted released volume");
        Ok(())
    }
}

#[cfg(test)]
#[path = "provisioner_tests.rs"]
mod tests;
