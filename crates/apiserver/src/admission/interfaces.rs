//! The admission plugin trait (upstream's `admission.Interface`, `MutationInterface` and `ValidationInterface` in one) and what plugins may read of the server.

use async_trait::async_trait;
use serde_json::Value;

use crate::admission::attributes::{Attributes, Operation};
use crate::error::Result;
use crate::registry::resource::ResourceDef;

/// The objects plugins read (namespaces, service accounts, limit ranges, classes): the
/// registry in the server, a map in unit tests. Reads are live (no informer cache): the
/// embedded store answers a key read faster than a cache would need to be kept in sync.
#[async_trait]
pub trait ObjectSource: Send + Sync {
    /// One object, `None` when it does not exist.
    async fn get(&self, def: &ResourceDef, namespace: &str, name: &str) -> Result<Option<Value>>;

    /// Every object of `def` in `namespace` (`""`: all namespaces, or cluster-scoped).
    async fn list(&self, def: &ResourceDef, namespace: &str) -> Result<Vec<Value>>;

    /// Whether the server serves `def` (a plugin whose resources are not served does nothing,
    /// as upstream's plugins wait for informers that never sync).
    fn serves(&self, def: &ResourceDef) -> bool;
}

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
