//! List semantics: pagination from a fixed snapshot, selectors, resourceVersion and resourceVersionMatch.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams, VersionMatch};
use serde_json::json;

use crate::common::{configmap, pod, raw, status_of, timed};

#[tokio::test]
async fn pagination_is_consistent_under_concurrent_writes() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        for i in 0..25 {
            api.create(
                &PostParams::default(),
                &configmap(&format!("cm-{i:02}"), &[]),
            )
            .await
            .expect("create");
        }
        let first = api
            .list(&ListParams::default().limit(10))
            .await
            .expect("page 1");
        assert_eq!(first.items.len(), 10);
        let snapshot_rv = first.metadata.resource_version.clone().expect("rv");
        let mut names: Vec<String> = first
            .items
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        let mut token = first.metadata.continue_.clone().expect("continue");

        // Writes after the first page do not show up in later pages.
        let writer = {
            let api = api.clone();
            tokio::spawn(async move {
                for i in 0..20 {
                    api.create(
                        &PostParams::default(),
                        &configmap(&format!("new-{i:02}"), &[]),
                    )
                    .await
                    .expect("create");
                    api.delete(&format!("cm-{:02}", 24 - i.min(14)), &Default::default())
                        .await
                        .ok();
                }
            })
        };
        loop {
            let page = api
                .list(&ListParams::default().limit(10).continue_token(&token))
                .await
                .expect("page");
            assert_eq!(
                page.metadata.resource_version.as_deref(),
                Some(snapshot_rv.as_str())
            );
            names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
            match page.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(t) => token = t,
                None => break,
            }
        }
        writer.await.expect("writer");
        let expected: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
        assert_eq!(names, expected);
    })
    .await;
}

#[tokio::test]
async fn expired_continue_token_is_410_with_a_token_that_continues_at_the_latest_revision() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        for i in 0..6 {
            api.create(&PostParams::default(), &configmap(&format!("c{i}"), &[]))
                .await
                .expect("create");
        }
        let first = api
            .list(&ListParams::default().limit(2))
            .await
            .expect("page");
        let first_rv = first.metadata.resource_version.clone().expect("rv");
        let token = first.metadata.continue_.clone().expect("continue");
        api.create(&PostParams::default(), &configmap("later", &[]))
            .await
            .expect("create");
        let storage = server.server().storage();
        storage
            .compact(storage.current_revision().await.expect("rev"))
            .await
            .expect("compact");
        let page =
            |token: &str| format!("/api/v1/namespaces/default/configmaps?limit=2&continue={token}");
        let (code, status) = raw(&client, "GET", &page(&token), "application/json", vec![]).await;
        assert_eq!((code, &status["reason"]), (410, &json!("Expired")));
        let message = status["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("The provided continue parameter is too old"),
            "{message}"
        );

        // The Status's token goes on from the last key, at the latest revision: the list is
        // inconsistent (it sees the later write) but complete.
        let mut token = status["metadata"]["continue"]
            .as_str()
            .expect("a fresh continue token")
            .to_owned();
        let mut names = Vec::new();
        let mut rv = None;
        loop {
            let (code, list) = raw(&client, "GET", &page(&token), "application/json", vec![]).await;
            assert_eq!(code, 200, "{list}");
            let this_rv = list["metadata"]["resourceVersion"].clone();
            assert_ne!(this_rv, json!(first_rv), "read at the latest revision");
            assert_eq!(
                *rv.get_or_insert(this_rv.clone()),
                this_rv,
                "pages share a revision"
            );
            names.extend(
                list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned)),
            );
            match list["metadata"]["continue"].as_str() {
                Some(t) if !t.is_empty() => token = t.to_owned(),
                _ => break,
            }
        }
        assert_eq!(names, ["c2", "c3", "c4", "c5", "later"]);
    })
    .await;
}

