//! The EndpointSlice writes of the EndpointSlice and mirroring controllers behind a seam, with an in-memory fake that counts them.
//!
//! [`EndpointSliceClient`] is the seam: [`ApiEndpointSliceClient`] talks to the server
//! (upstream's `DiscoveryV1().EndpointSlices(ns)`), [`FakeEndpointSliceClient`] keeps the slices
//! in memory the way the server would (names from `generateName`, UIDs, generations bumped
//! when endpoints, ports or address type change) and records every call.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm_machinery::controller::api_status;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::Status;

/// The EndpointSlice requests the controllers make.
#[async_trait]
pub trait EndpointSliceClient: Send + Sync {
    /// POSTs `slice` (named, or with a `generateName`) into `namespace`.
    async fn create(
        &self,
        namespace: &str,
        slice: &EndpointSlice,
    ) -> Result<EndpointSlice, kube::Error>;
    /// PUTs `slice` (named) in `namespace`.
    async fn update(
        &self,
        namespace: &str,
        slice: &EndpointSlice,
    ) -> Result<EndpointSlice, kube::Error>;
    /// DELETEs slice `name` of `namespace`.
    async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error>;
}

/// [`EndpointSliceClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiEndpointSliceClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiEndpointSliceClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<EndpointSlice> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiEndpointSliceClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiEndpointSliceClient")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl EndpointSliceClient for ApiEndpointSliceClient {
    async fn create(
        &self,
        namespace: &str,
        slice: &EndpointSlice,
    ) -> Result<EndpointSlice, kube::Error> {
        self.api(namespace)
            .create(&PostParams::default(), slice)
            .await
    }

    async fn update(
        &self,
        namespace: &str,
        slice: &EndpointSlice,
    ) -> Result<EndpointSlice, kube::Error> {
        let name = slice.metadata.name.clone().unwrap_or_default();
        self.api(namespace)
            .replace(&name, &PostParams::default(), slice)
            .await
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.api(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
    }
}

// ---------------------------------------------------------------------------------------------
// The fake
// ---------------------------------------------------------------------------------------------

/// One call recorded by [`FakeEndpointSliceClient`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SliceAction {
    /// A create, with the name the slice got.
    Create(String),
    /// An update of the named slice.
    Update(String),
    /// A delete of the named slice.
    Delete(String),
}

impl SliceAction {
    /// The slice's name.
    pub fn name(&self) -> &str {
        match self {
            SliceAction::Create(n) | SliceAction::Update(n) | SliceAction::Delete(n) => n,
        }
    }
}

/// What [`FakeEndpointSliceClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// The stored slices by `namespace/name`.
    slices: BTreeMap<String, EndpointSlice>,
    /// Every call, in order.
    actions: Vec<SliceAction>,
    /// Names and UIDs handed out so far.
    counter: u64,
    /// When set, every call fails with this status.
    error: Option<Status>,
    /// When set, the next call panics (once).
    panic_next_call: bool,
}

/// An in-memory [`EndpointSliceClient`] recording its calls, as client-go's fake clientset with
/// the EndpointSlice strategy's generation rule.
#[derive(Debug, Default)]
pub struct FakeEndpointSliceClient {
    state: Mutex<FakeState>,
}

impl FakeEndpointSliceClient {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes every later call fail with `error` (`None` restores success).
    pub fn set_error(&self, error: Option<Status>) {
        self.state().error = error;
    }

    /// Makes the next call panic, once.
    pub fn panic_on_next_call(&self) {
        self.state().panic_next_call = true;
    }

    /// Every call so far.
    pub fn actions(&self) -> Vec<SliceAction> {
        self.state().actions.clone()
    }

    /// Forgets the recorded calls (the stored slices stay).
    pub fn clear_actions(&self) {
        self.state().actions.clear();
    }

    /// The stored slices, ordered by `namespace/name`.
    pub fn slices(&self) -> Vec<EndpointSlice> {
        self.state().slices.values().cloned().collect()
    }

    /// Stores `slice` as if it existed on the server.
    pub fn insert(&self, slice: EndpointSlice) {
        let key = key(&slice);
        let mut state = self.state();
        // Later writes get newer resourceVersions than anything inserted.
        let rv = slice
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or(0);
        state.counter = state.counter.max(rv);
        state.slices.insert(key, slice);
    }

    fn begin_call(&self) -> Result<MutexGuard<'_, FakeState>, kube::Error> {
        let armed = std::mem::take(&mut self.state().panic_next_call);
        if armed {
            panic!("FakeEndpointSliceClient: injected panic");
        }
        let state = self.state();
        match &state.error {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(state),
        }
    }
}

