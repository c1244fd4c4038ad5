//! The simulated kubelet's pod lifecycle: what status a bound pod should have, and when.
//!
//! [`decide`] is pure: given a pod, the time it was bound, the node's pod IP for it and the
//! current time, it returns the status to post (if it changed), when to look again, or that
//! the pod should be finalized. The running simulator applies decisions through the API.
//!
//! Conventions (the README documents them):
//! - a bound pod's sandbox starts after the simulator's pod-ready delay; its init containers
//!   then run in order to completion (sidecars are started and keep running), then its app
//!   containers start, each becoming ready after its probes' initial delays;
//! - how long a container runs and how it exits comes from its command ([`container_run`]:
//!   `sleep`, `true`, `false`, simple `sh -c` scripts; else [`DEFAULT_RUN_DURATION`]); a
//!   failing init container fails a `Never` pod and is restarted with back-off otherwise;
//! - app containers of `Never`/`OnFailure` pods end after their run (or
//!   `sim.kcm.io/duration`), with their exit code (or `sim.kcm.io/exit-code`), and the pod
//!   succeeds or fails with them; those of `Always` pods run until deleted;
//! - a container whose `subPathExpr` the kubelet would refuse waits as
//!   `CreateContainerConfigError` ([`subpath_error`]);
//! - `sim.kcm.io/ready=false` keeps a running pod's containers unready until removed;
//! - `sim.kcm.io/phase=Failed|Succeeded` moves the pod to that terminal phase;
//! - every status carries the pod's generation as `observedGeneration`, on the status and
//!   on each condition the kubelet writes;
//! - a pod with a `deletionTimestamp` is finalized (deleted with grace period 0); one that
//!   still has finalizers and is not terminal first moves to `Failed`, as the kubelet does for
//!   a pod it killed, so controllers waiting on the finalizer (the Job controller) see it
//!   finished.
//!
//! [`container_events`] derives the kubelet's events (`Pulled`, `Created`, `Started`,
//! `BackOff`, `Failed`, `Killing`) from what changed between two statuses.

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

mod admission;
mod command;
mod events;
mod expansion;

pub use admission::{NODE_PORTS, host_port_conflict, rejected_status, wants_host_ports};
pub use command::{Run, container_run, probe_succeeds};
pub use events::{ContainerEvent, container_events, killing_events};
pub use expansion::{expand, subpath_error};

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
        observed_generation: pod.metadata.generation,
        ..current
    }))
}

/// The kubelet's initial back-off before restarting a failed container (`backOffPeriod`).
pub const BACKOFF_INITIAL: Duration = Duration::from_secs(10);
/// The kubelet's longest back-off (`MaxContainerBackOff`).
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// The conditions the kubelet owns (upstream's `PodConditionByKubelet`, plus `PodScheduled`,
/// which it rewrites with its observed generation); others are kept as they are.
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

fn later(t: jiff::Timestamp, d: Duration) -> jiff::Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(jiff::Timestamp::MAX)
}

/// The back-off before restart number `restarts + 1`: 10 s doubling up to 5 min.
fn backoff(restarts: i32) -> Duration {
    let doublings = u32::try_from(restarts).unwrap_or(0).min(8);
    BACKOFF_INITIAL
        .saturating_mul(1 << doublings)
        .min(BACKOFF_MAX)
}

/// One finished run of a container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Exited {
    started: jiff::Timestamp,
    finished: jiff::Timestamp,
    exit_code: i32,
}

/// What a container is doing now.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Not started: `PodInitializing`, `CreateContainerConfigError`.
    Waiting {
        reason: &'static str,
        message: Option<String>,
    },
    /// Running since then.
    Running { started: jiff::Timestamp },
    /// Waiting this long to be restarted after a failure (`CrashLoopBackOff`).
    BackOff { delay: Duration },
    /// Ended and not restarted.
    Terminated(Exited),
}

/// A container's state, its restart count and its previous run.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Plan {
    state: State,
    restarts: i32,
    last: Option<Exited>,
}

impl Plan {
    fn waiting(reason: &'static str, message: Option<String>) -> Self {
        Plan {
            state: State::Waiting { reason, message },
            restarts: 0,
            last: None,
        }
    }

    fn running(started: jiff::Timestamp) -> Self {
        Plan {
            state: State::Running { started },
            restarts: 0,
            last: None,
        }
    }

    fn has_started(&self) -> bool {
        matches!(self.state, State::Running { .. } | State::Terminated(_))
    }
}

