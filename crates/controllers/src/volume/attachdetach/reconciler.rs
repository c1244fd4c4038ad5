//! What the attach/detach reconciler does on each pass: detach what no pod needs and the node no longer mounts, attach what pods need (upstream `reconciler/reconciler.go`).

use std::collections::BTreeSet;

use tokio::time::{Duration, Instant};

use super::cache::{ActualStateOfWorld, DesiredStateOfWorld, VolumeToAttach};
use super::multi_attach::MultiAttachError;

/// How long a detach waits for the node to unmount before an unhealthy node's volume is forced
/// off, upstream's `reconcilerMaxWaitForUnmountDuration`.
pub const MAX_WAIT_FOR_UNMOUNT: Duration = Duration::from_secs(6 * 60);

/// The default of `--attach-detach-reconcile-sync-period`.
pub const DEFAULT_RECONCILE_SYNC_PERIOD: Duration = Duration::from_secs(60);

/// Upstream's lower bound on `--attach-detach-reconcile-sync-period`.
pub const MIN_RECONCILE_SYNC_PERIOD: Duration = Duration::from_secs(1);

/// What a node's status and taints say, as the reconciler reads them.
#[derive(Clone, Debug, Default)]
pub struct NodeView {
    /// `status.volumesInUse`: volumes the kubelet still has mounted.
    pub volumes_in_use: BTreeSet<String>,
    /// Whether the node's `Ready` condition is `True` (upstream `nodeIsHealthy`).
    pub healthy: bool,
    /// Whether the node carries the `node.kubernetes.io/out-of-service` taint.
    pub out_of_service: bool,
}

/// Why a detach skips the check that the node has unmounted the volume (the `reason` label
/// of `attach_detach_controller_attachdetach_controller_forced_detaches`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ForceDetachReason {
    /// Detach was wanted for longer than [`MAX_WAIT_FOR_UNMOUNT`], upstream's
    /// `ForceDetachReasonTimeout`.
    Timeout,
    /// The node carries the `node.kubernetes.io/out-of-service` taint, upstream's
    /// `ForceDetachReasonOutOfService`.
    OutOfService,
}

impl ForceDetachReason {
    /// The label value, as upstream's constants.
    pub fn as_str(self) -> &'static str {
        match self {
            ForceDetachReason::Timeout => "timeout",
            ForceDetachReason::OutOfService => "out-of-service",
        }
    }
}

/// An operation the reconciler starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Create the VolumeAttachment and wait for `status.attached`.
    Attach(VolumeToAttach),
    /// Delete the VolumeAttachment of `volume_name` on `node_name` (already dropped from the
    /// node's reported `volumesAttached`).
    Detach {
        /// The unique volume name.
        volume_name: String,
        /// The CSI driver.
        driver: String,
        /// The CSI volume handle.
        volume_handle: String,
        /// The node.
        node_name: String,
        /// Set when the detach does not wait for the node to unmount (upstream's
        /// `verifySafeToDetach` false), with why.
        forced: Option<ForceDetachReason>,
    },
}

/// Whether an operation is running for a volume (on a node, or on any node), as the reconciler
/// asks upstream's `nestedpendingoperations`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OperationState {
    /// Nothing runs and nothing backs off: an operation may start.
    #[default]
    Idle,
    /// An attach or detach runs.
    Running,
    /// The last operation failed and its back-off has not passed.
    BackingOff,
}

/// What one reconciler pass decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// The operations to start, detaches first.
    pub operations: Vec<Operation>,
    /// Volumes not attached because another node holds them exclusively, each reported once
    /// per (volume, node).
    pub multi_attach_errors: Vec<MultiAttachError>,
}

