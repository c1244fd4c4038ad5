//! The graph builder: turns informer events into graph edits and work for the collector (upstream `graph_builder.go`).
//!
//! Every monitored resource's informer hands its add/update/delete notifications to a
//! [`GraphEventHandler`], which queues them on the `graph_changes` queue. One task
//! ([`GraphBuilder::run`]) takes them in order and applies each with
//! [`GraphBuilder::process_event`]: the edit itself ([`apply_event`], a pure function of the
//! graph and the event, unit-tested on its own) yields [`Effects`] — nodes to put on the
//! `attemptToDelete` and `attemptToOrphan` queues, owners now known to be absent, warning
//! events — which are carried out once the graph's lock is released.
//!
//! The collector's workers also send *virtual* delete events here (an object a live GET
//! found missing), so that only this task ever writes the graph.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::{DeletedObject, ResourceEventHandler};
use kcm_machinery::workqueue::{Queue, RateLimitingQueue};
use kube::Resource;
use kube::api::ObjectMeta;
use kube::core::{DynamicObject, PartialObjectMeta, TypeMeta};
use tokio_util::sync::CancellationToken;

use super::graph::{Graph, Node, NodeMap, ObjectIdentity, blocks_owner_deletion};
use super::uid_cache::ReferenceCache;

/// The finalizer that makes the collector delete an object's dependents before the object
/// (`metav1.FinalizerDeleteDependents`).
pub const FINALIZER_DELETE_DEPENDENTS: &str = "foregroundDeletion";

/// The finalizer that makes the collector remove the object from its dependents' owner
/// references before the object goes (`metav1.FinalizerOrphanDependents`).
pub const FINALIZER_ORPHAN_DEPENDENTS: &str = "orphan";

/// The warning event reason for a dependent naming an owner in another namespace.
pub const REASON_OWNER_REF_INVALID_NAMESPACE: &str = "OwnerRefInvalidNamespace";

/// Read access to an object's metadata, whatever its Rust type (typed objects from shared
/// informers, metadata-only objects from the collector's own informers).
pub trait MetaObject: Send + Sync {
    /// The object's metadata.
    fn object_meta(&self) -> &ObjectMeta;
}

impl<K: Resource + Send + Sync> MetaObject for K {
    fn object_meta(&self) -> &ObjectMeta {
        self.meta()
    }
}

/// An object as handed to the graph builder: shared with the informer's cache, never copied.
pub type SharedObject = Arc<dyn MetaObject>;

/// Which kind of change an event reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeType {
    /// The object appeared.
    Add,
    /// The object changed.
    Update,
    /// The object is gone.
    Delete,
}

/// One change for the graph, as upstream's `event`.
#[derive(Clone)]
pub struct GraphEvent {
    /// The event did not come from an informer: a worker found the object missing.
    pub is_virtual: bool,
    /// Add, update or delete.
    pub event_type: ChangeType,
    /// The object (its final state for deletes).
    pub obj: SharedObject,
    /// The previous state, for updates from an informer.
    pub old: Option<SharedObject>,
    /// The apiVersion and kind of the informer's resource (objects from lists and typed
    /// caches do not always carry them).
    pub type_meta: Arc<TypeMeta>,
}

impl std::fmt::Debug for GraphEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let meta = self.obj.object_meta();
        f.debug_struct("GraphEvent")
            .field("event_type", &self.event_type)
            .field("virtual", &self.is_virtual)
            .field("api_version", &self.type_meta.api_version)
            .field("kind", &self.type_meta.kind)
            .field("namespace", &meta.namespace)
            .field("name", &meta.name)
            .field("uid", &meta.uid)
            .finish()
    }
}

impl GraphEvent {
    /// An event from an informer.
    pub fn observed(
        event_type: ChangeType,
        obj: SharedObject,
        old: Option<SharedObject>,
        type_meta: Arc<TypeMeta>,
    ) -> Self {
        Self {
            is_virtual: false,
            event_type,
            obj,
            old,
            type_meta,
        }
    }

