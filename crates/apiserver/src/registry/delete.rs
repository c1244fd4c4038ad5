//! Delete and deletecollection: `DeleteOptions`, graceful deletion, finalizers and the garbage collector's propagation finalizers.
//!
//! As upstream's `Store.Delete` with `rest.BeforeDelete`: an object with finalizers, or deleted
//! gracefully (pods on a node), gets `deletionTimestamp` (+ `deletionGracePeriodSeconds`) and
//! stays; `Foreground` / `Orphan` propagation add the `foregroundDeletion` / `orphan`
//! finalizers the garbage collector acts on; otherwise the object is deleted now.

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::error::{ApiError, GroupResource, Result, StatusDetails, details_json};
use crate::object::{self, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use crate::registry::list::ListOptions;
use crate::registry::resource::ResourceDef;
use crate::registry::{MAX_WRITE_RETRIES, Registry, encode_for_storage};
use crate::storage;
use crate::validation::FieldError;

/// `metav1.DeleteOptions`, as sent in a delete's body or query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`: 0 deletes now; `None` uses the resource's default.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_resource_version: Option<String>,
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// The deprecated `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads the options from a `DeleteOptions` JSON body (fields absent stay `None`).
    pub fn merge_body(&mut self, body: &Value) -> Result<()> {
        if !body.is_object() {
            return Err(ApiError::bad_request("DeleteOptions must be a JSON object"));
        }
        let bad = |field: &str| {
            ApiError::bad_request(format!("DeleteOptions.{field} has the wrong type"))
        };
        if let Some(v) = body.get("gracePeriodSeconds").filter(|v| !v.is_null()) {
            self.grace_period_seconds = Some(v.as_i64().ok_or_else(|| bad("gracePeriodSeconds"))?);
        }
        if let Some(p) = body.get("preconditions").filter(|v| !v.is_null()) {
            if let Some(uid) = p.get("uid").filter(|v| !v.is_null()) {
                self.precondition_uid = Some(
                    uid.as_str()
                        .ok_or_else(|| bad("preconditions.uid"))?
                        .to_owned(),
                );
            }
            if let Some(rv) = p.get("resourceVersion").filter(|v| !v.is_null()) {
                self.precondition_resource_version = Some(
                    rv.as_str()
                        .ok_or_else(|| bad("preconditions.resourceVersion"))?
                        .to_owned(),
                );
            }
        }
        if let Some(v) = body.get("propagationPolicy").filter(|v| !v.is_null()) {
            self.propagation_policy = Some(
                v.as_str()
                    .ok_or_else(|| bad("propagationPolicy"))?
                    .to_owned(),
            );
        }
        if let Some(v) = body.get("orphanDependents").filter(|v| !v.is_null()) {
            self.orphan_dependents = Some(v.as_bool().ok_or_else(|| bad("orphanDependents"))?);
        }
        if let Some(v) = body.get("dryRun").and_then(Value::as_array) {
            self.dry_run |= v.iter().any(|d| d == "All");
        }
        Ok(())
    }

    /// Validates the options (`ValidateDeleteOptions`): 422 on a bad propagation policy.
    pub fn validate(&self) -> Result<()> {
        let mut errs = Vec::new();
        if self.orphan_dependents.is_some() && self.propagation_policy.is_some() {
            errs.push(FieldError::invalid(
                "propagationPolicy",
                self.propagation_policy.clone().unwrap_or_default(),
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        if let Some(p) = &self.propagation_policy
            && !["Orphan", "Background", "Foreground"].contains(&p.as_str())
        {
            errs.push(FieldError::not_supported(
                "propagationPolicy",
                p.as_str(),
                &["Foreground", "Background", "Orphan", "nil"],
            ));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                crate::error::GroupKind {
                    group: "meta.k8s.io",
                    kind: "DeleteOptions",
                },
                "",
                &errs,
            ))
        }
    }
}

/// The result of a delete.
#[derive(Debug)]
pub enum DeleteOutcome {
    /// The object is gone; this was its last state.
    Deleted(Value),
    /// The object stays until its finalizers or grace period run out; this is its new state.
    Pending(Value),
    /// A graceful deletion was already under way and the request did not shorten it.
    AlreadyDeleting(Value),
}

impl Registry {
    /// Deletes one object with `opts`.
    pub async fn delete(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome> {
        opts.validate()?;
        let gr = def.group_resource();
        if let Some(why) = def.strategy.forbid_delete(name) {
            return Err(ApiError::forbidden(gr, name, why));
        }
        let namespace = if def.namespaced { namespace } else { "" };
        let two_step = crate::registry::rest::of(def).filter(|h| h.begins_delete());
        if let Some(hooks) = two_step {
            // A two-step delete (a namespace's) is admitted before its first step (the
            // namespace turns Terminating; NamespaceLifecycle keeps the immortal ones).
            self.admit_delete(def, namespace, name, None, opts.dry_run)
                .await?;
            if let Some(pending) = hooks.begin_delete(self, def, name, opts.dry_run).await? {
                return Ok(DeleteOutcome::Pending(pending));
            }
        }
        let mut admitted = two_step.is_some();
        for _ in 0..MAX_WRITE_RETRIES {
            let Some((mut obj, kv)) = self.get_kv(def, namespace, name).await? else {
                return Err(ApiError::not_found(gr, name));
            };
            check_preconditions(def, &obj, opts)?;
            let stored = obj.clone();
            if !admitted {
                self.admit_delete(def, namespace, name, Some(&obj), opts.dry_run)
                    .await?;
                admitted = true;
            }
            let before = before_delete(def, &mut obj, opts.grace_period_seconds);
            if before.pending {
                return Ok(DeleteOutcome::AlreadyDeleting(obj));
            }
            let (mut finalizers_changed, finalizers) =
                gc_finalizers(&obj, opts, def.strategy.orphans_by_default());
            if finalizers_changed {
                object::set_finalizers(&mut obj, finalizers);
            }
            if object::deletion_timestamp(&obj).is_none()
                && def.strategy.prepare_for_delete(&mut obj)
            {
                finalizers_changed = true;
            }
            let pending_finalizers = !object::finalizers(&obj).is_empty();
            let mut last = obj;
            let mut rev = kv.mod_revision;
            if before.graceful || pending_finalizers || finalizers_changed {
                if !before.graceful && pending_finalizers {
                    mark_as_deleting(&mut last);
                }
                if before.graceful || pending_finalizers {
                    if opts.dry_run {
                        return Ok(DeleteOutcome::Pending(last));
                    }
                    // Upstream's GuaranteedUpdate skips identical writes: deleting again an
                    // object already marked (a kubelet's repeated grace-0 delete of a pod
                    // held by finalizers) makes no new revision and no watch event.
                    if last != stored {
                        let bytes = encode_for_storage(def, &last)?;
                        match self.storage().update(&kv.key, kv.mod_revision, bytes).await {
                            Ok(r) => {
                                rev = r;
                                object::set_resource_version(&mut last, r);
                            }
                            Err(storage::Error::Conflict { .. }) => continue,
                            Err(e) => return Err(ApiError::from_storage(e, gr, name)),
                        }
                    }
                    if pending_finalizers || before.period > 0 {
                        return Ok(DeleteOutcome::Pending(last));
                    }
                }
            }
            if opts.dry_run {
                return Ok(DeleteOutcome::Deleted(last));
            }
            match self.storage().delete(&kv.key, rev).await {
                Ok(_) => {
                    if let Some(hooks) = crate::registry::rest::of(def) {
                        hooks.after_delete(self, &last).await;
                    }
                    return Ok(DeleteOutcome::Deleted(last));
                }
                // Graceless deletes race with other deleters; the object is gone either way.
                Err(storage::Error::NotFound { .. }) if before.graceful => {
                    return Ok(DeleteOutcome::Deleted(last));
                }
                Err(storage::Error::Conflict { .. }) => continue,
                Err(e) => return Err(ApiError::from_storage(e, gr, name)),
            }
        }
        Err(ApiError::stale(gr, name))
    }

    /// Deletes every object a list selects and returns the list of deleted objects, as
    /// upstream's `Store.DeleteCollection` (not atomic; objects gone meanwhile are skipped).
    pub async fn delete_collection(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        list_opts: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Value> {
        opts.validate()?;
        let mut list = self.list(def, namespace, list_opts).await?;
        let items = match list.get_mut("items") {
            Some(Value::Array(items)) => std::mem::take(items),
            _ => Vec::new(),
        };
        let mut deleted = Vec::with_capacity(items.len());
        for item in items {
            let ns = object::namespace(&item).to_owned();
            let name = object::name(&item).to_owned();
            match self.delete(def, &ns, &name, opts).await {
                Ok(
                    DeleteOutcome::Deleted(o)
                    | DeleteOutcome::Pending(o)
                    | DeleteOutcome::AlreadyDeleting(o),
                ) => deleted.push(o),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        list["items"] = Value::Array(deleted);
        Ok(list)
    }
}

/// A `Status` with `status: Success` about a deleted object (upstream's `finalizeDelete`).
pub fn success_status(gr: GroupResource<'_>, obj: &Value) -> Value {
    let details = StatusDetails {
        name: object::name(obj).to_owned(),
        group: gr.group.to_owned(),
        kind: gr.resource.to_owned(),
        uid: object::uid(obj).to_owned(),
        ..Default::default()
    };
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details_json(&details),
    })
}

/// Checks `preconditions` against the stored object, as `rest.BeforeDelete` does (409).
pub(crate) fn check_preconditions(
    def: &ResourceDef,
    obj: &Value,
    opts: &DeleteOptions,
) -> Result<()> {
    // Upstream names the kind, not the resource, in these conflicts.
    let gr = GroupResource {
        group: &def.group,
        resource: &def.kind,
    };
    let name = object::name(obj);
    if let Some(uid) = &opts.precondition_uid
        && uid != object::uid(obj)
    {
        return Err(ApiError::conflict(
            gr,
            name,
            &format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                object::uid(obj)
            ),
        ));
    }
    if let Some(rv) = &opts.precondition_resource_version
        && rv != object::resource_version(obj)
    {
        return Err(ApiError::conflict(
            gr,
            name,
            &format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                object::resource_version(obj)
            ),
        ));
    }
    Ok(())
}

/// What `rest.BeforeDelete` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BeforeDelete {
    /// The object is (now) being deleted gracefully: it was updated with a deletion timestamp.
    graceful: bool,
    /// A graceful deletion is already under way and this request does not shorten it.
    pending: bool,
    /// The grace period in force.
    period: i64,
}

