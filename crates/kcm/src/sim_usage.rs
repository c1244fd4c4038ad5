//! The simulator's usage model ([`kcm_sim::usage`]) as the embedded API server's `metrics.k8s.io` usage source.

use kcm_apiserver::registry::usage::{Usage, UsageSource};
use kcm_sim::usage::{self as model, UsageConfig};
use serde_json::Value;

/// Reports what simulated pods and nodes use, by the simulator's model.
#[derive(Debug)]
pub struct SimUsage {
    /// The model's knobs.
    pub config: UsageConfig,
}

fn convert(usage: model::Usage) -> Usage {
    Usage {
        cpu_millis: usage.cpu_millis,
        memory_bytes: usage.memory_bytes,
    }
}

impl UsageSource for SimUsage {
    fn pod(&self, pod: &Value, now: jiff::Timestamp) -> Option<Vec<(String, Usage)>> {
        // A stored pod that does not decode reports nothing rather than failing the list.
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod.clone()).ok()?;
        let usages = model::pod_usage(&pod, &self.config, now)?;
        Some(usages.into_iter().map(|(n, u)| (n, convert(u))).collect())
    }

    fn node_overhead(&self, _node: &Value) -> Usage {
        convert(model::node_usage(model::Usage::default(), &self.config))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stored_pods_are_read_through_the_model() {
        let source = SimUsage {
            config: UsageConfig::default(),
        };
        let pod = json!({
            "metadata": {"name": "web", "annotations": {"sim.kcm.io/cpu-usage": "150%"}},
            "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "200m", "memory": "100Mi"}}}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                "containerStatuses": [{"name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]},
        });
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().expect("time");
        let got = source.pod(&pod, now).expect("running");
        assert_eq!(
            got,
            vec![(
                "app".to_owned(),
                Usage {
                    cpu_millis: 300,
                    memory_bytes: 25 * 1024 * 1024
                }
            )]
        );
        assert_eq!(source.pod(&json!({"spec": 1}), now), None);
        assert_eq!(source.node_overhead(&json!({})).cpu_millis, 100);
    }
}
