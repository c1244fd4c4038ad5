//! Per-node health as the controller observed it, judged by its own clock (upstream's
//! `nodeHealthMap` and `tryUpdateNodeHealth`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use tokio::time::Instant;

use super::taints::{
    CONDITION_UNKNOWN, NODE_DISK_PRESSURE, NODE_MEMORY_PRESSURE, NODE_PID_PRESSURE, NODE_READY,
    node_condition,
};

/// Reason of a kubelet-owned condition the controller set Unknown after a silence.
pub const REASON_NODE_STATUS_UNKNOWN: &str = "NodeStatusUnknown";
/// Message of a kubelet-owned condition the controller set Unknown after a silence.
pub const MESSAGE_NODE_STATUS_UNKNOWN: &str = "Kubelet stopped posting node status.";
/// Reason of a kubelet-owned condition that never was posted.
pub const REASON_NODE_STATUS_NEVER_UPDATED: &str = "NodeStatusNeverUpdated";
/// Message of a kubelet-owned condition that never was posted.
pub const MESSAGE_NODE_STATUS_NEVER_UPDATED: &str = "Kubelet never posted node status.";

/// The kubelet-owned conditions set Unknown when the node goes silent (NetworkUnavailable is
/// the control plane's and is left alone).
pub const KUBELET_CONDITIONS: [&str; 4] = [
    NODE_READY,
    NODE_MEMORY_PRESSURE,
    NODE_DISK_PRESSURE,
    NODE_PID_PRESSURE,
];

/// What the controller last saw of a node, with *its own* times of observation (never the
/// node's timestamps, so clock skew cannot fake health), as upstream's `nodeHealthData`.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeHealth {
    /// When the controller last saw a new heartbeat (Ready condition or Lease renewal).
    pub probe_timestamp: Instant,
    /// When the controller last saw the Ready condition change.
    pub ready_transition_timestamp: Instant,
    /// The Ready condition last seen (or written by the controller); `None` if the node has
    /// none.
    pub ready: Option<NodeCondition>,
    /// The Lease renewTime last seen.
    pub lease_renew_time: Option<MicroTime>,
}

/// The grace periods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GracePeriods {
    /// For a node that never posted a Ready condition (`--node-startup-grace-period`).
    pub startup: Duration,
    /// For a node that did (`--node-monitor-grace-period`).
    pub monitor: Duration,
}

/// The outcome of [`observe_node_health`].
#[derive(Clone, Debug, PartialEq)]
pub struct HealthObservation {
    /// The health to remember.
    pub health: NodeHealth,
    /// The grace period the node is entitled to.
    pub grace_period: Duration,
    /// The Ready condition as observed on the node (a synthetic Unknown one if it has none).
    pub observed_ready: NodeCondition,
    /// The Ready condition after this pass (what the controller writes if `new_status`).
    pub current_ready: Option<NodeCondition>,
    /// The status to write through `nodes/status`, when the node went silent and its Ready
    /// condition changes.
    pub new_status: Option<NodeStatus>,
}

