//! Namespace lifecycle: default namespaces, NamespaceLifecycle admission, Terminating, /finalize.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use serde_json::json;

use crate::common::{configmap, raw, status_of, timed};

fn namespace(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn default_namespaces_exist_and_are_immortal() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Namespace> = Api::all(server.client());
        let names: Vec<String> = api
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        assert_eq!(
            names,
            vec!["default", "kube-node-lease", "kube-public", "kube-system"]
        );
        let default = api.get("default").await.expect("get");
        assert_eq!(
            default.status.and_then(|s| s.phase).as_deref(),
            Some("Active")
        );
        assert_eq!(
            default.spec.and_then(|s| s.finalizers),
            Some(vec!["kubernetes".to_owned()])
        );
        assert_eq!(
            default.metadata.labels.expect("labels")["kubernetes.io/metadata.name"],
            "default"
        );
        let (code, reason, message) = status_of(
            api.delete("kube-system", &DeleteParams::default())
                .await
                .expect_err("immortal"),
        );
        assert_eq!((code, reason.as_str()), (403, "Forbidden"));
        assert_eq!(
            message,
            "namespaces \"kube-system\" is forbidden: this namespace may not be deleted"
        );
    })
    .await;
}

#[tokio::test]
async fn creating_in_a_missing_or_terminating_namespace_is_refused() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
        let (code, _, message) = status_of(missing.create(&PostParams::default(), &configmap("a", &[])).await.expect_err("missing"));
        assert_eq!(code, 404);
        assert_eq!(message, "namespaces \"nope\" not found");

        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces.create(&PostParams::default(), &namespace("team")).await.expect("create ns");
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
        cms.create(&PostParams::default(), &configmap("before", &[])).await.expect("create cm");
        let deleted = namespaces.delete("team", &DeleteParams::default()).await.expect("delete ns");
        let terminating = deleted.left().expect("namespace returned while terminating");
        assert_eq!(terminating.status.and_then(|s| s.phase).as_deref(), Some("Terminating"));
        assert!(terminating.metadata.deletion_timestamp.is_some());

        let body = serde_json::to_vec(&configmap("after", &[])).expect("json");
        let (code, status) = raw(&client, "POST", "/api/v1/namespaces/team/configmaps", "application/json", body).await;
        assert_eq!(code, 403);
        assert_eq!(status["reason"], "Forbidden");
        assert_eq!(
            status["message"],
            "configmaps \"after\" is forbidden: unable to create new content in namespace team because it is being terminated"
        );
        assert_eq!(status["details"]["causes"][0]["reason"], "NamespaceTerminating");
        assert_eq!(status["details"]["causes"][0]["field"], "metadata.namespace");
        // Existing content can still change and be deleted.
        cms.delete("before", &DeleteParams::default()).await.expect("delete content");

        // The namespace controller's last step: clear spec.finalizers via /finalize. With no
        // finalizer left the server removes the namespace (ShouldDeleteNamespaceDuringUpdate).
        let finalize = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}, "spec": {"finalizers": []}});
        let (code, ns) = raw(&client, "PUT", "/api/v1/namespaces/team/finalize", "application/json", serde_json::to_vec(&finalize).expect("json")).await;
        assert_eq!(code, 200, "{ns}");
        assert_eq!(ns["spec"]["finalizers"], json!([]), "{ns}");
        assert_eq!(status_of(namespaces.get("team").await.expect_err("gone")).0, 404);
    })
    .await;
}

#[tokio::test]
async fn finalize_keeps_a_namespace_that_is_live_or_still_has_metadata_finalizers() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let finalize = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"finalizers": []}})
        };

        // Not being deleted: finalize only clears spec.finalizers.
        namespaces.create(&PostParams::default(), &namespace("live")).await.expect("create");
        let body = serde_json::to_vec(&finalize("live")).expect("json");
        let (code, ns) = raw(&client, "PUT", "/api/v1/namespaces/live/finalize", "application/json", body).await;
        assert_eq!(code, 200, "{ns}");
        let live = namespaces.get("live").await.expect("still there");
        assert_eq!(live.spec.and_then(|s| s.finalizers), Some(vec![]));

        // Being deleted but holding a metadata finalizer: stays until that one goes too.
        let mut held = namespace("held");
        held.metadata.finalizers = Some(vec!["example.com/hold".to_owned()]);
        namespaces.create(&PostParams::default(), &held).await.expect("create");
        namespaces.delete("held", &DeleteParams::default()).await.expect("delete");
        let body = serde_json::to_vec(&finalize("held")).expect("json");
        let (code, ns) = raw(&client, "PUT", "/api/v1/namespaces/held/finalize", "application/json", body).await;
        assert_eq!(code, 200, "{ns}");
        let held = namespaces.get("held").await.expect("held by its metadata finalizer");
        assert!(held.metadata.deletion_timestamp.is_some());

        // The other order: the metadata finalizer goes first, while `kubernetes` is still in
        // spec.finalizers: the namespace stays Terminating until /finalize.
        let mut early = namespace("early");
        early.metadata.finalizers = Some(vec!["example.com/hold".to_owned()]);
        namespaces.create(&PostParams::default(), &early).await.expect("create");
        namespaces.delete("early", &DeleteParams::default()).await.expect("delete");
        let patch = json!({"metadata": {"finalizers": null}});
        namespaces
            .patch("early", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
            .await
            .expect("drop the metadata finalizer");
        let early = namespaces.get("early").await.expect("still waiting for the namespace controller");
        assert_eq!(early.spec.and_then(|s| s.finalizers), Some(vec!["kubernetes".to_owned()]));
        let body = serde_json::to_vec(&finalize("early")).expect("json");
        let (code, ns) = raw(&client, "PUT", "/api/v1/namespaces/early/finalize", "application/json", body).await;
        assert_eq!(code, 200, "{ns}");
        assert_eq!(status_of(namespaces.get("early").await.expect_err("gone")).0, 404);
    })
    .await;
}

#[tokio::test]
async fn namespace_names_are_dns_labels() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Namespace> = Api::all(server.client());
        let (code, reason, message) = status_of(
            api.create(&PostParams::default(), &namespace("a.b"))
                .await
                .expect_err("dot"),
        );
        assert_eq!((code, reason.as_str()), (422, "Invalid"));
        assert!(
            message
                .starts_with("Namespace \"a.b\" is invalid: metadata.name: Invalid value: \"a.b\""),
            "{message}"
        );
    })
    .await;
}