    /// A virtual delete event for `identity`: a worker verified the object does not exist, as
    /// upstream's `enqueueVirtualDeleteEvent`.
    pub fn virtual_delete(identity: &ObjectIdentity) -> Self {
        let meta = ObjectMeta {
            namespace: (!identity.namespace.is_empty()).then(|| identity.namespace.clone()),
            name: Some(identity.name.clone()),
            uid: Some(identity.uid.clone()),
            ..ObjectMeta::default()
        };
        let obj: PartialObjectMeta<DynamicObject> = PartialObjectMeta {
            types: None,
            metadata: meta,
            _phantom: std::marker::PhantomData,
        };
        Self {
            is_virtual: true,
            event_type: ChangeType::Delete,
            obj: Arc::new(obj),
            old: None,
            type_meta: Arc::new(TypeMeta {
                api_version: identity.api_version.clone(),
                kind: identity.kind.clone(),
            }),
        }
    }

    /// The identity the event reports, as upstream's `identityFromEvent`.
    pub fn identity(&self) -> ObjectIdentity {
        let meta = self.obj.object_meta();
        ObjectIdentity {
            kind: self.type_meta.kind.clone(),
            api_version: self.type_meta.api_version.clone(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }
}

/// An entry of the `graph_changes` queue. Each event is distinct (the queue must not merge
/// two events about one object), so equality is by sequence number.
#[derive(Clone, Debug)]
pub struct GraphChange {
    /// Unique per builder.
    seq: u64,
    /// The event.
    event: Arc<GraphEvent>,
}

impl PartialEq for GraphChange {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}

impl Eq for GraphChange {}

impl std::hash::Hash for GraphChange {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.seq.hash(state);
    }
}

/// The producer side of the `graph_changes` queue: what informer handlers and workers hold.
#[derive(Clone)]
pub struct GraphChanges {
    queue: Queue<GraphChange>,
    /// The next sequence number.
    seq: Arc<AtomicU64>,
}

impl std::fmt::Debug for GraphChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphChanges")
            .field("len", &self.queue.len())
            .finish()
    }
}

impl GraphChanges {
    /// Wraps `queue`.
    pub fn new(queue: Queue<GraphChange>) -> Self {
        Self {
            queue,
            seq: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Queues `event` for the graph builder.
    pub fn push(&self, event: GraphEvent) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        self.queue.add(GraphChange {
            seq,
            event: Arc::new(event),
        });
    }

    /// How many events wait.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The queue itself (the consumer side).
    pub fn queue(&self) -> &Queue<GraphChange> {
        &self.queue
    }
}

/// Feeds one resource's informer notifications to the graph builder, as the handlers of
/// upstream's `controllerFor`. Tombstones are unwrapped; every update is passed on (the graph
/// builder compares owner references itself).
#[derive(Clone, Debug)]
pub struct GraphEventHandler {
    changes: GraphChanges,
    /// The resource's apiVersion and kind, stamped on every event.
    type_meta: Arc<TypeMeta>,
}

impl GraphEventHandler {
    /// A handler for objects of `api_version`/`kind`.
    pub fn new(changes: GraphChanges, api_version: &str, kind: &str) -> Self {
        Self {
            changes,
            type_meta: Arc::new(TypeMeta {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            }),
        }
    }
}

impl<K: Resource + Send + Sync + 'static> ResourceEventHandler<K> for GraphEventHandler {
    fn on_add(&self, obj: Arc<K>, _is_in_initial_list: bool) {
        self.changes.push(GraphEvent::observed(
            ChangeType::Add,
            obj,
            None,
            self.type_meta.clone(),
        ));
    }

    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        self.changes.push(GraphEvent::observed(
            ChangeType::Update,
            new,
            Some(old),
            self.type_meta.clone(),
        ));
    }

    fn on_delete(&self, obj: DeletedObject<K>) {
        self.changes.push(GraphEvent::observed(
            ChangeType::Delete,
            obj.into_object(),
            None,
            self.type_meta.clone(),
        ));
    }
}

