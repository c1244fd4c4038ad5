//! The Job calls the TTL-after-finished controller makes directly: the uncached GET before deleting, and the DELETE with foreground propagation and a UID precondition.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use kcm_machinery::controller::api_status;
use kcm_machinery::informer::keys::object_key;
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use kube::core::Status;

/// The calls, as upstream's `client.BatchV1().Jobs(ns)`.
#[async_trait]
pub trait TtlJobClient: Send + Sync {
    /// Reads `namespace/name` from the API server (a quorum read, never the cache).
    async fn get(&self, namespace: &str, name: &str) -> Result<Job, kube::Error>;

    /// Deletes `namespace/name` if its UID is still `uid`, its dependents first (foreground
    /// propagation), as upstream's cascading delete.
    async fn delete(&self, namespace: &str, name: &str, uid: &str) -> Result<(), kube::Error>;
}

/// [`TtlJobClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiTtlJobClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiTtlJobClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiTtlJobClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiTtlJobClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl TtlJobClient for ApiTtlJobClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<Job, kube::Error> {
        Api::<Job>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
    }

    async fn delete(&self, namespace: &str, name: &str, uid: &str) -> Result<(), kube::Error> {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        Api::<Job>::namespaced(self.client.clone(), namespace)
            .delete(name, &params)
            .await
            .map(|_| ())
    }
}

/// One DELETE recorded by [`FakeTtlJobClient`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedDelete {
    /// `namespace/name`.
    pub key: String,
    /// The UID precondition.
    pub uid: String,
}

/// What [`FakeTtlJobClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// The "server's" Jobs.
    objects: HashMap<String, Job>,
    /// Every delete, in order.
    deletes: Vec<RecordedDelete>,
    /// GETs made.
    gets: usize,
    /// When set, every delete fails with this status.
    delete_error: Option<Status>,
}

/// A [`TtlJobClient`] serving from memory and recording deletes.
#[derive(Debug, Default)]
pub struct FakeTtlJobClient {
    state: Mutex<FakeState>,
}

impl FakeTtlJobClient {
    /// A fake holding nothing.
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

    /// Every delete so far.
    pub fn deletes(&self) -> Vec<RecordedDelete> {
        self.state().deletes.clone()
    }

    /// How many GETs were made.
    pub fn gets(&self) -> usize {
        self.state().gets
    }

    /// Makes every later delete fail with `status` (or succeed with `None`).
    pub fn set_delete_error(&self, status: Option<Status>) {
        self.state().delete_error = status;
    }
}

#[async_trait]
impl TtlJobClient for FakeTtlJobClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<Job, kube::Error> {
        let mut state = self.state();
        state.gets += 1;
        state
            .objects
            .get(&object_key(namespace, name))
            .cloned()
            .ok_or_else(|| kube::Error::Api(api_status::not_found("jobs.batch", name).boxed()))
    }

    async fn delete(&self, namespace: &str, name: &str, uid: &str) -> Result<(), kube::Error> {
        let mut state = self.state();
        if let Some(status) = &state.delete_error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        let key = object_key(namespace, name);
        state.objects.remove(&key);
        state.deletes.push(RecordedDelete {
            key,
            uid: uid.to_owned(),
        });
        Ok(())
    }
}