/// One reconcile pass, as upstream's `reconciler.reconcile`: detaches first, so that a volume
/// moving between nodes frees its old node before the new attach, then attaches.
///
/// `node` returns a node's view, `None` for a node gone (treated as unhealthy, not mounting);
/// `pending(volume, node)` says whether an operation runs or backs off for the volume on
/// `node`, or (`None`) on any node: operations of a volume that may not be attached to several
/// nodes are keyed by the volume alone, as upstream's. Detach marks the volume no longer
/// reported as attached in `asw`; the caller updates the node's status before starting it. A
/// volume that may be attached to one node only and is attached (or still detaching)
/// elsewhere is not attached; its Multi-Attach error is returned the first time.
pub fn reconcile(
    dsw: &mut DesiredStateOfWorld,
    asw: &mut ActualStateOfWorld,
    node: impl Fn(&str) -> Option<NodeView>,
    pending: impl Fn(&str, Option<&str>) -> OperationState,
    now: Instant,
) -> Pass {
    let mut pass = Pass::default();
    // Operations started by this pass, keyed as `pending` is: (volume, Some(node)) for
    // volumes that may be attached to several nodes, (volume, None) for the others.
    let mut started: BTreeSet<(String, Option<String>)> = BTreeSet::new();
    let key =
        |volume: &str, node: &str, multi: bool| (volume.to_owned(), multi.then(|| node.to_owned()));
    let attached: Vec<_> = asw.attached_volumes().cloned().collect();
    for v in attached {
        if dsw.volume_exists(&v.volume_name, &v.node_name) {
            continue;
        }
        let k = key(&v.volume_name, &v.node_name, v.multi_attach_allowed);
        if started.contains(&k) || pending(&v.volume_name, k.1.as_deref()) != OperationState::Idle {
            continue;
        }
        let elapsed = asw.set_detach_request_time(&v.volume_name, &v.node_name, now);
        let view = node(&v.node_name).unwrap_or_default();
        let timeout = elapsed > MAX_WAIT_FOR_UNMOUNT;
        let force = !view.healthy && timeout;
        let mounted = view.volumes_in_use.contains(&v.volume_name);
        if mounted && !force && !view.out_of_service {
            continue;
        }
        asw.remove_from_report(&v.volume_name, &v.node_name);
        let forced = if timeout {
            Some(ForceDetachReason::Timeout)
        } else if view.out_of_service {
            Some(ForceDetachReason::OutOfService)
        } else {
            None
        };
        started.insert(k);
        pass.operations.push(Operation::Detach {
            volume_name: v.volume_name,
            driver: v.driver,
            volume_handle: v.volume_handle,
            node_name: v.node_name,
            forced,
        });
    }
    let desired: Vec<VolumeToAttach> = dsw.volumes_to_attach().cloned().collect();
    for v in desired {
        let k = key(&v.volume_name, &v.node_name, v.multi_attach_allowed);
        let state = pending(&v.volume_name, k.1.as_deref());
        if started.contains(&k) || state == OperationState::Running {
            continue;
        }
        if asw.is_attached(&v.volume_name, &v.node_name) {
            asw.reset_detach_request_time(&v.volume_name, &v.node_name);
            continue;
        }
        if !v.multi_attach_allowed {
            let nodes = asw.nodes_for_attached_volume(&v.volume_name);
            if !nodes.is_empty() {
                if !v.multi_attach_error_reported {
                    pass.multi_attach_errors
                        .push(MultiAttachError::new(dsw, &v, &nodes));
                    dsw.set_multi_attach_error(&v.volume_name, &v.node_name);
                }
                continue;
            }
        }
        if state == OperationState::BackingOff {
            continue;
        }
        started.insert(k);
        pass.operations.push(Operation::Attach(v));
    }
    pass
}

