//! What admission plugins may read of the server: one object or a namespace's objects of a resource.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::Result;
use crate::registry::DefRef;
use crate::registry::resource::ResourceDef;

/// The objects plugins read (namespaces, service accounts, limit ranges, classes): the
/// registry in the server (its object cache, kept current from the store's watch), a map in
/// unit tests. Objects are shared, never copied on read: a plugin that changes one clones it.
#[async_trait]
pub trait ObjectSource: Send + Sync {
    /// One object, `None` when it does not exist.
    async fn get(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Value>>>;

    /// Every object of `def` in `namespace` (`""`: all namespaces, or cluster-scoped).
    async fn list(&self, def: &ResourceDef, namespace: &str) -> Result<Vec<Arc<Value>>>;

    /// Whether the server serves `def` (a plugin whose resources are not served does nothing,
    /// as upstream's plugins wait for informers that never sync).
    fn serves(&self, def: &ResourceDef) -> bool;

    /// The served resource whose objects are `apiVersion`/`kind` (built-in or custom), as
    /// upstream's REST mapper resolves a policy's `paramKind`; `None` when nothing serves it.
    fn resource_for_kind(&self, _api_version: &str, _kind: &str) -> Option<DefRef> {
        None
    }
}
