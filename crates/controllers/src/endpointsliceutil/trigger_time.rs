//! The `endpoints.kubernetes.io/last-change-trigger-time` value per Service, as upstream's `TriggerTimeTracker`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Service};

/// The trigger times last seen for one Service.
#[derive(Clone, Debug, Default)]
struct ServiceState {
    /// The Service's own trigger time (its creation time).
    last_service_trigger_time: Option<Timestamp>,
    /// Each selected pod's trigger time (its Ready condition's last transition), by name.
    last_pod_trigger_times: HashMap<String, Timestamp>,
}

/// Computes when the change that an endpoints write reflects happened, as upstream's
/// `TriggerTimeTracker`: the earliest trigger time (pod readiness transitions, the Service's
/// creation) that changed since the previous sync of the Service; the Service's creation time
/// for its first sync. The value can be wrong when one object changes twice between syncs,
/// as upstream accepts.
///
/// Calls for one Service must not run concurrently (the work queue's guarantee); the lock only
/// guards the map.
#[derive(Debug, Default)]
pub struct TriggerTimeTracker {
    states: Mutex<HashMap<(String, String), ServiceState>>,
}

impl TriggerTimeTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    fn states(&self) -> MutexGuard<'_, HashMap<(String, String), ServiceState>> {
        self.states.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Updates the state of `service` from `pods` and returns the time to export (`None`: no
    /// new trigger, the annotation is removed), as upstream's
    /// `ComputeEndpointLastChangeTriggerTime`.
    pub fn compute_endpoint_last_change_trigger_time(
        &self,
        namespace: &str,
        service: &Service,
        pods: &[Arc<Pod>],
    ) -> Option<Timestamp> {
        let key = (
            namespace.to_owned(),
            service.metadata.name.clone().unwrap_or_default(),
        );
        let previous = self.states().get(&key).cloned();
        let was_known = previous.is_some();
        let state = previous.unwrap_or_default();

        let mut min_changed: Option<Timestamp> = None;
        let mut pod_times = HashMap::with_capacity(pods.len());
        for pod in pods {
            let Some(time) = pod_trigger_time(pod) else {
                continue;
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if state
                .last_pod_trigger_times
                .get(&name)
                .is_none_or(|last| time > *last)
            {
                min_changed = Some(min_changed.map_or(time, |m| m.min(time)));
            }
            pod_times.insert(name, time);
        }
        let service_time = service.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(time) = service_time
            && state
                .last_service_trigger_time
                .is_none_or(|last| time > last)
        {
            min_changed = Some(min_changed.map_or(time, |m| m.min(time)));
        }
        self.states().insert(
            key,
            ServiceState {
                last_service_trigger_time: service_time,
                last_pod_trigger_times: pod_times,
            },
        );
        if !was_known {
            // A new Service: its creation is what its endpoints reflect.
            return service_time;
        }
        min_changed
    }

    /// Forgets Service `namespace/name`, as upstream's `DeleteService`.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        self.states()
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// How many Services the tracker holds state for.
    pub fn tracked_services(&self) -> usize {
        self.states().len()
    }
}

/// When the pod change that matters to endpoints happened: its Ready condition's last
/// transition.
fn pod_trigger_time(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

#[cfg(test)]
mod tests {
    use kcm_testing::prelude::*;

    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).expect("ts")
    }

    #[test]
    fn first_sync_reports_creation_then_changed_pods() {
        let tracker = TriggerTimeTracker::new();
        let svc = service("svc").namespace("ns").created_at(t(0)).build();
        let p1 = pod("p1").namespace("ns").ready_since(t(10)).arc();
        let p2 = pod("p2").namespace("ns").ready_since(t(20)).arc();
        assert_eq!(
            tracker.compute_endpoint_last_change_trigger_time("ns", &svc, &[Arc::clone(&p1)]),
            Some(t(0)),
            "new Service"
        );
        assert_eq!(
            tracker.compute_endpoint_last_change_trigger_time("ns", &svc, &[Arc::clone(&p1)]),
            None,
            "nothing changed"
        );
        assert_eq!(
            tracker.compute_endpoint_last_change_trigger_time(
                "ns",
                &svc,
                &[Arc::clone(&p1), Arc::clone(&p2)]
            ),
            Some(t(20)),
            "a pod became ready"
        );
        let p1b = pod("p1").namespace("ns").ready_since(t(30)).arc();
        let p3 = pod("p3").namespace("ns").ready_since(t(25)).arc();
        assert_eq!(
            tracker.compute_endpoint_last_change_trigger_time("ns", &svc, &[p1b, p2, p3]),
            Some(t(25)),
            "the earliest change"
        );
        tracker.delete_service("ns", "svc");
        assert_eq!(
            tracker.compute_endpoint_last_change_trigger_time("ns", &svc, &[]),
            Some(t(0)),
            "known again as new"
        );
    }
}
