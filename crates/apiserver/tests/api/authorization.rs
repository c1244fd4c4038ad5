//! RBAC authorization on every request: Roles and bindings grant, 403 with upstream's message otherwise, escalation checks, the bootstrap policy.

use kcm_apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::common::{raw, timed};

fn client_as(server: &TestServer, token: &str) -> kube::Client {
    let mut config = server.server().kube_config();
    config.default_retry = false;
    config.auth_info = serde_json::from_value(json!({"token": token})).expect("auth info");
    kube::Client::try_from(config).expect("client")
}

async fn admin(server: &TestServer, method: &str, path: &str, body: Value) -> (u16, Value) {
    raw(
        &server.client(),
        method,
        path,
        "application/json",
        serde_json::to_vec(&body).expect("json"),
    )
    .await
}

/// A service account in `default` and a token for it.
async fn service_account(server: &TestServer, name: &str) -> String {
    let (code, sa) = admin(
        server,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": name}}),
    )
    .await;
    assert_eq!(code, 201, "{sa}");
    let (code, answer) = admin(
        server,
        "POST",
        &format!("/api/v1/namespaces/default/serviceaccounts/{name}/token"),
        json!({"spec": {}}),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
    answer["status"]["token"]
        .as_str()
        .expect("token")
        .to_owned()
}

/// The status of `method path` as `client`, once it is not `unless` (the RBAC cache follows
/// the store through a watch, as upstream's informers: a fresh binding takes a moment).
async fn eventually(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Value,
    want: u16,
) -> (u16, Value) {
    let mut last = (0, Value::Null);
    for _ in 0..50 {
        last = raw(
            client,
            method,
            path,
            "application/json",
            serde_json::to_vec(&body).expect("json"),
        )
        .await;
        if last.0 == want {
            return last;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    last
}

#[tokio::test]
async fn a_role_grants_what_it_says_and_nothing_more() {
    timed(async {
        let server = TestServer::start().await;
        let token = service_account(&server, "ci").await;
        let ci = client_as(&server, &token);

        // No roles yet: discovery and health only.
        assert_eq!(raw(&ci, "GET", "/api", "application/json", vec![]).await.0, 200);
        assert_eq!(raw(&ci, "GET", "/healthz", "application/json", vec![]).await.0, 200);
        // `/metrics` needs a grant (upstream's `system:monitoring`), as on kube-apiserver.
        let (code, status) = raw(&ci, "GET", "/metrics", "application/json", vec![]).await;
        assert_eq!(code, 403, "{status}");
        assert_eq!(
            status["message"],
            r#"forbidden: User "system:serviceaccount:default:ci" cannot get path "/metrics""#
        );
        let (code, status) = raw(&ci, "GET", "/api/v1/namespaces/default/pods", "application/json", vec![]).await;
        assert_eq!(code, 403);
        assert_eq!(status["reason"], "Forbidden");
        assert_eq!(
            status["message"],
            r#"pods is forbidden: User "system:serviceaccount:default:ci" cannot list resource "pods" in API group "" in the namespace "default""#
        );

        let (code, _) = admin(&server, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", json!({
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        })).await;
        assert_eq!(code, 201);
        let (code, _) = admin(&server, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", json!({
            "metadata": {"name": "ci-reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": "default"}],
        })).await;
        assert_eq!(code, 201);

        let (code, list) = eventually(&ci, "GET", "/api/v1/namespaces/default/pods", Value::Null, 200).await;
        assert_eq!(code, 200, "{list}");
        assert_eq!(list["kind"], "PodList");
        let (code, _) = raw(&ci, "GET", "/api/v1/namespaces/kube-system/pods", "application/json", vec![]).await;
        assert_eq!(code, 403, "another namespace");
        let (code, _) = raw(&ci, "GET", "/api/v1/pods", "application/json", vec![]).await;
        assert_eq!(code, 403, "all namespaces: the whole list is refused, nothing leaks");
        let (code, status) = raw(
            &ci,
            "POST",
            "/api/v1/namespaces/default/pods",
            "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})).expect("json"),
        )
        .await;
        assert_eq!(code, 403, "{status}");

        // The rules review matches the role.
        let (code, review) = raw(
            &ci,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            "application/json",
            serde_json::to_vec(&json!({"spec": {"namespace": "default"}})).expect("json"),
        )
        .await;
        assert_eq!(code, 201, "{review}");
        let rules = review["status"]["resourceRules"].as_array().expect("rules");
        assert!(
            rules.iter().any(|r| r["resources"] == json!(["pods"]) && r["verbs"] == json!(["get", "list", "watch"])),
            "{review}"
        );
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn no_one_grants_what_they_do_not_hold() {
    timed(async {
        let server = TestServer::start().await;
        let token = service_account(&server, "binder").await;
        let binder = client_as(&server, &token);
        // The binder may manage bindings and roles, but holds nothing else.
        let (code, _) = admin(&server, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", json!({
            "metadata": {"name": "binding-manager"},
            "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings", "roles", "rolebindings"], "verbs": ["create"]}],
        })).await;
        assert_eq!(code, 201);
        let (code, _) = admin(&server, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json!({
            "metadata": {"name": "binder"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "binding-manager"},
            "subjects": [{"kind": "ServiceAccount", "name": "binder", "namespace": "default"}],
        })).await;
        assert_eq!(code, 201);

        let escalate = json!({
            "metadata": {"name": "make-me-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "binder", "namespace": "default"}],
        });
        let (code, status) = eventually(&binder, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", escalate, 403).await;
        assert_eq!(code, 403, "{status}");
        let message = status["message"].as_str().unwrap_or("");
        assert!(
            message.starts_with(r#"clusterrolebindings.rbac.authorization.k8s.io "make-me-admin" is forbidden: user "system:serviceaccount:default:binder""#)
                && message.contains("is attempting to grant RBAC permissions not currently held"),
            "{message}"
        );
        // A role with rights the binder lacks: refused too.
        let (code, _) = raw(
            &binder,
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "secrets"}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})).expect("json"),
        )
        .await;
        assert_eq!(code, 403);
        // A role within what it holds is fine.
        let (code, body) = raw(
            &binder,
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "sub"}, "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["create"]}]})).expect("json"),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_bootstrap_policy_exists() {
    timed(async {
        let server = TestServer::start().await;
        for name in [
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:basic-user",
            "system:discovery",
            "system:public-info-viewer",
            "system:controller:replicaset-controller",
            "system:controller:generic-garbage-collector",
            "system:controller:clusterrole-aggregation-controller",
        ] {
            let (code, role) = admin(
                &server,
                "GET",
                &format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"),
                Value::Null,
            )
            .await;
            assert_eq!(code, 200, "{name}");
            assert_eq!(
                role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
                "true"
            );
        }
        let (code, binding) = admin(
            &server,
            "GET",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin",
            Value::Null,
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(binding["subjects"][0]["name"], "system:masters");
        let (code, binding) = admin(
            &server,
            "GET",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:controller:replicaset-controller",
            Value::Null,
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "replicaset-controller", "namespace": "kube-system"}])
        );
        server.shutdown().await;
    })
    .await;
}

