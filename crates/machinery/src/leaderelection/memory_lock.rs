//! An in-memory `LeaseLock` for tests: many electors share one lease, with failure injection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::error::{Error, Result};
use super::lock::LeaseLock;
use super::record::LeaderElectionRecord;

/// The stored lease: a record and a resourceVersion bumped on every write.
#[derive(Debug, Default)]
struct Stored {
    /// The lease, `None` until someone creates it.
    lease: Option<(LeaderElectionRecord, u64)>,
    /// The last resourceVersion handed out; every write takes the next one.
    last_version: u64,
    /// How many `get` / `create` / `update` calls reached the store (failed ones included).
    calls: Calls,
}

/// Counts of the calls that reached a [`MemoryLeaseStore`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Calls {
    /// `get` calls.
    pub gets: usize,
    /// `create` calls.
    pub creates: usize,
    /// `update` calls.
    pub updates: usize,
}

/// One lease held in memory, shared by every [`MemoryLeaseLock`] made from it (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct MemoryLeaseStore {
    inner: Arc<Mutex<Stored>>,
}

impl MemoryLeaseStore {
    /// An empty store: the lease does not exist yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store whose lease already holds `record`.
    pub fn with_record(record: LeaderElectionRecord) -> Self {
        let store = Self::new();
        store.set_record(record);
        store
    }

    /// A new lock (a new client) on this store's lease.
    pub fn lock(&self) -> MemoryLeaseLock {
        MemoryLeaseLock {
            store: self.clone(),
            seen_version: None,
            disconnected: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The current record, if the lease exists.
    pub fn record(&self) -> Option<LeaderElectionRecord> {
        self.locked().lease.as_ref().map(|(r, _)| r.clone())
    }

    /// Overwrites the lease as an outside writer would (bumps the resourceVersion).
    pub fn set_record(&self, record: LeaderElectionRecord) {
        let mut stored = self.locked();
        stored.last_version += 1;
        let version = stored.last_version;
        stored.lease = Some((record, version));
    }

    /// How many calls reached the store so far.
    pub fn calls(&self) -> Calls {
        self.locked().calls
    }

    fn locked(&self) -> MutexGuard<'_, Stored> {
        match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// A client of a [`MemoryLeaseStore`], with the resourceVersion precondition of a real Lease lock.
#[derive(Debug)]
pub struct MemoryLeaseLock {
    /// The shared lease.
    store: MemoryLeaseStore,
    /// The resourceVersion this client last read or wrote; `None` before the first get/create.
    seen_version: Option<u64>,
    /// When set, every call fails with [`Error::Unavailable`] (a network partition).
    disconnected: Arc<AtomicBool>,
}

impl MemoryLeaseLock {
    /// A switch that cuts this client off from the store (`true`) or reconnects it (`false`).
    pub fn disconnect_switch(&self) -> Disconnect {
        Disconnect(self.disconnected.clone())
    }

    fn check_connected(&self, op: &'static str) -> Result<()> {
        if self.disconnected.load(Ordering::SeqCst) {
            return Err(Error::Unavailable {
                lease: self.describe(),
                op,
            });
        }
        Ok(())
    }
}

/// Cuts a [`MemoryLeaseLock`] off from its store, to simulate a partition from the API server.
#[derive(Clone, Debug)]
pub struct Disconnect(Arc<AtomicBool>);

impl Disconnect {
    /// `true`: every call of the lock fails; `false`: calls reach the store again.
    pub fn set(&self, disconnected: bool) {
        self.0.store(disconnected, Ordering::SeqCst);
    }
}

#[async_trait]
impl LeaseLock for MemoryLeaseLock {
    async fn get(&mut self) -> Result<LeaderElectionRecord> {
        self.check_connected("get")?;
        let mut stored = self.store.locked();
        stored.calls.gets += 1;
        match &stored.lease {
            Some((record, version)) => {
                self.seen_version = Some(*version);
                Ok(record.clone())
            }
            None => Err(Error::NotFound {
                lease: self.describe(),
            }),
        }
    }

    async fn create(&mut self, record: &LeaderElectionRecord) -> Result<()> {
        self.check_connected("create")?;
        let mut stored = self.store.locked();
        stored.calls.creates += 1;
        if stored.lease.is_some() {
            return Err(Error::AlreadyExists {
                lease: self.describe(),
            });
        }
        stored.last_version += 1;
        let version = stored.last_version;
        stored.lease = Some((record.clone(), version));
        self.seen_version = Some(version);
        Ok(())
    }

    async fn update(&mut self, record: &LeaderElectionRecord) -> Result<()> {
        self.check_connected("update")?;
        let mut stored = self.store.locked();
        stored.calls.updates += 1;
        let Some(seen) = self.seen_version else {
            return Err(Error::NotInitialized {
                lease: self.describe(),
            });
        };
        let current = match &stored.lease {
            Some((_, version)) => *version,
            None => {
                return Err(Error::NotFound {
                    lease: self.describe(),
                });
            }
        };
        if current != seen {
            return Err(Error::Conflict {
                lease: self.describe(),
            });
        }
        stored.last_version += 1;
        let version = stored.last_version;
        stored.lease = Some((record.clone(), version));
        self.seen_version = Some(version);
        Ok(())
    }

    fn describe(&self) -> String {
        "memory/lease".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn update_after_someone_else_wrote_conflicts() {
        let store = MemoryLeaseStore::new();
        let mut a = store.lock();
        let mut b = store.lock();
        let record = LeaderElectionRecord {
            holder_identity: "a".into(),
            ..Default::default()
        };
        a.create(&record).await.expect("create");
        b.get().await.expect("get");
        a.update(&record).await.expect("a renews");
        let err = b.update(&record).await.expect_err("b is stale");
        assert!(matches!(err, Error::Conflict { .. }), "{err}");
        b.get().await.expect("get");
        b.update(&record).await.expect("fresh update works");
        assert_eq!(
            store.calls(),
            Calls {
                gets: 2,
                creates: 1,
                updates: 3
            }
        );
    }

    #[tokio::test]
    async fn disconnected_lock_fails_every_call() {
        let store = MemoryLeaseStore::new();
        let mut lock = store.lock();
        lock.disconnect_switch().set(true);
        let err = lock.get().await.expect_err("partitioned");
        assert!(matches!(err, Error::Unavailable { op: "get", .. }), "{err}");
        assert_eq!(store.calls(), Calls::default());
    }
}
