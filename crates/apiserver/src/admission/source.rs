//! What admission plugins may read of the server: one object or a namespace's objects of a resource.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::Result;
use crate::registry::DefRef;
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

    /// The served resource whose objects are `apiVersion`/`kind` (built-in or custom), as
    /// upstream's REST mapper resolves a policy's `paramKind`; `None` when nothing serves it.
    fn resource_for_kind(&self, _api_version: &str, _kind: &str) -> Option<DefRef> {
        None
    }
}
