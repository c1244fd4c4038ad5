//! Integration tests of the API server over real HTTPS with `kube` clients: one binary, one module per area.

mod common;
mod crud;
mod deletion;
mod discovery;
mod eviction;
mod list;
mod namespaces;
mod pods;
mod robustness;
mod security;
mod sqlite;
mod watch;
mod workloads;
