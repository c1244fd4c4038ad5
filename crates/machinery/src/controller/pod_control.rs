//! Pod control: creating pods from a controller's template, deleting and patching them, with events.
//!
//! [`PodControl`] is the seam controllers write pods through, as upstream's
//! `PodControlInterface`: [`RealPodControl`] talks to the API server and records the upstream
//! events (`SuccessfulCreate`, `FailedCreate`, `SuccessfulDelete`, `FailedDelete`);
//! [`FakePodControl`] records calls and injects failures for controller tests.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::Status;

use crate::controller::api_status::{self, ApiStatus, error_message};
use crate::events::{EventRecorder, EventType};
use crate::labels::is_dns1123_subdomain;

/// Event reason (and ReplicaSet condition reason) when creating a pod failed.
pub const FAILED_CREATE_POD_REASON: &str = "FailedCreate";
/// Event reason when a pod was created.
pub const SUCCESSFUL_CREATE_POD_REASON: &str = "SuccessfulCreate";
/// Event reason (and ReplicaSet condition reason) when deleting a pod failed.
pub const FAILED_DELETE_POD_REASON: &str = "FailedDelete";
/// Event reason when a pod was deleted.
pub const SUCCESSFUL_DELETE_POD_REASON: &str = "SuccessfulDelete";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a pod operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The template has no labels: the pod could never be matched back to its controller.
    #[error("unable to create pods for {controller}, no labels")]
    NoLabels {
        /// The controller, `namespace/name`.
        controller: String,
    },
    /// The controller reference handed to a create call is unusable, as upstream's
    /// `validateControllerRef`.
    #[error("invalid controller reference for {controller}: {reason}")]
    InvalidControllerRef {
        /// The controller, `namespace/name`.
        controller: String,
        /// What is wrong with it (upstream's message).
        reason: &'static str,
    },
    /// The API server refused or failed the creation.
    #[error("creating pod in namespace {namespace} for {controller}: {message}", message = error_message(.source))]
    Create {
        /// The namespace of the pod.
        namespace: String,
        /// The controller, `namespace/name`.
        controller: String,
        /// The client error (carries the server's `Status` for API errors).
        #[source]
        source: kube::Error,
    },
    /// The API server refused or failed the deletion.
    #[error("unable to delete pod {namespace}/{name}: {message}", message = error_message(.source))]
    Delete {
        /// The namespace of the pod.
        namespace: String,
        /// The name of the pod.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The API server refused or failed the patch.
    #[error("patching pod {namespace}/{name}: {message}", message = error_message(.source))]
    Patch {
        /// The namespace of the pod.
        namespace: String,
        /// The name of the pod.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::Create { source, .. }
            | Error::Delete { source, .. }
            | Error::Patch { source, .. } => source.api_status(),
            Error::NoLabels { .. } | Error::InvalidControllerRef { .. } => None,
        }
    }
}

/// Creates, deletes and patches pods on behalf of a controller, as upstream's
/// `PodControlInterface`. `controller` is a reference to the owning object (its
/// `ObjectReference`, e.g. `kube::Resource::object_ref`); events are recorded against it.
#[async_trait]
pub trait PodControl: Send + Sync {
    /// Creates one pod from `template` in `namespace`, owned through `controller_ref`, named
    /// `<controller name>-<random suffix>` by the server, as upstream's `CreatePods`.
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<()>;

    /// As [`PodControl::create_pods`], with `generate_name` instead of the controller's name
    /// as the name prefix, as upstream's `CreatePodsWithGenerateName`.
    async fn create_pods_with_generate_name(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &ObjectReference,
        controller_ref: &OwnerReference,
        generate_name: &str,
    ) -> Result<()>;

    /// Deletes pod `name` in `namespace`, as upstream's `DeletePod`. A pod already gone is an
    /// error for which [`ApiStatus::is_not_found`] holds; callers usually ignore it.
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        controller: &ObjectReference,
    ) -> Result<()>;

    /// Patches pod `name` in `namespace`, as upstream's `PatchPod` (which always sends a
    /// strategic-merge patch; here the caller picks the patch type).
    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<serde_json::Value>,
    ) -> Result<()>;
}

fn controller_key(controller: &ObjectReference) -> String {
    format!(
        "{}/{}",
        controller.namespace.as_deref().unwrap_or_default(),
        controller.name.as_deref().unwrap_or_default()
    )
}

