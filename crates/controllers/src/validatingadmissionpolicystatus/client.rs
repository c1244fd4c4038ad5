//! The calls of the ValidatingAdmissionPolicy status controller: discovery and `/openapi/v3` for the type checker ([`ApiSchemaSource`]), and the server-side apply of a policy's `/status` as field manager `validatingadmissionpolicy-status-controller` ([`ApiStatusClient`]); with fakes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::admissionregistration::v1::{ExpressionWarning, ValidatingAdmissionPolicy};
use kcm_machinery::dynamic::DynamicClient;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Status;
use serde_json::{Value, json};

use super::typecheck::types::Components;
use super::typecheck::{Gvk, KindSchema, SchemaSource};

/// The field manager of the status apply: the controller's name, as upstream passes it.
pub const FIELD_MANAGER: &str = super::CONTROLLER_NAME;

/// The status write, as upstream's `ApplyStatus` with `Force`.
#[async_trait]
pub trait StatusClient: Send + Sync {
    /// Applies `status.observedGeneration = generation` and `status.typeChecking` with
    /// `warnings` (an empty `typeChecking` when there are none: its presence says the check
    /// ran).
    async fn apply_status(
        &self,
        name: &str,
        generation: i64,
        warnings: &[ExpressionWarning],
    ) -> Result<(), kube::Error>;
}

/// The apply patch of [`StatusClient::apply_status`].
pub fn status_patch(name: &str, generation: i64, warnings: &[ExpressionWarning]) -> Value {
    let mut type_checking = json!({});
    if !warnings.is_empty() {
        type_checking["expressionWarnings"] = json!(warnings);
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "status": {"observedGeneration": generation, "typeChecking": type_checking},
    })
}

/// [`StatusClient`] and [`SchemaSource`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiStatusClient {
    client: kube::Client,
}

impl ApiStatusClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiStatusClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiStatusClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl StatusClient for ApiStatusClient {
    async fn apply_status(
        &self,
        name: &str,
        generation: i64,
        warnings: &[ExpressionWarning],
    ) -> Result<(), kube::Error> {
        let patch = status_patch(name, generation, warnings);
        Api::<ValidatingAdmissionPolicy>::all(self.client.clone())
            .patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(patch),
            )
            .await
            .map(|_| ())
    }
}

/// [`SchemaSource`] over discovery and the server's OpenAPI v3 documents.
#[derive(Clone)]
pub struct ApiSchemaSource {
    client: kube::Client,
}

impl ApiSchemaSource {
    /// Reads through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiSchemaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiSchemaSource").finish_non_exhaustive()
    }
}

/// The schema of `gvk` in OpenAPI v3 `document` (consumed: its components are kept, not
/// copied): the component whose `x-kubernetes-group-version-kind` names it.
pub fn kind_schema(document: Value, gvk: &Gvk) -> Option<KindSchema> {
    let components = Components::of_document(document);
    let schema = components
        .schemas()
        .values()
        .find(|schema| {
            schema
                .get("x-kubernetes-group-version-kind")
                .and_then(Value::as_array)
                .is_some_and(|gvks| {
                    gvks.iter().any(|g| {
                        g.get("group").and_then(Value::as_str).unwrap_or_default() == gvk.group
                            && g.get("version").and_then(Value::as_str) == Some(&gvk.version)
                            && g.get("kind").and_then(Value::as_str) == Some(&gvk.kind)
                    })
                })
        })?
        .clone();
    Some(KindSchema {
        components: Arc::new(components),
        schema,
    })
}

#[async_trait]
impl SchemaSource for ApiSchemaSource {
    async fn kind_for(&self, group: &str, version: &str, resource: &str) -> Option<String> {
        match DynamicClient::new(self.client.clone())
            .resolve(group, version, resource)
            .await
        {
            Ok(served) => Some(served.api_resource.kind),
            Err(err) => {
                tracing::debug!(%err, group, version, resource, "resource not resolved for type checking");
                None
            }
        }
    }

    async fn schema_for(&self, gvk: &Gvk) -> Option<KindSchema> {
        let path = if gvk.group.is_empty() {
            format!("/openapi/v3/api/{}", gvk.version)
        } else {
            format!("/openapi/v3/apis/{}/{}", gvk.group, gvk.version)
        };
        let request = http::Request::get(&path).body(Vec::new()).ok()?;
        let document: Value = match self.client.request(request).await {
            Ok(document) => document,
            Err(err) => {
                tracing::debug!(%err, %gvk, "no OpenAPI document for type checking");
                return None;
            }
        };
        kind_schema(document, gvk)
    }
}

/// What [`FakeStatusClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// Every apply, in order: `(name, generation, warnings)`.
    applies: Vec<(String, i64, Vec<ExpressionWarning>)>,
    /// When set, every apply fails with this status.
    error: Option<Status>,
}

/// A [`StatusClient`] recording applies.
#[derive(Debug, Default)]
pub struct FakeStatusClient {
    state: Mutex<FakeState>,
}

impl FakeStatusClient {
    /// A fake that accepts everything.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every apply so far.
    pub fn applies(&self) -> Vec<(String, i64, Vec<ExpressionWarning>)> {
        self.state().applies.clone()
    }

    /// Makes every later apply fail with `status`.
    pub fn fail_with(&self, status: Status) {
        self.state().error = Some(status);
    }
}

#[async_trait]
impl StatusClient for FakeStatusClient {
    async fn apply_status(
        &self,
        name: &str,
        generation: i64,
        warnings: &[ExpressionWarning],
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        if let Some(status) = &state.error {
            return Err(kube::Error::Api(Box::new(status.clone())));
        }
        state
            .applies
            .push((name.to_owned(), generation, warnings.to_vec()));
        Ok(())
    }
}

/// A [`SchemaSource`] over fixed resources and documents.
#[derive(Debug, Default)]
pub struct FakeSchemaSource {
    /// `(group, version, resource)` to kind.
    kinds: HashMap<(String, String, String), String>,
    /// Group-version (`apps/v1`, `v1`) to its OpenAPI v3 document.
    documents: HashMap<String, Value>,
}

impl FakeSchemaSource {
    /// Serves `resource` of `group`/`version` as `kind`.
    pub fn with_resource(mut self, group: &str, version: &str, resource: &str, kind: &str) -> Self {
        self.kinds.insert(
            (group.to_owned(), version.to_owned(), resource.to_owned()),
            kind.to_owned(),
        );
        self
    }

    /// Publishes `document` as `group`/`version`'s OpenAPI v3 document.
    pub fn with_document(mut self, group: &str, version: &str, document: Value) -> Self {
        self.documents.insert(gv(group, version), document);
        self
    }
}

fn gv(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

#[async_trait]
impl SchemaSource for FakeSchemaSource {
    async fn kind_for(&self, group: &str, version: &str, resource: &str) -> Option<String> {
        self.kinds
            .get(&(group.to_owned(), version.to_owned(), resource.to_owned()))
            .cloned()
    }

    async fn schema_for(&self, gvk: &Gvk) -> Option<KindSchema> {
        kind_schema(
            self.documents.get(&gv(&gvk.group, &gvk.version))?.clone(),
            gvk,
        )
    }
}
