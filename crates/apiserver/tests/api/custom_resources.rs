//! CustomResourceDefinitions and their custom resources over real HTTP: served once Established, every verb and subresource, schema validation, pruning and defaults, discovery and OpenAPI, deletion, restarts.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcm_apiserver::testing::TestServer;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchParams,
};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::common::{describe, lifecycle, next_event, raw, status_of, timed};

const GROUP: &str = "samplecontroller.k8s.io";
const FOOS: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos";

/// The sample-controller's Foo CRD, with printer columns, `/status`, `/scale` and a few
/// validations.
fn foo_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.samplecontroller.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "unapproved, experimental-only"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "shortNames": ["fo"],
                "categories": ["all"]},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.availableReplicas"}},
                "additionalPrinterColumns": [
                    {"name": "Deployment", "type": "string", "jsonPath": ".spec.deploymentName"},
                    {"name": "Available", "type": "integer", "jsonPath": ".status.availableReplicas"},
                ],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "description": "Spec of the Foo.",
                        "required": ["deploymentName"], "properties": {
                        "deploymentName": {"type": "string", "description": "The Deployment's name."},
                        "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 10, "default": 1},
                    }},
                    "status": {"type": "object", "properties": {"availableReplicas": {"type": "integer"}}},
                }}},
            }],
        },
    }))
    .expect("crd")
}

fn foo_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1alpha1", "Foo"), "foos")
}

fn foo(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": name, "labels": {"app": name}}, "spec": spec}),
    )
    .expect("foo")
}

/// Creates the CRD and waits (bounded) until its resources are served.
async fn establish(client: &Client, crd: &CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), crd)
        .await
        .expect("create crd");
    let group_version = format!("/apis/{}/{}", crd.spec.group, crd.spec.versions[0].name);
    for _ in 0..200 {
        let (code, _) = raw(client, "GET", &group_version, "application/json", "").await;
        if code == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{group_version} never served");
}

