//! `pods/{name}/eviction`: a delete that a PodDisruptionBudget may refuse (429), as upstream's `EvictionREST`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcm_machinery::labels::Selector;
use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::object;
use crate::pointer::At;
use crate::registry::delete::DeleteOptions;
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
            self.delete(pods, namespace, name, &opts).await?;
            return Ok(());
        }
        let pdbs_def = self
            .served(&PDBS)
            .ok_or_else(|| ApiError::internal("poddisruptionbudgets are not served"))?;
        for _ in 0..MAX_WRITE_RETRIES {
            let pdbs = self.matching_pdbs(pdbs_def, namespace, &pod).await?;
            let (mut pdb, kv) = match pdbs.len() {
                0 => {
                    self.delete(pods, namespace, name, &opts).await?;
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
                self.delete(pods, namespace, name, &opts).await?;
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
                    self.delete(pods, namespace, name, &opts).await?;
                    return Ok(());
                }
                Err(storage::Error::Conflict { .. }) => continue,
                Err(e) => return Err(ApiError::from_storage(e, PDBS.group_resource(), &pdb_name)),
            }
        }
        Err(ApiError::stale(gr, name))
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
    fn ignorable_pods() {
        assert!(can_ignore_pdb(&json!({"status": {"phase": "Pending"}})));
        assert!(can_ignore_pdb(
            &json!({"status": {"phase": "Running"}, "metadata": {"deletionTimestamp": "t"}})
        ));
        assert!(!can_ignore_pdb(&json!({"status": {"phase": "Running"}})));
    }
}
