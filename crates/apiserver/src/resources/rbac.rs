//! rbac.authorization.k8s.io/v1 roles, rolebindings, clusterroles (the aggregation rule is stored; the controller that aggregates is kube-controller-manager's), clusterrolebindings.
//!
//! The objects are stored and validated as upstream; the RBAC authorizer
//! ([`crate::auth::rbac`]) reads them through a watch. The bootstrap ClusterRoles and
//! bindings ([`crate::auth::bootstrap_policy`]), and the namespaced controller Roles and
//! RoleBindings ([`crate::auth::controller_policy`]), are created at start when missing.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::Value;

use crate::registry::resource::ResourceDef;
use crate::registry::strategy::decode_as;
use crate::resources::role::{ClusterRoleStrategy, RoleStrategy};
use crate::resources::role_binding::{BindingStrategy, default_binding};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// rbac.authorization.k8s.io/v1 roles.
pub static ROLES: ResourceDef = ResourceDef::of::<Role>()
    .bootstrap(|_| crate::auth::controller_policy::controller_namespaced_roles())
    .decode_with(decode_role)
    .strategy(&RoleStrategy)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// rbac.authorization.k8s.io/v1 rolebindings.
pub static ROLE_BINDINGS: ResourceDef = ResourceDef::of::<RoleBinding>()
    .bootstrap(|_| crate::auth::controller_policy::controller_namespaced_role_bindings())
    .decode_with(decode_role_binding)
    .strategy(&BindingStrategy { namespaced: true })
    .printer(printers::ROLE_BINDING)
    .merge_schema(&kinds::METADATA_ONLY);

/// rbac.authorization.k8s.io/v1 clusterroles.
pub static CLUSTER_ROLES: ResourceDef = ResourceDef::of::<ClusterRole>()
    .bootstrap(|_| crate::auth::bootstrap_policy::cluster_roles())
    .reconcile_bootstrap(crate::auth::bootstrap_reconcile::reconcile_role)
    .decode_with(decode_cluster_role)
    .strategy(&ClusterRoleStrategy)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// rbac.authorization.k8s.io/v1 clusterrolebindings.
pub static CLUSTER_ROLE_BINDINGS: ResourceDef = ResourceDef::of::<ClusterRoleBinding>()
    .bootstrap(|_| crate::auth::bootstrap_policy::cluster_role_bindings())
    .reconcile_bootstrap(crate::auth::bootstrap_reconcile::reconcile_binding)
    .decode_with(decode_cluster_role_binding)
    .strategy(&BindingStrategy { namespaced: false })
    .printer(printers::CLUSTER_ROLE_BINDING)
    .merge_schema(&kinds::METADATA_ONLY);

/// A rule's `verbs` is required in the typed form: a missing list reads as empty, as Go's
/// nil slice, so that validation answers 422.
fn default_rules(obj: &mut Value) {
    let rules = obj.get_mut("rules").and_then(Value::as_array_mut);
    for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
        rule.entry("verbs")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
}

fn decode_role(mut obj: Value) -> Result<Value, String> {
    default_rules(&mut obj);
    decode_as::<Role>(obj)
}

fn decode_cluster_role(mut obj: Value) -> Result<Value, String> {
    default_rules(&mut obj);
    decode_as::<ClusterRole>(obj)
}

fn decode_role_binding(mut obj: Value) -> Result<Value, String> {
    default_binding(&mut obj);
    decode_as::<RoleBinding>(obj)
}

fn decode_cluster_role_binding(mut obj: Value) -> Result<Value, String> {
    default_binding(&mut obj);
    decode_as::<ClusterRoleBinding>(obj)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn decodes_apply_the_scheme_defaults() {
        let binding = ROLE_BINDINGS
            .decode(
                json!({"metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "r"},
                "subjects": [{"kind": "Group", "name": "devs"}]}),
            )
            .expect("decodes");
        assert_eq!(binding["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(
            binding["subjects"][0]["apiGroup"],
            "rbac.authorization.k8s.io"
        );
        let role = ROLES
            .decode(json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""]}]}))
            .expect("decodes");
        assert_eq!(role["rules"][0]["verbs"], json!([]));
    }
}
