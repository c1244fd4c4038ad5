//! Pod and node conditions: [`pod_condition`] and [`node_condition`], one builder over both.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NodeCondition, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The fields pod and node conditions share, so one [`ConditionBuilder`] serves both
/// (implemented for [`PodCondition`] and [`NodeCondition`]).
pub trait ConditionFields: Default {
    /// Sets `type` and `status`.
    fn set_type_and_status(&mut self, type_: &str, status: &str);
    /// `lastTransitionTime`.
    fn last_transition_time_mut(&mut self) -> &mut Option<Time>;
    /// `reason`.
    fn reason_mut(&mut self) -> &mut Option<String>;
    /// `message`.
    fn message_mut(&mut self) -> &mut Option<String>;
}

/// Builds a [`PodCondition`] or a [`NodeCondition`]. Start with [`pod_condition`] or
/// [`node_condition`].
#[derive(Clone, Debug, Default)]
pub struct ConditionBuilder<C> {
    condition: C,
}

/// Builds a [`PodCondition`].
pub type PodConditionBuilder = ConditionBuilder<PodCondition>;

/// Builds a [`NodeCondition`].
pub type NodeConditionBuilder = ConditionBuilder<NodeCondition>;

/// Pod condition `type_` (`"Ready"`, `"PodScheduled"`, ...) with `status` (`"True"`,
/// `"False"`, `"Unknown"`); no times, reason or message.
pub fn pod_condition(type_: &str, status: &str) -> PodConditionBuilder {
    ConditionBuilder::new(type_, status)
}

/// Node condition `type_` (`"Ready"`, `"MemoryPressure"`, ...) with `status`; no times,
/// reason or message.
pub fn node_condition(type_: &str, status: &str) -> NodeConditionBuilder {
    ConditionBuilder::new(type_, status)
}

impl<C: ConditionFields> ConditionBuilder<C> {
    fn new(type_: &str, status: &str) -> Self {
        let mut condition = C::default();
        condition.set_type_and_status(type_, status);
        Self { condition }
    }

    /// Sets `lastTransitionTime`.
    pub fn transitioned_at(mut self, at: Timestamp) -> Self {
        *self.condition.last_transition_time_mut() = Some(Time(at));
        self
    }

    /// Sets `reason`.
    pub fn reason(mut self, reason: &str) -> Self {
        *self.condition.reason_mut() = Some(reason.to_owned());
        self
    }

    /// Sets `message`.
    pub fn message(mut self, message: &str) -> Self {
        *self.condition.message_mut() = Some(message.to_owned());
        self
    }

    /// The condition.
    pub fn build(self) -> C {
        self.condition
    }
}

impl PodConditionBuilder {
    /// Sets `lastProbeTime`.
    pub fn probed_at(mut self, at: Timestamp) -> Self {
        self.condition.last_probe_time = Some(Time(at));
        self
    }
}

impl NodeConditionBuilder {
    /// Sets `lastHeartbeatTime`.
    pub fn heartbeat(mut self, at: Timestamp) -> Self {
        self.condition.last_heartbeat_time = Some(Time(at));
        self
    }
}

/// Both condition types name these fields alike.
macro_rules! condition_fields {
    ($($condition:ty),*) => {$(
        impl ConditionFields for $condition {
            fn set_type_and_status(&mut self, type_: &str, status: &str) {
                type_.clone_into(&mut self.type_);
                status.clone_into(&mut self.status);
            }
            fn last_transition_time_mut(&mut self) -> &mut Option<Time> {
                &mut self.last_transition_time
            }
            fn reason_mut(&mut self) -> &mut Option<String> {
                &mut self.reason
            }
            fn message_mut(&mut self) -> &mut Option<String> {
                &mut self.message
            }
        }
    )*};
}

condition_fields!(PodCondition, NodeCondition);

from_builder!(PodConditionBuilder => PodCondition, NodeConditionBuilder => NodeCondition);

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
