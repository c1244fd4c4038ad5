//! Errors of leader election: invalid configuration and lease lock failures.

/// Leader election errors. Lock errors name the lease (`namespace/name`) and the operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration breaks one of client-go's rules (e.g. lease duration not above the renew deadline).
    #[error("invalid leader election config: {0}")]
    InvalidConfig(&'static str),

    /// The lease does not exist (`get`).
    #[error("lease {lease} not found")]
    NotFound {
        /// `namespace/name` of the lease.
        lease: String,
    },

    /// The lease already exists (`create` lost a race).
    #[error("create lease {lease}: already exists")]
    AlreadyExists {
        /// `namespace/name` of the lease.
        lease: String,
    },

    /// Someone else wrote the lease since we read it (HTTP 409 on `update`).
    #[error("update lease {lease}: conflict, the lease was modified since it was read")]
    Conflict {
        /// `namespace/name` of the lease.
        lease: String,
    },

    /// `update` was called before the lock read or created the lease.
    #[error("update lease {lease}: not initialized, call get or create first")]
    NotInitialized {
        /// `namespace/name` of the lease.
        lease: String,
    },

    /// The API server could not be reached or refused the request.
    #[error("{op} lease {lease}: {source}")]
    Api {
        /// `namespace/name` of the lease.
        lease: String,
        /// The operation: `get`, `create` or `update`.
        op: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },

    /// The lock is unavailable (used by the in-memory lock to simulate a partition).
    #[error("{op} lease {lease}: lock unavailable")]
    Unavailable {
        /// `namespace/name` of the lease.
        lease: String,
        /// The operation: `get`, `create` or `update`.
        op: &'static str,
    },

    /// The operation did not finish before the renew deadline.
    #[error("{op} lease {lease}: timed out")]
    Timeout {
        /// `namespace/name` of the lease.
        lease: String,
        /// The operation that timed out.
        op: &'static str,
    },
}

impl Error {
    /// Whether the lease does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }
}

/// Leader election result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