#[tokio::test]
async fn cut_pages_count_the_remaining_items_unless_a_selector_filters() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        for i in 0..5 {
            api.create(&PostParams::default(), &configmap(&format!("c{i}"), &[]))
                .await
                .expect("create");
        }
        let base = "/api/v1/namespaces/default/configmaps?limit=2";
        let mut path = base.to_owned();
        let mut counts = Vec::new();
        loop {
            let (code, list) = raw(&client, "GET", &path, "application/json", vec![]).await;
            assert_eq!(code, 200, "{list}");
            let meta = &list["metadata"];
            counts.push(meta.get("remainingItemCount").cloned());
            match meta["continue"].as_str() {
                Some(t) => path = format!("{base}&continue={t}"),
                None => break,
            }
        }
        // The last page continues nowhere and counts nothing.
        assert_eq!(counts, [Some(json!(3)), Some(json!(1)), None]);

        // A selector may have dropped stored objects, so the count would lie: none is given.
        let (code, list) = raw(
            &client,
            "GET",
            &format!("{base}&fieldSelector=metadata.name!=c0"),
            "application/json",
            vec![],
        )
        .await;
        assert_eq!(code, 200, "{list}");
        assert!(list["metadata"]["continue"].is_string(), "{list}");
        assert!(
            list["metadata"].get("remainingItemCount").is_none(),
            "{list}"
        );
    })
    .await;
}

#[tokio::test]
async fn label_selectors() {
    timed(async {
        let server = TestServer::start().await;
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        for (name, labels) in [
            ("a", vec![("app", "web"), ("tier", "front")]),
            ("b", vec![("app", "web"), ("tier", "back")]),
            ("c", vec![("app", "db")]),
            ("d", vec![]),
        ] {
            pods.create(&PostParams::default(), &pod(name, &labels))
                .await
                .expect("create");
        }
        let cases = [
            ("equals", "app=web", vec!["a", "b"]),
            ("double equals", "app==db", vec!["c"]),
            ("not equals includes missing", "app!=web", vec!["c", "d"]),
            ("in", "tier in (front,back)", vec!["a", "b"]),
            (
                "notin includes missing",
                "tier notin (front)",
                vec!["b", "c", "d"],
            ),
            ("exists", "tier", vec!["a", "b"]),
            ("not exists", "!tier", vec!["c", "d"]),
            ("conjunction", "app=web,tier!=back", vec!["a"]),
        ];
        for (name, selector, want) in cases {
            let list = pods
                .list(&ListParams::default().labels(selector))
                .await
                .expect(name);
            let got: Vec<String> = list
                .items
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            assert_eq!(got, want, "case {name}");
        }
        let err = pods
            .list(&ListParams::default().labels("app in"))
            .await
            .expect_err("bad selector");
        assert_eq!(status_of(err).0, 400);
    })
    .await;
}

#[tokio::test]
async fn field_selectors_per_resource() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.create(&PostParams::default(), &pod("on-n1", &[])).await.expect("create");
        pods.create(&PostParams::default(), &pod("pending", &[])).await.expect("create");
        let mut bound = pod("bound", &[]);
        bound.spec.as_mut().expect("spec").node_name = Some("n1".to_owned());
        pods.create(&PostParams::default(), &bound).await.expect("create");
        pods.patch_status("on-n1", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running"}})))
            .await
            .expect("status");

        let names = |list: kube::core::ObjectList<Pod>| -> Vec<String> {
            list.items.iter().filter_map(|p| p.metadata.name.clone()).collect()
        };
        let all_pods: Api<Pod> = Api::all(client.clone());
        assert_eq!(names(all_pods.list(&ListParams::default().fields("spec.nodeName=n1")).await.expect("list")), vec!["bound"]);
        assert_eq!(
            names(pods.list(&ListParams::default().fields("spec.nodeName=")).await.expect("list")),
            vec!["on-n1", "pending"]
        );
        assert_eq!(
            names(pods.list(&ListParams::default().fields("status.phase!=Running,metadata.name!=bound")).await.expect("list")),
            vec!["pending"]
        );
        assert_eq!(
            names(all_pods.list(&ListParams::default().fields("metadata.namespace=default,metadata.name=pending")).await.expect("list")),
            vec!["pending"]
        );
        let err = pods.list(&ListParams::default().fields("spec.bogus=x")).await.expect_err("unknown field");
        let (code, _, message) = status_of(err);
        assert_eq!(code, 400);
        assert_eq!(message, "field label not supported: spec.bogus");

        let nodes: Api<Node> = Api::all(client.clone());
        for (name, unschedulable) in [("n1", true), ("n2", false)] {
            let node: Node = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"unschedulable": unschedulable}})).expect("node");
            nodes.create(&PostParams::default(), &node).await.expect("create node");
        }
        let list = nodes.list(&ListParams::default().fields("spec.unschedulable=false")).await.expect("list");
        assert_eq!(list.items.iter().filter_map(|n| n.metadata.name.clone()).collect::<Vec<_>>(), vec!["n2"]);

        let events: Api<Event> = Api::namespaced(client, "default");
        let ev: Event = serde_json::from_value(json!({
            "metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "bound", "namespace": "default"},
            "reason": "Scheduled", "type": "Normal", "message": "ok"
        }))
        .expect("event");
        events.create(&PostParams::default(), &ev).await.expect("create event");
        let list = events
            .list(&ListParams::default().fields("involvedObject.kind=Pod,involvedObject.name=bound,reason=Scheduled,type=Normal"))
            .await
            .expect("list");
        assert_eq!(list.items.len(), 1);
        let list = events.list(&ListParams::default().fields("involvedObject.name=other")).await.expect("list");
        assert!(list.items.is_empty());
    })
    .await;
}