fn key(slice: &EndpointSlice) -> String {
    format!(
        "{}/{}",
        slice.metadata.namespace.as_deref().unwrap_or_default(),
        slice.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether an update changes what the EndpointSlice strategy bumps the generation for.
fn spec_changed(old: &EndpointSlice, new: &EndpointSlice) -> bool {
    old.endpoints != new.endpoints || old.ports != new.ports || old.address_type != new.address_type
}

#[async_trait]
impl EndpointSliceClient for FakeEndpointSliceClient {
    async fn create(
        &self,
        namespace: &str,
        slice: &EndpointSlice,
    ) -> Result<EndpointSlice, kube::Error> {
        let mut state = self.begin_call()?;
        state.counter += 1;
        let n = state.counter;
        let mut created = slice.clone();
        created.metadata.namespace = Some(namespace.to_owned());
        if created.metadata.name.as_deref().is_none_or(str::is_empty) {
            let prefix = created.metadata.generate_name.clone().unwrap_or_default();
            created.metadata.name = Some(format!("{prefix}{n:05}"));
        }
        created.metadata.uid = Some(format!("slice-uid-{n}"));
        created.metadata.generation = Some(1);
        created.metadata.resource_version = Some(n.to_string());
        let name = created.metadata.name.clone().unwrap_or_default();
        state.actions.push(SliceAction::Create(name.clone()));
        let key = key(&created);
        if state.slices.contains_key(&key) {
            return Err(kube::Error::Api(
                Status::failure(
                    &format!("endpointslices.discovery.k8s.io \"{name}\" already exists"),
                    "AlreadyExists",
                )
                .with_code(409)
                .boxed(),
            ));
        }
        state.slices.insert(key, created.clone());
        Ok(created)
    }

    async fn update(
        &self,
        namespace: &str,
        slice: &EndpointSlice,
    ) -> Result<EndpointSlice, kube::Error> {
        let mut state = self.begin_call()?;
        let name = slice.metadata.name.clone().unwrap_or_default();
        state.actions.push(SliceAction::Update(name.clone()));
        let key = format!("{namespace}/{name}");
        let Some(old) = state.slices.get(&key).cloned() else {
            return Err(kube::Error::Api(
                api_status::not_found("endpointslices", &name).boxed(),
            ));
        };
        state.counter += 1;
        let mut updated = slice.clone();
        updated.metadata.namespace = Some(namespace.to_owned());
        updated.metadata.uid = old.metadata.uid.clone();
        let generation = old.metadata.generation.unwrap_or(1);
        updated.metadata.generation = Some(if spec_changed(&old, slice) {
            generation + 1
        } else {
            generation
        });
        updated.metadata.resource_version = Some(state.counter.to_string());
        state.slices.insert(key, updated.clone());
        Ok(updated)
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let mut state = self.begin_call()?;
        state.actions.push(SliceAction::Delete(name.to_owned()));
        match state.slices.remove(&format!("{namespace}/{name}")) {
            Some(_) => Ok(()),
            None => Err(kube::Error::Api(
                api_status::not_found("endpointslices", name).boxed(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::discovery::v1::Endpoint;

    use super::*;

    #[tokio::test]
    async fn fake_behaves_like_the_server() {
        let fake = FakeEndpointSliceClient::new();
        let mut slice = EndpointSlice {
            address_type: "IPv4".into(),
            ..EndpointSlice::default()
        };
        slice.metadata.generate_name = Some("svc-".into());
        let created = fake.create("ns", &slice).await.expect("create");
        assert_eq!(created.metadata.name.as_deref(), Some("svc-00001"));
        assert_eq!(created.metadata.generation, Some(1));

        let mut labelled = created.clone();
        labelled.metadata.labels = Some(BTreeMap::from([("a".to_owned(), "b".to_owned())]));
        let updated = fake.update("ns", &labelled).await.expect("update");
        assert_eq!(
            updated.metadata.generation,
            Some(1),
            "labels do not bump the generation"
        );
        let mut grown = updated.clone();
        grown
            .endpoints
            .get_or_insert_default()
            .push(Endpoint::default());
        let updated = fake.update("ns", &grown).await.expect("update");
        assert_eq!(updated.metadata.generation, Some(2));

        fake.delete("ns", "svc-00001").await.expect("delete");
        assert!(fake.delete("ns", "svc-00001").await.is_err(), "gone");
        assert_eq!(
            fake.actions(),
            vec![
                SliceAction::Create("svc-00001".into()),
                SliceAction::Update("svc-00001".into()),
                SliceAction::Update("svc-00001".into()),
                SliceAction::Delete("svc-00001".into()),
                SliceAction::Delete("svc-00001".into()),
            ]
        );
    }
}
