//! The Foo controller, as upstream's `controller.go`: constants → the controller → its construction (informer handlers) → `run` → handlers → `sync` → helpers.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, ObjectReference, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kcm_machinery::controller::{ErrorPolicy, get_controller_of, run_workers};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::{meta_namespace_key, split_meta_namespace_key};
use kcm_machinery::informer::lister::Lister;
use kcm_machinery::informer::{
    ResourceEventHandlerFuncs, SharedIndexInformer, SharedInformerFactory, wait_until_synced,
};
use kcm_machinery::workqueue::{RateLimitingQueue, default_controller_rate_limiter};
use tokio_util::sync::CancellationToken;

use crate::client::SampleClient;
use crate::foo::{Foo, GROUP, KIND, VERSION};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// The controller's name: the events' source component and the workers' log field.
pub const CONTROLLER_AGENT_NAME: &str = "sample-controller";
/// The reason of the event recorded when a Foo is synced.
pub const SUCCESS_SYNCED: &str = "Synced";
/// The reason of the event recorded when a Deployment of the Foo's name exists and is not
/// controlled by the Foo.
pub const ERR_RESOURCE_EXISTS: &str = "ErrResourceExists";
/// The message of [`SUCCESS_SYNCED`].
pub const MESSAGE_RESOURCE_SYNCED: &str = "Foo synced successfully";
/// How many workers `run` starts by default (upstream's `main.go` runs two).
pub const DEFAULT_WORKERS: usize = 2;

/// The message of [`ERR_RESOURCE_EXISTS`], as upstream's `MessageResourceExists`.
pub fn message_resource_exists(name: &str) -> String {
    format!("Resource {name:?} already exists and is not managed by Foo")
}

/// Every failed sync is requeued rate-limited, forever, as upstream's `processNextWorkItem`.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("error syncing foo");

