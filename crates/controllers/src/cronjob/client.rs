//! The API calls the CronJob controller makes directly: CronJob reads and status writes, Job reads, creations and deletions, as upstream's `injection.go` (`cjControlInterface`, `jobControlInterface`).
//!
//! [`CronJobControl`] and [`JobControl`] are the seams; the `Api*` implementations talk to the
//! server, the `Fake*` ones record calls and inject failures for unit tests (upstream's
//! `fakeCJControl` and `fakeJobControl`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::api_status;
use kcm_machinery::informer::keys::object_key;
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use kube::core::Status;

/// The CronJob calls, as upstream's `cjControlInterface`.
#[async_trait]
pub trait CronJobControl: Send + Sync {
    /// Reads `namespace/name` from the API server (uncached), as `GetCronJob`.
    async fn get_cron_job(&self, namespace: &str, name: &str) -> Result<CronJob, kube::Error>;

    /// Writes `cron_job.status` through `/status`, as `UpdateStatus`.
    async fn update_status(&self, cron_job: &CronJob) -> Result<CronJob, kube::Error>;
}

/// The Job calls, as upstream's `jobControlInterface`.
#[async_trait]
pub trait JobControl: Send + Sync {
    /// Reads `namespace/name` from the API server (uncached), as `GetJob`.
    async fn get_job(&self, namespace: &str, name: &str) -> Result<Job, kube::Error>;

    /// Creates `job` in `namespace`, as `CreateJob`.
    async fn create_job(&self, namespace: &str, job: &Job) -> Result<Job, kube::Error>;

    /// Deletes `namespace/name` with background propagation (its pods go after it), as
    /// `DeleteJob`.
    async fn delete_job(&self, namespace: &str, name: &str) -> Result<(), kube::Error>;
}

/// [`CronJobControl`] and [`JobControl`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiCronJobControl {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiCronJobControl {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiCronJobControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiCronJobControl").finish_non_exhaustive()
    }
}

#[async_trait]
impl CronJobControl for ApiCronJobControl {
    async fn get_cron_job(&self, namespace: &str, name: &str) -> Result<CronJob, kube::Error> {
        Api::<CronJob>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
    }

    async fn update_status(&self, cron_job: &CronJob) -> Result<CronJob, kube::Error> {
        let namespace = cron_job.metadata.namespace.as_deref().unwrap_or_default();
        let name = cron_job.metadata.name.as_deref().unwrap_or_default();
        Api::<CronJob>::namespaced(self.client.clone(), namespace)
            .replace_status(name, &PostParams::default(), cron_job)
            .await
    }
}

#[async_trait]
impl JobControl for ApiCronJobControl {
    async fn get_job(&self, namespace: &str, name: &str) -> Result<Job, kube::Error> {
        Api::<Job>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
    }

    async fn create_job(&self, namespace: &str, job: &Job) -> Result<Job, kube::Error> {
        Api::<Job>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), job)
            .await
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        Api::<Job>::namespaced(self.client.clone(), namespace)
            .delete(name, &params)
            .await
            .map(|_| ())
    }
}

fn key_of(namespace: Option<&str>, name: Option<&str>) -> String {
    object_key(namespace.unwrap_or_default(), name.unwrap_or_default())
}

fn api_error(status: &Status) -> kube::Error {
    kube::Error::Api(status.clone().boxed())
}

/// What [`FakeCronJobControl`] holds.
#[derive(Debug, Default)]
struct FakeCronJobState {
    /// The "server's" CronJobs by `namespace/name`.
    objects: HashMap<String, CronJob>,
    /// Every status written, in order.
    updates: Vec<CronJob>,
    /// When set, every `update_status` fails with this status.
    update_error: Option<Status>,
}

/// A [`CronJobControl`] serving from memory and recording status writes, as upstream's
/// `fakeCJControl`.
#[derive(Debug, Default)]
pub struct FakeCronJobControl {
    state: Mutex<FakeCronJobState>,
}

impl FakeCronJobControl {
    /// A fake holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeCronJobState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `cron_job` as the server's copy.
    pub fn insert(&self, cron_job: CronJob) {
        let key = key_of(
            cron_job.metadata.namespace.as_deref(),
            cron_job.metadata.name.as_deref(),
        );
        self.state().objects.insert(key, cron_job);
    }

    /// Every status written so far, in order.
    pub fn updates(&self) -> Vec<CronJob> {
        self.state().updates.clone()
    }

    /// Makes every later `update_status` fail with `status` (or succeed with `None`).
    pub fn set_update_error(&self, status: Option<Status>) {
        self.state().update_error = status;
    }
}

#[async_trait]
impl CronJobControl for FakeCronJobControl {
    async fn get_cron_job(&self, namespace: &str, name: &str) -> Result<CronJob, kube::Error> {
        self.state()
            .objects
            .get(&object_key(namespace, name))
            .cloned()
            .ok_or_else(|| api_error(&api_status::not_found("cronjobs.batch", name)))
    }