/// An entry of the `attemptToDelete` queue: a node by uid, and whether it was virtual when
/// queued. Upstream queues node pointers; a virtual node later replaced by its observed
/// object is a different pointer, so "queued as virtual" is part of the key here too.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeKey {
    /// The node's uid.
    pub uid: String,
    /// The node was virtual when queued.
    pub is_virtual: bool,
}

impl NodeKey {
    fn of(node: &Node) -> Self {
        Self {
            uid: node.identity.uid.clone(),
            is_virtual: node.is_virtual,
        }
    }
}

/// A dependent naming an owner that lives in another namespace: reported as an
/// `OwnerRefInvalidNamespace` warning event on the dependent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidNamespaceOwnerRef {
    /// The dependent.
    pub dependent: ObjectIdentity,
    /// The owner as the dependent names it, placed in the dependent's namespace.
    pub owner: ObjectIdentity,
}

/// What applying one event asks for, in order, once the graph's lock is released.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effects {
    /// Nodes for the `attemptToDelete` queue.
    pub attempt_to_delete: Vec<NodeKey>,
    /// Nodes for the `attemptToDelete` queue, after their rate-limited delay.
    pub attempt_to_delete_rate_limited: Vec<NodeKey>,
    /// Owner uids for the `attemptToOrphan` queue.
    pub attempt_to_orphan: Vec<String>,
    /// Identities now known not to exist (for the absent-owner cache).
    pub absent: Vec<ObjectIdentity>,
    /// Warning events to record.
    pub invalid_namespace: Vec<InvalidNamespaceOwnerRef>,
}

