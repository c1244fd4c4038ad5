//! The everyday types of a controller, in one import: `use kcm_machinery::prelude::*;`.
//!
//! What a queue-driven controller needs from informer to leader election: the shared informers
//! and their handlers, listers and keys, the rate-limited work queue and its metrics, the
//! worker loop and its error policy, expectations and owner references, the event recorder, the
//! rate-limited client, and the leader elector. Everything else stays in its module.

pub use crate::client::{
    ClientMetrics, DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS, build_client,
};
pub use crate::controller::{
    ControllerExpectations, ErrorPolicy, Retry, UidTrackingControllerExpectations,
    get_controller_of, new_controller_ref, run_controller, run_workers,
};
pub use crate::events::{EventBroadcaster, EventRecorder, EventType, KubeEventSink};
pub use crate::informer::{
    DeletedObject, Lister, ResourceEventHandlerFuncs, SharedIndexInformer, SharedInformerFactory,
    meta_namespace_key, object_key, split_meta_namespace_key, wait_until_synced,
};
pub use crate::labels::Selector;
pub use crate::leaderelection::{
    KubeLeaseLock, LeaderCallbacks, LeaderElectionConfig, LeaderElectionMetrics, LeaderElector,
    RunOutcome, new_identity,
};
pub use crate::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