/// Upstream's `rest.BeforeDelete`: sets `deletionTimestamp` and `deletionGracePeriodSeconds`
/// for a graceful delete, or shortens a pending one.
fn before_delete(def: &ResourceDef, obj: &mut Value, requested: Option<i64>) -> BeforeDelete {
    let requested = requested.map(|g| if g < 0 { 1 } else { g });
    let not_graceful = BeforeDelete {
        graceful: false,
        pending: false,
        period: 0,
    };
    // `None`: the resource is not deleted gracefully at all (no RESTGracefulDeleteStrategy).
    let Some(period) = def.strategy.graceful_delete_period(obj, requested) else {
        return not_graceful;
    };
    if let Some(ts) = object::deletion_timestamp(obj).map(str::to_owned) {
        let current = object::deletion_grace_period(obj).unwrap_or(0);
        if current <= 0 {
            return not_graceful;
        }
        return match requested {
            Some(period) if period < current => {
                // Only a shorter grace period may be given: move the deadline earlier.
                if let Ok(old) = ts.parse::<Timestamp>() {
                    let deadline = old - SignedDuration::from_secs(current)
                        + SignedDuration::from_secs(period);
                    object::set_meta(obj, "deletionTimestamp", object::format_time(deadline));
                }
                object::set_meta(obj, "deletionGracePeriodSeconds", period);
                BeforeDelete {
                    graceful: true,
                    pending: false,
                    period,
                }
            }
            _ => BeforeDelete {
                graceful: false,
                pending: true,
                period: current,
            },
        };
    }
    let deadline = Timestamp::now() + SignedDuration::from_secs(period);
    object::set_meta(obj, "deletionTimestamp", object::format_time(deadline));
    object::set_meta(obj, "deletionGracePeriodSeconds", period);
    let generation = object::generation(obj);
    if generation > 0 {
        object::set_meta(obj, "generation", generation + 1);
    }
    BeforeDelete {
        graceful: true,
        pending: false,
        period,
    }
}

