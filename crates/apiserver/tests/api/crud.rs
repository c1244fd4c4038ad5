//! Create, get, update, patch, list and delete of plain objects; optimistic concurrency.

use k8s_openapi::api::core::v1::ConfigMap;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{configmap, status_of, timed};

#[tokio::test]
async fn create_get_list_delete_configmap() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let created = api
            .create(&PostParams::default(), &configmap("a", &[("k", "v")]))
            .await
            .expect("create");
        let meta = &created.metadata;
        assert!(meta.uid.is_some());
        assert!(meta.creation_timestamp.is_some());
        assert_eq!(meta.generation, Some(1));
        let rv: i64 = meta
            .resource_version
            .as_deref()
            .expect("rv")
            .parse()
            .expect("numeric");
        assert!(rv > 0);

        let got = api.get("a").await.expect("get");
        assert_eq!(got.data, created.data);
        assert_eq!(
            got.metadata.resource_version,
            created.metadata.resource_version
        );

        let list = api.list(&ListParams::default()).await.expect("list");
        assert_eq!(list.items.len(), 1);
        let list_rv: i64 = list
            .metadata
            .resource_version
            .as_deref()
            .expect("rv")
            .parse()
            .expect("numeric");
        assert!(list_rv >= rv);

        let err = api
            .create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect_err("exists");
        assert_eq!(
            status_of(err),
            (
                409,
                "AlreadyExists".to_owned(),
                "configmaps \"a\" already exists".to_owned()
            )
        );

        api.delete("a", &DeleteParams::default())
            .await
            .expect("delete");
        let err = api.get("a").await.expect_err("gone");
        assert_eq!(
            status_of(err),
            (
                404,
                "NotFound".to_owned(),
                "configmaps \"a\" not found".to_owned()
            )
        );
    })
    .await;
}

#[tokio::test]
async fn stale_update_is_a_conflict_with_upstream_message() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let first = api.create(&PostParams::default(), &configmap("c", &[("k", "1")])).await.expect("create");
        let mut second = first.clone();
        second.data = Some([("k".to_owned(), "2".to_owned())].into());
        api.replace("c", &PostParams::default(), &second).await.expect("fresh update");

        let mut stale = first.clone();
        stale.data = Some([("k".to_owned(), "3".to_owned())].into());
        let err = api.replace("c", &PostParams::default(), &stale).await.expect_err("stale");
        let (code, reason, message) = status_of(err);
        assert_eq!((code, reason.as_str()), (409, "Conflict"));
        assert_eq!(
            message,
            "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
        );

        // No resourceVersion: unconditional.
        stale.metadata.resource_version = None;
        let updated = api.replace("c", &PostParams::default(), &stale).await.expect("unconditional");
        assert_eq!(updated.data.expect("data")["k"], "3");
    })
    .await;
}

#[tokio::test]
async fn patch_with_stale_resource_version_or_wrong_uid_fails() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let cm = api
            .create(&PostParams::default(), &configmap("p", &[]))
            .await
            .expect("create");
        let rv = cm.metadata.resource_version.clone().expect("rv");
        let uid = cm.metadata.uid.clone().expect("uid");

        let patched = api
            .patch(
                "p",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
            )
            .await
            .expect("merge patch");
        assert_eq!(patched.metadata.labels.expect("labels")["a"], "b");

        let err = api
            .patch(
                "p",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"resourceVersion": rv, "labels": {"c": "d"}}})),
            )
            .await
            .expect_err("stale rv precondition");
        assert_eq!(status_of(err).0, 409);

        let err = api
            .patch(
                "p",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"uid": "not-the-uid", "labels": {"c": "d"}}})),
            )
            .await
            .expect_err("uid mismatch");
        let (code, reason, message) = status_of(err);
        assert_eq!((code, reason.as_str()), (422, "Invalid"));
        assert!(message.contains("metadata.uid"), "{message}");

        api.patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"uid": uid, "labels": {"c": "d"}}})),
        )
        .await
        .expect("matching uid");
    })
    .await;
}
