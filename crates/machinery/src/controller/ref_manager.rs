//! The controller-ref manager: claiming the objects a controller selects, adopting orphans and releasing strays.
//!
//! A sync pass lists every candidate (all active pods of the namespace, say) and *claims* them:
//! objects it already controls and still selects are kept; orphans it selects are adopted by a
//! patch that sets its controller reference (with the object's uid as a precondition, so a
//! recreated namespace/name is never adopted by mistake); objects it controls but no longer
//! selects are released by a strategic-merge patch deleting its reference. Objects controlled
//! by someone else are never touched. A controller being deleted adopts and releases nothing.
//!
//! Before the first adoption of a pass, an uncached check (usually a fresh GET of the owner,
//! see [`recheck_owner`]) makes sure the owner still exists with the same uid and is not being
//! deleted; it runs at most once per [`ControllerRefManager`], so build one per sync pass.
//! Semantics follow kubernetes `pkg/controller/controller_ref_manager.go`.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::future::BoxFuture;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{GroupVersionKind, Status};
use serde_json::{Value, json};

use crate::controller::api_status::ApiStatus;
use crate::controller::controller_ref::get_controller_of;
use crate::controller::pod_control::{self, PodControl, RecordedPatch};
use crate::labels::Selector;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a claim, adoption or release failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The uncached lookup of the owner failed.
    #[error("can't recheck DeletionTimestamp of {kind} {namespace}/{name}: {source}")]
    Recheck {
        /// The owner's kind.
        kind: String,
        /// The owner's namespace.
        namespace: String,
        /// The owner's name.
        name: String,
        /// The lookup error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The owner was deleted and recreated under the same name since the cache saw it.
    #[error(
        "can't recheck DeletionTimestamp: original {kind} {namespace}/{name} is gone: got uid {got}, wanted {wanted}"
    )]
    OwnerReplaced {
        /// The owner's kind.
        kind: String,
        /// The owner's namespace.
        namespace: String,
        /// The owner's name.
        name: String,
        /// The uid the server has now.
        got: String,
        /// The uid the controller acts for.
        wanted: String,
    },
    /// The owner is being deleted: it must not adopt anything.
    #[error("{namespace}/{name} has just been deleted at {deleted_at}")]
    OwnerDeleted {
        /// The owner's namespace.
        namespace: String,
        /// The owner's name.
        name: String,
        /// Its deletionTimestamp.
        deleted_at: jiff::Timestamp,
    },
    /// An earlier can-adopt check of this pass was interrupted before it finished.
    #[error("the can-adopt check of this claim pass was interrupted")]
    CanAdoptInterrupted,
    /// The can-adopt check refused this pass's adoptions.
    #[error("can't adopt {kind} {namespace}/{name} ({uid}): {source}")]
    CannotAdopt {
        /// The object's kind.
        kind: String,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The object's uid.
        uid: String,
        /// Why the owner may not adopt (shared by every adoption of the pass).
        #[source]
        source: Arc<Error>,
    },
    /// The adoption patch failed.
    #[error("adopting {kind} {namespace}/{name}: {source}")]
    Adopt {
        /// The object's kind.
        kind: String,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The server's status, when the patch reached it.
        status: Option<Box<Status>>,
        /// The patch error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The release patch failed (other than NotFound or Invalid, which are ignored).
    #[error("releasing {kind} {namespace}/{name}: {source}")]
    Release {
        /// The object's kind.
        kind: String,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The server's status, when the patch reached it.
        status: Option<Box<Status>>,
        /// The patch error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Several objects failed in one claim pass, as apimachinery's `NewAggregate`.
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<Error>),
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::Adopt { status, .. } | Error::Release { status, .. } => status.as_deref(),
            _ => None,
        }
    }
}

/// Turns a list of errors into one, as apimachinery's `NewAggregate`: none is `Ok`, one is
/// itself, more are [`Error::Aggregate`].
fn aggregate(mut errors: Vec<Error>) -> Result<()> {
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(Error::Aggregate(errors)),
    }
}

/// Writes patches to the owned objects of one kind: the seam the ref manager acts through
/// (upstream's `PodControlInterface.PatchPod`, `RSControlInterface.PatchReplicaSet`).
#[async_trait]
pub trait ObjectPatcher: Send + Sync {
    /// The patch error; its [`ApiStatus`] tells NotFound and Invalid apart.
    type Error: std::error::Error + ApiStatus + Send + Sync + 'static;

    /// Applies `patch` to object `name` in `namespace`.
    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), Self::Error>;
}

#[async_trait]
impl<T: ObjectPatcher + ?Sized> ObjectPatcher for Arc<T> {
    type Error = T::Error;

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), Self::Error> {
        (**self).patch(namespace, name, patch).await
    }
}

/// Patches pods through a [`PodControl`] (so a [`pod_control::FakePodControl`] records them).
#[derive(Clone)]
pub struct PodPatcher(pub Arc<dyn PodControl>);

#[async_trait]
impl ObjectPatcher for PodPatcher {
    type Error = pod_control::Error;

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), Self::Error> {
        self.0.patch_pod(namespace, name, patch).await
    }
}

/// Patches namespaced objects of kind `K` straight through the API, as upstream's
/// `RealRSControl.PatchReplicaSet` does for ReplicaSets.
pub struct ApiPatcher<K> {
    /// The API client.
    client: kube::Client,
    _kind: PhantomData<fn() -> K>,
}

