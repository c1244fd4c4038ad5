//! The events a kubelet records about a pod's containers, derived from what changed between
//! the status it had and the one the simulator posts (upstream's `kuberuntime_container.go`
//! and `images/image_manager.go` messages).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

use kcm_machinery::events::EventType;

/// One event about one container of a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerEvent {
    /// `spec.containers{name}` or `spec.initContainers{name}`.
    pub field_path: String,
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// `Pulled`, `Created`, `Started`, `BackOff`, `Failed`, `Killing`.
    pub reason: &'static str,
    /// The kubelet's message.
    pub message: String,
}

/// How many runs of the container a status shows started: none while it waits to start for
/// the first time, else one more than its restarts (the current or last run included).
fn runs_started(status: &ContainerStatus) -> i64 {
    let state = status.state.as_ref();
    let ran = state.is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        || status
            .last_state
            .as_ref()
            .is_some_and(|s| s.terminated.is_some());
    if ran {
        i64::from(status.restart_count) + 1
    } else {
        0
    }
}

fn waiting_reason(status: &ContainerStatus) -> Option<(&str, Option<&str>)> {
    let waiting = status.state.as_ref()?.waiting.as_ref()?;
    Some((waiting.reason.as_deref()?, waiting.message.as_deref()))
}

/// The kubelet's `format.Pod`: `name_namespace(uid)`.
fn pod_id(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// The events for going from `old` to `new`: `Pulled`, `Created`, `Started` for each run a
/// container started; `BackOff` when it enters `CrashLoopBackOff`; `Failed` when its
/// configuration is refused (`CreateContainerConfigError`).
pub fn container_events(pod: &Pod, old: &PodStatus, new: &PodStatus) -> Vec<ContainerEvent> {
    let mut events = Vec::new();
    let groups = [
        (
            "initContainers",
            &old.init_container_statuses,
            &new.init_container_statuses,
        ),
        (
            "containers",
            &old.container_statuses,
            &new.container_statuses,
        ),
    ];
    for (list, old_statuses, new_statuses) in groups {
        for status in new_statuses.iter().flatten() {
            let before = old_statuses
                .iter()
                .flatten()
                .find(|s| s.name == status.name);
            let field_path = format!("spec.{list}{{{}}}", status.name);
            let event = |type_, reason, message| ContainerEvent {
                field_path: field_path.clone(),
                type_,
                reason,
                message,
            };
            if runs_started(status) > before.map_or(0, runs_started) {
                events.push(event(
                    EventType::Normal,
                    "Pulled",
                    format!(
                        "Container image \"{}\" already present on machine and can be accessed by the pod",
                        status.image
                    ),
                ));
                events.push(event(
                    EventType::Normal,
                    "Created",
                    "Container created".into(),
                ));
                events.push(event(
                    EventType::Normal,
                    "Started",
                    "Container started".into(),
                ));
            }
            let Some((reason, message)) = waiting_reason(status) else {
                continue;
            };
            if before.and_then(waiting_reason) == Some((reason, message)) {
                continue;
            }
            match reason {
                "CrashLoopBackOff" => events.push(event(
                    EventType::Warning,
                    "BackOff",
                    format!(
                        "Back-off restarting failed container {} in pod {}",
                        status.name,
                        pod_id(pod)
                    ),
                )),
                "CreateContainerConfigError" => events.push(event(
                    EventType::Warning,
                    "Failed",
                    format!("Error: {}", message.unwrap_or_default()),
                )),
                _ => {}
            }
        }
    }
    events
}

/// `Killing` events for the containers running when the pod is deleted.
pub fn killing_events(status: &PodStatus) -> Vec<ContainerEvent> {
    let groups = [
        ("initContainers", &status.init_container_statuses),
        ("containers", &status.container_statuses),
    ];
    groups
        .into_iter()
        .flat_map(|(list, statuses)| {
            statuses
                .iter()
                .flatten()
                .filter(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
                .map(move |s| ContainerEvent {
                    field_path: format!("spec.{list}{{{}}}", s.name),
                    type_: EventType::Normal,
                    reason: "Killing",
                    message: format!("Stopping container {}", s.name),
                })
        })
        .collect()
}
