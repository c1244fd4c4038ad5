//! Informers: Reflector, DeltaFIFO, Indexer, shared informers and listers (client-go `tools/cache`).
//!
//! Where to start: a [`SharedInformerFactory`] hands out one [`SharedIndexInformer`] per
//! resource type; add [`ResourceEventHandler`]s (or [`ResourceEventHandlerFuncs`]) and
//! indexers, `start` the factory, [`wait_for_cache_sync`], then read the cache through a
//! [`Lister`]. Under the hood, per informer:
//!
//! ```text
//! API server ─list/watch─► Reflector ─► DeltaFIFO ─pop─► Indexer (cache) ─► handlers
//! ```
//!
//! - [`reflector`]: paged list, watch with bookmarks, relist on 410, backoff.
//! - [`delta_fifo`]: per-object change lists, tombstones for deletions seen only by a relist.
//! - [`store`] / [`index`] / [`thread_safe_store`]: the cache, keyed `namespace/name`, indexed.
//! - [`shared_informer`] / [`processor`] / [`handler`]: fan-out to handlers, each with its own
//!   buffer and task.
//! - [`freshness`]: the resourceVersion the cache has reached, and waiting for one.
//! - [`factory`] / [`lister`]: what controllers use.

pub mod api_errors;
pub mod backoff;
pub mod delta;
pub mod delta_fifo;
pub mod factory;
pub mod freshness;
pub mod handler;
pub mod index;
pub mod keys;
pub mod lister;
pub mod lister_watcher;
pub mod own_writes;
pub mod processor;
pub mod reflector;
pub mod registration;
pub mod shared_informer;
pub mod store;
pub mod thread_safe_store;
pub mod transform;

#[cfg(test)]
pub(crate) mod testing;

pub use delta::{
    DeletedFinalStateUnknown, DeletedObject, Delta, DeltaType, Deltas, deletion_handling_key,
};
pub use delta_fifo::{DeltaFifo, DeltaFifoOptions, KnownObjects};
pub use factory::SharedInformerFactory;
pub use freshness::Freshness;
pub use handler::{FilteringResourceEventHandler, ResourceEventHandler, ResourceEventHandlerFuncs};
pub use index::{IndexFunc, Indexers, NAMESPACE_INDEX};
pub use keys::{meta_namespace_key, object_key, split_meta_namespace_key};
pub use lister::Lister;
pub use lister_watcher::{ApiListerWatcher, ListerWatcher, NeverListerWatcher, WatchStream};
pub use own_writes::OwnWrites;
pub use reflector::{Reflector, ReflectorOptions, ReflectorStore};
pub use registration::{InformerRegistrar, InformerSynced, all_synced, synced_of, wait_for_synced};
pub use shared_informer::{
    HasSynced, ResourceEventHandlerRegistration, SharedIndexInformer, SharedInformerOptions,
    wait_for_cache_sync, wait_until_synced,
};
pub use store::Indexer;
pub use transform::{TransformFunc, default_transform, drop_managed_fields};
