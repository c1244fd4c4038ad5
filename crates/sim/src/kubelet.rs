//! The simulated kubelet's pod lifecycle: what status a bound pod should have, and when.
//!
//! [`decide`] is pure: given a pod, the time it was bound, the node's pod IP for it and the
//! current time, it returns the status to post (if it changed), when to look again, or that
//! the pod should be finalized. The running simulator applies decisions through the API.
//!
//! Conventions (the README documents them):
//! - a bound pod goes `Pending` → `Running` (all containers running and ready) after the
//!   simulator's pod-ready delay;
//! - `sim.kcm.io/ready=false` keeps a running pod's containers unready until removed;
//! - `sim.kcm.io/phase=Failed|Succeeded` moves the pod to that terminal phase;
//! - pods with `restartPolicy` `Never` or `OnFailure` run for `sim.kcm.io/duration`
//!   (`30s`, `2m`, `1h`), else for as long as their containers' `sleep` commands ask
//!   (`command: [sleep, "300"]`; `sleep infinity` runs until deleted), else for
//!   [`DEFAULT_RUN_DURATION`], and then succeed, or fail when `sim.kcm.io/exit-code` is not 0;
//! - `sim.kcm.io/exit-code=N` is the exit code of the containers of a pod that fails (forced
//!   or at the end of its run; default 1), so pod failure policies can match it;
//! - a pod with a `deletionTimestamp` is finalized (deleted with grace period 0); one that
//!   still has finalizers and is not terminal first moves to `Failed`, as the kubelet does for
//!   a pod it killed, so controllers waiting on the finalizer (the Job controller) see it
//!   finished.

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, HostIP, Pod,
    PodCondition, PodIP, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Annotation: `false` keeps the pod's containers unready.
pub const ANNOTATION_READY: &str = "sim.kcm.io/ready";
/// Annotation: `Failed` or `Succeeded` forces that terminal phase.
pub const ANNOTATION_PHASE: &str = "sim.kcm.io/phase";
/// Annotation: how long a run-to-completion pod runs before it succeeds.
pub const ANNOTATION_DURATION: &str = "sim.kcm.io/duration";
/// Annotation: the exit code of a failing pod's containers; non-zero also makes a
/// run-to-completion pod fail when its duration ends.
pub const ANNOTATION_EXIT_CODE: &str = "sim.kcm.io/exit-code";
/// The exit code of a killed container (SIGKILL), as a runtime reports it.
pub const KILLED_EXIT_CODE: i32 = 137;
/// How long a run-to-completion container runs when neither an annotation nor its `sleep`
/// command says.
pub const DEFAULT_RUN_DURATION: Duration = Duration::from_secs(5);
/// The longest run the simulator times; a `sleep` for longer runs until the pod is deleted.
pub const LONGEST_RUN: Duration = Duration::from_secs(365 * 24 * 3600);

/// What the simulator should do with one bound pod now.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Post this status through `pods/status`, then decide again after `recheck` if set.
    UpdateStatus {
        /// The full new status.
        status: Box<PodStatus>,
        /// When to look at the pod again.
        recheck: Option<Duration>,
    },
    /// Nothing to change now; look again after this long (or on the pod's next change).
    Wait(Option<Duration>),
    /// The pod is being deleted: post `final_status` if set, then finalize it with grace
    /// period 0.
    Finalize {
        /// The terminal status of a pod that keeps finalizers and was not terminal yet.
        final_status: Option<Box<PodStatus>>,
    },
}

/// Everything [`decide`] needs besides the pod.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    /// Now, from the simulator's clock.
    pub now: jiff::Timestamp,
    /// When the pod was bound to the node (its PodScheduled transition); `None` = just now.
    pub bound_at: Option<jiff::Timestamp>,
    /// How long a bound pod stays Pending before it runs.
    pub ready_delay: Duration,
    /// The pod's IP on this node.
    pub pod_ip: Ipv4Addr,
    /// The node's InternalIP.
    pub host_ip: Ipv4Addr,
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Parses `30s`, `2m`, `1h`, `1m30s`, `500ms` (Go's `time.ParseDuration` subset).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        if digits == 0 {
            return None;
        }
        let value: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" => Duration::from_secs(value.checked_mul(60)?),
            "h" => Duration::from_secs(value.checked_mul(3600)?),
            _ => return None,
        };
        total = total.checked_add(unit)?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

