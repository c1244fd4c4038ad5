//! The device taint eviction controller's requests (pod get, status patch and delete; DeviceTaintRule status apply) behind a seam with a recording in-memory fake.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1beta2::DeviceTaintRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::core::Status;
use serde_json::{Value, json};

use kcm_machinery::controller::api_status;

/// The requests the device taint eviction controller makes.
#[async_trait]
pub trait DeviceTaintEvictionClient: Send + Sync {
    /// Reads pod `namespace/name` from the server (an uncached GET; NotFound is an error).
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Pod, kube::Error>;

    /// Applies `patch`, a strategic merge of `status` carrying `metadata.uid` as a
    /// precondition, to the pod's `/status` (upstream's `utilpod.PatchPodStatus`).
    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), kube::Error>;

    /// Deletes pod `namespace/name` if its UID is still `uid` (a delete precondition), so that
    /// a replacement under the same name survives.
    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<(), kube::Error>;

    /// Server-side applies `condition` to DeviceTaintRule `name`'s status, if its UID is still
    /// `uid` (field manager `field_manager`, forced), as upstream's `ApplyStatus`.
    async fn apply_rule_status(
        &self,
        name: &str,
        uid: &str,
        condition: &Condition,
        field_manager: &str,
    ) -> Result<(), kube::Error>;
}

/// The apply body of [`DeviceTaintEvictionClient::apply_rule_status`], as upstream's
/// `resourceac.DeviceTaintRule(name).WithUID(uid).WithStatus(...WithConditions(...))`.
pub fn rule_status_apply(name: &str, uid: &str, condition: &Condition) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name, "uid": uid},
        "status": {"conditions": [condition]},
    })
}

/// [`DeviceTaintEvictionClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiDeviceTaintEvictionClient {
    client: kube::Client,
}

impl ApiDeviceTaintEvictionClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiDeviceTaintEvictionClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiDeviceTaintEvictionClient")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl DeviceTaintEvictionClient for ApiDeviceTaintEvictionClient {
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Pod, kube::Error> {
        self.pods(namespace).get(name).await
    }

    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), kube::Error> {
        self.pods(namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(|_| ())
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<(), kube::Error> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        self.pods(namespace).delete(name, &params).await.map(|_| ())
    }

    async fn apply_rule_status(
        &self,
        name: &str,
        uid: &str,
        condition: &Condition,
        field_manager: &str,
    ) -> Result<(), kube::Error> {
        let api: Api<DeviceTaintRule> = Api::all(self.client.clone());
        api.patch_status(
            name,
            &PatchParams::apply(field_manager).force(),
            &Patch::Apply(rule_status_apply(name, uid, condition)),
        )
        .await
        .map(|_| ())
    }
}

/// The request kinds of the fake, for counting and for failing them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `get` of a pod.
    GetPod,
    /// `patch` of a pod's status.
    PatchPodStatus,
    /// `delete` of a pod.
    DeletePod,
    /// the `apply` of a DeviceTaintRule's status.
    ApplyRuleStatus,
}

/// One request the fake saw: the verb and the object's `namespace/name` (a rule's name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// What was asked.
    pub verb: Verb,
    /// Of which object.
    pub key: String,
}

#[derive(Debug, Default)]
struct FakeState {
    /// The server's pods by `namespace/name`.
    pods: BTreeMap<String, Pod>,
    /// Status patches by pod `namespace/name`, in order.
    patches: Vec<(String, Value)>,
    /// Applied rule conditions by rule name, in order.
    rule_conditions: Vec<(String, Condition)>,
    /// Every request, in order.
    actions: Vec<Action>,
    /// Pods deleted, by `namespace/name`, in order.
    deleted: Vec<String>,
    /// Requests of these verbs fail with the status.
    errors: HashMap<Verb, Status>,
}

