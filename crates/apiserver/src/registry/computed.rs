//! Read-only resources whose objects the server computes on every read instead of storing (upstream's `componentstatuses` REST): the [`Computed`] hook, and get and list over it.
//!
//! An entry names its hook with
//! [`ResourceDef::computed`](crate::registry::resource::ResourceDef::computed), which also
//! makes it read-only (`get`, `list`). Nothing is written, so there is no watch and no
//! `resourceVersion`: a list carries empty list metadata, as upstream's
//! `componentstatuses` list does. Label and field selectors apply as on stored resources
//! (the registry's `get` and `list` serve them, from a [`ServerView`]).

use futures::future::BoxFuture;
use serde_json::Value;

use crate::error::Result;
use crate::registry::components::ComponentProbes;
use crate::storage::Storage;

/// What a [`Computed`] resource may read of the server: its store, the probes of the
/// components beside it, and the group versions it serves.
pub struct ServerView<'a> {
    /// The store (read it; computed resources write nothing).
    pub storage: &'a dyn Storage,
    /// Health probes of the components beside the server.
    pub components: &'a ComponentProbes,
    /// Where pod and node usage comes from (`metrics.k8s.io`).
    pub usage: &'a crate::registry::usage::UsageSlot,
    /// The served group versions (`""` for core), in discovery order, each once.
    pub group_versions: Vec<(String, String)>,
}

/// Computes the objects of a read-only resource from the server's own state.
pub trait Computed: Send + Sync + 'static {
    /// Every object as of now, each a complete object of the entry's kind (`apiVersion`,
    /// `kind`, `metadata.name`), in the order a list shows them.
    fn objects<'a>(&'a self, server: &'a ServerView<'a>) -> BoxFuture<'a, Result<Vec<Value>>>;
}