/// How long a `sleep` with these operands sleeps, as coreutils' and busybox's: the sum of
/// `NUMBER[smhd]` (seconds by default, fractions allowed); `Some(None)` for `infinity` or
/// longer than [`LONGEST_RUN`]; `None` when an operand does not parse (or there is none).
pub fn parse_sleep(operands: &[String]) -> Option<Option<Duration>> {
    if operands.is_empty() {
        return None;
    }
    let mut total = 0.0_f64;
    for operand in operands {
        if operand == "infinity" {
            return Some(None);
        }
        let (number, unit) = match operand.strip_suffix(['s', 'm', 'h', 'd']) {
            Some(number) => (number, &operand[number.len()..]),
            None => (operand.as_str(), "s"),
        };
        if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        let scale = match unit {
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => 1.0,
        };
        total += value * scale;
    }
    match Duration::try_from_secs_f64(total) {
        Ok(d) if d <= LONGEST_RUN => Some(Some(d)),
        _ => Some(None),
    }
}

/// How long a run-to-completion pod runs, `None` meaning until it is deleted: its
/// `sim.kcm.io/duration`, else the longest run of its containers — a container whose command
/// is `sleep` runs for what it asks (see [`parse_sleep`]), any other for
/// [`DEFAULT_RUN_DURATION`].
fn run_duration(pod: &Pod, spec: &PodSpec) -> Option<Duration> {
    if let Some(d) = annotation(pod, ANNOTATION_DURATION).and_then(parse_duration) {
        return Some(d);
    }
    let mut longest = Duration::ZERO;
    for container in &spec.containers {
        let argv: Vec<String> = container
            .command
            .iter()
            .flatten()
            .chain(container.args.iter().flatten())
            .cloned()
            .collect();
        let sleeps = container.command.as_ref().is_some_and(|c| {
            c.first()
                .is_some_and(|program| program.rsplit('/').next() == Some("sleep"))
        });
        let run = if sleeps {
            parse_sleep(&argv[1..]).unwrap_or(Some(DEFAULT_RUN_DURATION))
        } else {
            Some(DEFAULT_RUN_DURATION)
        };
        longest = longest.max(run?);
    }
    Some(longest)
}

fn since(now: jiff::Timestamp, then: jiff::Timestamp) -> Duration {
    let nanos = now.as_nanosecond() - then.as_nanosecond();
    Duration::from_nanos(u64::try_from(nanos.max(0)).unwrap_or(u64::MAX))
}

fn condition(
    existing: &[PodCondition],
    type_: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
    now: jiff::Timestamp,
) -> PodCondition {
    let status = if status { "True" } else { "False" };
    // Keep the transition time when the status did not change, as the kubelet does.
    let transition = existing
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    PodCondition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.map(Into::into),
        message,
        last_transition_time: Some(transition),
        last_probe_time: None,
        observed_generation: None,
    }
}

