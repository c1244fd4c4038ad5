//! Update and patch (main resource and `/status`): optimistic concurrency, immutable metadata, generation, delete-on-last-finalizer.
//!
//! As upstream's `Store.Update` with `rest.BeforeUpdate`: the client's object replaces the
//! stored one except for what the server owns (uid, creationTimestamp, generation, deletion
//! fields, and the status or spec depending on the target); a stale `resourceVersion` is a 409
//! with upstream's message; no `resourceVersion` is an unconditional update, retried on races.

use bytes::Bytes;
use kcm_machinery::quota::Operation as QuotaOperation;
use serde_json::Value;

use crate::admission::resource_quota::QuotaAttributes;
use crate::admission::{Attributes, Operation};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, Result};
use crate::fieldmanager::apply;
use crate::fieldmanager::managed::{self, Writer};
use crate::fieldmanager::walk::Scope;
use crate::object;
use crate::openapi::field_validation::FieldValidation;
use crate::pointer::At;
use crate::registry::create::{bind_namespace, take_admitted};
use crate::registry::options::{Decoded, WriteOptions, WriteOutcome};
use crate::registry::patch::{PatchType, apply_patch};
use crate::registry::resource::ResourceDef;
use crate::registry::{MAX_WRITE_RETRIES, Registry, encode_for_storage, parse_resource_version};
use crate::storage::{self, KeyValue};
use crate::strict_decoding::{self, Destination, Findings, StrictError};
use crate::validation::{validate_object_meta, validate_object_meta_update};

/// Which part of the object a write targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The main resource: `.status` is kept as stored.
    Main,
    /// `/status`: only `.status` changes.
    Status,
    /// `/approval` (CertificateSigningRequests): only `.status` changes, as the strategy's
    /// `prepare_for_approval_update` allows.
    Approval,
}

/// Where the new object comes from.
enum Source<'a> {
    /// `PUT`: the client's object; its uid, if set, is a precondition (409).
    Replace(&'a Value),
    /// `PATCH`: applied to the current object on every attempt; the patch's own strict
    /// decoding errors are reported with the patched object's unknown fields.
    Patch(PatchType, &'a [u8], &'a [StrictError]),
    /// Server-side apply of a checked configuration, merged into the current object on
    /// every attempt; the YAML keys it repeats are reported once it applied.
    Apply(&'a Value, &'a Findings),
}

impl Registry {
    /// `PUT`: replaces an object (or its status).
    pub async fn update(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        body: Value,
        target: Target,
        opts: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let body = def.check_kind(body)?;
        let warnings = self.check_fields(
            def,
            &body,
            opts.field_validation,
            Decoded::Body(&opts.decoding),
        )?;
        let mut outcome = self
            .write(def, namespace, name, Source::Replace(&body), target, opts)
            .await?;
        outcome.warnings.extend(warnings);
        Ok(outcome)
    }

    /// `PATCH`: applies a merge, JSON or strategic-merge patch to an object (or its status).
    #[allow(clippy::too_many_arguments)]
    pub async fn patch(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &[u8],
        target: Target,
        opts: &WriteOptions,
    ) -> Result<WriteOutcome> {
        if patch_type == PatchType::Apply {
            let (config, findings) = apply_config(def, name, patch)?;
            // Upstream converts the configuration to its typed form first, which fails on
            // any field the schema does not declare, whatever `fieldValidation` says.
            let unknown = self.unknown_fields(def, &config);
            if !unknown.is_empty() {
                let object = if def.namespaced {
                    format!("{namespace}/{name}")
                } else {
                    name.to_owned()
                };
                let fields: Vec<String> = unknown
                    .iter()
                    .map(|f| format!(".{f}: field not declared in schema"))
                    .collect();
                let why = match fields.as_slice() {
                    [one] => one.clone(),
                    many => format!("errors:\n  {}", many.join("\n  ")),
                };
                return Err(ApiError {
                    code: 500,
                    reason: "",
                    message: format!(
                        "failed to create typed patch object ({object}; {}, Kind={}): {why}",
                        def.api_version(),
                        def.kind
                    ),
                    details: None,
                    continue_token: None,
                });
            }
            return self
                .write(
                    def,
                    namespace,
                    name,
                    Source::Apply(&config, &findings),
                    target,
                    opts,
                )
                .await;
        }
        let own = match opts.field_validation {
            FieldValidation::Ignore => Vec::new(),
            _ => patch_strict_errors(patch_type, patch),
        };
        self.write(
            def,
            namespace,
            name,
            Source::Patch(patch_type, patch, &own),
            target,
            opts,
        )
        .await
    }

