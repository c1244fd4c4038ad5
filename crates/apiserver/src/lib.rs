//! An embedded Kubernetes-compatible API server on a revisioned key-value store.
//!
//! Where to start:
//! - [`Server::start`] with a [`ServerConfig`] runs the server (HTTPS with a generated CA,
//!   bearer-token auth, a kubeconfig written into the data dir) and returns a
//!   [`RunningServer`] that hands out `kube` clients.
//! - [`testing::TestServer`] is the one-liner for integration tests of any crate.
//!
//! Layout, request to disk: [`http`] (routing, auth, discovery, verb handlers) →
//! [`registry`] (one generic registry: create, update/patch, delete, list, watch,
//! subresources; every write passes the [`admission`] chain of kube-apiserver's in-tree
//! plugins) parameterised by one declarative
//! [`ResourceDef`](registry::resource::ResourceDef) per resource, listed in [`resources`]
//! (how to add one is there) → [`storage`] (the revisioned store: the kine-style SQLite
//! log and an in-memory backend behind one trait, with a watch cache in front). Objects travel as `serde_json::Value`; errors are
//! Kubernetes `Status` objects built by [`error::ApiError`]. For kubectl, the HTTP layer also
//! decodes [`protobuf`] request bodies, applies [`strategic_merge`] patches and answers
//! `GET`s as [`table`]s when asked (see [`http::negotiate`]).

pub mod admission;
pub mod advertise;
pub mod apiextensions;
pub mod auth;
pub mod cel_error;
pub mod error;
pub mod fieldmanager;
pub mod http;
pub mod kubeconfig;
pub mod object;
pub mod openapi;
pub mod pki;
pub mod pointer;
pub mod protobuf;
pub mod registry;
pub mod resources;
pub mod server;
pub mod storage;
pub mod strategic_merge;
pub mod strict_decoding;
pub mod table;
pub mod testing;
pub mod validation;
pub mod version;

pub use server::{RunningServer, Server, ServerConfig, StorageBackend};