/// Checks a controller reference the way upstream's `validateControllerRef` does.
pub fn validate_controller_ref(
    controller_ref: &OwnerReference,
) -> std::result::Result<(), &'static str> {
    if controller_ref.api_version.is_empty() {
        return Err("controllerRef has empty APIVersion");
    }
    if controller_ref.kind.is_empty() {
        return Err("controllerRef has empty Kind");
    }
    if controller_ref.controller != Some(true) {
        return Err("controllerRef.Controller is not set to true");
    }
    if controller_ref.block_owner_deletion != Some(true) {
        return Err("controllerRef.BlockOwnerDeletion is not set");
    }
    Ok(())
}

/// The `generateName` for pods of a controller named `controller_name`: the name and a dash
/// when that prefix is a valid pod-name prefix, else the bare name, as upstream's
/// `getPodsPrefix` (including its `maskTrailingDash`, which replaces the last two characters
/// with `a` before validating).
pub fn pods_prefix(controller_name: &str) -> String {
    let prefix = format!("{controller_name}-");
    let masked = prefix
        .len()
        .checked_sub(2)
        .and_then(|end| prefix.get(..end))
        .map(|head| format!("{head}a"));
    match masked {
        Some(masked) if is_dns1123_subdomain(&masked) => prefix,
        _ => controller_name.to_owned(),
    }
}

/// The pod a controller creates from `template`: the template's labels, annotations,
/// finalizers and spec, `generateName` from the controller's name, and `controller_ref` as
/// its only owner reference, as upstream's `GetPodFromTemplate`. The namespace is left to the
/// request path.
pub fn get_pod_from_template(
    template: &PodTemplateSpec,
    controller: &ObjectReference,
    controller_ref: Option<&OwnerReference>,
) -> Pod {
    let template_meta = template.metadata.as_ref();
    Pod {
        metadata: ObjectMeta {
            labels: template_meta.and_then(|m| m.labels.clone()),
            annotations: template_meta.and_then(|m| m.annotations.clone()),
            finalizers: template_meta.and_then(|m| m.finalizers.clone()),
            generate_name: Some(pods_prefix(controller.name.as_deref().unwrap_or_default())),
            owner_references: controller_ref.map(|r| vec![r.clone()]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// Builds the pod for a create call: validates the reference, applies `generate_name`.
fn pod_for_create(
    template: &PodTemplateSpec,
    controller: &ObjectReference,
    controller_ref: &OwnerReference,
    generate_name: &str,
) -> Result<Pod> {
    validate_controller_ref(controller_ref).map_err(|reason| Error::InvalidControllerRef {
        controller: controller_key(controller),
        reason,
    })?;
    let mut pod = get_pod_from_template(template, controller, Some(controller_ref));
    if !generate_name.is_empty() {
        pod.metadata.generate_name = Some(generate_name.to_owned());
    }
    Ok(pod)
}

/// [`PodControl`] over a `kube::Client`, recording events through an [`EventRecorder`], as
/// upstream's `RealPodControl`.
#[derive(Clone)]
pub struct RealPodControl {
    /// The API client (cheap to clone).
    client: kube::Client,
    /// Where `SuccessfulCreate`/`FailedCreate`/`SuccessfulDelete`/`FailedDelete` events go.
    recorder: Arc<dyn EventRecorder>,
}

impl RealPodControl {
    /// Pod control through `client`, reporting to `recorder`.
    pub fn new(client: kube::Client, recorder: Arc<dyn EventRecorder>) -> Self {
        Self { client, recorder }
    }

    async fn create(&self, namespace: &str, pod: Pod, controller: &ObjectReference) -> Result<()> {
        if pod.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
            return Err(Error::NoLabels {
                controller: controller_key(controller),
            });
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                let name = created.metadata.name.unwrap_or_default();
                tracing::debug!(
                    controller = %controller_key(controller),
                    pod = %format!("{namespace}/{name}"),
                    "controller created pod"
                );
                self.recorder.event(
                    controller,
                    EventType::Normal,
                    SUCCESSFUL_CREATE_POD_REASON,
                    format!("Created pod: {name}"),
                );
                Ok(())
            }
            Err(source) => {
                // A terminating namespace fails every creation; upstream sends no event.
                if !source.is_namespace_terminating() {
                    self.recorder.event(
                        controller,
                        EventType::Warning,
                        FAILED_CREATE_POD_REASON,
                        format!("Error creating: {}", error_message(&source)),
                    );
                }
                Err(Error::Create {
                    namespace: namespace.to_owned(),
                    controller: controller_key(controller),
                    source,
                })
            }
        }
    }
}

impl std::fmt::Debug for RealPodControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealPodControl").finish_non_exhaustive()
    }
}