impl<K> ApiPatcher<K> {
    /// A patcher through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            _kind: PhantomData,
        }
    }
}

impl<K> Clone for ApiPatcher<K> {
    fn clone(&self) -> Self {
        Self::new(self.client.clone())
    }
}

#[async_trait]
impl<K> ObjectPatcher for ApiPatcher<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    type Error = kube::Error;

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), Self::Error> {
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        api.patch(name, &PatchParams::default(), patch)
            .await
            .map(drop)
    }
}

/// An [`ObjectPatcher`] that records patches and can fail them with an injected status, for
/// tests of controllers owning kinds other than pods (use [`pod_control::FakePodControl`] for
/// pods).
#[derive(Debug, Default)]
pub struct FakePatcher {
    /// Recorded patches and the status every patch fails with, if any.
    state: Mutex<(Vec<RecordedPatch>, Option<Status>)>,
}

impl FakePatcher {
    /// A patcher that accepts every patch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes later patches fail with `status` (after being recorded), or succeed with `None`.
    pub fn set_error(&self, status: Option<Status>) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = status;
    }

    /// Every patch so far, in call order.
    pub fn patches(&self) -> Vec<RecordedPatch> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }
}

#[async_trait]
impl ObjectPatcher for FakePatcher {
    type Error = kube::Error;

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), Self::Error> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0.push(RecordedPatch {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            patch: patch.clone(),
        });
        match &state.1 {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(()),
        }
    }
}

/// The uncached "may this owner adopt?" check run before the first adoption of a pass.
pub type CanAdoptFn = Box<dyn FnOnce() -> BoxFuture<'static, Result<()>> + Send>;

/// A can-adopt check that fetches the owner afresh with `get` and refuses adoption when its uid
/// changed (deleted and recreated) or it has a deletionTimestamp, as the ReplicaSet controller's
/// getter wrapped in upstream's `RecheckDeletionTimestamp`.
pub fn recheck_owner<K, F, Fut, E>(owner: &K, get: F) -> CanAdoptFn
where
    K: Resource<DynamicType = ()>,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = std::result::Result<K, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let kind = K::kind(&()).into_owned();
    let meta = owner.meta();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let wanted = meta.uid.clone().unwrap_or_default();
    Box::new(move || {
        Box::pin(async move {
            let fresh = get().await.map_err(|e| Error::Recheck {
                kind: kind.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
                source: Box::new(e),
            })?;
            let fresh = fresh.meta();
            let got = fresh.uid.clone().unwrap_or_default();
            if got != wanted {
                return Err(Error::OwnerReplaced {
                    kind,
                    namespace,
                    name,
                    got,
                    wanted,
                });
            }
            if let Some(deleted_at) = &fresh.deletion_timestamp {
                return Err(Error::OwnerDeleted {
                    namespace: fresh.namespace.clone().unwrap_or_default(),
                    name: fresh.name.clone().unwrap_or_default(),
                    deleted_at: deleted_at.0,
                });
            }
            Ok(())
        })
    })
}

/// Where the can-adopt check of one pass stands.
enum CheckState {
    /// No check was configured: adoption is always allowed.
    None,
    /// Not run yet.
    Pending(CanAdoptFn),
    /// Taken by the (single) run; if that run was cancelled, later callers fail safe.
    Taken,
}

/// Runs the can-adopt check at most once and shares its outcome, as upstream's
/// `canAdoptOnce sync.Once`.
struct CanAdoptOnce {
    /// The check, until it is taken. Locked only to take it, never across an await.
    check: Mutex<CheckState>,
    /// The outcome, set once.
    result: tokio::sync::OnceCell<Result<(), Arc<Error>>>,
}

impl CanAdoptOnce {
    fn new(check: Option<CanAdoptFn>) -> Self {
        Self {
            check: Mutex::new(check.map_or(CheckState::None, CheckState::Pending)),
            result: tokio::sync::OnceCell::new(),
        }
    }

    async fn get(&self) -> Result<(), Arc<Error>> {
        self.result
            .get_or_init(|| async {
                let state = std::mem::replace(
                    &mut *self.check.lock().unwrap_or_else(PoisonError::into_inner),
                    CheckState::Taken,
                );
                match state {
                    CheckState::None => Ok(()),
                    CheckState::Pending(check) => check().await.map_err(Arc::new),
                    CheckState::Taken => Err(Arc::new(Error::CanAdoptInterrupted)),
                }
            })
            .await
            .clone()
    }
}

/// What a claim pass does with one object (upstream `ClaimObject`'s branches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimAction {
    /// Already ours and still selected: claimed with no write.
    Keep,
    /// Not ours to touch (owned by another controller, not selected, being deleted, in another
    /// namespace, or we are being deleted).
    Ignore,
    /// An orphan we select: adopt it.
    Adopt,
    /// Ours but no longer selected: release it.
    Release,
}

/// Claims objects of any kind for one controller during one sync pass, as upstream's
/// `BaseControllerRefManager` with its per-kind `Claim*`/`Adopt*`/`Release*` methods.
///
/// Build a new one per sync pass: the can-adopt check runs at most once per instance.
pub struct ControllerRefManager<P> {
    /// The owner's name.
    name: String,
    /// The owner's namespace; empty for a cluster-scoped owner (which may adopt anywhere).
    namespace: String,
    /// The owner's uid, as written in controller references.
    uid: String,
    /// True when the owner has a deletionTimestamp: no adoption, no release.
    being_deleted: bool,
    /// The owner's kind, for the references it writes.
    controller_kind: GroupVersionKind,
    /// Which objects the owner wants.
    selector: Selector,
    /// Where adoption and release patches go.
    patcher: P,
    /// Finalizers added on adoption and removed on release.
    finalizers: Vec<String>,
    /// The once-per-pass uncached check.
    can_adopt: CanAdoptOnce,
}

