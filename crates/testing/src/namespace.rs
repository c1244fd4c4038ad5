//! Namespaces: [`namespace`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, NamespaceStatus};

use crate::meta::MetaBuilder;

/// Builds a [`Namespace`]. Start with [`namespace`].
#[derive(Clone, Debug, Default)]
pub struct NamespaceBuilder {
    ns: Namespace,
}

/// A Namespace named `name`; no spec or status.
pub fn namespace(name: &str) -> NamespaceBuilder {
    NamespaceBuilder::default().name(name)
}

impl NamespaceBuilder {
    /// Sets `status.phase` (`"Active"` or `"Terminating"`).
    pub fn phase(mut self, phase: &str) -> Self {
        self.status_mut().phase = Some(phase.to_owned());
        self
    }

    /// Makes `status` present even if no setter fills it.
    pub fn default_status(mut self) -> Self {
        self.status_mut();
        self
    }

    /// Appends `spec.finalizers` (`"kubernetes"`), the ones the namespace controller
    /// removes, distinct from `metadata.finalizers`; with none, still leaves an empty list.
    pub fn spec_finalizers(mut self, finalizers: &[&str]) -> Self {
        self.ns
            .spec
            .get_or_insert_default()
            .finalizers
            .get_or_insert_default()
            .extend(finalizers.iter().map(|f| (*f).to_owned()));
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut Namespace)) -> Self {
        f(&mut self.ns);
        self
    }

    /// The Namespace.
    pub fn build(self) -> Namespace {
        self.ns
    }

    /// The Namespace, shared as caches hand it out.
    pub fn arc(self) -> Arc<Namespace> {
        Arc::new(self.ns)
    }

    fn status_mut(&mut self) -> &mut NamespaceStatus {
        self.ns.status.get_or_insert_default()
    }
}

meta_builder!(NamespaceBuilder => ns);
from_builder!(NamespaceBuilder => Namespace);

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NamespaceSpec;

    use super::*;

    #[test]
    fn phase_and_spec_finalizers() {
        let ns = namespace("ns")
            .phase("Terminating")
            .spec_finalizers(&["kubernetes"])
            .build();
        assert_eq!(
            ns.status.and_then(|s| s.phase).as_deref(),
            Some("Terminating")
        );
        assert_eq!(
            ns.spec,
            Some(NamespaceSpec {
                finalizers: Some(vec!["kubernetes".into()]),
            })
        );
        assert_eq!(ns.metadata.finalizers, None);
        let empty = namespace("ns")
            .spec_finalizers(&[])
            .default_status()
            .build();
        assert_eq!(empty.spec.and_then(|s| s.finalizers), Some(vec![]));
        assert_eq!(empty.status, Some(NamespaceStatus::default()));
    }
}