/// Judges one node: updates the saved health from the node's Ready condition and Lease, and
/// when nothing new was seen for longer than the grace period, sets the kubelet-owned
/// conditions to Unknown, as upstream's `tryUpdateNodeHealth`. `now` is the controller's
/// monotonic clock, `wall_now` the timestamp written into conditions.
pub fn observe_node_health(
    node: &Node,
    lease_renew_time: Option<&MicroTime>,
    saved: Option<&NodeHealth>,
    grace: GracePeriods,
    now: Instant,
    wall_now: jiff::Timestamp,
) -> HealthObservation {
    let current_ready = node_condition(node, NODE_READY).cloned();
    let creation = node.metadata.creation_timestamp.clone();
    let mut health = saved.cloned();
    let (observed_ready, grace_period) = match &current_ready {
        None => {
            // Never posted: judged from the creation time, on the controller's clock.
            let since_creation = creation
                .as_ref()
                .map(|c| wall_now.duration_since(c.0))
                .and_then(|d| Duration::try_from(d).ok())
                .unwrap_or_default();
            let created_at = now.checked_sub(since_creation).unwrap_or(now);
            match &mut health {
                Some(h) => h.ready = None,
                None => {
                    health = Some(NodeHealth {
                        probe_timestamp: created_at,
                        ready_transition_timestamp: created_at,
                        ready: None,
                        lease_renew_time: None,
                    });
                }
            }
            (
                NodeCondition {
                    type_: NODE_READY.to_owned(),
                    status: CONDITION_UNKNOWN.to_owned(),
                    last_heartbeat_time: creation.clone(),
                    last_transition_time: creation.clone(),
                    ..NodeCondition::default()
                },
                grace.startup,
            )
        }
        Some(c) => (c.clone(), grace.monitor),
    };

    let fresh = |ready: Option<NodeCondition>, transition: Instant| NodeHealth {
        probe_timestamp: now,
        ready_transition_timestamp: transition,
        ready,
        lease_renew_time: None,
    };
    let saved_lease = health.as_ref().and_then(|h| h.lease_renew_time.clone());
    let mut health = match health {
        None => fresh(current_ready.clone(), now),
        Some(h) => match (&h.ready, &current_ready) {
            (None, Some(_)) | (Some(_), None) => fresh(current_ready.clone(), now),
            (Some(saved_c), Some(cur))
                if saved_c.last_heartbeat_time != cur.last_heartbeat_time =>
            {
                let transition = if saved_c.last_transition_time != cur.last_transition_time {
                    now
                } else {
                    h.ready_transition_timestamp
                };
                fresh(current_ready.clone(), transition)
            }
            _ => h,
        },
    };
    health.lease_renew_time = saved_lease.clone();
    // A renewed Lease is a heartbeat too.
    if let Some(observed) = lease_renew_time {
        let renewed = match &saved_lease {
            None => true,
            Some(saved) => saved.0 < observed.0,
        };
        if renewed {
            health.lease_renew_time = Some(observed.clone());
            health.probe_timestamp = now;
        }
    }

    let mut observation = HealthObservation {
        grace_period,
        observed_ready: observed_ready.clone(),
        current_ready: current_ready.clone(),
        new_status: None,
        health: health.clone(),
    };
    if now <= health.probe_timestamp + grace_period {
        return observation;
    }
    let mut status = node.status.clone().unwrap_or_default();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let wall = Time(wall_now);
    for type_ in KUBELET_CONDITIONS {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            None => conditions.push(NodeCondition {
                type_: type_.to_owned(),
                status: CONDITION_UNKNOWN.to_owned(),
                reason: Some(REASON_NODE_STATUS_NEVER_UPDATED.to_owned()),
                message: Some(MESSAGE_NODE_STATUS_NEVER_UPDATED.to_owned()),
                last_heartbeat_time: creation.clone(),
                last_transition_time: Some(wall.clone()),
            }),
            Some(c) if c.status != CONDITION_UNKNOWN => {
                c.status = CONDITION_UNKNOWN.to_owned();
                c.reason = Some(REASON_NODE_STATUS_UNKNOWN.to_owned());
                c.message = Some(MESSAGE_NODE_STATUS_UNKNOWN.to_owned());
                c.last_transition_time = Some(wall.clone());
            }
            Some(_) => {}
        }
    }
    let new_ready = conditions.iter().find(|c| c.type_ == NODE_READY).cloned();
    if new_ready.as_ref() != Some(&observed_ready) {
        observation.current_ready = new_ready;
        observation.new_status = Some(status);
    }
    observation
}

/// The health to remember once the status of [`HealthObservation::new_status`] was written.
pub fn after_status_written(observation: &HealthObservation, now: Instant) -> NodeHealth {
    NodeHealth {
        probe_timestamp: observation.health.probe_timestamp,
        ready_transition_timestamp: now,
        ready: observation.current_ready.clone(),
        lease_renew_time: observation.health.lease_renew_time.clone(),
    }
}

#[cfg(test)]
mod tests {
    use kcm_testing::{MetaBuilder, node_condition};

    use super::*;

    const GRACE: GracePeriods = GracePeriods {
        startup: Duration::from_secs(60),
        monitor: Duration::from_secs(50),
    };

