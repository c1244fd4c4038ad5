//! `pods/{name}/eviction`: a delete that a PodDisruptionBudget may refuse (429), as upstream's `EvictionREST`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcm_machinery::labels::Selector;
use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::object;
use crate::pointer::At;
use crate::registry::delete::{DeleteOptions, check_preconditions};
use crate::registry::resource::ResourceDef;
use crate::registry::strategy::typed;
use crate::registry::{MAX_WRITE_RETRIES, Registry, encode_for_storage};
use crate::resources::policy::PDBS;
use crate::storage;

/// Above this many evictions not yet confirmed by the disruption controller, evictions are
/// refused (upstream's `MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

/// Upstream's message when a PodDisruptionBudget refuses an eviction.
pub const DISRUPTION_BUDGET_MESSAGE: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";

/// The condition an evicted pod gets before it is deleted (`DisruptionTarget`).
pub use kcm_machinery::controller::ranking::DISRUPTION_TARGET;
/// Its reason when the eviction API evicts the pod.
pub const EVICTION_BY_EVICTION_API: &str = "EvictionByEvictionAPI";
/// Its message then.
const EVICTION_MESSAGE: &str = "Eviction API: evicting";

impl Registry {
    /// Evicts pod `name`: deletes it unless its PodDisruptionBudget allows no disruption.
    /// `dry_run` (the request's `dryRun=All`) adds to the eviction's own delete options.
    pub async fn evict(
        &self,
        pods: &ResourceDef,
        namespace: &str,
        name: &str,
        eviction: &Value,
        dry_run: bool,
    ) -> Result<()> {
        let gr = pods.group_resource();
        let kind = eviction
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("Eviction");
        if kind != "Eviction" {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type Eviction): kind {kind:?} does not match"
            )));
        }
        let eviction_name = object::name(eviction);
        if !eviction_name.is_empty() && eviction_name != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let mut opts = DeleteOptions::default();
        if let Some(body) = eviction.get("deleteOptions").filter(|v| !v.is_null()) {
            opts.merge_body(body)?;
        }
        opts.dry_run |= dry_run;
        let pod = self.get(pods, namespace, name).await?;
        if can_ignore_pdb(&pod) {
            self.add_condition_and_delete(pods, namespace, name, &opts)
                .await?;
            return Ok(());
        }
        let pdbs_def = self
            .served(&PDBS)
            .ok_or_else(|| ApiError::internal("poddisruptionbudgets are not served"))?;
        for _ in 0..MAX_WRITE_RETRIES {
            let pdbs = self.matching_pdbs(pdbs_def, namespace, &pod).await?;
            let (mut pdb, kv) = match pdbs.len() {
                0 => {
                    self.add_condition_and_delete(pods, namespace, name, &opts)
                        .await?;
                    return Ok(());
                }
                1 => pdbs
                    .into_iter()
                    .next()
                    .ok_or_else(|| ApiError::internal("lost the PodDisruptionBudget"))?,
                _ => {
                    return Err(ApiError::internal(
                        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    ));
                }
            };
            let ready = pod_ready(&pod);
            let policy = pdb
                .at("/spec/unhealthyPodEvictionPolicy")
                .and_then(Value::as_str)
                .unwrap_or("IfHealthyBudget");
            let current_healthy = int(&pdb, "/status/currentHealthy");
            let desired_healthy = int(&pdb, "/status/desiredHealthy");
            if !ready
                && (policy == "AlwaysAllow"
                    || (current_healthy >= desired_healthy && desired_healthy > 0))
            {
                // An unhealthy pod does not count against a budget that is already met.
                self.add_condition_and_delete(pods, namespace, name, &opts)
                    .await?;
                return Ok(());
            }
            let pdb_name = object::name(&pdb).to_owned();
            check_budget(&pdb, &pdb_name)?;
            let allowed = int(&pdb, "/status/disruptionsAllowed") - 1;
            pdb["status"]["disruptionsAllowed"] = json!(allowed);
            if !pdb["status"]["disruptedPods"].is_object() {
                pdb["status"]["disruptedPods"] = json!({});
            }
            pdb["status"]["disruptedPods"][name] = Value::String(object::now_rfc3339());
            if opts.dry_run {
                return Ok(());
            }
            let bytes = encode_for_storage(pdbs_def, &pdb)?;
            match self.storage().update(&kv.key, kv.mod_revision, bytes).await {
                Ok(_) => {
                    self.add_condition_and_delete(pods, namespace, name, &opts)
                        .await?;
                    return Ok(());
                }
                Err(storage::Error::Conflict { .. }) => continue,
                Err(e) => return Err(ApiError::from_storage(e, PDBS.group_resource(), &pdb_name)),
            }
        }
        Err(ApiError::stale(gr, name))
    }

    /// Upstream's `addConditionAndDeletePod`: unless dry run, the latest pod gets the
    /// `DisruptionTarget` condition (`EvictionByEvictionAPI`) — so the Job controller, a
    /// ReplicaSet's owner or a user reading the pod as it goes knows an eviction ended it —,
    /// then the pod is deleted with `opts`, whose resourceVersion precondition (if any)
    /// follows that update.
    async fn add_condition_and_delete(
        &self,
        pods: &ResourceDef,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<()> {
        let mut opts = opts.clone();
        if !opts.dry_run {
            self.mark_disruption_target(pods, namespace, name, &mut opts)
                .await?;
        }
        self.delete(pods, namespace, name, &opts).await?;
        Ok(())
    }

    /// Gives the latest pod the `DisruptionTarget` condition (retrying on conflicts); a
    /// resourceVersion precondition in `opts` moves to the version written.
    async fn mark_disruption_target(
        &self,
        pods: &ResourceDef,
        namespace: &str,
        name: &str,
        opts: &mut DeleteOptions,
    ) -> Result<()> {
        for _ in 0..MAX_WRITE_RETRIES {
            let Some((mut pod, kv)) = self.get_kv(pods, namespace, name).await? else {
                return Err(ApiError::not_found(pods.group_resource(), name));
            };
            check_preconditions(pods, &pod, opts)?;
            if !set_disruption_target(&mut pod, &object::now_rfc3339()) {
                return Ok(());
            }
            let bytes = encode_for_storage(pods, &pod)?;
            match self.storage().update(&kv.key, kv.mod_revision, bytes).await {
                Ok(revision) => {
                    if opts.precondition_resource_version.is_some() {
                        opts.precondition_resource_version = Some(revision.to_string());
                    }
                    return Ok(());
                }
                Err(storage::Error::Conflict { .. }) => continue,
                Err(e) => return Err(ApiError::from_storage(e, pods.group_resource(), name)),
            }
        }
        Err(ApiError::stale(pods.group_resource(), name))
    }

    /// The PodDisruptionBudgets in `namespace` whose (non-empty) selector matches the pod.
    async fn matching_pdbs(
        &self,
        def: &ResourceDef,
        namespace: &str,
        pod: &Value,
    ) -> Result<Vec<(Value, crate::storage::KeyValue)>> {
        let page = self
            .storage()
            .list(storage::ListOptions {
                prefix: PDBS.storage_prefix(Some(namespace)),
                ..Default::default()
            })
            .await
            .map_err(|e| ApiError::from_storage(e, PDBS.group_resource(), ""))?;
        let labels = object::labels(pod);
        let mut out = Vec::new();
        for kv in page.kvs {
            let pdb = super::decode_stored(def, &kv)?;
            let selector = pdb
                .at("/spec/selector")
                .and_then(typed::<LabelSelector>)
                .and_then(|ls| Selector::from_label_selector(&ls).ok());
            // A nil or empty selector matches nothing here, unlike elsewhere.
            if let Some(sel) = selector
                && !sel.is_everything()
                && sel.matches(&labels)
            {
                out.push((pdb, kv));
            }
        }
        Ok(out)
    }
}