/// An in-memory [`DeviceTaintEvictionClient`]: a pod store that records every request, honours
/// UID preconditions and fails the verbs it is told to, as client-go's fake clientset with a
/// reactor.
#[derive(Debug, Default)]
pub struct FakeDeviceTaintEvictionClient {
    state: Mutex<FakeState>,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

const PODS: &str = "pods";

impl FakeDeviceTaintEvictionClient {
    /// An empty server.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `pod` on the server.
    pub fn add_pod(&self, pod: Pod) {
        let k = key(
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default(),
        );
        self.state().pods.insert(k, pod);
    }

    /// The server's pods.
    pub fn pods(&self) -> Vec<Pod> {
        self.state().pods.values().cloned().collect()
    }

    /// The status patches sent, as `(namespace/name, patch)`.
    pub fn patches(&self) -> Vec<(String, Value)> {
        self.state().patches.clone()
    }

    /// The rule conditions applied, as `(rule name, condition)`.
    pub fn rule_conditions(&self) -> Vec<(String, Condition)> {
        self.state().rule_conditions.clone()
    }

    /// Every request so far.
    pub fn actions(&self) -> Vec<Action> {
        self.state().actions.clone()
    }

    /// The `namespace/name` of every pod deleted so far (successful deletes only).
    pub fn deleted(&self) -> Vec<String> {
        self.state().deleted.clone()
    }

    /// Makes every later request of `verb` fail with `error` (`None` restores success).
    pub fn set_error(&self, verb: Verb, error: Option<Status>) {
        let mut state = self.state();
        match error {
            Some(status) => state.errors.insert(verb, status),
            None => state.errors.remove(&verb),
        };
    }

    /// Records the request and returns the injected failure, if any.
    fn begin_locked(state: &mut FakeState, verb: Verb, k: String) -> Result<(), kube::Error> {
        state.actions.push(Action { verb, key: k });
        match state.errors.get(&verb) {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(()),
        }
    }
}

fn not_found(name: &str) -> kube::Error {
    kube::Error::Api(api_status::not_found(PODS, name).boxed())
}

fn uid_mismatch(name: &str, want: &str, have: &str) -> kube::Error {
    kube::Error::Api(
        api_status::conflict(
            PODS,
            name,
            &format!(
                "Precondition failed: UID in precondition: {want}, UID in object meta: {have}"
            ),
        )
        .boxed(),
    )
}

#[async_trait]
impl DeviceTaintEvictionClient for FakeDeviceTaintEvictionClient {
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Pod, kube::Error> {
        let mut state = self.state();
        let k = key(namespace, name);
        Self::begin_locked(&mut state, Verb::GetPod, k.clone())?;
        state.pods.get(&k).cloned().ok_or_else(|| not_found(name))
    }

    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        let k = key(namespace, name);
        Self::begin_locked(&mut state, Verb::PatchPodStatus, k.clone())?;
        let Some(pod) = state.pods.get(&k) else {
            return Err(not_found(name));
        };
        let want = patch["metadata"]["uid"].as_str().unwrap_or_default();
        if !want.is_empty() && want != pod_uid(pod) {
            return Err(uid_mismatch(name, want, pod_uid(pod)));
        }
        state.patches.push((k, patch.clone()));
        Ok(())
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<(), kube::Error> {
        let mut state = self.state();
        let k = key(namespace, name);
        Self::begin_locked(&mut state, Verb::DeletePod, k.clone())?;
        let Some(pod) = state.pods.get(&k) else {
            return Err(not_found(name));
        };
        if pod_uid(pod) != uid {
            return Err(uid_mismatch(name, uid, pod_uid(pod)));
        }
        state.pods.remove(&k);
        state.deleted.push(k);
        Ok(())
    }

    async fn apply_rule_status(
        &self,
        name: &str,
        _uid: &str,
        condition: &Condition,
        _field_manager: &str,
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        Self::begin_locked(&mut state, Verb::ApplyRuleStatus, name.to_owned())?;
        state
            .rule_conditions
            .push((name.to_owned(), condition.clone()));
        Ok(())
    }
}
