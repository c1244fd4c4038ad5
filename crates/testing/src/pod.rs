//! Pods: [`pod`] and the [`PodBuilder`] status setters (phase, conditions, container statuses).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodIP, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::conditions::pod_condition;
use crate::meta::MetaBuilder;
use crate::pod_spec::PodSpecBuilder;

/// Builds a [`Pod`]: metadata through [`MetaBuilder`], spec through [`PodSpecBuilder`],
/// status here. Start with [`pod`]; `PodBuilder::default()` is a pod with no name.
#[derive(Clone, Debug, Default)]
pub struct PodBuilder {
    pod: Pod,
}

/// A pod named `name`; no namespace, spec or status.
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder::default().name(name)
}

impl PodBuilder {
    /// Makes `status` present even if no setter fills it.
    pub fn default_status(mut self) -> Self {
        self.status_mut();
        self
    }

    /// Sets `status.phase` (`"Pending"`, `"Running"`, `"Succeeded"`, `"Failed"`).
    pub fn phase(mut self, phase: &str) -> Self {
        self.status_mut().phase = Some(phase.to_owned());
        self
    }

    /// Appends a condition (see [`crate::pod_condition`]).
    pub fn condition(mut self, condition: impl Into<PodCondition>) -> Self {
        self.status_mut()
            .conditions
            .get_or_insert_default()
            .push(condition.into());
        self
    }

    /// Appends the condition `Ready=True`, with no transition time.
    pub fn ready(self) -> Self {
        self.condition(pod_condition("Ready", "True"))
    }

    /// Appends the condition `Ready=True`, transitioned at `since`.
    pub fn ready_since(self, since: Timestamp) -> Self {
        self.condition(pod_condition("Ready", "True").transitioned_at(since))
    }

    /// Appends a container status (see [`crate::container_status`]).
    pub fn container_status(mut self, status: impl Into<ContainerStatus>) -> Self {
        self.status_mut()
            .container_statuses
            .get_or_insert_default()
            .push(status.into());
        self
    }

    /// Sets `status.podIP`.
    pub fn pod_ip(mut self, ip: impl Into<String>) -> Self {
        self.status_mut().pod_ip = Some(ip.into());
        self
    }

    /// Sets `status.podIPs` to `ips` and `status.podIP` to the first, as the kubelet posts
    /// them.
    pub fn pod_ips(mut self, ips: &[&str]) -> Self {
        let status = self.status_mut();
        status.pod_ip = ips.first().map(|ip| (*ip).to_owned());
        status.pod_ips = Some(
            ips.iter()
                .map(|ip| PodIP {
                    ip: (*ip).to_owned(),
                })
                .collect(),
        );
        self
    }

    /// Sets `spec.hostname` and `spec.subdomain` (a pod addressable through a headless
    /// Service named `subdomain`).
    pub fn hostname(mut self, hostname: &str, subdomain: &str) -> Self {
        let spec = self.pod.spec.get_or_insert_default();
        spec.hostname = Some(hostname.to_owned());
        spec.subdomain = Some(subdomain.to_owned());
        self
    }

    /// Sets `status.hostIP`.
    pub fn host_ip(mut self, ip: impl Into<String>) -> Self {
        self.status_mut().host_ip = Some(ip.into());
        self
    }

    /// Sets `status.startTime`.
    pub fn started_at(mut self, at: Timestamp) -> Self {
        self.status_mut().start_time = Some(Time(at));
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut Pod)) -> Self {
        f(&mut self.pod);
        self
    }

    /// The pod.
    pub fn build(self) -> Pod {
        self.pod
    }

    /// The pod, shared as caches hand it out.
    pub fn arc(self) -> Arc<Pod> {
        Arc::new(self.pod)
    }

    fn status_mut(&mut self) -> &mut PodStatus {
        self.pod.status.get_or_insert_default()
    }
}

impl PodSpecBuilder for PodBuilder {
    fn pod_spec_mut(&mut self) -> &mut PodSpec {
        self.pod.spec.get_or_insert_default()
    }
}

meta_builder!(PodBuilder => pod);
from_builder!(PodBuilder => Pod);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{container, container_status, toleration};

    #[test]
    fn default_spec_and_status_make_them_present_and_empty() {
        let p = pod("p").default_spec().default_status().build();
        assert_eq!(p.spec, Some(PodSpec::default()));
        assert_eq!(p.status, Some(PodStatus::default()));
    }

    #[test]
    fn spec_setters() {
        let p = pod("p")
            .node("n1")
            .container(container("c").image("nginx"))
            .init_container(container("init"))
            .toleration(toleration("k").exists())
            .node_selector(&[("zone", "a")])
            .restart_policy("Never")
            .termination_grace_period(5)
            .scheduler_name("s")
            .priority(7)
            .build();
        let spec = p.spec.unwrap_or_default();
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(spec.containers.len(), 1);
        assert_eq!(spec.init_containers.map(|c| c.len()), Some(1));
        assert_eq!(spec.tolerations.map(|t| t.len()), Some(1));
        assert_eq!(spec.node_selector.map(|s| s.len()), Some(1));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.termination_grace_period_seconds, Some(5));
        assert_eq!(spec.scheduler_name.as_deref(), Some("s"));
        assert_eq!(spec.priority, Some(7));
    }

    #[test]
    fn status_setters() {
        let at = Timestamp::UNIX_EPOCH;
        let p = pod("p")
            .phase("Running")
            .ready_since(at)
            .container_status(container_status("c").ready(true))
            .pod_ip("10.0.0.1")
            .host_ip("192.168.0.1")
            .started_at(at)
            .build();
        let status = p.status.unwrap_or_default();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let conditions = status.conditions.unwrap_or_default();
        assert_eq!(conditions[0].type_, "Ready");
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].last_transition_time, Some(Time(at)));
        assert_eq!(status.container_statuses.map(|s| s.len()), Some(1));
        assert_eq!(status.pod_ip.as_deref(), Some("10.0.0.1"));
        assert_eq!(status.host_ip.as_deref(), Some("192.168.0.1"));
        assert_eq!(status.start_time, Some(Time(at)));
    }

    #[test]
    fn ready_has_no_transition_time() {
        let p = pod("p").ready().build();
        let conditions = p.status.and_then(|s| s.conditions).unwrap_or_default();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, None);
    }

    #[test]
    fn with_and_arc() {
        let p = pod("p").with(|p| p.metadata.uid = Some("u".into())).arc();
        assert_eq!(p.metadata.uid.as_deref(), Some("u"));
    }

    #[test]
    fn serializes_without_empty_parts() {
        let json = serde_json::to_value(pod("p").namespace("ns").build()).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
            })
        );
    }
}
