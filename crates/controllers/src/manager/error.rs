//! Errors of the controller manager: bad options, client setup, serving, controllers, leadership.

use std::path::PathBuf;

use super::selection::UnknownControllers;

/// A boxed error, what controller init functions return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Registering a controller broke a rule of upstream's `NewControllerDescriptors`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// A name was empty.
    #[error("controller registered without a name")]
    EmptyName,
    /// A name was registered twice.
    #[error("controller name {0:?} was registered twice")]
    DuplicateName(String),
    /// An alias was used twice, or equals a controller name.
    #[error("controller {controller:?} has a duplicate or conflicting alias {alias:?}")]
    DuplicateAlias {
        /// The controller declaring the alias.
        controller: String,
        /// The alias.
        alias: String,
    },
}

/// Controller manager errors. Each names what failed (a flag, a file, a controller, the lease).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--controllers` named unknown controllers.
    #[error(transparent)]
    UnknownControllers(#[from] UnknownControllers),

    /// A flag value, or a combination of flags, is invalid.
    #[error("invalid options: {0}")]
    InvalidOption(String),

    /// Two controllers were registered under one name or alias.
    #[error(transparent)]
    Registry(#[from] RegistryError),

    /// The client configuration could not be loaded (kubeconfig, in-cluster, `--master`).
    #[error("load client configuration from {source_desc}: {message}")]
    ClientConfig {
        /// Where the configuration came from: a kubeconfig path, `--master`, or in-cluster.
        source_desc: String,
        /// What went wrong.
        message: String,
    },

    /// The API client could not be built from the configuration.
    #[error("build API client: {0}")]
    Client(#[source] Box<kcm_machinery::client::Error>),

    /// A TLS certificate or key file could not be read or used.
    #[error("serving certificate {path}: {message}")]
    Certificate {
        /// The file (or `<generated>` for the self-signed certificate).
        path: PathBuf,
        /// What went wrong.
        message: String,
    },

    /// The HTTPS endpoint could not listen.
    #[error("listen on {address}: {source}")]
    Listen {
        /// `--bind-address:--secure-port`.
        address: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },

    /// The leader elector could not be built.
    #[error("leader election on lease {lease}: {source}")]
    LeaderElection {
        /// `namespace/name` of the lease.
        lease: String,
        /// The configuration error.
        #[source]
        source: Box<kcm_machinery::leaderelection::Error>,
    },

    /// A controller's init function failed; the manager does not run with a controller missing.
    #[error("start controller {controller}: {source}")]
    ControllerInit {
        /// The controller's canonical name.
        controller: String,
        /// What its init function returned.
        #[source]
        source: BoxError,
    },

    /// This process stopped being the leader (renewal failed for the renew deadline). The
    /// process must exit non-zero, as kube-controller-manager does.
    #[error("leader election lost on lease {lease}")]
    LeadershipLost {
        /// `namespace/name` of the lease.
        lease: String,
    },

    /// The manager's task panicked or was aborted.
    #[error("controller manager task ended abnormally: {0}")]
    Task(String),
}

impl From<kcm_machinery::client::Error> for Error {
    fn from(err: kcm_machinery::client::Error) -> Self {
        Error::Client(Box::new(err))
    }
}

/// Result of the manager module.
pub type Result<T, E = Error> = std::result::Result<T, E>;
