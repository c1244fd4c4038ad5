//! The Job API calls the controller makes directly: the uncached GET before adopting pods and the `/status` update.
//!
//! Everything else the controller reads comes from the informer caches, as upstream's
//! `kubeClient.BatchV1().Jobs(ns)` calls in `getPodsForJob` and `updateJobStatus`.
//! [`JobClient`] is the seam: [`ApiJobClient`] talks to the server, [`FakeJobClient`] records
//! the calls and injects failures for unit tests.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use kcm_machinery::controller::api_status;
use kcm_machinery::informer::keys::object_key;
use kube::api::{Api, PostParams};
use kube::core::Status;

/// The Job calls the controller makes to the API server, bypassing the cache.
#[async_trait]
pub trait JobClient: Send + Sync {
    /// Reads `namespace/name` from the API server, as client-go's `Jobs(ns).Get`.
    async fn get(&self, namespace: &str, name: &str) -> Result<Job, kube::Error>;

    /// Writes `job.status` through the `/status` subresource with `job`'s resourceVersion as
    /// the precondition, as upstream's `updateJobStatus`. Returns the Job as stored.
    async fn update_status(&self, job: &Job) -> Result<Job, kube::Error>;
}

/// [`JobClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiJobClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiJobClient {
    /// Job calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<Job> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiJobClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiJobClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl JobClient for ApiJobClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<Job, kube::Error> {
        self.api(namespace).get(name).await
    }

    async fn update_status(&self, job: &Job) -> Result<Job, kube::Error> {
        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        let name = job.metadata.name.as_deref().unwrap_or_default();
        self.api(namespace)
            .replace_status(name, &PostParams::default(), job)
            .await
    }
}

/// One call recorded by [`FakeJobClient`].
#[derive(Clone, Debug, PartialEq)]
pub enum JobAction {
    /// A `get` of `namespace/name`.
    Get {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// An `update_status` with this object.
    UpdateStatus(Box<Job>),
}

/// What [`FakeJobClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// The "server's" objects by `namespace/name`.
    objects: HashMap<String, Job>,
    /// Every call, in order (failed ones too).
    actions: Vec<JobAction>,
    /// When set, every `get` fails with this status.
    get_error: Option<Status>,
    /// When set, every `update_status` fails with this status.
    update_error: Option<Status>,
}

/// A [`JobClient`] serving objects from memory and recording calls, as upstream's fake
/// clientset with reactors. A successful `update_status` stores and returns the object it was
/// given; a `get` of an unknown object is a NotFound.
#[derive(Debug, Default)]
pub struct FakeJobClient {
    state: Mutex<FakeState>,
}

impl FakeJobClient {
    /// A fake holding nothing and failing nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `job` as the server's copy.
    pub fn insert(&self, job: Job) {
        let key = object_key(
            job.metadata.namespace.as_deref().unwrap_or_default(),
            job.metadata.name.as_deref().unwrap_or_default(),
        );
        self.state().objects.insert(key, job);
    }

    /// Makes every later `get` fail with `status` (or succeed again with `None`).
    pub fn set_get_error(&self, status: Option<Status>) {
        self.state().get_error = status;
    }

    /// Makes every later `update_status` fail with `status` (or succeed again with `None`).
    pub fn set_update_error(&self, status: Option<Status>) {
        self.state().update_error = status;
    }

    /// Every call so far, in order.
    pub fn actions(&self) -> Vec<JobAction> {
        self.state().actions.clone()
    }

    /// The objects of every `update_status` call so far, in order.
    pub fn status_updates(&self) -> Vec<Job> {
        self.state()
            .actions
            .iter()
            .filter_map(|a| match a {
                JobAction::UpdateStatus(job) => Some((**job).clone()),
                JobAction::Get { .. } => None,
            })
            .collect()
    }

    /// Forgets the recorded calls.
    pub fn clear_actions(&self) {
        self.state().actions.clear();
    }
}

#[async_trait]
impl JobClient for FakeJobClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<Job, kube::Error> {
        let mut state = self.state();
        state.actions.push(JobAction::Get {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
        if let Some(status) = &state.get_error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        state
            .objects
            .get(&object_key(namespace, name))
            .cloned()
            .ok_or_else(|| kube::Error::Api(api_status::not_found("jobs.batch", name).boxed()))
    }

    async fn update_status(&self, job: &Job) -> Result<Job, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(JobAction::UpdateStatus(Box::new(job.clone())));
        if let Some(status) = &state.update_error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        let key = object_key(
            job.metadata.namespace.as_deref().unwrap_or_default(),
            job.metadata.name.as_deref().unwrap_or_default(),
        );
        state.objects.insert(key, job.clone());
        Ok(job.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_machinery::controller::ApiStatus;
    use kcm_testing::MetaBuilder;

    #[tokio::test]
    async fn fake_serves_stores_and_records() {
        let fake = FakeJobClient::new();
        fake.insert(kcm_testing::job("a").namespace("ns").build());
        assert!(fake.get("ns", "a").await.is_ok());
        assert!(
            fake.get("ns", "b")
                .await
                .expect_err("missing")
                .is_not_found()
        );
        let updated = kcm_testing::job("a").namespace("ns").succeeded(1).build();
        fake.update_status(&updated).await.expect("update");
        assert_eq!(fake.status_updates(), vec![updated]);
        assert_eq!(fake.actions().len(), 3);
        fake.set_update_error(Some(api_status::conflict("jobs.batch", "a", "stale")));
        assert!(
            fake.update_status(&kcm_testing::job("a").namespace("ns").build())
                .await
                .expect_err("injected")
                .is_conflict()
        );
        fake.clear_actions();
        assert!(fake.actions().is_empty());
    }
}
