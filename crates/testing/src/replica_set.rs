//! ReplicaSets: [`replica_set`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec, ReplicaSetStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::meta::MetaBuilder;
use crate::workload::{WorkloadBuilder, stamp_selected_labels};

/// Builds a [`ReplicaSet`]. Start with [`replica_set`].
#[derive(Clone, Debug, Default)]
pub struct ReplicaSetBuilder {
    rs: ReplicaSet,
    /// See [`WorkloadBuilder::stamped_labels_mut`].
    stamped_labels: BTreeMap<String, String>,
}

/// A ReplicaSet named `name`; no namespace, spec or status.
pub fn replica_set(name: &str) -> ReplicaSetBuilder {
    ReplicaSetBuilder::default().name(name)
}

impl ReplicaSetBuilder {
    /// Makes `spec` present even if no setter fills it (replicas, selector and template
    /// unset).
    pub fn default_spec(mut self) -> Self {
        self.spec_mut();
        self
    }

    /// Makes `status` present even if no setter fills it.
    pub fn default_status(mut self) -> Self {
        self.status_mut();
        self
    }

    /// Sets `status.replicas`.
    pub fn status_replicas(mut self, replicas: i32) -> Self {
        self.status_mut().replicas = replicas;
        self
    }

    /// Sets `status.readyReplicas`.
    pub fn ready_replicas(mut self, ready: i32) -> Self {
        self.status_mut().ready_replicas = Some(ready);
        self
    }

    /// Sets `status.availableReplicas`.
    pub fn available_replicas(mut self, available: i32) -> Self {
        self.status_mut().available_replicas = Some(available);
        self
    }

    /// Sets `status.fullyLabeledReplicas`.
    pub fn fully_labeled_replicas(mut self, replicas: i32) -> Self {
        self.status_mut().fully_labeled_replicas = Some(replicas);
        self
    }

    /// Sets `status.observedGeneration`.
    pub fn observed_generation(mut self, generation: i64) -> Self {
        self.status_mut().observed_generation = Some(generation);
        self
    }

    /// Changes anything no setter names (before `selecting`'s template labels are added).
    pub fn with(mut self, f: impl FnOnce(&mut ReplicaSet)) -> Self {
        f(&mut self.rs);
        self
    }

    /// The ReplicaSet.
    pub fn build(mut self) -> ReplicaSet {
        stamp_selected_labels(&mut self);
        self.rs
    }

    /// The ReplicaSet, shared as caches hand it out.
    pub fn arc(self) -> Arc<ReplicaSet> {
        Arc::new(self.build())
    }

    fn spec_mut(&mut self) -> &mut ReplicaSetSpec {
        self.rs.spec.get_or_insert_default()
    }

    fn status_mut(&mut self) -> &mut ReplicaSetStatus {
        self.rs.status.get_or_insert_default()
    }
}

impl WorkloadBuilder for ReplicaSetBuilder {
    workload_spec_accessors!();

    fn template_mut(&mut self) -> &mut PodTemplateSpec {
        self.spec_mut().template.get_or_insert_default()
    }
}

meta_builder!(ReplicaSetBuilder => rs);
from_builder!(ReplicaSetBuilder => ReplicaSet);

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use super::*;
    use crate::{PodSpecBuilder, container, labels, pod_template, selector};

    #[test]
    fn replicas_alone_leaves_selector_and_template_empty() {
        let spec = replica_set("rs")
            .replicas(2)
            .build()
            .spec
            .unwrap_or_default();
        assert_eq!(spec.replicas, Some(2));
        assert_eq!(spec.selector, LabelSelector::default());
        assert_eq!(spec.template, None);
    }

    #[test]
    fn selecting_labels_the_template_in_either_order() {
        let template = || {
            pod_template()
                .labels(&[("tier", "web")])
                .container(container("c"))
        };
        for rs in [
            replica_set("rs")
                .selecting(&[("app", "a")])
                .template(template())
                .build(),
            replica_set("rs")
                .template(template())
                .selecting(&[("app", "a")])
                .build(),
        ] {
            let spec = rs.spec.unwrap_or_default();
            assert_eq!(spec.selector, selector(&[("app", "a")]));
            let t = spec.template.unwrap_or_default();
            assert_eq!(
                t.metadata.and_then(|m| m.labels),
                Some(labels(&[("app", "a"), ("tier", "web")]))
            );
            assert_eq!(t.spec.map(|s| s.containers.len()), Some(1));
        }
    }

    #[test]
    fn selecting_without_a_template_creates_one_without_spec() {
        let t = replica_set("rs")
            .selecting(&[("app", "a")])
            .build()
            .spec
            .and_then(|s| s.template)
            .unwrap_or_default();
        assert_eq!(
            t.metadata.and_then(|m| m.labels),
            Some(labels(&[("app", "a")]))
        );
        assert_eq!(t.spec, None);
    }

    #[test]
    fn container_fills_the_template_spec() {
        let t = replica_set("rs")
            .selecting(&[("app", "a")])
            .container(container("app").image("pause"))
            .build()
            .spec
            .and_then(|s| s.template)
            .unwrap_or_default();
        assert_eq!(
            t.metadata.and_then(|m| m.labels),
            Some(labels(&[("app", "a")]))
        );
        let containers = t.spec.map(|s| s.containers).unwrap_or_default();
        assert_eq!(containers.len(), 1);
        assert_eq!(containers[0].image.as_deref(), Some("pause"));
    }

    #[test]
    fn status_setters() {
        let status = replica_set("rs")
            .status_replicas(3)
            .ready_replicas(2)
            .available_replicas(1)
            .fully_labeled_replicas(3)
            .observed_generation(4)
            .build()
            .status
            .unwrap_or_default();
        assert_eq!(
            status,
            ReplicaSetStatus {
                replicas: 3,
                ready_replicas: Some(2),
                available_replicas: Some(1),
                fully_labeled_replicas: Some(3),
                observed_generation: Some(4),
                ..ReplicaSetStatus::default()
            }
        );
        let only = replica_set("rs")
            .status_replicas(1)
            .build()
            .status
            .unwrap_or_default();
        assert_eq!(only.ready_replicas, None);
        assert_eq!(only.available_replicas, None);
    }

    #[test]
    fn min_ready_and_default_spec_and_status() {
        assert_eq!(
            replica_set("rs").default_spec().build().spec,
            Some(ReplicaSetSpec::default())
        );
        let rs = replica_set("rs")
            .min_ready_seconds(5)
            .default_status()
            .build();
        assert_eq!(rs.spec.and_then(|s| s.min_ready_seconds), Some(5));
        assert_eq!(rs.status, Some(ReplicaSetStatus::default()));
    }
}
