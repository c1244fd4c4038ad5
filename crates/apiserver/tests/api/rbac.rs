//! rbac.authorization.k8s.io/v1 over HTTP: the four kinds' lifecycles, the binding defaults, and roleRef immutability and subject validation as upstream answers them.

use kcm_apiserver::testing::TestServer;
use serde_json::json;

use crate::common::{raw, timed};
use crate::lifecycle::{self, Lifecycle};

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

#[tokio::test]
async fn roles_and_bindings_live_and_default_as_upstream() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let role = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{RBAC}/namespaces/default/roles"),
                object: json!({"metadata": {"name": "reader"},
                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
                patch: json!({"rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]}),
                apply: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": {"name": "reader", "labels": {"team": "a"}},
                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["watch"]}]}),
            },
        )
        .await;
        assert_eq!(role.patched["rules"][0]["resources"], json!(["pods", "pods/log"]));
        assert_eq!(role.applied["rules"], json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["watch"]}]));
        assert_eq!(role.events, ["MODIFIED", "MODIFIED"]);

        let binding = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{RBAC}/clusterrolebindings"),
                object: json!({"metadata": {"name": "ops"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
                    "subjects": [{"kind": "Group", "name": "ops"}, {"kind": "ServiceAccount", "name": "bot", "namespace": "ci"}]}),
                patch: json!({"metadata": {"labels": {"x": "y"}}}),
                apply: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": "ops"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}),
            },
        )
        .await;
        assert_eq!(binding.created["roleRef"]["apiGroup"], "rbac.authorization.k8s.io", "defaulted");
        assert_eq!(binding.created["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
        assert!(binding.created["subjects"][1].get("apiGroup").is_none());
        assert_eq!(binding.applied["subjects"][0]["name"], "alice");

        let cluster_role = json!({"metadata": {"name": "monitoring"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}]}});
        let (code, created) = raw(&client, "POST", &format!("{RBAC}/clusterroles"), "application/json",
            serde_json::to_vec(&cluster_role).expect("json")).await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(created["aggregationRule"], cluster_role["aggregationRule"], "stored");
    })
    .await;
}

#[tokio::test]
async fn role_ref_is_immutable_and_subjects_are_validated() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let path = format!("{RBAC}/namespaces/default/rolebindings");
        let body = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "reader"},
            "subjects": [{"kind": "User", "name": "alice"}]});
        let (code, _) = raw(&client, "POST", &path, "application/json", serde_json::to_vec(&body).expect("json")).await;
        assert_eq!(code, 201);
        let (code, status) = raw(&client, "PATCH", &format!("{path}/b"), "application/merge-patch+json",
            br#"{"roleRef": {"kind": "ClusterRole", "name": "admin"}}"#.to_vec()).await;
        assert_eq!(code, 422, "{status}");
        assert_eq!(
            status["message"],
            r#"RoleBinding.rbac.authorization.k8s.io "b" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"admin"}: cannot change roleRef"#
        );
        let bad = json!({"metadata": {"name": "c"}, "roleRef": {"kind": "Role", "name": "reader"},
            "subjects": [{"kind": "Robot", "name": "r2"}, {"kind": "ServiceAccount", "name": "Bad_Name"}]});
        let (code, status) = raw(&client, "POST", &path, "application/json", serde_json::to_vec(&bad).expect("json")).await;
        assert_eq!(code, 422, "{status}");
        let fields: Vec<&str> = status["details"]["causes"]
            .as_array()
            .expect("causes")
            .iter()
            .filter_map(|c| c["field"].as_str())
            .collect();
        assert_eq!(fields, ["subjects[0].kind", "subjects[1].name"]);
        let cluster = json!({"metadata": {"name": "c"}, "roleRef": {"kind": "Role", "name": "reader"}});
        let (code, status) = raw(&client, "POST", &format!("{RBAC}/clusterrolebindings"), "application/json",
            serde_json::to_vec(&cluster).expect("json")).await;
        assert_eq!(code, 422);
        assert!(status["message"].as_str().is_some_and(|m| m.contains(
            r#"roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole""#)), "{status}");
    })
    .await;
}