/// Where a container first started at `start`, each run being `run`, is at `now`, and when
/// that changes next. With `restart`, a run that fails is restarted after the kubelet's
/// back-off (`CrashLoopBackOff` in between), as for `restartPolicy` `Always`/`OnFailure`.
fn run_plan(
    start: jiff::Timestamp,
    run: Run,
    restart: bool,
    now: jiff::Timestamp,
) -> (Plan, Option<jiff::Timestamp>) {
    let Some(length) = run.duration else {
        return (Plan::running(start), None);
    };
    let mut started = start;
    let mut restarts = 0i32;
    let mut last = None;
    loop {
        let end = later(started, length);
        let plan = |state| Plan {
            state,
            restarts,
            last,
        };
        if now < end {
            return (plan(State::Running { started }), Some(end));
        }
        let exited = Exited {
            started,
            finished: end,
            exit_code: run.exit_code,
        };
        if run.exit_code == 0 || !restart {
            return (plan(State::Terminated(exited)), None);
        }
        let delay = backoff(restarts);
        let next = later(end, delay);
        if now < next {
            return (
                Plan {
                    state: State::BackOff { delay },
                    restarts,
                    last: Some(exited),
                },
                Some(next),
            );
        }
        last = Some(exited);
        restarts = restarts.saturating_add(1);
        started = next;
        if delay == BACKOFF_MAX {
            // At the cap every cycle is alike: skip the whole ones.
            let cycle = length.saturating_add(delay);
            let cycles = since(now, started).as_nanos() / cycle.as_nanos().max(1);
            let skip = u32::try_from(cycles.saturating_sub(1)).unwrap_or(u32::MAX);
            if skip > 0 {
                started = later(started, cycle.saturating_mul(skip));
                restarts = restarts.saturating_add(i32::try_from(skip).unwrap_or(i32::MAX));
                let previous = later(started, Duration::ZERO)
                    .checked_sub(jiff::SignedDuration::try_from(cycle).unwrap_or_default())
                    .unwrap_or(started);
                last = Some(Exited {
                    started: previous,
                    finished: later(previous, length),
                    exit_code: run.exit_code,
                });
            }
        }
    }
}

/// When a container running since `started` becomes ready: after its readiness and startup
/// probes' `initialDelaySeconds`; `None` when a probe is known to fail (see
/// [`probe_succeeds`]).
fn ready_at(container: &Container, started: jiff::Timestamp) -> Option<jiff::Timestamp> {
    let mut delay = 0i32;
    for probe in [&container.readiness_probe, &container.startup_probe]
        .into_iter()
        .flatten()
    {
        if !probe_succeeds(probe) {
            return None;
        }
        delay = delay.max(probe.initial_delay_seconds.unwrap_or(0));
    }
    Some(later(
        started,
        Duration::from_secs(u64::try_from(delay).unwrap_or(0)),
    ))
}

fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// The started-at of the first run `previous` shows, if it shows one.
fn previous_start(previous: Option<&ContainerStatus>) -> Option<jiff::Timestamp> {
    let state = previous.filter(|p| p.restart_count == 0)?.state.as_ref()?;
    state
        .running
        .as_ref()
        .and_then(|r| r.started_at.as_ref())
        .or_else(|| {
            state
                .terminated
                .as_ref()
                .and_then(|t| t.started_at.as_ref())
        })
        .map(|t| t.0)
}

fn was_refused(previous: Option<&ContainerStatus>) -> bool {
    previous
        .and_then(|p| p.state.as_ref())
        .and_then(|s| s.waiting.as_ref())
        .is_some_and(|w| w.reason.as_deref() == Some("CreateContainerConfigError"))
}

fn terminated(exited: &Exited, container_id: &str) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: exited.exit_code,
        reason: Some(
            if exited.exit_code == 0 {
                "Completed"
            } else {
                "Error"
            }
            .into(),
        ),
        started_at: Some(Time(exited.started)),
        finished_at: Some(Time(exited.finished)),
        container_id: Some(container_id.to_owned()),
        ..Default::default()
    }
}

