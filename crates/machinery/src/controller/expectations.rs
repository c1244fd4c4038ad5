//! Expectations: how many creations and deletions a controller waits to observe before syncing again.
//!
//! A controller that creates 10 pods records "expect 10 adds" under its key; each pod the
//! informer delivers lowers the count. Until the count reaches zero (or the record is older than
//! [`EXPECTATIONS_TIMEOUT`]) the controller's cache is known to be stale and it must not act on
//! it, or it would create the same pods twice. Semantics follow kubernetes `pkg/controller`
//! (`ControllerExpectations`, `UIDTrackingControllerExpectations`).
//!
//! Locking: a map from key to a record of two atomic counters. Observations (the hot path,
//! called from informer handlers) take the map's read lock and update the atomics; only setting
//! and deleting expectations take the write lock. No lock is ever held across an `.await` (no
//! method is async).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;

/// How long expectations are trusted: after this a controller waiting for watch events that
/// never came syncs anyway, as upstream's `ExpectationsTimeout` (5 minutes).
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The key of a pod in deletion expectations, `namespace/name`, as upstream's `PodKey`.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The keys of `pods`, as upstream's `getPodKeys`.
pub fn pod_keys<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<String> {
    pods.into_iter().map(pod_key).collect()
}

/// One controller's outstanding creations and deletions (upstream `ControlleeExpectations`).
#[derive(Debug)]
struct Controllee {
    /// Creations still to be observed; may go negative when more are observed than expected.
    add: AtomicI64,
    /// Deletions still to be observed; may go negative.
    del: AtomicI64,
    /// When these expectations were set (tokio time, so tests can pause and advance it).
    timestamp: Instant,
}

impl Controllee {
    fn new(add: i64, del: i64) -> Self {
        Self {
            add: AtomicI64::new(add),
            del: AtomicI64::new(del),
            timestamp: Instant::now(),
        }
    }

    fn add(&self, add: i64, del: i64) {
        self.add.fetch_add(add, Ordering::AcqRel);
        self.del.fetch_add(del, Ordering::AcqRel);
    }

    fn counts(&self) -> (i64, i64) {
        (
            self.add.load(Ordering::Acquire),
            self.del.load(Ordering::Acquire),
        )
    }

    fn fulfilled(&self) -> bool {
        let (add, del) = self.counts();
        add <= 0 && del <= 0
    }
}

/// A snapshot of one controller's expectations, as upstream's `ControlleeExpectations` getters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expectations {
    /// Creations still expected (≤ 0 means none).
    pub add: i64,
    /// Deletions still expected (≤ 0 means none).
    pub del: i64,
    /// When the expectations were set.
    pub timestamp: Instant,
}

impl Expectations {
    /// True when no creation or deletion is outstanding, as upstream's `Fulfilled`.
    pub fn fulfilled(&self) -> bool {
        self.add <= 0 && self.del <= 0
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Per-controller-key creation/deletion expectations, as upstream's `ControllerExpectations`.
///
/// Keys are controller keys (`namespace/name`); one instance must serve one controller kind, or
/// keys of different kinds would collide.
#[derive(Debug)]
pub struct ControllerExpectations {
    /// Controller key → its expectations. Records are replaced whole by `set_expectations`
    /// (fresh timestamp); observations only touch the atomics.
    records: RwLock<HashMap<String, Arc<Controllee>>>,
    /// Age after which a record counts as satisfied.
    timeout: Duration,
}

impl Default for ControllerExpectations {
    fn default() -> Self {
        Self::new()
    }
}

impl ControllerExpectations {
    /// Empty expectations with the upstream [`EXPECTATIONS_TIMEOUT`].
    pub fn new() -> Self {
        Self::with_timeout(EXPECTATIONS_TIMEOUT)
    }

    /// Empty expectations that expire after `timeout` instead of five minutes.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            records: RwLock::new(HashMap::new()),
            timeout,
        }
    }

    /// The expectations recorded for `key`, if any, as upstream's `GetExpectations`.
    pub fn get_expectations(&self, key: &str) -> Option<Expectations> {
        read(&self.records).get(key).map(|c| {
            let (add, del) = c.counts();
            Expectations {
                add,
                del,
                timestamp: c.timestamp,
            }
        })
    }

    /// Whether the controller `key` may sync: true when its expectations are fulfilled (both
    /// counts ≤ 0), when they are older than the timeout, or when none were ever recorded
    /// (a new controller, or one whose expectations were deleted), as upstream's
    /// `SatisfiedExpectations`.
    pub fn satisfied_expectations(&self, key: &str) -> bool {
        let Some(record) = read(&self.records).get(key).cloned() else {
            tracing::trace!(
                controller = key,
                "controller either never recorded expectations, or the ttl expired"
            );
            return true;
        };
        if record.fulfilled() {
            return true;
        }
        if record.timestamp.elapsed() > self.timeout {
            tracing::debug!(controller = key, "controller expectations expired");
            return true;
        }
        let (add, del) = record.counts();
        tracing::trace!(
            controller = key,
            add,
            del,
            "controller still waiting on expectations"
        );
        false
    }