#[tokio::test]
async fn resource_version_semantics() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let a = api
            .create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect("create");
        let rv_a = a.metadata.resource_version.clone().expect("rv");
        api.create(&PostParams::default(), &configmap("b", &[]))
            .await
            .expect("create");

        let names = |l: kube::core::ObjectList<ConfigMap>| -> BTreeSet<String> {
            l.items
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect()
        };
        // Exact: the state at that revision.
        let exact = api
            .list(
                &ListParams::default()
                    .at(&rv_a)
                    .matching(VersionMatch::Exact),
            )
            .await
            .expect("exact");
        assert_eq!(names(exact.clone()), BTreeSet::from(["a".to_owned()]));
        assert_eq!(
            exact.metadata.resource_version.as_deref(),
            Some(rv_a.as_str())
        );
        // NotOlderThan / legacy N / 0: at least as new.
        for lp in [
            ListParams::default()
                .at(&rv_a)
                .matching(VersionMatch::NotOlderThan),
            ListParams::default().at(&rv_a),
            ListParams::default().at("0"),
        ] {
            assert_eq!(names(api.list(&lp).await.expect("list")).len(), 2);
        }
        // A revision from the future is a 504 Timeout, as upstream's "Too large resource version".
        let err = api
            .list(
                &ListParams::default()
                    .at("999999")
                    .matching(VersionMatch::NotOlderThan),
            )
            .await
            .expect_err("future");
        let (code, reason, message) = status_of(err);
        assert_eq!((code, reason.as_str()), (504, "Timeout"));
        assert!(
            message.starts_with("Too large resource version"),
            "{message}"
        );
        // Exact requires a revision.
        let (code, status) = raw(
            &server.client(),
            "GET",
            "/api/v1/namespaces/default/configmaps?resourceVersionMatch=Exact",
            "application/json",
            vec![],
        )
        .await;
        assert_eq!(code, 422);
        assert_eq!(status["details"]["kind"], "ListOptions");
        // Exact below the compaction point is 410.
        let storage = server.server().storage();
        storage
            .compact(storage.current_revision().await.expect("rev"))
            .await
            .expect("compact");
        let err = api
            .list(
                &ListParams::default()
                    .at(&rv_a)
                    .matching(VersionMatch::Exact),
            )
            .await
            .expect_err("compacted");
        assert_eq!(status_of(err).0, 410);
    })
    .await;
}

#[tokio::test]
async fn a_bad_label_selector_is_a_400_saying_why_once() {
    timed(async {
        let server = TestServer::start().await;
        let (code, status) = raw(
            &server.client(),
            "GET",
            "/api/v1/namespaces/default/pods?labelSelector=a%20in%20(b",
            "application/json",
            Vec::new(),
        )
        .await;
        assert_eq!(code, 400, "{status}");
        assert_eq!(status["reason"], "BadRequest");
        // Upstream's parser's words (kubectl puts "Unable to find ... that match label
        // selector ..." in front).
        assert_eq!(
            status["message"],
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
    })
    .await;
}