/// Whether `meta` has a deletionTimestamp.
fn being_deleted(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// Whether `meta` lists `finalizer`.
pub fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_deref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// Whether this update starts a deletion held by `finalizer`: the new state is being deleted
/// with it, the old one (if any) was not, as upstream's `deletionStartsWithFinalizer`. With no
/// old state (an add, or a create and delete merged by the DeltaFIFO) it is a start.
fn deletion_starts_with_finalizer(
    old: Option<&ObjectMeta>,
    new: &ObjectMeta,
    finalizer: &str,
) -> bool {
    if !being_deleted(new) || !has_finalizer(new, finalizer) {
        return false;
    }
    match old {
        None => true,
        Some(old) => !being_deleted(old) || !has_finalizer(old, finalizer),
    }
}

/// An owner reference whose fields changed (same uid).
#[derive(Clone, Debug, PartialEq)]
pub struct OwnerRefChange {
    /// Before.
    pub old: OwnerReference,
    /// After.
    pub new: OwnerReference,
}

/// Owner references added, removed and changed between two lists (matched by uid), as
/// upstream's `referencesDiffs`. `added` keeps `new`'s order, `removed` keeps `old`'s.
pub fn references_diffs(
    old: &[OwnerReference],
    new: &[OwnerReference],
) -> (
    Vec<OwnerReference>,
    Vec<OwnerReference>,
    Vec<OwnerRefChange>,
) {
    let old_by_uid: HashMap<&str, &OwnerReference> =
        old.iter().map(|r| (r.uid.as_str(), r)).collect();
    let mut matched: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut added = Vec::new();
    let mut changed = Vec::new();
    for value in new {
        match old_by_uid.get(value.uid.as_str()) {
            Some(old_ref) => {
                if *old_ref != value {
                    changed.push(OwnerRefChange {
                        old: (*old_ref).clone(),
                        new: value.clone(),
                    });
                }
                matched.insert(value.uid.as_str());
            }
            None => added.push(value.clone()),
        }
    }
    let mut removed = Vec::new();
    let mut seen_removed: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for value in old {
        if !matched.contains(value.uid.as_str()) && seen_removed.insert(value.uid.as_str()) {
            // Duplicate uids collapse as in upstream's map: the last reference wins.
            if let Some(last) = old_by_uid.get(value.uid.as_str()) {
                removed.push((*last).clone());
            }
        }
    }
    (added, removed, changed)
}

/// Splits `dependents` into those with an owner reference matching `owner` (all coordinates,
/// and the namespace when the owner is namespaced) and those with a reference to `owner`'s
/// uid that does not match, as upstream's `partitionDependents`. A dependent with both kinds
/// of reference is in both lists.
fn partition_dependents(
    nodes: &NodeMap,
    dependents: &[String],
    owner: &ObjectIdentity,
) -> (Vec<String>, Vec<String>) {
    let owner_is_namespaced = !owner.namespace.is_empty();
    let mut matching = Vec::new();
    let mut nonmatching = Vec::new();
    for uid in dependents {
        let Some(dep) = nodes.get(uid) else {
            continue;
        };
        let mut found_match = false;
        let mut found_mismatch = false;
        if owner_is_namespaced && owner.namespace != dep.identity.namespace {
            found_mismatch = true;
        } else {
            for reference in dep.owners.iter().filter(|r| r.uid == owner.uid) {
                if owner.matches_coordinates(reference) {
                    found_match = true;
                } else {
                    found_mismatch = true;
                }
            }
        }
        if found_match {
            matching.push(uid.clone());
        }
        if found_mismatch {
            nonmatching.push(uid.clone());
        }
    }
    (matching, nonmatching)
}

/// Another identity the dependents use for the uid of `verified_absent` (which a GET showed
/// missing): the first one sorting after it, else the first one, as upstream's
/// `getAlternateOwnerIdentity`. `None` when every dependent agrees with `verified_absent`.
fn alternate_owner_identity(
    nodes: &NodeMap,
    dependents: &[String],
    verified_absent: &ObjectIdentity,
) -> Option<ObjectIdentity> {
    let absent_is_cluster_scoped = verified_absent.namespace.is_empty();
    let mut seen = std::collections::HashSet::new();
    seen.insert(verified_absent.clone());
    let mut first: Option<ObjectIdentity> = None;
    let mut first_following: Option<ObjectIdentity> = None;
    for dep in dependents.iter().filter_map(|uid| nodes.get(uid)) {
        for reference in dep.owners.iter().filter(|r| r.uid == verified_absent.uid) {
            if verified_absent.matches_coordinates(reference)
                && (absent_is_cluster_scoped || verified_absent.namespace == dep.identity.namespace)
            {
                continue;
            }
            let mut candidate =
                ObjectIdentity::from_owner_reference(reference, &dep.identity.namespace);
            if absent_is_cluster_scoped
                && candidate.api_version == verified_absent.api_version
                && candidate.kind == verified_absent.kind
            {
                // That apiVersion/kind is known to be cluster-scoped.
                candidate.namespace.clear();
            }
            if !seen.insert(candidate.clone()) {
                continue;
            }
            if first.as_ref().is_none_or(|f| candidate < *f) {
                first = Some(candidate.clone());
            }
            if *verified_absent < candidate
                && first_following.as_ref().is_none_or(|f| candidate < *f)
            {
                first_following = Some(candidate);
            }
        }
    }
    first_following.or(first)
}

/// Adds `dependent_uid` to the dependents of each of `owners`, creating virtual nodes for
/// owners not in the graph (queued to verify they exist), and queues the dependent itself
/// when an owner reference looks wrong, as upstream's `addDependentToOwners`.
fn add_dependent_to_owners(
    nodes: &mut NodeMap,
    dependent_uid: &str,
    owners: &[OwnerReference],
    out: &mut Effects,
) {
    let Some(dependent) = nodes.get(dependent_uid) else {
        return;
    };
    let dependent_identity = dependent.identity.clone();
    let dependent_key = NodeKey::of(dependent);
    let mut potentially_invalid = false;
    for owner in owners {
        match nodes.get_mut(&owner.uid) {
            None => {
                let mut virtual_owner = Node::virtual_owner(ObjectIdentity::from_owner_reference(
                    owner,
                    &dependent_identity.namespace,
                ));
                virtual_owner.dependents.insert(dependent_uid.to_owned());
                tracing::trace!(identity = %virtual_owner.identity, "add virtual item");
                out.attempt_to_delete.push(NodeKey::of(&virtual_owner));
                nodes.insert(virtual_owner);
            }
            Some(owner_node) => {
                owner_node.dependents.insert(dependent_uid.to_owned());
                if potentially_invalid {
                    continue;
                }
                let owner_identity = &owner_node.identity;
                let owner_is_namespaced = !owner_identity.namespace.is_empty();
                if owner_is_namespaced && owner_identity.namespace != dependent_identity.namespace {
                    if !owner_node.is_virtual {
                        tracing::debug!(
                            item = %dependent_identity,
                            owner = %owner_identity,
                            "item references an owner but does not match namespaces"
                        );
                        out.invalid_namespace.push(InvalidNamespaceOwnerRef {
                            dependent: dependent_identity.clone(),
                            owner: ObjectIdentity::from_owner_reference(
                                owner,
                                &dependent_identity.namespace,
                            ),
                        });
                    }
                    potentially_invalid = true;
                } else if !owner_identity.matches_coordinates(owner) {
                    if !owner_node.is_virtual {
                        tracing::debug!(
                            item = %dependent_identity,
                            owner = %owner_identity,
                            "item references an owner with coordinates that do not match the observed identity"
                        );
                    }
                    potentially_invalid = true;
                } else if !owner_is_namespaced
                    && owner_identity.namespace != dependent_identity.namespace
                    && owner_node.is_virtual
                {
                    // A virtual cluster-scoped owner of a namespaced dependent may be a missing
                    // namespaced object referenced wrongly: verify the dependent's owners.
                    potentially_invalid = true;
                }
            }
        }
    }
    if potentially_invalid {
        out.attempt_to_delete.push(dependent_key);
    }
}

/// Removes `dependent_uid` from the dependents of each of `owners` still in the graph.
fn remove_dependent_from_owners(
    nodes: &mut NodeMap,
    dependent_uid: &str,
    owners: &[OwnerReference],
) {
    for owner in owners {
        if let Some(owner_node) = nodes.get_mut(&owner.uid) {
            owner_node.dependents.remove(dependent_uid);
        }
    }
}

/// Queues the owners a dependent stopped blocking: a removed blocking reference, or one whose
/// `blockOwnerDeletion` went from true to unset/false, as upstream's
/// `addUnblockedOwnersToDeleteQueue`.
fn add_unblocked_owners_to_delete_queue(
    nodes: &NodeMap,
    removed: &[OwnerReference],
    changed: &[OwnerRefChange],
    out: &mut Effects,
) {
    let unblocked = removed
        .iter()
        .filter(|r| blocks_owner_deletion(r))
        .map(|r| r.uid.as_str())
        .chain(
            changed
                .iter()
                .filter(|c| blocks_owner_deletion(&c.old) && !blocks_owner_deletion(&c.new))
                .map(|c| c.new.uid.as_str()),
        );
    for uid in unblocked {
        match nodes.get(uid) {
            Some(node) => out.attempt_to_delete.push(NodeKey::of(node)),
            None => tracing::trace!(uid, "cannot find uid in the graph"),
        }
    }
}

/// Queues the work a deletion starting with the `orphan` or `foregroundDeletion` finalizer
/// calls for, as upstream's `processTransitions`.
fn process_transitions(
    nodes: &mut NodeMap,
    old: Option<&ObjectMeta>,
    new: &ObjectMeta,
    uid: &str,
    out: &mut Effects,
) {
    if deletion_starts_with_finalizer(old, new, FINALIZER_ORPHAN_DEPENDENTS) {
        tracing::trace!(uid, "add item to attemptToOrphan");
        out.attempt_to_orphan.push(uid.to_owned());
        return;
    }
    if deletion_starts_with_finalizer(old, new, FINALIZER_DELETE_DEPENDENTS) {
        let Some(node) = nodes.get_mut(uid) else {
            return;
        };
        tracing::debug!(
            item = %node.identity,
            "add item to attemptToDelete, because it's waiting for its dependents to be deleted"
        );
        // A node that started virtual did not get the flag from an event: set it here.
        node.deleting_dependents = true;
        let key = NodeKey::of(node);
        let dependents: Vec<String> = node.dependents.iter().cloned().collect();
        for dep in dependents.iter().filter_map(|d| nodes.get(d)) {
            out.attempt_to_delete.push(NodeKey::of(dep));
        }
        out.attempt_to_delete.push(key);
    }
}

/// Applies one event to the graph, as the body of upstream's `processGraphChanges`, returning
/// what must follow. Pure: no queue, cache or recorder is touched.
pub fn apply_event(nodes: &mut NodeMap, event: &GraphEvent) -> Effects {
    let mut out = Effects::default();
    let meta = event.obj.object_meta();
    let Some(uid) = meta.uid.as_deref().filter(|u| !u.is_empty()) else {
        tracing::warn!(?event, "ignoring an event for an object without a uid");
        return out;
    };
    let old_meta = event.old.as_ref().map(|o| o.object_meta());
    tracing::trace!(?event, "GraphBuilder process object");

    let mut found = nodes.contains(uid);
    if found
        && !event.is_virtual
        && let Some(existing) = nodes.get(uid)
        && existing.is_virtual
    {
        // The first informer event for an object the graph only knew as a virtual owner.
        let observed = event.identity();
        if observed != existing.identity {
            // Dependents that named it differently may have a wrong reference: verify them.
            let dependents: Vec<String> = existing.dependents.iter().cloned().collect();
            let (_, potentially_invalid) = partition_dependents(nodes, &dependents, &observed);
            for dep in potentially_invalid.iter().filter_map(|d| nodes.get(d)) {
                if !observed.namespace.is_empty() && dep.identity.namespace != observed.namespace {
                    tracing::debug!(
                        item = %dep.identity,
                        owner = %observed,
                        "item references an owner but does not match namespaces"
                    );
                    if let Some(reference) = dep.owners.iter().find(|r| r.uid == observed.uid) {
                        out.invalid_namespace.push(InvalidNamespaceOwnerRef {
                            dependent: dep.identity.clone(),
                            owner: ObjectIdentity::from_owner_reference(
                                reference,
                                &dep.identity.namespace,
                            ),
                        });
                    }
                }
                out.attempt_to_delete.push(NodeKey::of(dep));
            }
            tracing::debug!(virtual_item = %existing.identity, %observed, "replacing virtual item with observed item");
        }
        if let Some(existing) = nodes.get_mut(uid) {
            existing.identity = observed;
            existing.is_virtual = false;
        }
    }
    found = found && nodes.contains(uid);

    match event.event_type {
        ChangeType::Add | ChangeType::Update if !found => {
            let mut node = Node::observed(
                event.identity(),
                meta.owner_references.clone().unwrap_or_default(),
            );
            node.being_deleted = being_deleted(meta);
            node.deleting_dependents =
                node.being_deleted && has_finalizer(meta, FINALIZER_DELETE_DEPENDENTS);
            let owners = node.owners.clone();
            nodes.insert(node);
            add_dependent_to_owners(nodes, uid, &owners, &mut out);
            // The DeltaFIFO may merge a creation and the start of its deletion into one event.
            process_transitions(nodes, old_meta, meta, uid, &mut out);
        }
        ChangeType::Add | ChangeType::Update => {
            if !event.is_virtual
                && let Some(existing) = nodes.get_mut(uid)
                && (existing.identity.api_version != event.type_meta.api_version
                    || existing.identity.kind != event.type_meta.kind)
            {
                // The object was observed through another version of its resource.
                existing.identity.api_version = event.type_meta.api_version.clone();
                existing.identity.kind = event.type_meta.kind.clone();
            }
            let new_owners = meta.owner_references.as_deref().unwrap_or_default();
            let (added, removed, changed) = match nodes.get(uid) {
                Some(existing) => references_diffs(&existing.owners, new_owners),
                None => (Vec::new(), Vec::new(), Vec::new()),
            };
            if !added.is_empty() || !removed.is_empty() || !changed.is_empty() {
                add_unblocked_owners_to_delete_queue(nodes, &removed, &changed, &mut out);
                if let Some(existing) = nodes.get_mut(uid) {
                    existing.owners = new_owners.to_vec();
                }
                add_dependent_to_owners(nodes, uid, &added, &mut out);
                remove_dependent_from_owners(nodes, uid, &removed);
            }
            if being_deleted(meta)
                && let Some(existing) = nodes.get_mut(uid)
            {
                existing.being_deleted = true;
            }
            process_transitions(nodes, old_meta, meta, uid, &mut out);
        }
        ChangeType::Delete => {
            let Some(existing) = nodes.get(uid) else {
                tracing::trace!(
                    uid,
                    "item doesn't exist in the graph, this shouldn't happen"
                );
                return out;
            };
            let mut remove_existing = true;
            if event.is_virtual {
                let deleted_identity = event.identity();
                let dependents: Vec<String> = existing.dependents.iter().cloned().collect();
                if existing.is_virtual {
                    // Not sure of a virtual node's coordinates: do its dependents agree with
                    // the identity just verified absent?
                    let (matching, nonmatching) =
                        partition_dependents(nodes, &dependents, &deleted_identity);
                    if !nonmatching.is_empty() {
                        remove_existing = false;
                        if !matching.is_empty() {
                            out.absent.push(deleted_identity.clone());
                            for dep in matching.iter().filter_map(|d| nodes.get(d)) {
                                out.attempt_to_delete.push(NodeKey::of(dep));
                            }
                        }
                        if existing.identity == deleted_identity
                            && let Some(replacement) =
                                alternate_owner_identity(nodes, &nonmatching, &deleted_identity)
                            && let Some(node) = nodes.get_mut(uid)
                        {
                            // Try the next identity the dependents use for this uid.
                            node.identity = replacement;
                            out.attempt_to_delete_rate_limited.push(NodeKey::of(node));
                        }
                    }
                } else if existing.identity != deleted_identity {
                    // A real node is not removed on a virtual delete of other coordinates;
                    // only the dependents that used those coordinates are affected.
                    remove_existing = false;
                    let (matching, _) = partition_dependents(nodes, &dependents, &deleted_identity);
                    if !matching.is_empty() {
                        out.absent.push(deleted_identity.clone());
                        for dep in matching.iter().filter_map(|d| nodes.get(d)) {
                            out.attempt_to_delete.push(NodeKey::of(dep));
                        }
                    }
                }
            }
            if remove_existing && let Some(removed) = nodes.remove(uid) {
                remove_dependent_from_owners(nodes, uid, &removed.owners);
                if !removed.dependents.is_empty() {
                    out.absent.push(event.identity());
                }
                for dep in removed.dependents.iter().filter_map(|d| nodes.get(d)) {
                    out.attempt_to_delete.push(NodeKey::of(dep));
                }
                for owner in &removed.owners {
                    // Let a foreground-deleting owner check whether it can go now.
                    if let Some(owner_node) = nodes.get(&owner.uid)
                        && owner_node.deleting_dependents
                    {
                        out.attempt_to_delete.push(NodeKey::of(owner_node));
                    }
                }
            }
        }
    }
    out
}

/// Builds and maintains the dependency graph from informer events and feeds the collector's
/// queues, as upstream's `GraphBuilder` (the monitors that feed it live in
/// [`super::monitors`]).
pub struct GraphBuilder {
    /// The graph: written only by [`Self::process_event`].
    graph: Arc<Graph>,
    /// Informer (and virtual) events, applied in order by [`Self::run`].
    changes: GraphChanges,
    /// Nodes that may be garbage, or whose deletion may be unblocked. Consumed by the
    /// collector's delete workers.
    attempt_to_delete: RateLimitingQueue<NodeKey>,
    /// Owners (by uid) whose dependents must be orphaned. Consumed by the orphan workers.
    attempt_to_orphan: RateLimitingQueue<String>,
    /// Owners known not to exist; shared with the collector.
    absent_owner_cache: Arc<ReferenceCache>,
    /// Records `OwnerRefInvalidNamespace` warnings.
    recorder: Arc<dyn EventRecorder>,
}

impl std::fmt::Debug for GraphBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphBuilder")
            .field("nodes", &self.graph.len())
            .field("pending_changes", &self.changes.len())
            .finish_non_exhaustive()
    }
}