    /// Forgets the expectations of `key`, as upstream's `DeleteExpectations`.
    pub fn delete_expectations(&self, key: &str) {
        write(&self.records).remove(key);
    }

    /// Replaces the expectations of `key` with `add` creations and `del` deletions, timestamped
    /// now, as upstream's `SetExpectations`.
    pub fn set_expectations(&self, key: &str, add: i64, del: i64) {
        tracing::trace!(controller = key, add, del, "setting expectations");
        write(&self.records).insert(key.to_owned(), Arc::new(Controllee::new(add, del)));
    }

    /// Expects `adds` creations (and no deletions) for `key`, as upstream's `ExpectCreations`.
    pub fn expect_creations(&self, key: &str, adds: i64) {
        self.set_expectations(key, adds, 0);
    }

    /// Expects `dels` deletions (and no creations) for `key`, as upstream's `ExpectDeletions`.
    pub fn expect_deletions(&self, key: &str, dels: i64) {
        self.set_expectations(key, 0, dels);
    }

    /// Lowers the outstanding counts of `key`; a no-op when `key` has no expectations, as
    /// upstream's `LowerExpectations`.
    pub fn lower_expectations(&self, key: &str, add: i64, del: i64) {
        if let Some(record) = read(&self.records).get(key) {
            record.add(-add, -del);
        }
    }

    /// Raises the outstanding counts of `key`; a no-op when `key` has no expectations, as
    /// upstream's `RaiseExpectations`.
    pub fn raise_expectations(&self, key: &str, add: i64, del: i64) {
        if let Some(record) = read(&self.records).get(key) {
            record.add(add, del);
        }
    }

    /// Records one observed creation for `key`, as upstream's `CreationObserved`.
    pub fn creation_observed(&self, key: &str) {
        self.lower_expectations(key, 1, 0);
    }

    /// Records one observed deletion for `key`, as upstream's `DeletionObserved`.
    pub fn deletion_observed(&self, key: &str) {
        self.lower_expectations(key, 0, 1);
    }
}

/// Expectations that remember *which* pods a controller is deleting, so that a pod observed
/// twice (an update setting its deletionTimestamp, then its delete) is counted once, as
/// upstream's `UIDTrackingControllerExpectations`.
///
/// Creations and the other counters are delegated to the wrapped [`ControllerExpectations`]
/// (see [`Self::expectations`] and the forwarding methods).
#[derive(Debug, Default)]
pub struct UidTrackingControllerExpectations {
    /// The counters.
    inner: ControllerExpectations,
    /// Controller key → pod keys whose deletion is still expected. Held while the counters are
    /// updated so that a pod key leaves the set exactly when its deletion is counted. Lock
    /// order: `deleting` then `inner.records`, never the reverse.
    deleting: Mutex<HashMap<String, HashSet<String>>>,
}

impl UidTrackingControllerExpectations {
    /// Wraps `inner`, as upstream's `NewUIDTrackingControllerExpectations`.
    pub fn new(inner: ControllerExpectations) -> Self {
        Self {
            inner,
            deleting: Mutex::new(HashMap::new()),
        }
    }

    /// The wrapped counters.
    pub fn expectations(&self) -> &ControllerExpectations {
        &self.inner
    }

    /// The pod keys whose deletion `key` still expects, as upstream's `GetUIDs`; `None` when no
    /// deletions were ever expected (or they were deleted).
    pub fn get_uids(&self, key: &str) -> Option<HashSet<String>> {
        lock(&self.deleting).get(key).cloned()
    }

    /// Expects the deletion of every pod in `pod_keys` (duplicates count once), replacing any
    /// earlier expectations of `key`, as upstream's `ExpectDeletions`.
    pub fn expect_deletions(&self, key: &str, pod_keys: impl IntoIterator<Item = String>) {
        let expected: HashSet<String> = pod_keys.into_iter().collect();
        let count = i64::try_from(expected.len()).unwrap_or(i64::MAX);
        let mut deleting = lock(&self.deleting);
        if let Some(existing) = deleting.get(key).filter(|s| !s.is_empty()) {
            tracing::warn!(controller = key, existing = ?existing, "clobbering existing delete keys");
        }
        tracing::trace!(controller = key, pods = ?expected, "waiting on deletions");
        deleting.insert(key.to_owned(), expected);
        self.inner.expect_deletions(key, count);
    }

