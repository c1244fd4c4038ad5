//! Pod and node conditions: [`pod_condition`] and [`node_condition`].

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NodeCondition, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Builds a [`PodCondition`]. Start with [`pod_condition`].
#[derive(Clone, Debug, Default)]
pub struct PodConditionBuilder {
    condition: PodCondition,
}

/// Condition `type_` (`"Ready"`, `"PodScheduled"`, ...) with `status` (`"True"`, `"False"`,
/// `"Unknown"`); no times, reason or message.
pub fn pod_condition(type_: &str, status: &str) -> PodConditionBuilder {
    PodConditionBuilder {
        condition: PodCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            ..PodCondition::default()
        },
    }
}

impl PodConditionBuilder {
    /// Sets `lastTransitionTime`.
    pub fn transitioned_at(mut self, at: Timestamp) -> Self {
        self.condition.last_transition_time = Some(Time(at));
        self
    }

    /// Sets `lastProbeTime`.
    pub fn probed_at(mut self, at: Timestamp) -> Self {
        self.condition.last_probe_time = Some(Time(at));
        self
    }

    /// Sets `reason`.
    pub fn reason(mut self, reason: &str) -> Self {
        self.condition.reason = Some(reason.to_owned());
        self
    }

    /// Sets `message`.
    pub fn message(mut self, message: &str) -> Self {
        self.condition.message = Some(message.to_owned());
        self
    }

    /// The condition.
    pub fn build(self) -> PodCondition {
        self.condition
    }
}

impl From<PodConditionBuilder> for PodCondition {
    fn from(b: PodConditionBuilder) -> Self {
        b.build()
    }
}

/// Builds a [`NodeCondition`]. Start with [`node_condition`].
#[derive(Clone, Debug, Default)]
pub struct NodeConditionBuilder {
    condition: NodeCondition,
}

/// Condition `type_` (`"Ready"`, `"MemoryPressure"`, ...) with `status`; no times, reason or
/// message.
pub fn node_condition(type_: &str, status: &str) -> NodeConditionBuilder {
    NodeConditionBuilder {
        condition: NodeCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            ..NodeCondition::default()
        },
    }
}

impl NodeConditionBuilder {
    /// Sets `lastHeartbeatTime`.
    pub fn heartbeat(mut self, at: Timestamp) -> Self {
        self.condition.last_heartbeat_time = Some(Time(at));
        self
    }

    /// Sets `lastTransitionTime`.
    pub fn transitioned_at(mut self, at: Timestamp) -> Self {
        self.condition.last_transition_time = Some(Time(at));
        self
    }

    /// Sets `reason`.
    pub fn reason(mut self, reason: &str) -> Self {
        self.condition.reason = Some(reason.to_owned());
        self
    }

    /// Sets `message`.
    pub fn message(mut self, message: &str) -> Self {
        self.condition.message = Some(message.to_owned());
        self
    }

    /// The condition.
    pub fn build(self) -> NodeCondition {
        self.condition
    }
}

impl From<NodeConditionBuilder> for NodeCondition {
    fn from(b: NodeConditionBuilder) -> Self {
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_condition_defaults_to_type_and_status_only() {
        assert_eq!(
            pod_condition("Ready", "True").build(),
            PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..PodCondition::default()
            }
        );
    }

    #[test]
    fn pod_condition_setters() {
        let at = Timestamp::UNIX_EPOCH;
        let c = pod_condition("Ready", "False")
            .transitioned_at(at)
            .probed_at(at)
            .reason("r")
            .message("m")
            .build();
        assert_eq!(c.last_transition_time, Some(Time(at)));
        assert_eq!(c.last_probe_time, Some(Time(at)));
        assert_eq!(c.reason.as_deref(), Some("r"));
        assert_eq!(c.message.as_deref(), Some("m"));
    }

    #[test]
    fn node_condition_defaults_to_type_and_status_only() {
        assert_eq!(
            node_condition("Ready", "Unknown").build(),
            NodeCondition {
                type_: "Ready".into(),
                status: "Unknown".into(),
                ..NodeCondition::default()
            }
        );
    }

    #[test]
    fn node_condition_setters() {
        let at = Timestamp::UNIX_EPOCH;
        let c = node_condition("Ready", "True")
            .heartbeat(at)
            .transitioned_at(at)
            .reason("KubeletReady")
            .message("ok")
            .build();
        assert_eq!(c.last_heartbeat_time, Some(Time(at)));
        assert_eq!(c.last_transition_time, Some(Time(at)));
        assert_eq!(c.reason.as_deref(), Some("KubeletReady"));
        assert_eq!(c.message.as_deref(), Some("ok"));
    }
}
