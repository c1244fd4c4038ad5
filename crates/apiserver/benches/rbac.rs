//! RBAC authorization benchmarks: one decision against 1,000 Roles and 1,000 RoleBindings (10 per namespace in 100 namespaces), 100 ClusterRoles and ClusterRoleBindings, and the bootstrap policy — allowed by a namespaced binding, allowed by a cluster binding, denied after visiting every applicable binding, and `system:masters`.
//!
//! Run: `cargo bench -p kcm-apiserver --bench rbac`.

use criterion::{Criterion, criterion_group, criterion_main};
use kcm_apiserver::auth::authorizer::{Attributes, Authorizer, Decision, Target};
use kcm_apiserver::auth::bootstrap_policy::{cluster_role_bindings, cluster_roles};
use kcm_apiserver::auth::rbac::RbacAuthorizer;
use kcm_apiserver::auth::user::UserInfo;
use kcm_apiserver::object;
use kcm_apiserver::resources::rbac::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES};
use serde_json::json;

const NAMESPACES: usize = 100;
const PER_NAMESPACE: usize = 10;
const CLUSTER: usize = 100;

fn authorizer() -> RbacAuthorizer {
    let a = RbacAuthorizer::new();
    for role in cluster_roles() {
        a.put(&CLUSTER_ROLES.storage_key("", object::name(&role)), &role);
    }
    for binding in cluster_role_bindings() {
        a.put(
            &CLUSTER_ROLE_BINDINGS.storage_key("", object::name(&binding)),
            &binding,
        );
    }
    for ns in 0..NAMESPACES {
        let ns = format!("ns-{ns}");
        for i in 0..PER_NAMESPACE {
            let name = format!("role-{i}");
            let role = json!({"metadata": {"name": name, "namespace": ns}, "rules": [
                {"apiGroups": [""], "resources": [format!("configmaps-{i}"), "secrets"], "verbs": ["get", "list"]},
                {"apiGroups": ["apps"], "resources": ["deployments", "deployments/scale"], "verbs": ["get", "update"]},
                {"apiGroups": [""], "resources": ["pods"], "resourceNames": [format!("pod-{i}")], "verbs": ["get", "list", "watch"]},
            ]});
            a.put(&ROLES.storage_key(&ns, &name), &role);
            let binding = json!({"metadata": {"name": format!("binding-{i}"), "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [
                {"kind": "ServiceAccount", "name": format!("sa-{i}"), "namespace": ns},
                {"kind": "User", "name": format!("user-{i}")},
                {"kind": "Group", "name": format!("team-{i}")},
            ]});
            a.put(
                &ROLE_BINDINGS.storage_key(&ns, &format!("binding-{i}")),
                &binding,
            );
        }
    }
    for i in 0..CLUSTER {
        let name = format!("cluster-role-{i}");
        let role = json!({"metadata": {"name": name}, "rules": [
            {"apiGroups": ["example.com"], "resources": [format!("widgets-{i}")], "verbs": ["get", "list", "watch"]},
        ]});
        a.put(&CLUSTER_ROLES.storage_key("", &name), &role);
        let binding = json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "User", "name": format!("cluster-user-{i}")}]});
        a.put(&CLUSTER_ROLE_BINDINGS.storage_key("", &name), &binding);
    }
    a
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        username: name.to_owned(),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        ..UserInfo::default()
    }
}

fn bench(c: &mut Criterion) {
    let a = authorizer();
    let decide =
        |user: &UserInfo, verb: &str, namespace: &str, group: &str, resource: &str, name: &str| {
            a.authorize(&Attributes {
                user,
                verb,
                target: Target::Resource {
                    namespace,
                    group,
                    resource,
                    subresource: "",
                    name,
                },
            })
        };
    let sa = UserInfo::service_account("ns-57", "sa-9", "uid");
    let bob = user("user-3", &["team-3", "system:authenticated"]);
    let widget = user("cluster-user-99", &["system:authenticated"]);
    let nobody = user("nobody", &["devs", "system:authenticated"]);
    let admin = UserInfo::admin();
    assert!(matches!(
        decide(&sa, "get", "ns-57", "", "pods", "pod-9"),
        Decision::Allow(_)
    ));
    assert!(matches!(
        decide(&bob, "update", "ns-12", "apps", "deployments", "d"),
        Decision::Allow(_)
    ));
    assert!(matches!(
        decide(&widget, "list", "", "example.com", "widgets-99", ""),
        Decision::Allow(_)
    ));
    assert!(!matches!(
        decide(&nobody, "list", "ns-57", "", "pods", ""),
        Decision::Allow(_)
    ));

    let mut g = c.benchmark_group("rbac_authorize_1000_roles");
    g.bench_function("allow/service_account_role_binding", |b| {
        b.iter(|| decide(&sa, "get", "ns-57", "", "pods", "pod-9"))
    });
    g.bench_function("allow/user_via_group_role_binding", |b| {
        b.iter(|| decide(&bob, "update", "ns-12", "apps", "deployments", "d"))
    });
    g.bench_function("allow/cluster_role_binding", |b| {
        b.iter(|| decide(&widget, "list", "", "example.com", "widgets-99", ""))
    });
    g.bench_function("deny/no_binding_matches", |b| {
        b.iter(|| decide(&nobody, "list", "ns-57", "", "pods", ""))
    });
    g.bench_function("allow/system_masters", |b| {
        b.iter(|| decide(&admin, "delete", "ns-1", "", "secrets", "s"))
    });
    g.bench_function("rules_for/service_account", |b| {
        b.iter(|| a.rules_for(&sa, "ns-57"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