    async fn update_status(&self, cron_job: &CronJob) -> Result<CronJob, kube::Error> {
        let mut state = self.state();
        if let Some(status) = &state.update_error {
            return Err(api_error(status));
        }
        state.updates.push(cron_job.clone());
        let key = key_of(
            cron_job.metadata.namespace.as_deref(),
            cron_job.metadata.name.as_deref(),
        );
        state.objects.insert(key, cron_job.clone());
        Ok(cron_job.clone())
    }
}

/// What [`FakeJobControl`] holds.
#[derive(Debug, Default)]
struct FakeJobState {
    /// The "server's" Jobs by `namespace/name` (created ones are added).
    objects: HashMap<String, Job>,
    /// Every Job created, in order.
    created: Vec<Job>,
    /// Names of every Job deleted, in order.
    deleted: Vec<String>,
    /// When set, every call fails with this status.
    error: Option<Status>,
    /// When set, `create_job` fails with this status (other calls succeed).
    create_error: Option<Status>,
}

/// A [`JobControl`] serving from memory and recording calls, as upstream's `fakeJobControl`.
/// A created Job gets UID `test-uid` and the creation time the fake was given.
#[derive(Debug)]
pub struct FakeJobControl {
    state: Mutex<FakeJobState>,
    /// The creation timestamp created Jobs get.
    created_at: Timestamp,
}

impl FakeJobControl {
    /// A fake whose created Jobs get `created_at` as their creation timestamp.
    pub fn new(created_at: Timestamp) -> Self {
        Self {
            state: Mutex::default(),
            created_at,
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeJobState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `job` as the server's copy.
    pub fn insert(&self, job: Job) {
        let key = key_of(
            job.metadata.namespace.as_deref(),
            job.metadata.name.as_deref(),
        );
        self.state().objects.insert(key, job);
    }

    /// Every Job created so far.
    pub fn created(&self) -> Vec<Job> {
        self.state().created.clone()
    }

    /// Names of every Job deleted so far.
    pub fn deleted(&self) -> Vec<String> {
        self.state().deleted.clone()
    }

    /// Makes every later call fail with `status` (or succeed with `None`).
    pub fn set_error(&self, status: Option<Status>) {
        self.state().error = status;
    }

    /// Makes every later `create_job` fail with `status` (or succeed with `None`).
    pub fn set_create_error(&self, status: Option<Status>) {
        self.state().create_error = status;
    }
}

#[async_trait]
impl JobControl for FakeJobControl {
    async fn get_job(&self, namespace: &str, name: &str) -> Result<Job, kube::Error> {
        let state = self.state();
        if let Some(status) = &state.error {
            return Err(api_error(status));
        }
        state
            .objects
            .get(&object_key(namespace, name))
            .cloned()
            .ok_or_else(|| api_error(&api_status::not_found("jobs.batch", name)))
    }

    async fn create_job(&self, namespace: &str, job: &Job) -> Result<Job, kube::Error> {
        let mut state = self.state();
        if let Some(status) = state.error.as_ref().or(state.create_error.as_ref()) {
            return Err(api_error(status));
        }
        let mut created = job.clone();
        created.metadata.namespace = Some(namespace.to_owned());
        created.metadata.uid = Some("test-uid".to_owned());
        created.metadata.creation_timestamp = Some(Time(self.created_at));
        state.created.push(created.clone());
        let key = key_of(Some(namespace), created.metadata.name.as_deref());
        state.objects.insert(key, created.clone());
        Ok(created)
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let mut state = self.state();
        if let Some(status) = &state.error {
            return Err(api_error(status));
        }
        state.deleted.push(name.to_owned());
        state.objects.remove(&object_key(namespace, name));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_machinery::controller::ApiStatus;
    use kcm_testing::MetaBuilder;

    #[tokio::test]
    async fn fakes_serve_record_and_fail() {
        let at = Timestamp::UNIX_EPOCH;
        let jobs = FakeJobControl::new(at);
        let created = jobs
            .create_job("ns", &kcm_testing::job("j").build())
            .await
            .expect("create");
        assert_eq!(created.metadata.uid.as_deref(), Some("test-uid"));
        assert_eq!(created.metadata.creation_timestamp, Some(Time(at)));
        assert!(jobs.get_job("ns", "j").await.is_ok());
        jobs.delete_job("ns", "j").await.expect("delete");
        assert!(
            jobs.get_job("ns", "j")
                .await
                .expect_err("gone")
                .is_not_found()
        );
        assert_eq!(jobs.deleted(), vec!["j".to_owned()]);
        jobs.set_error(Some(api_status::internal_error("boom")));
        assert!(jobs.delete_job("ns", "j").await.is_err());

        let cron_jobs = FakeCronJobControl::new();
        let cj = kcm_testing::cron_job("cj").namespace("ns").build();
        cron_jobs.update_status(&cj).await.expect("update");
        assert_eq!(cron_jobs.updates().len(), 1);
        assert!(cron_jobs.get_cron_job("ns", "cj").await.is_ok());
        cron_jobs.set_update_error(Some(api_status::conflict("cronjobs.batch", "cj", "stale")));
        assert!(
            cron_jobs
                .update_status(&cj)
                .await
                .expect_err("conflict")
                .is_conflict()
        );
    }
}
