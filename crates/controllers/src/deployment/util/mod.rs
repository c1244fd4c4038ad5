//! The pure decision layer of the Deployment controller, as upstream
//! `pkg/controller/deployment/util` plus the arithmetic of `sync.go`, `rolling.go`,
//! `recreate.go`, `rollback.go` and `progress.go`.
//!
//! Nothing here talks to the API server or reads the clock: functions take the Deployment,
//! its ReplicaSets (as `&[&ReplicaSet]`, the order the caller got them in) and `now` where time
//! matters, and return the sizes, names, annotations, conditions and statuses the controller
//! should write. Missing optional fields read as described in [`accessors`].
//!
//! A file named `X_plan` holds the decisions of upstream's `X.go`; the controller's own `X.rs`
//! (one level up) applies them through the API. No two files of the controller share a name,
//! so a name says which side a function is on.
//!
//! # Where each step of `syncDeployment` lives
//!
//! | upstream | here |
//! |---|---|
//! | `getAllReplicaSetsAndSyncRevision` | [`find::find_new_replica_set`], [`find::find_old_replica_sets`], [`annotations::next_revision`], [`new_replica_set::sync_existing_new_replica_set`], [`new_replica_set::record_found_new_replica_set`] |
//! | create the new ReplicaSet | [`new_replica_set::new_replica_set`], then [`new_replica_set::record_new_replica_set_created`]; on AlreadyExists [`new_replica_set::is_own_new_replica_set`] or [`new_replica_set::bump_collision_count`]; on failure [`new_replica_set::record_new_replica_set_create_failure`] |
//! | `checkPausedConditions` | [`progress_plan::check_paused_conditions`] |
//! | `getRollbackTo` / `rollback` | [`rollback_plan::rollback_to`], [`rollback_plan::rollback`] |
//! | `isScalingEvent` / `sync` → `scale` | [`scale::is_scaling_event`], [`scale::scale`] |
//! | `scaleReplicaSet(AndRecordEvent)` | [`scale::scaled_replica_set`], [`scale::scaling_event_message`] |
//! | `rolloutRolling` | [`rolling_plan::reconcile_new_replica_set`], [`rolling_plan::reconcile_old_replica_sets`] |
//! | `rolloutRecreate` | [`recreate_plan::scale_down_old_replica_sets_for_recreate`], [`recreate_plan::old_pods_running`] |
//! | `cleanupDeployment` | [`cleanup::old_replica_sets_to_delete`] (only once [`progress_plan::deployment_complete`]) |
//! | `syncDeploymentStatus` / `calculateStatus` | [`status::calculate_status`], compared with [`status::deployment_status_equal`] |
//! | `syncRolloutStatus` / `requeueStuckDeployment` | [`progress_plan::sync_rollout_status`], [`progress_plan::requeue_stuck_deployment`] |
//!
//! The pod-template hash ([`kcm_machinery::controller::hash`], shared with the DaemonSet
//! controller) is upstream's, byte for byte: FNV-32a over go-spew's
//! rendering of the Go `v1.PodTemplateSpec`, so ReplicaSet names match kube-controller-manager's.

pub mod accessors;
pub mod annotations;
pub mod cleanup;
pub mod conditions;
pub mod counts;
pub mod find;
pub mod new_replica_set;
pub mod progress_plan;
pub mod recreate_plan;
pub mod rollback_plan;
pub mod rolling_plan;
pub mod scale;
pub mod sort;
pub mod status;
pub mod strategy;
pub mod template;

#[cfg(test)]
mod test_support;
