//! DaemonSets: [`daemon_set`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetStatus, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::meta::{MetaBuilder, labels};
use crate::selector::selector;

/// The annotation the API server keeps a DaemonSet's template generation in (apps/v1
/// `DeprecatedTemplateGeneration`).
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// Builds a [`DaemonSet`]. Start with [`daemon_set`].
///
/// A DaemonSet has no replicas, so this builder has the selector and template setters of
/// [`crate::WorkloadBuilder`] as its own methods.
#[derive(Clone, Debug, Default)]
pub struct DaemonSetBuilder {
    ds: DaemonSet,
    /// The labels [`Self::selecting`] stamps on the template at `build`.
    stamped_labels: BTreeMap<String, String>,
}

/// A DaemonSet named `name`; no namespace, spec or status.
pub fn daemon_set(name: &str) -> DaemonSetBuilder {
    DaemonSetBuilder::default().name(name)
}

impl DaemonSetBuilder {
    fn spec_mut(&mut self) -> &mut DaemonSetSpec {
        self.ds.spec.get_or_insert_default()
    }

    fn status_mut(&mut self) -> &mut DaemonSetStatus {
        self.ds.status.get_or_insert_default()
    }

    fn rolling_mut(&mut self) -> &mut RollingUpdateDaemonSet {
        let strategy = self.spec_mut().update_strategy.get_or_insert_default();
        strategy.type_ = Some("RollingUpdate".into());
        strategy.rolling_update.get_or_insert_default()
    }

    /// Selects pods labelled `pairs` and adds those labels to the template at `build`.
    pub fn selecting(mut self, pairs: &[(&str, &str)]) -> Self {
        self.spec_mut().selector = selector(pairs);
        self.stamped_labels.extend(labels(pairs));
        self
    }

    /// Sets `spec.template`.
    pub fn template(mut self, template: impl Into<PodTemplateSpec>) -> Self {
        self.spec_mut().template = template.into();
        self
    }

    /// Appends a container to the template's pod spec.
    pub fn container(mut self, container: impl Into<Container>) -> Self {
        self.spec_mut()
            .template
            .spec
            .get_or_insert_default()
            .containers
            .push(container.into());
        self
    }

    /// Sets the template's `nodeSelector`.
    pub fn node_selector(mut self, pairs: &[(&str, &str)]) -> Self {
        self.spec_mut()
            .template
            .spec
            .get_or_insert_default()
            .node_selector = Some(labels(pairs));
        self
    }

    /// Sets `spec.minReadySeconds`.
    pub fn min_ready_seconds(mut self, seconds: i32) -> Self {
        self.spec_mut().min_ready_seconds = Some(seconds);
        self
    }

    /// Sets `spec.revisionHistoryLimit`.
    pub fn revision_history_limit(mut self, limit: i32) -> Self {
        self.spec_mut().revision_history_limit = Some(limit);
        self
    }

    /// A `RollingUpdate` strategy with `maxUnavailable`.
    pub fn max_unavailable(mut self, value: IntOrString) -> Self {
        self.rolling_mut().max_unavailable = Some(value);
        self
    }

    /// A `RollingUpdate` strategy with `maxSurge`.
    pub fn max_surge(mut self, value: IntOrString) -> Self {
        self.rolling_mut().max_surge = Some(value);
        self
    }

    /// The `OnDelete` strategy.
    pub fn on_delete(mut self) -> Self {
        self.spec_mut().update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        self
    }

    /// Sets the template generation annotation (what the API server stamps).
    pub fn template_generation(self, generation: i64) -> Self {
        self.annotation(TEMPLATE_GENERATION_ANNOTATION, generation.to_string())
    }

    /// Sets `status.observedGeneration`.
    pub fn observed_generation(mut self, generation: i64) -> Self {
        self.status_mut().observed_generation = Some(generation);
        self
    }

    /// Sets `status.collisionCount`.
    pub fn collision_count(mut self, count: i32) -> Self {
        self.status_mut().collision_count = Some(count);
        self
    }

    /// Changes anything no setter names (before `selecting`'s template labels are added).
    pub fn with(mut self, f: impl FnOnce(&mut DaemonSet)) -> Self {
        f(&mut self.ds);
        self
    }

    /// The DaemonSet.
    pub fn build(mut self) -> DaemonSet {
        let stamped = std::mem::take(&mut self.stamped_labels);
        if !stamped.is_empty() {
            self.spec_mut()
                .template
                .metadata
                .get_or_insert_default()
                .labels
                .get_or_insert_default()
                .extend(stamped);
        }
        self.ds
    }

    /// The DaemonSet, shared as caches hand it out.
    pub fn arc(self) -> Arc<DaemonSet> {
        Arc::new(self.build())
    }
}

meta_builder!(DaemonSetBuilder => ds);
from_builder!(DaemonSetBuilder => DaemonSet);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container;

    #[test]
    fn selecting_stamps_the_template_and_strategies_fill_in() {
        let ds = daemon_set("ds")
            .namespace("ns")
            .selecting(&[("app", "a")])
            .container(container("c"))
            .max_unavailable(IntOrString::Int(2))
            .max_surge(IntOrString::String("10%".into()))
            .template_generation(3)
            .build();
        let spec = ds.spec.unwrap_or_default();
        assert_eq!(spec.selector, selector(&[("app", "a")]));
        assert_eq!(
            spec.template.metadata.and_then(|m| m.labels),
            Some(labels(&[("app", "a")]))
        );
        let strategy = spec.update_strategy.unwrap_or_default();
        assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
        let ru = strategy.rolling_update.unwrap_or_default();
        assert_eq!(ru.max_unavailable, Some(IntOrString::Int(2)));
        assert_eq!(ru.max_surge, Some(IntOrString::String("10%".into())));
        assert_eq!(
            ds.metadata
                .annotations
                .and_then(|a| a.get(TEMPLATE_GENERATION_ANNOTATION).cloned()),
            Some("3".into())
        );
    }

    #[test]
    fn on_delete_replaces_the_strategy() {
        let s = daemon_set("ds")
            .max_surge(IntOrString::Int(1))
            .on_delete()
            .build();
        let strategy = s.spec.and_then(|s| s.update_strategy).unwrap_or_default();
        assert_eq!(strategy.type_.as_deref(), Some("OnDelete"));
        assert_eq!(strategy.rolling_update, None);
    }
}