#[tokio::test]
async fn a_crd_is_established_and_its_resources_served_with_every_verb() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        establish(&client, &foo_crd()).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = crds.get("foos.samplecontroller.k8s.io").await.expect("crd");
        let status = crd.status.expect("status");
        let conditions: Vec<(String, String)> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect();
        assert!(
            conditions.contains(&("Established".into(), "True".into())),
            "{conditions:?}"
        );
        assert!(
            conditions.contains(&("NamesAccepted".into(), "True".into())),
            "{conditions:?}"
        );
        assert_eq!(status.stored_versions, Some(vec!["v1alpha1".to_owned()]));
        assert_eq!(
            status.accepted_names.map(|n| n.kind),
            Some("Foo".to_owned())
        );

        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "default", &foo_resource());
        let (created, patched, _) = lifecycle(
            &api,
            &foo("a", json!({"deploymentName": "web"})),
            json!({"spec": {"replicas": 2}}),
            json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                "metadata": {"name": "a"}, "spec": {"deploymentName": "web", "replicas": 3}}),
        )
        .await;
        assert_eq!(
            created.data["spec"]["replicas"], 1,
            "the schema's default applies"
        );
        assert_eq!(created.metadata.generation, Some(1));
        assert_eq!(patched.metadata.generation, Some(2));

        // Selectors.
        api.create(
            &PostParams::default(),
            &foo("b", json!({"deploymentName": "other"})),
        )
        .await
        .expect("create b");
        let by_label = api
            .list(&ListParams::default().labels("app=b"))
            .await
            .expect("list");
        assert_eq!(by_label.items.len(), 1);
        let by_field = api
            .list(&ListParams::default().fields("metadata.name=a"))
            .await
            .expect("list");
        assert_eq!(by_field.items[0].metadata.name.as_deref(), Some("a"));

        // JSON patch; strategic merge is not served for custom resources.
        let ops = json!([{"op": "replace", "path": "/spec/deploymentName", "value": "web2"}]);
        let (code, body) = raw(
            &client,
            "PATCH",
            &format!("{FOOS}/a"),
            "application/json-patch+json",
            ops.to_string(),
        )
        .await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(body["spec"]["deploymentName"], "web2");
        let (code, body) = raw(
            &client,
            "PATCH",
            &format!("{FOOS}/a"),
            "application/strategic-merge-patch+json",
            r#"{"spec": {"replicas": 4}}"#,
        )
        .await;
        assert_eq!(code, 415, "{body}");

        // Status is a subresource: the main resource keeps the stored status and /status
        // the stored spec.
        let (code, body) = raw(
            &client,
            "PATCH",
            &format!("{FOOS}/a/status"),
            "application/merge-patch+json",
            r#"{"status": {"availableReplicas": 2}, "spec": {"replicas": 9}}"#,
        )
        .await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(body["status"]["availableReplicas"], 2);
        assert_eq!(body["spec"]["replicas"], 3);
        let (_, body) = raw(
            &client,
            "PATCH",
            &format!("{FOOS}/a"),
            "application/merge-patch+json",
            r#"{"status": {"availableReplicas": 7}}"#,
        )
        .await;
        assert_eq!(body["status"]["availableReplicas"], 2);

        // Scale at the CRD's paths.
        let (code, scale) = raw(
            &client,
            "GET",
            &format!("{FOOS}/a/scale"),
            "application/json",
            "",
        )
        .await;
        assert_eq!(code, 200, "{scale}");
        assert_eq!(
            (
                scale["spec"]["replicas"].clone(),
                scale["status"]["replicas"].clone()
            ),
            (json!(3), json!(2))
        );
        let (code, scale) = raw(
            &client,
            "PATCH",
            &format!("{FOOS}/a/scale"),
            "application/merge-patch+json",
            r#"{"spec": {"replicas": 5}}"#,
        )
        .await;
        assert_eq!(code, 200, "{scale}");
        assert_eq!(api.get("a").await.expect("a").data["spec"]["replicas"], 5);

        // Watch sees custom resources like any other.
        let rv = api
            .list(&ListParams::default())
            .await
            .expect("list")
            .metadata
            .resource_version
            .expect("rv");
        let mut watch = Box::pin(
            api.watch(&WatchParams::default().timeout(10), &rv)
                .await
                .expect("watch"),
        );
        api.delete("b", &DeleteParams::default())
            .await
            .expect("delete b");
        let event = next_event(&mut watch).await;
        assert_eq!(describe(&event), "DELETED b");

        // deletecollection.
        api.delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .expect("deletecollection");
        assert!(
            api.list(&ListParams::default())
                .await
                .expect("list")
                .items
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn schema_violations_are_422_naming_the_field_and_unknown_fields_are_pruned() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        establish(&client, &foo_crd()).await;
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &foo_resource());
        let err = api
            .create(&PostParams::default(), &foo("bad", json!({"deploymentName": "web", "replicas": 11})))
            .await
            .expect_err("out of range");
        let (code, reason, message) = status_of(err);
        assert_eq!((code, reason.as_str()), (422, "Invalid"));
        assert!(
            message.contains("spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"),
            "{message}"
        );
        let (_, reason, message) = status_of(
            api.create(&PostParams::default(), &foo("bad", json!({"replicas": 1})))
                .await
                .expect_err("required"),
        );
        assert_eq!(reason, "Invalid");
        assert!(message.contains("spec.deploymentName: Required value"), "{message}");

        // Unknown fields: pruned silently by default, a 400 under Strict.
        let body = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "p"}, "spec": {"deploymentName": "web", "typo": true}});
        let (code, created) = raw(&client, "POST", FOOS, "application/json", body.to_string()).await;
        assert_eq!(code, 201, "{created}");
        assert!(created["spec"].get("typo").is_none(), "{created}");
        let mut strict = body.clone();
        strict["metadata"]["name"] = json!("q");
        let (code, status) = raw(&client, "POST", &format!("{FOOS}?fieldValidation=Strict"), "application/json", strict.to_string()).await;
        assert_eq!(code, 400, "{status}");
        assert!(status["message"].as_str().unwrap_or("").contains("unknown field \"spec.typo\""), "{status}");
    })
    .await;
}

