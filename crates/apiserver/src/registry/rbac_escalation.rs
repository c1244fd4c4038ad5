//! RBAC's escalation check on writes of Roles, ClusterRoles and their bindings: a user may only grant what they hold, unless allowed to `escalate` or `bind` (upstream's `policybased` storage with `ConfirmNoEscalation`).

use serde_json::Value;

use crate::auth::authorizer::{Attributes, Decision, Rules, Target};
use crate::auth::rbac_rule::{PolicyRule, covers};
use crate::auth::user::{SYSTEM_MASTERS, UserInfo};
use crate::error::{ApiError, Result};
use crate::object;
use crate::registry::Registry;
use crate::registry::options::WriteOptions;
use crate::registry::resource::ResourceDef;
use crate::registry::strategy::Grants;
use crate::resources::rbac::{CLUSTER_ROLES, ROLES};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

impl Registry {
    /// Refuses (403) a write of `obj` that would grant `opts.user` rights it lacks. The
    /// server's own writes (no user) and `system:masters` are exempt, as upstream's
    /// `EscalationAllowed`.
    pub(crate) async fn confirm_no_escalation(
        &self,
        def: &ResourceDef,
        obj: &Value,
        opts: &WriteOptions,
    ) -> Result<()> {
        let grants = def.strategy.grants();
        if grants == Grants::Nothing {
            return Ok(());
        }
        let Some(user) = opts.user.as_deref() else {
            return Ok(());
        };
        if user.in_group(SYSTEM_MASTERS) {
            return Ok(());
        }
        let namespace = if def.namespaced {
            object::namespace(obj)
        } else {
            ""
        };
        let name = object::name(obj);
        let gr = def.group_resource();
        let requested = if grants == Grants::Rules {
            // RoleEscalationAuthorized: the `escalate` verb on the role.
            if self.allowed(user, "escalate", namespace, &def.plural, name) {
                return Ok(());
            }
            PolicyRule::rules_of(obj)
        } else {
            let role_kind = object::str_at(obj, &["roleRef", "kind"]).unwrap_or("");
            let role_name = object::str_at(obj, &["roleRef", "name"]).unwrap_or("");
            let (role_def, role_ns) = match role_kind {
                "ClusterRole" => (&CLUSTER_ROLES, ""),
                _ => (&ROLES, namespace),
            };
            // BindingAuthorized: the `bind` verb on the referenced role.
            if self.allowed(user, "bind", role_ns, &role_def.plural, role_name) {
                return Ok(());
            }
            let role = self
                .get(role_def, role_ns, role_name)
                .await
                .map_err(|e| ApiError::forbidden(gr, name, &e.message))?;
            PolicyRule::rules_of(&role)
        };
        let owner = policy_rules(&self.authorizer().rules_for(user, namespace));
        let (ok, missing) = covers(&owner, &requested);
        if ok {
            return Ok(());
        }
        let missing: Vec<String> = missing.iter().map(describe).collect();
        Err(ApiError::forbidden(
            gr,
            name,
            &format!(
                "user {:?} (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
                user.username,
                user.groups,
                missing.join("\n")
            ),
        ))
    }

    fn allowed(
        &self,
        user: &UserInfo,
        verb: &str,
        namespace: &str,
        resource: &str,
        name: &str,
    ) -> bool {
        let attrs = Attributes {
            user,
            verb,
            target: Target::Resource {
                namespace,
                group: RBAC_GROUP,
                resource,
                subresource: "",
                name,
            },
        };
        matches!(self.authorizer().authorize(&attrs), Decision::Allow(_))
    }
}

/// A rules review's rules as policy rules.
fn policy_rules(rules: &Rules) -> Vec<PolicyRule> {
    let resource = rules.resource_rules.iter().map(|r| PolicyRule {
        verbs: r.verbs.clone(),
        api_groups: r.api_groups.clone(),
        resources: r.resources.clone(),
        resource_names: r.resource_names.clone(),
        non_resource_urls: Vec::new(),
    });
    let non_resource = rules.non_resource_rules.iter().map(|r| PolicyRule {
        verbs: r.verbs.clone(),
        non_resource_urls: r.non_resource_urls.clone(),
        ..PolicyRule::default()
    });
    resource.chain(non_resource).collect()
}

/// A rule as upstream's `PolicyRule.String` writes it.
fn describe(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    let list = |v: &[String]| {
        format!(
            "[{}]",
            v.iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(" ")
        )
    };
    if !rule.api_groups.is_empty() {
        parts.push(format!("APIGroups:{}", list(&rule.api_groups)));
    }
    if !rule.resources.is_empty() {
        parts.push(format!("Resources:{}", list(&rule.resources)));
    }
    if !rule.resource_names.is_empty() {
        parts.push(format!("ResourceNames:{}", list(&rule.resource_names)));
    }
    if !rule.non_resource_urls.is_empty() {
        parts.push(format!("NonResourceURLs:{}", list(&rule.non_resource_urls)));
    }
    parts.push(format!("Verbs:{}", list(&rule.verbs)));
    format!("{{{}}}", parts.join(", "))
}