    async fn write(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        source: Source<'_>,
        target: Target,
        opts: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let gr = def.group_resource();
        let namespace = if def.namespaced { namespace } else { "" };
        let dry_run = opts.dry_run;
        for _ in 0..MAX_WRITE_RETRIES {
            let Some((current, kv)) = self.get_kv(def, namespace, name).await? else {
                return match source {
                    Source::Replace(body)
                        if def.strategy.allow_create_on_update() && target == Target::Main =>
                    {
                        let mut obj = body.clone();
                        if object::name(&obj).is_empty() {
                            object::set_meta(&mut obj, "name", name);
                        }
                        check_name(&obj, name)?;
                        bind_namespace(def, &mut obj, namespace)?;
                        let (object, warnings) = self.create_checked(def, obj, opts).await?;
                        Ok(WriteOutcome {
                            object,
                            created: true,
                            warnings,
                        })
                    }
                    Source::Apply(config, findings) if target == Target::Main => {
                        let mut obj =
                            self.apply_to(def, namespace, name, None, config, target, opts)?;
                        let mut warnings = apply_strictness(findings, opts.field_validation)?;
                        bind_namespace(def, &mut obj, namespace)?;
                        let (object, admitted) = self.create_checked(def, obj, opts).await?;
                        warnings.extend(admitted);
                        Ok(WriteOutcome {
                            object,
                            created: true,
                            warnings,
                        })
                    }
                    _ => Err(ApiError::not_found(gr, name)),
                };
            };
            // A patch is re-applied to the fresh object on every attempt, so a race is retried
            // unless the patch itself pinned `metadata.resourceVersion` (then the pinned
            // version no longer matches and the next attempt answers 409).
            let mut warnings = Vec::new();
            let (new, is_replace) = match source {
                Source::Replace(body) => (body.clone(), true),
                Source::Patch(kind, patch, own) => {
                    let patched = apply_patch(def, def.patch_schema(), &current, kind, patch)?;
                    // Upstream shows the patched object of a JSON or merge patch, and the
                    // patch of a strategic one.
                    let shown = || match kind {
                        PatchType::StrategicMerge => String::from_utf8_lossy(patch).into_owned(),
                        _ => patched.to_string(),
                    };
                    warnings = self.check_fields(
                        def,
                        &patched,
                        opts.field_validation,
                        Decoded::Patch {
                            errors: own,
                            shown: &shown,
                        },
                    )?;
                    (patched, false)
                }
                Source::Apply(config, findings) => {
                    let applied =
                        self.apply_to(def, namespace, name, Some(&current), config, target, opts)?;
                    warnings = apply_strictness(findings, opts.field_validation)?;
                    (applied, false)
                }
            };
            let requested_rv = parse_resource_version(object::resource_version(&new))?;
            if let Some(rv) = requested_rv
                && rv != kv.mod_revision
            {
                return Err(ApiError::stale(gr, name));
            }
            if is_replace {
                let uid = object::uid(&new);
                if !uid.is_empty() && uid != object::uid(&current) {
                    return Err(ApiError::conflict(
                        gr,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            object::uid(&current)
                        ),
                    ));
                }
            }
            let tracked = !matches!(source, Source::Apply(..));
            let new =
                self.prepare_update(def, namespace, name, new, &current, target, opts, tracked)?;
            // Upstream's order: mutating admission (DefaultTolerationSeconds puts back the
            // tolerations an update dropped; webhooks and policies may patch), then the
            // strategy's validation of what admission made, then validating admission.
            let server = UserInfo::apiserver();
            let user = opts.user.as_deref().unwrap_or(&server);
            let mut attrs =
                Attributes::new(Operation::Update, def, namespace, name, Some(new), user)
                    .with_subresource(subresource_name(target, opts))
                    .with_old_object(Some(&current))
                    .with_dry_run(dry_run);
            self.admission_admit(&mut attrs).await?;
            let admitted = take_admitted(&mut attrs)?;
            attrs.object = Some(validate_update(def, name, admitted, &current, target)?);
            self.admission_validate(&mut attrs).await?;
            warnings.extend(attrs.take_warnings());
            let mut new = take_admitted(&mut attrs)?;
            drop(attrs);
            if target == Target::Main {
                self.confirm_no_escalation(def, &new, opts).await?;
                self.admit_quota(QuotaAttributes {
                    namespace,
                    name,
                    def,
                    subresource: "",
                    operation: QuotaOperation::Update,
                    object: &new,
                    old_object: Some(&current),
                    dry_run,
                })
                .await?;
            }
            // What the resource begins (a Service's allocation lock) is held until the write
            // is done; uncommitted, it is given back.
            let hooks = crate::registry::rest::of(def);
            let pending = match hooks {
                Some(hooks) if target == Target::Main => {
                    hooks.begin_update(self, &mut new, &current).await?
                }
                _ => None,
            };
            let began = pending.is_some();
            // The last finalizer of a deleting object goes (also through `/status`: the
            // service-lb controller removes its finalizer there): its final removal.
            let removed = hooks.is_some() && should_delete_during_update(&new, &current);
            // What the after-hook compares with; not kept for a dry run, which calls none.
            let previous = (hooks.is_some() && !dry_run).then(|| current.clone());
            match self
                .commit_update(def, name, new, current, &kv, dry_run)
                .await
            {
                Ok(object) => {
                    match pending {
                        Some(pending) if dry_run => pending.abort(self).await,
                        Some(pending) => pending.commit(self).await,
                        None => {}
                    }
                    if let Some(hooks) = hooks
                        && let Some(previous) = &previous
                    {
                        let now = (!removed).then_some(&object);
                        hooks.after_update(self, previous, now, began).await;
                    }
                    return Ok(WriteOutcome {
                        object,
                        created: false,
                        warnings,
                    });
                }
                Err(retry) => {
                    // Not stored (a lost race, a refusal): what the update took goes back. A
                    // server error may hide a stored write: the repair loop settles that.
                    let unknown = matches!(&retry, Retry::Fail(e) if e.code >= 500);
                    if let Some(pending) = pending
                        && !unknown
                    {
                        pending.abort(self).await;
                    }
                    match retry {
                        Retry::Again if requested_rv.is_none() || !is_replace => continue,
                        Retry::Again => return Err(ApiError::stale(gr, name)),
                        Retry::Fail(e) => return Err(e),
                    }
                }
            }
        }
        Err(ApiError::stale(gr, name))
    }

    /// Server-side apply of `config` to `live` (`None`: the object does not exist yet), by
    /// the request's field manager.
    #[allow(clippy::too_many_arguments)]
    fn apply_to(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        live: Option<&Value>,
        config: &Value,
        target: Target,
        opts: &WriteOptions,
    ) -> Result<Value> {
        let manager = opts.field_manager.as_deref().unwrap_or("");
        let api_version = def.api_version();
        let now = object::now_rfc3339();
        let writer = Writer {
            manager,
            api_version: &api_version,
            subresource: subresource_name(target, opts),
            now: &now,
        };
        let schema = def.patch_schema();
        let object = if namespace.is_empty() {
            name.to_owned()
        } else {
            format!("{namespace}/{name}")
        };
        let gvk = format!("{api_version}, Kind={}", def.kind);
        apply::apply(
            live,
            config,
            schema.root(),
            scope(def, target),
            writer,
            opts.force,
        )
        .map_err(|e| e.into_api_error(&object, &gvk))
    }

    /// Builds the object to store from the client's `new` and the stored `old`
    /// (`rest.BeforeUpdate` plus the strategy's `PrepareForUpdate`); with `tracked`, the
    /// write is recorded in `managedFields` as an `Update`. Validation follows the mutating
    /// admission phase ([`validate_update`]).
    #[allow(clippy::too_many_arguments)]
    fn prepare_update(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        new: Value,
        old: &Value,
        target: Target,
        opts: &WriteOptions,
        tracked: bool,
    ) -> Result<Value> {
        let mut new = def.check_kind(new)?;
        check_name(&new, name)?;
        bind_namespace(def, &mut new, namespace)?;
        let mut new = def.decode(new).map_err(ApiError::bad_request)?;
        if object::name(&new).is_empty() {
            object::set_meta(&mut new, "name", name);
        }
        let rv = object::resource_version(old).to_owned();
        match target {
            Target::Main => {
                if def.has_status() {
                    match old.get("status") {
                        Some(status) => new["status"] = status.clone(),
                        None => {
                            if let Some(m) = new.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                }
            }
            Target::Status | Target::Approval => {
                // As upstream's status (and approval) strategies: the spec, and every other
                // top-level field but the metadata and the status, stays as stored; the
                // request's metadata is taken but for what the strategy resets (most reset
                // none of it), and the server-owned fields below.
                let status = new.get("status").cloned();
                let requested_meta = new.get("metadata").cloned();
                new = old.clone();
                if let Some(meta) = requested_meta {
                    new["metadata"] = meta;
                }
                match status {
                    Some(status) => new["status"] = status,
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                if target == Target::Approval {
                    def.strategy.prepare_for_approval_update(&mut new, old);
                } else {
                    def.strategy.status_metadata_reset().apply(&mut new, old);
                    def.strategy.prepare_for_status_update(&mut new, old);
                }
            }
        }
        // The server owns these metadata fields (rest.BeforeUpdate).
        object::set_meta(&mut new, "resourceVersion", rv);
        object::set_generation(&mut new, object::generation(old));
        if object::uid(&new).is_empty() {
            object::set_meta(&mut new, "uid", object::uid(old));
        }
        if let Some(ts) = old.at("/metadata/creationTimestamp").cloned() {
            object::set_meta(&mut new, "creationTimestamp", ts);
        }
        if let Some(ts) = object::deletion_timestamp(old).map(str::to_owned) {
            object::set_meta(&mut new, "deletionTimestamp", ts);
        }
        if let Some(grace) = old.at("/metadata/deletionGracePeriodSeconds").cloned()
            && new.at("/metadata/deletionGracePeriodSeconds").is_none()
        {
            object::set_meta(&mut new, "deletionGracePeriodSeconds", grace);
        }
        if tracked {
            let api_version = def.api_version();
            let now = object::now_rfc3339();
            let schema = def.patch_schema();
            let writer = Writer {
                manager: opts.field_manager.as_deref().unwrap_or(UNKNOWN_MANAGER),
                api_version: &api_version,
                subresource: subresource_name(target, opts),
                now: &now,
            };
            managed::record_update(old, &mut new, schema.root(), scope(def, target), writer);
        }
        if target == Target::Main {
            def.strategy.prepare_for_update(&mut new, old);
        }
        Ok(new)
    }

    /// Writes `new` over `old` (stored as `kv`): skips no-op writes, and deletes the object
    /// instead when its last finalizer went away during deletion (`ShouldDeleteDuringUpdate`).
    async fn commit_update(
        &self,
        def: &ResourceDef,
        name: &str,
        mut new: Value,
        old: Value,
        kv: &KeyValue,
        dry_run: bool,
    ) -> Result<Value, Retry> {
        let gr = def.group_resource();
        if new == old {
            // Upstream's GuaranteedUpdate skips identical writes: no new revision, no event.
            return Ok(old);
        }
        if dry_run {
            return Ok(new);
        }
        // A namespace also waits for its `spec.finalizers` (the namespace controller's), as
        // upstream's `ShouldDeleteNamespaceDuringUpdate`.
        let spec_finalizers_block =
            gr.group.is_empty() && gr.resource == "namespaces" && has_spec_finalizers(&new);
        if should_delete_during_update(&new, &old) && !spec_finalizers_block {
            return match self.storage().delete(&kv.key, kv.mod_revision).await {
                Ok(_) => Ok(new),
                Err(storage::Error::Conflict { .. }) => Err(Retry::Again),
                Err(e) => Err(Retry::Fail(ApiError::from_storage(e, gr, name))),
            };
        }
        let bytes = encode_for_storage(def, &new).map_err(Retry::Fail)?;
        match self.storage().update(&kv.key, kv.mod_revision, bytes).await {
            Ok(rev) => {
                object::set_resource_version(&mut new, rev);
                Ok(new)
            }
            Err(storage::Error::Conflict { .. }) => Err(Retry::Again),
            Err(e) => Err(Retry::Fail(ApiError::from_storage(e, gr, name))),
        }
    }
}

/// The update `new` of `old` validated again after a mutating webhook patched it (its
/// generation follows a spec the patch changed).
/// The strategy's validation of an update (`rest.BeforeUpdate`'s `ValidateUpdate`), with the
/// generation bumped when the change calls for it.
fn validate_update(
    def: &ResourceDef,
    name: &str,
    mut new: Value,
    old: &Value,
    target: Target,
) -> Result<Value> {
    let mut errs = validate_object_meta(&new, def.namespaced, def.strategy.name_rule());
    errs.extend(validate_object_meta_update(&new, old));
    match target {
        Target::Main => {
            let generation = object::generation(old) + i64::from(def.generation.bumps(&new, old));
            object::set_generation(&mut new, generation);
            errs.extend(def.strategy.validate_update(&new, old));
        }
        Target::Status => errs.extend(def.strategy.validate_status_update(&new, old)),
        Target::Approval => errs.extend(def.strategy.validate_approval_update(&new, old)),
    }
    def.check(name, errs)?;
    Ok(new)
}

/// Why a write attempt did not complete.
pub(crate) enum Retry {
    /// The stored object changed since it was read.
    Again,
    /// A final error.
    Fail(ApiError),
}

/// The manager recorded for writes that name none.
const UNKNOWN_MANAGER: &str = "unknown";

/// Which part of the object a write's managed fields cover.
fn scope(def: &ResourceDef, target: Target) -> Scope {
    match target {
        Target::Main => Scope::Main {
            status_subresource: def.has_status(),
        },
        Target::Status | Target::Approval => Scope::Status,
    }
}

/// The `subresource` of a write's `managedFields` entry.
fn subresource_name(target: Target, opts: &WriteOptions) -> &'static str {
    match target {
        Target::Status => "status",
        Target::Approval => "approval",
        Target::Main => opts.subresource,
    }
}

/// Parses and checks an apply configuration (`application/apply-patch+yaml`): a YAML or JSON
/// object of the resource's kind and version, named as the URL, without `managedFields`;
/// a key given twice keeps its last value, and is found for `fieldValidation`.
fn apply_config(def: &ResourceDef, name: &str, patch: &[u8]) -> Result<(Value, Findings)> {
    let (config, findings) = strict_decoding::yaml(patch)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    let config = def.check_kind(config)?;
    let api_version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if api_version != def.api_version() {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {}",
            def.api_version()
        )));
    }
    if config
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        return Err(ApiError::bad_request(format!(
            "invalid object type: {api_version}, Kind="
        )));
    }
    if config
        .at("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    check_name(&config, name)?;
    Ok((config, findings))
}

