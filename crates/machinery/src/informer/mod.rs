//! Informers: Reflector, DeltaFIFO, Indexer, shared informers and listers (client-go `tools/cache`).

pub mod api_errors;
pub mod backoff;
pub mod delta;
pub mod delta_fifo;
pub mod freshness;
pub mod index;
pub mod keys;
pub mod lister_watcher;
pub mod reflector;
pub mod store;
pub mod thread_safe_store;
pub mod transform;