/// The status of `container` in `plan`, keeping the state `previous` posted when it is the
/// same run in the same state (its timestamps then stay as they were: no status churn).
fn container_status(
    pod: &Pod,
    container: &Container,
    plan: &Plan,
    ready: bool,
    previous: Option<&ContainerStatus>,
) -> ContainerStatus {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let container_id = format!("kcm-sim://{uid}-{}", container.name);
    let state = match &plan.state {
        State::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some((*reason).into()),
                message: message.clone(),
            }),
            ..Default::default()
        },
        State::Running { started } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(*started)),
            }),
            ..Default::default()
        },
        State::BackOff { delay } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("CrashLoopBackOff".into()),
                message: Some(format!(
                    "back-off {}s restarting failed container={} pod={}_{}({uid})",
                    delay.as_secs(),
                    container.name,
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                )),
            }),
            ..Default::default()
        },
        State::Terminated(exited) => ContainerState {
            terminated: Some(terminated(exited, &container_id)),
            ..Default::default()
        },
    };
    let same_run = previous.filter(|p| p.restart_count == plan.restarts);
    let state = match same_run.and_then(|p| p.state.clone()) {
        Some(prev) if prev.running.is_some() && state.running.is_some() => prev,
        Some(prev)
            if prev.terminated.as_ref().map(|t| t.exit_code)
                == state.terminated.as_ref().map(|t| t.exit_code)
                && state.terminated.is_some() =>
        {
            prev
        }
        _ => state,
    };
    let last_state = plan.last.as_ref().map(|exited| ContainerState {
        terminated: Some(terminated(exited, &container_id)),
        ..Default::default()
    });
    let last_state = match same_run.and_then(|p| p.last_state.clone()) {
        Some(prev) if prev.terminated.is_some() && last_state.is_some() => Some(prev),
        _ => last_state,
    };
    let image = container.image.clone().unwrap_or_default();
    ContainerStatus {
        name: container.name.clone(),
        image: image.clone(),
        image_id: format!("kcm-sim://{image}"),
        container_id: Some(container_id),
        ready,
        restart_count: plan.restarts,
        started: Some(matches!(plan.state, State::Running { .. })),
        state: Some(state),
        last_state,
        ..Default::default()
    }
}