#[tokio::test]
async fn discovery_openapi_and_tables_show_the_resource_until_the_crd_is_deleted() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        establish(&client, &foo_crd()).await;
        let (code, list) = raw(
            &client,
            "GET",
            "/apis/samplecontroller.k8s.io/v1alpha1",
            "application/json",
            "",
        )
        .await;
        assert_eq!(code, 200);
        let foos = list["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == "foos")
            .cloned()
            .expect("foos listed");
        assert_eq!(foos["kind"], "Foo");
        assert_eq!(foos["singularName"], "foo");
        assert_eq!(foos["shortNames"], json!(["fo"]));
        assert_eq!(foos["categories"], json!(["all"]));
        assert!(
            list["resources"]
                .as_array()
                .expect("resources")
                .iter()
                .any(|r| r["name"] == "foos/scale")
        );
        let (_, groups) = raw(&client, "GET", "/apis", "application/json", "").await;
        assert!(
            groups["groups"]
                .as_array()
                .expect("groups")
                .iter()
                .any(|g| g["name"] == GROUP)
        );

        let (code, index) = raw(&client, "GET", "/openapi/v3", "application/json", "").await;
        assert_eq!(code, 200);
        assert!(
            index["paths"]
                .get("apis/samplecontroller.k8s.io/v1alpha1")
                .is_some(),
            "{index}"
        );
        let (code, doc) = raw(
            &client,
            "GET",
            "/openapi/v3/apis/samplecontroller.k8s.io/v1alpha1",
            "application/json",
            "",
        )
        .await;
        assert_eq!(code, 200);
        let schema = &doc["components"]["schemas"]["io.k8s.samplecontroller.v1alpha1.Foo"];
        assert_eq!(
            schema["properties"]["spec"]["description"],
            "Spec of the Foo."
        );
        assert_eq!(schema["x-kubernetes-group-version-kind"][0]["kind"], "Foo");
        assert!(
            doc["paths"]
                .get("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos")
                .is_some()
        );

        // kubectl get's table: NAME, the printer columns.
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "default", &foo_resource());
        api.create(
            &PostParams::default(),
            &foo("t", json!({"deploymentName": "web"})),
        )
        .await
        .expect("create");
        let request = http::Request::get(FOOS)
            .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
            .body(Vec::new())
            .expect("request");
        let table: Value = client.request(request).await.expect("table");
        let headers: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(headers, ["Name", "Deployment", "Available"]);
        assert_eq!(table["rows"][0]["cells"], json!(["t", "web", null]));

        // Deleting the CRD deletes its resources, then the CRD; the endpoints go.
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.delete("foos.samplecontroller.k8s.io", &DeleteParams::default())
            .await
            .expect("delete crd");
        let mut gone = false;
        for _ in 0..300 {
            if let Err(kube::Error::Api(s)) = crds.get("foos.samplecontroller.k8s.io").await
                && s.code == 404
            {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(gone, "the CRD is deleted once its resources are");
        let (code, _) = raw(&client, "GET", FOOS, "application/json", "").await;
        assert_eq!(code, 404);
        let (code, _) = raw(
            &client,
            "GET",
            "/apis/samplecontroller.k8s.io/v1alpha1",
            "application/json",
            "",
        )
        .await;
        assert_eq!(code, 404);
        let (_, index) = raw(&client, "GET", "/openapi/v3", "application/json", "").await;
        assert!(
            index["paths"]
                .get("apis/samplecontroller.k8s.io/v1alpha1")
                .is_none()
        );
    })
    .await;
}