impl<P> std::fmt::Debug for ControllerRefManager<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerRefManager")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("uid", &self.uid)
            .field("kind", &self.controller_kind.kind)
            .field("selector", &self.selector.to_string())
            .finish_non_exhaustive()
    }
}

/// The object's kind name, for messages.
fn kind_of<K: Resource<DynamicType = ()>>() -> String {
    K::kind(&()).into_owned()
}

/// The strategic-merge patch that makes `controller_kind` object `owner_name`/`owner_uid` the
/// controller of the object with uid `object_uid` (a precondition: the patch fails if the uid
/// differs), adding `finalizers`, as upstream's `ownerRefControllerPatch`.
pub fn owner_ref_controller_patch(
    controller_kind: &GroupVersionKind,
    owner_name: &str,
    owner_uid: &str,
    object_uid: &str,
    finalizers: &[String],
) -> Value {
    let mut metadata = json!({
        "ownerReferences": [{
            "apiVersion": controller_kind.api_version(),
            "kind": controller_kind.kind,
            "name": owner_name,
            "uid": owner_uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }],
        "uid": object_uid,
    });
    if !finalizers.is_empty()
        && let Some(m) = metadata.as_object_mut()
    {
        m.insert("finalizers".into(), json!(finalizers));
    }
    json!({ "metadata": metadata })
}

/// The strategic-merge patch that deletes the owner references with `owner_uids` from the
/// object with uid `dependent_uid` (a precondition), removing `finalizers`, as upstream's
/// `GenerateDeleteOwnerRefStrategicMergeBytes`.
pub fn delete_owner_ref_patch(
    dependent_uid: &str,
    owner_uids: &[&str],
    finalizers: &[String],
) -> Value {
    let refs: Vec<Value> = owner_uids
        .iter()
        .map(|uid| json!({"$patch": "delete", "uid": uid}))
        .collect();
    let mut metadata = json!({ "uid": dependent_uid, "ownerReferences": refs });
    if !finalizers.is_empty()
        && let Some(m) = metadata.as_object_mut()
    {
        m.insert(
            "$deleteFromPrimitiveList/finalizers".into(),
            json!(finalizers),
        );
    }
    json!({ "metadata": metadata })
}

impl<P: ObjectPatcher> ControllerRefManager<P> {
    /// A manager for the owner described by `controller` (its name, namespace, uid and
    /// deletionTimestamp are copied) of kind `controller_kind`, selecting with `selector`,
    /// writing through `patcher`. `can_adopt` runs at most once, before the first adoption;
    /// `None` allows adoption unchecked.
    pub fn new(
        patcher: P,
        controller: &ObjectMeta,
        selector: Selector,
        controller_kind: GroupVersionKind,
        can_adopt: Option<CanAdoptFn>,
    ) -> Self {
        Self {
            name: controller.name.clone().unwrap_or_default(),
            namespace: controller.namespace.clone().unwrap_or_default(),
            uid: controller.uid.clone().unwrap_or_default(),
            being_deleted: controller.deletion_timestamp.is_some(),
            controller_kind,
            selector,
            patcher,
            finalizers: Vec::new(),
            can_adopt: CanAdoptOnce::new(can_adopt),
        }
    }

    /// Adds `finalizers` to adopted objects and removes them from released ones (the Job
    /// controller's tracking finalizer upstream).
    pub fn with_finalizers(mut self, finalizers: Vec<String>) -> Self {
        self.finalizers = finalizers;
        self
    }

    /// The patcher, e.g. to inspect a fake.
    pub fn patcher(&self) -> &P {
        &self.patcher
    }

    /// The outcome of the can-adopt check, running it on first use, as upstream's `CanAdopt`.
    pub async fn can_adopt(&self) -> Result<(), Arc<Error>> {
        self.can_adopt.get().await
    }

    /// Decides what a claim does with the object `meta`, as upstream's `ClaimObject` before it
    /// writes. `matches` (selector and filters) is evaluated only when the decision needs it.
    pub fn classify(&self, meta: &ObjectMeta, matches: impl FnOnce() -> bool) -> ClaimAction {
        if let Some(controller_ref) = get_controller_of(meta) {
            if controller_ref.uid != self.uid {
                return ClaimAction::Ignore;
            }
            if matches() {
                // Claiming what we own needs no write, so it is allowed even while deleting.
                return ClaimAction::Keep;
            }
            if self.being_deleted {
                return ClaimAction::Ignore;
            }
            return ClaimAction::Release;
        }
        if self.being_deleted || !matches() {
            return ClaimAction::Ignore;
        }
        if meta.deletion_timestamp.is_some() {
            return ClaimAction::Ignore;
        }
        if !self.namespace.is_empty() && Some(self.namespace.as_str()) != meta.namespace.as_deref()
        {
            return ClaimAction::Ignore;
        }
        ClaimAction::Adopt
    }