/// Pods that are terminal, pending or already being deleted are evicted without consulting
/// budgets (upstream's `canIgnorePDB`).
fn can_ignore_pdb(pod: &Value) -> bool {
    let phase = pod
        .at("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    matches!(phase, "Succeeded" | "Failed" | "Pending") || object::deletion_timestamp(pod).is_some()
}

/// Sets the pod's `DisruptionTarget` condition to `True` for an eviction, as upstream's
/// `UpdatePodCondition`: a condition whose status does not change keeps its transition time;
/// `now` is the time otherwise. Whether the pod changed.
fn set_disruption_target(pod: &mut Value, now: &str) -> bool {
    let mut condition = json!({
        "type": DISRUPTION_TARGET,
        "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": now,
        "reason": EVICTION_BY_EVICTION_API,
        "message": EVICTION_MESSAGE,
    });
    let Some(obj) = pod.as_object_mut() else {
        return false;
    };
    let status = obj.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    let conditions = &mut status["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(conditions) = conditions.as_array_mut() else {
        return false;
    };
    let existing = conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(DISRUPTION_TARGET));
    match existing {
        None => {
            conditions.push(condition);
            true
        }
        Some(old) => {
            if old.get("status") == condition.get("status")
                && let Some(since) = old.get("lastTransitionTime").cloned()
            {
                condition["lastTransitionTime"] = since;
            }
            let changed = *old != condition;
            *old = condition;
            changed
        }
    }
}

