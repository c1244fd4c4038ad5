//! The bootstrap ClusterRoles and ClusterRoleBindings every cluster starts with (upstream's `bootstrappolicy.ClusterRoles()` / `ClusterRoleBindings()`), created at start when missing.

use serde_json::{Value, json};

use crate::auth::user::{
    ALL_AUTHENTICATED, ALL_SERVICE_ACCOUNTS, ALL_UNAUTHENTICATED, SYSTEM_MASTERS,
};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "delete",
    "deletecollection",
    "patch",
    "update",
];

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn metadata(name: &str, extra_labels: &[(&str, &str)]) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert(
        "kubernetes.io/bootstrapping".to_owned(),
        "rbac-defaults".into(),
    );
    for (k, v) in extra_labels {
        labels.insert((*k).to_owned(), (*v).into());
    }
    json!({
        "name": name,
        "labels": labels,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata(name, labels),
        "rules": rules,
    })
}

/// The rules of `system:aggregate-to-view` (upstream's, for the resources kcm serves).
fn view_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            &[""],
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        rule(
            READ,
            &[""],
            &[
                "bindings",
                "events",
                "limitranges",
                "namespaces/status",
                "pods/log",
                "pods/status",
                "replicationcontrollers/status",
                "resourcequotas",
                "resourcequotas/status",
            ],
        ),
        rule(READ, &[""], &["namespaces"]),
        rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
        rule(
            READ,
            &["apps"],
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
        ),
        rule(
            READ,
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            &["batch"],
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        ),
        rule(
            READ,
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
    ]
}

/// The rules of `system:aggregate-to-edit`.
fn edit_rules() -> Vec<Value> {
    vec![
        rule(&["impersonate"], &[""], &["serviceaccounts"]),
        rule(
            WRITE,
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(
            WRITE,
            &[""],
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
        rule(
            WRITE,
            &["apps"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
        ),
        rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
        rule(WRITE, &["batch"], &["cronjobs", "jobs"]),
        rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
        rule(
            WRITE,
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
        ),
        rule(WRITE, &["discovery.k8s.io"], &["endpointslices"]),
        rule(
            READ,
            &[""],
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
        ),
    ]
}

/// The rules of `system:aggregate-to-admin`.
fn admin_rules() -> Vec<Value> {
    vec![
        rule(
            READ_WRITE,
            &["rbac.authorization.k8s.io"],
            &["roles", "rolebindings"],
        ),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
        ),
    ]
}

/// An aggregated role (`admin`, `edit`, `view`): its aggregation rule, and the rules the
/// clusterrole-aggregation controller computes, filled in up front so the role works
/// before the controller first runs.
fn aggregated(name: &str, labels: &[(&str, &str)], selects: &[&str], rules: Vec<Value>) -> Value {
    let mut role = cluster_role(name, labels, rules);
    role["aggregationRule"] = json!({"clusterRoleSelectors": selects
        .iter()
        .map(|s| json!({"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{s}"): "true"}}))
        .collect::<Vec<_>>()});
    role
}

/// Upstream's bootstrap ClusterRoles, for what kcm serves, then the controller roles
/// ([`crate::auth::controller_policy`]).
pub fn cluster_roles() -> Vec<Value> {
    let mut roles = base_cluster_roles();
    roles.extend(crate::auth::controller_policy::controller_roles());
    roles
}

