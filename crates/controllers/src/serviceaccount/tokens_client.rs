//! The service account token controller's requests (ServiceAccount get and update, token Secret get, update and delete) behind a seam with a recording in-memory fake.
//!
//! [`TokensClient`] is the seam: [`ApiTokensClient`] talks to the server (upstream's
//! `CoreV1().ServiceAccounts(ns).Get`/`Update` and `CoreV1().Secrets(ns).Get`/`Update`/
//! `Delete`); [`FakeTokensClient`] serves objects from memory and records each call as a
//! [`TokensAction`], as client-go's fake clientset with its object tracker does for upstream's
//! `tokens_controller_test.go`, and can fail the next calls of one verb (a prepended reactor).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::core::Status;

use kcm_machinery::controller::api_status;

/// The requests the token controller makes.
#[async_trait]
pub trait TokensClient: Send + Sync {
    /// GETs ServiceAccount `namespace/name` from the API server.
    async fn get_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ServiceAccount, kube::Error>;

    /// Replaces `account` (an `Update`, failing with a Conflict on a stale resourceVersion).
    async fn update_service_account(
        &self,
        account: &ServiceAccount,
    ) -> Result<ServiceAccount, kube::Error>;

    /// GETs Secret `namespace/name` from the API server.
    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Secret, kube::Error>;

    /// Replaces `secret` (an `Update`, failing with a Conflict on a stale resourceVersion).
    async fn update_secret(&self, secret: &Secret) -> Result<Secret, kube::Error>;

    /// Deletes Secret `namespace/name`, only if its uid is still `uid` when one is given (a
    /// `preconditions.uid` delete, as upstream's `deleteToken`).
    async fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error>;
}

/// [`TokensClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiTokensClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiTokensClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiTokensClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiTokensClient").finish_non_exhaustive()
    }
}

fn namespace_of<K: kube::Resource>(object: &K) -> &str {
    object.meta().namespace.as_deref().unwrap_or_default()
}

fn name_of<K: kube::Resource>(object: &K) -> &str {
    object.meta().name.as_deref().unwrap_or_default()
}

#[async_trait]
impl TokensClient for ApiTokensClient {
    async fn get_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ServiceAccount, kube::Error> {
        Api::<ServiceAccount>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
    }

    async fn update_service_account(
        &self,
        account: &ServiceAccount,
    ) -> Result<ServiceAccount, kube::Error> {
        Api::<ServiceAccount>::namespaced(self.client.clone(), namespace_of(account))
            .replace(name_of(account), &PostParams::default(), account)
            .await
    }

    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Secret, kube::Error> {
        Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
    }

    async fn update_secret(&self, secret: &Secret) -> Result<Secret, kube::Error> {
        Api::<Secret>::namespaced(self.client.clone(), namespace_of(secret))
            .replace(name_of(secret), &PostParams::default(), secret)
            .await
    }

    async fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error> {
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        Api::<Secret>::namespaced(self.client.clone(), namespace)
            .delete(name, &params)
            .await
            .map(drop)
    }
}

// ---------------------------------------------------------------------------------------------
// The fake
// ---------------------------------------------------------------------------------------------

/// One request the fake received, in the shape of client-go's recorded actions
/// (`NewGetAction`, `NewUpdateAction`, `NewDeleteActionWithOptions`).
#[derive(Clone, Debug, PartialEq)]
pub enum TokensAction {
    /// `get serviceaccounts` of `namespace/name`.
    GetServiceAccount {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// `update serviceaccounts` with this body.
    UpdateServiceAccount(ServiceAccount),
    /// `get secrets` of `namespace/name`.
    GetSecret {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// `update secrets` with this body.
    UpdateSecret(Secret),
    /// `delete secrets` of `namespace/name`, with this uid precondition.
    DeleteSecret {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// `preconditions.uid`.
        uid: Option<String>,
    },
}

/// A verb the fake can be told to fail (upstream's `PrependReactor(verb, resource, ...)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokensVerb {
    /// [`TokensClient::get_service_account`].
    GetServiceAccount,
    /// [`TokensClient::update_service_account`].
    UpdateServiceAccount,
    /// [`TokensClient::get_secret`].
    GetSecret,
    /// [`TokensClient::update_secret`].
    UpdateSecret,
    /// [`TokensClient::delete_secret`].
    DeleteSecret,
}

/// What [`FakeTokensClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// The stored accounts by `namespace/name`.
    accounts: BTreeMap<String, ServiceAccount>,
    /// The stored Secrets by `namespace/name`.
    secrets: BTreeMap<String, Secret>,
    /// Errors to answer instead of serving, in order, per verb.
    failures: Vec<(TokensVerb, VecDeque<Status>)>,
    /// Every call, in order (including failed ones, as client-go records them).
    actions: Vec<TokensAction>,
}