#[tokio::test]
async fn malformed_crds_are_422_with_upstreams_causes_and_nothing_is_stored() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        struct Case {
            name: &'static str,
            patch: fn(&mut Value),
            cause: &'static str,
        }
        let cases = [
            Case {
                name: "no storage version",
                patch: |v| v["spec"]["versions"][0]["storage"] = json!(false),
                cause: "must have exactly one version marked as storage version",
            },
            Case {
                name: "non-structural schema",
                patch: |v| v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = json!({"properties": {}}),
                cause: "must not be empty for specified object fields",
            },
            Case {
                name: "name is not plural.group",
                patch: |v| v["metadata"]["name"] = json!("foo.samplecontroller.k8s.io"),
                cause: "must be spec.names.plural+\".\"+spec.group",
            },
            Case {
                name: "a CEL rule that does not compile",
                patch: |v| v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = json!([{"rule": "self.spec.replicas >"}]),
                cause: "compilation failed",
            },
        ];
        for case in cases {
            let mut crd = serde_json::to_value(foo_crd()).expect("json");
            (case.patch)(&mut crd);
            let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("crd");
            let (code, reason, message) =
                status_of(crds.create(&PostParams::default(), &crd).await.expect_err(case.name));
            assert_eq!((code, reason.as_str()), (422, "Invalid"), "{}", case.name);
            assert!(message.contains(case.cause), "{}: {message}", case.name);
        }
        assert!(crds.list(&ListParams::default()).await.expect("list").items.is_empty());
    })
    .await;
}

#[tokio::test]
async fn crds_and_their_resources_survive_a_restart() {
    timed(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = TestServer::start_with_sqlite(dir.path()).await;
        let client = server.client();
        establish(&client, &foo_crd()).await;
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "default", &foo_resource());
        api.create(
            &PostParams::default(),
            &foo("kept", json!({"deploymentName": "web", "replicas": 2})),
        )
        .await
        .expect("create");
        server.shutdown().await;

        let server = TestServer::start_with_sqlite(dir.path()).await;
        let api: Api<DynamicObject> =
            Api::namespaced_with(server.client(), "default", &foo_resource());
        let kept = api
            .get("kept")
            .await
            .expect("served right after the restart");
        assert_eq!(kept.data["spec"]["replicas"], 2);
        server.shutdown().await;
    })
    .await;
}

/// A CRD whose `spec` keeps unknown fields and embeds a resource, as upstream's field
/// validation e2e tests declare it.
fn bar_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "bars.fieldval.example.com"},
        "spec": {
            "group": "fieldval.example.com",
            "scope": "Namespaced",
            "names": {"plural": "bars", "singular": "bar", "kind": "Bar"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {
                            "foo": {"type": "string"},
                            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                "properties": {
                                    "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
                                    "spec": {"type": "object"},
                                }},
                        }},
                }}},
            }],
        },
    }))
    .expect("crd")
}

