//! Pod templates (of ReplicaSets and Deployments): [`pod_template`].

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::meta::MetaBuilder;
use crate::pod_spec::PodSpecBuilder;

/// Builds a [`PodTemplateSpec`]: metadata through [`MetaBuilder`], spec through
/// [`PodSpecBuilder`]. Start with [`pod_template`].
#[derive(Clone, Debug, Default)]
pub struct PodTemplateBuilder {
    template: PodTemplateSpec,
}

/// An empty template: no metadata, no spec.
pub fn pod_template() -> PodTemplateBuilder {
    PodTemplateBuilder::default()
}

impl PodTemplateBuilder {
    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut PodTemplateSpec)) -> Self {
        f(&mut self.template);
        self
    }

    /// The template.
    pub fn build(self) -> PodTemplateSpec {
        self.template
    }
}

impl MetaBuilder for PodTemplateBuilder {
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.template.metadata.get_or_insert_default()
    }
}

impl PodSpecBuilder for PodTemplateBuilder {
    fn pod_spec_mut(&mut self) -> &mut PodSpec {
        self.template.spec.get_or_insert_default()
    }
}

from_builder!(PodTemplateBuilder => PodTemplateSpec);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{container, labels};

    #[test]
    fn pod_template_defaults_to_nothing() {
        assert_eq!(pod_template().build(), PodTemplateSpec::default());
    }

    #[test]
    fn metadata_and_spec_appear_on_first_use() {
        let t = pod_template()
            .labels(&[("app", "web")])
            .container(container("web").image("nginx"))
            .build();
        assert_eq!(
            t.metadata.and_then(|m| m.labels),
            Some(labels(&[("app", "web")]))
        );
        assert_eq!(t.spec.map(|s| s.containers.len()), Some(1));
    }
}
