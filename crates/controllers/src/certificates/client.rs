//! The certificate controllers' requests — the `approval` and `status` subresources, deletes, and SubjectAccessReviews — behind a seam, with a recording fake.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewStatus};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::Status;

/// The requests the certificate controllers make.
#[async_trait]
pub trait CsrClient: Send + Sync {
    /// PUTs `csr` to its `approval` subresource (upstream's `UpdateApproval`).
    async fn update_approval(
        &self,
        csr: &CertificateSigningRequest,
    ) -> Result<CertificateSigningRequest, kube::Error>;
    /// PUTs `csr` to its `status` subresource (upstream's `UpdateStatus`).
    async fn update_status(
        &self,
        csr: &CertificateSigningRequest,
    ) -> Result<CertificateSigningRequest, kube::Error>;
    /// DELETEs the CSR `name`.
    async fn delete(&self, name: &str) -> Result<(), kube::Error>;
    /// POSTs `review` and returns whether it was allowed.
    async fn subject_access_review(
        &self,
        review: &SubjectAccessReview,
    ) -> Result<bool, kube::Error>;
}

/// [`CsrClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiCsrClient {
    client: kube::Client,
}

impl ApiCsrClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn csrs(&self) -> Api<CertificateSigningRequest> {
        Api::all(self.client.clone())
    }
}

impl std::fmt::Debug for ApiCsrClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiCsrClient").finish_non_exhaustive()
    }
}

fn name_of(csr: &CertificateSigningRequest) -> &str {
    csr.metadata.name.as_deref().unwrap_or_default()
}

#[async_trait]
impl CsrClient for ApiCsrClient {
    async fn update_approval(
        &self,
        csr: &CertificateSigningRequest,
    ) -> Result<CertificateSigningRequest, kube::Error> {
        self.csrs()
            .replace_subresource("approval", name_of(csr), &PostParams::default(), csr)
            .await
    }

    async fn update_status(
        &self,
        csr: &CertificateSigningRequest,
    ) -> Result<CertificateSigningRequest, kube::Error> {
        self.csrs()
            .replace_status(name_of(csr), &PostParams::default(), csr)
            .await
    }

    async fn delete(&self, name: &str) -> Result<(), kube::Error> {
        self.csrs()
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
    }

    async fn subject_access_review(
        &self,
        review: &SubjectAccessReview,
    ) -> Result<bool, kube::Error> {
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let created = api.create(&PostParams::default(), review).await?;
        Ok(created
            .status
            .is_some_and(|s: SubjectAccessReviewStatus| s.allowed))
    }
}

/// One call recorded by [`FakeCsrClient`].
#[derive(Clone, Debug, PartialEq)]
pub enum CsrAction {
    /// An `approval` update, with the object sent.
    UpdateApproval(Box<CertificateSigningRequest>),
    /// A `status` update, with the object sent.
    UpdateStatus(Box<CertificateSigningRequest>),
    /// A delete of the named CSR.
    Delete(String),
    /// A SubjectAccessReview, with the review sent.
    SubjectAccessReview(Box<SubjectAccessReview>),
}

#[derive(Debug, Default)]
struct FakeState {
    actions: Vec<CsrAction>,
    /// What SubjectAccessReviews answer, by subresource; absent ones are denied.
    allowed: BTreeMap<String, bool>,
    error: Option<Status>,
}

/// An in-memory [`CsrClient`] recording its calls; writes echo the object sent.
#[derive(Debug, Default)]
pub struct FakeCsrClient {
    state: Mutex<FakeState>,
}

impl FakeCsrClient {
    /// A fake that accepts every write and denies every review.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every call so far.
    pub fn actions(&self) -> Vec<CsrAction> {
        self.state().actions.clone()
    }

    /// Makes reviews of `subresource` answer `allowed`.
    pub fn allow(&self, subresource: &str, allowed: bool) {
        self.state().allowed.insert(subresource.to_owned(), allowed);
    }

    /// Makes every later call fail with `error` (`None` restores success).
    pub fn set_error(&self, error: Option<Status>) {
        self.state().error = error;
    }

    fn record(&self, action: CsrAction) -> Result<MutexGuard<'_, FakeState>, kube::Error> {
        let mut state = self.state();
        state.actions.push(action);
        match &state.error {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(state),
        }
    }
}

#[async_trait]
impl CsrClient for FakeCsrClient {
    async fn update_approval(
        &self,
        csr: &CertificateSigningRequest,
    ) -> Result<CertificateSigningRequest, kube::Error> {
        drop(self.record(CsrAction::UpdateApproval(Box::new(csr.clone())))?);
        Ok(csr.clone())
    }

    async fn update_status(
        &self,
        csr: &CertificateSigningRequest,
    ) -> Result<CertificateSigningRequest, kube::Error> {
        drop(self.record(CsrAction::UpdateStatus(Box::new(csr.clone())))?);
        Ok(csr.clone())
    }

    async fn delete(&self, name: &str) -> Result<(), kube::Error> {
        drop(self.record(CsrAction::Delete(name.to_owned()))?);
        Ok(())
    }

    async fn subject_access_review(
        &self,
        review: &SubjectAccessReview,
    ) -> Result<bool, kube::Error> {
        let state = self.record(CsrAction::SubjectAccessReview(Box::new(review.clone())))?;
        let subresource = review
            .spec
            .resource_attributes
            .as_ref()
            .and_then(|r| r.subresource.clone())
            .unwrap_or_default();
        Ok(state.allowed.get(&subresource).copied().unwrap_or(false))
    }
}