    /// Claims `objects`: keeps those already controlled and still selected (by the selector
    /// and `filter`), adopts selected orphans, releases controlled ones no longer selected,
    /// and returns the objects now controlled, in input order, as upstream's `ClaimPods` /
    /// `ClaimReplicaSets`.
    ///
    /// Objects that vanish (NotFound) are skipped. Other failures do not stop the pass; they
    /// are returned together (one error, or [`Error::Aggregate`]) and the controller should
    /// retry later.
    pub async fn claim<K, F>(&self, objects: &[Arc<K>], filter: F) -> Result<Vec<Arc<K>>>
    where
        K: Resource<DynamicType = ()> + Send + Sync,
        F: Fn(&K) -> bool + Sync,
    {
        let mut claimed = Vec::new();
        let mut errors = Vec::new();
        for object in objects {
            let meta = object.meta();
            let matches = || self.selector.matches_opt(meta.labels.as_ref()) && filter(object);
            match self.classify(meta, matches) {
                ClaimAction::Keep => claimed.push(Arc::clone(object)),
                ClaimAction::Ignore => {}
                ClaimAction::Adopt => match self.adopt(object.as_ref()).await {
                    Ok(()) => claimed.push(Arc::clone(object)),
                    Err(e) if e.is_not_found() => {}
                    Err(e) => errors.push(e),
                },
                ClaimAction::Release => match self.release(object.as_ref()).await {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => errors.push(e),
                },
            }
        }
        aggregate(errors)?;
        Ok(claimed)
    }

