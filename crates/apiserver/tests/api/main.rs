//! Integration tests of the API server over real HTTPS with `kube` clients: one binary, one module per area.

mod common;
mod crud;
mod deletion;
mod list;
mod pods;
mod watch;
mod workloads;
