//! An embedded Kubernetes-compatible API server on a revisioned key-value store.
//!
//! Where to start: [`storage`] holds the revisioned store (the kine-style SQLite log and an
//! in-memory backend behind one trait, with a watch cache in front).

pub mod protobuf;
pub mod storage;
pub mod strategic_merge;
pub mod table;
