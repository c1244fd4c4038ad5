//! The controller manager: flags, controller registry, leader election, health, metrics, shutdown.
//!
//! Where to start: parse [`ManagerOptions`] (the flags of `kcm run`, named as
//! kube-controller-manager's), build a [`ControllerManager`] from them and a
//! [`ControllerRegistry`] ([`ControllerRegistry::builtin`] for kcm's controllers), and
//! [`run`](ControllerManager::run) it with a cancellation token (cancelled by
//! [`install_signal_handler`] on SIGINT/SIGTERM).
//!
//! Adding a controller: its names in [`names`], one [`ControllerDescriptor`] in
//! [`ControllerRegistry::builtin`] (in [`builtin`]) whose
//! init function takes a [`ControllerContext`], requests its informers from
//! [`ControllerContext::factory`], and returns a [`StartedController`] running it until
//! [`ControllerContext::cancel`] fires; plus its flags in [`ManagerOptions`].
//!
//! - [`options`] / [`duration`] / [`selection`]: flags, Go durations, `--controllers`.
//! - [`registry`] / [`context`]: controller descriptors and what their init functions get;
//!   [`names`]: kube-controller-manager's controller names and aliases; [`builtin`]: the
//!   descriptors of kcm's controllers.
//! - [`controller_manager`]: the run sequence (serve, elect, build, start informers, sync,
//!   run, stop in order).
//! - [`health`] / [`metrics`] / [`server`] / [`tls`]: the HTTPS endpoint; [`delegated_auth`]:
//!   who may read it (TokenReview, SubjectAccessReview).
//! - [`client_config`], [`client_builder`] (per-controller service-account clients),
//!   [`events`], [`signals`]: plumbing.

pub mod builtin;
pub mod client_builder;
pub mod client_config;
pub mod context;
pub mod controller_manager;
pub mod delegated_auth;
pub mod duration;
pub mod error;
pub mod events;
pub mod feature_gates;
pub mod health;
pub mod metrics;
pub mod names;
pub mod options;
pub mod registry;
pub mod selection;
pub mod server;
pub mod signals;
pub mod tls;

pub use client_config::load_client_config;
pub use context::ControllerContext;
pub use controller_manager::{
    CONTROLLER_SHUTDOWN_GRACE, ControllerManager, LEADER_ELECTION_HEALTH_TOLERANCE,
    ManagerInformers, Phase, RunningManager,
};
pub use duration::{GoDuration, ParseDurationError};
pub use error::{BoxError, Error, RegistryError, Result};
pub use events::{EventPipeline, LoggingEvents};
pub use health::{CheckFn, HealthChecks, HealthEndpoints, HealthResponse};
pub use metrics::{MANAGER_NAME, ManagerMetrics};
pub use options::{
    DEFAULT_SECURE_PORT, DelegatedAuthFlags, DeploymentControllerFlags,
    GarbageCollectorControllerFlags, GenericFlags, LeaderElectionFlags, ManagerOptions, MiscFlags,
    ReplicaSetControllerFlags, SecureServingFlags,
};
pub use registry::{
    ControllerDescriptor, ControllerRegistry, HealthCheckFn, InitFn, InitFuture, StartedController,
};
pub use selection::{ControllerSelection, UnknownControllers};
pub use signals::{handle_shutdown_signals, install_signal_handler, shutdown_signals};
