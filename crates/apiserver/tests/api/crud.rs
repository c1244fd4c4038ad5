//! Create, get, update, patch, list and delete of plain objects; optimistic concurrency.

use k8s_openapi::api::core::v1::ConfigMap;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{configmap, raw, status_of, timed};

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
        assert_eq!(
            meta.generation, None,
            "a ConfigMap has no generation, as upstream"
        );
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

#[tokio::test]
async fn empty_metadata_maps_are_not_stored_so_an_unchanged_object_stays_unchanged() {
    // kubectl's three-way patches (`kubectl diff`, `kubectl apply` without the last-applied
    // annotation) send `"annotations": {}`; Kubernetes stores objects after a typed decode,
    // whose encoding omits empty maps, so the object does not change.
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let mut cm = configmap("e", &[("k", "v")]);
        cm.metadata.labels = Some(Default::default());
        cm.metadata.finalizers = Some(Vec::new());
        let created = api
            .create(&PostParams::default(), &cm)
            .await
            .expect("create");
        assert_eq!(
            (created.metadata.labels, created.metadata.finalizers),
            (None, None),
            "empty labels and finalizers are not stored"
        );
        let patch = Patch::Strategic(json!({"metadata": {"annotations": {}}}));
        let dry = api
            .patch("e", &PatchParams::default().dry_run(), &patch)
            .await
            .expect("dry-run patch");
        assert_eq!(dry.metadata.annotations, None);
        let patched = api
            .patch("e", &PatchParams::default(), &patch)
            .await
            .expect("patch");
        assert_eq!(patched.metadata.annotations, None);
        assert_eq!(
            patched.metadata.resource_version, created.metadata.resource_version,
            "nothing changed, so nothing was written"
        );
    })
    .await;
}

#[tokio::test]
async fn generation_is_kept_only_by_the_resources_whose_strategy_keeps_one() {
    // Upstream's strategies decide: ConfigMaps, Services and (in v1.33) HPAs have none; a
    // PriorityClass starts at 1 and keeps it; a webhook configuration counts changes of its
    // `webhooks`; a Pod (since v1.33) counts spec changes. A label never bumps it.
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let hook = |name: &str| {
            json!({"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "clientConfig": {"url": "https://127.0.0.1:1/x"}})
        };
        let pod_spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
        struct Case {
            path: &'static str,
            object: serde_json::Value,
            change: serde_json::Value,
            want: [Option<i64>; 3],
        }
        let cases = [
            Case {
                path: "/api/v1/namespaces/default/configmaps",
                object: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g"}, "data": {"a": "1"}}),
                change: json!({"data": {"a": "2"}}),
                want: [None, None, None],
            },
            Case {
                path: "/api/v1/namespaces/default/services",
                object: json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "g"},
                    "spec": {"ports": [{"port": 80}]}}),
                change: json!({"spec": {"ports": [{"port": 81}]}}),
                want: [None, None, None],
            },
            Case {
                path: "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
                object: json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "g"}, "spec": {"maxReplicas": 3,
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}}),
                change: json!({"spec": {"maxReplicas": 4}}),
                want: [None, None, None],
            },
            Case {
                path: "/apis/scheduling.k8s.io/v1/priorityclasses",
                object: json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": "g"}, "value": 10}),
                change: json!({"description": "changed"}),
                want: [Some(1), Some(1), Some(1)],
            },
            Case {
                path: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                object: json!({"apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "g"},
                    "webhooks": [hook("a.example.com")]}),
                change: json!({"webhooks": [hook("b.example.com")]}),
                want: [Some(1), Some(1), Some(2)],
            },
            Case {
                path: "/api/v1/namespaces/default/pods",
                object: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g"}, "spec": pod_spec}),
                change: json!({"spec": {"activeDeadlineSeconds": 30}}),
                want: [Some(1), Some(1), Some(2)],
            },
        ];
        for case in cases {
            let generation = |obj: &serde_json::Value| obj["metadata"]["generation"].as_i64();
            let (code, created) =
                raw(&client, "POST", case.path, "application/json", case.object.to_string()).await;
            assert_eq!(code, 201, "{}: {created}", case.path);
            let item = format!("{}/g", case.path);
            let merge = "application/merge-patch+json";
            let label = json!({"metadata": {"labels": {"x": "y"}}}).to_string();
            let (code, labelled) = raw(&client, "PATCH", &item, merge, label).await;
            assert_eq!(code, 200, "{}: {labelled}", case.path);
            let (code, changed) = raw(&client, "PATCH", &item, merge, case.change.to_string()).await;
            assert_eq!(code, 200, "{}: {changed}", case.path);
            assert_eq!(
                [generation(&created), generation(&labelled), generation(&changed)],
                case.want,
                "{}",
                case.path
            );
        }
    })
    .await;
}

