//! The [`WorkloadBuilder`] setters shared by ReplicaSets and Deployments: replicas, selector, pod template.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::meta::labels;
use crate::selector::selector;

/// Fluent setters of an object that owns pods through a selector and a pod template,
/// shared by [`crate::ReplicaSetBuilder`] and [`crate::DeploymentBuilder`].
pub trait WorkloadBuilder: Sized {
    /// `spec.replicas` (creating the spec).
    fn replicas_mut(&mut self) -> &mut Option<i32>;

    /// `spec.minReadySeconds` (creating the spec).
    fn min_ready_seconds_mut(&mut self) -> &mut Option<i32>;

    /// `spec.selector` (creating the spec).
    fn selector_mut(&mut self) -> &mut LabelSelector;

    /// `spec.template` (creating the spec, and the template where it is optional).
    fn template_mut(&mut self) -> &mut PodTemplateSpec;

    /// The labels [`Self::selecting`] stamps on the template when the object is built, kept
    /// apart so that `selecting` and `template` may come in either order.
    fn stamped_labels_mut(&mut self) -> &mut BTreeMap<String, String>;

    /// Sets `spec.replicas`.
    fn replicas(mut self, replicas: i32) -> Self {
        *self.replicas_mut() = Some(replicas);
        self
    }

    /// Sets `spec.minReadySeconds`.
    fn min_ready_seconds(mut self, seconds: i32) -> Self {
        *self.min_ready_seconds_mut() = Some(seconds);
        self
    }

    /// Sets `spec.selector` (see [`crate::selector`] and [`crate::label_selector`]).
    fn selector(mut self, selector: impl Into<LabelSelector>) -> Self {
        *self.selector_mut() = selector.into();
        self
    }

    /// Selects pods labelled `pairs` (`matchLabels`) and, at `build`, adds those labels to the
    /// template's (creating a template with no spec if there is none): the consistent pair
    /// the API server requires.
    fn selecting(mut self, pairs: &[(&str, &str)]) -> Self {
        *self.selector_mut() = selector(pairs);
        self.stamped_labels_mut().extend(labels(pairs));
        self
    }

    /// Sets `spec.template` (see [`crate::pod_template`]).
    fn template(mut self, template: impl Into<PodTemplateSpec>) -> Self {
        *self.template_mut() = template.into();
        self
    }

    /// Appends a container to the template's pod spec (creating both): the usual
    /// one-container workload without spelling out a [`crate::pod_template`].
    fn container(mut self, container: impl Into<Container>) -> Self {
        self.template_mut()
            .spec
            .get_or_insert_default()
            .containers
            .push(container.into());
        self
    }
}

/// Adds the labels `selecting` recorded to the template: the last step of `build`.
pub(crate) fn stamp_selected_labels(builder: &mut impl WorkloadBuilder) {
    let stamped = std::mem::take(builder.stamped_labels_mut());
    if !stamped.is_empty() {
        builder
            .template_mut()
            .metadata
            .get_or_insert_default()
            .labels
            .get_or_insert_default()
            .extend(stamped);
    }
}