#[tokio::test]
async fn custom_resources_report_duplicates_then_unknown_metadata_at_the_root_and_in_embedded_resources()
 {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        establish(&client, &bar_crd()).await;
        let bars = "/apis/fieldval.example.com/v1/namespaces/default/bars";
        let body = |name: &str| {
            format!(
                r#"{{"apiVersion": "fieldval.example.com/v1", "kind": "Bar",
                "metadata": {{"name": "{name}", "unknownMeta": "x"}},
                "spec": {{"foo": "a", "foo": "b", "unknown": 1, "template": {{"apiVersion": "v1",
                    "kind": "Sub", "metadata": {{"name": "s", "namespace": "n", "unknownSubMeta": "x"}}}}}}}}"#
            )
        };
        let (code, status) = raw(&client, "POST", &format!("{bars}?fieldValidation=Strict"), "application/json", body("strict")).await;
        assert_eq!(code, 400, "{status}");
        assert_eq!(
            status["message"],
            r#"Bar in version "v1" cannot be handled as a Bar: strict decoding error: duplicate field "spec.foo", unknown field "metadata.unknownMeta", unknown field "spec.template.metadata.unknownSubMeta""#
        );
        let (code, created, warnings) =
            crate::common::send(&client, "POST", bars, Some("application/json"), body("warned").into_bytes()).await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(created["metadata"].get("unknownMeta").is_none(), "{created}");
        assert_eq!(created["spec"]["template"]["metadata"], json!({"name": "s", "namespace": "n"}));
        assert_eq!((&created["spec"]["foo"], &created["spec"]["unknown"]), (&json!("b"), &json!(1)));

        // Apply: the typed conversion refuses the unknown metadata whatever fieldValidation
        // says; a repeated key under Strict is refused once the configuration applied.
        let apply = |name: &str| format!("/apis/fieldval.example.com/v1/namespaces/default/bars/{name}?fieldManager=m&fieldValidation=Strict");
        let config = "\napiVersion: fieldval.example.com/v1\nkind: Bar\nmetadata:\n  name: applied\n  unknownMeta: x\nspec:\n  template:\n    kind: Sub\n    metadata:\n      unknownSubMeta: x\n";
        let (code, status) = raw(&client, "PATCH", &apply("applied"), "application/apply-patch+yaml", config).await;
        assert_eq!(code, 500, "{status}");
        let message = status["message"].as_str().unwrap_or("");
        assert!(message.contains(".metadata.unknownMeta: field not declared in schema"), "{message}");
        assert!(message.contains(".spec.template.metadata.unknownSubMeta: field not declared in schema"), "{message}");
        let config = "\napiVersion: fieldval.example.com/v1\nkind: Bar\nmetadata:\n  name: dup\nspec:\n  unknown: uk1\n  foo: foo1\n  foo: foo2\n";
        let (code, status) = raw(&client, "PATCH", &apply("dup"), "application/apply-patch+yaml", config).await;
        assert_eq!(code, 400, "{status}");
        assert!(status.to_string().contains(r#"line 9: key \"foo\" already set in map"#), "{status}");
    })
    .await;
}

/// client-go with the protobuf content type (upstream's e2e clients,
/// kube-controller-manager) sends CRDs as protobuf: the body is created as the JSON of the
/// same CRD, `served: false` and the schema's unions included.
#[tokio::test]
async fn a_crd_sent_as_protobuf_is_created_as_its_json() {
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;

    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let s = |v: &str| Some(v.to_owned());
        let props = |ty: &str| ext::JsonSchemaProps {
            r#type: s(ty),
            ..Default::default()
        };
        let mut spec = props("object");
        spec.properties = [(
            "replicas".to_owned(),
            ext::JsonSchemaProps {
                maximum: Some(10.0),
                ..props("integer")
            },
        )]
        .into();
        let mut labels = props("object");
        labels.additional_properties = Some(Box::new(ext::JsonSchemaPropsOrBool {
            allows: Some(true),
            schema: Some(Box::new(props("string"))),
        }));
        let mut root = props("object");
        root.properties = [("spec".to_owned(), spec), ("labels".to_owned(), labels)].into();
        let version =
            |name: &str, served: bool, storage: bool| ext::CustomResourceDefinitionVersion {
                name: s(name),
                served: Some(served),
                storage: Some(storage),
                schema: Some(ext::CustomResourceValidation {
                    open_apiv3_schema: Some(root.clone()),
                }),
                ..Default::default()
            };
        let crd = ext::CustomResourceDefinition {
            metadata: Some(ObjectMeta {
                name: s("bars.proto.example.com"),
                ..Default::default()
            }),
            spec: Some(ext::CustomResourceDefinitionSpec {
                group: s("proto.example.com"),
                names: Some(ext::CustomResourceDefinitionNames {
                    plural: s("bars"),
                    kind: s("Bar"),
                    ..Default::default()
                }),
                scope: s("Namespaced"),
                versions: vec![version("v1", true, true), version("v2", false, false)],
                ..Default::default()
            }),
            status: None,
        };
        let envelope = Unknown {
            type_meta: Some(TypeMeta {
                api_version: s("apiextensions.k8s.io/v1"),
                kind: s("CustomResourceDefinition"),
            }),
            raw: Some(crd.encode_to_vec()),
            ..Default::default()
        };
        let mut body = b"k8s\0".to_vec();
        body.extend(envelope.encode_to_vec());
        let (code, created, _) = crate::common::send(
            &client,
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some("application/vnd.kubernetes.protobuf"),
            body,
        )
        .await;
        assert_eq!(code, 201, "{created}");
        let versions = &created["spec"]["versions"];
        assert_eq!(versions[1]["served"], false);
        assert_eq!(
            versions[0]["schema"]["openAPIV3Schema"]["properties"],
            json!({
                "spec": {"type": "object",
                         "properties": {"replicas": {"type": "integer", "maximum": 10.0}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            })
        );
    })
    .await;
}

