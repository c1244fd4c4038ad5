//! What a resource's storage does around the generic store's writes, chosen by the resource (upstream's `genericregistry.Store` hooks `BeginCreate`, `AfterCreate`, `BeginUpdate`, `AfterDelete`, and the resources whose REST replaces `Create` or `Delete`).
//!
//! The generic create, update and delete never name a resource. A resource that allocates
//! (Services: cluster IPs and node ports), answers a create without storing (Bindings,
//! TokenReviews) or deletes in two steps (Namespaces) names the behaviour as its
//! [`Rest`](crate::registry::resource::Rest) ([`ResourceDef::rest`]); `registry::rest::of`
//! gives the hooks, which live beside the registry code they call (`service_alloc.rs`,
//! `binding.rs`, `token_review.rs`, `namespace.rs`).

use async_trait::async_trait;
use serde_json::Value;

use crate::error::Result;
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;

/// Work a write began that waits for the store's answer (upstream's `FinishFunc`): the
/// allocation lock a Service's create or update holds until it is stored.
#[async_trait]
pub trait PendingWrite: Send {
    /// The write was stored.
    async fn commit(self: Box<Self>, registry: &Registry);
    /// The write was certainly not stored (refused, a lost race, a dry run): what it took
    /// goes back. Dropping it instead, when the outcome is unknown (a backend error), leaves
    /// the repair to the resource.
    async fn abort(self: Box<Self>, registry: &Registry);
}

/// A [`PendingWrite`] borrowing the registry.
pub type Pending<'r> = Box<dyn PendingWrite + 'r>;

/// A resource's hooks around the generic writes. Every method defaults to doing nothing.
#[async_trait]
pub trait StoreHooks: Send + Sync + 'static {
    /// Answers a create in place of the generic store (upstream's own `REST.Create`:
    /// `bindings`, `tokenreviews`), after the kind and namespace checks and field validation;
    /// `None` lets the generic create run.
    async fn create(
        &self,
        _registry: &Registry,
        _def: &ResourceDef,
        _namespace: &str,
        _obj: &Value,
        _dry_run: bool,
    ) -> Option<Result<Value>> {
        None
    }

    /// Before a create is stored, after admission (`BeginCreate`): may change the object;
    /// the pending work is committed once it is stored and aborted when it is not.
    async fn begin_create<'r>(
        &self,
        _registry: &'r Registry,
        _obj: &mut Value,
    ) -> Result<Option<Pending<'r>>> {
        Ok(None)
    }

    /// After a create was stored (`AfterCreate`), not for a dry run.
    async fn after_create(&self, _registry: &Registry, _obj: &Value) {}

    /// Before an update of the main resource is stored, after admission (`BeginUpdate`);
    /// as [`Self::begin_create`].
    async fn begin_update<'r>(
        &self,
        _registry: &'r Registry,
        _new: &mut Value,
        _old: &Value,
    ) -> Result<Option<Pending<'r>>> {
        Ok(None)
    }

    /// After an update of any target was stored, not for a dry run: `old` as stored before,
    /// `new` as stored after, or `None` when the update removed the object (the last
    /// finalizer of a deleting object went). `began`: whether [`Self::begin_update`] ran.
    async fn after_update(
        &self,
        _registry: &Registry,
        _old: &Value,
        _new: Option<&Value>,
        _began: bool,
    ) {
    }

    /// Whether a delete begins with [`Self::begin_delete`], admitted before it.
    fn begins_delete(&self) -> bool {
        false
    }

    /// The first step of a two-step delete (upstream's namespace `REST.Delete`): `Some` is the
    /// object now pending deletion, the answer; `None` lets the generic delete remove it.
    async fn begin_delete(
        &self,
        _registry: &Registry,
        _def: &ResourceDef,
        _name: &str,
        _dry_run: bool,
    ) -> Result<Option<Value>> {
        Ok(None)
    }

    /// After a delete removed the object from the store (`AfterDelete`).
    async fn after_delete(&self, _registry: &Registry, _obj: &Value) {}
}
