//! Syncing one budget: `sync`, `trySync`, the expected pod count and its controller finders, the disrupted-pod map, healthy pods, `updatePdbStatus` and `failSafe` (upstream `disruption.go`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use kcm_machinery::controller::controller_ref::get_controller_of;
use kcm_machinery::controller::ranking::is_pod_ready;
use kcm_machinery::events::EventType;
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::keys::{object_key, split_meta_namespace_key};
use kcm_machinery::intstr::scaled_value;
use kube::Resource;

use super::client::ScaleOf;
use super::controller::{DELETION_TIMEOUT, DisruptionController, pdb_selector};
use super::{Error, Result};

/// `policy.DisruptionAllowedCondition`.
const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// `policy.SufficientPodsReason`.
const SUFFICIENT_PODS: &str = "SufficientPods";
/// `policy.InsufficientPodsReason`.
const INSUFFICIENT_PODS: &str = "InsufficientPods";
/// `policy.SyncFailedReason`.
const SYNC_FAILED: &str = "SyncFailed";

/// The expected count, desired healthy count and unmanaged pods of a budget.
struct Expected {
    expected: i32,
    desired_healthy: i32,
    unmanaged: Vec<String>,
}

impl DisruptionController {
    /// Syncs the budget `key` (upstream's `sync`): a failed sync other than a write conflict
    /// writes the fail-safe status and is not retried unless that write fails.
    pub async fn sync(&self, key: &str) -> Result<()> {
        split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
            key: key.to_owned(),
            source,
        })?;
        let Some(pdb) = self.caches.pdbs.get_by_key(key) else {
            tracing::trace!(pdb = key, "PodDisruptionBudget has been deleted");
            return Ok(());
        };
        match self.try_sync(key, &pdb).await {
            Ok(()) => Ok(()),
            Err(err) if err.is_conflict() => Err(err),
            Err(err) => {
                tracing::error!(pdb = key, %err, "Failed to sync PDB");
                self.fail_safe(key, &pdb, &err).await
            }
        }
    }

    /// Upstream's `trySync`.
    async fn try_sync(&self, key: &str, pdb: &PodDisruptionBudget) -> Result<()> {
        let pods = self.pods_for_pdb(key, pdb)?;
        if pods.is_empty() {
            self.pdb_event(
                pdb,
                EventType::Normal,
                "NoPods",
                "No matching pods found".to_owned(),
            );
        }
        let Expected {
            expected,
            desired_healthy,
            unmanaged,
        } = match self.expected_pod_count(pdb, &pods).await {
            Ok(e) => e,
            Err(err) => {
                self.pdb_event(
                    pdb,
                    EventType::Warning,
                    "CalculateExpectedPodCountFailed",
                    format!("Failed to calculate the number of expected pods: {err}"),
                );
                return Err(err);
            }
        };
        if !unmanaged.is_empty() {
            tracing::debug!(pdb = key, pods = ?unmanaged, "Found unmanaged pods associated with this PDB");
            let selector = pdb
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .map(|s| format!("{s:?}"))
                .unwrap_or_else(|| "nil".to_owned());
            self.pdb_event(
                pdb,
                EventType::Warning,
                "UnmanagedPods",
                format!(
                    "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
                ),
            );
        }
        let now = (self.clock)();
        let (disrupted, recheck) = self.build_disrupted_pod_map(&pods, pdb, now);
        let current_healthy = count_healthy_pods(&pods, &disrupted, now);
        self.update_pdb_status(
            key,
            pdb,
            current_healthy,
            desired_healthy,
            expected,
            disrupted,
            now,
        )
        .await?;
        if let Some(at) = recheck {
            let wait = std::time::Duration::try_from(now.duration_until(at)).unwrap_or_default();
            self.queue.add_after(key.to_owned(), wait);
        }
        Ok(())
    }

    fn pdb_event(
        &self,
        pdb: &PodDisruptionBudget,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        self.recorder
            .event(&pdb.object_ref(&()), type_, reason, message);
    }

    /// The pods of the budget's namespace its selector selects (`getPodsForPdb`).
    fn pods_for_pdb(&self, key: &str, pdb: &PodDisruptionBudget) -> Result<Vec<Arc<Pod>>> {
        let selector = pdb_selector(pdb).ok_or_else(|| Error::Selector {
            pdb: key.to_owned(),
            message: "the selector does not parse".to_owned(),
        })?;
        let Some(selector) = selector else {
            return Ok(Vec::new());
        };
        let namespace = pdb.metadata.namespace.as_deref().unwrap_or_default();
        Ok(self
            .caches
            .pods
            .by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| selector.matches_opt(p.metadata.labels.as_ref()))
            .collect())
    }

    /// Upstream's `getExpectedPodCount`: `maxUnavailable` and percentage `minAvailable`
    /// scale against the pods' controllers; an integer `minAvailable` against the pods.
    async fn expected_pod_count(
        &self,
        pdb: &PodDisruptionBudget,
        pods: &[Arc<Pod>],
    ) -> Result<Expected> {
        let spec = pdb.spec.as_ref();
        let mut out = Expected {
            expected: 0,
            desired_healthy: 0,
            unmanaged: Vec::new(),
        };
        if let Some(max) = spec.and_then(|s| s.max_unavailable.as_ref()) {
            let (expected, unmanaged) = self.expected_scale(pods).await?;
            let max = scaled_value(Some(max), expected, true)?;
            out = Expected {
                expected,
                desired_healthy: (expected - max).max(0),
                unmanaged,
            };
        } else if let Some(min) = spec.and_then(|s| s.min_available.as_ref()) {
            match min {
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => {
                    out.desired_healthy = *n;
                    out.expected = pods.len() as i32;
                }
                percent => {
                    let (expected, unmanaged) = self.expected_scale(pods).await?;
                    out = Expected {
                        expected,
                        desired_healthy: scaled_value(Some(percent), expected, true)?,
                        unmanaged,
                    };
                }
            }
        }
        Ok(out)
    }

    /// The sum of the scales of the pods' controllers, and the pods without one
    /// (`getExpectedScale`).
    async fn expected_scale(&self, pods: &[Arc<Pod>]) -> Result<(i32, Vec<String>)> {
        let mut scales: HashMap<String, i32> = HashMap::new();
        let mut unmanaged = Vec::new();
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(owner) = get_controller_of(&pod.metadata) else {
                unmanaged.push(name);
                continue;
            };
            if scales.contains_key(&owner.uid) {
                continue;
            }
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            match self.find_controller(owner, namespace).await? {
                Some(found) => {
                    scales.insert(found.uid, found.replicas);
                }
                None => return Err(Error::NoController { pod: name }),
            }
        }
        Ok((scales.values().sum(), unmanaged))
    }

    /// Upstream's finders, in order: ReplicationController, Deployment (through its
    /// ReplicaSet), ReplicaSet, StatefulSet, any other owner's `scale`.
    async fn find_controller(
        &self,
        owner: &OwnerReference,
        namespace: &str,
    ) -> Result<Option<ScaleOf>> {
        let group = owner.api_version.split_once('/').map_or("", |(g, _)| g);
        let key = object_key(namespace, &owner.name);
        let scale = |uid: Option<&String>, replicas: Option<i32>| ScaleOf {
            uid: uid.cloned().unwrap_or_default(),
            replicas: replicas.unwrap_or(1),
        };
        if owner.kind == "ReplicationController" && group.is_empty() {
            return Ok(self
                .caches
                .rcs
                .get_by_key(&key)
                .filter(|rc| rc.metadata.uid.as_deref() == Some(owner.uid.as_str()))
                .map(|rc| {
                    scale(
                        rc.metadata.uid.as_ref(),
                        rc.spec.as_ref().and_then(|s| s.replicas),
                    )
                }));
        }
        if owner.kind == "ReplicaSet" && matches!(group, "apps" | "extensions") {
            let Some(rs) = self
                .caches
                .rss
                .get_by_key(&key)
                .filter(|rs| rs.metadata.uid.as_deref() == Some(owner.uid.as_str()))
            else {
                return Ok(None);
            };
            if let Some(rs_owner) = get_controller_of(&rs.metadata)
                && rs_owner.kind == "Deployment"
            {
                // A Deployment's ReplicaSet counts as the Deployment.
                let dep_group = rs_owner.api_version.split_once('/').map_or("", |(g, _)| g);
                if !matches!(dep_group, "apps" | "extensions") {
                    return Ok(None);
                }
                return Ok(self
                    .caches
                    .deployments
                    .get_by_key(&object_key(namespace, &rs_owner.name))
                    .filter(|d| d.metadata.uid.as_deref() == Some(rs_owner.uid.as_str()))
                    .map(|d| {
                        scale(
                            d.metadata.uid.as_ref(),
                            d.spec.as_ref().and_then(|s| s.replicas),
                        )
                    }));
            }
            return Ok(Some(scale(
                rs.metadata.uid.as_ref(),
                rs.spec.as_ref().and_then(|s| s.replicas),
            )));
        }
        if owner.kind == "StatefulSet" && group == "apps" {
            return Ok(self
                .caches
                .stateful_sets
                .get_by_key(&key)
                .filter(|s| s.metadata.uid.as_deref() == Some(owner.uid.as_str()))
                .map(|s| {
                    scale(
                        s.metadata.uid.as_ref(),
                        s.spec.as_ref().and_then(|s| s.replicas),
                    )
                }));
        }
        let found = self
            .client
            .get_scale(namespace, &owner.api_version, &owner.kind, &owner.name)
            .await
            .map_err(|message| Error::Scale { message })?;
        Ok(found.filter(|s| s.uid == owner.uid))
    }

    /// The budget's `disruptedPods` still pending deletion, and when the earliest expires
    /// (`buildDisruptedPodMap`); a pod evicted over two minutes ago and not deleted is
    /// dropped with a `NotDeleted` warning.
    fn build_disrupted_pod_map(
        &self,
        pods: &[Arc<Pod>],
        pdb: &PodDisruptionBudget,
        now: Timestamp,
    ) -> (BTreeMap<String, Time>, Option<Timestamp>) {
        let mut result = BTreeMap::new();
        let mut recheck: Option<Timestamp> = None;
        let Some(disrupted) = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else {
            return (result, recheck);
        };
        let timeout = SignedDuration::try_from(DELETION_TIMEOUT).unwrap_or_default();
        for pod in pods {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(at) = disrupted.get(&name) else {
                continue;
            };
            let expected_deletion = at.0.checked_add(timeout).unwrap_or(at.0);
            if expected_deletion < now {
                // Upstream names the namespace twice in this message.
                let ns = pdb.metadata.namespace.as_deref().unwrap_or_default();
                self.recorder.event(
                    &pod.object_ref(&()),
                    EventType::Warning,
                    "NotDeleted",
                    format!("Pod was expected by PDB {ns}/{ns} to be deleted but it wasn't"),
                );
            } else {
                if recheck.is_none_or(|r| expected_deletion < r) {
                    recheck = Some(expected_deletion);
                }
                result.insert(name, at.clone());
            }
        }
        (result, recheck)
    }

    /// Upstream's `updatePdbStatus`: written only when something changed.
    #[allow(clippy::too_many_arguments)] // upstream's parameters plus the key and clock
    async fn update_pdb_status(
        &self,
        key: &str,
        pdb: &PodDisruptionBudget,
        current_healthy: i32,
        desired_healthy: i32,
        expected: i32,
        disrupted: BTreeMap<String, Time>,
        now: Timestamp,
    ) -> Result<()> {
        // No disruption before any pod is expected: the first pods of a new budget are safe.
        let mut allowed = current_healthy - desired_healthy;
        if expected <= 0 || allowed <= 0 {
            allowed = 0;
        }
        let generation = pdb.metadata.generation.unwrap_or(0);
        let status = pdb.status.clone().unwrap_or_default();
        let same_disrupted = status.disrupted_pods.clone().unwrap_or_default() == disrupted;
        if status.current_healthy == Some(current_healthy)
            && status.desired_healthy == Some(desired_healthy)
            && status.expected_pods == Some(expected)
            && status.disruptions_allowed == Some(allowed)
            && same_disrupted
            && status.observed_generation == Some(generation)
            && conditions_are_up_to_date(pdb)
        {
            return Ok(());
        }
        let mut new = pdb.clone();
        let mut status = PodDisruptionBudgetStatus {
            current_healthy: Some(current_healthy),
            desired_healthy: Some(desired_healthy),
            expected_pods: Some(expected),
            disruptions_allowed: Some(allowed),
            disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
            observed_generation: Some(generation),
            conditions: status.conditions,
        };
        let (cond_status, reason) = if allowed > 0 {
            ("True", SUFFICIENT_PODS)
        } else {
            ("False", INSUFFICIENT_PODS)
        };
        set_condition(
            &mut status,
            cond_status,
            reason,
            String::new(),
            generation,
            now,
        );
        new.status = Some(status);
        self.client
            .update_status(&new)
            .await
            .map_err(|source| Error::UpdateStatus {
                pdb: key.to_owned(),
                source,
            })
    }

    /// Upstream's `failSafe`: no disruption allowed, condition reason `SyncFailed` with the
    /// error.
    async fn fail_safe(&self, key: &str, pdb: &PodDisruptionBudget, err: &Error) -> Result<()> {
        let mut new = pdb.clone();
        let mut status = new.status.take().unwrap_or_default();
        status.disruptions_allowed = Some(0);
        let observed = status.observed_generation.unwrap_or(0);
        set_condition(
            &mut status,
            "False",
            SYNC_FAILED,
            err.to_string(),
            observed,
            (self.clock)(),
        );
        new.status = Some(status);
        self.client
            .update_status(&new)
            .await
            .map_err(|source| Error::UpdateStatus {
                pdb: key.to_owned(),
                source,
            })
    }
}

