//! Containers and their statuses: [`container`] and [`container_status`].

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Builds a [`Container`] of a pod spec. Start with [`container`].
#[derive(Clone, Debug, Default)]
pub struct ContainerBuilder {
    container: Container,
}

/// A container named `name`: no image, no resources.
pub fn container(name: &str) -> ContainerBuilder {
    ContainerBuilder {
        container: Container {
            name: name.to_owned(),
            ..Container::default()
        },
    }
}

impl ContainerBuilder {
    /// Sets `image`.
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.container.image = Some(image.into());
        self
    }

    /// Adds a resource request (`"cpu"`, `"100m"`).
    pub fn request(mut self, resource: &str, quantity: &str) -> Self {
        self.resources()
            .requests
            .get_or_insert_default()
            .insert(resource.to_owned(), Quantity(quantity.to_owned()));
        self
    }

    /// Adds a resource limit (`"memory"`, `"128Mi"`).
    pub fn limit(mut self, resource: &str, quantity: &str) -> Self {
        self.resources()
            .limits
            .get_or_insert_default()
            .insert(resource.to_owned(), Quantity(quantity.to_owned()));
        self
    }

    /// Sets `restartPolicy`: `"Always"` makes an init container a sidecar.
    pub fn restart_policy(mut self, policy: &str) -> Self {
        self.container.restart_policy = Some(policy.to_owned());
        self
    }

    /// Adds a TCP container port.
    pub fn port(mut self, port: i32) -> Self {
        self.container
            .ports
            .get_or_insert_default()
            .push(ContainerPort {
                container_port: port,
                protocol: Some("TCP".to_owned()),
                ..ContainerPort::default()
            });
        self
    }

    /// Adds a named container port with `protocol` (what a Service's named `targetPort`
    /// resolves against).
    pub fn named_port(mut self, name: &str, port: i32, protocol: &str) -> Self {
        self.container
            .ports
            .get_or_insert_default()
            .push(ContainerPort {
                name: Some(name.to_owned()),
                container_port: port,
                protocol: Some(protocol.to_owned()),
                ..ContainerPort::default()
            });
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut Container)) -> Self {
        f(&mut self.container);
        self
    }

    /// The container.
    pub fn build(self) -> Container {
        self.container
    }

    fn resources(&mut self) -> &mut ResourceRequirements {
        self.container.resources.get_or_insert_default()
    }
}

/// Builds a [`ContainerStatus`] of a pod status. Start with [`container_status`].
#[derive(Clone, Debug, Default)]
pub struct ContainerStatusBuilder {
    status: ContainerStatus,
}

/// The status of container `name`: not ready, no restarts, no state.
pub fn container_status(name: &str) -> ContainerStatusBuilder {
    ContainerStatusBuilder {
        status: ContainerStatus {
            name: name.to_owned(),
            ..ContainerStatus::default()
        },
    }
}

impl ContainerStatusBuilder {
    /// Sets `image`.
    pub fn image(mut self, image: &str) -> Self {
        self.status.image = image.to_owned();
        self
    }

    /// Sets `imageID`.
    pub fn image_id(mut self, image_id: &str) -> Self {
        self.status.image_id = image_id.to_owned();
        self
    }

    /// Sets `ready`.
    pub fn ready(mut self, ready: bool) -> Self {
        self.status.ready = ready;
        self
    }

    /// Sets `started`.
    pub fn started(mut self, started: bool) -> Self {
        self.status.started = Some(started);
        self
    }

    /// Sets `restartCount`.
    pub fn restarts(mut self, count: i32) -> Self {
        self.status.restart_count = count;
        self
    }

    /// The container is running, since `at`.
    pub fn running_since(mut self, at: Timestamp) -> Self {
        self.status.state = Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(at)),
            }),
            ..ContainerState::default()
        });
        self
    }

    /// The container is waiting, for `reason` (`"CrashLoopBackOff"`).
    pub fn waiting(mut self, reason: &str) -> Self {
        self.status.state = Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.to_owned()),
                ..ContainerStateWaiting::default()
            }),
            ..ContainerState::default()
        });
        self
    }

    /// The container has terminated with `exit_code`.
    pub fn terminated(mut self, exit_code: i32) -> Self {
        self.status.state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code,
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        });
        self
    }

    /// The status.
    pub fn build(self) -> ContainerStatus {
        self.status
    }
}

from_builder!(ContainerBuilder => Container, ContainerStatusBuilder => ContainerStatus);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_defaults_to_its_name_only() {
        assert_eq!(
            container("c").build(),
            Container {
                name: "c".into(),
                ..Container::default()
            }
        );
    }

    #[test]
    fn requests_limits_and_ports_accumulate() {
        let c = container("app")
            .image("nginx")
            .request("cpu", "100m")
            .request("memory", "128Mi")
            .limit("cpu", "1")
            .port(8080)
            .restart_policy("Always")
            .build();
        assert_eq!(c.image.as_deref(), Some("nginx"));
        let resources = c.resources.unwrap_or_default();
        assert_eq!(resources.requests.map(|r| r.len()), Some(2));
        assert_eq!(
            resources.limits.and_then(|l| l.get("cpu").cloned()),
            Some(Quantity("1".into()))
        );
        let ports = c.ports.unwrap_or_default();
        assert_eq!(ports[0].container_port, 8080);
        assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
        assert_eq!(c.restart_policy.as_deref(), Some("Always"));
    }

    #[test]
    fn container_status_defaults_to_not_ready_without_state() {
        let s = container_status("c").build();
        assert_eq!(s.name, "c");
        assert!(!s.ready);
        assert_eq!(s.restart_count, 0);
        assert_eq!(s.state, None);
        assert_eq!(s.started, None);
    }

    #[test]
    fn container_status_states() {
        let at = Timestamp::UNIX_EPOCH;
        let running = container_status("c")
            .ready(true)
            .restarts(3)
            .running_since(at)
            .build();
        assert!(running.ready);
        assert_eq!(running.restart_count, 3);
        assert!(running.state.and_then(|s| s.running).is_some());
        let waiting = container_status("c").waiting("CrashLoopBackOff").build();
        assert_eq!(
            waiting
                .state
                .and_then(|s| s.waiting)
                .and_then(|w| w.reason)
                .as_deref(),
            Some("CrashLoopBackOff")
        );
        let done = container_status("c").terminated(1).build();
        assert_eq!(
            done.state.and_then(|s| s.terminated).map(|t| t.exit_code),
            Some(1)
        );
    }
}
