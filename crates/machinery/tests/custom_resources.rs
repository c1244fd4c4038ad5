//! Custom resources through the machinery against the embedded API server: the dynamic client resolves a CRD's resource through discovery; the factory hands out a typed informer (a `custom_resource!` struct) and a dynamic one, each with a lister that sees what the API holds.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_apiserver::testing::TestServer;
use kcm_machinery::dynamic::{DynamicClient, Error};
use kcm_machinery::informer::SharedInformerFactory;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
struct Foo {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: FooSpec,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct FooSpec {
    #[serde(default)]
    deployment_name: String,
    #[serde(default)]
    replicas: Option<i32>,
}

kcm_machinery::custom_resource!(Foo {
    group: "samplecontroller.k8s.io",
    version: "v1alpha1",
    kind: "Foo",
    plural: "foos",
    namespaced,
});

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "foos.samplecontroller.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "unapproved, test"}},
        "spec": {"group": "samplecontroller.k8s.io", "scope": "Namespaced",
            "names": {"plural": "foos", "kind": "Foo"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "properties": {"deploymentName": {"type": "string"},
                        "replicas": {"type": "integer", "default": 1}}}}}}}]}
    }))
    .expect("crd")
}

#[tokio::test]
async fn typed_and_dynamic_informers_of_a_custom_resource() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let server = TestServer::start().await;
        let client = server.client();
        let dynamic = DynamicClient::new(client.clone());
        assert!(matches!(
            dynamic
                .resolve("samplecontroller.k8s.io", "v1alpha1", "foos")
                .await,
            Err(Error::Discovery { .. })
        ));
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd())
            .await
            .expect("create crd");
        let mut resolved = None;
        for _ in 0..200 {
            if let Ok(r) = dynamic
                .resolve("samplecontroller.k8s.io", "v1alpha1", "Foo")
                .await
            {
                resolved = Some(r);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let foos = resolved.expect("foos served once Established");
        assert_eq!(foos.api_resource.plural, "foos");
        assert!(foos.namespaced);
        let api = dynamic.api(&foos, Some("default"));
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "a"}, "spec": {"deploymentName": "web"}}))
        .expect("foo");
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create foo");

        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let typed = factory.informer_for::<Foo>();
        let untyped = factory.dynamic(foos.api_resource.clone());
        assert_eq!(typed.name(), "samplecontroller.k8s.io/v1alpha1/Foo");
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        assert!(factory.wait_for_cache_sync(&cancel).await);
        let foo = typed.lister().get("default", "a").expect("typed lister");
        assert_eq!(foo.spec.deployment_name, "web");
        assert_eq!(foo.spec.replicas, Some(1), "the schema's default");
        let raw = untyped
            .lister()
            .get("default", "a")
            .expect("dynamic lister");
        assert_eq!(raw.data["spec"]["replicas"], 1);
        // One informer per resource and type.
        assert_eq!(factory.informer_for::<Foo>().name(), typed.name());
        cancel.cancel();
        factory.shutdown().await;
    })
    .await
    .expect("test timed out");
}
