//! The log of a simulated container (what `kubectl logs` reads): lines derived from the pod the simulated kubelet wrote — start, readiness, termination with exit code — and an annotation-provided periodic line.
//!
//! Simulated containers print nothing, so their log is a pure function of the pod object and
//! the time, like their usage ([`crate::usage`]):
//!
//! - `[kcm-sim] started container <c> (image <i>) on node <n>` when the container started;
//! - `[kcm-sim] container <c> is ready` / `is not ready` at the last readiness transition
//!   after the start (the pod's `Ready` condition);
//! - the text of `sim.kcm.io/log-line` (on the pod) every `sim.kcm.io/log-interval`
//!   (default 10s) from the start, `{n}` replaced by the line's number from 1;
//!   `sim.kcm.io/log-line.<container>` for one container;
//! - `[kcm-sim] container <c> terminated: exit code <code> (<reason>)` when it ended.
//!
//! `previous` reads the last terminated instance (`lastState.terminated`), which the simulator
//! writes only if a container restarted, so it is usually "not found", as on a real node.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};

use crate::kubelet::parse_duration;

/// The periodic line's text, for every container of the pod.
pub const LOG_LINE_ANNOTATION: &str = "sim.kcm.io/log-line";
/// The period of the periodic line (default [`DEFAULT_LOG_INTERVAL`]).
pub const LOG_INTERVAL_ANNOTATION: &str = "sim.kcm.io/log-interval";
/// The default period of the periodic line.
pub const DEFAULT_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// At most this many periodic lines are kept (the oldest are dropped, as a rotated log).
const MAX_PERIODIC_LINES: u64 = 10_000;
/// The shortest period honoured (a shorter one is raised to it).
const MIN_LOG_INTERVAL: Duration = Duration::from_millis(100);

/// One log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// When it was written.
    pub time: Timestamp,
    /// The text, without the newline.
    pub text: String,
}

/// Why there is no log to read; the messages are the kubelet's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The pod has no such container.
    #[error("container {container} is not valid for pod {pod}")]
    NoContainer {
        /// The container asked for.
        container: String,
        /// The pod.
        pod: String,
    },
    /// The container has not started.
    #[error("container \"{container}\" in pod \"{pod}\" is waiting to start: {reason}")]
    Waiting {
        /// The container.
        container: String,
        /// The pod.
        pod: String,
        /// Why (`ContainerCreating`).
        reason: String,
    },
    /// `previous` was asked for a container that never restarted.
    #[error("previous terminated container \"{container}\" in pod \"{pod}\" not found")]
    NoPrevious {
        /// The container.
        container: String,
        /// The pod.
        pod: String,
    },
}

/// The log of one container instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerLog {
    /// The lines, oldest first.
    pub lines: Vec<LogLine>,
    /// Whether the instance ended (a follower stops after these lines).
    pub terminated: bool,
}

fn plus(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// The periodic lines between `start` and `end` (exclusive of `start`).
fn periodic(text: &str, interval: Duration, start: Timestamp, end: Timestamp) -> Vec<LogLine> {
    let interval = interval.max(MIN_LOG_INTERVAL);
    let elapsed: Duration = end
        .duration_since(start)
        .try_into()
        .unwrap_or(Duration::ZERO);
    let count = (elapsed.as_nanos() / interval.as_nanos().max(1)) as u64;
    let first = count.saturating_sub(MAX_PERIODIC_LINES) + 1;
    (first..=count)
        .map(|n| LogLine {
            time: plus(
                start,
                interval.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX)),
            ),
            text: text.replace("{n}", &n.to_string()),
        })
        .collect()
}