impl FakeState {
    /// The next injected failure for `verb`, if any.
    fn take_failure(&mut self, verb: TokensVerb) -> Option<kube::Error> {
        let (_, queue) = self.failures.iter_mut().find(|(v, _)| *v == verb)?;
        queue.pop_front().map(|s| kube::Error::Api(s.boxed()))
    }
}

/// An in-memory [`TokensClient`] recording its calls. Like client-go's object tracker it
/// does not check resourceVersions: an update of a stored object replaces it, an update or
/// a delete of a missing one answers NotFound; a delete whose uid precondition does not
/// match answers Conflict.
#[derive(Debug, Default)]
pub struct FakeTokensClient {
    /// The stored objects, the injected failures and the recorded calls.
    state: Mutex<FakeState>,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl FakeTokensClient {
    /// A fake storing nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `account` (upstream's `ClientObjects`).
    pub fn with_service_account(self, account: ServiceAccount) -> Self {
        let k = key(namespace_of(&account), name_of(&account));
        self.state().accounts.insert(k, account);
        self
    }

    /// Stores `secret` (upstream's `ClientObjects`).
    pub fn with_secret(self, secret: Secret) -> Self {
        let k = key(namespace_of(&secret), name_of(&secret));
        self.state().secrets.insert(k, secret);
        self
    }

    /// Answers the next `times` calls of `verb` with `status` (they are still recorded).
    pub fn fail(&self, verb: TokensVerb, times: usize, status: Status) {
        let mut state = self.state();
        let position = state.failures.iter().position(|(v, _)| *v == verb);
        let queue = match position {
            Some(i) => &mut state.failures[i].1,
            None => {
                state.failures.push((verb, VecDeque::new()));
                let last = state.failures.len() - 1;
                &mut state.failures[last].1
            }
        };
        queue.extend(std::iter::repeat_n(status, times));
    }

    /// The calls so far.
    pub fn actions(&self) -> Vec<TokensAction> {
        self.state().actions.clone()
    }

    /// The stored Secret `namespace/name`.
    pub fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        self.state().secrets.get(&key(namespace, name)).cloned()
    }

    /// The stored ServiceAccount `namespace/name`.
    pub fn service_account(&self, namespace: &str, name: &str) -> Option<ServiceAccount> {
        self.state().accounts.get(&key(namespace, name)).cloned()
    }
}

fn not_found(resource: &str, name: &str) -> kube::Error {
    kube::Error::Api(api_status::not_found(resource, name).boxed())
}

#[async_trait]
impl TokensClient for FakeTokensClient {
    async fn get_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ServiceAccount, kube::Error> {
        let mut state = self.state();
        state.actions.push(TokensAction::GetServiceAccount {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
        if let Some(err) = state.take_failure(TokensVerb::GetServiceAccount) {
            return Err(err);
        }
        state
            .accounts
            .get(&key(namespace, name))
            .cloned()
            .ok_or_else(|| not_found("serviceaccounts", name))
    }

    async fn update_service_account(
        &self,
        account: &ServiceAccount,
    ) -> Result<ServiceAccount, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(TokensAction::UpdateServiceAccount(account.clone()));
        if let Some(err) = state.take_failure(TokensVerb::UpdateServiceAccount) {
            return Err(err);
        }
        let k = key(namespace_of(account), name_of(account));
        match state.accounts.get_mut(&k) {
            Some(stored) => {
                *stored = account.clone();
                Ok(account.clone())
            }
            None => Err(not_found("serviceaccounts", name_of(account))),
        }
    }

    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Secret, kube::Error> {
        let mut state = self.state();
        state.actions.push(TokensAction::GetSecret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
        if let Some(err) = state.take_failure(TokensVerb::GetSecret) {
            return Err(err);
        }
        state
            .secrets
            .get(&key(namespace, name))
            .cloned()
            .ok_or_else(|| not_found("secrets", name))
    }

    async fn update_secret(&self, secret: &Secret) -> Result<Secret, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(TokensAction::UpdateSecret(secret.clone()));
        if let Some(err) = state.take_failure(TokensVerb::UpdateSecret) {
            return Err(err);
        }
        let k = key(namespace_of(secret), name_of(secret));
        match state.secrets.get_mut(&k) {
            Some(stored) => {
                *stored = secret.clone();
                Ok(secret.clone())
            }
            None => Err(not_found("secrets", name_of(secret))),
        }
    }

    async fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        state.actions.push(TokensAction::DeleteSecret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: uid.map(str::to_owned),
        });
        if let Some(err) = state.take_failure(TokensVerb::DeleteSecret) {
            return Err(err);
        }
        let k = key(namespace, name);
        let Some(stored) = state.secrets.get(&k) else {
            return Err(not_found("secrets", name));
        };
        if let Some(uid) = uid
            && stored.metadata.uid.as_deref() != Some(uid)
        {
            let message = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                stored.metadata.uid.as_deref().unwrap_or_default()
            );
            return Err(kube::Error::Api(
                api_status::conflict("secrets", name, &message).boxed(),
            ));
        }
        state.secrets.remove(&k);
        Ok(())
    }
}
