//! The RBAC authorizer (upstream's `plugin/pkg/auth/authorizer/rbac`): Roles, ClusterRoles and their bindings, read from a cache the store's watch keeps current; `system:masters` always allowed.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::auth::authorizer::{
    Attributes, Authorizer, Decision, NonResourceRule, ResourceRule, Rules, Target,
};
use crate::auth::rbac_rule::{PolicyRule, rule_allows};
use crate::auth::user::{SYSTEM_MASTERS, UserInfo, service_account_username};
use crate::resources::rbac::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES};
use crate::storage::{self, Event, KeyValue, ListOptions, Storage};

/// A binding's subject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// The name.
    pub name: String,
    /// A service account's namespace (empty: the binding's).
    pub namespace: String,
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The binding's name.
    pub name: String,
    /// Its namespace; empty for a ClusterRoleBinding.
    pub namespace: String,
    /// `Role` or `ClusterRole`.
    pub role_kind: String,
    /// The role's name.
    pub role_name: String,
    /// Who is bound.
    pub subjects: Vec<Subject>,
}

impl Binding {
    /// A binding from its JSON.
    pub fn from_json(obj: &Value) -> Self {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let meta = obj.get("metadata").cloned().unwrap_or(Value::Null);
        let role = obj.get("roleRef").cloned().unwrap_or(Value::Null);
        Self {
            name: s(&meta, "name"),
            namespace: s(&meta, "namespace"),
            role_kind: s(&role, "kind"),
            role_name: s(&role, "name"),
            subjects: obj
                .get("subjects")
                .and_then(Value::as_array)
                .map(|subjects| {
                    subjects
                        .iter()
                        .map(|sub| Subject {
                            kind: s(sub, "kind"),
                            name: s(sub, "name"),
                            namespace: s(sub, "namespace"),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The first subject that names `user` (upstream's `appliesTo`).
    fn subject_for(&self, user: &UserInfo) -> Option<&Subject> {
        self.subjects.iter().find(|s| match s.kind.as_str() {
            "User" => s.name == user.username,
            "Group" => user.in_group(&s.name),
            "ServiceAccount" => {
                let ns = if s.namespace.is_empty() {
                    &self.namespace
                } else {
                    &s.namespace
                };
                !ns.is_empty() && service_account_username(ns, &s.name) == user.username
            }
            _ => false,
        })
    }

    /// How upstream's reasons name the binding, role and subject.
    fn describe(&self, subject: &Subject) -> String {
        let subject = if subject.kind == "ServiceAccount" {
            let ns = if subject.namespace.is_empty() {
                &self.namespace
            } else {
                &subject.namespace
            };
            format!("{} {:?}", subject.kind, format!("{}/{ns}", subject.name))
        } else {
            format!("{} {:?}", subject.kind, subject.name)
        };
        if self.namespace.is_empty() {
            format!(
                "ClusterRoleBinding {:?} of {} {:?} to {subject}",
                self.name, self.role_kind, self.role_name
            )
        } else {
            format!(
                "RoleBinding {:?} of {} {:?} to {subject}",
                format!("{}/{}", self.name, self.namespace),
                self.role_kind,
                self.role_name
            )
        }
    }
}

/// Everything RBAC reads: roles by `(namespace, name)`, cluster roles by name, bindings by
/// namespace. Shared as `Arc`s; a write swaps the entry, readers never copy.
#[derive(Debug, Default)]
pub struct RbacState {
    roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    /// Namespace → name → binding.
    role_bindings: HashMap<String, HashMap<String, Arc<Binding>>>,
    cluster_role_bindings: HashMap<String, Arc<Binding>>,
}

impl RbacState {
    /// Adds or replaces the object stored at `key` (one of the four RBAC resources).
    pub fn put(&mut self, key: &str, obj: &Value) {
        let name = crate::object::name(obj).to_owned();
        let namespace = crate::object::namespace(obj).to_owned();
        match kind_of(key) {
            Some(RbacKind::Role) => {
                self.roles
                    .insert((namespace, name), Arc::new(PolicyRule::rules_of(obj)));
            }
            Some(RbacKind::ClusterRole) => {
                self.cluster_roles
                    .insert(name, Arc::new(PolicyRule::rules_of(obj)));
            }
            Some(RbacKind::RoleBinding) => {
                self.role_bindings
                    .entry(namespace)
                    .or_default()
                    .insert(name, Arc::new(Binding::from_json(obj)));
            }
            Some(RbacKind::ClusterRoleBinding) => {
                self.cluster_role_bindings
                    .insert(name, Arc::new(Binding::from_json(obj)));
            }
            None => {}
        }
    }

    /// Removes the object stored at `key`.
    pub fn delete(&mut self, key: &str) {
        let Some(kind) = kind_of(key) else { return };
        let mut parts = key.rsplit('/');
        let name = parts.next().unwrap_or("").to_owned();
        let namespace = parts.next().unwrap_or("").to_owned();
        match kind {
            RbacKind::Role => {
                self.roles.remove(&(namespace, name));
            }
            RbacKind::ClusterRole => {
                self.cluster_roles.remove(&name);
            }
            RbacKind::RoleBinding => {
                if let Some(m) = self.role_bindings.get_mut(&namespace) {
                    m.remove(&name);
                }
            }
            RbacKind::ClusterRoleBinding => {
                self.cluster_role_bindings.remove(&name);
            }
        }
    }

    fn role_rules(&self, binding: &Binding) -> Option<&Arc<Vec<PolicyRule>>> {
        match binding.role_kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&binding.role_name),
            "Role" if !binding.namespace.is_empty() => self
                .roles
                .get(&(binding.namespace.clone(), binding.role_name.clone())),
            _ => None,
        }
    }

    /// Upstream's `VisitRulesFor`: the cluster role bindings, then the namespace's role
    /// bindings; `visit` returns `false` to stop.
    pub fn visit_rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
        mut visit: impl FnMut(&Binding, &Subject, &PolicyRule) -> bool,
    ) {
        let namespaced = (!namespace.is_empty())
            .then(|| self.role_bindings.get(namespace))
            .flatten();
        let bindings = self
            .cluster_role_bindings
            .values()
            .chain(namespaced.into_iter().flat_map(|m| m.values()));
        for binding in bindings {
            let Some(subject) = binding.subject_for(user) else {
                continue;
            };
            let Some(rules) = self.role_rules(binding) else {
                continue;
            };
            for rule in rules.iter() {
                if !visit(binding, subject, rule) {
                    return;
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
enum RbacKind {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

fn kind_of(key: &str) -> Option<RbacKind> {
    // Longest prefixes first: `clusterroles/` is not a prefix of `clusterrolebindings/`,
    // but be explicit.
    [
        (
            CLUSTER_ROLE_BINDINGS.storage_prefix(None),
            RbacKind::ClusterRoleBinding,
        ),
        (CLUSTER_ROLES.storage_prefix(None), RbacKind::ClusterRole),
        (ROLE_BINDINGS.storage_prefix(None), RbacKind::RoleBinding),
        (ROLES.storage_prefix(None), RbacKind::Role),
    ]
    .into_iter()
    .find(|(prefix, _)| key.starts_with(prefix.as_str()))
    .map(|(_, k)| k)
}

/// The RBAC authorizer over a shared [`RbacState`].
#[derive(Debug, Default, Clone)]
pub struct RbacAuthorizer {
    /// Written by the watch task, read (briefly, never across an await) by every request.
    state: Arc<RwLock<RbacState>>,
}

impl RbacAuthorizer {
    /// An authorizer over an empty state (tests fill it with [`RbacAuthorizer::put`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an object, as the watch would.
    pub fn put(&self, key: &str, obj: &Value) {
        if let Ok(mut s) = self.state.write() {
            s.put(key, obj);
        }
    }

    /// Lists the RBAC objects of `storage` into the state; then, in the background until
    /// `shutdown`, follows their changes (relisting if the watch falls behind compaction).
    pub async fn sync_from(
        &self,
        storage: Arc<dyn Storage>,
        shutdown: CancellationToken,
    ) -> Result<tokio::task::JoinHandle<()>, storage::Error> {
        let revision = self.relist(storage.as_ref()).await?;
        let this = self.clone();
        Ok(tokio::spawn(async move {
            let mut after = revision;
            loop {
                let result = tokio::select! {
                    () = shutdown.cancelled() => return,
                    r = this.follow(storage.as_ref(), after) => r,
                };
                if let Err(e) = result {
                    tracing::debug!(error = %e, "RBAC watch ended; relisting");
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
                }
                match this.relist(storage.as_ref()).await {
                    Ok(rev) => after = rev,
                    Err(e) => tracing::warn!(error = %e, "RBAC relist failed"),
                }
            }
        }))
    }

    async fn relist(&self, storage: &dyn Storage) -> Result<i64, storage::Error> {
        let mut fresh = RbacState::default();
        let mut revision = 0;
        for def in [
            &ROLES,
            &CLUSTER_ROLES,
            &ROLE_BINDINGS,
            &CLUSTER_ROLE_BINDINGS,
        ] {
            let list = storage
                .list(ListOptions {
                    prefix: def.storage_prefix(None),
                    revision: (revision > 0).then_some(revision),
                    ..ListOptions::default()
                })
                .await?;
            revision = list.revision;
            for kv in &list.kvs {
                put_kv(&mut fresh, kv);
            }
        }
        if let Ok(mut s) = self.state.write() {
            *s = fresh;
        }
        Ok(revision)
    }

    async fn follow(&self, storage: &dyn Storage, after: i64) -> Result<(), storage::Error> {
        let prefix = common_prefix();
        let mut events = storage.watch(&prefix, after).await?;
        while let Some(event) = events.next().await {
            let event = event?;
            let Ok(mut s) = self.state.write() else {
                return Ok(());
            };
            match &event {
                Event::Put { kv, .. } => put_kv(&mut s, kv),
                Event::Delete { prev, .. } => s.delete(&prev.key),
                Event::Progress { .. } => {}
            }
        }
        Ok(())
    }

    /// Reads the state (the guard is dropped before returning).
    pub fn with_state<T>(&self, f: impl FnOnce(&RbacState) -> T) -> Option<T> {
        self.state.read().ok().map(|s| f(&s))
    }
}

/// The storage prefix all four RBAC resources share.
fn common_prefix() -> String {
    let a = ROLES.storage_prefix(None);
    let b = CLUSTER_ROLE_BINDINGS.storage_prefix(None);
    let len = a
        .char_indices()
        .zip(b.chars())
        .take_while(|((_, x), y)| x == y)
        .count();
    let common = &a[..len];
    // Cut back to the last `/` so the prefix is a directory.
    match common.rfind('/') {
        Some(i) => common[..=i].to_owned(),
        None => String::new(),
    }
}

fn put_kv(state: &mut RbacState, kv: &KeyValue) {
    match serde_json::from_slice::<Value>(&kv.value) {
        Ok(obj) => state.put(&kv.key, &obj),
        Err(e) => tracing::warn!(key = %kv.key, error = %e, "undecodable RBAC object"),
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        // Upstream's privileged-group authorizer answers first, with no reason.
        if attrs.user.in_group(SYSTEM_MASTERS) {
            return Decision::Allow(String::new());
        }
        let namespace = match attrs.target {
            Target::Resource { namespace, .. } => namespace,
            Target::NonResource { .. } => "",
        };
        let reason = self.with_state(|s| {
            let mut reason = None;
            s.visit_rules_for(attrs.user, namespace, |binding, subject, rule| {
                if rule_allows(attrs, rule) {
                    reason = Some(format!("RBAC: allowed by {}", binding.describe(subject)));
                    return false;
                }
                true
            });
            reason
        });
        match reason.flatten() {
            Some(reason) => Decision::Allow(reason),
            None => Decision::NoOpinion(String::new()),
        }
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        let mut rules = Rules::default();
        if user.in_group(SYSTEM_MASTERS) {
            rules.resource_rules.push(ResourceRule {
                verbs: vec!["*".to_owned()],
                api_groups: vec!["*".to_owned()],
                resources: vec!["*".to_owned()],
                resource_names: Vec::new(),
            });
            rules.non_resource_rules.push(NonResourceRule {
                verbs: vec!["*".to_owned()],
                non_resource_urls: vec!["*".to_owned()],
            });
        }
        for rule in self.policy_rules_for(user, namespace) {
            if rule.non_resource_urls.is_empty() {
                rules.resource_rules.push(ResourceRule {
                    verbs: rule.verbs,
                    api_groups: rule.api_groups,
                    resources: rule.resources,
                    resource_names: rule.resource_names,
                });
            } else {
                rules.non_resource_rules.push(NonResourceRule {
                    verbs: rule.verbs,
                    non_resource_urls: rule.non_resource_urls,
                });
            }
        }
        rules
    }
}

impl RbacAuthorizer {
    /// Every rule `user` holds in `namespace` (cluster-wide ones included), as upstream's
    /// `RulesFor`; `system:masters` holds `*` on everything.
    pub fn policy_rules_for(&self, user: &UserInfo, namespace: &str) -> Vec<PolicyRule> {
        let mut out = Vec::new();
        if user.in_group(SYSTEM_MASTERS) {
            out.push(PolicyRule {
                verbs: vec!["*".to_owned()],
                api_groups: vec!["*".to_owned()],
                resources: vec!["*".to_owned()],
                ..PolicyRule::default()
            });
            out.push(PolicyRule {
                verbs: vec!["*".to_owned()],
                non_resource_urls: vec!["*".to_owned()],
                ..PolicyRule::default()
            });
        }
        self.with_state(|s| {
            s.visit_rules_for(user, namespace, |_, _, rule| {
                out.push(rule.clone());
                true
            });
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::user::ALL_AUTHENTICATED;

    fn key(def: &crate::registry::resource::ResourceDef, ns: &str, name: &str) -> String {
        def.storage_key(ns, name)
    }

    fn authorizer() -> RbacAuthorizer {
        let a = RbacAuthorizer::new();
        a.put(
            &key(&ROLES, "ns1", "pod-reader"),
            &json!({"metadata": {"name": "pod-reader", "namespace": "ns1"},
                    "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]}),
        );
        a.put(
            &key(&ROLE_BINDINGS, "ns1", "ci-reads"),
            &json!({"metadata": {"name": "ci-reads", "namespace": "ns1"},
                    "roleRef": {"kind": "Role", "name": "pod-reader", "apiGroup": "rbac.authorization.k8s.io"},
                    "subjects": [{"kind": "ServiceAccount", "name": "ci"}]}),
        );
        a.put(
            &key(&CLUSTER_ROLES, "", "discovery"),
            &json!({"metadata": {"name": "discovery"},
                    "rules": [{"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*"]}]}),
        );
        a.put(
            &key(&CLUSTER_ROLE_BINDINGS, "", "discovery"),
            &json!({"metadata": {"name": "discovery"},
                    "roleRef": {"kind": "ClusterRole", "name": "discovery", "apiGroup": "rbac.authorization.k8s.io"},
                    "subjects": [{"kind": "Group", "name": ALL_AUTHENTICATED}]}),
        );
        a
    }

    fn pods<'a>(user: &'a UserInfo, verb: &'a str, namespace: &'a str) -> Attributes<'a> {
        Attributes {
            user,
            verb,
            target: Target::Resource {
                namespace,
                group: "",
                resource: "pods",
                subresource: "",
                name: "",
            },
        }
    }

    #[test]
    fn bindings_grant_their_roles_to_their_subjects_only() {
        let a = authorizer();
        let ci = UserInfo::service_account("ns1", "ci", "u");
        let other = UserInfo::service_account("ns2", "ci", "u");
        let admin = UserInfo::admin();
        assert_eq!(
            a.authorize(&pods(&ci, "list", "ns1")),
            Decision::Allow(
                r#"RBAC: allowed by RoleBinding "ci-reads/ns1" of Role "pod-reader" to ServiceAccount "ci/ns1""#
                    .to_owned()
            )
        );
        assert!(matches!(
            a.authorize(&pods(&ci, "list", "ns2")),
            Decision::NoOpinion(_)
        ));
        assert!(matches!(
            a.authorize(&pods(&ci, "create", "ns1")),
            Decision::NoOpinion(_)
        ));
        assert!(matches!(
            a.authorize(&pods(&ci, "list", "")),
            Decision::NoOpinion(_)
        ));
        assert!(matches!(
            a.authorize(&pods(&other, "list", "ns1")),
            Decision::NoOpinion(_)
        ));
        assert_eq!(
            a.authorize(&pods(&admin, "delete", "x")),
            Decision::Allow(String::new())
        );
        let discovery = Attributes {
            user: &ci,
            verb: "get",
            target: Target::NonResource { path: "/api/v1" },
        };
        assert_eq!(
            a.authorize(&discovery),
            Decision::Allow(
                r#"RBAC: allowed by ClusterRoleBinding "discovery" of ClusterRole "discovery" to Group "system:authenticated""#
                    .to_owned()
            )
        );
        // A deleted binding stops granting.
        a.state
            .write()
            .expect("lock")
            .delete(&key(&ROLE_BINDINGS, "ns1", "ci-reads"));
        assert!(matches!(
            a.authorize(&pods(&ci, "list", "ns1")),
            Decision::NoOpinion(_)
        ));
    }

    #[test]
    fn rules_for_lists_cluster_and_namespace_rules() {
        let a = authorizer();
        let ci = UserInfo::service_account("ns1", "ci", "u");
        let rules = a.rules_for(&ci, "ns1");
        assert_eq!(rules.resource_rules.len(), 1);
        assert_eq!(rules.resource_rules[0].verbs, ["get", "list", "watch"]);
        assert_eq!(rules.non_resource_rules.len(), 1);
        assert!(a.rules_for(&ci, "ns2").resource_rules.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn follows_the_store() {
        let storage: Arc<dyn Storage> = Arc::new(crate::storage::MemoryStorage::new());
        let role = json!({"metadata": {"name": "r", "namespace": "ns1"},
                          "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]});
        storage
            .create(
                &key(&ROLES, "ns1", "r"),
                serde_json::to_vec(&role).expect("json").into(),
            )
            .await
            .expect("created");
        let a = RbacAuthorizer::new();
        let shutdown = CancellationToken::new();
        let task = a
            .sync_from(Arc::clone(&storage), shutdown.clone())
            .await
            .expect("synced");
        assert_eq!(a.with_state(|s| s.roles.len()), Some(1));
        let binding = json!({"metadata": {"name": "b", "namespace": "ns1"},
                             "roleRef": {"kind": "Role", "name": "r"},
                             "subjects": [{"kind": "User", "name": "bob"}]});
        storage
            .create(
                &key(&ROLE_BINDINGS, "ns1", "b"),
                serde_json::to_vec(&binding).expect("json").into(),
            )
            .await
            .expect("created");
        let bob = UserInfo {
            username: "bob".to_owned(),
            ..UserInfo::default()
        };
        let mut allowed = false;
        for _ in 0..100 {
            if matches!(a.authorize(&pods(&bob, "get", "ns1")), Decision::Allow(_)) {
                allowed = true;
                break;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(allowed, "the watch delivered the binding");
        shutdown.cancel();
        let _ = task.await;
    }
}
