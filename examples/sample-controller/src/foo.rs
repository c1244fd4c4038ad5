//! The `Foo` custom resource (`samplecontroller.k8s.io/v1alpha1`), as upstream's `pkg/apis/samplecontroller/v1alpha1/types.go`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The API group of Foos.
pub const GROUP: &str = "samplecontroller.k8s.io";
/// The served version.
pub const VERSION: &str = "v1alpha1";
/// The kind.
pub const KIND: &str = "Foo";

/// A Foo: a Deployment's name and its replicas, and how many of them are available.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Foo {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the Foo asks for.
    #[serde(default)]
    pub spec: FooSpec,
    /// What the controller observed.
    #[serde(default)]
    pub status: FooStatus,
}

/// The spec of a Foo.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// The name of the Deployment the Foo owns.
    #[serde(default)]
    pub deployment_name: String,
    /// The Deployment's replicas; `None` leaves the Deployment's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

/// The status of a Foo.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// The Deployment's available replicas.
    #[serde(default)]
    pub available_replicas: i32,
}

kcm_machinery::custom_resource!(Foo {
    group: "samplecontroller.k8s.io",
    version: "v1alpha1",
    kind: "Foo",
    plural: "foos",
    namespaced,
});

impl Foo {
    /// The Foo as a request body: its fields plus `apiVersion` and `kind`.
    pub fn to_body(&self) -> serde_json::Result<Vec<u8>> {
        let mut value = serde_json::to_value(self)?;
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), format!("{GROUP}/{VERSION}").into());
            map.insert("kind".into(), KIND.into());
        }
        serde_json::to_vec(&value)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn decodes_the_example_and_encodes_with_its_type() {
        let foo: Foo = serde_json::from_value(json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "example-foo"},
            "spec": {"deploymentName": "example-foo", "replicas": 1}}))
        .expect("foo");
        assert_eq!(foo.spec.deployment_name, "example-foo");
        assert_eq!(foo.spec.replicas, Some(1));
        assert_eq!(foo.status.available_replicas, 0);
        let body: serde_json::Value =
            serde_json::from_slice(&foo.to_body().expect("body")).expect("json");
        assert_eq!(body["apiVersion"], "samplecontroller.k8s.io/v1alpha1");
        assert_eq!(body["kind"], "Foo");
        assert_eq!(body["status"]["availableReplicas"], 0);
    }
}