/// Upstream's check of `--attach-detach-reconcile-sync-period`.
pub fn validate_reconcile_sync_period(period: Duration) -> std::result::Result<(), String> {
    if period < MIN_RECONCILE_SYNC_PERIOD {
        return Err(
            "duration time must be greater than one second as set via command line option reconcile-sync-loop-period"
                .to_owned(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle(_: &str, _: Option<&str>) -> OperationState {
        OperationState::Idle
    }

    fn running(_: &str, _: Option<&str>) -> OperationState {
        OperationState::Running
    }

    /// The operations of one pass.
    fn reconcile(
        dsw: &mut DesiredStateOfWorld,
        asw: &mut ActualStateOfWorld,
        node: impl Fn(&str) -> Option<NodeView>,
        pending: impl Fn(&str, Option<&str>) -> OperationState,
        now: Instant,
    ) -> Vec<Operation> {
        super::reconcile(dsw, asw, node, pending, now).operations
    }

    fn healthy(in_use: &[&str]) -> NodeView {
        NodeView {
            volumes_in_use: in_use.iter().map(|s| s.to_string()).collect(),
            healthy: true,
            out_of_service: false,
        }
    }

    /// One pod on n1 needing volume h of driver d, attached.
    fn attached_world() -> (DesiredStateOfWorld, ActualStateOfWorld, String) {
        let mut dsw = DesiredStateOfWorld::default();
        dsw.add_pod("ns/p", "n1", "d", "h", "pv", true);
        let v = dsw.volumes_to_attach().next().cloned().expect("desired");
        let mut asw = ActualStateOfWorld::default();
        asw.mark_attached(&v);
        (dsw, asw, v.volume_name)
    }

    fn detaches(ops: &[Operation]) -> usize {
        ops.iter()
            .filter(|o| matches!(o, Operation::Detach { .. }))
            .count()
    }

    #[test]
    fn a_desired_volume_not_attached_is_attached_once() {
        let mut dsw = DesiredStateOfWorld::default();
        dsw.add_pod("ns/p", "n1", "d", "h", "pv", true);
        let mut asw = ActualStateOfWorld::default();
        let now = Instant::now();
        let ops = reconcile(&mut dsw, &mut asw, |_| Some(healthy(&[])), idle, now);
        assert!(
            matches!(&ops[..], [Operation::Attach(v)] if v.node_name == "n1" && v.pv_name == "pv")
        );
        let ops = reconcile(&mut dsw, &mut asw, |_| Some(healthy(&[])), running, now);
        assert!(
            ops.is_empty(),
            "an attach already pending is not started again"
        );
    }

    #[test]
    fn a_volume_no_pod_needs_and_not_in_use_is_detached() {
        let (mut dsw, mut asw, name) = attached_world();
        let now = Instant::now();
        assert!(reconcile(&mut dsw, &mut asw, |_| Some(healthy(&[])), idle, now).is_empty());
        dsw.delete_pod("ns/p", "n1");
        let ops = reconcile(&mut dsw, &mut asw, |_| Some(healthy(&[])), idle, now);
        assert_eq!(detaches(&ops), 1);
        assert!(
            asw.volumes_to_report("n1").is_empty(),
            "dropped from volumesAttached before detach"
        );
        assert!(
            asw.is_attached(&name, "n1"),
            "attached until the detach completes"
        );
    }

    #[test]
    fn a_mounted_volume_on_a_healthy_node_waits_past_the_max_wait() {
        let (mut dsw, mut asw, name) = attached_world();
        dsw.delete_pod("ns/p", "n1");
        let t0 = Instant::now();
        let view = healthy(&[&name]);
        assert_eq!(
            detaches(&reconcile(
                &mut dsw,
                &mut asw,
                |_| Some(view.clone()),
                idle,
                t0
            )),
            0
        );
        let late = t0 + MAX_WAIT_FOR_UNMOUNT + Duration::from_secs(1);
        assert_eq!(
            detaches(&reconcile(
                &mut dsw,
                &mut asw,
                |_| Some(view.clone()),
                idle,
                late
            )),
            0
        );
        assert_eq!(asw.volumes_to_report("n1"), vec![name]);
    }

    #[test]
    fn a_mounted_volume_on_an_unhealthy_node_is_forced_off_after_the_max_wait() {
        let (mut dsw, mut asw, name) = attached_world();
        dsw.delete_pod("ns/p", "n1");
        let view = NodeView {
            healthy: false,
            ..healthy(&[&name])
        };
        let t0 = Instant::now();
        assert_eq!(
            detaches(&reconcile(
                &mut dsw,
                &mut asw,
                |_| Some(view.clone()),
                idle,
                t0
            )),
            0
        );
        let early = t0 + MAX_WAIT_FOR_UNMOUNT;
        assert_eq!(
            detaches(&reconcile(
                &mut dsw,
                &mut asw,
                |_| Some(view.clone()),
                idle,
                early
            )),
            0
        );
        let late = early + Duration::from_secs(1);
        assert_eq!(
            detaches(&reconcile(
                &mut dsw,
                &mut asw,
                |_| Some(view.clone()),
                idle,
                late
            )),
            1
        );
    }

    #[test]
    fn a_mounted_volume_on_an_out_of_service_node_is_detached_at_once() {
        let (mut dsw, mut asw, name) = attached_world();
        dsw.delete_pod("ns/p", "n1");
        let view = NodeView {
            out_of_service: true,
            ..healthy(&[&name])
        };
        assert_eq!(
            detaches(&reconcile(
                &mut dsw,
                &mut asw,
                |_| Some(view.clone()),
                idle,
                Instant::now()
            )),
            1
        );
    }

    #[test]
    fn a_volume_wanted_again_restarts_the_unmount_wait() {
        let (mut dsw, mut asw, name) = attached_world();
        dsw.delete_pod("ns/p", "n1");
        let view = NodeView {
            healthy: false,
            ..healthy(&[&name])
        };
        let t0 = Instant::now();
        reconcile(&mut dsw, &mut asw, |_| Some(view.clone()), idle, t0);
        dsw.add_pod("ns/q", "n1", "d", "h", "pv", true);
        reconcile(
            &mut dsw,
            &mut asw,
            |_| Some(view.clone()),
            idle,
            t0 + Duration::from_secs(60),
        );
        dsw.delete_pod("ns/q", "n1");
        let t1 = t0 + MAX_WAIT_FOR_UNMOUNT + Duration::from_secs(10);
        assert_eq!(
            detaches(&reconcile(
                &mut dsw,
                &mut asw,
                |_| Some(view.clone()),
                idle,
                t1
            )),
            0
        );
    }

    #[test]
    fn the_reconcile_sync_period_must_be_at_least_one_second() {
        assert!(validate_reconcile_sync_period(Duration::from_millis(999)).is_err());
        assert!(validate_reconcile_sync_period(Duration::from_secs(1)).is_ok());
        assert!(validate_reconcile_sync_period(DEFAULT_RECONCILE_SYNC_PERIOD).is_ok());
    }
}
