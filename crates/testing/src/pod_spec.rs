//! The [`PodSpecBuilder`] setters shared by pods and pod templates.

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EphemeralVolumeSource, PersistentVolumeClaim,
    PersistentVolumeClaimTemplate, PersistentVolumeClaimVolumeSource, PodSpec, Toleration, Volume,
};

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

    /// Appends a volume.
    fn volume(mut self, volume: Volume) -> Self {
        self.pod_spec_mut()
            .volumes
            .get_or_insert_default()
            .push(volume);
        self
    }

    /// Appends volume `name` mounting claim `claim`.
    fn claim_volume(self, name: &str, claim: &str) -> Self {
        self.volume(Volume {
            name: name.into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: None,
            }),
            ..Volume::default()
        })
    }

    /// Appends a generic ephemeral volume `name` whose claim template is `template`'s labels,
    /// annotations and spec (its name and namespace are ignored, as the API server does).
    fn ephemeral_volume(self, name: &str, template: impl Into<PersistentVolumeClaim>) -> Self {
        let claim = template.into();
        let mut metadata = claim.metadata;
        metadata.name = None;
        metadata.namespace = None;
        self.volume(Volume {
            name: name.into(),
            ephemeral: Some(EphemeralVolumeSource {
                volume_claim_template: Some(PersistentVolumeClaimTemplate {
                    metadata: Some(metadata),
                    spec: claim.spec.unwrap_or_default(),
                }),
            }),
            ..Volume::default()
        })
    }

    /// Appends an `emptyDir` volume `name`.
    fn empty_dir_volume(self, name: &str) -> Self {
        self.volume(Volume {
            name: name.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        })
    }
}
