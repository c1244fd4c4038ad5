//! The dependency graph: one node per object uid, owner → dependent edges, virtual owners (upstream `graph.go`).
//!
//! The graph is written by one task only, the graph builder (see [`super::graph_builder`]),
//! which applies informer events under the write lock; the garbage collector's workers read
//! it under the read lock and copy out what they need ([`NodeSnapshot`], [`DependentInfo`]),
//! so no lock is ever held across a request to the API server.
//!
//! Edges are stored both ways, by uid: a node lists its `owners` (its `ownerReferences` as last
//! observed) and its `dependents` (the uids of the nodes whose owners name it). Upstream keys
//! dependents by node pointer; keying by uid is equivalent because the graph holds at most one
//! node per uid, and it makes replacing a node's identity an in-place edit.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// An object's coordinates, as upstream's `objectReference`: the owner-reference coordinates
/// (apiVersion, kind, name, uid) plus the namespace (empty for cluster-scoped objects, and
/// for virtual owners, the namespace of the dependent that referenced them first).
///
/// Field order is the sort order (upstream's `referenceLessThan`): kind and apiVersion first,
/// so that kinds sort together whatever their scope, then namespace, name and uid.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectIdentity {
    /// `kind`, e.g. `ReplicaSet`.
    pub kind: String,
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: String,
    /// The namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
}

impl ObjectIdentity {
    /// The identity an owner reference names, placed in `namespace` (upstream builds virtual
    /// owners and absent-owner cache keys this way).
    pub fn from_owner_reference(owner: &OwnerReference, namespace: &str) -> Self {
        Self {
            kind: owner.kind.clone(),
            api_version: owner.api_version.clone(),
            namespace: namespace.to_owned(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
        }
    }

    /// True when `owner` names this identity's coordinates (uid, name, kind, apiVersion; the
    /// namespace is not part of an owner reference), as upstream's
    /// `ownerReferenceMatchesCoordinates`.
    pub fn matches_coordinates(&self, owner: &OwnerReference) -> bool {
        owner.uid == self.uid
            && owner.name == self.name
            && owner.kind == self.kind
            && owner.api_version == self.api_version
    }

    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// Upstream's text form: `[apiVersion/kind, namespace: ns, name: n, uid: u]` (it appears in
/// the `OwnerRefInvalidNamespace` event message).
impl fmt::Display for ObjectIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.api_version, self.kind, self.namespace, self.name, self.uid
        )
    }
}

/// True when `owner` has `blockOwnerDeletion: true`.
pub fn blocks_owner_deletion(owner: &OwnerReference) -> bool {
    owner.block_owner_deletion == Some(true)
}

/// One object in the graph, as upstream's `node`.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Who the object is. For a virtual node, the coordinates some dependent used for it
    /// (possibly wrong); replaced by the observed identity when an informer sees the object.
    pub(crate) identity: ObjectIdentity,
    /// The uids of the nodes whose `owners` contain this node's uid. Invariant: every uid here
    /// is a node of the graph whose `owners` name this node's uid (dependents are removed from
    /// their owners before they leave the graph).
    pub(crate) dependents: HashSet<String>,
    /// The object's `ownerReferences` as last observed; empty for virtual nodes.
    pub(crate) owners: Vec<OwnerReference>,
    /// The object has a deletionTimestamp and the `foregroundDeletion` finalizer: it waits
    /// for its blocking dependents to be deleted. Only ever set to true.
    pub(crate) deleting_dependents: bool,
    /// The object has a deletionTimestamp (a one-way trip). Only ever set to true.
    pub(crate) being_deleted: bool,
    /// The node was made up for an owner some dependent references and no informer has
    /// reported the object yet; its existence is verified with a live GET.
    pub(crate) is_virtual: bool,
}

impl Node {
    /// An observed node.
    pub fn observed(identity: ObjectIdentity, owners: Vec<OwnerReference>) -> Self {
        Self {
            identity,
            dependents: HashSet::new(),
            owners,
            deleting_dependents: false,
            being_deleted: false,
            is_virtual: false,
        }
    }

    /// A virtual node for an owner not observed yet.
    pub fn virtual_owner(identity: ObjectIdentity) -> Self {
        Self {
            is_virtual: true,
            ..Self::observed(identity, Vec::new())
        }
    }

    /// Who the object is.
    pub fn identity(&self) -> &ObjectIdentity {
        &self.identity
    }

    /// The uids of its dependents.
    pub fn dependents(&self) -> &HashSet<String> {
        &self.dependents
    }

    /// Its `ownerReferences` as last observed.
    pub fn owners(&self) -> &[OwnerReference] {
        &self.owners
    }

    /// Whether it waits for its blocking dependents (foreground deletion).
    pub fn is_deleting_dependents(&self) -> bool {
        self.deleting_dependents
    }

    /// Whether it has a deletionTimestamp.
    pub fn is_being_deleted(&self) -> bool {
        self.being_deleted
    }

