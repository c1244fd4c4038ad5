//! The leader elector: a state machine with one `step` function, and the `run` loop driving it.
//!
//! Behaviour is client-go's `leaderelection.LeaderElector`:
//! - a candidate calls `tryAcquireOrRenew` every retry period (jittered by up to 1.2×) and
//!   takes the lease when it is free (empty holder), missing, or expired;
//! - expiry is judged on *our* monotonic clock: the lease is valid until `leaseDurationSeconds`
//!   after the moment we last saw the record change (`observedTime`), never from the record's
//!   own timestamps, so clock skew between machines does not matter;
//! - the leader renews every retry period (fast path: update from the record it last wrote;
//!   slow path: re-read then update); a renewal round that has not succeeded within the renew
//!   deadline ends leadership;
//! - `leaderTransitions` is incremented whenever the holder changes;
//! - on release the holder is cleared and `leaseDurationSeconds` set to 1, so standbys take over
//!   at their next attempt.
//!
//! Two deliberate differences: the first renewal comes one retry period after acquiring
//! (client-go renews again at once), and `release` also checks the freshly read holder so it
//! never clears a lease someone else took meanwhile.
//!
//! Time comes from `tokio::time::Instant` (pausable in tests); wall-clock timestamps written
//! into the Lease come from an injected [`WallClock`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::config::{JITTER_FACTOR, LeaderElectionConfig};
use super::error::Result;
use super::lock::LeaseLock;
use super::metrics::LeaderElectionMetrics;
use super::record::LeaderElectionRecord;
use crate::events::{EventRecorder, EventType, SystemClock, WallClock};

/// Where the elector is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectorState {
    /// Not leading: trying to acquire the lease every retry period.
    Candidate,
    /// Leading: renewing the lease every retry period.
    Leader,
    /// Leadership was lost (a renewal round missed the renew deadline). Terminal.
    Lost,
}

/// A change that the driver of [`LeaderElector::step`] must act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// We acquired the lease and are now the leader.
    Acquired,
    /// We stopped being the leader: renewal did not succeed within the renew deadline.
    Lost,
}

/// What one [`LeaderElector::step`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Leadership changed in this step.
    pub transition: Option<Transition>,
    /// A holder different from the last reported one was observed (client-go's `OnNewLeader`;
    /// our own identity included, an empty string for a released lease).
    pub new_leader: Option<String>,
    /// When to call `step` again; `None` once leadership is lost.
    pub next: Option<Instant>,
}

/// How [`LeaderElector::run`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// The cancellation token fired (the lease was released if configured and held).
    Cancelled,
    /// Leadership was lost; everything guarded by the lease has been told to stop.
    LeadershipLost,
}

/// A cheap, cloneable view of an elector's state, for health checks and `/readyz`. May be stale
/// by at most one step.
#[derive(Clone, Debug)]
pub struct LeaderElectionStatus {
    rx: watch::Receiver<StatusSnapshot>,
    lease_duration: Duration,
    lease: String,
}

/// What [`LeaderElectionStatus`] publishes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct StatusSnapshot {
    /// The holder in the last observed record (empty when free or never observed).
    leader: String,
    /// Whether the elector is in [`ElectorState::Leader`].
    leading: bool,
    /// When the observed record last changed (our clock); `None` before the first observation.
    observed_at: Option<Instant>,
}

impl LeaderElectionStatus {
    /// Whether this process currently leads (client-go's `IsLeader`, by state).
    pub fn is_leader(&self) -> bool {
        self.rx.borrow().leading
    }

    /// The last observed holder; empty when none was observed (client-go's `GetLeader`).
    pub fn leader(&self) -> String {
        self.rx.borrow().leader.clone()
    }

    /// Waits until the status changes; `false` once the elector is gone.
    pub async fn changed(&mut self) -> bool {
        self.rx.changed().await.is_ok()
    }

    /// Health check, as client-go's `LeaderElector.Check`: fails when we believe we lead but
    /// have not renewed for longer than the lease duration plus `max_tolerable_expired_lease`.
    pub fn check(&self, max_tolerable_expired_lease: Duration) -> Result<(), String> {
        let snapshot = self.rx.borrow();
        if !snapshot.leading {
            return Ok(());
        }
        let Some(observed_at) = snapshot.observed_at else {
            return Ok(());
        };
        if observed_at.elapsed() > self.lease_duration + max_tolerable_expired_lease {
            return Err(format!(
                "failed election to renew leadership on lease {}",
                self.lease
            ));
        }
        Ok(())
    }
}

/// Boxed `on_started_leading` callback.
type StartedLeading = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send>;

/// Callbacks fired by [`LeaderElector::run`], as client-go's `LeaderCallbacks`.
pub struct LeaderCallbacks {
    /// Called once on acquiring the lease; its future is spawned and given a token that is
    /// cancelled when leadership ends (lost, or the run cancelled).
    on_started_leading: Option<StartedLeading>,
    /// Called once when `run` ends, whether or not we ever led (as client-go).
    on_stopped_leading: Option<Box<dyn FnOnce() + Send>>,
    /// Called with each newly observed holder (including ourselves and "" after a release).
    on_new_leader: Option<Box<dyn FnMut(&str) + Send>>,
}

