//! What every write verb (create, update, patch, apply) is asked and answers: dry run, field validation, field manager; the written object and its warnings.

use std::sync::Arc;

use serde_json::Value;

use crate::auth::user::UserInfo;

use crate::error::{ApiError, Result};
use crate::openapi::field_validation::{self, FieldValidation};
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;

/// Options of a create, update or patch (the query parameters of the request).
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: run everything but the write.
    pub dry_run: bool,
    /// `fieldValidation`: what to do with fields the kind's schema does not declare.
    pub field_validation: FieldValidation,
    /// `fieldManager`: who is writing, recorded in `managedFields` (required for apply).
    pub field_manager: Option<String>,
    /// `force`: an apply takes over fields other managers own instead of conflicting.
    pub force: bool,
    /// The subresource a main-resource write came through (`scale`), recorded in
    /// `managedFields`; empty otherwise.
    pub subresource: &'static str,
    /// Who writes; `None` for the server's own writes (bootstrap objects), which run as
    /// [`UserInfo::apiserver`].
    pub user: Option<Arc<UserInfo>>,
}

impl WriteOptions {
    /// Options with only `dry_run` set.
    pub fn dry_run(dry_run: bool) -> Self {
        Self {
            dry_run,
            ..Self::default()
        }
    }
}

/// The result of a write.
#[derive(Debug)]
pub struct WriteOutcome {
    /// The object as stored (or as it was when deleted on its last finalizer).
    pub object: Value,
    /// Whether the write created the object (answered 201).
    pub created: bool,
    /// Warnings for the client (`Warning` headers), e.g. unknown fields under
    /// `fieldValidation=Warn`.
    pub warnings: Vec<String>,
}

/// How an unknown-field failure is worded: a decoded body (create, update) or a patched
/// object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// The request body was the object: upstream's decode error wording.
    Body,
    /// The object came out of a patch: the strict decoding error alone.
    Patch,
}

impl Registry {
    /// The fields of `obj` that `def`'s schema does not declare: a built-in's typed schema,
    /// or what a custom resource's structural schema would prune.
    pub(crate) fn unknown_fields(&self, def: &ResourceDef, obj: &Value) -> Vec<String> {
        match &def.custom {
            Some(custom) => custom.unknown_fields(obj),
            None => self
                .builtin_openapi()
                .unknown_fields(def.openapi.as_ref(), obj),
        }
    }

    /// Applies `fieldValidation` to `obj`, a body or patched object of `def`'s kind: the
    /// warnings to send under `Warn`, a 400 under `Strict` when fields are unknown.
    pub(crate) fn check_fields(
        &self,
        def: &ResourceDef,
        obj: &Value,
        directive: FieldValidation,
        decoded: Decoded,
    ) -> Result<Vec<String>> {
        if directive == FieldValidation::Ignore {
            return Ok(Vec::new());
        }
        let unknown = self.unknown_fields(def, obj);
        if unknown.is_empty() {
            return Ok(Vec::new());
        }
        match directive {
            FieldValidation::Strict => {
                let strict = field_validation::strict_decoding_error(&unknown);
                Err(ApiError::bad_request(match decoded {
                    Decoded::Body => format!(
                        "{kind} in version {version:?} cannot be handled as a {kind}: {strict}",
                        kind = def.kind,
                        version = def.version
                    ),
                    Decoded::Patch => strict,
                }))
            }
            _ => Ok(field_validation::warnings(&unknown)),
        }
    }
}
