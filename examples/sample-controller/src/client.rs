//! The writes the controller makes (create and update Deployments, update a Foo's status), behind a trait so tests can record them, as upstream's fake clientsets.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};

use crate::foo::Foo;

/// The controller's API writes.
#[async_trait]
pub trait SampleClient: Send + Sync {
    /// Creates `deployment` in its namespace.
    async fn create_deployment(&self, deployment: &Deployment) -> Result<Deployment, kube::Error>;
    /// Replaces `deployment` (its `resourceVersion` is a precondition).
    async fn update_deployment(&self, deployment: &Deployment) -> Result<Deployment, kube::Error>;
    /// Writes `foo`'s status through the status subresource.
    async fn update_foo_status(&self, foo: &Foo) -> Result<Foo, kube::Error>;
}

/// [`SampleClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct KubeSampleClient {
    client: kube::Client,
}

impl KubeSampleClient {
    /// Writes through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

fn namespace_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("default")
}

#[async_trait]
impl SampleClient for KubeSampleClient {
    async fn create_deployment(&self, deployment: &Deployment) -> Result<Deployment, kube::Error> {
        Api::<Deployment>::namespaced(self.client.clone(), namespace_of(&deployment.metadata))
            .create(&PostParams::default(), deployment)
            .await
    }

    async fn update_deployment(&self, deployment: &Deployment) -> Result<Deployment, kube::Error> {
        let name = deployment.metadata.name.as_deref().unwrap_or_default();
        Api::<Deployment>::namespaced(self.client.clone(), namespace_of(&deployment.metadata))
            .replace(name, &PostParams::default(), deployment)
            .await
    }

    async fn update_foo_status(&self, foo: &Foo) -> Result<Foo, kube::Error> {
        let name = foo.metadata.name.as_deref().unwrap_or_default();
        // A PUT of the whole Foo to /status (upstream's UpdateStatus), as a DynamicObject so
        // the body carries apiVersion and kind.
        let body = foo.to_body().map_err(kube::Error::SerdeError)?;
        let object: DynamicObject =
            serde_json::from_slice(&body).map_err(kube::Error::SerdeError)?;
        let resource = ApiResource::erase::<Foo>(&());
        let written = Api::<DynamicObject>::namespaced_with(
            self.client.clone(),
            namespace_of(&foo.metadata),
            &resource,
        )
        .replace_status(name, &PostParams::default(), &object)
        .await?;
        serde_json::to_value(written)
            .and_then(serde_json::from_value)
            .map_err(kube::Error::SerdeError)
    }
}

/// One write a [`FakeSampleClient`] was asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// `create deployments`.
    CreateDeployment(Deployment),
    /// `update deployments`.
    UpdateDeployment(Deployment),
    /// `update foos/status`.
    UpdateFooStatus(Foo),
}

/// Records every write and answers with the object written, as upstream's fake clientset.
#[derive(Clone, Debug, Default)]
pub struct FakeSampleClient {
    actions: Arc<Mutex<Vec<Action>>>,
}

impl FakeSampleClient {
    /// A client with no recorded action.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every action so far, oldest first.
    pub fn actions(&self) -> Vec<Action> {
        self.actions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn record(&self, action: Action) {
        self.actions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(action);
    }
}

#[async_trait]
impl SampleClient for FakeSampleClient {
    async fn create_deployment(&self, deployment: &Deployment) -> Result<Deployment, kube::Error> {
        self.record(Action::CreateDeployment(deployment.clone()));
        Ok(deployment.clone())
    }

    async fn update_deployment(&self, deployment: &Deployment) -> Result<Deployment, kube::Error> {
        self.record(Action::UpdateDeployment(deployment.clone()));
        Ok(deployment.clone())
    }

    async fn update_foo_status(&self, foo: &Foo) -> Result<Foo, kube::Error> {
        self.record(Action::UpdateFooStatus(foo.clone()));
        Ok(foo.clone())
    }
}