/// `fieldValidation` of an applied configuration, once it applied (upstream's
/// `applyPatcher` decodes the configuration strictly after the apply): the YAML keys it
/// repeats are a 400 under `Strict`, one warning each under `Warn`.
fn apply_strictness(findings: &Findings, directive: FieldValidation) -> Result<Vec<String>> {
    let lines = findings.yaml_duplicates();
    if lines.is_empty() || directive == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let error = StrictError::Yaml(lines.to_vec());
    if directive == FieldValidation::Strict {
        return Err(ApiError::bad_request(format!(
            "error strict decoding YAML: error converting YAML to JSON: {error}"
        )));
    }
    Ok(error.warnings())
}

/// A JSON, merge or strategic merge patch's own strict decoding errors: the fields it gives
/// twice, and, for a JSON patch, the fields of an operation other than `op`, `path`, `from`
/// and `value` (upstream decodes a JSON patch strictly into its operations, prefixing the
/// errors with `json patch`). A patch that does not parse has none: applying it fails.
fn patch_strict_errors(kind: PatchType, patch: &[u8]) -> Vec<StrictError> {
    let Ok((value, duplicates)) = strict_decoding::json_slice(patch) else {
        return Vec::new();
    };
    if kind != PatchType::Json {
        return duplicates
            .into_iter()
            .map(|d| StrictError::Duplicate(d.path))
            .collect();
    }
    let findings = Findings::json_duplicates(duplicates, Bytes::copy_from_slice(patch));
    const OPERATION_FIELDS: [&str; 4] = ["op", "path", "from", "value"];
    let unknown: Vec<String> = value
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, op)| Some((i, op.as_object()?)))
        .flat_map(|(i, op)| {
            op.keys()
                .filter(|k| !OPERATION_FIELDS.contains(&k.as_str()))
                .map(move |k| format!("[{i}].{k}"))
        })
        .collect();
    findings
        .errors(&unknown, Destination::Typed)
        .into_iter()
        .map(|e| StrictError::JsonPatch(Box::new(e)))
        .collect()
}