/// The `/openapi/v2` document once `done` holds of it, polled (bounded) as clients do: the
/// CRD controller publishes asynchronously.
async fn wait_for_v2(client: &Client, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..300 {
        let (code, doc) = raw(client, "GET", "/openapi/v2", "application/json", "").await;
        assert_eq!(code, 200);
        if done(&doc) {
            return doc;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("/openapi/v2 never got there");
}

/// Upstream's e2e (`CustomResourcePublishOpenAPI`) waits for a CRD's versions in
/// `/openapi/v2`, with the CRD's schema plus type meta, and for a version to go when it is
/// no longer served.
#[tokio::test]
async fn the_v2_definitions_follow_the_crds_served_versions() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let mut crd = foo_crd();
        let mut v2 = crd.spec.versions[0].clone();
        v2.name = "v1beta2".to_owned();
        v2.storage = false;
        crd.spec.versions.push(v2);
        establish(&client, &crd).await;
        let v1 = "io.k8s.samplecontroller.v1alpha1.Foo";
        let beta = "io.k8s.samplecontroller.v1beta2.Foo";
        let doc = wait_for_v2(&client, |doc| {
            doc["definitions"].get(v1).is_some() && doc["definitions"].get(beta).is_some()
        })
        .await;
        let mut published = doc["definitions"][v1].clone();
        let props = published["properties"].as_object_mut().expect("properties");
        assert_eq!(
            props.remove("metadata").expect("metadata")["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(props.remove("apiVersion").is_some() && props.remove("kind").is_some());
        let gvk = published
            .as_object_mut()
            .expect("schema")
            .remove("x-kubernetes-group-version-kind")
            .expect("gvk");
        assert_eq!(gvk[0]["version"], "v1alpha1");
        // The CRD's schema, its default pruned as upstream prunes defaults from v2.
        let mut want = serde_json::to_value(
            crd.spec.versions[0]
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("schema"),
        )
        .expect("json");
        want["properties"]["spec"]["properties"]["replicas"]
            .as_object_mut()
            .expect("replicas")
            .remove("default");
        assert_eq!(published, want);
        assert!(
            doc["paths"]
                .get("/apis/samplecontroller.k8s.io/v1beta2/namespaces/{namespace}/foos/{name}")
                .is_some()
        );

        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let mut stored = crds.get("foos.samplecontroller.k8s.io").await.expect("get");
        stored.spec.versions[1].served = false;
        crds.replace(
            "foos.samplecontroller.k8s.io",
            &PostParams::default(),
            &stored,
        )
        .await
        .expect("stop serving v1beta2");
        let doc = wait_for_v2(&client, |doc| doc["definitions"].get(beta).is_none()).await;
        assert!(doc["definitions"].get(v1).is_some(), "v1alpha1 stays");
    })
    .await;
}
