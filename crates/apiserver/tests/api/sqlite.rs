//! The same REST semantics on the SQLite store (with the watch cache in front), and restarts.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams, WatchParams};
use kube::core::WatchEvent;

use crate::common::{configmap, describe, drain, next_event, status_of, timed};

#[tokio::test]
async fn crud_conflicts_pagination_and_finalizers_on_sqlite() {
    timed(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = TestServer::start_with_sqlite(dir.path()).await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let first = api
            .create(&PostParams::default(), &configmap("a", &[("k", "1")]))
            .await
            .expect("create");
        let mut fresh = first.clone();
        fresh.data = Some([("k".to_owned(), "2".to_owned())].into());
        api.replace("a", &PostParams::default(), &fresh)
            .await
            .expect("update");
        let (code, reason, _) = status_of(
            api.replace("a", &PostParams::default(), &first)
                .await
                .expect_err("stale"),
        );
        assert_eq!((code, reason.as_str()), (409, "Conflict"));

        for i in 0..7 {
            api.create(&PostParams::default(), &configmap(&format!("p{i}"), &[]))
                .await
                .expect("create");
        }
        let mut names = Vec::new();
        let mut lp = ListParams::default().limit(3);
        loop {
            let page = api.list(&lp).await.expect("page");
            names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
            match page.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(t) => lp = ListParams::default().limit(3).continue_token(&t),
                None => break,
            }
        }
        assert_eq!(names.len(), 8);

        let mut held = configmap("held", &[]);
        held.metadata.finalizers = Some(vec!["example.com/x".to_owned()]);
        api.create(&PostParams::default(), &held)
            .await
            .expect("create");
        api.delete("held", &DeleteParams::default())
            .await
            .expect("delete");
        assert!(
            api.get("held")
                .await
                .expect("held")
                .metadata
                .deletion_timestamp
                .is_some()
        );
    })
    .await;
}

#[tokio::test]
async fn watch_and_compaction_on_sqlite() {
    timed(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = TestServer::start_with_sqlite(dir.path()).await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let a = api
            .create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect("create");
        let rv = a.metadata.resource_version.clone().expect("rv");
        let mut stream = api
            .watch(&WatchParams::default().disable_bookmarks(), &rv)
            .await
            .expect("watch")
            .boxed();
        api.create(&PostParams::default(), &configmap("b", &[]))
            .await
            .expect("create");
        api.delete("a", &DeleteParams::default())
            .await
            .expect("delete");
        assert_eq!(describe(&next_event(&mut stream).await), "ADDED b");
        assert_eq!(describe(&next_event(&mut stream).await), "DELETED a");

        let storage = server.server().storage();
        storage
            .compact(storage.current_revision().await.expect("rev"))
            .await
            .expect("compact");
        let events = drain(
            api.watch(&WatchParams::default().disable_bookmarks(), &rv)
                .await
                .expect("watch"),
        )
        .await;
        assert!(
            matches!(events.as_slice(), [WatchEvent::Error(s)] if s.code == 410),
            "{events:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn restart_on_the_same_dir_keeps_objects_identity_and_revisions() {
    timed(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (rv, url_ca, token) = {
            let server = TestServer::start_with_sqlite(dir.path()).await;
            let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
            let cm = api
                .create(&PostParams::default(), &configmap("kept", &[("k", "v")]))
                .await
                .expect("create");
            let rv: i64 = cm
                .metadata
                .resource_version
                .expect("rv")
                .parse()
                .expect("numeric");
            let ca = server.server().ca_pem().expect("ca").to_owned();
            let token = server.token().to_owned();
            server.shutdown().await;
            (rv, ca, token)
        };
        let server = TestServer::start_with_sqlite(dir.path()).await;
        assert_eq!(server.server().ca_pem(), Some(url_ca.as_str()), "CA reused");
        assert_eq!(server.token(), token, "token reused");
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let kept = api.get("kept").await.expect("survived the restart");
        assert_eq!(kept.data.expect("data")["k"], "v");
        let next = api
            .create(&PostParams::default(), &configmap("after", &[]))
            .await
            .expect("create");
        let next_rv: i64 = next
            .metadata
            .resource_version
            .expect("rv")
            .parse()
            .expect("numeric");
        assert!(
            next_rv > rv,
            "revisions keep increasing: {next_rv} after {rv}"
        );
    })
    .await;
}