#[tokio::test]
async fn generate_name_dry_run_and_yaml_bodies() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let mut cm = configmap("", &[]);
        cm.metadata.name = None;
        cm.metadata.generate_name = Some("web-".to_owned());
        let a = api
            .create(&PostParams::default(), &cm)
            .await
            .expect("generated");
        let name = a.metadata.name.clone().expect("name");
        assert_eq!(name.len(), "web-".len() + 5);
        assert!(
            name["web-".len()..]
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{name}"
        );
        let b = api
            .create(&PostParams::default(), &cm)
            .await
            .expect("generated again");
        assert_ne!(a.metadata.name, b.metadata.name);

        let dry = api
            .create(
                &PostParams {
                    dry_run: true,
                    ..Default::default()
                },
                &configmap("dry", &[]),
            )
            .await
            .expect("dry run");
        assert!(dry.metadata.uid.is_some());
        assert_eq!(
            status_of(api.get("dry").await.expect_err("not stored")).0,
            404
        );

        let yaml =
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n"
                .to_vec();
        let (code, obj) = crate::common::raw(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/yaml",
            yaml,
        )
        .await;
        assert_eq!(code, 201, "{obj}");
        assert_eq!(
            api.get("from-yaml").await.expect("get").data.expect("data")["k"],
            "v"
        );

        let err = api
            .create(&PostParams::default(), &configmap("Bad_Name", &[]))
            .await
            .expect_err("invalid name");
        assert_eq!(status_of(err).0, 422);
    })
    .await;
}

#[tokio::test]
async fn update_checks_names_and_create_on_update() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        api.create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect("create");
        let err = api
            .replace("a", &PostParams::default(), &configmap("b", &[]))
            .await
            .expect_err("name mismatch");
        let (code, _, message) = status_of(err);
        assert_eq!(code, 400);
        assert_eq!(
            message,
            "the name of the object (b) does not match the name on the URL (a)"
        );
        let err = api
            .replace(
                "missing",
                &PostParams::default(),
                &configmap("missing", &[]),
            )
            .await
            .expect_err("no create");
        assert_eq!(status_of(err).0, 404);

        // Endpoints may be created by an update, as upstream.
        let ep = serde_json::to_vec(
            &json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "svc"}}),
        )
        .expect("json");
        let (code, _) = crate::common::raw(
            &client,
            "PUT",
            "/api/v1/namespaces/default/endpoints/svc",
            "application/json",
            ep,
        )
        .await;
        assert_eq!(code, 201);
    })
    .await;
}

#[tokio::test]
async fn cluster_scoped_and_all_namespaces_paths() {
    use k8s_openapi::api::core::v1::{Namespace, Node};
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let nodes: Api<Node> = Api::all(client.clone());
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).expect("node");
        let created = nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        assert_eq!(created.metadata.namespace, None);

        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "other"}})).expect("ns");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("create ns");
        for ns in ["default", "other"] {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            api.create(&PostParams::default(), &configmap("same", &[]))
                .await
                .expect("create");
        }
        let all: Api<ConfigMap> = Api::all(client.clone());
        let list = all
            .list(&ListParams::default())
            .await
            .expect("all namespaces");
        // The server's own ConfigMaps (kube-system's legacy token tracking) are listed too.
        let mut got: Vec<String> = list
            .items
            .iter()
            .filter(|c| c.metadata.name.as_deref() == Some("same"))
            .filter_map(|c| c.metadata.namespace.clone())
            .collect();
        got.sort();
        assert_eq!(got, vec!["default", "other"]);
        let one: Api<ConfigMap> = Api::namespaced(client.clone(), "other");
        assert_eq!(
            one.list(&ListParams::default())
                .await
                .expect("one namespace")
                .items
                .len(),
            1
        );
        let (code, _) = crate::common::raw(
            &client,
            "GET",
            "/api/v1/namespaces/default/nodes/n1",
            "application/json",
            vec![],
        )
        .await;
        assert_eq!(code, 404, "cluster-scoped objects are not under namespaces");
    })
    .await;
}

#[tokio::test]
async fn events_are_one_resource_in_two_versions() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as NewEvent;
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let new_api: Api<NewEvent> = Api::namespaced(client.clone(), "default");
        let ev: NewEvent = serde_json::from_value(json!({
            "metadata": {"name": "e1"},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "regarding": {"kind": "Pod", "name": "p"},
            "note": "pulled", "reason": "Pulled", "type": "Normal",
            "reportingController": "kubelet", "reportingInstance": "n1", "action": "Pull"
        }))
        .expect("event");
        new_api
            .create(&PostParams::default(), &ev)
            .await
            .expect("create events.k8s.io");
        let core_api: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
        let core = core_api.get("e1").await.expect("read as core/v1");
        assert_eq!(core.message.as_deref(), Some("pulled"));
        assert_eq!(core.involved_object.name.as_deref(), Some("p"));
        assert_eq!(core.reporting_component.as_deref(), Some("kubelet"));
        let back = new_api.get("e1").await.expect("read back");
        assert_eq!(back.note.as_deref(), Some("pulled"));
    })
    .await;
}

#[tokio::test]
async fn secrets_fold_string_data() {
    use k8s_openapi::api::core::v1::Secret;
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Secret> = Api::namespaced(server.client(), "default");
        let secret: Secret = serde_json::from_value(
            json!({"metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}),
        )
        .expect("secret");
        let created = api
            .create(&PostParams::default(), &secret)
            .await
            .expect("create");
        assert_eq!(created.type_.as_deref(), Some("Opaque"));
        assert_eq!(
            created.data.expect("data")["password"].0,
            b"hunter2".to_vec()
        );
        assert!(created.string_data.is_none());
    })
    .await;
}