/// The log of `container` of `pod` at `now` (of its previous instance when `previous`).
pub fn container_log(
    pod: &Pod,
    container: &str,
    previous: bool,
    now: Timestamp,
) -> Result<ContainerLog, LogError> {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == container))
        .ok_or_else(|| LogError::NoContainer {
            container: container.to_owned(),
            pod: pod_name.clone(),
        })?;
    let status = pod.status.as_ref();
    let container_status = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container));
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let image = spec.image.clone().unwrap_or_default();

    // The instance: (start, termination if ended).
    let (start, terminated): (Timestamp, Option<&ContainerStateTerminated>) = if previous {
        let last = container_status
            .and_then(|c| c.last_state.as_ref())
            .and_then(|s| s.terminated.as_ref())
            .ok_or_else(|| LogError::NoPrevious {
                container: container.to_owned(),
                pod: pod_name.clone(),
            })?;
        let start = last
            .started_at
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
        (start, Some(last))
    } else {
        let state = container_status.and_then(|c| c.state.as_ref());
        if let Some(running) = state.and_then(|s| s.running.as_ref()) {
            let start = running
                .started_at
                .as_ref()
                .or(status.and_then(|s| s.start_time.as_ref()))
                .map_or(now, |t| t.0);
            (start, None)
        } else if let Some(ended) = state.and_then(|s| s.terminated.as_ref()) {
            let start = ended
                .started_at
                .as_ref()
                .or(status.and_then(|s| s.start_time.as_ref()))
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
            (start, Some(ended))
        } else {
            let reason = state
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.clone())
                .unwrap_or_else(|| "ContainerCreating".to_owned());
            return Err(LogError::Waiting {
                container: container.to_owned(),
                pod: pod_name,
                reason,
            });
        }
    };
    let end = terminated
        .and_then(|t| t.finished_at.as_ref())
        .map_or(now, |t| t.0)
        .min(now);

    let mut lines = vec![LogLine {
        time: start,
        text: format!("[kcm-sim] started container {container} (image {image}) on node {node}"),
    }];
    if !previous
        && let Some(ready) = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        && let Some(at) = ready.last_transition_time.as_ref().map(|t| t.0)
        && at >= start
        && at <= end
    {
        let state = if ready.status == "True" {
            "is ready"
        } else {
            "is not ready"
        };
        lines.push(LogLine {
            time: at,
            text: format!("[kcm-sim] container {container} {state}"),
        });
    }
    let annotations = pod.metadata.annotations.as_ref();
    let text = annotations.and_then(|a| {
        a.get(&format!("{LOG_LINE_ANNOTATION}.{container}"))
            .or_else(|| a.get(LOG_LINE_ANNOTATION))
    });
    if let Some(text) = text {
        let interval = annotations
            .and_then(|a| a.get(LOG_INTERVAL_ANNOTATION))
            .and_then(|d| parse_duration(d))
            .unwrap_or(DEFAULT_LOG_INTERVAL);
        lines.extend(periodic(text, interval, start, end));
    }
    if let Some(ended) = terminated {
        lines.push(LogLine {
            time: end,
            text: format!(
                "[kcm-sim] container {container} terminated: exit code {} ({})",
                ended.exit_code,
                ended.reason.as_deref().unwrap_or("Completed")
            ),
        });
    }
    // Stable by time: the readiness line may fall between periodic ones.
    lines.sort_by_key(|l| l.time);
    Ok(ContainerLog {
        lines,
        terminated: terminated.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStateWaiting, ContainerStatus,
        PodCondition, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + secs).expect("time")
    }

    fn pod(state: ContainerState, annotations: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("kcm-node-0".into()),
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("nginx".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                start_time: Some(Time(t(0))),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(t(1))),
                    ..Default::default()
                }]),
                container_statuses: Some(vec![ContainerStatus {
                    name: "app".into(),
                    state: Some(state),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    fn running() -> ContainerState {
        ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(t(0))),
            }),
            ..Default::default()
        }
    }

    fn texts(log: &ContainerLog) -> Vec<String> {
        log.lines.iter().map(|l| l.text.clone()).collect()
    }

    #[test]
    fn a_running_container_logs_start_readiness_and_periodic_lines() {
        let p = pod(
            running(),
            &[
                (LOG_LINE_ANNOTATION, "GET / 200 #{n}"),
                (LOG_INTERVAL_ANNOTATION, "2s"),
            ],
        );
        let log = container_log(&p, "app", false, t(5)).expect("log");
        assert_eq!(
            texts(&log),
            [
                "[kcm-sim] started container app (image nginx) on node kcm-node-0",
                "[kcm-sim] container app is ready",
                "GET / 200 #1",
                "GET / 200 #2",
            ]
        );
        assert_eq!(log.lines[3].time, t(4));
        assert!(!log.terminated);
    }

    #[test]
    fn a_terminated_container_ends_with_its_exit_code() {
        let state = ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 3,
                reason: Some("Error".into()),
                started_at: Some(Time(t(0))),
                finished_at: Some(Time(t(30))),
                ..Default::default()
            }),
            ..Default::default()
        };
        let log = container_log(&pod(state, &[]), "app", false, t(100)).expect("log");
        assert!(log.terminated);
        assert_eq!(
            log.lines.last().map(|l| (l.time, l.text.as_str())),
            Some((
                t(30),
                "[kcm-sim] container app terminated: exit code 3 (Error)"
            ))
        );
    }

    #[test]
    fn errors_as_the_kubelet_words_them() {
        let waiting = ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cases = [
            (
                container_log(&pod(running(), &[]), "nope", false, t(1)),
                "container nope is not valid for pod web",
            ),
            (
                container_log(&pod(waiting, &[]), "app", false, t(1)),
                "container \"app\" in pod \"web\" is waiting to start: ContainerCreating",
            ),
            (
                container_log(&pod(running(), &[]), "app", true, t(1)),
                "previous terminated container \"app\" in pod \"web\" not found",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got.map_err(|e| e.to_string()).err().as_deref(), Some(want));
        }
    }
}