#[async_trait]
impl PodControl for RealPodControl {
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<()> {
        self.create_pods_with_generate_name(namespace, template, controller, controller_ref, "")
            .await
    }

    async fn create_pods_with_generate_name(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &ObjectReference,
        controller_ref: &OwnerReference,
        generate_name: &str,
    ) -> Result<()> {
        let pod = pod_for_create(template, controller, controller_ref, generate_name)?;
        self.create(namespace, pod, controller).await
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        controller: &ObjectReference,
    ) -> Result<()> {
        tracing::debug!(
            controller = %controller_key(controller),
            pod = %format!("{namespace}/{name}"),
            "deleting pod"
        );
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                self.recorder.event(
                    controller,
                    EventType::Normal,
                    SUCCESSFUL_DELETE_POD_REASON,
                    format!("Deleted pod: {name}"),
                );
                Ok(())
            }
            Err(source) => {
                if source.is_not_found() {
                    tracing::trace!(pod = %format!("{namespace}/{name}"), "pod has already been deleted");
                } else {
                    self.recorder.event(
                        controller,
                        EventType::Warning,
                        FAILED_DELETE_POD_REASON,
                        format!("Error deleting: {}", error_message(&source)),
                    );
                }
                Err(Error::Delete {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    source,
                })
            }
        }
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<serde_json::Value>,
    ) -> Result<()> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        api.patch(name, &PatchParams::default(), patch)
            .await
            .map(drop)
            .map_err(|source| Error::Patch {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })
    }
}

/// One `patch_pod` call captured by [`FakePodControl`].
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedPatch {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The patch as sent.
    pub patch: Patch<serde_json::Value>,
}

/// What [`FakePodControl`] has seen and what it is told to fail with.
#[derive(Debug, Default)]
struct FakeState {
    /// Templates of every create call that got past the create limit (also failing ones), with
    /// `generateName` set when a generate name was given.
    templates: Vec<PodTemplateSpec>,
    /// Controller references of the same calls, in the same order.
    controller_refs: Vec<OwnerReference>,
    /// Names of every pod deleted (also failing calls).
    delete_pod_names: Vec<String>,
    /// Every patch (also failing calls).
    patches: Vec<RecordedPatch>,
    /// When set, every call fails with this status (after being recorded).
    err: Option<Status>,
    /// When non-zero, create calls beyond this many fail before being recorded.
    create_limit: usize,
    /// Create calls made, including refused ones.
    create_call_count: usize,
}

/// A [`PodControl`] that records calls instead of making them, as upstream's `FakePodControl`.
///
/// Failures are injected as API statuses (see [`crate::controller::api_status`] for
/// NotFound, NamespaceTerminating, …), so callers' error classification is exercised.
#[derive(Debug, Default)]
pub struct FakePodControl {
    state: Mutex<FakeState>,
}

impl FakePodControl {
    /// A fake that accepts every call.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes every later call fail with `status` (or succeed again with `None`).
    pub fn set_error(&self, status: Option<Status>) {
        self.state().err = status;
    }

    /// Lets only the first `limit` create calls through; later ones fail without being
    /// recorded (0 means no limit), as upstream's `CreateLimit`.
    pub fn set_create_limit(&self, limit: usize) {
        self.state().create_limit = limit;
    }

    /// Templates of recorded create calls, in call order.
    pub fn templates(&self) -> Vec<PodTemplateSpec> {
        self.state().templates.clone()
    }

    /// Controller references of recorded create calls, in call order.
    pub fn controller_refs(&self) -> Vec<OwnerReference> {
        self.state().controller_refs.clone()
    }

    /// Names of deleted pods, in call order.
    pub fn deleted_pod_names(&self) -> Vec<String> {
        self.state().delete_pod_names.clone()
    }

    /// Patches, in call order.
    pub fn patches(&self) -> Vec<RecordedPatch> {
        self.state().patches.clone()
    }

    /// Create calls made so far, including those refused by the create limit.
    pub fn create_call_count(&self) -> usize {
        self.state().create_call_count
    }