    /// Whether no informer has reported it yet.
    pub fn is_virtual(&self) -> bool {
        self.is_virtual
    }

    /// The node's state without its dependents (cheap to copy out of the lock).
    pub fn snapshot(&self) -> NodeSnapshot {
        NodeSnapshot {
            identity: self.identity.clone(),
            owners: self.owners.clone(),
            deleting_dependents: self.deleting_dependents,
            being_deleted: self.being_deleted,
            is_virtual: self.is_virtual,
        }
    }
}

/// A copy of a node's state at one instant, without its dependents: what a worker acts on.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSnapshot {
    /// Who the object is.
    pub identity: ObjectIdentity,
    /// Its `ownerReferences` as last observed.
    pub owners: Vec<OwnerReference>,
    /// It waits for its blocking dependents (foreground deletion).
    pub deleting_dependents: bool,
    /// It has a deletionTimestamp.
    pub being_deleted: bool,
    /// No informer has reported it yet.
    pub is_virtual: bool,
}

/// What a worker needs to know about one dependent of a node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DependentInfo {
    /// Who the dependent is.
    pub identity: ObjectIdentity,
    /// Whether the dependent is itself waiting for its own dependents.
    pub deleting_dependents: bool,
    /// Whether the dependent is virtual (never, in practice: virtual nodes have no owners).
    pub is_virtual: bool,
}

/// The nodes of the graph by uid, as upstream's `uidToNode` map. Obtained from [`Graph`]
/// under its lock; the graph builder's edits go through `&mut NodeMap`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeMap {
    /// Invariant: every node is stored under its own `identity.uid`.
    nodes: HashMap<String, Node>,
}

impl NodeMap {
    /// The node with `uid`.
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    pub(crate) fn get_mut(&mut self, uid: &str) -> Option<&mut Node> {
        self.nodes.get_mut(uid)
    }

    /// Whether a node has `uid`.
    pub fn contains(&self, uid: &str) -> bool {
        self.nodes.contains_key(uid)
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph is empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// Stores `node` under its uid, replacing any node with that uid.
    pub(crate) fn insert(&mut self, node: Node) {
        self.nodes.insert(node.identity.uid.clone(), node);
    }

    pub(crate) fn remove(&mut self, uid: &str) -> Option<Node> {
        self.nodes.remove(uid)
    }

    /// The dependents of `uid`, copied out (empty for an unknown uid).
    pub fn dependents_of(&self, uid: &str) -> Vec<DependentInfo> {
        let Some(node) = self.nodes.get(uid) else {
            return Vec::new();
        };
        node.dependents
            .iter()
            .filter_map(|dep| self.nodes.get(dep))
            .map(|dep| DependentInfo {
                identity: dep.identity.clone(),
                deleting_dependents: dep.deleting_dependents,
                is_virtual: dep.is_virtual,
            })
            .collect()
    }

    /// The dependents of `uid` that block its deletion: those whose owner reference to it has
    /// `blockOwnerDeletion: true`, as upstream's `blockingDependents`.
    pub fn blocking_dependents_of(&self, uid: &str) -> Vec<DependentInfo> {
        let Some(node) = self.nodes.get(uid) else {
            return Vec::new();
        };
        node.dependents
            .iter()
            .filter_map(|dep| self.nodes.get(dep))
            .filter(|dep| {
                dep.owners
                    .iter()
                    .any(|o| o.uid == node.identity.uid && blocks_owner_deletion(o))
            })
            .map(|dep| DependentInfo {
                identity: dep.identity.clone(),
                deleting_dependents: dep.deleting_dependents,
                is_virtual: dep.is_virtual,
            })
            .collect()
    }

    /// The violations of the two-way edge invariant, as upstream's test helper
    /// `verifyGraphInvariants`: a dependent that does not name its owner, or an owner
    /// (present in the graph) that does not list its dependent. Empty when consistent.
    pub fn invariant_violations(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (uid, node) in &self.nodes {
            if uid != &node.identity.uid {
                problems.push(format!("node {} stored under uid {uid}", node.identity));
            }
            for dep_uid in &node.dependents {
                match self.nodes.get(dep_uid) {
                    None => problems.push(format!(
                        "node {} lists dependent {dep_uid}, which is not in the graph",
                        node.identity
                    )),
                    Some(dep) if !dep.owners.iter().any(|o| &o.uid == uid) => {
                        problems.push(format!(
                            "node {} lists dependent {}, which does not name it as an owner",
                            node.identity, dep.identity
                        ))
                    }
                    Some(_) => {}
                }
            }
            for owner in &node.owners {
                if let Some(owner_node) = self.nodes.get(&owner.uid)
                    && !owner_node.dependents.contains(uid)
                {
                    problems.push(format!(
                        "node {} names owner {}, which does not list it as a dependent",
                        node.identity, owner_node.identity
                    ));
                }
            }
        }
        problems
    }
}

/// The graph behind its lock, shared by the graph builder (the only writer) and the workers.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: RwLock<NodeMap>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read access. Copy out what you need and drop the guard before awaiting.
    pub fn read(&self) -> RwLockReadGuard<'_, NodeMap> {
        self.nodes.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Write access, for the graph builder.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, NodeMap> {
        self.nodes.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of the node with `uid`, if the graph has it.
    pub fn snapshot(&self, uid: &str) -> Option<NodeSnapshot> {
        self.read().get(uid).map(Node::snapshot)
    }

    /// Whether the graph has a node with `uid` (upstream's test-only `GraphHasUID`).
    pub fn contains(&self, uid: &str) -> bool {
        self.read().contains(uid)
    }

    /// How many nodes the graph holds.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the graph is empty.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(uid: &str, block: Option<bool>) -> OwnerReference {
        let r = kcm_testing::owner_ref("apps/v1", "ReplicaSet", &format!("rs-{uid}"), uid);
        match block {
            Some(block) => r.block_owner_deletion(block).build(),
            None => r.build(),
        }
    }