/// A client with `token` acting as `user` (and `groups`), as `kubectl --as --as-group`.
fn client_impersonating(
    server: &TestServer,
    token: &str,
    user: &str,
    groups: &[&str],
) -> kube::Client {
    let mut config = server.server().kube_config();
    config.default_retry = false;
    config.auth_info = serde_json::from_value(json!({
        "token": token,
        "as": user,
        "as-groups": groups,
    }))
    .expect("auth info");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn impersonation_acts_as_the_named_user_only_when_allowed() {
    timed(async {
        let server = TestServer::start().await;
        let token = service_account(&server, "ci").await;
        let (code, _) = admin(&server, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", json!({
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        })).await;
        assert_eq!(code, 201);
        let (code, _) = admin(&server, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", json!({
            "metadata": {"name": "ci-reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": "default"}],
        })).await;
        assert_eq!(code, 201);

        // The admin (system:masters) acting as the service account has its rights only.
        let as_ci = client_impersonating(&server, server.token(), "system:serviceaccount:default:ci", &[]);
        let (code, list) = eventually(&as_ci, "GET", "/api/v1/namespaces/default/pods", Value::Null, 200).await;
        assert_eq!(code, 200, "{list}");
        let (code, status) = raw(&as_ci, "GET", "/api/v1/namespaces/kube-system/pods", "application/json", vec![]).await;
        assert_eq!(code, 403);
        assert_eq!(
            status["message"],
            r#"pods is forbidden: User "system:serviceaccount:default:ci" cannot list resource "pods" in API group "" in the namespace "kube-system""#
        );
        let (code, review) = raw(
            &as_ci,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            "application/json",
            serde_json::to_vec(&json!({"spec": {"namespace": "default"}})).expect("json"),
        )
        .await;
        assert_eq!(code, 201, "{review}");
        let rules = review["status"]["resourceRules"].as_array().expect("rules");
        assert!(rules.iter().any(|r| r["resources"] == json!(["pods"])), "{review}");
        assert!(!rules.iter().any(|r| r["resources"] == json!(["*"])), "no admin rules leak: {review}");
        let (code, who) = raw(
            &as_ci,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            "application/json",
            serde_json::to_vec(&json!({})).expect("json"),
        )
        .await;
        assert_eq!(code, 201, "{who}");
        assert_eq!(who["status"]["userInfo"]["username"], "system:serviceaccount:default:ci");
        assert_eq!(
            who["status"]["userInfo"]["groups"],
            json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"])
        );

        // The service account may not impersonate anyone: 403 on the impersonate check.
        let ci_as_admin = client_impersonating(&server, &token, "kubernetes-admin", &["system:masters"]);
        let (code, status) = raw(&ci_as_admin, "GET", "/api/v1/namespaces/default/pods", "application/json", vec![]).await;
        assert_eq!(code, 403, "{status}");
        assert_eq!(
            status["message"],
            r#"users "kubernetes-admin" is forbidden: User "system:serviceaccount:default:ci" cannot impersonate resource "users" in API group "" at the cluster scope"#
        );

        // Granted `impersonate` on one group only: that group works, another does not.
        let (code, _) = admin(&server, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", json!({
            "metadata": {"name": "impersonate-bob"},
            "rules": [
                {"apiGroups": [""], "resources": ["users"], "resourceNames": ["bob"], "verbs": ["impersonate"]},
                {"apiGroups": [""], "resources": ["groups"], "resourceNames": ["devs"], "verbs": ["impersonate"]},
            ],
        })).await;
        assert_eq!(code, 201);
        let (code, _) = admin(&server, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json!({
            "metadata": {"name": "ci-impersonates-bob"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "impersonate-bob"},
            "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": "default"}],
        })).await;
        assert_eq!(code, 201);
        let bob = client_impersonating(&server, &token, "bob", &["devs"]);
        let (code, who) = eventually(&bob, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", json!({}), 201).await;
        assert_eq!(code, 201, "{who}");
        assert_eq!(who["status"]["userInfo"]["username"], "bob");
        assert_eq!(who["status"]["userInfo"]["groups"], json!(["devs", "system:authenticated"]));
        let masters = client_impersonating(&server, &token, "bob", &["system:masters"]);
        let (code, status) = raw(&masters, "GET", "/api/v1/namespaces", "application/json", vec![]).await;
        assert_eq!(code, 403, "{status}");
        assert_eq!(
            status["message"],
            r#"groups "system:masters" is forbidden: User "system:serviceaccount:default:ci" cannot impersonate resource "groups" in API group "" at the cluster scope"#
        );
        server.shutdown().await;
    })
    .await;
}
