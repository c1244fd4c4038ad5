//! Reading the optional fields of Deployments and ReplicaSets the way the controller sees them.
//!
//! The Go types behind kube-controller-manager hold plain values or pointers the API server
//! always sets; the `k8s-openapi` types hold `Option`s. The rule used throughout this module:
//!
//! - where upstream dereferences a pointer the API server always defaults (`spec.replicas`,
//!   `spec.strategy.type`, `spec.strategy.rollingUpdate`), a missing value reads as the API
//!   server's default (1 replica, `RollingUpdate`, 25%/25%);
//! - where upstream handles `nil` itself (`maxSurge`/`maxUnavailable` → 0 in
//!   `ResolveFenceposts`, `progressDeadlineSeconds`, `revisionHistoryLimit`, the status
//!   pointers), a missing value means exactly what it means upstream;
//! - plain Go values (status counters, `minReadySeconds`, `paused`) read as their zero value.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// `spec.strategy.type` of a Deployment that replaces pods gradually.
pub const ROLLING_UPDATE_STRATEGY: &str = "RollingUpdate";
/// `spec.strategy.type` of a Deployment that deletes every old pod before creating new ones.
pub const RECREATE_STRATEGY: &str = "Recreate";
/// The API server's default `maxSurge` and `maxUnavailable` of a rolling update.
pub const DEFAULT_ROLLING_UPDATE_PERCENT: &str = "25%";

/// `spec.replicas` of a Deployment (API default 1).
pub fn deployment_replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `spec.strategy.type` of a Deployment (API default `RollingUpdate`).
pub fn strategy_type(d: &Deployment) -> &str {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .unwrap_or(ROLLING_UPDATE_STRATEGY)
}

/// `(maxSurge, maxUnavailable)` of a Deployment's rolling update. A missing `rollingUpdate`
/// block reads as the API default (25%, 25%); a missing field inside it stays `None`, which
/// [`resolve_fenceposts`](super::strategy::resolve_fenceposts) reads as 0 as upstream does.
pub fn rolling_update_params(d: &Deployment) -> (Option<IntOrString>, Option<IntOrString>) {
    let rolling = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    match rolling {
        Some(r) => (r.max_surge.clone(), r.max_unavailable.clone()),
        None => (
            Some(IntOrString::String(
                DEFAULT_ROLLING_UPDATE_PERCENT.to_owned(),
            )),
            Some(IntOrString::String(
                DEFAULT_ROLLING_UPDATE_PERCENT.to_owned(),
            )),
        ),
    }
}

/// `spec.progressDeadlineSeconds` of a Deployment (`None`: no deadline, as upstream).
pub fn progress_deadline_seconds(d: &Deployment) -> Option<i32> {
    d.spec.as_ref().and_then(|s| s.progress_deadline_seconds)
}

/// `spec.revisionHistoryLimit` of a Deployment (`None`: keep everything, as upstream).
pub fn revision_history_limit(d: &Deployment) -> Option<i32> {
    d.spec.as_ref().and_then(|s| s.revision_history_limit)
}

/// `spec.minReadySeconds` of a Deployment (0 when unset).
pub fn deployment_min_ready_seconds(d: &Deployment) -> i32 {
    d.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// `spec.paused` of a Deployment (false when unset).
pub fn is_paused(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false)
}

/// The Deployment's pod template (`None` when the spec is missing; callers read that as Go's
/// zero template).
pub fn deployment_template(d: &Deployment) -> Option<&PodTemplateSpec> {
    d.spec.as_ref().map(|s| &s.template)
}

/// The Deployment's status, if it has one.
pub fn deployment_status(d: &Deployment) -> Option<&DeploymentStatus> {
    d.status.as_ref()
}

/// `metadata.generation` (0 when unset).
pub fn generation(meta: &ObjectMeta) -> i64 {
    meta.generation.unwrap_or(0)
}

/// `metadata.annotations` value for `key`.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// `metadata.annotations`, created empty if missing, for in-place edits.
pub fn annotations_mut(meta: &mut ObjectMeta) -> &mut BTreeMap<String, String> {
    meta.annotations.get_or_insert_with(BTreeMap::new)
}

/// `spec.replicas` of a ReplicaSet (API default 1, also when the spec itself is missing).
pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Sets `spec.replicas` of a ReplicaSet, creating the spec if it is missing.
pub fn set_rs_replicas(rs: &mut ReplicaSet, replicas: i32) {
    rs.spec.get_or_insert_with(Default::default).replicas = Some(replicas);
}

/// `spec.minReadySeconds` of a ReplicaSet (0 when unset).
pub fn rs_min_ready_seconds(rs: &ReplicaSet) -> i32 {
    rs.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// `spec.template` of a ReplicaSet (`None` reads as Go's zero template).
pub fn rs_template(rs: &ReplicaSet) -> Option<&PodTemplateSpec> {
    rs.spec.as_ref().and_then(|s| s.template.as_ref())
}

/// `status.replicas` of a ReplicaSet: pods that exist (0 without a status).
pub fn rs_status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map_or(0, |s| s.replicas)
}

/// `status.readyReplicas` of a ReplicaSet.
pub fn rs_ready_replicas(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

/// `status.availableReplicas` of a ReplicaSet.
pub fn rs_available_replicas(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// `status.observedGeneration` of a ReplicaSet.
pub fn rs_observed_generation(rs: &ReplicaSet) -> i64 {
    rs.status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .unwrap_or(0)
}

/// `status.terminatingReplicas` of a ReplicaSet (`None`: not reported).
pub fn rs_terminating_replicas(rs: &ReplicaSet) -> Option<i32> {
    rs.status.as_ref().and_then(|s| s.terminating_replicas)
}

/// `namespace/name` of an object, for error messages and logs.
pub fn object_key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    )
}

/// `metadata.name` of an object (empty when unset).
pub fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
    use kcm_testing::{ReplicaSetBuilder, WorkloadBuilder};

    #[test]
    fn missing_fields_read_as_api_defaults() {
        let d = Deployment::default();
        assert_eq!(deployment_replicas(&d), 1);
        assert_eq!(strategy_type(&d), ROLLING_UPDATE_STRATEGY);
        assert_eq!(
            rolling_update_params(&d),
            (
                Some(IntOrString::String("25%".into())),
                Some(IntOrString::String("25%".into()))
            )
        );
        assert_eq!(progress_deadline_seconds(&d), None);
        assert_eq!(revision_history_limit(&d), None);
        let rs = ReplicaSet::default();
        assert_eq!(rs_replicas(&rs), 1);
        assert_eq!(rs_status_replicas(&rs), 0);
    }

    #[test]
    fn missing_fields_inside_rolling_update_stay_none() {
        let d = Deployment {
            spec: Some(DeploymentSpec {
                strategy: Some(DeploymentStrategy {
                    type_: Some(RECREATE_STRATEGY.into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(IntOrString::Int(3)),
                        max_unavailable: None,
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(strategy_type(&d), RECREATE_STRATEGY);
        assert_eq!(rolling_update_params(&d), (Some(IntOrString::Int(3)), None));
    }

    #[test]
    fn set_rs_replicas_creates_the_spec() {
        let mut rs = ReplicaSet::default();
        set_rs_replicas(&mut rs, 4);
        assert_eq!(rs_replicas(&rs), 4);
        let mut rs = ReplicaSetBuilder::default().replicas(2).build();
        set_rs_replicas(&mut rs, 0);
        assert_eq!(rs_replicas(&rs), 0);
    }
}