/// The object's name must match the URL's (`checkName`).
fn check_name(obj: &Value, name: &str) -> Result<()> {
    let own = object::name(obj);
    if !own.is_empty() && own != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({own}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// Whether a namespace still lists `spec.finalizers`.
fn has_spec_finalizers(ns: &Value) -> bool {
    ns.at("/spec/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

/// Upstream's `ShouldDeleteDuringUpdate`: an update that removes the last finalizer of an
/// object being deleted with no grace period left deletes it.
fn should_delete_during_update(new: &Value, old: &Value) -> bool {
    object::finalizers(new).is_empty()
        && !object::finalizers(old).is_empty()
        && object::deletion_timestamp(old).is_some()
        && object::deletion_grace_period(old).unwrap_or(0) == 0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn delete_during_update_rules() {
        let deleting = json!({"metadata": {"finalizers": ["a"], "deletionTimestamp": "t", "deletionGracePeriodSeconds": 0}});
        let cleared = json!({"metadata": {"deletionTimestamp": "t"}});
        assert!(should_delete_during_update(&cleared, &deleting));
        let graceful = json!({"metadata": {"finalizers": ["a"], "deletionTimestamp": "t", "deletionGracePeriodSeconds": 30}});
        assert!(!should_delete_during_update(&cleared, &graceful));
        let live = json!({"metadata": {"finalizers": ["a"]}});
        assert!(!should_delete_during_update(
            &json!({"metadata": {}}),
            &live
        ));
    }

    #[test]
    fn name_must_match_url() {
        assert!(check_name(&json!({"metadata": {"name": "a"}}), "a").is_ok());
        assert!(check_name(&json!({"metadata": {}}), "a").is_ok());
        assert_eq!(
            check_name(&json!({"metadata": {"name": "b"}}), "a").map_err(|e| e.code),
            Err(400)
        );
    }
}
