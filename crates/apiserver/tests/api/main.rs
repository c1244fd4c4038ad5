//! Integration tests of the API server over real HTTPS with `kube` clients: one binary, one module per area.

mod admission;
mod apiregistration;
mod apply;
mod certificates;
mod common;
mod crud;
mod deletion;
mod discovery;
mod endpointslices;
mod eviction;
mod flowcontrol;
mod lifecycle;
mod list;
mod namespaces;
mod networking;
mod openapi;
mod pods;
mod rbac;
mod reviews;
mod robustness;
mod security;
mod services;
mod sqlite;
mod storage;
mod watch;
mod workloads;
