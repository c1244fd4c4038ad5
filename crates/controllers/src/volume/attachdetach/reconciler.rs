//! What the attach/detach reconciler does on each pass: detach what no pod needs and the node no longer mounts, attach what pods need (upstream `reconciler/reconciler.go`).

use std::collections::BTreeSet;

use tokio::time::{Duration, Instant};

use super::cache::{ActualStateOfWorld, DesiredStateOfWorld, VolumeToAttach};

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
    },
}

/// One reconcile pass, as upstream's `reconciler.reconcile`: detaches first, so that a volume
/// moving between nodes frees its old node before the new attach, then attaches.
///
/// `node` returns a node's view, `None` for a node gone (treated as unhealthy, not mounting);
/// `pending` says whether an operation is already running for (volume, node). Detach marks the
/// volume no longer reported as attached in `asw`; the caller updates the node's status before
/// starting it.
pub fn reconcile(
    dsw: &DesiredStateOfWorld,
    asw: &mut ActualStateOfWorld,
    node: impl Fn(&str) -> Option<NodeView>,
    pending: impl Fn(&str, &str) -> bool,
    now: Instant,
) -> Vec<Operation> {
    let mut ops = Vec::new();
    let attached: Vec<_> = asw.attached_volumes().cloned().collect();
    for v in attached {
        if dsw.volume_exists(&v.volume_name, &v.node_name) || pending(&v.volume_name, &v.node_name)
        {
            continue;
        }
        let elapsed = asw.set_detach_request_time(&v.volume_name, &v.node_name, now);
        let view = node(&v.node_name).unwrap_or_default();
        let force = !view.healthy && elapsed > MAX_WAIT_FOR_UNMOUNT;
        let mounted = view.volumes_in_use.contains(&v.volume_name);
        if mounted && !force && !view.out_of_service {
            continue;
        }
        asw.remove_from_report(&v.volume_name, &v.node_name);
        ops.push(Operation::Detach {
            volume_name: v.volume_name,
            driver: v.driver,
            volume_handle: v.volume_handle,
            node_name: v.node_name,
        });
    }
    for v in dsw.volumes_to_attach() {
        if asw.is_attached(&v.volume_name, &v.node_name) {
            asw.reset_detach_request_time(&v.volume_name, &v.node_name);
            continue;
        }
        if pending(&v.volume_name, &v.node_name) {
            continue;
        }
        ops.push(Operation::Attach(v.clone()));
    }
    ops
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
        dsw.add_pod("ns/p", "n1", "d", "h", "pv");
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
        dsw.add_pod("ns/p", "n1", "d", "h", "pv");
        let mut asw = ActualStateOfWorld::default();
        let now = Instant::now();
        let ops = reconcile(&dsw, &mut asw, |_| Some(healthy(&[])), |_, _| false, now);
        assert!(
            matches!(&ops[..], [Operation::Attach(v)] if v.node_name == "n1" && v.pv_name == "pv")
        );
        let ops = reconcile(&dsw, &mut asw, |_| Some(healthy(&[])), |_, _| true, now);
        assert!(
            ops.is_empty(),
            "an attach already pending is not started again"
        );
    }

    #[test]
    fn a_volume_no_pod_needs_and_not_in_use_is_detached() {
        let (mut dsw, mut asw, name) = attached_world();
        let now = Instant::now();
        assert!(reconcile(&dsw, &mut asw, |_| Some(healthy(&[])), |_, _| false, now).is_empty());
        dsw.delete_pod("ns/p", "n1");
        let ops = reconcile(&dsw, &mut asw, |_| Some(healthy(&[])), |_, _| false, now);
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
                &dsw,
                &mut asw,
                |_| Some(view.clone()),
                |_, _| false,
                t0
            )),
            0
        );
        let late = t0 + MAX_WAIT_FOR_UNMOUNT + Duration::from_secs(1);
        assert_eq!(
            detaches(&reconcile(
                &dsw,
                &mut asw,
                |_| Some(view.clone()),
                |_, _| false,
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
                &dsw,
                &mut asw,
                |_| Some(view.clone()),
                |_, _| false,
                t0
            )),
            0
        );
        let early = t0 + MAX_WAIT_FOR_UNMOUNT;
        assert_eq!(
            detaches(&reconcile(
                &dsw,
                &mut asw,
                |_| Some(view.clone()),
                |_, _| false,
                early
            )),
            0
        );
        let late = early + Duration::from_secs(1);
        assert_eq!(
            detaches(&reconcile(
                &dsw,
                &mut asw,
                |_| Some(view.clone()),
                |_, _| false,
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
                &dsw,
                &mut asw,
                |_| Some(view.clone()),
                |_, _| false,
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
        reconcile(&dsw, &mut asw, |_| Some(view.clone()), |_, _| false, t0);
        dsw.add_pod("ns/q", "n1", "d", "h", "pv");
        reconcile(
            &dsw,
            &mut asw,
            |_| Some(view.clone()),
            |_, _| false,
            t0 + Duration::from_secs(60),
        );
        dsw.delete_pod("ns/q", "n1");
        let t1 = t0 + MAX_WAIT_FOR_UNMOUNT + Duration::from_secs(10);
        assert_eq!(
            detaches(&reconcile(
                &dsw,
                &mut asw,
                |_| Some(view.clone()),
                |_, _| false,
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
