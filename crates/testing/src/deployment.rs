//! Deployments: [`deployment`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStatus, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::meta::MetaBuilder;
use crate::workload::{WorkloadBuilder, stamp_selected_labels};

/// Builds a [`Deployment`]. Start with [`deployment`].
#[derive(Clone, Debug, Default)]
pub struct DeploymentBuilder {
    d: Deployment,
    /// See [`WorkloadBuilder::stamped_labels_mut`].
    stamped_labels: BTreeMap<String, String>,
}

/// A Deployment named `name`; no namespace, spec or status.
pub fn deployment(name: &str) -> DeploymentBuilder {
    DeploymentBuilder::default().name(name)
}

impl DeploymentBuilder {
    /// Makes `spec` present even if no setter fills it (replicas, selector and template
    /// unset).
    pub fn default_spec(mut self) -> Self {
        self.spec_mut();
        self
    }

    /// The `RollingUpdate` strategy with these fenceposts (`IntOrString::Int(1)` or
    /// `IntOrString::String("25%".into())`).
    pub fn rolling_update(mut self, max_surge: IntOrString, max_unavailable: IntOrString) -> Self {
        self.spec_mut().strategy = Some(DeploymentStrategy {
            type_: Some("RollingUpdate".to_owned()),
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: Some(max_surge),
                max_unavailable: Some(max_unavailable),
            }),
        });
        self
    }

    /// The `Recreate` strategy.
    pub fn recreate(self) -> Self {
        self.strategy("Recreate")
    }

    /// A strategy of type `type_` with no rolling-update parameters.
    pub fn strategy(mut self, type_: &str) -> Self {
        self.spec_mut().strategy = Some(DeploymentStrategy {
            type_: Some(type_.to_owned()),
            rolling_update: None,
        });
        self
    }

    /// Sets `spec.revisionHistoryLimit`.
    pub fn revision_history_limit(mut self, limit: i32) -> Self {
        self.spec_mut().revision_history_limit = Some(limit);
        self
    }

    /// Sets `spec.progressDeadlineSeconds`.
    pub fn progress_deadline_seconds(mut self, seconds: i32) -> Self {
        self.spec_mut().progress_deadline_seconds = Some(seconds);
        self
    }

    /// Sets `spec.paused`.
    pub fn paused(mut self, paused: bool) -> Self {
        self.spec_mut().paused = Some(paused);
        self
    }

    /// Makes `status` present even if no setter fills it.
    pub fn default_status(mut self) -> Self {
        self.d.status.get_or_insert_with(DeploymentStatus::default);
        self
    }

    /// Changes anything no setter names (before `selecting`'s template labels are added).
    pub fn with(mut self, f: impl FnOnce(&mut Deployment)) -> Self {
        f(&mut self.d);
        self
    }

    /// The Deployment.
    pub fn build(mut self) -> Deployment {
        stamp_selected_labels(&mut self);
        self.d
    }

    /// The Deployment, shared as caches hand it out.
    pub fn arc(self) -> Arc<Deployment> {
        Arc::new(self.build())
    }

    fn spec_mut(&mut self) -> &mut DeploymentSpec {
        self.d.spec.get_or_insert_default()
    }
}

impl WorkloadBuilder for DeploymentBuilder {
    workload_spec_accessors!();

    fn template_mut(&mut self) -> &mut PodTemplateSpec {
        &mut self.spec_mut().template
    }
}

meta_builder!(DeploymentBuilder => d);
from_builder!(DeploymentBuilder => Deployment);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PodSpecBuilder, container, labels, pod_template, selector};

    #[test]
    fn selecting_labels_the_template_in_either_order() {
        let template = || pod_template().container(container("app").image("nginx"));
        for d in [
            deployment("d")
                .selecting(&[("app", "d")])
                .template(template())
                .build(),
            deployment("d")
                .template(template())
                .selecting(&[("app", "d")])
                .build(),
        ] {
            let spec = d.spec.unwrap_or_default();
            assert_eq!(spec.selector, selector(&[("app", "d")]));
            assert_eq!(
                spec.template.metadata.and_then(|m| m.labels),
                Some(labels(&[("app", "d")]))
            );
            assert_eq!(spec.template.spec.map(|s| s.containers.len()), Some(1));
        }
    }

    #[test]
    fn container_fills_the_template_spec() {
        let d = deployment("d")
            .selecting(&[("app", "d")])
            .container(container("app").image("nginx"))
            .build();
        let t = d.spec.map(|s| s.template).unwrap_or_default();
        assert_eq!(
            t.metadata.and_then(|m| m.labels),
            Some(labels(&[("app", "d")]))
        );
        assert_eq!(t.spec.map(|s| s.containers.len()), Some(1));
    }

    #[test]
    fn strategies() {
        let rolling = deployment("d")
            .rolling_update(IntOrString::Int(1), IntOrString::String("25%".into()))
            .build();
        let strategy = rolling.spec.and_then(|s| s.strategy).unwrap_or_default();
        assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
        let ru = strategy.rolling_update.unwrap_or_default();
        assert_eq!(ru.max_surge, Some(IntOrString::Int(1)));
        assert_eq!(ru.max_unavailable, Some(IntOrString::String("25%".into())));

        let recreate = deployment("d").recreate().build();
        assert_eq!(
            recreate.spec.and_then(|s| s.strategy),
            Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            })
        );
    }

    #[test]
    fn spec_and_status_setters() {
        let d = deployment("d")
            .replicas(3)
            .revision_history_limit(10)
            .progress_deadline_seconds(600)
            .min_ready_seconds(5)
            .paused(true)
            .default_status()
            .build();
        assert_eq!(
            deployment("d").default_spec().build().spec,
            Some(DeploymentSpec::default())
        );
        let spec = d.spec.unwrap_or_default();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.revision_history_limit, Some(10));
        assert_eq!(spec.progress_deadline_seconds, Some(600));
        assert_eq!(spec.min_ready_seconds, Some(5));
        assert_eq!(spec.paused, Some(true));
        assert_eq!(d.status, Some(DeploymentStatus::default()));
    }
}