impl LeaderCallbacks {
    /// Callbacks running `on_started_leading(token)` as a task while we lead. The task must stop
    /// when `token` is cancelled; with `release_on_cancel`, the lease is released only after the
    /// task has finished.
    pub fn new<F, Fut>(on_started_leading: F) -> Self
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            on_started_leading: Some(Box::new(move |token| {
                Box::pin(on_started_leading(token)) as BoxFuture<'static, ()>
            })),
            on_stopped_leading: None,
            on_new_leader: None,
        }
    }

    /// Sets the callback run when the elector stops (client-go's `OnStoppedLeading`).
    pub fn on_stopped_leading(mut self, f: impl FnOnce() + Send + 'static) -> Self {
        self.on_stopped_leading = Some(Box::new(f));
        self
    }

    /// Sets the callback run for each newly observed leader (client-go's `OnNewLeader`).
    /// It runs on the elector's task: keep it short.
    pub fn on_new_leader(mut self, f: impl FnMut(&str) + Send + 'static) -> Self {
        self.on_new_leader = Some(Box::new(f));
        self
    }
}

/// The task running `on_started_leading` while we lead.
struct LeadingTask {
    /// Cancelled when leadership ends.
    token: CancellationToken,
    /// Cancels `token` if `run` is dropped mid-way.
    _guard: DropGuard,
    /// The spawned callback future.
    task: JoinHandle<()>,
}

/// A leader election client for one Lease, as client-go's `LeaderElector`.
pub struct LeaderElector {
    /// Validated configuration.
    config: LeaderElectionConfig,
    /// Where the record lives.
    lock: Box<dyn LeaseLock>,
    /// Wall-clock source for `acquireTime` / `renewTime`.
    clock: Arc<dyn WallClock>,
    /// Optional process metrics (`leader_election_master_status`).
    metrics: Option<Arc<LeaderElectionMetrics>>,
    /// Optional recorder for `LeaderElection` events on the Lease.
    recorder: Option<Arc<dyn EventRecorder>>,
    /// Jitter for retries while a candidate.
    rng: StdRng,
    /// The record last observed: read from the lock, or written by us. `is_leader` is judged on it.
    observed_record: LeaderElectionRecord,
    /// The record as last *read* from the lock (client-go's `observedRawRecord`); a fresh read
    /// that differs from it means someone wrote the lease, which restarts `observed_time`.
    observed_raw: Option<LeaderElectionRecord>,
    /// When `observed_record` last changed, on our monotonic clock; `None` = never (treated as
    /// expired).
    observed_time: Option<Instant>,
    /// The holder last reported through `Step::new_leader`.
    reported_leader: String,
    /// Candidate / Leader / Lost.
    state: ElectorState,
    /// While leading: the deadline of the current renewal round, set once an attempt failed and
    /// cleared by a successful renewal. `None` while not leading.
    round_deadline: Option<Instant>,
    /// Publishes the status to [`LeaderElectionStatus`] readers.
    status: watch::Sender<StatusSnapshot>,
}

impl LeaderElector {
    /// An elector for `config`, storing its record through `lock`. Fails when the config breaks
    /// client-go's rules (see [`LeaderElectionConfig::validate`]).
    pub fn new(config: LeaderElectionConfig, lock: impl LeaseLock + 'static) -> Result<Self> {
        config.validate()?;
        let (status, _) = watch::channel(StatusSnapshot::default());
        Ok(Self {
            config,
            lock: Box::new(lock),
            clock: Arc::new(SystemClock),
            metrics: None,
            recorder: None,
            rng: StdRng::seed_from_u64(rand::random()),
            observed_record: LeaderElectionRecord::default(),
            observed_raw: None,
            observed_time: None,
            reported_leader: String::new(),
            state: ElectorState::Candidate,
            round_deadline: None,
            status,
        })
    }

    /// Uses `clock` for the wall-clock timestamps written into the Lease.
    pub fn with_clock(mut self, clock: Arc<dyn WallClock>) -> Self {
        self.clock = clock;
        self
    }

    /// Reports `leader_election_master_status{name}` (set to 0 now, as client-go does on creation).
    pub fn with_metrics(mut self, metrics: Arc<LeaderElectionMetrics>) -> Self {
        metrics.set_leader(&self.config.name, false);
        self.metrics = Some(metrics);
        self
    }

