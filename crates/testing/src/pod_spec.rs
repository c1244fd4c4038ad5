//! The [`PodSpecBuilder`] setters shared by pods and pod templates.

use k8s_openapi::api::core::v1::{Container, PodSpec, Toleration};

use crate::meta::labels;

/// Fluent setters of a pod spec, shared by [`crate::PodBuilder`] and
/// [`crate::PodTemplateBuilder`]. List setters append.
pub trait PodSpecBuilder: Sized {
    /// The spec being built (created empty on first use).
    fn pod_spec_mut(&mut self) -> &mut PodSpec;

    /// Makes `spec` present even if no setter fills it (an empty `PodSpec`), as objects read
    /// back from an API server always have one.
    fn default_spec(mut self) -> Self {
        self.pod_spec_mut();
        self
    }

    /// Sets `spec.nodeName`: bound to `node`.
    fn node(mut self, node: impl Into<String>) -> Self {
        self.pod_spec_mut().node_name = Some(node.into());
        self
    }

    /// Appends a container.
    fn container(mut self, container: impl Into<Container>) -> Self {
        self.pod_spec_mut().containers.push(container.into());
        self
    }

    /// Appends an init container.
    fn init_container(mut self, container: impl Into<Container>) -> Self {
        self.pod_spec_mut()
            .init_containers
            .get_or_insert_default()
            .push(container.into());
        self
    }

    /// Appends a toleration.
    fn toleration(mut self, toleration: impl Into<Toleration>) -> Self {
        self.pod_spec_mut()
            .tolerations
            .get_or_insert_default()
            .push(toleration.into());
        self
    }

    /// Adds `spec.nodeSelector` entries.
    fn node_selector(mut self, pairs: &[(&str, &str)]) -> Self {
        self.pod_spec_mut()
            .node_selector
            .get_or_insert_default()
            .extend(labels(pairs));
        self
    }

    /// Sets `spec.restartPolicy` (`"Always"`, `"OnFailure"`, `"Never"`).
    fn restart_policy(mut self, policy: &str) -> Self {
        self.pod_spec_mut().restart_policy = Some(policy.to_owned());
        self
    }

    /// Sets `spec.terminationGracePeriodSeconds`.
    fn termination_grace_period(mut self, seconds: i64) -> Self {
        self.pod_spec_mut().termination_grace_period_seconds = Some(seconds);
        self
    }

    /// Sets `spec.schedulerName`.
    fn scheduler_name(mut self, name: &str) -> Self {
        self.pod_spec_mut().scheduler_name = Some(name.to_owned());
        self
    }

    /// Sets `spec.priority`.
    fn priority(mut self, priority: i32) -> Self {
        self.pod_spec_mut().priority = Some(priority);
        self
    }
}