/// Upstream's Go `%s` of a `[]string`: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// The status the kubelet would post for `pod` now, and when to look again.
///
/// The pod's sandbox starts after the ready delay; its init containers then run in order,
/// each to completion (a sidecar — `restartPolicy: Always` — is started and the next one
/// follows at once), and the app containers start when the last one succeeded, as the
/// kubelet's `computeInitContainerActions`. A container whose `subPathExpr` the kubelet would
/// refuse stays `Waiting` (`CreateContainerConfigError`) until the pod changes so that it
/// expands.
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
    let now = cx.now;
    let bound_at = cx.bound_at.unwrap_or(now);
    let start_at = later(bound_at, cx.ready_delay);

    let forced = annotation(pod, ANNOTATION_PHASE).filter(|p| matches!(*p, "Failed" | "Succeeded"));
    if forced.is_none() && now < start_at {
        return Decision::Wait(Some(since(start_at, now)));
    }
    let started = current
        .start_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(start_at.min(now));
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let run_to_completion = matches!(policy, "Never" | "OnFailure");
    let never_ready = annotation(pod, ANNOTATION_READY) == Some("false");
    let mut next: Option<jiff::Timestamp> = None;
    let mut wake = |at: Option<jiff::Timestamp>| {
        if let Some(at) = at {
            next = Some(next.map_or(at, |n| n.min(at)));
        }
    };
    let previous = |statuses: &Option<Vec<ContainerStatus>>, name: &str| {
        statuses.iter().flatten().find(|s| s.name == name).cloned()
    };

    // Init containers, in order; `at` is when the next one starts (`None`: not yet).
    let init_specs = spec.init_containers.as_deref().unwrap_or(&[]);
    let mut at = Some(started);
    let mut init_failed = false;
    let mut init_plans: Vec<Plan> = Vec::with_capacity(init_specs.len());
    for c in init_specs {
        let Some(start) = at else {
            init_plans.push(Plan::waiting("PodInitializing", None));
            continue;
        };
        if let Some(message) = subpath_error(pod, c) {
            init_plans.push(Plan::waiting("CreateContainerConfigError", Some(message)));
            at = None;
            continue;
        }
        if is_sidecar(c) {
            let prev = previous(&current.init_container_statuses, &c.name);
            init_plans.push(Plan::running(
                previous_start(prev.as_ref()).unwrap_or(start),
            ));
            continue;
        }
        let (plan, change) = run_plan(start, container_run(c), policy != "Never", now);
        wake(change);
        at = match plan.state {
            State::Terminated(exited) if exited.exit_code == 0 => Some(exited.finished),
            State::Terminated(_) => {
                init_failed = true;
                None
            }
            _ => None,
        };
        init_plans.push(plan);
    }

    // App containers, once initialized.
    let duration = annotation(pod, ANNOTATION_DURATION).and_then(parse_duration);
    let exit_code = annotated_exit_code(pod);
    let mut app_plans: Vec<Plan> = Vec::with_capacity(spec.containers.len());
    for c in &spec.containers {
        let Some(apps_at) = at else {
            app_plans.push(Plan::waiting("PodInitializing", None));
            continue;
        };
        if let Some(message) = subpath_error(pod, c) {
            app_plans.push(Plan::waiting("CreateContainerConfigError", Some(message)));
            continue;
        }
        let prev = previous(&current.container_statuses, &c.name);
        let start = previous_start(prev.as_ref()).unwrap_or(if was_refused(prev.as_ref()) {
            now
        } else {
            apps_at
        });
        if run_to_completion {
            let own = container_run(c);
            let run = Run {
                duration: duration.map(Some).unwrap_or(own.duration),
                exit_code: exit_code.unwrap_or(own.exit_code),
            };
            let (plan, change) = run_plan(start, run, false, now);
            wake(change);
            app_plans.push(plan);
        } else {
            app_plans.push(Plan::running(start));
        }
    }

    let all_apps_done = app_plans
        .iter()
        .all(|p| matches!(p.state, State::Terminated(_)));
    // The kubelet's active deadline (`activeDeadlineHandler`): counted from the pod's
    // start; once it has passed, the pod fails and what runs is killed.
    let deadline = spec
        .active_deadline_seconds
        .filter(|s| *s >= 0)
        .map(|s| later(started, Duration::from_secs(s.unsigned_abs())));
    let deadline_exceeded = forced.is_none() && deadline.is_some_and(|d| d <= now);
    if !deadline_exceeded {
        wake(deadline);
    }
    let killed = forced.is_some() || deadline_exceeded;
    let finished = if let Some(phase) = forced {
        Some(phase)
    } else if deadline_exceeded || (init_failed && policy == "Never") {
        Some("Failed")
    } else if run_to_completion && at.is_some() && all_apps_done {
        let failed = app_plans
            .iter()
            .any(|p| matches!(p.state, State::Terminated(e) if e.exit_code != 0));
        Some(if failed { "Failed" } else { "Succeeded" })
    } else {
        None
    };
    if let Some(phase) = finished {
        // What still runs stops with the pod: a forced phase ends every container with its
        // code; sidecars are stopped once the app containers are done.
        let code = if phase == "Succeeded" {
            0
        } else if deadline_exceeded {
            KILLED_EXIT_CODE
        } else {
            exit_code.filter(|c| *c != 0).unwrap_or(1)
        };
        for plan in &mut app_plans {
            if killed && !matches!(plan.state, State::Terminated(_)) {
                let from = match plan.state {
                    State::Running { started } => started,
                    _ => now,
                };
                plan.state = State::Terminated(Exited {
                    started: from,
                    finished: now,
                    exit_code: code,
                });
            }
        }
        for plan in &mut init_plans {
            if let State::Running { started } = plan.state {
                plan.state = State::Terminated(Exited {
                    started,
                    finished: now,
                    exit_code: if killed { code } else { 0 },
                });
            }
        }
    }

    // Readiness: a running container is ready once its probes' initial delays have passed; a
    // regular init container that succeeded counts as ready.
    let mut readiness = |c: &Container, plan: &Plan| match plan.state {
        State::Running { started } if !never_ready => match ready_at(c, started) {
            Some(at) if at <= now => true,
            Some(at) => {
                wake(Some(at));
                false
            }
            None => false,
        },
        _ => false,
    };
    let init_ready: Vec<bool> = init_specs
        .iter()
        .zip(&init_plans)
        .map(|(c, plan)| {
            if is_sidecar(c) {
                readiness(c, plan)
            } else {
                matches!(plan.state, State::Terminated(e) if e.exit_code == 0)
            }
        })
        .collect();
    let app_ready: Vec<bool> = spec
        .containers
        .iter()
        .zip(&app_plans)
        .map(|(c, plan)| readiness(c, plan))
        .collect();

    let init_statuses: Vec<ContainerStatus> = init_specs
        .iter()
        .zip(&init_plans)
        .zip(&init_ready)
        .map(|((c, plan), ready)| {
            let prev = previous(&current.init_container_statuses, &c.name);
            container_status(pod, c, plan, *ready, prev.as_ref())
        })
        .collect();
    let container_statuses: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .zip(&app_plans)
        .zip(&app_ready)
        .map(|((c, plan), ready)| {
            let prev = previous(&current.container_statuses, &c.name);
            container_status(pod, c, plan, *ready, prev.as_ref())
        })
        .collect();

    let conditions = pod_conditions(
        pod,
        &current,
        &PodProgress {
            finished,
            init_specs,
            init_plans: &init_plans,
            init_ready: &init_ready,
            app_plans: &app_plans,
            app_ready: &app_ready,
            bound_at,
        },
        now,
    );
    let waiting = app_plans.iter().any(|p| !p.has_started());
    let new_phase = finished.unwrap_or(if at.is_none() || waiting {
        "Pending"
    } else {
        "Running"
    });
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
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        container_statuses: Some(container_statuses),
        qos_class: Some(
            current
                .qos_class
                .clone()
                .unwrap_or_else(|| qos_class(pod).into()),
        ),
        observed_generation: pod.metadata.generation,
        reason: if deadline_exceeded {
            Some("DeadlineExceeded".into())
        } else {
            current.reason.clone()
        },
        message: if deadline_exceeded {
            Some("Pod was active on the node longer than the specified deadline".into())
        } else {
            current.message.clone()
        },
        ..current.clone()
    };
    let recheck = finished
        .is_none()
        .then_some(next)
        .flatten()
        .map(|at| since(at, now));
    if status == current {
        Decision::Wait(recheck)
    } else {
        Decision::UpdateStatus {
            status: Box::new(status),
            recheck,
        }
    }
}

