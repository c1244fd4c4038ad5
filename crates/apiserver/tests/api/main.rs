//! Integration tests of the API server over real HTTPS with `kube` clients: one binary, one module per area.

mod apply;
mod common;
mod crud;
mod deletion;
mod discovery;
mod eviction;
mod list;
mod namespaces;
mod openapi;
mod pods;
mod robustness;
mod security;
mod services;
mod sqlite;
mod watch;
mod workloads;