impl GraphBuilder {
    /// A builder over an empty graph, feeding the given queues.
    pub fn new(
        changes: GraphChanges,
        attempt_to_delete: RateLimitingQueue<NodeKey>,
        attempt_to_orphan: RateLimitingQueue<String>,
        absent_owner_cache: Arc<ReferenceCache>,
        recorder: Arc<dyn EventRecorder>,
    ) -> Self {
        Self {
            graph: Arc::new(Graph::new()),
            changes,
            attempt_to_delete,
            attempt_to_orphan,
            absent_owner_cache,
            recorder,
        }
    }

    /// The graph (read it; only the builder writes).
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// The producer side of the `graph_changes` queue.
    pub fn changes(&self) -> &GraphChanges {
        &self.changes
    }

    /// A handler feeding this builder with objects of `api_version`/`kind`.
    pub fn handler(&self, api_version: &str, kind: &str) -> GraphEventHandler {
        GraphEventHandler::new(self.changes.clone(), api_version, kind)
    }

    /// Queues a virtual delete event for `identity`, as upstream's
    /// `enqueueVirtualDeleteEvent`.
    pub fn enqueue_virtual_delete_event(&self, identity: &ObjectIdentity) {
        self.changes.push(GraphEvent::virtual_delete(identity));
    }