/// Ready pods not being deleted and not recently evicted (`countHealthyPods`).
fn count_healthy_pods(
    pods: &[Arc<Pod>],
    disrupted: &BTreeMap<String, Time>,
    now: Timestamp,
) -> i32 {
    let timeout = SignedDuration::try_from(DELETION_TIMEOUT).unwrap_or_default();
    pods.iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            !disrupted
                .get(name)
                .is_some_and(|at| at.0.checked_add(timeout).is_ok_and(|end| end > now))
        })
        .filter(|pod| is_pod_ready(pod))
        .count() as i32
}

/// `apimeta.SetStatusCondition` of `DisruptionAllowed`: the transition time moves only
/// when the status changes.
fn set_condition(
    status: &mut PodDisruptionBudgetStatus,
    cond_status: &str,
    reason: &str,
    message: String,
    observed_generation: i64,
    now: Timestamp,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let existing = conditions
        .iter_mut()
        .find(|c| c.type_ == DISRUPTION_ALLOWED);
    match existing {
        Some(c) => {
            if c.status != cond_status {
                c.last_transition_time = Time(now);
            }
            c.status = cond_status.to_owned();
            c.reason = reason.to_owned();
            c.message = message;
            c.observed_generation = Some(observed_generation);
        }
        None => conditions.push(Condition {
            type_: DISRUPTION_ALLOWED.to_owned(),
            status: cond_status.to_owned(),
            reason: reason.to_owned(),
            message,
            observed_generation: Some(observed_generation),
            last_transition_time: Time(now),
        }),
    }
}

/// `pdbhelper.ConditionsAreUpToDate`.
fn conditions_are_up_to_date(pdb: &PodDisruptionBudget) -> bool {
    let generation = pdb.metadata.generation.unwrap_or(0);
    let Some(status) = pdb.status.as_ref() else {
        return false;
    };
    let Some(cond) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    else {
        return false;
    };
    if status.observed_generation != Some(generation)
        || cond.observed_generation != Some(generation)
    {
        return false;
    }
    if status.disruptions_allowed.unwrap_or(0) > 0 {
        cond.status == "True" && cond.reason == SUFFICIENT_PODS
    } else {
        cond.status == "False" && cond.reason == INSUFFICIENT_PODS
    }
}