/// What a sync can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API write failed.
    #[error("{op} {object}: {source}")]
    Api {
        /// What was written (`create deployment`).
        op: &'static str,
        /// `namespace/name`.
        object: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The Deployment named by the Foo exists and another owner controls it.
    #[error("{0}")]
    ResourceExists(String),
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Keeps each Foo's Deployment in step with the Foo, and the Foo's status with the Deployment.
pub struct Controller {
    /// The writes (test seam: [`crate::client::FakeSampleClient`]).
    client: Arc<dyn SampleClient>,
    /// Foos, from the informer's cache.
    foos: Lister<Foo>,
    /// Deployments, from the informer's cache.
    deployments: Lister<Deployment>,
    /// Whether the two informers have synced.
    synced: Vec<Arc<dyn Fn() -> bool + Send + Sync>>,
    /// Foo keys (`namespace/name`) to sync, shared with the handlers.
    queue: RateLimitingQueue<String>,
    /// Records `Synced` and `ErrResourceExists` on Foos.
    recorder: Arc<dyn EventRecorder>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor: the informers' handlers
// ---------------------------------------------------------------------------------------------

impl Controller {
    /// The controller over the factory's Foo and Deployment informers, as upstream's
    /// `NewController`: a Foo added or updated is enqueued; a Deployment added, changed or
    /// deleted enqueues the Foo that controls it.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: Arc<dyn SampleClient>,
        recorder: Arc<dyn EventRecorder>,
    ) -> Self {
        let foo_informer: SharedIndexInformer<Foo> = factory.informer_for();
        let deployment_informer = factory.deployments();
        let controller = Self::with_listers(
            client,
            foo_informer.lister(),
            deployment_informer.lister(),
            recorder,
        );
        let queue = controller.queue.clone();
        let (on_add, on_update) = (queue.clone(), queue.clone());
        let foo_handlers = ResourceEventHandlerFuncs::new()
            .add_func(move |foo: Arc<Foo>, _| enqueue_foo(&on_add, &foo))
            .update_func(move |_old, new: Arc<Foo>| enqueue_foo(&on_update, &new));
        let foos = controller.foos.clone();
        let (add_foos, update_foos, delete_foos) = (foos.clone(), foos.clone(), foos);
        let (add_q, update_q, delete_q) = (queue.clone(), queue.clone(), queue);
        let deployment_handlers = ResourceEventHandlerFuncs::new()
            .add_func(move |d: Arc<Deployment>, _| handle_object(&add_q, &add_foos, &d.metadata))
            .update_func(move |old: Arc<Deployment>, new: Arc<Deployment>| {
                // A periodic resync sends the same Deployment again: nothing changed.
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                handle_object(&update_q, &update_foos, &new.metadata);
            })
            .delete_func(move |d: DeletedObject<Deployment>| {
                handle_object(&delete_q, &delete_foos, &d.object().metadata)
            });
        if let Err(e) = foo_informer.add_event_handler(foo_handlers) {
            tracing::error!(error = %e, "adding the Foo event handler");
        }
        if let Err(e) = deployment_informer.add_event_handler(deployment_handlers) {
            tracing::error!(error = %e, "adding the Deployment event handler");
        }
        let (f, d) = (foo_informer.clone(), deployment_informer.clone());
        Self {
            synced: vec![
                Arc::new(move || f.has_synced()),
                Arc::new(move || d.has_synced()),
            ],
            ..controller
        }
    }

    /// A controller over bare listers with no informer handlers (tests seed the caches and
    /// call [`Self::sync`]).
    pub fn with_listers(
        client: Arc<dyn SampleClient>,
        foos: Lister<Foo>,
        deployments: Lister<Deployment>,
        recorder: Arc<dyn EventRecorder>,
    ) -> Self {
        Self {
            client,
            foos,
            deployments,
            synced: Vec::new(),
            queue: RateLimitingQueue::new(default_controller_rate_limiter()),
            recorder,
        }
    }

    /// The work queue (tests read what the handlers enqueued).
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches, then runs `workers` workers until `cancel` fires, as upstream's
    /// `Run`; the informers must have been started (`factory.start`).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!("Starting Foo controller");
        let synced = self.synced.clone();
        if !wait_until_synced(CONTROLLER_AGENT_NAME, &cancel, || {
            synced.iter().all(|s| s())
        })
        .await
        {
            return;
        }
        tracing::info!(workers, "Started workers");
        let this = Arc::clone(&self);
        run_workers(
            CONTROLLER_AGENT_NAME,
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            move |key: String| {
                let this = Arc::clone(&this);
                async move { this.sync(&key).await }
            },
        )
        .await;
        tracing::info!("Shutting down workers");
    }

    // -----------------------------------------------------------------------------------------
    // sync
    // -----------------------------------------------------------------------------------------

    /// Brings the Foo `key` and its Deployment together, as upstream's `syncHandler`.
    pub async fn sync(&self, key: &str) -> Result<(), Error> {
        let Ok((Some(namespace), name)) = split_meta_namespace_key(key) else {
            tracing::error!(key, "invalid resource key");
            return Ok(());
        };
        let Some(foo) = self.foos.get(namespace, name) else {
            tracing::error!(key, "foo referenced by item in work queue no longer exists");
            return Ok(());
        };
        let deployment_name = foo.spec.deployment_name.as_str();
        if deployment_name.is_empty() {
            tracing::error!(key, "deployment name must be specified");
            return Ok(());
        }
        let deployment = match self.deployments.get(namespace, deployment_name) {
            Some(d) => d,
            None => {
                let created = self
                    .client
                    .create_deployment(&new_deployment(&foo))
                    .await
                    .map_err(|source| Error::Api {
                        op: "create deployment",
                        object: format!("{namespace}/{deployment_name}"),
                        source,
                    })?;
                Arc::new(created)
            }
        };
        if !is_controlled_by(&deployment.metadata, &foo) {
            let message = message_resource_exists(deployment_name);
            self.recorder.event(
                &object_reference(&foo),
                EventType::Warning,
                ERR_RESOURCE_EXISTS,
                message.clone(),
            );
            return Err(Error::ResourceExists(message));
        }
        let current = deployment.spec.as_ref().and_then(|s| s.replicas);
        let deployment = match foo.spec.replicas {
            Some(want) if Some(want) != current => {
                tracing::info!(
                    foo = key,
                    desired = want,
                    current = current.unwrap_or(0),
                    "Update deployment resource"
                );
                let mut updated = new_deployment(&foo);
                updated.metadata.resource_version = deployment.metadata.resource_version.clone();
                Arc::new(
                    self.client
                        .update_deployment(&updated)
                        .await
                        .map_err(|source| Error::Api {
                            op: "update deployment",
                            object: format!("{namespace}/{deployment_name}"),
                            source,
                        })?,
                )
            }
            _ => deployment,
        };
        self.update_foo_status(&foo, &deployment).await?;
        self.recorder.event(
            &object_reference(&foo),
            EventType::Normal,
            SUCCESS_SYNCED,
            MESSAGE_RESOURCE_SYNCED.to_owned(),
        );
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Helpers
    // -----------------------------------------------------------------------------------------

    /// Writes the Deployment's available replicas into the Foo's status (never modifying the
    /// cached Foo: a copy is written), as upstream's `updateFooStatus`.
    async fn update_foo_status(&self, foo: &Foo, deployment: &Deployment) -> Result<(), Error> {
        let mut copy = foo.clone();
        copy.status.available_replicas = deployment
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        self.client
            .update_foo_status(&copy)
            .await
            .map(drop)
            .map_err(|source| Error::Api {
                op: "update foo status",
                object: format!(
                    "{}/{}",
                    foo.metadata.namespace.as_deref().unwrap_or(""),
                    foo.metadata.name.as_deref().unwrap_or("")
                ),
                source,
            })
    }
}

/// Enqueues a Foo's key, as upstream's `enqueueFoo`.
fn enqueue_foo(queue: &RateLimitingQueue<String>, foo: &Foo) {
    match meta_namespace_key(foo) {
        Ok(key) => queue.add(key),
        Err(e) => tracing::error!(error = %e, "cannot key a Foo"),
    }
}

/// Enqueues the Foo controlling an object (a Deployment), if any and if it exists, as
/// upstream's `handleObject` (tombstones arrive already unwrapped as [`DeletedObject`]).
fn handle_object(queue: &RateLimitingQueue<String>, foos: &Lister<Foo>, meta: &ObjectMeta) {
    let Some(owner) = get_controller_of(meta) else {
        return;
    };
    // A Deployment not owned by a Foo is none of this controller's business.
    if owner.kind != KIND {
        return;
    }
    let namespace = meta.namespace.as_deref().unwrap_or("");
    match foos.get(namespace, &owner.name) {
        Some(foo) => enqueue_foo(queue, &foo),
        None => tracing::debug!(
            object = meta.name.as_deref().unwrap_or(""),
            foo = %owner.name,
            "ignoring orphaned object"
        ),
    }
}

/// Whether the Foo is the controller of the object, as `metav1.IsControlledBy` (by UID).
fn is_controlled_by(meta: &ObjectMeta, foo: &Foo) -> bool {
    match (get_controller_of(meta), foo.metadata.uid.as_deref()) {
        (Some(owner), Some(uid)) => owner.uid == uid,
        _ => false,
    }
}

/// The reference events about a Foo are recorded against.
fn object_reference(foo: &Foo) -> ObjectReference {
    ObjectReference {
        api_version: Some(format!("{GROUP}/{VERSION}")),
        kind: Some(KIND.to_owned()),
        name: foo.metadata.name.clone(),
        namespace: foo.metadata.namespace.clone(),
        uid: foo.metadata.uid.clone(),
        resource_version: foo.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// The Deployment a Foo asks for, as upstream's `newDeployment`: nginx pods labelled
/// `app=nginx,controller=<foo>`, controlled by the Foo.
pub fn new_deployment(foo: &Foo) -> Deployment {
    let foo_name = foo.metadata.name.clone().unwrap_or_default();
    let labels: BTreeMap<String, String> = [
        ("app".to_owned(), "nginx".to_owned()),
        ("controller".to_owned(), foo_name.clone()),
    ]
    .into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.metadata.namespace.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: format!("{GROUP}/{VERSION}"),
                kind: KIND.to_owned(),
                name: foo_name,
                uid: foo.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: foo.spec.replicas,
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".to_owned(),
                        image: Some("nginx:latest".to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
