//! The list/watch source a Reflector reads from, as client-go's `ListerWatcher`.

use std::fmt::Debug;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Client;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, DynamicObject, ObjectList};
use serde::de::DeserializeOwned;

/// A stream of watch events, ended by the server (timeout) or by an error.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, kube::Error>>;

/// Lists and watches one kind of object. The seam between the Reflector and HTTP: the real
/// implementation is [`ApiListerWatcher`] over `kube::Api`; tests and benchmarks script one.
#[async_trait]
pub trait ListerWatcher<K: Clone>: Send + Sync {
    /// One list request (one page when `params.limit` is set).
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error>;

    /// Starts a watch from `resource_version`. An HTTP error (e.g. 410 Gone) is returned here;
    /// errors after the stream started arrive as `WatchEvent::Error` or `Err` items.
    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, kube::Error>;
}

/// Lists nothing and watches forever: the source of an informer whose cache is filled by hand
/// (`informer.indexer().add(..)`), as tests and benchmarks do with client-go's informers
/// that are never started.
#[derive(Clone, Copy, Debug, Default)]
pub struct NeverListerWatcher;

#[async_trait]
impl<K> ListerWatcher<K> for NeverListerWatcher
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    async fn list(&self, _params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        Ok(ObjectList {
            types: kube::core::TypeMeta::list::<K>(),
            metadata: kube::core::ListMeta::default(),
            items: Vec::new(),
        })
    }

    async fn watch(
        &self,
        _params: &WatchParams,
        _resource_version: &str,
    ) -> Result<WatchStream<K>, kube::Error> {
        Ok(futures::stream::pending().boxed())
    }
}

/// A [`ListerWatcher`] over a `kube::Api` (typed, or `Api<DynamicObject>` for custom
/// resources), with optional label and field selectors applied to every request (client-go's
/// `TweakListOptions`).
pub struct ApiListerWatcher<K> {
    api: Api<K>,
    label_selector: Option<String>,
    field_selector: Option<String>,
}

impl<K> ApiListerWatcher<K> {
    /// Lists and watches everything `api` can reach.
    pub fn new(api: Api<K>) -> Self {
        Self {
            api,
            label_selector: None,
            field_selector: None,
        }
    }

    /// Restricts lists and watches to objects matching a label selector (string form).
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Restricts lists and watches to objects matching a field selector (string form).
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }
}

impl ApiListerWatcher<DynamicObject> {
    /// Lists and watches a resource known only at runtime (custom resources), in
    /// `namespace` or, with `None`, across all namespaces (or cluster-scoped).
    pub fn dynamic(client: Client, resource: &ApiResource, namespace: Option<&str>) -> Self {
        let api = match namespace {
            Some(ns) => Api::namespaced_with(client, ns, resource),
            None => Api::all_with(client, resource),
        };
        Self::new(api)
    }
}

impl<K> From<Api<K>> for ApiListerWatcher<K> {
    fn from(api: Api<K>) -> Self {
        Self::new(api)
    }
}

#[async_trait]
impl<K> ListerWatcher<K> for ApiListerWatcher<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        let mut params = params.clone();
        params.label_selector = params.label_selector.or(self.label_selector.clone());
        params.field_selector = params.field_selector.or(self.field_selector.clone());
        self.api.list(&params).await
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, kube::Error> {
        let mut params = params.clone();
        params.label_selector = params.label_selector.or(self.label_selector.clone());
        params.field_selector = params.field_selector.or(self.field_selector.clone());
        Ok(self.api.watch(&params, resource_version).await?.boxed())
    }
}