/// The QoS class of a pod, as upstream's `GetPodQOS`.
pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort";
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in &spec.containers {
        let r = c.resources.as_ref();
        let requests = r.and_then(|r| r.requests.as_ref());
        let limits = r.and_then(|r| r.limits.as_ref());
        for res in ["cpu", "memory"] {
            let req = requests.and_then(|m| m.get(res));
            let lim = limits.and_then(|m| m.get(res));
            any |= req.is_some() || lim.is_some();
            // Requests default to limits, so a limit alone is enough for Guaranteed.
            let req = req.or(lim);
            if lim.is_none() || req.map(|q| &q.0) != lim.map(|q| &q.0) {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The exit code of the annotation, if it parses.
fn annotated_exit_code(pod: &Pod) -> Option<i32> {
    annotation(pod, ANNOTATION_EXIT_CODE).and_then(|c| c.trim().parse().ok())
}

/// The status of a pod killed on deletion: `Failed`, its containers terminated with
/// [`KILLED_EXIT_CODE`]; `None` when it is already terminal or has no finalizer (it then
/// disappears with the delete and no one can see its last phase).
fn status_on_deletion(pod: &Pod, now: jiff::Timestamp) -> Option<Box<PodStatus>> {
    let finalizers = pod
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| !f.is_empty());
    let current = pod.status.clone().unwrap_or_default();
    let terminal = matches!(current.phase.as_deref(), Some("Succeeded" | "Failed"));
    if !finalizers || terminal {
        return None;
    }
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[]);
    let statuses = containers
        .iter()
        .map(|c| {
            let previous = current
                .container_statuses
                .iter()
                .flatten()
                .find(|s| s.name == c.name);
            let started = previous
                .and_then(|p| p.state.as_ref())
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.clone());
            let image = c.image.clone().unwrap_or_default();
            ContainerStatus {
                name: c.name.clone(),
                image: image.clone(),
                image_id: format!("kcm-sim://{image}"),
                container_id: Some(format!("kcm-sim://{uid}-{}", c.name)),
                ready: false,
                restart_count: 0,
                started: Some(false),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: KILLED_EXIT_CODE,
                        reason: Some("Error".into()),
                        started_at: started,
                        finished_at: Some(Time(now)),
                        container_id: Some(format!("kcm-sim://{uid}-{}", c.name)),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect();
    let existing = current.conditions.as_deref().unwrap_or(&[]);
    let mut conditions: Vec<PodCondition> = existing
        .iter()
        .filter(|c| !matches!(c.type_.as_str(), "Ready" | "ContainersReady"))
        .cloned()
        .collect();
    conditions.push(condition(
        existing,
        "Ready",
        false,
        Some("PodFailed"),
        None,
        now,
    ));
    conditions.push(condition(
        existing,
        "ContainersReady",
        false,
        Some("PodFailed"),
        None,
        now,
    ));
    Some(Box::new(PodStatus {
        phase: Some("Failed".into()),
        conditions: Some(conditions),
        container_statuses: Some(statuses),
        ..current
    }))
}

/// The status the kubelet would post for `pod` now, and when to look again.
pub fn decide(pod: &Pod, cx: &Context) -> Decision {
    if pod.metadata.deletion_timestamp.is_some() {
        return Decision::Finalize {
            final_status: status_on_deletion(pod, cx.now),
        };
    }
    let Some(spec) = pod.spec.as_ref() else {
        return Decision::Wait(None);
    };
    let current = pod.status.clone().unwrap_or_default();
    let phase = current.phase.as_deref().unwrap_or("Pending");
    if matches!(phase, "Succeeded" | "Failed") {
        return Decision::Wait(None);
    }
    let bound_at = cx.bound_at.unwrap_or(cx.now);
    let start_at = bound_at
        .checked_add(jiff::SignedDuration::try_from(cx.ready_delay).unwrap_or_default())
        .unwrap_or(bound_at);

    let forced = annotation(pod, ANNOTATION_PHASE).filter(|p| matches!(*p, "Failed" | "Succeeded"));
    if forced.is_none() && cx.now < start_at {
        return Decision::Wait(Some(since(start_at, cx.now)));
    }
    let started = current
        .start_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(start_at.min(cx.now));

    let run_to_completion = matches!(spec.restart_policy.as_deref(), Some("Never" | "OnFailure"));
    let run_for = run_duration(pod, spec);
    let exit_code = annotated_exit_code(pod);
    let finished = forced.or_else(|| {
        let done = run_for.is_some_and(|d| since(cx.now, started) >= d);
        (run_to_completion && done).then_some(match exit_code {
            Some(code) if code != 0 => "Failed",
            _ => "Succeeded",
        })
    });
    let failure_exit_code = exit_code.filter(|c| *c != 0).unwrap_or(1);
    let ready = finished.is_none() && annotation(pod, ANNOTATION_READY) != Some("false");

    let existing = current.conditions.as_deref().unwrap_or(&[]);
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let container_statuses: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .map(|c| {
            let state = match finished {
                Some(phase) => ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: if phase == "Succeeded" {
                            0
                        } else {
                            failure_exit_code
                        },
                        reason: Some(
                            if phase == "Succeeded" {
                                "Completed"
                            } else {
                                "Error"
                            }
                            .into(),
                        ),
                        started_at: Some(Time(started)),
                        finished_at: Some(Time(cx.now)),
                        container_id: Some(format!("kcm-sim://{uid}-{}", c.name)),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                None => ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(started)),
                    }),
                    ..Default::default()
                },
            };
            // Keep timestamps already posted so an unchanged pod compares equal.
            let previous = current
                .container_statuses
                .iter()
                .flatten()
                .find(|s| s.name == c.name);
            let state = match previous.and_then(|p| p.state.clone()) {
                Some(prev) if finished.is_none() && prev.running.is_some() => prev,
                Some(prev) if finished.is_some() && prev.terminated.is_some() => prev,
                _ => state,
            };
            let image = c.image.clone().unwrap_or_default();
            ContainerStatus {
                name: c.name.clone(),
                image: image.clone(),
                image_id: format!("kcm-sim://{image}"),
                container_id: Some(format!("kcm-sim://{uid}-{}", c.name)),
                ready,
                restart_count: 0,
                started: Some(finished.is_none()),
                state: Some(state),
                ..Default::default()
            }
        })
        .collect();
    let unready: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    let (not_ready_reason, not_ready_message) = match finished {
        Some("Succeeded") => (Some("PodCompleted"), None),
        Some(_) => (Some("PodFailed"), None),
        None => (
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        ),
    };
    let (reason, message) = if ready {
        (None, None)
    } else {
        (not_ready_reason, not_ready_message)
    };
    let mut conditions = vec![
        condition(
            existing,
            "PodReadyToStartContainers",
            finished.is_none(),
            None,
            None,
            cx.now,
        ),
        condition(existing, "Initialized", true, None, None, cx.now),
        condition(existing, "Ready", ready, reason, message.clone(), cx.now),
        condition(existing, "ContainersReady", ready, reason, message, cx.now),
    ];
    if let Some(scheduled) = existing.iter().find(|c| c.type_ == "PodScheduled") {
        conditions.push(scheduled.clone());
    } else {
        conditions.push(condition(
            existing,
            "PodScheduled",
            true,
            None,
            None,
            bound_at,
        ));
    }

    let new_phase = finished.unwrap_or("Running");
    let status = PodStatus {
        phase: Some(new_phase.into()),
        conditions: Some(conditions),
        host_ip: Some(cx.host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: cx.host_ip.to_string(),
        }]),
        pod_ip: Some(cx.pod_ip.to_string()),
        pod_ips: Some(vec![PodIP {
            ip: cx.pod_ip.to_string(),
        }]),
        start_time: Some(Time(started)),
        container_statuses: Some(container_statuses),
        qos_class: Some(
            current
                .qos_class
                .clone()
                .unwrap_or_else(|| qos_class(pod).into()),
        ),
        ..current.clone()
    };
    let recheck = (finished.is_none() && run_to_completion)
        .then_some(run_for)
        .flatten()
        .map(|d| d.saturating_sub(since(cx.now, started)));
    if status == current {
        Decision::Wait(recheck)
    } else {
        Decision::UpdateStatus {
            status: Box::new(status),
            recheck,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_testing::{MetaBuilder, PodSpecBuilder, container};

    fn ts(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(secs).expect("valid")
    }

    fn pod(annotations: &[(&str, &str)], restart: Option<&str>) -> Pod {
        let pod = kcm_testing::pod("p")
            .uid("uid-1")
            .annotations(annotations)
            .node("kcm-node-0")
            .container(container("app").image("nginx"))
            .phase("Pending");
        match restart {
            Some(policy) => pod.restart_policy(policy).build(),
            None => pod.build(),
        }
    }

    fn cx(now: i64) -> Context {
        Context {
            now: ts(now),
            bound_at: Some(ts(100)),
            ready_delay: Duration::from_secs(2),
            pod_ip: Ipv4Addr::new(10, 244, 0, 2),
            host_ip: Ipv4Addr::new(10, 0, 0, 10),
        }
    }

    fn apply(pod: &mut Pod, decision: Decision) {
        if let Decision::UpdateStatus { status, .. } = decision {
            pod.status = Some(*status);
        }
    }

    fn condition_status(pod: &Pod, type_: &str) -> Option<String> {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == type_))
            .map(|c| c.status.clone())
    }

    #[test]
    fn pending_until_delay_then_running_and_ready() {
        let mut p = pod(&[], None);
        assert_eq!(
            decide(&p, &cx(101)),
            Decision::Wait(Some(Duration::from_secs(1)))
        );
        let d = decide(&p, &cx(102));
        apply(&mut p, d);
        let status = p.status.clone().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.2"));
        assert_eq!(status.host_ip.as_deref(), Some("10.0.0.10"));
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
        assert_eq!(condition_status(&p, "Ready").as_deref(), Some("True"));
        assert_eq!(
            condition_status(&p, "PodScheduled").as_deref(),
            Some("True")
        );
        // Posting again changes nothing: no status churn.
        assert_eq!(decide(&p, &cx(150)), Decision::Wait(None));
    }

    #[test]
    fn ready_false_annotation_keeps_pod_unready() {
        let mut p = pod(&[(ANNOTATION_READY, "false")], None);
        let d = decide(&p, &cx(103));
        apply(&mut p, d);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        assert_eq!(condition_status(&p, "Ready").as_deref(), Some("False"));
        let reason = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter()
                    .find(|c| c.type_ == "Ready")
                    .and_then(|c| c.reason.clone())
            });
        assert_eq!(reason.as_deref(), Some("ContainersNotReady"));
        // Removing the annotation makes it ready.
        p.metadata.annotations = None;
        let d = decide(&p, &cx(104));
        apply(&mut p, d);
        assert_eq!(condition_status(&p, "Ready").as_deref(), Some("True"));
    }

    #[test]
    fn forced_phase_and_run_to_completion() {
        let mut failed = pod(&[(ANNOTATION_PHASE, "Failed")], None);
        let d = decide(&failed, &cx(100));
        apply(&mut failed, d);
        let status = failed.status.clone().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        let term = status
            .container_statuses
            .as_ref()
            .and_then(|c| c[0].state.clone())
            .and_then(|s| s.terminated);
        assert_eq!(term.map(|t| t.exit_code), Some(1));
        assert_eq!(
            decide(&failed, &cx(200)),
            Decision::Wait(None),
            "terminal is final"
        );

        let mut job = pod(&[(ANNOTATION_DURATION, "10s")], Some("Never"));
        let d = decide(&job, &cx(102));
        assert!(
            matches!(&d, Decision::UpdateStatus { recheck: Some(r), .. } if *r == Duration::from_secs(10))
        );
        apply(&mut job, d);
        assert_eq!(
            decide(&job, &cx(105)),
            Decision::Wait(Some(Duration::from_secs(7)))
        );
        let d = decide(&job, &cx(112));
        apply(&mut job, d);
        assert_eq!(
            job.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded")
        );
    }

    #[test]
    fn run_to_completion_pods_run_as_long_as_their_sleep_commands() {
        let sleeping = |argv: &[&str], args: &[&str]| {
            let mut p = pod(&[], Some("OnFailure"));
            let c = &mut p.spec.as_mut().expect("spec").containers[0];
            c.command = Some(argv.iter().map(|a| a.to_string()).collect());
            c.args = (!args.is_empty()).then(|| args.iter().map(|a| a.to_string()).collect());
            p
        };
        // Started at 102 (bound at 100, ready delay 2s): look again when the sleep ends.
        let mut p = sleeping(&["sleep", "300"], &[]);
        let d = decide(&p, &cx(102));
        assert!(
            matches!(&d, Decision::UpdateStatus { recheck: Some(r), .. } if *r == Duration::from_secs(300)),
            "{d:?}"
        );
        apply(&mut p, d);
        assert_eq!(
            decide(&p, &cx(300)),
            Decision::Wait(Some(Duration::from_secs(102)))
        );
        let d = decide(&p, &cx(402));
        apply(&mut p, d);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded")
        );

        // The operands may be in args, with units; `infinity` never ends.
        let mut p = sleeping(&["/bin/sleep"], &["1m", "30"]);
        let d = decide(&p, &cx(102));
        apply(&mut p, d);
        let d = decide(&p, &cx(191));
        apply(&mut p, d);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        let mut p = sleeping(&["sleep", "infinity"], &[]);
        let d = decide(&p, &cx(102));
        assert!(
            matches!(&d, Decision::UpdateStatus { recheck: None, .. }),
            "{d:?}"
        );
        apply(&mut p, d);
        assert_eq!(decide(&p, &cx(1_000_000)), Decision::Wait(None));

        // The annotation wins; other commands take the default.
        let mut p = sleeping(&["sleep", "300"], &[]);
        p.metadata.annotations = Some([(ANNOTATION_DURATION.to_owned(), "10s".to_owned())].into());
        let d = decide(&p, &cx(102));
        assert!(
            matches!(&d, Decision::UpdateStatus { recheck: Some(r), .. } if *r == Duration::from_secs(10))
        );
        let p = sleeping(&["/bin/true"], &[]);
        let d = decide(&p, &cx(102));
        assert!(
            matches!(&d, Decision::UpdateStatus { recheck: Some(r), .. } if *r == DEFAULT_RUN_DURATION)
        );
    }

    #[test]
    fn sleep_operands_parse_as_coreutils() {
        let ops = |a: &[&str]| parse_sleep(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(ops(&["300"]), Some(Some(Duration::from_secs(300))));
        assert_eq!(ops(&["1.5"]), Some(Some(Duration::from_millis(1500))));
        assert_eq!(
            ops(&["2m", "1h", "1d"]),
            Some(Some(Duration::from_secs(120 + 3600 + 86400)))
        );
        assert_eq!(ops(&["infinity"]), Some(None));
        assert_eq!(
            ops(&["1000d"]),
            Some(None),
            "longer than the simulator times"
        );
        assert_eq!(ops(&["99999999999999999999999999"]), Some(None));
        for bad in [
            &[][..],
            &["-1"],
            &["x"],
            &["s"],
            &["1.2.3"],
            &["1y"],
            &["NaN"],
        ] {
            assert_eq!(ops(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn deleting_pod_is_finalized() {
        let mut p = pod(&[], None);
        p.metadata.deletion_timestamp = Some(Time(ts(100)));
        assert_eq!(
            decide(&p, &cx(100)),
            Decision::Finalize { final_status: None },
            "no finalizer: simply deleted"
        );
    }

    #[test]
    fn a_deleted_pod_with_finalizers_fails_first() {
        let mut p = pod(&[], Some("Never"));
        let d = decide(&p, &cx(100));
        apply(&mut p, d);
        p.metadata.deletion_timestamp = Some(Time(ts(101)));
        p.metadata.finalizers = Some(vec!["batch.kubernetes.io/job-tracking".into()]);
        let Decision::Finalize {
            final_status: Some(status),
        } = decide(&p, &cx(102))
        else {
            panic!("want a final status");
        };
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        let term = status
            .container_statuses
            .as_ref()
            .and_then(|c| c[0].state.clone())
            .and_then(|s| s.terminated)
            .expect("terminated");
        assert_eq!(term.exit_code, KILLED_EXIT_CODE);
        assert_eq!(
            condition_status(
                &Pod {
                    status: Some(*status),
                    ..p.clone()
                },
                "Ready"
            )
            .as_deref(),
            Some("False")
        );

        // Already terminal: nothing more to post.
        let mut done = pod(&[(ANNOTATION_PHASE, "Succeeded")], None);
        let d = decide(&done, &cx(100));
        apply(&mut done, d);
        done.metadata.deletion_timestamp = Some(Time(ts(101)));
        done.metadata.finalizers = Some(vec!["f".into()]);
        assert_eq!(
            decide(&done, &cx(102)),
            Decision::Finalize { final_status: None }
        );
    }

    #[test]
    fn exit_code_annotation() {
        // Forced failure with a code.
        let mut forced = pod(
            &[(ANNOTATION_PHASE, "Failed"), (ANNOTATION_EXIT_CODE, "42")],
            None,
        );
        let d = decide(&forced, &cx(100));
        apply(&mut forced, d);
        let exit = |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c[0].state.clone())
                .and_then(|s| s.terminated)
                .map(|t| (t.exit_code, t.reason))
        };
        assert_eq!(exit(&forced), Some((42, Some("Error".into()))));

        // A run-to-completion pod exiting non-zero fails at the end of its run.
        let mut job = pod(
            &[(ANNOTATION_DURATION, "1s"), (ANNOTATION_EXIT_CODE, "3")],
            Some("Never"),
        );
        // Bound at 100, running from 102 (the ready delay), done at 103.
        let d = decide(&job, &cx(102));
        apply(&mut job, d);
        let d = decide(&job, &cx(104));
        apply(&mut job, d);
        assert_eq!(
            job.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Failed")
        );
        assert_eq!(exit(&job), Some((3, Some("Error".into()))));

        // Exit code 0 is a success; a forced success ignores the code.
        let mut ok = pod(
            &[(ANNOTATION_DURATION, "1s"), (ANNOTATION_EXIT_CODE, "0")],
            Some("OnFailure"),
        );
        let d = decide(&ok, &cx(102));
        apply(&mut ok, d);
        let d = decide(&ok, &cx(104));
        apply(&mut ok, d);
        assert_eq!(exit(&ok), Some((0, Some("Completed".into()))));
    }

    #[test]
    fn durations_and_qos() {
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("x"), None);
        assert_eq!(parse_duration("10"), None);
        assert_eq!(qos_class(&pod(&[], None)), "BestEffort");
    }
}
