//! The pod row: READY, STATUS and RESTARTS as upstream's `printPod` computes them.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::since;
use super::fields::{bool_at, get, int_at, is_deleting, list_at, name, str_at, time_at};

/// `node.NodeUnreachablePodReason`: the reason the node lifecycle controller gives pods
/// on a lost node.
const NODE_UNREACHABLE_POD_REASON: &str = "NodeLost";

/// Whether an init container is a sidecar (`restartPolicy: Always`), upstream's
/// `IsRestartableInitContainer`.
fn is_restartable(init_container: Option<&Value>) -> bool {
    init_container.is_some_and(|c| str_at(c, &["restartPolicy"]) == "Always")
}

/// Keeps the later of `latest` and the container's last termination time.
fn note_last_termination(latest: &mut Option<Timestamp>, status: &Value) {
    if let Some(finished) = time_at(status, &["lastState", "terminated", "finishedAt"])
        && latest.is_none_or(|l| l < finished)
    {
        *latest = Some(finished);
    }
}

fn has_condition(pod: &Value, ty: &str) -> bool {
    list_at(pod, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == ty && str_at(c, &["status"]) == "True")
}

/// Whether the pod's `Initialized` condition (the first one) is `True`.
fn initialized(pod: &Value) -> bool {
    list_at(pod, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Initialized")
        .is_some_and(|c| str_at(c, &["status"]) == "True")
}

/// The row of one pod (upstream's `printPod`, wide).
pub(super) fn row(pod: &Value, now: Timestamp) -> Row {
    let init_specs = list_at(pod, &["spec", "initContainers"]);
    let init_spec = |container: &str| {
        init_specs
            .iter()
            .find(|c| str_at(c, &["name"]) == container)
    };

    let mut restarts = 0;
    let mut restartable_init_restarts = 0;
    let total = list_at(pod, &["spec", "containers"]).len()
        + init_specs
            .iter()
            .filter(|c| is_restartable(Some(c)))
            .count();
    let mut ready = 0;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_restartable_init_restart: Option<Timestamp> = None;

    let phase = str_at(pod, &["status", "phase"]);
    let mut reason = phase.to_owned();
    let status_reason = str_at(pod, &["status", "reason"]);
    if !status_reason.is_empty() {
        reason = status_reason.to_owned();
    }
    if list_at(pod, &["status", "conditions"]).iter().any(|c| {
        str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated"
    }) {
        reason = "SchedulingGated".to_owned();
    }

    let conditions = match phase {
        "Succeeded" => Some(json!([{
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully."
        }])),
        "Failed" => Some(json!([{
            "type": "Completed",
            "status": "True",
            "reason": "Failed",
            "message": "The pod failed."
        }])),
        _ => None,
    };

    let mut initializing = false;
    for (i, status) in list_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let container_restarts = int_at(status, &["restartCount"]);
        restarts += container_restarts;
        note_last_termination(&mut last_restart, status);
        let restartable = is_restartable(init_spec(str_at(status, &["name"])));
        if restartable {
            restartable_init_restarts += container_restarts;
            note_last_termination(&mut last_restartable_init_restart, status);
        }
        let terminated = get(status, &["state", "terminated"]).filter(|t| !t.is_null());
        let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
        match terminated {
            Some(t) if int_at(t, &["exitCode"]) == 0 => continue,
            _ if restartable && bool_at(status, &["started"]) => {
                if bool_at(status, &["ready"]) {
                    ready += 1;
                }
                continue;
            }
            Some(t) => {
                let terminated_reason = str_at(t, &["reason"]);
                reason = if !terminated_reason.is_empty() {
                    format!("Init:{terminated_reason}")
                } else if int_at(t, &["signal"]) != 0 {
                    format!("Init:Signal:{}", int_at(t, &["signal"]))
                } else {
                    format!("Init:ExitCode:{}", int_at(t, &["exitCode"]))
                };
            }
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                reason = format!("Init:{waiting_reason}");
            }
            None => reason = format!("Init:{i}/{}", init_specs.len()),
        }
        initializing = true;
        break;
    }

    if !initializing || initialized(pod) {
        restarts = restartable_init_restarts;
        last_restart = last_restartable_init_restart;
        let mut has_running = false;
        for status in list_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(status, &["restartCount"]);
            note_last_termination(&mut last_restart, status);
            let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
            let terminated = get(status, &["state", "terminated"]).filter(|t| !t.is_null());
            let running = get(status, &["state", "running"]).is_some_and(|r| !r.is_null());
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_owned();
            } else if let Some(t) = terminated {
                let terminated_reason = str_at(t, &["reason"]);
                reason = if !terminated_reason.is_empty() {
                    terminated_reason.to_owned()
                } else if int_at(t, &["signal"]) != 0 {
                    format!("Signal:{}", int_at(t, &["signal"]))
                } else {
                    format!("ExitCode:{}", int_at(t, &["exitCode"]))
                };
            } else if bool_at(status, &["ready"]) && running {
                has_running = true;
                ready += 1;
            }
        }
        // A pod whose containers "Completed" but one still runs is shown as running.
        if reason == "Completed" && has_running {
            reason = if has_condition(pod, "Ready") {
                "Running".to_owned()
            } else {
                "NotReady".to_owned()
            };
        }
    }

    if is_deleting(pod) && status_reason == NODE_UNREACHABLE_POD_REASON {
        reason = "Unknown".to_owned();
    } else if is_deleting(pod) && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".to_owned();
    }

    let restarts_text = match last_restart {
        Some(at) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(at), now)),
        _ => restarts.to_string(),
    };

    // The IP is the first of podIPs; a v1 object may carry only podIP (the conversion to
    // the internal type fills podIPs from it).
    let pod_ip = list_at(pod, &["status", "podIPs"])
        .first()
        .map(|ip| str_at(ip, &["ip"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or_else(|| str_at(pod, &["status", "podIP"]));
    let readiness_gates = list_at(pod, &["spec", "readinessGates"]);
    let gates_text = if readiness_gates.is_empty() {
        "<none>".to_owned()
    } else {
        let conditions = list_at(pod, &["status", "conditions"]);
        let passing = readiness_gates
            .iter()
            .filter(|gate| {
                let ty = str_at(gate, &["conditionType"]);
                conditions
                    .iter()
                    .find(|c| str_at(c, &["type"]) == ty)
                    .is_some_and(|c| str_at(c, &["status"]) == "True")
            })
            .count();
        format!("{passing}/{}", readiness_gates.len())
    };

    Row {
        cells: vec![
            json!(name(pod)),
            json!(format!("{ready}/{total}")),
            json!(reason),
            json!(restarts_text),
            json!(since(time_at(pod, &["metadata", "creationTimestamp"]), now)),
            json!(or_none(pod_ip)),
            json!(or_none(str_at(pod, &["spec", "nodeName"]))),
            json!(or_none(str_at(pod, &["status", "nominatedNodeName"]))),
            json!(gates_text),
        ],
        conditions,
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() { "<none>" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    fn pod(spec: Value, status: Value) -> Value {
        json!({
            "metadata": {"name": "web-1", "creationTimestamp": "2024-05-01T11:55:00Z"},
            "spec": spec,
            "status": status,
        })
    }

    fn cells(pod: &Value) -> Vec<String> {
        row(pod, now())
            .cells
            .iter()
            .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
            .collect()
    }

    fn running(name: &str, restarts: i64) -> Value {
        json!({"name": name, "ready": true, "restartCount": restarts, "state": {"running": {"startedAt": "2024-05-01T11:56:00Z"}}})
    }

    #[test]
    fn pod_status_column_follows_upstream() {
        let two = json!({"containers": [{"name": "a"}, {"name": "b"}]});
        struct Case {
            name: &'static str,
            pod: Value,
            ready: &'static str,
            status: &'static str,
            restarts: &'static str,
        }
        let cases = [
            Case {
                name: "pending, nothing reported",
                pod: pod(two.clone(), json!({"phase": "Pending"})),
                ready: "0/2",
                status: "Pending",
                restarts: "0",
            },
            Case {
                name: "running and ready",
                pod: pod(
                    two.clone(),
                    json!({"phase": "Running", "containerStatuses": [running("a", 0), running("b", 0)]}),
                ),
                ready: "2/2",
                status: "Running",
                restarts: "0",
            },
            Case {
                name: "waiting reason wins",
                pod: pod(
                    two.clone(),
                    json!({"phase": "Running", "containerStatuses": [
                        running("a", 0),
                        {"name": "b", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                         "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-05-01T11:58:30Z"}}}
                    ]}),
                ),
                ready: "1/2",
                status: "CrashLoopBackOff",
                restarts: "4 (90s ago)",
            },
            Case {
                name: "terminated without reason shows the exit code",
                pod: pod(
                    json!({"containers": [{"name": "a"}]}),
                    json!({"phase": "Failed", "containerStatuses": [
                        {"name": "a", "state": {"terminated": {"exitCode": 3}}}
                    ]}),
                ),
                ready: "0/1",
                status: "ExitCode:3",
                restarts: "0",
            },
            Case {
                name: "terminated by a signal",
                pod: pod(
                    json!({"containers": [{"name": "a"}]}),
                    json!({"phase": "Failed", "containerStatuses": [
                        {"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}}
                    ]}),
                ),
                ready: "0/1",
                status: "Signal:9",
                restarts: "0",
            },
            Case {
                name: "succeeded shows Completed",
                pod: pod(
                    json!({"containers": [{"name": "a"}]}),
                    json!({"phase": "Succeeded", "containerStatuses": [
                        {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                    ]}),
                ),
                ready: "0/1",
                status: "Completed",
                restarts: "0",
            },
            Case {
                name: "completed container with another still running",
                pod: pod(
                    two.clone(),
                    json!({"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [
                        {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                        running("b", 0)
                    ]}),
                ),
                ready: "1/2",
                status: "NotReady",
                restarts: "0",
            },
            Case {
                name: "init container waiting",
                pod: pod(
                    json!({"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]}),
                    json!({"phase": "Pending", "initContainerStatuses": [
                        {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
                        {"name": "i2", "state": {"waiting": {"reason": "PodInitializing"}}}
                    ]}),
                ),
                ready: "0/1",
                status: "Init:1/2",
                restarts: "0",
            },
            Case {
                name: "init container failing",
                pod: pod(
                    json!({"initContainers": [{"name": "i1"}], "containers": [{"name": "a"}]}),
                    json!({"phase": "Pending", "initContainerStatuses": [
                        {"name": "i1", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                    ]}),
                ),
                ready: "0/1",
                status: "Init:CrashLoopBackOff",
                restarts: "2",
            },
            Case {
                name: "init container terminated with error",
                pod: pod(
                    json!({"initContainers": [{"name": "i1"}], "containers": [{"name": "a"}]}),
                    json!({"phase": "Pending", "initContainerStatuses": [
                        {"name": "i1", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
                    ]}),
                ),
                ready: "0/1",
                status: "Init:Error",
                restarts: "0",
            },
            Case {
                name: "sidecar counts as a container",
                pod: pod(
                    json!({"initContainers": [{"name": "side", "restartPolicy": "Always"}], "containers": [{"name": "a"}]}),
                    json!({"phase": "Running",
                        "initContainerStatuses": [{"name": "side", "ready": true, "started": true, "restartCount": 1,
                            "state": {"running": {}}}],
                        "containerStatuses": [running("a", 0)]}),
                ),
                ready: "2/2",
                status: "Running",
                restarts: "1",
            },
            Case {
                name: "deleting pod is Terminating",
                pod: {
                    let mut p = pod(
                        two.clone(),
                        json!({"phase": "Running", "containerStatuses": [running("a", 0), running("b", 0)]}),
                    );
                    p["metadata"]["deletionTimestamp"] = json!("2024-05-01T11:59:00Z");
                    p
                },
                ready: "2/2",
                status: "Terminating",
                restarts: "0",
            },
            Case {
                name: "deleting pod on a lost node is Unknown",
                pod: {
                    let mut p = pod(
                        two.clone(),
                        json!({"phase": "Running", "reason": "NodeLost"}),
                    );
                    p["metadata"]["deletionTimestamp"] = json!("2024-05-01T11:59:00Z");
                    p
                },
                ready: "0/2",
                status: "Unknown",
                restarts: "0",
            },
            Case {
                name: "scheduling gated",
                pod: pod(
                    two.clone(),
                    json!({"phase": "Pending", "conditions": [
                        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
                    ]}),
                ),
                ready: "0/2",
                status: "SchedulingGated",
                restarts: "0",
            },
            Case {
                name: "evicted pod shows the status reason",
                pod: pod(two, json!({"phase": "Failed", "reason": "Evicted"})),
                ready: "0/2",
                status: "Evicted",
                restarts: "0",
            },
        ];
        for case in cases {
            let got = cells(&case.pod);
            assert_eq!(got[0], "web-1", "{}", case.name);
            assert_eq!(got[1], case.ready, "{}: ready", case.name);
            assert_eq!(got[2], case.status, "{}: status", case.name);
            assert_eq!(got[3], case.restarts, "{}: restarts", case.name);
            assert_eq!(got[4], "5m", "{}: age", case.name);
        }
    }

    #[test]
    fn wide_cells_and_completed_condition() {
        let p = pod(
            json!({"nodeName": "node-1", "containers": [{"name": "a"}], "readinessGates": [
                {"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}
            ]}),
            json!({"phase": "Succeeded", "podIP": "10.0.0.7", "conditions": [
                {"type": "example.com/lb", "status": "True"}
            ]}),
        );
        let r = row(&p, now());
        let got = cells(&p);
        assert_eq!(&got[5..], ["10.0.0.7", "node-1", "<none>", "1/2"]);
        assert_eq!(
            r.conditions,
            Some(
                json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
                "message": "The pod has completed successfully."}])
            )
        );
        let bare = pod(json!({"containers": []}), json!({}));
        assert_eq!(&cells(&bare)[5..], ["<none>", "<none>", "<none>", "<none>"]);
    }
}
