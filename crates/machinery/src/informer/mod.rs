//! Informers: Reflector, DeltaFIFO, Indexer, shared informers and listers (client-go `tools/cache`).

pub mod backoff;
pub mod delta;
pub mod delta_fifo;
pub mod freshness;
pub mod index;
pub mod keys;
pub mod store;
pub mod thread_safe_store;
pub mod transform;