    /// Forgets every recorded call and the create count (not the injected error or limit), as
    /// upstream's `Clear`.
    pub fn clear(&self) {
        let mut state = self.state();
        state.templates.clear();
        state.controller_refs.clear();
        state.delete_pod_names.clear();
        state.patches.clear();
        state.create_call_count = 0;
    }

    fn injected(err: &Option<Status>) -> Option<kube::Error> {
        err.as_ref()
            .map(|status| kube::Error::Api(status.clone().boxed()))
    }
}

#[async_trait]
impl PodControl for FakePodControl {
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<()> {
        self.create_pods_with_generate_name(namespace, template, controller, controller_ref, "")
            .await
    }

    async fn create_pods_with_generate_name(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &ObjectReference,
        controller_ref: &OwnerReference,
        generate_name: &str,
    ) -> Result<()> {
        let create_error = |source| Error::Create {
            namespace: namespace.to_owned(),
            controller: controller_key(controller),
            source,
        };
        let mut state = self.state();
        state.create_call_count += 1;
        if state.create_limit != 0 && state.create_call_count > state.create_limit {
            let message = format!(
                "not creating pod, limit {} already reached (create call {})",
                state.create_limit, state.create_call_count
            );
            let status = api_status::internal_error(&message);
            return Err(create_error(kube::Error::Api(status.boxed())));
        }
        let mut template = template.clone();
        if !generate_name.is_empty() {
            template
                .metadata
                .get_or_insert_with(Default::default)
                .generate_name = Some(generate_name.to_owned());
        }
        state.templates.push(template);
        state.controller_refs.push(controller_ref.clone());
        match Self::injected(&state.err) {
            Some(source) => Err(create_error(source)),
            None => Ok(()),
        }
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        _controller: &ObjectReference,
    ) -> Result<()> {
        let mut state = self.state();
        state.delete_pod_names.push(name.to_owned());
        match Self::injected(&state.err) {
            Some(source) => Err(Error::Delete {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            }),
            None => Ok(()),
        }
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<serde_json::Value>,
    ) -> Result<()> {
        let mut state = self.state();
        state.patches.push(RecordedPatch {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            patch: patch.clone(),
        });
        match Self::injected(&state.err) {
            Some(source) => Err(Error::Patch {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::controller_ref::new_controller_ref;
    use k8s_openapi::api::core::v1::ReplicationController;
    use kcm_testing::{MetaBuilder, PodSpecBuilder, container, object_ref_of, pod_template};
    use kube::core::GroupVersionKind;

    fn rc() -> (ObjectReference, OwnerReference) {
        let rc = ReplicationController {
            metadata: kcm_testing::meta("foobar")
                .namespace("default")
                .uid("uid-1")
                .build(),
            ..ReplicationController::default()
        };
        let gvk = GroupVersionKind::gvk("", "v1", "ReplicationController");
        (object_ref_of(&rc), new_controller_ref(&rc.metadata, &gvk))
    }

    fn template() -> PodTemplateSpec {
        pod_template()
            // Never copied: pods get their own names.
            .name("template-name")
            .labels(&[("name", "foo"), ("type", "production")])
            .annotation("note", "x")
            .finalizers(&["example.com/keep"])
            .container(container("c").image("foo/bar"))
            .build()
    }

    #[test]
    fn pod_from_template_copies_metadata_and_owns_it() {
        let (controller, controller_ref) = rc();
        let pod = get_pod_from_template(&template(), &controller, Some(&controller_ref));
        let t = template();
        let tm = t.metadata.as_ref().expect("meta");
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("foobar-"));
        assert_eq!(pod.metadata.labels, tm.labels);
        assert_eq!(pod.metadata.annotations, tm.annotations);
        assert_eq!(pod.metadata.finalizers, tm.finalizers);
        assert_eq!(pod.metadata.name, None);
        assert_eq!(pod.metadata.namespace, None);
        assert_eq!(pod.metadata.owner_references, Some(vec![controller_ref]));
        assert_eq!(pod.spec, t.spec);
    }

    #[test]
    fn pods_prefix_as_upstream() {
        assert_eq!(pods_prefix("web"), "web-");
        assert_eq!(pods_prefix("a"), "a-");
        // Too long for a prefix with the dash: the bare name (the server then rejects it).
        let long = "a".repeat(260);
        assert_eq!(pods_prefix(&long), long);
        // Upstream's mask replaces the dash and the name's last character before validating,
        // so a 253-character name still gets its dash (a 254-character prefix).
        let label = "a".repeat(63);
        let just_fits = format!("{label}.{label}.{label}.{}", "a".repeat(61));
        assert_eq!(just_fits.len(), 253);
        assert_eq!(pods_prefix(&just_fits), format!("{just_fits}-"));
        assert_eq!(pods_prefix("Bad_Name"), "Bad_Name");
        assert_eq!(pods_prefix("é"), "é");
    }

    #[test]
    fn controller_ref_validation_messages() {
        let (_, good) = rc();
        assert_eq!(validate_controller_ref(&good), Ok(()));
        let cases: [(&str, fn(&mut OwnerReference), &str); 4] = [
            (
                "no api version",
                |r| r.api_version.clear(),
                "controllerRef has empty APIVersion",
            ),
            (
                "no kind",
                |r| r.kind.clear(),
                "controllerRef has empty Kind",
            ),
            (
                "not controller",
                |r| r.controller = Some(false),
                "controllerRef.Controller is not set to true",
            ),
            (
                "no block",
                |r| r.block_owner_deletion = None,
                "controllerRef.BlockOwnerDeletion is not set",
            ),
        ];
        for (name, mutate, want) in cases {
            let mut r = good.clone();
            mutate(&mut r);
            assert_eq!(validate_controller_ref(&r), Err(want), "{name}");
        }
    }

    #[tokio::test]
    async fn fake_records_calls_and_injects_errors() {
        let fake = FakePodControl::new();
        let (controller, controller_ref) = rc();
        fake.create_pods("default", &template(), &controller, &controller_ref)
            .await
            .expect("create");
        fake.create_pods_with_generate_name(
            "default",
            &template(),
            &controller,
            &controller_ref,
            "hello-",
        )
        .await
        .expect("create");
        let templates = fake.templates();
        assert_eq!(templates.len(), 2);
        let generate_name =
            |t: &PodTemplateSpec| t.metadata.as_ref().and_then(|m| m.generate_name.clone());
        assert_eq!(generate_name(&templates[0]), None);
        assert_eq!(generate_name(&templates[1]).as_deref(), Some("hello-"));
        assert_eq!(fake.controller_refs(), vec![controller_ref.clone(); 2]);

        fake.set_error(Some(api_status::not_found("pods", "gone")));
        let err = fake
            .delete_pod("default", "gone", &controller)
            .await
            .expect_err("injected");
        assert!(err.is_not_found());
        assert_eq!(fake.deleted_pod_names(), vec!["gone".to_owned()]);

        let patch = Patch::Strategic(serde_json::json!({"metadata": {}}));
        let err = fake
            .patch_pod("default", "p", &patch)
            .await
            .expect_err("injected");
        assert!(err.is_not_found());
        assert_eq!(fake.patches()[0].patch, patch);

        fake.set_error(Some(api_status::namespace_terminating(
            "pods", "", "default",
        )));
        let err = fake
            .create_pods("default", &template(), &controller, &controller_ref)
            .await
            .expect_err("injected");
        assert!(err.is_namespace_terminating());
        assert_eq!(
            fake.templates().len(),
            3,
            "failing creates are recorded too"
        );

        fake.clear();
        assert!(fake.templates().is_empty() && fake.patches().is_empty());
        assert_eq!(fake.create_call_count(), 0);
    }

    #[tokio::test]
    async fn fake_create_limit_fails_after_n_successes() {
        let fake = FakePodControl::new();
        fake.set_create_limit(2);
        let (controller, controller_ref) = rc();
        let mut results = Vec::new();
        for _ in 0..4 {
            results.push(
                fake.create_pods("default", &template(), &controller, &controller_ref)
                    .await
                    .is_ok(),
            );
        }
        assert_eq!(results, vec![true, true, false, false]);
        assert_eq!(fake.templates().len(), 2);
        assert_eq!(fake.create_call_count(), 4);
    }

    #[test]
    fn errors_name_the_object_and_read_like_the_server() {
        let err = Error::Delete {
            namespace: "ns".into(),
            name: "web-1".into(),
            source: kube::Error::Api(api_status::internal_error("etcd down").boxed()),
        };
        assert_eq!(
            err.to_string(),
            "unable to delete pod ns/web-1: Internal error occurred: etcd down"
        );
        assert!(!err.is_not_found());
    }
}
