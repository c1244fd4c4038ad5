//! client-go in Rust: the machinery kube-controller-manager's controllers are built from.
//!
//! Where to start: [`prelude`] imports the everyday types of a controller in one line; the
//! README shows a whole controller, and `examples/pod_keeper.rs` runs one.
//! - [`informer`]: Reflector → DeltaFIFO → Indexer, shared informers, listers (client-go `tools/cache`).
//! - [`workqueue`]: the fair, de-duplicating, rate-limited work queue (client-go `util/workqueue`).
//! - [`controller`]: expectations, the controller-ref manager, pod control, pod ranking, slow start
//!   (kubernetes `pkg/controller`).
//! - [`events`]: the core/v1 event recorder with aggregation and spam filtering.
//! - [`leaderelection`]: Lease-based leader election with client-go's algorithm.
//! - [`client`]: a client-side QPS/burst limiter and request metrics for `kube::Client`.
//! - [`dynamic`]: custom resources: a dynamic client, and typed custom resource structs.
//! - [`labels`]: Kubernetes label selectors.
//! - [`scheduling`]: node affinity and taint/toleration predicates (component-helpers).
//! - [`intstr`]: int-or-percent values.
//! - [`quota`]: ResourceQuota usage evaluators (kubernetes `pkg/quota/v1`).
//!
//! Data flows one way: API server --list/watch--> Reflector --deltas--> DeltaFIFO --pop-->
//! Indexer (cache) and event handlers --keys--> work queue --key--> worker.

pub mod bootstrap_token;
pub mod client;
pub mod controller;
pub mod cron;
pub mod discovery;
pub mod dra;
pub mod dynamic;
pub mod events;
pub mod informer;
pub mod intstr;
pub mod labels;
pub mod leaderelection;
pub mod lru;
pub mod prelude;
pub mod quantity;
pub mod quota;
pub mod repeated_log;
pub mod resource_names;
pub mod scheduling;
pub mod storage;
pub mod workqueue;