    /// Applies `event` to the graph and carries out its effects (queue adds, absent-owner
    /// cache, events), the lock released first.
    pub fn process_event(&self, event: &GraphEvent) {
        let effects = {
            let mut nodes = self.graph.write();
            apply_event(&mut nodes, event)
        };
        for identity in effects.absent {
            self.absent_owner_cache.add(identity);
        }
        for key in effects.attempt_to_delete {
            self.attempt_to_delete.add(key);
        }
        for key in effects.attempt_to_delete_rate_limited {
            self.attempt_to_delete.add_rate_limited(key);
        }
        for uid in effects.attempt_to_orphan {
            self.attempt_to_orphan.add(uid);
        }
        for invalid in effects.invalid_namespace {
            self.report_invalid_namespace_owner_ref(&invalid);
        }
    }

    /// Records the `OwnerRefInvalidNamespace` warning on the dependent, as upstream's
    /// `reportInvalidNamespaceOwnerRef`.
    fn report_invalid_namespace_owner_ref(&self, invalid: &InvalidNamespaceOwnerRef) {
        let dependent = &invalid.dependent;
        let regarding = ObjectReference {
            kind: Some(dependent.kind.clone()),
            api_version: Some(dependent.api_version.clone()),
            namespace: Some(dependent.namespace.clone()).filter(|n| !n.is_empty()),
            name: Some(dependent.name.clone()),
            uid: Some(dependent.uid.clone()),
            ..ObjectReference::default()
        };
        self.recorder.event(
            &regarding,
            EventType::Warning,
            REASON_OWNER_REF_INVALID_NAMESPACE,
            format!(
                "ownerRef {} does not exist in namespace {:?}",
                invalid.owner, dependent.namespace
            ),
        );
    }

    /// Takes one event off the `graph_changes` queue and applies it; false once the queue
    /// has shut down, as upstream's `processGraphChanges`.
    pub async fn process_next(&self) -> bool {
        let Some(change) = self.changes.queue().get().await else {
            return false;
        };
        self.process_event(&change.event);
        self.changes.queue().done(&change);
        true
    }

    /// Applies events until `cancel` fires (then shuts the queue down).
    pub async fn run(&self, cancel: CancellationToken) {
        tracing::info!(component = "GraphBuilder", "running");
        let queue = self.changes.queue().clone();
        let stopper = tokio::spawn({
            let cancel = cancel.clone();
            async move {
                cancel.cancelled().await;
                queue.shut_down();
            }
        });
        while self.process_next().await {}
        stopper.abort();
        tracing::info!(component = "GraphBuilder", "stopping");
    }
}

#[cfg(test)]
#[path = "graph_builder_tests.rs"]
mod tests;
