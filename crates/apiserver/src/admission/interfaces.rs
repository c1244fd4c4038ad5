//! The admission plugin trait: upstream's `admission.Interface`, `MutationInterface` and `ValidationInterface` in one.

use async_trait::async_trait;

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::source::ObjectSource;
use crate::error::Result;

/// One admission plugin. Each phase is optional: a plugin says which it implements with
/// [`Plugin::mutates`] / [`Plugin::validates`], and which operations it handles.
#[async_trait]
pub trait Plugin: Send + Sync + std::fmt::Debug {
    /// The plugin's upstream name (`NamespaceLifecycle`, `LimitRanger`, ...).
    fn name(&self) -> &'static str;

    /// Whether the plugin looks at `operation` at all (upstream's `Handles`).
    fn handles(&self, operation: Operation) -> bool;

    /// Whether [`Plugin::admit`] does anything (upstream: implements `MutationInterface`).
    fn mutates(&self) -> bool {
        false
    }

    /// Whether [`Plugin::validate`] does anything (upstream: implements `ValidationInterface`).
    fn validates(&self) -> bool {
        false
    }

    /// The mutating phase: may change `a.object`; an error refuses the request.
    async fn admit(&self, _source: &dyn ObjectSource, _a: &mut Attributes<'_>) -> Result<()> {
        Ok(())
    }

    /// The validating phase: must not change `a.object` (it may add warnings); an error
    /// refuses the request.
    async fn validate(&self, _source: &dyn ObjectSource, _a: &mut Attributes<'_>) -> Result<()> {
        Ok(())
    }
}