    /// Records that pod `pod_key` was deleted; counted only if `key` expected it and only the
    /// first time, as upstream's `DeletionObserved`.
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        let mut deleting = lock(&self.deleting);
        if let Some(pods) = deleting.get_mut(key)
            && pods.remove(pod_key)
        {
            tracing::trace!(controller = key, pod = pod_key, "received delete for pod");
            self.inner.deletion_observed(key);
        }
    }

    /// Forgets both the counters and the pod keys of `key`, as upstream's `DeleteExpectations`.
    pub fn delete_expectations(&self, key: &str) {
        let mut deleting = lock(&self.deleting);
        self.inner.delete_expectations(key);
        deleting.remove(key);
    }

    /// See [`ControllerExpectations::satisfied_expectations`].
    pub fn satisfied_expectations(&self, key: &str) -> bool {
        self.inner.satisfied_expectations(key)
    }

    /// See [`ControllerExpectations::get_expectations`].
    pub fn get_expectations(&self, key: &str) -> Option<Expectations> {
        self.inner.get_expectations(key)
    }

    /// See [`ControllerExpectations::expect_creations`].
    pub fn expect_creations(&self, key: &str, adds: i64) {
        self.inner.expect_creations(key, adds);
    }

    /// See [`ControllerExpectations::creation_observed`].
    pub fn creation_observed(&self, key: &str) {
        self.inner.creation_observed(key);
    }

    /// See [`ControllerExpectations::set_expectations`].
    pub fn set_expectations(&self, key: &str, add: i64, del: i64) {
        self.inner.set_expectations(key, add, del);
    }

    /// See [`ControllerExpectations::raise_expectations`].
    pub fn raise_expectations(&self, key: &str, add: i64, del: i64) {
        self.inner.raise_expectations(key, add, del);
    }

    /// See [`ControllerExpectations::lower_expectations`].
    pub fn lower_expectations(&self, key: &str, add: i64, del: i64) {
        self.inner.lower_expectations(key, add, del);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_testing::MetaBuilder;

    const RC_KEY: &str = "default/foobar";

    /// Upstream `TestControllerExpectations`: concurrent observations, surpassed expectations,
    /// and expiry after the TTL (30 s there; paused tokio time here).
    #[tokio::test(start_paused = true)]
    async fn controller_expectations() {
        let ttl = Duration::from_secs(30);
        let e = Arc::new(ControllerExpectations::with_timeout(ttl));
        let (adds, dels) = (10, 30);
        e.set_expectations(RC_KEY, adds, dels);

        let observe = |creations: bool, n: i64| {
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    let e = Arc::clone(&e);
                    std::thread::spawn(move || {
                        if creations {
                            e.creation_observed(RC_KEY)
                        } else {
                            e.deletion_observed(RC_KEY)
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().expect("observer thread");
            }
        };
        observe(true, adds + 1);
        assert!(
            !e.satisfied_expectations(RC_KEY),
            "rc will sync before expectations are met"
        );
        observe(false, dels + 1);

        // Expectations have been surpassed.
        let got = e.get_expectations(RC_KEY).expect("recorded");
        assert_eq!((got.add, got.del), (-1, -1));
        assert!(got.fulfilled());
        assert!(e.satisfied_expectations(RC_KEY));

        // Old expectations are cleared because of the ttl.
        e.set_expectations(RC_KEY, 1, 2);
        let got = e.get_expectations(RC_KEY).expect("recorded");
        assert_eq!((got.add, got.del), (1, 2));
        assert!(!e.satisfied_expectations(RC_KEY));
        tokio::time::advance(ttl).await;
        assert!(
            !e.satisfied_expectations(RC_KEY),
            "exactly the ttl is not yet expired"
        );
        tokio::time::advance(Duration::from_nanos(1)).await;
        assert!(
            e.satisfied_expectations(RC_KEY),
            "expectations should have expired"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn default_timeout_is_five_minutes() {
        let e = ControllerExpectations::new();
        e.expect_creations(RC_KEY, 3);
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(!e.satisfied_expectations(RC_KEY));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(e.satisfied_expectations(RC_KEY));
        // Setting again restarts the clock.
        e.expect_creations(RC_KEY, 1);
        assert!(!e.satisfied_expectations(RC_KEY));
    }

    #[test]
    fn satisfied_without_a_record_and_after_delete() {
        let e = ControllerExpectations::new();
        assert!(e.satisfied_expectations("ns/new"));
        e.expect_deletions("ns/new", 2);
        assert!(!e.satisfied_expectations("ns/new"));
        e.delete_expectations("ns/new");
        assert!(e.satisfied_expectations("ns/new"));
        assert!(e.get_expectations("ns/new").is_none());
    }

    #[test]
    fn raise_and_lower_only_touch_existing_records() {
        let e = ControllerExpectations::new();
        e.raise_expectations("ns/a", 5, 5);
        assert!(
            e.get_expectations("ns/a").is_none(),
            "raise creates nothing"
        );
        e.expect_creations("ns/a", 1);
        e.raise_expectations("ns/a", 2, 1);
        let got = e.get_expectations("ns/a").expect("recorded");
        assert_eq!((got.add, got.del), (3, 1));
        e.lower_expectations("ns/a", 3, 0);
        assert!(!e.satisfied_expectations("ns/a"), "one deletion left");
        e.deletion_observed("ns/a");
        assert!(e.satisfied_expectations("ns/a"));
    }

    fn pod(ns: &str, name: &str) -> Pod {
        kcm_testing::pod(name).namespace(ns).build()
    }

    /// Upstream `TestUIDExpectations`: each controller expects the deletion of its pods, is
    /// satisfied once all are observed, and forgets the pod keys on delete.
    #[test]
    fn uid_expectations() {
        let uid_exp = UidTrackingControllerExpectations::new(ControllerExpectations::new());
        struct Case {
            name: &'static str,
            replicas: usize,
        }
        let cases = [
            Case {
                name: "Replication controller with 2 replicas",
                replicas: 2,
            },
            Case {
                name: "Replication controller with 1 replica",
                replicas: 1,
            },
            Case {
                name: "Replication controller with no replicas",
                replicas: 0,
            },
            Case {
                name: "Replication controller with 5 replicas",
                replicas: 5,
            },
        ];
        for case in &cases {
            let rc_key = format!("default/rc-{}", case.replicas);
            let pods: Vec<Pod> = (0..5)
                .map(|i| pod("default", &format!("pod{i}-rc-{}", case.replicas)))
                .collect();
            let keys = pod_keys(&pods);
            uid_exp.expect_deletions(&rc_key, keys.clone());
            assert!(
                !uid_exp.satisfied_expectations(&rc_key),
                "{}: satisfied before deletion",
                case.name
            );
            for key in &keys {
                uid_exp.deletion_observed(&rc_key, key);
            }
            assert!(
                uid_exp.satisfied_expectations(&rc_key),
                "{}: not satisfied after deletion",
                case.name
            );
            uid_exp.delete_expectations(&rc_key);
            assert!(uid_exp.get_uids(&rc_key).is_none(), "{}", case.name);
            assert!(uid_exp.get_expectations(&rc_key).is_none(), "{}", case.name);
        }
    }

    #[test]
    fn a_deleted_pod_is_counted_once() {
        let e = UidTrackingControllerExpectations::default();
        e.expect_deletions("ns/rs", vec!["ns/a".to_owned(), "ns/b".to_owned()]);
        // Graceful deletion: the update setting deletionTimestamp, then the delete event.
        e.deletion_observed("ns/rs", "ns/a");
        e.deletion_observed("ns/rs", "ns/a");
        let got = e.get_expectations("ns/rs").expect("recorded");
        assert_eq!(got.del, 1, "second observation of ns/a must not count");
        assert!(!e.satisfied_expectations("ns/rs"));
        // A pod this controller never deleted does not count either.
        e.deletion_observed("ns/rs", "ns/other");
        assert!(!e.satisfied_expectations("ns/rs"));
        e.deletion_observed("ns/rs", "ns/b");
        assert!(e.satisfied_expectations("ns/rs"));
        assert_eq!(e.get_uids("ns/rs").map(|s| s.len()), Some(0));
    }

    #[test]
    fn duplicate_pod_keys_are_expected_once() {
        let e = UidTrackingControllerExpectations::default();
        e.expect_deletions("ns/rs", vec!["ns/a".to_owned(), "ns/a".to_owned()]);
        assert_eq!(e.get_expectations("ns/rs").map(|x| x.del), Some(1));
        e.deletion_observed("ns/rs", "ns/a");
        assert!(e.satisfied_expectations("ns/rs"));
    }

    #[test]
    fn creations_are_delegated() {
        let e = UidTrackingControllerExpectations::default();
        e.expect_creations("ns/rs", 2);
        e.creation_observed("ns/rs");
        assert!(!e.satisfied_expectations("ns/rs"));
        e.creation_observed("ns/rs");
        assert!(e.satisfied_expectations("ns/rs"));
        assert!(e.get_uids("ns/rs").is_none());
    }

    #[test]
    fn pod_key_is_namespace_slash_name() {
        assert_eq!(pod_key(&pod("shop", "web-1")), "shop/web-1");
    }
}