    fn ident(uid: &str, ns: &str) -> ObjectIdentity {
        ObjectIdentity {
            kind: "Pod".into(),
            api_version: "v1".into(),
            namespace: ns.into(),
            name: format!("pod-{uid}"),
            uid: uid.into(),
        }
    }

    #[test]
    fn identity_displays_as_upstream() {
        let id = ObjectIdentity::from_owner_reference(&owner("1", None), "ns1");
        assert_eq!(
            id.to_string(),
            "[apps/v1/ReplicaSet, namespace: ns1, name: rs-1, uid: 1]"
        );
        assert_eq!(id.key(), "ns1/rs-1");
    }

    #[test]
    fn identities_sort_kind_first_as_reference_less_than() {
        // Kind and apiVersion outrank namespace, namespace outranks name, name outranks uid.
        let mut ids = [
            ObjectIdentity {
                kind: "B".into(),
                namespace: "a".into(),
                ..ObjectIdentity::default()
            },
            ObjectIdentity {
                kind: "A".into(),
                api_version: "v2".into(),
                ..ObjectIdentity::default()
            },
            ObjectIdentity {
                kind: "A".into(),
                api_version: "v1".into(),
                namespace: "z".into(),
                ..ObjectIdentity::default()
            },
            ObjectIdentity {
                kind: "A".into(),
                api_version: "v1".into(),
                namespace: "a".into(),
                name: "n".into(),
                ..ObjectIdentity::default()
            },
        ];
        ids.sort();
        let order: Vec<(&str, &str, &str)> = ids
            .iter()
            .map(|i| {
                (
                    i.kind.as_str(),
                    i.api_version.as_str(),
                    i.namespace.as_str(),
                )
            })
            .collect();
        assert_eq!(
            order,
            vec![
                ("A", "v1", "a"),
                ("A", "v1", "z"),
                ("A", "v2", ""),
                ("B", "", "a")
            ]
        );
    }

    #[test]
    fn matches_coordinates_ignores_controller_and_block_fields() {
        let reference = owner("1", Some(true));
        let id = ObjectIdentity::from_owner_reference(&reference, "other-namespace");
        assert!(id.matches_coordinates(&reference));
        let mut renamed = reference.clone();
        renamed.name = "other".into();
        assert!(!id.matches_coordinates(&renamed));
    }

    #[test]
    fn blocking_dependents_are_those_with_block_owner_deletion_true() {
        let mut nodes = NodeMap::default();
        let mut rs = Node::observed(
            ObjectIdentity::from_owner_reference(&owner("rs", None), "ns"),
            vec![],
        );
        for (uid, block) in [("a", Some(true)), ("b", Some(false)), ("c", None)] {
            nodes.insert(Node::observed(ident(uid, "ns"), vec![owner("rs", block)]));
            rs.dependents.insert(uid.into());
        }
        nodes.insert(rs);
        assert!(nodes.invariant_violations().is_empty());
        let blocking: Vec<String> = nodes
            .blocking_dependents_of("rs")
            .into_iter()
            .map(|d| d.identity.uid)
            .collect();
        assert_eq!(blocking, vec!["a".to_string()]);
        assert_eq!(nodes.dependents_of("rs").len(), 3);
        assert!(nodes.dependents_of("unknown").is_empty());
    }

    #[test]
    fn invariant_violations_name_both_directions() {
        let mut nodes = NodeMap::default();
        let mut rs = Node::observed(
            ObjectIdentity::from_owner_reference(&owner("rs", None), "ns"),
            vec![],
        );
        rs.dependents.insert("a".into());
        nodes.insert(rs);
        nodes.insert(Node::observed(ident("a", "ns"), vec![]));
        nodes.insert(Node::observed(ident("b", "ns"), vec![owner("rs", None)]));
        let problems = nodes.invariant_violations();
        assert_eq!(problems.len(), 2, "{problems:?}");
    }
}