    /// Records `LeaderElection` events (`"<identity> became leader"` / `"stopped leading"`) on the Lease.
    pub fn with_event_recorder(mut self, recorder: Arc<dyn EventRecorder>) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Seeds the retry jitter, for reproducible tests.
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.rng = StdRng::seed_from_u64(seed);
        self
    }

    /// A status view that stays valid while (and after) the elector runs.
    pub fn status(&self) -> LeaderElectionStatus {
        LeaderElectionStatus {
            rx: self.status.subscribe(),
            lease_duration: self.config.lease_duration,
            lease: self.lock.describe(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// Candidate, Leader or Lost.
    pub fn state(&self) -> ElectorState {
        self.state
    }

    /// Whether the last observed record names us as holder (client-go's `IsLeader`).
    pub fn is_leader(&self) -> bool {
        self.observed_record.holder_identity == self.config.identity
    }

    /// The holder in the last observed record (client-go's `GetLeader`).
    pub fn leader(&self) -> &str {
        &self.observed_record.holder_identity
    }

    /// The record last observed (read or written).
    pub fn observed_record(&self) -> &LeaderElectionRecord {
        &self.observed_record
    }

    /// Performs one attempt for the current state and says when to call again.
    ///
    /// - Candidate: one `tryAcquireOrRenew`; success → [`Transition::Acquired`], next attempt one
    ///   retry period later; failure → retry after a jittered retry period.
    /// - Leader: one renewal, bounded by the current round's deadline (renew deadline from the
    ///   round's first attempt); success → next round one retry period later; failure → retry
    ///   one retry period after this attempt started, or [`Transition::Lost`] once the round's
    ///   deadline has passed.
    /// - Lost: nothing; `next` is `None`.
    pub async fn step(&mut self) -> Step {
        let started = Instant::now();
        match self.state {
            ElectorState::Lost => Step {
                transition: None,
                new_leader: None,
                next: None,
            },
            ElectorState::Candidate => {
                let acquired = self.try_acquire_or_renew().await;
                let new_leader = self.maybe_report_transition();
                if !acquired {
                    tracing::trace!(lease = %self.lock.describe(), "failed to acquire lease");
                    let next = Instant::now() + self.jittered_retry_period();
                    return Step {
                        transition: None,
                        new_leader,
                        next: Some(next),
                    };
                }
                tracing::info!(lease = %self.lock.describe(), identity = %self.config.identity, "successfully acquired lease");
                self.set_state(ElectorState::Leader);
                self.record_event("became leader");
                Step {
                    transition: Some(Transition::Acquired),
                    new_leader,
                    next: Some(Instant::now() + self.config.retry_period),
                }
            }
            ElectorState::Leader => {
                let deadline = *self
                    .round_deadline
                    .get_or_insert(started + self.config.renew_deadline);
                if started >= deadline {
                    return self.lose(None);
                }
                let renewed = timeout_at(deadline, self.try_acquire_or_renew())
                    .await
                    .unwrap_or(false);
                let new_leader = self.maybe_report_transition();
                let now = Instant::now();
                if renewed {
                    tracing::trace!(lease = %self.lock.describe(), "successfully renewed lease");
                    self.round_deadline = None;
                    return Step {
                        transition: None,
                        new_leader,
                        next: Some(now + self.config.retry_period),
                    };
                }
                if now >= deadline {
                    return self.lose(new_leader);
                }
                let next = (started + self.config.retry_period).max(now).min(deadline);
                Step {
                    transition: None,
                    new_leader,
                    next: Some(next),
                }
            }
        }
    }

    /// Runs the election until `cancel` fires or leadership is lost, as client-go's `Run`:
    /// acquire, start `on_started_leading`, renew; on the way out cancel the leading task,
    /// release the lease if configured, then call `on_stopped_leading`.
    ///
    /// When cancelled while leading, the elector keeps renewing until the leading task has
    /// finished, so the lease is never released (or left to expire) while guarded work still runs.
    pub async fn run(
        mut self,
        cancel: CancellationToken,
        mut callbacks: LeaderCallbacks,
    ) -> RunOutcome {
        tracing::info!(lease = %self.lock.describe(), identity = %self.config.identity, "attempting to acquire leader lease");
        let mut leading: Option<LeadingTask> = None;
        let mut cancelling = false;
        let mut next = Instant::now();
        let outcome = loop {
            if cancelling {
                // Shutting down while leading: keep renewing until the leading task is done.
                let Some(lead) = leading.as_mut() else {
                    break RunOutcome::Cancelled;
                };
                tokio::select! {
                    _ = &mut lead.task => break RunOutcome::Cancelled,
                    _ = sleep_until(next) => {}
                }
            } else {
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => {
                        cancelling = true;
                        match &leading {
                            None => break RunOutcome::Cancelled,
                            Some(lead) => {
                                lead.token.cancel();
                                continue;
                            }
                        }
                    }
                    _ = sleep_until(next) => {}
                }
            }

            // While a candidate, cancellation interrupts an attempt in flight; while leading,
            // the attempt is bounded by the renew deadline instead.
            let step = if leading.is_none() {
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => break RunOutcome::Cancelled,
                    step = self.step() => step,
                }
            } else {
                self.step().await
            };

            if let (Some(leader), Some(callback)) = (&step.new_leader, &mut callbacks.on_new_leader)
            {
                callback(leader);
            }
            match step.transition {
                Some(Transition::Acquired) => {
                    let token = cancel.child_token();
                    let task = match callbacks.on_started_leading.take() {
                        Some(start) => tokio::spawn(start(token.clone())),
                        None => tokio::spawn(async {}),
                    };
                    leading = Some(LeadingTask {
                        _guard: token.clone().drop_guard(),
                        token,
                        task,
                    });
                }
                Some(Transition::Lost) => {
                    break if cancelling {
                        RunOutcome::Cancelled
                    } else {
                        RunOutcome::LeadershipLost
                    };
                }
                None => {}
            }
            match step.next {
                Some(at) => next = at,
                None => break RunOutcome::LeadershipLost,
            }
        };

        let was_leading = leading.is_some();
        if let Some(lead) = leading {
            lead.token.cancel();
        }
        if self.state == ElectorState::Leader {
            self.set_state(ElectorState::Lost);
        }
        if self.config.release_on_cancel {
            let released = timeout(self.config.renew_deadline, self.release())
                .await
                .unwrap_or(false);
            if released {
                tracing::info!(lease = %self.lock.describe(), "released leader lease");
            }
        }
        if was_leading {
            self.record_event("stopped leading");
        }
        if outcome == RunOutcome::LeadershipLost {
            tracing::error!(lease = %self.lock.describe(), "leader election lost");
        }
        if let Some(callback) = callbacks.on_stopped_leading.take() {
            callback();
        }
        outcome
    }

    /// Gives the lease up if we hold it, as client-go's `release`: re-read it (fresh
    /// resourceVersion), then write an empty holder with `leaseDurationSeconds` 1. Returns
    /// whether the lease is no longer held by us.
    pub async fn release(&mut self) -> bool {
        let current = match self.lock.get().await {
            Ok(record) => record,
            Err(err) => {
                if err.is_not_found() {
                    tracing::info!(lease = %self.lock.describe(), "lease lock not found");
                } else {
                    tracing::error!(error = %err, "error retrieving resource lock");
                }
                return false;
            }
        };
        // Unlike client-go, also check the fresh record: never clear someone else's lease.
        if !self.is_leader() || current.holder_identity != self.config.identity {
            return true;
        }
        let now = self.clock.now();
        let released = LeaderElectionRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            leader_transitions: current.leader_transitions,
        };
        if let Err(err) = self.lock.update(&released).await {
            tracing::error!(error = %err, "failed to release lock");
            return false;
        }
        self.set_observed_record(released);
        true
    }

    /// One attempt to acquire or renew, as client-go's `tryAcquireOrRenew`. Returns success.
    async fn try_acquire_or_renew(&mut self) -> bool {
        let now = Instant::now();
        let wall = self.clock.now();
        let mut desired = LeaderElectionRecord {
            holder_identity: self.config.identity.clone(),
            lease_duration_seconds: self.config.lease_duration_seconds(),
            acquire_time: Some(wall),
            renew_time: Some(wall),
            leader_transitions: 0,
        };

        // 1. Fast path: the leader updates from the record it last wrote.
        if self.is_leader() && self.is_lease_valid(now) {
            desired.acquire_time = self.observed_record.acquire_time;
            desired.leader_transitions = self.observed_record.leader_transitions;
            match self.lock.update(&desired).await {
                Ok(()) => {
                    self.set_observed_record(desired);
                    return true;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "failed to update lock optimistically, falling back to slow path");
                }
            }
        }

        // 2. Read the record, creating the lease when it does not exist.
        let current = match self.lock.get().await {
            Ok(record) => record,
            Err(err) if err.is_not_found() => {
                if let Err(err) = self.lock.create(&desired).await {
                    tracing::error!(error = %err, "error initially creating leader election record");
                    return false;
                }
                self.set_observed_record(desired);
                return true;
            }
            Err(err) => {
                tracing::error!(error = %err, "error retrieving resource lock");
                return false;
            }
        };

        // 3. A record different from the last one read means the holder is alive: restart
        // the expiry clock.
        if self.observed_raw.as_ref() != Some(&current) {
            self.set_observed_record(current.clone());
            self.observed_raw = Some(current.clone());
        }
        if !current.holder_identity.is_empty() && self.is_lease_valid(now) && !self.is_leader() {
            tracing::trace!(holder = %current.holder_identity, "lock is held and has not yet expired");
            return false;
        }

        // 4. Take over or renew.
        if self.is_leader() {
            desired.acquire_time = current.acquire_time;
            desired.leader_transitions = current.leader_transitions;
            if let Some(metrics) = &self.metrics {
                metrics.slowpath_exercised(&self.config.name);
            }
        } else {
            desired.leader_transitions = current.leader_transitions.saturating_add(1);
        }
        if let Err(err) = self.lock.update(&desired).await {
            tracing::error!(error = %err, "failed to update lock");
            return false;
        }
        self.set_observed_record(desired);
        true
    }

    /// Ends leadership after a missed renew deadline.
    fn lose(&mut self, new_leader: Option<String>) -> Step {
        tracing::info!(lease = %self.lock.describe(), "failed to renew lease within the renew deadline");
        self.set_state(ElectorState::Lost);
        Step {
            transition: Some(Transition::Lost),
            new_leader,
            next: None,
        }
    }

    /// Whether the observed lease is still within its duration of the moment we observed it.
    fn is_lease_valid(&self, now: Instant) -> bool {
        let Some(observed) = self.observed_time else {
            return false;
        };
        let seconds = u64::try_from(self.observed_record.lease_duration_seconds).unwrap_or(0);
        observed + Duration::from_secs(seconds) > now
    }

    /// Records `record` as observed now.
    fn set_observed_record(&mut self, record: LeaderElectionRecord) {
        self.observed_record = record;
        self.observed_time = Some(Instant::now());
        self.publish_status();
    }

    /// Reports the observed holder once each time it changes.
    fn maybe_report_transition(&mut self) -> Option<String> {
        if self.observed_record.holder_identity == self.reported_leader {
            return None;
        }
        self.reported_leader = self.observed_record.holder_identity.clone();
        Some(self.reported_leader.clone())
    }

    fn set_state(&mut self, state: ElectorState) {
        self.state = state;
        self.round_deadline = None;
        if let Some(metrics) = &self.metrics {
            metrics.set_leader(&self.config.name, state == ElectorState::Leader);
        }
        self.publish_status();
    }

    fn publish_status(&self) {
        let snapshot = StatusSnapshot {
            leader: self.observed_record.holder_identity.clone(),
            leading: self.state == ElectorState::Leader,
            observed_at: self.observed_time,
        };
        self.status.send_if_modified(|current| {
            if *current == snapshot {
                return false;
            }
            *current = snapshot;
            true
        });
    }

    /// `retry_period * (1 + rand[0,1) * JITTER_FACTOR)`, as `wait.Jitter`.
    fn jittered_retry_period(&mut self) -> Duration {
        let factor = 1.0 + self.rng.random::<f64>() * JITTER_FACTOR;
        self.config.retry_period.mul_f64(factor)
    }

    fn record_event(&self, what: &str) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        let lease = ObjectReference {
            api_version: Some("coordination.k8s.io/v1".to_owned()),
            kind: Some("Lease".to_owned()),
            namespace: Some(self.config.namespace.clone()),
            name: Some(self.config.name.clone()),
            ..ObjectReference::default()
        };
        recorder.event(
            &lease,
            EventType::Normal,
            "LeaderElection",
            format!("{} {what}", self.config.identity),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use jiff::Timestamp;
    use tokio::time::{advance, sleep};

    use super::*;
    use crate::events::{FakeRecorder, TokioClock};
    use crate::leaderelection::{Calls, MemoryLeaseStore};

    const RETRY: Duration = Duration::from_secs(2);
    const RENEW_DEADLINE: Duration = Duration::from_secs(10);
    const LEASE: Duration = Duration::from_secs(15);

    fn t0() -> Timestamp {
        "2024-01-01T00:00:00Z".parse().expect("timestamp")
    }

    fn config(identity: &str) -> LeaderElectionConfig {
        LeaderElectionConfig::new("kube-system", "kube-controller-manager", identity)
    }

    fn elector_with(store: &MemoryLeaseStore, config: LeaderElectionConfig) -> LeaderElector {
        LeaderElector::new(config, store.lock())
            .expect("valid config")
            .with_clock(Arc::new(TokioClock::starting_at(t0())))
            .with_jitter_seed(7)
    }

    fn elector(store: &MemoryLeaseStore, identity: &str) -> LeaderElector {
        elector_with(store, config(identity))
    }

    fn held_by(holder: &str, lease_duration_seconds: i32) -> LeaderElectionRecord {
        LeaderElectionRecord {
            holder_identity: holder.into(),
            lease_duration_seconds,
            ..Default::default()
        }
    }

    /// Drives `elector.step()` from `first` on its own schedule until `until`, returning the
    /// transitions seen and when.
    async fn drive(
        elector: &mut LeaderElector,
        first: Instant,
        until: Instant,
    ) -> Vec<(Transition, Instant)> {
        let mut seen = Vec::new();
        let mut next = Some(first);
        while let Some(at) = next.filter(|at| *at <= until) {
            sleep_until(at).await;
            let step = elector.step().await;
            if let Some(t) = step.transition {
                seen.push((t, Instant::now()));
            }
            next = step.next;
        }
        seen
    }

    /// client-go's `testTryAcquireOrRenew` table, against the in-memory lock.
    #[tokio::test(start_paused = true)]
    async fn try_acquire_or_renew_matches_client_go_table() {
        struct Case {
            name: &'static str,
            /// The lease in the store; `None` = no object.
            stored: Option<LeaderElectionRecord>,
            /// What the elector observed before, and how long ago (negative = in the future).
            observed: Option<(LeaderElectionRecord, i64)>,
            /// Retry once after this long when the first attempt fails.
            retry_after: Option<Duration>,
            expect_success: bool,
            transition_leader: bool,
            out_holder: &'static str,
            calls: Calls,
        }
        let cases = [
            Case {
                name: "acquire from no object",
                stored: None,
                observed: None,
                retry_after: None,
                expect_success: true,
                transition_leader: false,
                out_holder: "baz",
                calls: Calls {
                    gets: 1,
                    creates: 1,
                    updates: 0,
                },
            },
            Case {
                name: "acquire from object without a record",
                stored: Some(LeaderElectionRecord::default()),
                observed: None,
                retry_after: None,
                expect_success: true,
                transition_leader: true,
                out_holder: "baz",
                calls: Calls {
                    gets: 1,
                    creates: 0,
                    updates: 1,
                },
            },
            Case {
                name: "acquire from led object with the lease duration seconds",
                stored: Some(held_by("bing", 3)),
                observed: None,
                retry_after: Some(Duration::from_secs(3)),
                expect_success: true,
                transition_leader: true,
                out_holder: "baz",
                calls: Calls {
                    gets: 2,
                    creates: 0,
                    updates: 1,
                },
            },
            Case {
                name: "acquire from unled object",
                stored: Some(held_by("", 0)),
                observed: None,
                retry_after: None,
                expect_success: true,
                transition_leader: true,
                out_holder: "baz",
                calls: Calls {
                    gets: 1,
                    creates: 0,
                    updates: 1,
                },
            },
            Case {
                name: "acquire from led, unacked object",
                stored: Some(held_by("bing", 0)),
                observed: Some((held_by("bing", 0), 3_600_000)),
                retry_after: None,
                expect_success: true,
                transition_leader: true,
                out_holder: "baz",
                calls: Calls {
                    gets: 1,
                    creates: 0,
                    updates: 1,
                },
            },
            Case {
                name: "acquire from empty led, acked object",
                stored: Some(held_by("", 0)),
                observed: Some((LeaderElectionRecord::default(), -3_600_000)),
                retry_after: None,
                expect_success: true,
                transition_leader: true,
                out_holder: "baz",
                calls: Calls {
                    gets: 1,
                    creates: 0,
                    updates: 1,
                },
            },
            Case {
                name: "don't acquire from led, acked object",
                // client-go's case relies on real time passing between its reads; a lease
                // duration makes "acked" explicit under paused time.
                stored: Some(held_by("bing", 10)),
                observed: Some((LeaderElectionRecord::default(), -3_600_000)),
                retry_after: None,
                expect_success: false,
                transition_leader: false,
                out_holder: "bing",
                calls: Calls {
                    gets: 1,
                    creates: 0,
                    updates: 0,
                },
            },
            Case {
                name: "renew already acquired object",
                stored: Some(held_by("baz", 0)),
                observed: Some((held_by("baz", 0), -3_600_000)),
                retry_after: None,
                expect_success: true,
                transition_leader: false,
                out_holder: "baz",
                // Fast path first: the lock has not read the lease yet, so its update fails and
                // the slow path reads and updates.
                calls: Calls {
                    gets: 1,
                    creates: 0,
                    updates: 2,
                },
            },
        ];

        for case in cases {
            let store = match &case.stored {
                Some(record) => MemoryLeaseStore::with_record(record.clone()),
                None => MemoryLeaseStore::new(),
            };
            let mut cfg = config("baz");
            cfg.lease_duration = Duration::from_secs(10);
            cfg.renew_deadline = Duration::from_secs(5);
            let mut elector = elector_with(&store, cfg);
            if let Some((record, ago_secs)) = &case.observed {
                elector.observed_record = record.clone();
                elector.observed_raw = Some(record.clone());
                let now = Instant::now();
                elector.observed_time = Some(if *ago_secs >= 0 {
                    now.checked_sub(Duration::from_secs(ago_secs.unsigned_abs()))
                        .unwrap_or(now)
                } else {
                    now + Duration::from_secs(ago_secs.unsigned_abs())
                });
            }

            let mut success = elector.try_acquire_or_renew().await;
            if success != case.expect_success
                && let Some(after) = case.retry_after
            {
                advance(after).await;
                success = elector.try_acquire_or_renew().await;
            }
            assert_eq!(success, case.expect_success, "{}", case.name);
            assert_eq!(elector.leader(), case.out_holder, "{}", case.name);
            let transitions = elector.observed_record().leader_transitions;
            assert_eq!(
                transitions,
                i32::from(case.transition_leader),
                "{}",
                case.name
            );
            assert_eq!(store.calls(), case.calls, "{}", case.name);
            assert_eq!(
                elector.maybe_report_transition().as_deref(),
                Some(case.out_holder),
                "{}: on_new_leader reports the holder",
                case.name
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn acquires_a_free_lease_and_writes_the_record() {
        let store = MemoryLeaseStore::new();
        let mut elector = elector(&store, "a");
        let step = elector.step().await;
        assert_eq!(step.transition, Some(Transition::Acquired));
        assert_eq!(step.new_leader.as_deref(), Some("a"));
        assert_eq!(step.next, Some(Instant::now() + RETRY));
        assert_eq!(elector.state(), ElectorState::Leader);
        let record = store.record().expect("lease created");
        assert_eq!(record.holder_identity, "a");
        assert_eq!(record.lease_duration_seconds, 15);
        assert_eq!(record.acquire_time, Some(t0()));
        assert_eq!(record.renew_time, Some(t0()));
        assert_eq!(record.leader_transitions, 0);
        assert!(elector.status().is_leader());
    }

    #[tokio::test(start_paused = true)]
    async fn cannot_acquire_a_held_unexpired_lease_but_acquires_after_expiry() {
        let store = MemoryLeaseStore::with_record(held_by("other", 15));
        let mut elector = elector(&store, "a");
        let start = Instant::now();

        let step = elector.step().await;
        assert_eq!(step.transition, None);
        assert_eq!(step.new_leader.as_deref(), Some("other"));
        assert_eq!(elector.state(), ElectorState::Candidate);
        let next = step.next.expect("retries");
        assert!(next >= start + RETRY && next <= start + RETRY.mul_f64(1.0 + JITTER_FACTOR));

        // The record never changes again: it expires 15s after we first saw it.
        let seen = drive(&mut elector, next, start + Duration::from_secs(30)).await;
        let (transition, at) = seen.first().copied().expect("acquired");
        assert_eq!(transition, Transition::Acquired);
        assert!(
            at >= start + LEASE,
            "acquired at {:?}, before expiry",
            at - start
        );
        assert!(at <= start + LEASE + RETRY.mul_f64(1.0 + JITTER_FACTOR));
        let record = store.record().expect("lease");
        assert_eq!(record.holder_identity, "a");
        assert_eq!(record.leader_transitions, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewing_holder_is_never_overtaken() {
        let store = MemoryLeaseStore::with_record(held_by("other", 15));
        let mut candidate = elector(&store, "a");
        let holder_clock = TokioClock::starting_at(t0());
        let start = Instant::now();
        let mut next_candidate = start;
        // The holder renews (changes renewTime) every 2s for a minute; the candidate keeps trying.
        for tick in 0..30u32 {
            let at = start + RETRY * tick;
            while next_candidate < at {
                sleep_until(next_candidate).await;
                let step = candidate.step().await;
                assert_eq!(step.transition, None, "took a renewed lease");
                next_candidate = step.next.expect("retries");
            }
            sleep_until(at).await;
            let mut record = held_by("other", 15);
            record.renew_time = Some(holder_clock.now());
            store.set_record(record);
        }
        assert_eq!(candidate.state(), ElectorState::Candidate);
        assert_eq!(store.record().expect("lease").holder_identity, "other");
    }

    #[tokio::test(start_paused = true)]
    async fn leader_renews_every_retry_period_on_the_fast_path() {
        let store = MemoryLeaseStore::new();
        let mut elector = elector(&store, "a");
        let start = Instant::now();
        let next = elector.step().await.next.expect("renews");
        let after_acquire = store.calls();

        let seen = drive(&mut elector, next, start + Duration::from_secs(20)).await;
        assert!(seen.is_empty(), "no transition while renewing: {seen:?}");
        let calls = store.calls();
        // Renewals at 2s, 4s, ... 20s: one update each, never a read.
        assert_eq!(calls.updates - after_acquire.updates, 10);
        assert_eq!(calls.gets, after_acquire.gets);
        let record = store.record().expect("lease");
        assert_eq!(record.acquire_time, Some(t0()));
        assert_eq!(
            record.renew_time,
            Some(t0() + jiff::SignedDuration::from_secs(20))
        );
        assert_eq!(record.leader_transitions, 0);
        assert_eq!(elector.state(), ElectorState::Leader);
    }

    #[tokio::test(start_paused = true)]
    async fn leadership_is_lost_when_renewal_fails_for_the_renew_deadline() {
        let store = MemoryLeaseStore::new();
        let lock = store.lock();
        let partition = lock.disconnect_switch();
        let metrics = Arc::new(LeaderElectionMetrics::new());
        let mut elector = LeaderElector::new(config("a"), lock)
            .expect("valid")
            .with_clock(Arc::new(TokioClock::starting_at(t0())))
            .with_metrics(metrics.clone());
        let start = Instant::now();
        let step = elector.step().await;
        assert_eq!(step.transition, Some(Transition::Acquired));
        assert!(metrics.is_leader("kube-controller-manager"));

        partition.set(true);
        // The round starts at the first renewal (2s) and must succeed by 2s + 10s.
        let next = step.next.expect("renews");
        let seen = drive(&mut elector, next, start + Duration::from_secs(60)).await;
        assert_eq!(seen.len(), 1, "{seen:?}");
        let (transition, at) = seen[0];
        assert_eq!(transition, Transition::Lost);
        assert_eq!(at - start, RETRY + RENEW_DEADLINE);
        assert_eq!(elector.state(), ElectorState::Lost);
        assert!(!metrics.is_leader("kube-controller-manager"));
        assert!(!elector.status().is_leader());
        assert_eq!(elector.step().await.next, None, "lost is terminal");
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_recovers_before_the_deadline_keeps_leadership() {
        let store = MemoryLeaseStore::new();
        let lock = store.lock();
        let partition = lock.disconnect_switch();
        let mut elector = elector_with(&store, config("a"));
        elector.lock = Box::new(lock);
        let start = Instant::now();
        let next = elector.step().await.next.expect("renews");
        partition.set(true);
        let seen = drive(&mut elector, next, start + Duration::from_secs(9)).await;
        assert!(seen.is_empty(), "{seen:?}");
        partition.set(false);
        let next = start + Duration::from_secs(10);
        let seen = drive(&mut elector, next, start + Duration::from_secs(40)).await;
        assert!(seen.is_empty(), "{seen:?}");
        assert_eq!(elector.state(), ElectorState::Leader);
    }

    #[tokio::test(start_paused = true)]
    async fn release_clears_the_holder_and_keeps_transitions() {
        let store = MemoryLeaseStore::new();
        let mut a = elector(&store, "a");
        a.step().await;
        assert!(a.release().await);
        let record = store.record().expect("lease");
        assert_eq!(record.holder_identity, "");
        assert_eq!(record.lease_duration_seconds, 1);
        assert_eq!(record.leader_transitions, 0);
        assert_eq!(a.maybe_report_transition().as_deref(), Some(""));

        // A standby takes a released lease at its very next attempt.
        let mut b = elector(&store, "b");
        assert_eq!(b.step().await.transition, Some(Transition::Acquired));
        assert_eq!(store.record().expect("lease").leader_transitions, 1);

        // Releasing a lease someone else holds changes nothing.
        assert!(a.release().await);
        assert_eq!(store.record().expect("lease").holder_identity, "b");
    }

    #[tokio::test(start_paused = true)]
    async fn transitions_are_counted_each_time_the_holder_changes() {
        let store = MemoryLeaseStore::new();
        let mut a = elector(&store, "a");
        let mut b = elector(&store, "b");
        a.step().await;
        assert_eq!(store.record().expect("lease").leader_transitions, 0);
        assert!(a.release().await);
        b.step().await;
        assert_eq!(store.record().expect("lease").leader_transitions, 1);
        // b vanishes without releasing; a takes over once b's lease expires on a's clock.
        let mut a2 = elector(&store, "a2");
        let start = Instant::now();
        let seen = drive(&mut a2, start, start + Duration::from_secs(30)).await;
        assert_eq!(seen.first().map(|s| s.0), Some(Transition::Acquired));
        assert_eq!(store.record().expect("lease").leader_transitions, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn new_leader_is_reported_once_per_observed_change() {
        let store = MemoryLeaseStore::with_record(held_by("x", 15));
        let mut e = elector(&store, "a");
        assert_eq!(e.step().await.new_leader.as_deref(), Some("x"));
        advance(RETRY * 3).await;
        assert_eq!(
            e.step().await.new_leader,
            None,
            "same holder is not reported again"
        );
        store.set_record(held_by("y", 15));
        advance(RETRY * 3).await;
        assert_eq!(e.step().await.new_leader.as_deref(), Some("y"));
    }

    #[tokio::test(start_paused = true)]
    async fn run_fires_callbacks_and_releases_on_cancel() {
        let store = MemoryLeaseStore::new();
        let mut cfg = config("a");
        cfg.release_on_cancel = true;
        let recorder = FakeRecorder::new();
        let elector = elector_with(&store, cfg).with_event_recorder(Arc::new(recorder.clone()));
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let cancel = CancellationToken::new();

        let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
        let callbacks = LeaderCallbacks::new(move |token: CancellationToken| async move {
            l1.lock().expect("log").push("started".into());
            token.cancelled().await;
            // Guarded work takes a while to wind down; the lease must stay held meanwhile.
            sleep(Duration::from_secs(5)).await;
            l1.lock().expect("log").push("work done".into());
        })
        .on_new_leader(move |id| l2.lock().expect("log").push(format!("leader {id}")))
        .on_stopped_leading(move || l3.lock().expect("log").push("stopped".into()));
        let run = tokio::spawn(elector.run(cancel.clone(), callbacks));

        sleep(Duration::from_secs(7)).await;
        assert_eq!(store.record().expect("lease").holder_identity, "a");
        cancel.cancel();
        sleep(Duration::from_secs(3)).await;
        assert_eq!(
            store.record().expect("lease").holder_identity,
            "a",
            "still held while the leading task winds down"
        );
        let outcome = run.await.expect("run task");
        assert_eq!(outcome, RunOutcome::Cancelled);
        let record = store.record().expect("lease");
        assert_eq!(record.holder_identity, "");
        assert_eq!(record.lease_duration_seconds, 1);
        assert_eq!(
            *log.lock().expect("log"),
            vec!["leader a", "started", "work done", "stopped"]
        );
        let messages: Vec<String> = recorder.events().into_iter().map(|e| e.message).collect();
        assert_eq!(messages, vec!["a became leader", "a stopped leading"]);
    }

    #[tokio::test(start_paused = true)]
    async fn run_reports_lost_leadership_and_cancels_the_leading_task() {
        let store = MemoryLeaseStore::new();
        let lock = store.lock();
        let partition = lock.disconnect_switch();
        let elector = LeaderElector::new(config("a"), lock).expect("valid");
        let cancelled = Arc::new(AtomicUsize::new(0));
        let c = cancelled.clone();
        let callbacks = LeaderCallbacks::new(move |token: CancellationToken| async move {
            token.cancelled().await;
            c.fetch_add(1, Ordering::SeqCst);
        });
        let run = tokio::spawn(elector.run(CancellationToken::new(), callbacks));
        sleep(Duration::from_secs(1)).await;
        partition.set(true);
        let outcome = run.await.expect("run task");
        assert_eq!(outcome, RunOutcome::LeadershipLost);
        tokio::task::yield_now().await;
        assert_eq!(cancelled.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_before_acquiring_returns_at_once() {
        let store = MemoryLeaseStore::with_record(held_by("other", 15));
        let elector = elector(&store, "a");
        let cancel = CancellationToken::new();
        let stopped = Arc::new(AtomicUsize::new(0));
        let s = stopped.clone();
        let callbacks = LeaderCallbacks::new(|_token| async {}).on_stopped_leading(move || {
            s.fetch_add(1, Ordering::SeqCst);
        });
        let run = tokio::spawn(elector.run(cancel.clone(), callbacks));
        sleep(Duration::from_secs(3)).await;
        cancel.cancel();
        assert_eq!(run.await.expect("run task"), RunOutcome::Cancelled);
        assert_eq!(
            stopped.load(Ordering::SeqCst),
            1,
            "called even if never leading"
        );
        assert_eq!(store.record().expect("lease").holder_identity, "other");
    }

    /// Two electors run against one lease for a while: never two leaders at once, one leader
    /// nearly all the time, and a released lease moves to the standby within two retry periods.
    #[tokio::test(start_paused = true)]
    async fn two_electors_one_lease_exactly_one_leader() {
        let store = MemoryLeaseStore::new();
        let leading = Arc::new(AtomicUsize::new(0));
        let max_leading = Arc::new(AtomicUsize::new(0));
        let mut runs = Vec::new();
        let mut cancels = Vec::new();
        for (i, identity) in ["a", "b"].into_iter().enumerate() {
            let mut cfg = config(identity);
            cfg.release_on_cancel = true;
            let elector = elector_with(&store, cfg).with_jitter_seed(i as u64);
            let cancel = CancellationToken::new();
            let (leading, max_leading) = (leading.clone(), max_leading.clone());
            let callbacks = LeaderCallbacks::new(move |token: CancellationToken| async move {
                let now = leading.fetch_add(1, Ordering::SeqCst) + 1;
                max_leading.fetch_max(now, Ordering::SeqCst);
                token.cancelled().await;
                leading.fetch_sub(1, Ordering::SeqCst);
            });
            runs.push(tokio::spawn(elector.run(cancel.clone(), callbacks)));
            cancels.push(cancel);
        }

        for _ in 0..600 {
            sleep(Duration::from_millis(100)).await;
            assert_eq!(leading.load(Ordering::SeqCst), 1);
        }
        assert_eq!(max_leading.load(Ordering::SeqCst), 1);
        let first = store.record().expect("lease").holder_identity;
        let (leader, standby) = if first == "a" { (0, 1) } else { (1, 0) };

        let released_at = Instant::now();
        cancels[leader].cancel();
        assert_eq!(
            runs.remove(leader).await.expect("run"),
            RunOutcome::Cancelled
        );
        loop {
            sleep(Duration::from_millis(100)).await;
            let holder = store.record().expect("lease").holder_identity;
            if !holder.is_empty() && holder != first {
                break;
            }
            assert!(
                released_at.elapsed() <= RETRY.mul_f64(1.0 + JITTER_FACTOR) * 2,
                "standby did not take over a released lease"
            );
        }
        assert_eq!(max_leading.load(Ordering::SeqCst), 1);
        cancels[standby].cancel();
        assert_eq!(runs.remove(0).await.expect("run"), RunOutcome::Cancelled);
        assert_eq!(leading.load(Ordering::SeqCst), 0);
    }
}