/// Upstream's `markAsDeleting`: deletion timestamp now (unless earlier), grace 0.
fn mark_as_deleting(obj: &mut Value) {
    let now = Timestamp::now();
    match object::deletion_timestamp(obj).map(|t| t.parse::<Timestamp>()) {
        None => {
            let generation = object::generation(obj);
            if generation > 0 {
                object::set_meta(obj, "generation", generation + 1);
            }
            object::set_meta(obj, "deletionTimestamp", object::format_time(now));
        }
        Some(Ok(existing)) if existing > now => {
            object::set_meta(obj, "deletionTimestamp", object::format_time(now));
        }
        Some(_) => {}
    }
    object::set_meta(obj, "deletionGracePeriodSeconds", 0);
}

/// Upstream's `deletionFinalizersForGarbageCollection`: the finalizers after applying the
/// propagation policy, and whether they changed.
fn gc_finalizers(
    obj: &Value,
    opts: &DeleteOptions,
    orphan_by_default: bool,
) -> (bool, Vec<String>) {
    let existing = object::finalizers(obj);
    let has = |f: &str| {
        existing
            .iter()
            .find(|e| *e == FINALIZER_ORPHAN || *e == FINALIZER_FOREGROUND)
            .is_some_and(|e| e == f)
    };
    let policy = opts.propagation_policy.as_deref();
    let orphan = match (opts.orphan_dependents, policy) {
        (Some(o), _) => o,
        (None, Some("Orphan")) => true,
        (None, Some(_)) => false,
        // The resource's default policy, unless a finalizer already chose (upstream's
        // `deletionFinalizersForGarbageCollection`).
        (None, None) => has(FINALIZER_ORPHAN) || (orphan_by_default && !has(FINALIZER_FOREGROUND)),
    };
    let foreground = match (opts.orphan_dependents, policy) {
        (Some(_), _) => false,
        (None, Some("Foreground")) => true,
        (None, Some(_)) => false,
        (None, None) => has(FINALIZER_FOREGROUND),
    };
    let mut out: Vec<String> = existing
        .iter()
        .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND)
        .cloned()
        .collect();
    if orphan {
        out.push(FINALIZER_ORPHAN.to_owned());
    }
    if foreground {
        out.push(FINALIZER_FOREGROUND.to_owned());
    }
    let old: std::collections::BTreeSet<&String> = existing.iter().collect();
    let new: std::collections::BTreeSet<&String> = out.iter().collect();
    if old == new {
        (false, existing)
    } else {
        (true, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{core, pod};

    fn opts(policy: Option<&str>) -> DeleteOptions {
        DeleteOptions {
            propagation_policy: policy.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn propagation_finalizers() {
        struct Case {
            name: &'static str,
            finalizers: Vec<&'static str>,
            opts: DeleteOptions,
            changed: bool,
            want: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "background no finalizers",
                finalizers: vec![],
                opts: opts(Some("Background")),
                changed: false,
                want: vec![],
            },
            Case {
                name: "foreground adds",
                finalizers: vec!["x/y"],
                opts: opts(Some("Foreground")),
                changed: true,
                want: vec!["x/y", "foregroundDeletion"],
            },
            Case {
                name: "orphan adds",
                finalizers: vec![],
                opts: opts(Some("Orphan")),
                changed: true,
                want: vec!["orphan"],
            },
            Case {
                name: "orphan replaces foreground",
                finalizers: vec!["foregroundDeletion"],
                opts: opts(Some("Orphan")),
                changed: true,
                want: vec!["orphan"],
            },
            Case {
                name: "default keeps existing",
                finalizers: vec!["orphan"],
                opts: opts(None),
                changed: false,
                want: vec!["orphan"],
            },
            Case {
                name: "orphanDependents=false removes orphan",
                finalizers: vec!["orphan"],
                opts: DeleteOptions {
                    orphan_dependents: Some(false),
                    ..Default::default()
                },
                changed: true,
                want: vec![],
            },
        ];
        for case in cases {
            let obj = json!({"metadata": {"finalizers": case.finalizers}});
            let (changed, got) = gc_finalizers(&obj, &case.opts, false);
            assert_eq!(changed, case.changed, "case {}", case.name);
            assert_eq!(got, case.want, "case {}", case.name);
        }
    }

    #[test]
    fn before_delete_for_pods_and_others() {
        let mut scheduled = json!({"metadata": {"generation": 1}, "spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30}});
        let b = before_delete(&pod::PODS, &mut scheduled, None);
        assert_eq!(
            b,
            BeforeDelete {
                graceful: true,
                pending: false,
                period: 30
            }
        );
        assert_eq!(object::deletion_grace_period(&scheduled), Some(30));
        assert_eq!(object::generation(&scheduled), 2);

        // A second delete without a shorter grace period is pending; a shorter one shortens.
        let mut again = scheduled.clone();
        assert!(before_delete(&pod::PODS, &mut again, Some(60)).pending);
        let b = before_delete(&pod::PODS, &mut again, Some(0));
        assert_eq!(
            b,
            BeforeDelete {
                graceful: true,
                pending: false,
                period: 0
            }
        );

        let mut cm = json!({"metadata": {"name": "c"}});
        let b = before_delete(&core::CONFIGMAPS, &mut cm, Some(30));
        assert!(!b.graceful && !b.pending);
        assert!(object::deletion_timestamp(&cm).is_none());
    }

    #[test]
    fn delete_options_body_and_validation() {
        let mut o = DeleteOptions::default();
        o.merge_body(&json!({"kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Foreground",
            "preconditions": {"uid": "u"}, "dryRun": ["All"]})).expect("parses");
        assert_eq!(o.grace_period_seconds, Some(0));
        assert_eq!(o.precondition_uid.as_deref(), Some("u"));
        assert!(o.dry_run);
        assert!(o.validate().is_ok());
        o.propagation_policy = Some("Sometimes".to_owned());
        assert_eq!(o.validate().map_err(|e| e.code), Err(422));
        assert_eq!(
            DeleteOptions::default()
                .merge_body(&json!({"gracePeriodSeconds": "x"}))
                .map_err(|e| e.code),
            Err(400)
        );
    }
}
