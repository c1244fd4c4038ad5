//! What every write verb (create, update, patch, apply) is asked and answers: dry run, field validation, field manager; the written object and its warnings.

use std::sync::Arc;

use serde_json::Value;

use crate::auth::user::UserInfo;

use crate::error::{ApiError, GroupKind, Result};
use crate::openapi::field_validation::FieldValidation;
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;
use crate::strict_decoding::{Destination, Findings, StrictError, strict_decoding_error};
use crate::validation::FieldError;

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
    /// What strict decoding of a create or update body found that the decoded object no
    /// longer shows (fields given twice), reported with its unknown fields.
    pub decoding: Findings,
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

/// Where the object whose fields are checked came from, which decides what else strict
/// decoding reports and how a failure is worded.
#[derive(Clone, Copy)]
pub(crate) enum Decoded<'a> {
    /// The request body was the object (create, update): its own findings, and upstream's
    /// decode error wording.
    Body(&'a Findings),
    /// The object came out of a patch: the patch's own strict errors come first, and a
    /// failure is a 422 on `patch` showing `shown` (upstream shows the patched object of a
    /// JSON or merge patch, and the patch of a strategic one).
    Patch {
        /// The patch's own strict errors.
        errors: &'a [StrictError],
        /// What the `patch` field error shows.
        shown: &'a dyn Fn() -> String,
    },
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
    /// warnings to send under `Warn`, a failure under `Strict`, when its fields are unknown
    /// or its decoding found fields given twice.
    pub(crate) fn check_fields(
        &self,
        def: &ResourceDef,
        obj: &Value,
        directive: FieldValidation,
        decoded: Decoded<'_>,
    ) -> Result<Vec<String>> {
        if directive == FieldValidation::Ignore {
            return Ok(Vec::new());
        }
        let unknown = self.unknown_fields(def, obj);
        let errors: Vec<StrictError> = match decoded {
            Decoded::Body(findings) => {
                let into = match def.custom {
                    Some(_) => Destination::Unstructured,
                    None => Destination::Typed,
                };
                findings.errors(&unknown, into)
            }
            Decoded::Patch { errors, .. } => errors
                .iter()
                .cloned()
                .chain(unknown.into_iter().map(StrictError::Unknown))
                .collect(),
        };
        if errors.is_empty() {
            return Ok(Vec::new());
        }
        if directive != FieldValidation::Strict {
            return Ok(errors.iter().flat_map(StrictError::warnings).collect());
        }
        let strict = strict_decoding_error(&errors);
        Err(match decoded {
            Decoded::Body(_) => ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: {strict}",
                kind = def.kind,
                version = def.version
            )),
            Decoded::Patch { shown, .. } => ApiError::invalid(
                GroupKind {
                    group: "",
                    kind: "",
                },
                "",
                &[FieldError::invalid("patch", shown(), strict)],
            ),
        })
    }
}