/// What [`pod_conditions`] reads of a pod's containers.
struct PodProgress<'a> {
    finished: Option<&'a str>,
    init_specs: &'a [Container],
    init_plans: &'a [Plan],
    init_ready: &'a [bool],
    app_plans: &'a [Plan],
    app_ready: &'a [bool],
    bound_at: jiff::Timestamp,
}

/// The pod's conditions, as upstream's `GeneratePodInitializedCondition`,
/// `GenerateContainersReadyCondition` and `GeneratePodReadyCondition` (readiness gates
/// included), each carrying the pod's generation; conditions the kubelet does not own are
/// kept.
fn pod_conditions(
    pod: &Pod,
    current: &PodStatus,
    p: &PodProgress<'_>,
    now: jiff::Timestamp,
) -> Vec<PodCondition> {
    let spec = pod.spec.as_ref();
    let generation = pod.metadata.generation;
    let existing = current.conditions.as_deref().unwrap_or(&[]);
    let make =
        |type_: &str, status: bool, reason: Option<&str>, message: Option<String>| PodCondition {
            observed_generation: generation,
            ..condition(existing, type_, status, reason, message, now)
        };

    let incomplete: Vec<&str> = p
        .init_specs
        .iter()
        .zip(p.init_plans.iter().zip(p.init_ready))
        .filter(|(c, (plan, ready))| {
            if is_sidecar(c) {
                !matches!(plan.state, State::Running { .. })
            } else {
                !**ready
            }
        })
        .map(|(c, _)| c.name.as_str())
        .collect();
    let initialized = if p.finished == Some("Succeeded") {
        make("Initialized", true, Some("PodCompleted"), None)
    } else if p.app_plans.iter().any(Plan::has_started) || incomplete.is_empty() {
        make("Initialized", true, None, None)
    } else {
        make(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: {}",
                go_list(&incomplete)
            )),
        )
    };

    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
    let mut unready: Vec<&str> = p
        .init_specs
        .iter()
        .zip(p.init_ready)
        .filter(|(c, ready)| is_sidecar(c) && !**ready)
        .map(|(c, _)| c.name.as_str())
        .collect();
    unready.extend(
        containers
            .iter()
            .zip(p.app_ready)
            .filter(|(_, ready)| !**ready)
            .map(|(c, _)| c.name.as_str()),
    );
    let (ready, reason, message) = match p.finished {
        Some("Succeeded") => (false, Some("PodCompleted"), None),
        Some(_) => (false, Some("PodFailed"), None),
        None if !unready.is_empty() => (
            false,
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: {}",
                go_list(&unready)
            )),
        ),
        None => (true, None, None),
    };
    let containers_ready = make("ContainersReady", ready, reason, message.clone());
    let pod_ready = if !ready {
        make("Ready", false, reason, message)
    } else {
        let gates: Vec<String> = spec
            .and_then(|s| s.readiness_gates.as_ref())
            .into_iter()
            .flatten()
            .filter_map(
                |gate| match existing.iter().find(|c| c.type_ == gate.condition_type) {
                    None => Some(format!(
                        "corresponding condition of pod readiness gate \"{}\" does not exist.",
                        gate.condition_type
                    )),
                    Some(c) if c.status != "True" => Some(format!(
                        "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                        gate.condition_type, c.status
                    )),
                    Some(_) => None,
                },
            )
            .collect();
        if gates.is_empty() {
            make("Ready", true, None, None)
        } else {
            make(
                "Ready",
                false,
                Some("ReadinessGatesNotReady"),
                Some(gates.join(", ")),
            )
        }
    };

    let mut conditions: Vec<PodCondition> = existing
        .iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    conditions.push(make(
        "PodReadyToStartContainers",
        p.finished.is_none(),
        None,
        None,
    ));
    conditions.push(initialized);
    conditions.push(pod_ready);
    conditions.push(containers_ready);
    let scheduled = match existing.iter().find(|c| c.type_ == "PodScheduled") {
        Some(scheduled) => PodCondition {
            observed_generation: generation,
            ..scheduled.clone()
        },
        None => PodCondition {
            observed_generation: generation,
            ..condition(existing, "PodScheduled", true, None, None, p.bound_at)
        },
    };
    conditions.push(scheduled);
    conditions
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
    fn an_active_deadline_fails_the_pod_and_kills_its_containers() {
        let mut p = pod(&[], None);
        let d = decide(&p, &cx(102));
        apply(&mut p, d);
        assert_eq!(decide(&p, &cx(150)), Decision::Wait(None));
        // An update sets a deadline of 60 s from the start (102): a recheck when it passes.
        if let Some(spec) = p.spec.as_mut() {
            spec.active_deadline_seconds = Some(60);
        }
        assert_eq!(
            decide(&p, &cx(150)),
            Decision::Wait(Some(Duration::from_secs(12)))
        );
        let d = decide(&p, &cx(162));
        apply(&mut p, d);
        let status = p.status.clone().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
        assert_eq!(
            status.message.as_deref(),
            Some("Pod was active on the node longer than the specified deadline")
        );
        let terminated = status
            .container_statuses
            .iter()
            .flatten()
            .map(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .map(|t| t.exit_code)
            })
            .collect::<Vec<_>>();
        assert_eq!(terminated, vec![Some(KILLED_EXIT_CODE)]);
        assert_eq!(condition_status(&p, "Ready").as_deref(), Some("False"));
        assert_eq!(decide(&p, &cx(170)), Decision::Wait(None), "terminal");
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
        let p = sleeping(&["cat", "/etc/hosts"], &[]);
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

    fn init(name: &str, command: &[&str]) -> Container {
        container(name)
            .image("busybox")
            .with(|c| c.command = Some(command.iter().map(|s| s.to_string()).collect()))
            .build()
    }

    fn statuses(p: &Pod, init: bool) -> Vec<ContainerStatus> {
        let s = p.status.as_ref().expect("status");
        if init {
            s.init_container_statuses.clone().unwrap_or_default()
        } else {
            s.container_statuses.clone().unwrap_or_default()
        }
    }

    fn cond(p: &Pod, type_: &str) -> PodCondition {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == type_))
            .cloned()
            .expect("condition")
    }

    fn step(p: &mut Pod, now: i64) -> Option<Duration> {
        match decide(p, &cx(now)) {
            Decision::UpdateStatus { status, recheck } => {
                p.status = Some(*status);
                recheck
            }
            Decision::Wait(recheck) => recheck,
            Decision::Finalize { .. } => panic!("not deleting"),
        }
    }

    #[test]
    fn init_containers_run_in_order_before_the_app_containers() {
        let mut p = pod(&[], Some("Never"));
        let spec = p.spec.as_mut().expect("spec");
        spec.init_containers = Some(vec![
            init("init1", &["sleep", "3"]),
            init("init2", &["/bin/true"]),
        ]);
        spec.containers[0].command = Some(vec!["/bin/true".into()]);
        // Started at 102: init1 runs for 3 s, the app waits.
        assert_eq!(step(&mut p, 102), Some(Duration::from_secs(3)));
        let inits = statuses(&p, true);
        assert!(
            inits[0]
                .state
                .as_ref()
                .and_then(|s| s.running.as_ref())
                .is_some()
        );
        let waiting = |s: &ContainerStatus| {
            s.state
                .as_ref()
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.clone())
        };
        assert_eq!(waiting(&inits[1]).as_deref(), Some("PodInitializing"));
        assert_eq!(
            waiting(&statuses(&p, false)[0]).as_deref(),
            Some("PodInitializing")
        );
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Pending")
        );
        let initialized = cond(&p, "Initialized");
        assert_eq!(initialized.status, "False");
        assert_eq!(
            initialized.reason.as_deref(),
            Some("ContainersNotInitialized")
        );
        assert_eq!(
            initialized.message.as_deref(),
            Some("containers with incomplete status: [init1 init2]")
        );
        // At 105 both init containers are done (init2 exits at once) and so is the app.
        step(&mut p, 105);
        let status = p.status.clone().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Succeeded"));
        for s in statuses(&p, true) {
            let t = s.state.and_then(|s| s.terminated).expect("terminated");
            assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
            assert!(s.ready, "a completed init container is ready");
        }
        assert_eq!(cond(&p, "Initialized").status, "True");
    }

    #[test]
    fn a_failed_init_container_fails_a_never_pod_and_restarts_with_back_off_otherwise() {
        let mut never = pod(&[], Some("Never"));
        never.spec.as_mut().expect("spec").init_containers = Some(vec![
            init("init1", &["/bin/true"]),
            init("init2", &["/bin/false"]),
        ]);
        step(&mut never, 102);
        let status = never.status.clone().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        let second = &statuses(&never, true)[1];
        assert_eq!(
            second
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code),
            Some(1)
        );
        assert_eq!(
            cond(&never, "Initialized").message.as_deref(),
            Some("containers with incomplete status: [init2]")
        );
        assert!(
            statuses(&never, false)[0]
                .state
                .as_ref()
                .is_some_and(|s| s.waiting.is_some())
        );

        let mut always = pod(&[], None);
        always.spec.as_mut().expect("spec").init_containers =
            Some(vec![init("init1", &["/bin/false"])]);
        // Fails at 102, back-off 10 s, 20 s, 40 s: the third restart is at 172.
        assert_eq!(step(&mut always, 102), Some(Duration::from_secs(10)));
        let first = &statuses(&always, true)[0];
        assert_eq!(first.restart_count, 0);
        assert_eq!(
            first
                .state
                .as_ref()
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref()),
            Some("CrashLoopBackOff")
        );
        assert!(
            first
                .last_state
                .as_ref()
                .is_some_and(|s| s.terminated.is_some())
        );
        step(&mut always, 172);
        assert_eq!(statuses(&always, true)[0].restart_count, 3);
        assert_eq!(
            always.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Pending")
        );
        // Far in the future the count keeps growing, 5 min apart.
        step(&mut always, 172 + 10 * 3600);
        assert!(statuses(&always, true)[0].restart_count > 100);
    }

    #[test]
    fn sidecars_keep_running_and_count_for_readiness() {
        let mut p = pod(&[], None);
        let mut sidecar = init("proxy", &["sleep", "infinity"]);
        sidecar.restart_policy = Some("Always".into());
        sidecar.readiness_probe = Some(k8s_openapi::api::core::v1::Probe {
            initial_delay_seconds: Some(5),
            ..Default::default()
        });
        p.spec.as_mut().expect("spec").init_containers = Some(vec![sidecar]);
        step(&mut p, 102);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        assert_eq!(cond(&p, "Initialized").status, "True");
        assert_eq!(cond(&p, "Ready").status, "False");
        assert_eq!(
            cond(&p, "Ready").message.as_deref(),
            Some("containers with unready status: [proxy]")
        );
        step(&mut p, 107);
        assert_eq!(cond(&p, "Ready").status, "True");
        assert!(
            statuses(&p, true)[0]
                .state
                .as_ref()
                .is_some_and(|s| s.running.is_some())
        );
    }

    #[test]
    fn readiness_waits_for_the_probes_initial_delay() {
        let mut p = pod(&[], None);
        p.spec.as_mut().expect("spec").containers[0].readiness_probe =
            Some(k8s_openapi::api::core::v1::Probe {
                initial_delay_seconds: Some(20),
                ..Default::default()
            });
        assert_eq!(step(&mut p, 102), Some(Duration::from_secs(20)));
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        assert_eq!(cond(&p, "Ready").status, "False");
        assert!(!statuses(&p, false)[0].ready);
        step(&mut p, 122);
        let ready = cond(&p, "Ready");
        assert_eq!(ready.status, "True");
        assert_eq!(ready.last_transition_time, Some(Time(ts(122))));
        assert_eq!(statuses(&p, false)[0].restart_count, 0);

        // An exec probe known to fail never passes.
        let mut failing = pod(&[], None);
        failing.spec.as_mut().expect("spec").containers[0].readiness_probe =
            Some(k8s_openapi::api::core::v1::Probe {
                exec: Some(k8s_openapi::api::core::v1::ExecAction {
                    command: Some(vec!["/bin/false".into()]),
                }),
                ..Default::default()
            });
        step(&mut failing, 200);
        assert_eq!(cond(&failing, "Ready").status, "False");
    }

    #[test]
    fn observed_generation_follows_the_pods_generation() {
        let mut p = pod(&[], None);
        p.metadata.generation = Some(1);
        step(&mut p, 102);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.observed_generation),
            Some(1)
        );
        for type_ in [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        ] {
            assert_eq!(cond(&p, type_).observed_generation, Some(1), "{type_}");
        }
        p.metadata.generation = Some(7);
        step(&mut p, 103);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.observed_generation),
            Some(7)
        );
        assert_eq!(cond(&p, "Ready").observed_generation, Some(7));
        assert_eq!(
            decide(&p, &cx(104)),
            Decision::Wait(None),
            "then nothing to post"
        );
    }

    #[test]
    fn a_refused_subpath_keeps_the_container_waiting_until_the_pod_fixes_it() {
        use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, VolumeMount};
        let mut p = pod(&[], Some("Never"));
        let c = &mut p.spec.as_mut().expect("spec").containers[0];
        c.command = Some(vec!["sh".into(), "-c".into(), "tail -f /dev/null".into()]);
        c.env = Some(vec![EnvVar {
            name: "ANNOTATION".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.annotations['mysubpath']".into(),
                    api_version: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        c.volume_mounts = Some(vec![VolumeMount {
            name: "workdir1".into(),
            mount_path: "/subpath_mount".into(),
            sub_path_expr: Some("$(ANNOTATION)/foo".into()),
            ..Default::default()
        }]);
        step(&mut p, 102);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Pending")
        );
        let waiting = statuses(&p, false)[0]
            .state
            .clone()
            .and_then(|s| s.waiting)
            .expect("waiting");
        assert_eq!(
            waiting.reason.as_deref(),
            Some("CreateContainerConfigError")
        );
        assert_eq!(
            waiting.message.as_deref(),
            Some("missing value for ANNOTATION")
        );
        p.metadata.annotations = Some([("mysubpath".to_owned(), "mypath".to_owned())].into());
        step(&mut p, 150);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        let running = statuses(&p, false)[0]
            .state
            .clone()
            .and_then(|s| s.running)
            .expect("running");
        assert_eq!(
            running.started_at,
            Some(Time(ts(150))),
            "started when it could"
        );
    }

    #[test]
    fn events_follow_container_starts_back_offs_and_refusals() {
        let mut p = pod(&[], None);
        p.spec.as_mut().expect("spec").init_containers = Some(vec![init("init1", &["/bin/false"])]);
        let before = PodStatus::default();
        step(&mut p, 102);
        let after = p.status.clone().expect("status");
        let reasons: Vec<&str> = container_events(&p, &before, &after)
            .iter()
            .map(|e| e.reason)
            .collect();
        assert_eq!(reasons, ["Pulled", "Created", "Started", "BackOff"]);
        let events = container_events(&p, &before, &after);
        assert_eq!(events[0].field_path, "spec.initContainers{init1}");
        assert_eq!(
            events[0].message,
            "Container image \"busybox\" already present on machine and can be accessed by the pod"
        );
        assert!(
            container_events(&p, &after, &after).is_empty(),
            "nothing new"
        );
        step(&mut p, 112);
        let restarted = p.status.clone().expect("status");
        let reasons: Vec<&str> = container_events(&p, &after, &restarted)
            .iter()
            .map(|e| e.reason)
            .collect();
        assert_eq!(reasons, ["Pulled", "Created", "Started", "BackOff"]);
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
