//! [`custom_resource!`](crate::custom_resource): makes a serde struct a Kubernetes resource, so the informer factory hands out typed informers and listers of it.

/// Implements `k8s_openapi::Resource` and `k8s_openapi::Metadata` for a custom resource
/// struct with a `metadata: ObjectMeta` field, so that `kube::Api<T>`,
/// [`SharedInformerFactory::informer_for`](crate::informer::SharedInformerFactory::informer_for)
/// and its typed lister work for it as for a built-in kind.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Debug, Default, Deserialize, Serialize)]
/// pub struct Foo {
///     #[serde(default)]
///     pub metadata: ObjectMeta,
///     #[serde(default)]
///     pub spec: serde_json::Value,
/// }
///
/// kcm_machinery::custom_resource!(Foo {
///     group: "samplecontroller.k8s.io",
///     version: "v1alpha1",
///     kind: "Foo",
///     plural: "foos",
///     namespaced,
/// });
///
/// use kube::Resource;
/// assert_eq!(Foo::api_version(&()), "samplecontroller.k8s.io/v1alpha1");
/// assert_eq!(Foo::plural(&()), "foos");
/// ```
///
/// Use `cluster` instead of `namespaced` for a cluster-scoped resource. Serializing the
/// struct does not add `apiVersion` and `kind`: write through `Api::patch` (a merge patch of
/// the fields that change) or add them to the body, as the sample-controller does.
#[macro_export]
macro_rules! custom_resource {
    ($ty:ident { group: $group:expr, version: $version:expr, kind: $kind:expr, plural: $plural:expr, namespaced $(,)? }) => {
        $crate::custom_resource!(@impl $ty, $group, $version, $kind, $plural, k8s_openapi::NamespaceResourceScope);
    };
    ($ty:ident { group: $group:expr, version: $version:expr, kind: $kind:expr, plural: $plural:expr, cluster $(,)? }) => {
        $crate::custom_resource!(@impl $ty, $group, $version, $kind, $plural, k8s_openapi::ClusterResourceScope);
    };
    (@impl $ty:ident, $group:expr, $version:expr, $kind:expr, $plural:expr, $scope:ty) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}