fn pod_ready(pod: &Value) -> bool {
    pod.at("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn int(v: &Value, pointer: &str) -> i64 {
    v.at(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// Upstream's `checkAndDecrement` refusals: the budget is unprocessed (429), negative or
/// overfull (403), or allows no disruption (429 with a `DisruptionBudget` cause).
fn check_budget(pdb: &Value, pdb_name: &str) -> Result<()> {
    let observed = int(pdb, "/status/observedGeneration");
    if observed < object::generation(pdb) {
        return Err(
            ApiError::too_many_requests(DISRUPTION_BUDGET_MESSAGE, 10).with_cause(
                "DisruptionBudget",
                format!("The disruption budget {pdb_name} is still being processed by the server."),
                "",
            ),
        );
    }
    let allowed = int(pdb, "/status/disruptionsAllowed");
    if allowed < 0 {
        return Err(ApiError::forbidden(
            PDBS.group_resource(),
            pdb_name,
            "pdb disruptions allowed is negative",
        ));
    }
    let disrupted = pdb
        .at("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(ApiError::forbidden(
            PDBS.group_resource(),
            pdb_name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(
            ApiError::too_many_requests(DISRUPTION_BUDGET_MESSAGE, 0).with_cause(
                "DisruptionBudget",
                format!(
                    "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                    int(pdb, "/status/desiredHealthy"),
                    int(pdb, "/status/currentHealthy")
                ),
                "",
            ),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_checks() {
        let cases = [
            (
                "allowed",
                json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "disruptionsAllowed": 1}}),
                None,
            ),
            (
                "exhausted",
                json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "disruptionsAllowed": 0, "desiredHealthy": 2, "currentHealthy": 2}}),
                Some(429),
            ),
            (
                "unprocessed",
                json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 1, "disruptionsAllowed": 3}}),
                Some(429),
            ),
            (
                "negative",
                json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "disruptionsAllowed": -1}}),
                Some(403),
            ),
        ];
        for (name, pdb, want) in cases {
            assert_eq!(
                check_budget(&pdb, "budget").err().map(|e| e.code),
                want,
                "case {name}"
            );
        }
        let err = check_budget(&cases_exhausted(), "budget").expect_err("exhausted");
        assert_eq!(
            err.details.expect("details").causes[0].message,
            "The disruption budget budget needs 2 healthy pods and has 2 currently"
        );
    }

    fn cases_exhausted() -> Value {
        json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "disruptionsAllowed": 0, "desiredHealthy": 2, "currentHealthy": 2}})
    }

    #[test]
    fn the_disruption_target_condition_is_added_or_refreshed_as_upstream() {
        let mut pod = json!({"metadata": {"name": "p"}});
        assert!(set_disruption_target(&mut pod, "2026-01-01T00:00:00Z"));
        assert_eq!(
            pod["status"]["conditions"],
            json!([{"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}])
        );
        // Evicted again later: the status did not change, so neither does the transition time.
        assert!(!set_disruption_target(&mut pod, "2026-01-02T00:00:00Z"));
        assert_eq!(
            pod["status"]["conditions"][0]["lastTransitionTime"],
            "2026-01-01T00:00:00Z"
        );
        // A condition another component set (False, another reason) is taken over, with a
        // new transition time; other conditions stay.
        let mut pod = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "DisruptionTarget", "status": "False", "reason": "Other",
                "lastTransitionTime": "2025-01-01T00:00:00Z"}]}});
        assert!(set_disruption_target(&mut pod, "2026-01-03T00:00:00Z"));
        let conditions = &pod["status"]["conditions"];
        assert_eq!(conditions[0], json!({"type": "Ready", "status": "True"}));
        assert_eq!(conditions[1]["status"], "True");
        assert_eq!(conditions[1]["reason"], "EvictionByEvictionAPI");
        assert_eq!(conditions[1]["lastTransitionTime"], "2026-01-03T00:00:00Z");
    }

    #[test]
    fn ignorable_pods() {
        assert!(can_ignore_pdb(&json!({"status": {"phase": "Pending"}})));
        assert!(can_ignore_pdb(
            &json!({"status": {"phase": "Running"}, "metadata": {"deletionTimestamp": "t"}})
        ));
        assert!(!can_ignore_pdb(&json!({"status": {"phase": "Running"}})));
    }
}