    fn ts(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_700_000_000 + s).expect("timestamp")
    }

    fn cond(type_: &str, status: &str, heartbeat: i64) -> NodeCondition {
        node_condition(type_, status)
            .heartbeat(ts(heartbeat))
            .transitioned_at(ts(0))
            .build()
    }

    fn node(conditions: Vec<NodeCondition>) -> Node {
        kcm_testing::node("n1")
            .created_at(ts(0))
            .conditions(conditions)
            .build()
    }

    fn healthy(heartbeat: i64) -> Node {
        node(vec![
            cond("Ready", "True", heartbeat),
            cond("MemoryPressure", "False", heartbeat),
            cond("DiskPressure", "False", heartbeat),
            cond("PIDPressure", "False", heartbeat),
            cond("NetworkUnavailable", "False", heartbeat),
        ])
    }

    #[tokio::test(start_paused = true)]
    async fn silent_node_goes_unknown_after_the_monitor_grace_period() {
        let start = Instant::now();
        let n = healthy(0);
        let first = observe_node_health(&n, None, None, GRACE, start, ts(0));
        assert_eq!(first.grace_period, GRACE.monitor);
        assert!(first.new_status.is_none());
        // Exactly at the grace period: still fine (strictly after is required).
        let at = observe_node_health(
            &n,
            None,
            Some(&first.health),
            GRACE,
            start + GRACE.monitor,
            ts(50),
        );
        assert!(at.new_status.is_none());
        let after = observe_node_health(
            &n,
            None,
            Some(&at.health),
            GRACE,
            start + GRACE.monitor + Duration::from_secs(1),
            ts(51),
        );
        let status = after.new_status.expect("status written");
        let conditions = status.conditions.expect("conditions");
        for type_ in KUBELET_CONDITIONS {
            let c = conditions.iter().find(|c| c.type_ == type_).expect(type_);
            assert_eq!(c.status, "Unknown", "{type_}");
            assert_eq!(c.reason.as_deref(), Some("NodeStatusUnknown"), "{type_}");
            assert_eq!(
                c.message.as_deref(),
                Some("Kubelet stopped posting node status."),
                "{type_}"
            );
            assert_eq!(c.last_transition_time, Some(Time(ts(51))), "{type_}");
            assert_eq!(c.last_heartbeat_time, Some(Time(ts(0))), "{type_}");
        }
        let network = conditions
            .iter()
            .find(|c| c.type_ == "NetworkUnavailable")
            .expect("network");
        assert_eq!(network.status, "False", "control-plane condition untouched");
        assert_eq!(after.observed_ready.status, "True");
        assert_eq!(after.current_ready.expect("ready").status, "Unknown");
    }

    #[tokio::test(start_paused = true)]
    async fn new_heartbeats_and_lease_renewals_keep_the_node_healthy() {
        let start = Instant::now();
        let first = observe_node_health(&healthy(0), None, None, GRACE, start, ts(0));
        // The node posts a new heartbeat at 40s: probe time moves to the controller's now.
        let t40 = start + Duration::from_secs(40);
        let second =
            observe_node_health(&healthy(40), None, Some(&first.health), GRACE, t40, ts(40));
        assert_eq!(second.health.probe_timestamp, t40);
        // Only the Lease moves afterwards.
        let t80 = start + Duration::from_secs(80);
        let lease = MicroTime(ts(80));
        let third = observe_node_health(
            &healthy(40),
            Some(&lease),
            Some(&second.health),
            GRACE,
            t80,
            ts(80),
        );
        assert_eq!(third.health.probe_timestamp, t80);
        assert!(third.new_status.is_none());
        // The same Lease seen again is no heartbeat: at 131s the node is Unknown.
        let t131 = start + Duration::from_secs(131);
        let fourth = observe_node_health(
            &healthy(40),
            Some(&lease),
            Some(&third.health),
            GRACE,
            t131,
            ts(131),
        );
        assert!(fourth.new_status.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn node_that_never_posted_gets_the_startup_grace_period() {
        let start = Instant::now();
        let n = node(vec![]);
        // Created 30s before the controller first sees it.
        let first = observe_node_health(&n, None, None, GRACE, start, ts(30));
        assert_eq!(first.grace_period, GRACE.startup);
        assert!(first.new_status.is_none());
        let t = start + Duration::from_secs(29);
        let still = observe_node_health(&n, None, Some(&first.health), GRACE, t, ts(59));
        assert!(still.new_status.is_none(), "within 60s of creation");
        let t = start + Duration::from_secs(31);
        let gone = observe_node_health(&n, None, Some(&still.health), GRACE, t, ts(61));
        let conditions = gone
            .new_status
            .expect("written")
            .conditions
            .expect("conditions");
        assert_eq!(conditions.len(), 4);
        assert!(conditions.iter().all(|c| c.status == "Unknown"
            && c.reason.as_deref() == Some("NodeStatusNeverUpdated")
            && c.message.as_deref() == Some("Kubelet never posted node status.")));
    }

    #[tokio::test(start_paused = true)]
    async fn already_unknown_node_is_not_written_again() {
        let start = Instant::now();
        let mut unknown = healthy(0);
        if let Some(cs) = unknown.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            for c in cs.iter_mut().filter(|c| c.type_ != "NetworkUnavailable") {
                c.status = "Unknown".to_owned();
            }
        }
        let first = observe_node_health(&unknown, None, None, GRACE, start, ts(0));
        let later = observe_node_health(
            &unknown,
            None,
            Some(&first.health),
            GRACE,
            start + Duration::from_secs(100),
            ts(100),
        );
        assert!(later.new_status.is_none());
    }
}
