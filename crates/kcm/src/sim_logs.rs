//! The simulator's log model ([`kcm_sim::logs`]) as the embedded API server's `pods/log` source.

use kcm_apiserver::registry::pod_log::{LogSource, SourceLog};
use serde_json::Value;

/// Reports what simulated containers "print", by the simulator's model.
#[derive(Debug, Default)]
pub struct SimLogs;

impl LogSource for SimLogs {
    fn log(
        &self,
        pod: &Value,
        container: &str,
        previous: bool,
        now: jiff::Timestamp,
    ) -> Result<SourceLog, String> {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod.clone())
            .map_err(|e| format!("the stored pod does not decode: {e}"))?;
        let log = kcm_sim::logs::container_log(&pod, container, previous, now)
            .map_err(|e| e.to_string())?;
        Ok(SourceLog {
            lines: log.lines.into_iter().map(|l| (l.time, l.text)).collect(),
            terminated: log.terminated,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stored_pods_are_read_through_the_model() {
        let pod = json!({
            "metadata": {"name": "web"},
            "spec": {"nodeName": "kcm-node-0", "containers": [{"name": "app", "image": "nginx"}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                "containerStatuses": [{"name": "app", "image": "nginx", "imageID": "", "ready": true, "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]},
        });
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().expect("time");
        let log = SimLogs.log(&pod, "app", false, now).expect("log");
        assert_eq!(
            log.lines[0].1,
            "[kcm-sim] started container app (image nginx) on node kcm-node-0"
        );
        assert!(!log.terminated);
        assert_eq!(
            SimLogs.log(&pod, "x", false, now),
            Err("container x is not valid for pod web".to_owned())
        );
    }
}
