//! ReplicationControllers: [`replication_controller`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, PodTemplateSpec, ReplicationController, ReplicationControllerSpec,
    ReplicationControllerStatus,
};

use crate::meta::{MetaBuilder, labels};

/// Builds a [`ReplicationController`]. Start with [`replication_controller`].
#[derive(Clone, Debug, Default)]
pub struct ReplicationControllerBuilder {
    rc: ReplicationController,
    /// The labels [`Self::selecting`] stamps on the template at `build`.
    stamped_labels: BTreeMap<String, String>,
}

/// A ReplicationController named `name`; no namespace, spec or status.
pub fn replication_controller(name: &str) -> ReplicationControllerBuilder {
    ReplicationControllerBuilder::default().name(name)
}

impl ReplicationControllerBuilder {
    fn spec_mut(&mut self) -> &mut ReplicationControllerSpec {
        self.rc.spec.get_or_insert_default()
    }

    fn status_mut(&mut self) -> &mut ReplicationControllerStatus {
        self.rc.status.get_or_insert_default()
    }

    /// Sets `spec.replicas`.
    pub fn replicas(mut self, replicas: i32) -> Self {
        self.spec_mut().replicas = Some(replicas);
        self
    }

    /// Selects pods labelled `pairs` (an RC's equality-based selector) and adds those labels
    /// to the template at `build`.
    pub fn selecting(mut self, pairs: &[(&str, &str)]) -> Self {
        self.spec_mut().selector = Some(labels(pairs));
        self.stamped_labels.extend(labels(pairs));
        self
    }

    /// Appends a container to the template's pod spec.
    pub fn container(mut self, container: impl Into<Container>) -> Self {
        self.spec_mut()
            .template
            .get_or_insert_default()
            .spec
            .get_or_insert_default()
            .containers
            .push(container.into());
        self
    }

    /// Sets `spec.template`.
    pub fn template(mut self, template: impl Into<PodTemplateSpec>) -> Self {
        self.spec_mut().template = Some(template.into());
        self
    }

    /// Sets `spec.minReadySeconds`.
    pub fn min_ready_seconds(mut self, seconds: i32) -> Self {
        self.spec_mut().min_ready_seconds = Some(seconds);
        self
    }

    /// Sets `status.replicas`.
    pub fn status_replicas(mut self, replicas: i32) -> Self {
        self.status_mut().replicas = replicas;
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut ReplicationController)) -> Self {
        f(&mut self.rc);
        self
    }

    /// The ReplicationController.
    pub fn build(mut self) -> ReplicationController {
        let stamped = std::mem::take(&mut self.stamped_labels);
        if !stamped.is_empty() {
            self.spec_mut()
                .template
                .get_or_insert_default()
                .metadata
                .get_or_insert_default()
                .labels
                .get_or_insert_default()
                .extend(stamped);
        }
        self.rc
    }

    /// The ReplicationController, shared as caches hand it out.
    pub fn arc(self) -> Arc<ReplicationController> {
        Arc::new(self.build())
    }
}

meta_builder!(ReplicationControllerBuilder => rc);
from_builder!(ReplicationControllerBuilder => ReplicationController);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container;

    #[test]
    fn selecting_sets_the_map_selector_and_template_labels() {
        let rc = replication_controller("rc")
            .replicas(2)
            .selecting(&[("app", "a")])
            .container(container("c"))
            .build();
        let spec = rc.spec.unwrap_or_default();
        assert_eq!(spec.selector, Some(labels(&[("app", "a")])));
        assert_eq!(
            spec.template
                .and_then(|t| t.metadata)
                .and_then(|m| m.labels),
            Some(labels(&[("app", "a")]))
        );
    }
}
