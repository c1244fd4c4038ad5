//! The Deployment controller, as kube-controller-manager's `pkg/controller/deployment`.
//!
//! Only the pure, table-tested decision layer exists so far: [`util`] computes every number,
//! name, annotation and condition the controller needs, and the controller (event handlers,
//! sync loop) applies those decisions through the API.

pub mod util;