    /// Makes this owner the controller of `object` (after the can-adopt check), as upstream's
    /// `AdoptPod` / `AdoptReplicaSet`. A NotFound error means the object is gone.
    pub async fn adopt<K: Resource<DynamicType = ()>>(&self, object: &K) -> Result<()> {
        let meta = object.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        let uid = meta.uid.as_deref().unwrap_or_default();
        if let Err(source) = self.can_adopt().await {
            return Err(Error::CannotAdopt {
                kind: kind_of::<K>(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                uid: uid.to_owned(),
                source,
            });
        }
        let patch = owner_ref_controller_patch(
            &self.controller_kind,
            &self.name,
            &self.uid,
            uid,
            &self.finalizers,
        );
        self.patcher
            .patch(namespace, name, &Patch::Strategic(patch))
            .await
            .map_err(|e| Error::Adopt {
                kind: kind_of::<K>(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                status: e.api_status().cloned().map(Box::new),
                source: Box::new(e),
            })
    }

    /// Removes this owner's reference from `object`, as upstream's `ReleasePod` /
    /// `ReleaseReplicaSet`. NotFound (the object is gone) and Invalid (the object has no such
    /// reference, or its uid changed: it was deleted and recreated) are not errors.
    pub async fn release<K: Resource<DynamicType = ()>>(&self, object: &K) -> Result<()> {
        let meta = object.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        let uid = meta.uid.as_deref().unwrap_or_default();
        tracing::debug!(
            object = %format!("{namespace}/{name}"),
            kind = %kind_of::<K>(),
            owner = %format!("{}/{}:{}", self.controller_kind.api_version(), self.controller_kind.kind, self.name),
            "patching to remove controllerRef"
        );
        let patch = delete_owner_ref_patch(uid, &[self.uid.as_str()], &self.finalizers);
        match self
            .patcher
            .patch(namespace, name, &Patch::Strategic(patch))
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() || e.is_invalid() => Ok(()),
            Err(e) => Err(Error::Release {
                kind: kind_of::<K>(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                status: e.api_status().cloned().map(Box::new),
                source: Box::new(e),
            }),
        }
    }
}

/// The ref manager for pods, writing through a [`PodControl`], as upstream's
/// `PodControllerRefManager`.
pub type PodControllerRefManager = ControllerRefManager<PodPatcher>;

impl ControllerRefManager<PodPatcher> {
    /// A pod ref manager for `controller`, as upstream's `NewPodControllerRefManager`.
    pub fn for_pods(
        pod_control: Arc<dyn PodControl>,
        controller: &ObjectMeta,
        selector: Selector,
        controller_kind: GroupVersionKind,
        can_adopt: Option<CanAdoptFn>,
    ) -> Self {
        Self::new(
            PodPatcher(pod_control),
            controller,
            selector,
            controller_kind,
            can_adopt,
        )
    }

    /// Claims `pods` (see [`ControllerRefManager::claim`]); `filter` runs only on pods the
    /// selector matches, as upstream's `ClaimPods` filters.
    pub async fn claim_pods<F>(&self, pods: &[Arc<Pod>], filter: F) -> Result<Vec<Arc<Pod>>>
    where
        F: Fn(&Pod) -> bool + Sync,
    {
        self.claim(pods, filter).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::api_status;
    use crate::controller::controller_ref::new_controller_ref;
    use crate::controller::pod_control::FakePodControl;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kcm_testing::{MetaBuilder, meta};
    use std::sync::atomic::{AtomicUsize, Ordering};

    const CONTROLLER_UID: &str = "123";

    fn gvk() -> GroupVersionKind {
        GroupVersionKind::gvk("", "v1", "ReplicationController")
    }

    fn production() -> Selector {
        Selector::parse("type=production").expect("selector")
    }

    fn owner(uid: &str, namespace: &str) -> ObjectMeta {
        meta(&format!("rc-{uid}"))
            .namespace(namespace)
            .uid(uid)
            .build()
    }

    fn deleting(mut meta: ObjectMeta) -> ObjectMeta {
        meta.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        meta
    }

    /// Upstream's `newPod` in `controller_ref_manager_test.go`.
    fn new_pod(name: &str, label: &str, owner: Option<&ObjectMeta>) -> Arc<Pod> {
        let fake = GroupVersionKind::gvk("apps", "v1", "Fake");
        kcm_testing::pod(name)
            .namespace("default")
            .uid(format!("uid-{name}"))
            .label("type", label)
            .with(|p| {
                p.metadata.owner_references = owner.map(|o| vec![new_controller_ref(o, &fake)]);
            })
            .arc()
    }

    fn with<F: FnOnce(&mut Pod)>(pod: Arc<Pod>, f: F) -> Arc<Pod> {
        let mut pod = (*pod).clone();
        f(&mut pod);
        Arc::new(pod)
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    /// Upstream `TestClaimPods`.
    #[tokio::test]
    async fn claim_pods_table() {
        struct Case {
            name: &'static str,
            controller: ObjectMeta,
            finalizers: Vec<String>,
            pods: Vec<Arc<Pod>>,
            claimed: Vec<&'static str>,
            patches: usize,
        }
        let ctrl = owner(CONTROLLER_UID, "default");
        let other = owner("AAAAA", "default");
        let cases = vec![
            Case {
                name: "Claim pods with correct label",
                controller: ctrl.clone(),
                finalizers: vec![],
                pods: vec![
                    new_pod("pod1", "production", None),
                    new_pod("pod2", "testing", None),
                ],
                claimed: vec!["pod1"],
                patches: 1,
            },
            Case {
                name: "Controller marked for deletion can not claim pods",
                controller: deleting(ctrl.clone()),
                finalizers: vec![],
                pods: vec![
                    new_pod("pod1", "production", None),
                    new_pod("pod2", "production", None),
                ],
                claimed: vec![],
                patches: 0,
            },
            Case {
                name: "Controller marked for deletion can not claim new pods",
                controller: deleting(ctrl.clone()),
                finalizers: vec![],
                pods: vec![
                    new_pod("pod1", "production", Some(&ctrl)),
                    new_pod("pod2", "production", None),
                ],
                claimed: vec!["pod1"],
                patches: 0,
            },
            Case {
                name: "Controller can not claim pods owned by another controller",
                controller: ctrl.clone(),
                finalizers: vec![],
                pods: vec![
                    new_pod("pod1", "production", Some(&ctrl)),
                    new_pod("pod2", "production", Some(&other)),
                ],
                claimed: vec!["pod1"],
                patches: 0,
            },
            Case {
                name: "Controller releases claimed pods when selector doesn't match",
                controller: ctrl.clone(),
                finalizers: vec![],
                pods: vec![
                    new_pod("pod1", "production", Some(&ctrl)),
                    new_pod("pod2", "testing", Some(&ctrl)),
                ],
                claimed: vec!["pod1"],
                patches: 1,
            },
            Case {
                name: "Controller does not claim orphaned pods marked for deletion",
                controller: ctrl.clone(),
                finalizers: vec![],
                pods: vec![
                    with(new_pod("pod1", "production", Some(&ctrl)), |p| {
                        p.metadata = deleting(p.metadata.clone())
                    }),
                    with(new_pod("pod2", "production", None), |p| {
                        p.metadata = deleting(p.metadata.clone())
                    }),
                ],
                claimed: vec!["pod1"],
                patches: 0,
            },
            Case {
                name: "Controller claims or release pods according to selector with finalizers",
                controller: ctrl.clone(),
                finalizers: vec!["foo-finalizer".into(), "bar-finalizer".into()],
                pods: vec![
                    new_pod("pod1", "production", Some(&ctrl)),
                    new_pod("pod2", "testing", Some(&ctrl)),
                    new_pod("pod3", "production", None),
                ],
                claimed: vec!["pod1", "pod3"],
                patches: 2,
            },
            Case {
                name: "Controller does not claim pods of different namespace",
                controller: ctrl.clone(),
                finalizers: vec![],
                pods: vec![
                    new_pod("pod1", "production", None),
                    with(new_pod("pod2", "production", None), |p| {
                        p.metadata.namespace = Some("fakens".into())
                    }),
                ],
                claimed: vec!["pod1"],
                patches: 1,
            },
            Case {
                name: "Cluster scoped controller claims pods of specified namespace",
                controller: owner(CONTROLLER_UID, ""),
                finalizers: vec![],
                pods: vec![
                    new_pod("pod1", "production", None),
                    with(new_pod("pod2", "production", None), |p| {
                        p.metadata.namespace = Some("fakens".into())
                    }),
                ],
                claimed: vec!["pod1", "pod2"],
                patches: 2,
            },
        ];
        for case in cases {
            let fake = Arc::new(FakePodControl::new());
            let manager = PodControllerRefManager::for_pods(
                fake.clone(),
                &case.controller,
                production(),
                gvk(),
                None,
            )
            .with_finalizers(case.finalizers.clone());
            let claimed = manager
                .claim_pods(&case.pods, |_| true)
                .await
                .unwrap_or_else(|e| panic!("{}: unexpected error: {e}", case.name));
            assert_eq!(names(&claimed), case.claimed, "{}", case.name);
            let patches = fake.patches();
            assert_eq!(patches.len(), case.patches, "{}", case.name);
            for p in patches {
                let Patch::Strategic(body) = &p.patch else {
                    panic!("{}: not a strategic merge patch", case.name);
                };
                let text = body.to_string();
                assert!(
                    text.contains(CONTROLLER_UID),
                    "{}: patch lacks controller uid: {text}",
                    case.name
                );
                for f in &case.finalizers {
                    assert!(text.contains(f.as_str()), "{}: patch lacks {f}", case.name);
                }
            }
        }
    }

    #[tokio::test]
    async fn adoption_patch_sets_controller_ref_with_uid_precondition() {
        let fake = Arc::new(FakePodControl::new());
        let ctrl = owner(CONTROLLER_UID, "default");
        let manager =
            PodControllerRefManager::for_pods(fake.clone(), &ctrl, production(), gvk(), None);
        let orphan = new_pod("pod1", "production", None);
        manager
            .claim_pods(std::slice::from_ref(&orphan), |_| true)
            .await
            .expect("claim");
        let patches = fake.patches();
        assert_eq!(patches[0].name, "pod1");
        assert_eq!(patches[0].namespace, "default");
        assert_eq!(
            patches[0].patch,
            Patch::Strategic(json!({"metadata": {
                "ownerReferences": [{
                    "apiVersion": "v1",
                    "kind": "ReplicationController",
                    "name": "rc-123",
                    "uid": "123",
                    "controller": true,
                    "blockOwnerDeletion": true,
                }],
                "uid": "uid-pod1",
            }}))
        );
    }

    #[tokio::test]
    async fn release_patch_deletes_owner_ref_by_uid() {
        let fake = Arc::new(FakePodControl::new());
        let ctrl = owner(CONTROLLER_UID, "default");
        let manager =
            PodControllerRefManager::for_pods(fake.clone(), &ctrl, production(), gvk(), None);
        let stray = new_pod("pod2", "testing", Some(&ctrl));
        let claimed = manager.claim_pods(&[stray], |_| true).await.expect("claim");
        assert!(claimed.is_empty());
        assert_eq!(
            fake.patches()[0].patch,
            Patch::Strategic(json!({"metadata": {
                "ownerReferences": [{"$patch": "delete", "uid": "123"}],
                "uid": "uid-pod2",
            }}))
        );
    }

    /// Upstream `TestGeneratePatchBytesForDelete` (compared as JSON values).
    #[test]
    fn delete_owner_ref_patch_table() {
        struct Case {
            name: &'static str,
            owners: &'static [&'static str],
            dependent: &'static str,
            finalizers: &'static [&'static str],
            want: &'static str,
        }
        let cases = [
            Case {
                name: "check the structure of patch bytes",
                owners: &["ss1"],
                dependent: "ss2",
                finalizers: &[],
                want: r#"{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1"}]}}"#,
            },
            Case {
                name: "check if parent uid is escaped",
                owners: &[r#"ss1"hello"#],
                dependent: "ss2",
                finalizers: &[],
                want: r#"{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1\"hello"}]}}"#,
            },
            Case {
                name: "check if revision uid uid is escaped",
                owners: &["ss1"],
                dependent: r#"ss2"hello"#,
                finalizers: &[],
                want: r#"{"metadata":{"uid":"ss2\"hello","ownerReferences":[{"$patch":"delete","uid":"ss1"}]}}"#,
            },
            Case {
                name: "check the structure of patch bytes with multiple owners",
                owners: &["ss1", "ss2"],
                dependent: "ss2",
                finalizers: &[],
                want: r#"{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1"},{"$patch":"delete","uid":"ss2"}]}}"#,
            },
            Case {
                name: "check the structure of patch bytes with a finalizer and multiple owners",
                owners: &["ss1", "ss2"],
                dependent: "ss2",
                finalizers: &["f1"],
                want: r#"{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1"},{"$patch":"delete","uid":"ss2"}],"$deleteFromPrimitiveList/finalizers":["f1"]}}"#,
            },
        ];
        for case in cases {
            let finalizers: Vec<String> = case.finalizers.iter().map(|f| f.to_string()).collect();
            let got = delete_owner_ref_patch(case.dependent, case.owners, &finalizers);
            let want: Value = serde_json::from_str(case.want).expect("valid json");
            assert_eq!(got, want, "{}", case.name);
        }
    }

    #[tokio::test]
    async fn not_found_is_ignored_on_adopt_and_release() {
        let fake = Arc::new(FakePodControl::new());
        fake.set_error(Some(api_status::not_found("pods", "x")));
        let ctrl = owner(CONTROLLER_UID, "default");
        let manager =
            PodControllerRefManager::for_pods(fake.clone(), &ctrl, production(), gvk(), None);
        let pods = vec![
            new_pod("orphan", "production", None),
            new_pod("stray", "testing", Some(&ctrl)),
            new_pod("mine", "production", Some(&ctrl)),
        ];
        let claimed = manager.claim_pods(&pods, |_| true).await.expect("claim");
        assert_eq!(names(&claimed), vec!["mine"]);
        assert_eq!(fake.patches().len(), 2);
    }

    #[tokio::test]
    async fn invalid_is_ignored_on_release_but_not_on_adopt() {
        let fake = Arc::new(FakePodControl::new());
        fake.set_error(Some(api_status::invalid("pods", "x", "uid mismatch")));
        let ctrl = owner(CONTROLLER_UID, "default");
        let manager =
            PodControllerRefManager::for_pods(fake.clone(), &ctrl, production(), gvk(), None);
        let released = manager
            .claim_pods(&[new_pod("stray", "testing", Some(&ctrl))], |_| true)
            .await
            .expect("invalid on release is ignored");
        assert!(released.is_empty());
        let err = manager
            .claim_pods(&[new_pod("orphan", "production", None)], |_| true)
            .await
            .expect_err("invalid on adopt is an error");
        assert!(err.is_invalid(), "{err}");
        assert!(
            err.to_string().contains("adopting Pod default/orphan"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn other_errors_are_aggregated_and_the_pass_continues() {
        let fake = Arc::new(FakePodControl::new());
        fake.set_error(Some(api_status::internal_error("boom")));
        let ctrl = owner(CONTROLLER_UID, "default");
        let manager =
            PodControllerRefManager::for_pods(fake.clone(), &ctrl, production(), gvk(), None);
        let pods = vec![
            new_pod("a", "production", None),
            new_pod("b", "production", None),
        ];
        let err = manager
            .claim_pods(&pods, |_| true)
            .await
            .expect_err("errors");
        let Error::Aggregate(errors) = &err else {
            panic!("want an aggregate, got {err:?}");
        };
        assert_eq!(errors.len(), 2);
        assert!(
            err.to_string().starts_with("[adopting Pod default/a"),
            "{err}"
        );
        assert_eq!(
            fake.patches().len(),
            2,
            "the pass went on after the first error"
        );
    }

    #[tokio::test]
    async fn filters_only_narrow_the_selector() {
        let fake = Arc::new(FakePodControl::new());
        let ctrl = owner(CONTROLLER_UID, "default");
        let manager =
            PodControllerRefManager::for_pods(fake.clone(), &ctrl, production(), gvk(), None);
        let pods = vec![
            new_pod("keep", "production", None),
            new_pod("skip", "production", None),
            new_pod("other", "testing", None),
        ];
        let seen = Mutex::new(Vec::new());
        let claimed = manager
            .claim_pods(&pods, |p| {
                let name = p.metadata.name.clone().unwrap_or_default();
                seen.lock().expect("lock").push(name.clone());
                name != "skip"
            })
            .await
            .expect("claim");
        assert_eq!(names(&claimed), vec!["keep"]);
        assert_eq!(
            *seen.lock().expect("lock"),
            vec!["keep".to_owned(), "skip".to_owned()],
            "the filter never runs on pods the selector rejects"
        );
    }

    fn counting_check(calls: Arc<AtomicUsize>, outcome: fn() -> Result<()>) -> CanAdoptFn {
        Box::new(move || {
            Box::pin(async move {
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                outcome()
            })
        })
    }

    #[tokio::test]
    async fn can_adopt_runs_once_per_pass() {
        let calls = Arc::new(AtomicUsize::new(0));
        let fake = Arc::new(FakePodControl::new());
        let ctrl = owner(CONTROLLER_UID, "default");
        let manager = PodControllerRefManager::for_pods(
            fake.clone(),
            &ctrl,
            production(),
            gvk(),
            Some(counting_check(calls.clone(), || Ok(()))),
        );
        let pods: Vec<_> = (0..3)
            .map(|i| new_pod(&format!("orphan{i}"), "production", None))
            .collect();
        let claimed = manager.claim_pods(&pods, |_| true).await.expect("claim");
        assert_eq!(claimed.len(), 3);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // A second pass through the same manager reuses the outcome.
        manager.claim_pods(&pods, |_| true).await.expect("claim");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn can_adopt_is_not_run_without_adoptions() {
        let calls = Arc::new(AtomicUsize::new(0));
        let fake = Arc::new(FakePodControl::new());
        let ctrl = owner(CONTROLLER_UID, "default");
        let manager = PodControllerRefManager::for_pods(
            fake.clone(),
            &ctrl,
            production(),
            gvk(),
            Some(counting_check(calls.clone(), || Ok(()))),
        );
        let pods = vec![
            new_pod("mine", "production", Some(&ctrl)),
            new_pod("stray", "testing", Some(&ctrl)),
        ];
        manager.claim_pods(&pods, |_| true).await.expect("claim");
        assert_eq!(calls.load(Ordering::SeqCst), 0, "release needs no check");
    }

    #[tokio::test]
    async fn refused_can_adopt_fails_every_adoption_without_patching() {
        let calls = Arc::new(AtomicUsize::new(0));
        let fake = Arc::new(FakePodControl::new());
        let ctrl = owner(CONTROLLER_UID, "default");
        let manager = PodControllerRefManager::for_pods(
            fake.clone(),
            &ctrl,
            production(),
            gvk(),
            Some(counting_check(calls.clone(), || {
                Err(Error::OwnerDeleted {
                    namespace: "default".into(),
                    name: "rc-123".into(),
                    deleted_at: jiff::Timestamp::UNIX_EPOCH,
                })
            })),
        );
        let pods = vec![
            new_pod("a", "production", None),
            new_pod("b", "production", None),
            new_pod("mine", "production", Some(&ctrl)),
        ];
        let err = manager
            .claim_pods(&pods, |_| true)
            .await
            .expect_err("refused");
        assert!(fake.patches().is_empty());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let text = err.to_string();
        assert!(
            text.contains(
                "can't adopt Pod default/a (uid-a): default/rc-123 has just been deleted at"
            ),
            "{text}"
        );
    }

    fn replica_set(uid: &str, deleted: bool) -> ReplicaSet {
        let rs = kcm_testing::replica_set("web")
            .namespace("default")
            .uid(uid);
        if deleted {
            rs.deleted_at(jiff::Timestamp::UNIX_EPOCH).build()
        } else {
            rs.build()
        }
    }

    #[tokio::test]
    async fn recheck_owner_compares_uid_and_deletion() {
        let cached = replica_set("u1", false);
        let same = recheck_owner(&cached, || async {
            Ok::<_, kube::Error>(replica_set("u1", false))
        });
        same().await.expect("same owner may adopt");

        let replaced = recheck_owner(&cached, || async {
            Ok::<_, kube::Error>(replica_set("u2", false))
        });
        let err = replaced().await.expect_err("replaced");
        assert_eq!(
            err.to_string(),
            "can't recheck DeletionTimestamp: original ReplicaSet default/web is gone: got uid u2, wanted u1"
        );

        let deleted = recheck_owner(&cached, || async {
            Ok::<_, kube::Error>(replica_set("u1", true))
        });
        assert!(matches!(deleted().await, Err(Error::OwnerDeleted { .. })));

        let failed = recheck_owner(&cached, || async {
            Err::<ReplicaSet, _>(kube::Error::Api(
                api_status::not_found("replicasets", "web").boxed(),
            ))
        });
        let err = failed().await.expect_err("lookup failed");
        assert!(matches!(err, Error::Recheck { .. }));
        assert!(
            !err.is_not_found(),
            "a failed recheck is not a NotFound of the pod"
        );
    }

    #[tokio::test]
    async fn generic_manager_claims_replica_sets() {
        let patcher = Arc::new(FakePatcher::new());
        let deployment = meta("web").namespace("default").uid("d-1").build();
        let manager = ControllerRefManager::new(
            patcher.clone(),
            &deployment,
            Selector::parse("app=web").expect("selector"),
            GroupVersionKind::gvk("apps", "v1", "Deployment"),
            None,
        );
        let rs = |name: &str, app: &str, owned: bool| {
            let mut rs = replica_set(&format!("rs-{name}"), false);
            rs.metadata.name = Some(name.into());
            rs.metadata.labels = Some(kcm_testing::labels(&[("app", app)]));
            if owned {
                rs.metadata.owner_references = Some(vec![new_controller_ref(
                    &deployment,
                    &GroupVersionKind::gvk("apps", "v1", "Deployment"),
                )]);
            }
            Arc::new(rs)
        };
        let sets = vec![
            rs("orphan", "web", false),
            rs("stray", "db", true),
            rs("mine", "web", true),
        ];
        let claimed = manager.claim(&sets, |_| true).await.expect("claim");
        let claimed: Vec<_> = claimed
            .iter()
            .map(|r| r.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(claimed, vec!["orphan", "mine"]);
        let patches = patcher.patches();
        assert_eq!(patches.len(), 2);
        let Patch::Strategic(adopt) = &patches[0].patch else {
            panic!("strategic");
        };
        assert_eq!(
            adopt["metadata"]["ownerReferences"][0]["apiVersion"],
            "apps/v1"
        );
        assert_eq!(
            adopt["metadata"]["ownerReferences"][0]["kind"],
            "Deployment"
        );
        assert_eq!(adopt["metadata"]["uid"], "rs-orphan");
        assert_eq!(patches[1].name, "stray");
    }

    fn assert_send<T: Send>(_: &T) {}

    /// Controllers run claims inside spawned workers: the futures must be `Send`.
    #[tokio::test]
    async fn claim_futures_are_send() {
        let ctrl = owner(CONTROLLER_UID, "default");
        let fake: Arc<dyn PodControl> = Arc::new(FakePodControl::new());
        let manager = PodControllerRefManager::for_pods(
            fake,
            &ctrl,
            production(),
            gvk(),
            Some(recheck_owner(&replica_set("u1", false), || async {
                Ok::<_, kube::Error>(replica_set("u1", false))
            })),
        );
        let pods: Vec<Arc<Pod>> = Vec::new();
        assert_send(&manager.claim_pods(&pods, |_| true));
        let generic = ControllerRefManager::new(
            ApiPatcher::<ReplicaSet>::new(kube::Client::new(
                tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                    Err::<http::Response<kube::client::Body>, std::io::Error>(
                        std::io::Error::other("unused"),
                    )
                }),
                "default",
            )),
            &ctrl,
            production(),
            gvk(),
            None,
        );
        let sets: Vec<Arc<ReplicaSet>> = Vec::new();
        assert_send(&generic.claim(&sets, |_| true));
    }

    #[test]
    fn classify_branches() {
        let ctrl = owner(CONTROLLER_UID, "default");
        let fake: Arc<dyn PodControl> = Arc::new(FakePodControl::new());
        let manager = PodControllerRefManager::for_pods(fake, &ctrl, production(), gvk(), None);
        let orphan = new_pod("o", "production", None);
        assert_eq!(
            manager.classify(&orphan.metadata, || true),
            ClaimAction::Adopt
        );
        assert_eq!(
            manager.classify(&orphan.metadata, || false),
            ClaimAction::Ignore
        );
        let mine = new_pod("m", "production", Some(&ctrl));
        assert_eq!(manager.classify(&mine.metadata, || true), ClaimAction::Keep);
        assert_eq!(
            manager.classify(&mine.metadata, || false),
            ClaimAction::Release
        );
        let theirs = new_pod("t", "production", Some(&owner("x", "default")));
        let evaluated = std::cell::Cell::new(false);
        let action = manager.classify(&theirs.metadata, || {
            evaluated.set(true);
            true
        });
        assert_eq!(action, ClaimAction::Ignore);
        assert!(
            !evaluated.get(),
            "no match needed for another controller's pod"
        );
    }
}
