//! The `LeaseLock` trait: the resource the leader election record is stored in.

use async_trait::async_trait;

use super::error::Result;
use super::record::LeaderElectionRecord;

/// Where the election record lives, as client-go's `resourcelock.Interface` (Lease flavour).
///
/// A lock remembers the object it last read or wrote so that [`LeaseLock::update`] is an
/// optimistic-concurrency write (resourceVersion precondition): a concurrent writer makes it fail
/// with [`Error::Conflict`](super::Error::Conflict), and the elector simply retries later from a
/// fresh [`LeaseLock::get`].
#[async_trait]
pub trait LeaseLock: Send {
    /// Reads the current record and remembers the object for the next update.
    /// Fails with [`Error::NotFound`](super::Error::NotFound) when the lease does not exist.
    async fn get(&mut self) -> Result<LeaderElectionRecord>;

    /// Creates the lease holding `record`, and remembers the created object.
    async fn create(&mut self, record: &LeaderElectionRecord) -> Result<()>;

    /// Replaces the record in the object last read or written (resourceVersion precondition).
    async fn update(&mut self, record: &LeaderElectionRecord) -> Result<()>;

    /// `namespace/name` of the lease, for logs and errors.
    fn describe(&self) -> String;
}