fn base_cluster_roles() -> Vec<Value> {
    let discovery_urls = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ];
    let view = view_rules();
    let edit: Vec<Value> = edit_rules().into_iter().chain(view_rules()).collect();
    let admin: Vec<Value> = admin_rules().into_iter().chain(edit.clone()).collect();
    vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        aggregated("admin", &[], &["admin"], admin),
        aggregated(
            "edit",
            &[("rbac.authorization.k8s.io/aggregate-to-admin", "true")],
            &["edit"],
            edit,
        ),
        aggregated(
            "view",
            &[("rbac.authorization.k8s.io/aggregate-to-edit", "true")],
            &["view"],
            view,
        ),
        cluster_role(
            "system:aggregate-to-admin",
            &[("rbac.authorization.k8s.io/aggregate-to-admin", "true")],
            admin_rules(),
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[("rbac.authorization.k8s.io/aggregate-to-edit", "true")],
            edit_rules(),
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[("rbac.authorization.k8s.io/aggregate-to-view", "true")],
            view_rules(),
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        cluster_role(
            "system:discovery",
            &[],
            vec![url_rule(&["get"], &discovery_urls)],
        ),
        cluster_role(
            "system:monitoring",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/metrics",
                    "/metrics/slis",
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/livez/*",
                    "/readyz/*",
                    "/healthz/*",
                ],
            )],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![url_rule(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            &[],
            vec![url_rule(
                &["get"],
                &["/.well-known/openid-configuration", "/openid/v1/jwks"],
            )],
        ),
        // For bootstrapping a node's client certificate: create a CSR and watch it be signed.
        cluster_role(
            "system:node-bootstrapper",
            &[],
            vec![rule(
                &["create", "get", "list", "watch"],
                &[CERTIFICATES],
                &["certificatesigningrequests"],
            )],
        ),
        // Authentication and authorization delegation (non-mutating creates).
        cluster_role(
            "system:auth-delegator",
            &[],
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
        ),
        // Holding these makes the CSR approving controller approve a node client CSR (from
        // anyone, or from the node itself).
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            &[],
            vec![rule(
                &["create"],
                &[CERTIFICATES],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            &[],
            vec![rule(
                &["create"],
                &[CERTIFICATES],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        signer_approver("legacy-unknown", "kubernetes.io/legacy-unknown"),
        signer_approver("kubelet-serving", "kubernetes.io/kubelet-serving"),
        signer_approver(
            "kube-apiserver-client",
            "kubernetes.io/kube-apiserver-client",
        ),
        signer_approver(
            "kube-apiserver-client-kubelet",
            "kubernetes.io/kube-apiserver-client-kubelet",
        ),
    ]
}

/// The certificates API group.
const CERTIFICATES: &str = "certificates.k8s.io";

/// `system:certificates.k8s.io:<name>-approver`: may approve CSRs for `signer`.
fn signer_approver(name: &str, signer: &str) -> Value {
    cluster_role(
        &format!("system:certificates.k8s.io:{name}-approver"),
        &[],
        vec![json!({
            "verbs": ["approve"],
            "apiGroups": [CERTIFICATES],
            "resources": ["signers"],
            "resourceNames": [signer],
        })],
    )
}

fn binding(name: &str, role: &str, subjects: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(name, &[]),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

fn group(name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name})
}

/// Upstream's bootstrap ClusterRoleBindings, for the roles above, then the controller
/// roles' bindings.
pub fn cluster_role_bindings() -> Vec<Value> {
    let mut bindings = base_cluster_role_bindings();
    bindings.extend(crate::auth::controller_policy::controller_role_bindings());
    bindings
}

fn base_cluster_role_bindings() -> Vec<Value> {
    vec![
        binding(
            "cluster-admin",
            "cluster-admin",
            vec![group(SYSTEM_MASTERS)],
        ),
        binding(
            "system:basic-user",
            "system:basic-user",
            vec![group(ALL_AUTHENTICATED)],
        ),
        binding(
            "system:discovery",
            "system:discovery",
            vec![group(ALL_AUTHENTICATED)],
        ),
        binding(
            "system:monitoring",
            "system:monitoring",
            vec![group("system:monitoring")],
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            vec![group(ALL_AUTHENTICATED), group(ALL_UNAUTHENTICATED)],
        ),
        binding(
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            vec![group(ALL_SERVICE_ACCOUNTS)],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::rbac_rule::{PolicyRule, covers};

    #[test]
    fn roles_nest_as_upstreams() {
        let roles = cluster_roles();
        let rules_of = |name: &str| {
            let role = roles
                .iter()
                .find(|r| r["metadata"]["name"] == name)
                .expect("role");
            PolicyRule::rules_of(role)
        };
        // admin ⊇ edit ⊇ view, and none reaches cluster-admin.
        assert!(covers(&rules_of("admin"), &rules_of("edit")).0);
        assert!(covers(&rules_of("edit"), &rules_of("view")).0);
        assert!(!covers(&rules_of("view"), &rules_of("edit")).0);
        assert!(!covers(&rules_of("admin"), &rules_of("cluster-admin")).0);
        for b in cluster_role_bindings() {
            let role = b["roleRef"]["name"].as_str().expect("role");
            assert!(
                roles.iter().any(|r| r["metadata"]["name"] == role),
                "{role} exists"
            );
        }
    }

    #[test]
    fn certificate_roles_grant_what_the_approver_and_signers_check() {
        let roles = cluster_roles();
        let grants = |name: &str, rule: Value| {
            let role = roles
                .iter()
                .find(|r| r["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("{name} exists"));
            covers(&PolicyRule::rules_of(role), &[PolicyRule::from_json(&rule)]).0
        };
        assert!(grants(
            "system:node-bootstrapper",
            json!({"verbs": ["create", "watch"], "apiGroups": [CERTIFICATES], "resources": ["certificatesigningrequests"]})
        ));
        assert!(!grants(
            "system:node-bootstrapper",
            json!({"verbs": ["update"], "apiGroups": [CERTIFICATES], "resources": ["certificatesigningrequests/approval"]})
        ));
        for sub in ["nodeclient", "selfnodeclient"] {
            assert!(grants(
                &format!("system:certificates.k8s.io:certificatesigningrequests:{sub}"),
                json!({"verbs": ["create"], "apiGroups": [CERTIFICATES], "resources": [format!("certificatesigningrequests/{sub}")]})
            ));
        }
        let approve = |signer: &str| json!({"verbs": ["approve"], "apiGroups": [CERTIFICATES], "resources": ["signers"], "resourceNames": [signer]});
        assert!(grants(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            approve("kubernetes.io/kube-apiserver-client")
        ));
        assert!(!grants(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            approve("kubernetes.io/kubelet-serving")
        ));
    }
}
