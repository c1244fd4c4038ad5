//! The one API call of the service account controller, creating a ServiceAccount, behind a seam with a recording fake.
//!
//! [`ServiceAccountClient`] is the seam: [`ApiServiceAccountClient`] talks to the server
//! (upstream's `CoreV1().ServiceAccounts(ns).Create`), [`FakeServiceAccountClient`] records the
//! calls and answers as a server would (AlreadyExists for a name it holds, or an injected
//! error) for unit tests.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::core::Status;
use kube::core::response::{StatusDetails, StatusSummary};

/// The requests the service account controller makes.
#[async_trait]
pub trait ServiceAccountClient: Send + Sync {
    /// POSTs `account` into `namespace`.
    async fn create(
        &self,
        namespace: &str,
        account: &ServiceAccount,
    ) -> Result<ServiceAccount, kube::Error>;
}

/// [`ServiceAccountClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiServiceAccountClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiServiceAccountClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiServiceAccountClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServiceAccountClient")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ServiceAccountClient for ApiServiceAccountClient {
    async fn create(
        &self,
        namespace: &str,
        account: &ServiceAccount,
    ) -> Result<ServiceAccount, kube::Error> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        api.create(&PostParams::default(), account).await
    }
}

// ---------------------------------------------------------------------------------------------
// The fake
// ---------------------------------------------------------------------------------------------

/// What [`FakeServiceAccountClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// `namespace/name` of every account the fake holds; creating one of them answers
    /// AlreadyExists.
    stored: BTreeSet<String>,
    /// Every `create` call, as `namespace/name`, in order.
    creates: Vec<String>,
    /// When set, every `create` fails with this status (and stores nothing).
    error: Option<Status>,
    /// When set, the next call through the client trait panics (and clears it): a sync that
    /// panics once, for the shared worker's panic recovery.
    panic_next_call: bool,
}

/// An in-memory [`ServiceAccountClient`] recording its calls.
#[derive(Debug, Default)]
pub struct FakeServiceAccountClient {
    /// The stored names, the recorded calls and the injected error.
    state: Mutex<FakeState>,
}

impl FakeServiceAccountClient {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next call through the client trait panic, once (tests of the shared worker's
    /// panic recovery).
    pub fn panic_on_next_call(&self) {
        self.state().panic_next_call = true;
    }

    /// Panics if [`Self::panic_on_next_call`] armed it; the state's lock is released first, so
    /// the fake stays usable.
    fn take_injected_panic(&self) {
        let armed = std::mem::take(&mut self.state().panic_next_call);
        if armed {
            panic!("FakeServiceAccountClient: injected panic");
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks `namespace/name` as stored, so creating it answers AlreadyExists.
    pub fn insert(&self, namespace: &str, name: &str) {
        self.state().stored.insert(format!("{namespace}/{name}"));
    }

    /// Forgets `namespace/name`, as a deletion on the server.
    pub fn remove(&self, namespace: &str, name: &str) {
        self.state().stored.remove(&format!("{namespace}/{name}"));
    }

    /// Whether `namespace/name` is stored.
    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.state().stored.contains(&format!("{namespace}/{name}"))
    }

    /// Makes every later `create` fail with `error` (`None` restores success).
    pub fn set_error(&self, error: Option<Status>) {
        self.state().error = error;
    }

    /// The `create` calls so far, as `namespace/name`.
    pub fn creates(&self) -> Vec<String> {
        self.state().creates.clone()
    }
}

/// A 409 AlreadyExists status for service account `name`, as apimachinery's
/// `NewAlreadyExists`.
pub fn already_exists(name: &str) -> Status {
    Status {
        status: Some(StatusSummary::Failure),
        code: 409,
        message: format!("serviceaccounts \"{name}\" already exists"),
        metadata: None,
        reason: "AlreadyExists".to_owned(),
        details: Some(StatusDetails {
            name: name.to_owned(),
            group: String::new(),
            kind: "serviceaccounts".to_owned(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds: 0,
        }),
    }
}

#[async_trait]
impl ServiceAccountClient for FakeServiceAccountClient {
    async fn create(
        &self,
        namespace: &str,
        account: &ServiceAccount,
    ) -> Result<ServiceAccount, kube::Error> {
        self.take_injected_panic();
        let name = account.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        let mut state = self.state();
        state.creates.push(key.clone());
        if let Some(status) = &state.error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        if !state.stored.insert(key) {
            return Err(kube::Error::Api(already_exists(&name).boxed()));
        }
        let mut created = account.clone();
        created.metadata.namespace = Some(namespace.to_owned());
        Ok(created)
    }
}
