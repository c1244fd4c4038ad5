//! `kcm bench --soak DURATION`: a steady churn at a set rate of writes per second, sampled
//! every few seconds for memory (RSS, and the allocator's heap in use when the cluster runs in
//! this process), database and WAL size, write latency, watch lag and open
//! sockets, written as JSON and an SVG plot over time.
//!
//! The churn ([`Churn`]) cycles through 20 operations: 10 ConfigMap updates, 4 Secret
//! updates, 2 steps of a Deployment's life (created, scaled up, rolled, scaled down, deleted),
//! a Job that completes in 3 s (and is removed 30 s after by its TTL), a running pod of a
//! Deployment made to fail (its ReplicaSet replaces it), a watch opened and dropped after 5 s,
//! and a node flap through the simulator's `sim.kcm.io/heartbeat=stopped` (one node down for
//! 30 s every 2 minutes; a ConfigMap update when it is not time). A CronJob runs every minute
//! throughout. Each ConfigMap update carries a sequence number a long-lived watch looks for:
//! the time from the write's acknowledgement to its event is the watch lag, and one never seen
//! within a minute is a missed event.
//!
//! With `--kill-every`, the server is a child `kcm up` ([`ChildCluster`]) that the soak
//! `kill -9`s and restarts on schedule. After each restart it checks that every ConfigMap and
//! Secret it wrote is at least at the resourceVersion of its last acknowledged write.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kcm_apiserver::storage::StorageStats;
use kube::Api;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::child::ChildCluster;
use super::heap;
use super::process::Process;
use super::soak_report::{Latencies, Restart, SoakConfig, SoakReport, SoakSample, SoakSummary};
use super::workload::MANAGED_BY;

/// ConfigMaps and Secrets updated in turn.
const OBJECTS: u32 = 20;
/// Deployments living and dying in turn.
const DEPLOYMENT_SLOTS: u32 = 5;
/// Writes in flight at once.
const IN_FLIGHT: usize = 64;
/// RSS drift counts from the first sample after this long (issue 44: "after the first 10
/// minutes"), or a sixth of a shorter soak.
const WARMUP: Duration = Duration::from_secs(600);
/// How long a flapping node stays down, and how often one goes down.
const NODE_DOWN_FOR: Duration = Duration::from_secs(30);
const NODE_FLAP_EVERY: Duration = Duration::from_secs(120);
/// The simulator's fault annotation silencing a node's kubelet.
const HEARTBEAT_ANNOTATION: &str = "sim.kcm.io/heartbeat";
/// An acknowledged ConfigMap write not seen on the watch within this long is missed.
const MISSED_AFTER: Duration = Duration::from_secs(60);

/// One step of the churn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Update ConfigMap `i` with sequence number `seq`.
    ConfigMap { i: u32, seq: u64 },
    /// Update Secret `i`.
    Secret { i: u32, seq: u64 },
    /// The next step of Deployment slot `slot`.
    Deployment { slot: u32 },
    /// Create Job number `n`.
    Job { n: u64 },
    /// Fail a running pod of Deployment slot `slot`.
    FailPod { slot: u32 },
    /// Open a watch and drop it after a few seconds.
    Watch,
    /// Silence node `name`'s kubelet.
    NodeDown { name: String },
    /// Resume node `name`.
    NodeUp { name: String },
}

/// The stages of a Deployment slot: created with 2 replicas, scaled to 4, rolled to a new
/// template, scaled to 1, deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stage {
    /// No Deployment.
    #[default]
    Absent,
    /// 2 replicas.
    Created,
    /// 4 replicas.
    Scaled,
    /// A new template.
    Rolled,
    /// 1 replica; deleted next.
    Shrunk,
}

impl Stage {
    fn next(self) -> Self {
        match self {
            Self::Absent => Self::Created,
            Self::Created => Self::Scaled,
            Self::Scaled => Self::Rolled,
            Self::Rolled => Self::Shrunk,
            Self::Shrunk => Self::Absent,
        }
    }
}

/// Decides the churn's next operation. Pure but for the clock handed in.
#[derive(Debug, Default)]
pub struct Churn {
    n: u64,
    /// The next ConfigMap and Secret to update: each kind takes its objects in turn.
    cm_turn: u32,
    secret_turn: u32,
    jobs: u64,
    deployment_turn: u32,
    fail_turn: u32,
    /// Node names the flap picks from, in turn.
    nodes: Vec<String>,
    flap_turn: usize,
    /// The node down now and since when.
    down: Option<(String, Duration)>,
    last_flap: Option<Duration>,
}

impl Churn {
    /// A churn flapping `nodes` (none: no flaps).
    pub fn new(nodes: Vec<String>) -> Self {
        Self {
            nodes,
            ..Self::default()
        }
    }

    /// The operation after the last one, `elapsed` into the soak.
    pub fn next(&mut self, elapsed: Duration) -> Op {
        let n = self.n;
        self.n += 1;
        match n % 20 {
            0..=9 => self.config_map(n),
            10..=13 => {
                let i = self.secret_turn % OBJECTS;
                self.secret_turn += 1;
                Op::Secret { i, seq: n }
            }
            14 | 15 => {
                let slot = self.deployment_turn % DEPLOYMENT_SLOTS;
                self.deployment_turn += 1;
                Op::Deployment { slot }
            }
            16 => {
                self.jobs += 1;
                Op::Job { n: self.jobs }
            }
            17 => {
                let slot = self.fail_turn % DEPLOYMENT_SLOTS;
                self.fail_turn += 1;
                Op::FailPod { slot }
            }
            18 => Op::Watch,
            _ => match self.flap(elapsed) {
                Some(op) => op,
                None => self.config_map(n),
            },
        }
    }

    fn config_map(&mut self, seq: u64) -> Op {
        let i = self.cm_turn % OBJECTS;
        self.cm_turn += 1;
        Op::ConfigMap { i, seq }
    }

    fn flap(&mut self, elapsed: Duration) -> Option<Op> {
        if let Some((name, since)) = &self.down {
            if elapsed.saturating_sub(*since) >= NODE_DOWN_FOR {
                let name = name.clone();
                self.down = None;
                return Some(Op::NodeUp { name });
            }
            return None;
        }
        if self.nodes.is_empty()
            || self
                .last_flap
                .is_some_and(|last| elapsed.saturating_sub(last) < NODE_FLAP_EVERY)
        {
            return None;
        }
        let name = self.nodes[self.flap_turn % self.nodes.len()].clone();
        self.flap_turn += 1;
        self.last_flap = Some(elapsed);
        self.down = Some((name.clone(), elapsed));
        Some(Op::NodeDown { name })
    }

    /// The node left down, to resume at the end.
    pub fn down_node(&self) -> Option<&str> {
        self.down.as_ref().map(|(n, _)| n.as_str())
    }
}

/// What the soak measures besides the API: the process, the data directory, the store.
#[derive(Default)]
pub struct Probes {
    /// The process whose RSS, CPU and sockets are sampled.
    pub process: Option<Process>,
    /// The SQLite database file (its WAL is `<file>-wal`).
    pub database: Option<PathBuf>,
    /// The store, for its compacted revision and its size figures.
    pub store: Option<StoreProbe>,
}

/// Where the soak reads the store's compacted revision and size figures.
pub enum StoreProbe {
    /// The store of the server in this process.
    InProcess(Arc<dyn kcm_apiserver::storage::Storage>),
    /// The SQLite file of a server in another process (`--kill-every`'s child), read through
    /// a query-only connection of the soak's own.
    SqliteFile(PathBuf),
}

impl StoreProbe {
    /// The compacted revision and the size figures; `None` and defaults where they cannot be
    /// read (a child being restarted, say).
    async fn read(&self) -> (Option<i64>, StorageStats) {
        match self {
            Self::InProcess(storage) => (
                storage.compacted_revision().await.ok(),
                storage.stats().await.ok().flatten().unwrap_or_default(),
            ),
            Self::SqliteFile(path) => {
                let path = path.clone();
                let read = tokio::task::spawn_blocking(move || {
                    kcm_apiserver::storage::sqlite::SqliteStorage::stats_of_file(&path)
                })
                .await;
                match read {
                    Ok(Ok(s)) => (Some(s.compacted_revision), StorageStats::from(&s)),
                    _ => (None, StorageStats::default()),
                }
            }
        }
    }
}

/// Kills and restarts the child server on schedule (`--kill-every`).
pub struct Killer<'a> {
    /// Time between kills.
    pub every: Duration,
    /// The server.
    pub child: &'a mut ChildCluster,
}

/// How the soak runs.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// How long.
    pub duration: Duration,
    /// The churn's writes per second.
    pub rate: f64,
    /// Seconds per sample.
    pub sample_every: Duration,
}

/// What the writers and the watcher share.
#[derive(Default)]
struct Window {
    latencies: Vec<f64>,
    failed: u64,
    /// Writes not sent because `IN_FLIGHT` were outstanding: the cluster fell behind the rate.
    skipped: u64,
    lags: Vec<f64>,
    /// ConfigMap sequence numbers acknowledged and not yet seen on the watch, with when.
    acked: HashMap<u64, Instant>,
    /// Sequence numbers seen on the watch before their acknowledgement.
    seen_early: HashSet<u64>,
    /// Acknowledged sequence numbers never seen within [`MISSED_AFTER`].
    missed: u64,
    deployments: HashMap<u32, Stage>,
    /// Deployment slots with a step in flight.
    deployments_busy: HashSet<u32>,
    /// Odd while the server is being killed and restarted; a write that fails across a change
    /// was cut off, not failed.
    epoch: u64,
    /// Writes cut off by a kill.
    interrupted: u64,
    /// The highest resourceVersion acknowledged per ConfigMap and Secret (`cm/NAME`,
    /// `secret/NAME`).
    acknowledged: HashMap<String, u64>,
}

struct Shared {
    window: Mutex<Window>,
}

impl Shared {
    fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the resourceVersion a write of `key` was acknowledged with.
    fn acknowledged(&self, key: String, resource_version: Option<&str>) {
        let Some(rv) = resource_version.and_then(|v| v.parse::<u64>().ok()) else {
            return;
        };
        let mut w = self.window();
        let known = w.acknowledged.entry(key).or_default();
        *known = (*known).max(rv);
    }

    /// Forgets acknowledgements older than [`MISSED_AFTER`], counting them as missed.
    fn expire_acked(&self, now: Instant) {
        let mut w = self.window();
        let before = w.acked.len();
        w.acked
            .retain(|_, at| now.saturating_duration_since(*at) < MISSED_AFTER);
        w.missed += (before - w.acked.len()) as u64;
    }

    /// Claims Deployment slot `slot` for its next step and returns the slot's stage; `None`
    /// while a step of it is in flight. At a high rate the next step of a slot comes before
    /// the previous one is answered, and both would read the same stage: two creates, or a
    /// scale of a Deployment being deleted. The harness's own race, not the cluster's failure.
    fn claim_slot(&self, slot: u32) -> Option<Stage> {
        let mut w = self.window();
        w.deployments_busy
            .insert(slot)
            .then(|| w.deployments.get(&slot).copied().unwrap_or_default())
    }

    /// Releases slot `slot`, at stage `stage` when its step was acknowledged.
    fn release_slot(&self, slot: u32, stage: Option<Stage>) {
        let mut w = self.window();
        w.deployments_busy.remove(&slot);
        if let Some(stage) = stage {
            w.deployments.insert(slot, stage);
        }
    }

    /// Counts a failed write begun in `epoch`.
    fn failed(&self, epoch: u64) -> bool {
        let mut w = self.window();
        if w.epoch != epoch || w.epoch % 2 == 1 {
            w.interrupted += 1;
            false
        } else {
            w.failed += 1;
            true
        }
    }

    fn acked(&self, seq: u64, at: Instant) {
        let mut w = self.window();
        if w.seen_early.remove(&seq) {
            w.lags.push(0.0);
        } else {
            w.acked.insert(seq, at);
        }
    }

    fn seen(&self, seq: u64, at: Instant) {
        let mut w = self.window();
        if let Some(acked) = w.acked.remove(&seq) {
            w.lags
                .push(at.saturating_duration_since(acked).as_secs_f64());
        } else if w.seen_early.len() < 100_000 {
            w.seen_early.insert(seq);
        }
    }
}

fn labels() -> serde_json::Value {
    let (key, value) = MANAGED_BY;
    json!({ key: value, "kcm.io/soak": "true" })
}

/// Runs the soak in `namespace` (already created) and returns its report; with `killer`, the
/// server is killed and restarted on its schedule.
pub async fn run(
    client: &kube::Client,
    namespace: &str,
    options: &SoakOptions,
    config: SoakConfig,
    probes: &mut Probes,
    mut killer: Option<Killer<'_>>,
    cancel: &CancellationToken,
) -> anyhow::Result<SoakReport> {
    setup(client, namespace).await?;
    let nodes: Vec<String> = Api::<Node>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .context("listing nodes")?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let shared = Arc::new(Shared {
        window: Mutex::new(Window::default()),
    });
    let watcher = tokio::spawn(watch_lag(
        client.clone(),
        namespace.to_owned(),
        shared.clone(),
        cancel.child_token(),
    ));
    let mut churn = Churn::new(nodes);
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let start = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / options.rate.max(0.001));
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut samples = Vec::new();
    let mut next_sample = start + options.sample_every;
    let mut compacted = match &probes.store {
        Some(store) => store.read().await.0,
        None => None,
    };
    let mut last_line = Instant::now();
    let mut restarts = Vec::new();
    let mut next_kill = killer.as_ref().map(|k| start + k.every);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = cancel.cancelled() => break,
        }
        let elapsed = start.elapsed();
        if elapsed >= options.duration {
            break;
        }
        let op = churn.next(elapsed);
        if let Ok(permit) = permits.clone().try_acquire_owned() {
            let client = client.clone();
            let namespace = namespace.to_owned();
            let shared = shared.clone();
            tokio::spawn(async move {
                let began = Instant::now();
                let epoch = shared.window().epoch;
                let result = execute(&client, &namespace, &op, &shared).await;
                let took = began.elapsed().as_secs_f64();
                match result {
                    Ok(true) => shared.window().latencies.push(took),
                    Ok(false) => {}
                    Err(err) => {
                        let first = shared.window().failed == 0;
                        // One line per window: the count goes into the sample.
                        if shared.failed(epoch) && first {
                            tracing::warn!(?op, error = %format!("{err:#}"), "soak write failed");
                        }
                    }
                }
                drop(permit);
            });
        } else {
            // The cluster is slower than the rate: the write is skipped.
            shared.window().skipped += 1;
        }
        if let (Some(k), Some(at)) = (killer.as_mut(), next_kill)
            && Instant::now() >= at
        {
            next_kill = Some(at + k.every);
            let restart = kill_and_check(client, namespace, &shared, k, elapsed, cancel).await?;
            eprintln!(
                "soak {:>6.0} s  killed and restarted the server in {:.1} s: {} of {} objects \
                 behind their acknowledged writes",
                restart.t, restart.seconds, restart.lost_writes, restart.checked
            );
            restarts.push(restart);
            probes.process = k.child.process();
        }
        if Instant::now() >= next_sample {
            next_sample += options.sample_every;
            let (now_compacted, stats) = match &probes.store {
                Some(store) => store.read().await,
                None => (None, StorageStats::default()),
            };
            let did_compact = now_compacted.is_some() && now_compacted != compacted;
            compacted = now_compacted;
            let store = StoreSample {
                stats,
                compacted: did_compact,
            };
            let sample = take_sample(client, namespace, &shared, probes, elapsed, store).await;
            if last_line.elapsed() >= Duration::from_secs(10) {
                last_line = Instant::now();
                eprintln!("{}", progress_line(&sample, options.duration));
            }
            samples.push(sample);
        }
    }
    if let Some(name) = churn.down_node() {
        let _ = set_heartbeat(client, name, false).await;
    }
    watcher.abort();
    let warmup = WARMUP.min(options.duration / 6).as_secs_f64();
    Ok(SoakReport {
        summary: SoakSummary::of(&samples, &restarts, warmup),
        config,
        samples,
        restarts,
    })
}

/// `kill -9`s and restarts the server, then compares every ConfigMap's and Secret's
/// resourceVersion with the last one a write of it was acknowledged with.
async fn kill_and_check(
    client: &kube::Client,
    namespace: &str,
    shared: &Shared,
    killer: &mut Killer<'_>,
    elapsed: Duration,
    cancel: &CancellationToken,
) -> anyhow::Result<Restart> {
    shared.window().epoch += 1;
    let took = killer.child.kill_and_restart(cancel).await;
    shared.window().epoch += 1;
    let took = took?;
    let stored = stored_versions(client, namespace).await?;
    let acknowledged = shared.window().acknowledged.clone();
    Ok(Restart {
        t: elapsed.as_secs_f64(),
        seconds: took.as_secs_f64(),
        checked: acknowledged.len() as u64,
        lost_writes: behind(&acknowledged, &stored),
    })
}

/// Objects of `acknowledged` whose stored resourceVersion is older, or that are gone.
fn behind(acknowledged: &HashMap<String, u64>, stored: &HashMap<String, u64>) -> u64 {
    acknowledged
        .iter()
        .filter(|(key, rv)| stored.get(*key).is_none_or(|now| now < *rv))
        .count() as u64
}

/// The resourceVersions of the soak's ConfigMaps and Secrets, keyed as
/// [`Shared::acknowledged`] keys them.
async fn stored_versions(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<HashMap<String, u64>> {
    let lp = ListParams::default().labels("kcm.io/soak=true");
    let mut out = HashMap::new();
    let cms = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .list_metadata(&lp)
        .await
        .context("listing the soak's ConfigMaps after a restart")?;
    let secrets = Api::<Secret>::namespaced(client.clone(), namespace)
        .list_metadata(&lp)
        .await
        .context("listing the soak's Secrets after a restart")?;
    let metas = cms
        .items
        .into_iter()
        .map(|o| ("cm", o.metadata))
        .chain(secrets.items.into_iter().map(|o| ("secret", o.metadata)));
    for (kind, meta) in metas {
        if let (Some(name), Some(rv)) = (
            meta.name,
            meta.resource_version.and_then(|v| v.parse::<u64>().ok()),
        ) {
            out.insert(format!("{kind}/{name}"), rv);
        }
    }
    Ok(out)
}

/// One progress line: time, RSS, database, WAL, write p99, failures.
fn progress_line(s: &SoakSample, total: Duration) -> String {
    let mib = |b: Option<u64>| {
        b.map_or("-".to_owned(), |b| {
            format!("{:.0} MiB", b as f64 / 1048576.0)
        })
    };
    format!(
        "soak {:>6.0}/{:.0} s  RSS {}  heap {}  db {}  wal {}  write p99 {:.1} ms  lag p99 {:.1} ms  failed {}",
        s.t,
        total.as_secs_f64(),
        mib(s.rss_bytes),
        mib(s.heap.map(|h| h.allocated)),
        mib(s.db_bytes),
        mib(s.wal_bytes),
        s.writes.p99 * 1e3,
        s.watch_lag.p99 * 1e3,
        s.failed
    )
}

/// What the store said at a sample.
struct StoreSample {
    stats: StorageStats,
    /// Whether the compacted revision moved since the previous sample.
    compacted: bool,
}

async fn take_sample(
    client: &kube::Client,
    namespace: &str,
    shared: &Shared,
    probes: &Probes,
    elapsed: Duration,
    store: StoreSample,
) -> SoakSample {
    let StoreSample { stats, compacted } = store;
    // Acknowledgements never seen within a minute are missed events (compacted away, or a
    // watch that did not resume where it left off); dropping them keeps the map bounded.
    shared.expire_acked(Instant::now());
    let (mut latencies, failed, skipped, mut lags, missed, interrupted) = {
        let mut w = shared.window();
        (
            std::mem::take(&mut w.latencies),
            std::mem::take(&mut w.failed),
            std::mem::take(&mut w.skipped),
            std::mem::take(&mut w.lags),
            std::mem::take(&mut w.missed),
            std::mem::take(&mut w.interrupted),
        )
    };
    let usage = probes.process.as_ref().and_then(Process::usage);
    let file_size = |p: &PathBuf| std::fs::metadata(p).ok().map(|m| m.len());
    let wal = probes.database.as_ref().map(|p| {
        let mut name = p.clone().into_os_string();
        name.push("-wal");
        PathBuf::from(name)
    });
    SoakSample {
        t: elapsed.as_secs_f64(),
        rss_bytes: usage.map(|u| u.rss_bytes),
        cpu_seconds: usage.map(|u| u.cpu_seconds),
        // The file when there is one (SQLite), else what the store says (etcd's dbSize).
        db_bytes: probes
            .database
            .as_ref()
            .and_then(file_size)
            .or(stats.db_bytes),
        wal_bytes: wal.as_ref().map(|w| file_size(w).unwrap_or(0)),
        live_objects: live_objects(client, namespace).await,
        stored_rows: stats.stored_rows,
        live_keys: stats.live_keys,
        stored_value_bytes: stats.stored_value_bytes,
        db_in_use_bytes: stats.db_in_use_bytes,
        compacted,
        writes: Latencies::of(&mut latencies),
        failed,
        skipped,
        interrupted,
        watch_lag: Latencies::of(&mut lags),
        missed_events: missed,
        sockets: probes.process.as_ref().and_then(Process::sockets),
        heap: probes
            .process
            .as_ref()
            .filter(|p| p.is_current())
            .and_then(|_| heap::stats()),
    }
}

/// The soak's objects alive in its namespace: pods, ReplicaSets, Deployments, Jobs,
/// ConfigMaps and Secrets.
async fn live_objects(client: &kube::Client, namespace: &str) -> Option<u64> {
    async fn count<K>(client: &kube::Client, namespace: &str) -> Option<u64>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::namespaced(client.clone(), namespace);
        api.list_metadata(&ListParams::default())
            .await
            .ok()
            .map(|l| l.items.len() as u64)
    }
    let parts = [
        count::<Pod>(client, namespace).await?,
        count::<k8s_openapi::api::apps::v1::ReplicaSet>(client, namespace).await?,
        count::<Deployment>(client, namespace).await?,
        count::<Job>(client, namespace).await?,
        count::<ConfigMap>(client, namespace).await?,
        count::<Secret>(client, namespace).await?,
    ];
    Some(parts.iter().sum())
}

/// The ConfigMaps and Secrets the churn updates, and the CronJob.
async fn setup(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for i in 0..OBJECTS {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("soak-cm-{i}"), "labels": labels()},
            "data": {"seq": "0"}
        }))?;
        cms.create(&pp, &cm).await.context("creating a ConfigMap")?;
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("soak-secret-{i}"), "labels": labels()},
            "stringData": {"seq": "0"}
        }))?;
        secrets
            .create(&pp, &secret)
            .await
            .context("creating a Secret")?;
    }
    let cron: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "soak-cron", "labels": labels()},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"template": job_template()}}
        }
    }))?;
    Api::<CronJob>::namespaced(client.clone(), namespace)
        .create(&pp, &cron)
        .await
        .context("creating the CronJob")?;
    Ok(())
}

fn job_template() -> serde_json::Value {
    json!({
        "metadata": {"labels": labels(), "annotations": {"sim.kcm.io/duration": "3s"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "work", "image": "registry.k8s.io/pause:3.10"}]
        }
    })
}

fn deployment(name: &str, replicas: u32, revision: u32) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels()},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"kcm.io/revision": revision.to_string()}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))?)
}

async fn set_heartbeat(client: &kube::Client, node: &str, stopped: bool) -> kube::Result<()> {
    let value = if stopped {
        json!("stopped")
    } else {
        serde_json::Value::Null
    };
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {HEARTBEAT_ANNOTATION: value}}})),
        )
        .await
        .map(|_| ())
}

/// Performs `op`; `Ok(true)` when it was a write whose latency counts.
async fn execute(
    client: &kube::Client,
    namespace: &str,
    op: &Op,
    shared: &Shared,
) -> anyhow::Result<bool> {
    let pp = PatchParams::default();
    match op {
        Op::ConfigMap { i, seq } => {
            let name = format!("soak-cm-{i}");
            let cm = Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .patch(
                    &name,
                    &pp,
                    &Patch::Merge(json!({"data": {"seq": seq.to_string()}})),
                )
                .await?;
            shared.acked(*seq, Instant::now());
            shared.acknowledged(
                format!("cm/{name}"),
                cm.metadata.resource_version.as_deref(),
            );
        }
        Op::Secret { i, seq } => {
            let name = format!("soak-secret-{i}");
            let secret = Api::<Secret>::namespaced(client.clone(), namespace)
                .patch(
                    &name,
                    &pp,
                    &Patch::Merge(json!({"stringData": {"seq": seq.to_string()}})),
                )
                .await?;
            shared.acknowledged(
                format!("secret/{name}"),
                secret.metadata.resource_version.as_deref(),
            );
        }
        Op::Deployment { slot } => {
            let Some(stage) = shared.claim_slot(*slot) else {
                // The slot's previous step is still in flight: this one is not sent.
                shared.window().skipped += 1;
                return Ok(false);
            };
            let stepped = deployment_step(client, namespace, *slot, stage.next(), &pp).await;
            shared.release_slot(*slot, stepped.is_ok().then(|| stage.next()));
            stepped?;
        }
        Op::Job { n } => {
            let job: Job = serde_json::from_value(json!({
                "metadata": {"name": format!("soak-job-{n}"), "labels": labels()},
                "spec": {"ttlSecondsAfterFinished": 30, "template": job_template()}
            }))?;
            Api::<Job>::namespaced(client.clone(), namespace)
                .create(&PostParams::default(), &job)
                .await?;
        }
        Op::FailPod { slot } => {
            let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
            let list = pods
                .list(&ListParams::default().labels(&format!("app=soak-d-{slot}")))
                .await?;
            let running = list.items.into_iter().find(|p| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.metadata.deletion_timestamp.is_none()
            });
            let Some(name) = running.and_then(|p| p.metadata.name) else {
                return Ok(false);
            };
            let failed = json!({"metadata": {"annotations": {"sim.kcm.io/phase": "Failed"}}});
            match pods.patch(&name, &pp, &Patch::Merge(failed)).await {
                Ok(_) => {}
                // Deleted since the list (its Deployment scaled down): nothing to fail.
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
                Err(err) => return Err(err.into()),
            }
        }
        Op::Watch => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            let stream = api.watch(&WatchParams::default().timeout(5), "0").await?;
            // Read until the server ends it; the events are not looked at.
            tokio::spawn(async move {
                let mut stream = std::pin::pin!(stream);
                while stream.next().await.is_some() {}
            });
            return Ok(false);
        }
        Op::NodeDown { name } => set_heartbeat(client, name, true).await?,
        Op::NodeUp { name } => set_heartbeat(client, name, false).await?,
    }
    Ok(true)
}

/// Walks Deployment slot `slot` to `stage`: one write.
async fn deployment_step(
    client: &kube::Client,
    namespace: &str,
    slot: u32,
    stage: Stage,
    pp: &PatchParams,
) -> anyhow::Result<()> {
    let name = format!("soak-d-{slot}");
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    match stage {
        Stage::Created => {
            api.create(&PostParams::default(), &deployment(&name, 2, 0)?)
                .await?;
        }
        Stage::Scaled => {
            api.patch(&name, pp, &Patch::Merge(json!({"spec": {"replicas": 4}})))
                .await?;
        }
        Stage::Rolled => {
            let rolled = json!({"spec": {"template": {"metadata": {"annotations": {"kcm.io/revision": "1"}}}}});
            api.patch(&name, pp, &Patch::Merge(rolled)).await?;
        }
        Stage::Shrunk => {
            api.patch(&name, pp, &Patch::Merge(json!({"spec": {"replicas": 1}})))
                .await?;
        }
        Stage::Absent => {
            // In the background, as kubectl deletes: the name is free at once.
            api.delete(&name, &DeleteParams::background()).await?;
        }
    }
    Ok(())
}

/// Watches the soak's ConfigMaps for the sequence numbers the churn writes, re-watching from
/// the last revision seen when the server ends a watch.
async fn watch_lag(
    client: kube::Client,
    namespace: String,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let mut version = "0".to_owned();
    while !cancel.is_cancelled() {
        let stream = match api
            .watch(&WatchParams::default().timeout(290), &version)
            .await
        {
            Ok(stream) => stream,
            Err(err) => {
                tracing::warn!(error = %err, "soak watch failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Modified(cm) | WatchEvent::Added(cm)) => {
                    let at = Instant::now();
                    if let Some(rv) = &cm.metadata.resource_version {
                        version.clone_from(rv);
                    }
                    if let Some(seq) = cm
                        .data
                        .as_ref()
                        .and_then(|d| d.get("seq"))
                        .and_then(|s| s.parse::<u64>().ok())
                    {
                        shared.seen(seq, at);
                    }
                }
                Ok(WatchEvent::Bookmark(b)) => version = b.metadata.resource_version,
                Ok(WatchEvent::Error(e)) if e.code == 410 => {
                    version = "0".to_owned();
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn churn_mixes_operations_in_the_stated_proportions() {
        let mut churn = Churn::new(Vec::new());
        let ops: Vec<Op> = (0..200).map(|_| churn.next(Duration::ZERO)).collect();
        let count = |f: fn(&Op) -> bool| ops.iter().filter(|o| f(o)).count();
        assert_eq!(
            count(|o| matches!(o, Op::ConfigMap { .. })),
            110,
            "10 + the flap slot"
        );
        assert_eq!(count(|o| matches!(o, Op::Secret { .. })), 40);
        assert_eq!(count(|o| matches!(o, Op::Deployment { .. })), 20);
        assert_eq!(count(|o| matches!(o, Op::Job { .. })), 10);
        assert_eq!(count(|o| matches!(o, Op::FailPod { .. })), 10);
        assert_eq!(count(|o| matches!(o, Op::Watch)), 10);
        // Deployment slots take turns, so each walks its stages in order.
        let slots: Vec<u32> = ops
            .iter()
            .filter_map(|o| match o {
                Op::Deployment { slot } => Some(*slot),
                _ => None,
            })
            .take(6)
            .collect();
        assert_eq!(slots, [0, 1, 2, 3, 4, 0]);
        // Every ConfigMap and Secret is updated, each in turn.
        let objects = |secret: bool| -> HashSet<u32> {
            ops.iter()
                .filter_map(|o| match (o, secret) {
                    (Op::ConfigMap { i, .. }, false) | (Op::Secret { i, .. }, true) => Some(*i),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(objects(false).len(), OBJECTS as usize);
        assert_eq!(objects(true).len(), OBJECTS as usize);
    }

    #[test]
    fn a_deployment_slot_lives_and_dies() {
        let mut stage = Stage::Absent;
        let mut seen = Vec::new();
        for _ in 0..5 {
            stage = stage.next();
            seen.push(stage);
        }
        assert_eq!(
            seen,
            [
                Stage::Created,
                Stage::Scaled,
                Stage::Rolled,
                Stage::Shrunk,
                Stage::Absent
            ]
        );
    }

    #[test]
    fn nodes_flap_one_at_a_time_on_schedule() {
        let mut churn = Churn::new(vec!["a".into(), "b".into()]);
        let flaps = |churn: &mut Churn, at: u64| -> Vec<Op> {
            (0..20)
                .map(|_| churn.next(Duration::from_secs(at)))
                .filter(|o| matches!(o, Op::NodeDown { .. } | Op::NodeUp { .. }))
                .collect()
        };
        assert_eq!(flaps(&mut churn, 0), [Op::NodeDown { name: "a".into() }]);
        assert_eq!(flaps(&mut churn, 10), [], "down for 30 s");
        assert_eq!(flaps(&mut churn, 30), [Op::NodeUp { name: "a".into() }]);
        assert_eq!(flaps(&mut churn, 60), [], "every 2 minutes");
        assert_eq!(flaps(&mut churn, 120), [Op::NodeDown { name: "b".into() }]);
        assert_eq!(churn.down_node(), Some("b"));
    }

    fn shared() -> Shared {
        Shared {
            window: Mutex::new(Window::default()),
        }
    }

    #[test]
    fn an_acknowledgement_never_seen_within_a_minute_is_missed() {
        let shared = shared();
        let t0 = Instant::now();
        shared.acked(1, t0);
        shared.acked(2, t0 + Duration::from_secs(30));
        shared.expire_acked(t0 + Duration::from_secs(59));
        assert_eq!(shared.window().missed, 0);
        shared.expire_acked(t0 + Duration::from_secs(61));
        assert_eq!(shared.window().missed, 1, "seq 1 expired");
        shared.seen(2, t0 + Duration::from_secs(62));
        shared.expire_acked(t0 + Duration::from_secs(200));
        let w = shared.window();
        assert_eq!(w.missed, 1, "seq 2 was seen");
        assert!(w.acked.is_empty());
    }

    #[test]
    fn a_deployment_slot_takes_one_step_at_a_time() {
        let shared = shared();
        assert_eq!(shared.claim_slot(0), Some(Stage::Absent));
        assert_eq!(shared.claim_slot(0), None, "the create is in flight");
        assert_eq!(
            shared.claim_slot(1),
            Some(Stage::Absent),
            "other slots are free"
        );
        shared.release_slot(0, Some(Stage::Created));
        assert_eq!(shared.claim_slot(0), Some(Stage::Created));
        // A failed step leaves the slot where it was.
        shared.release_slot(0, None);
        assert_eq!(shared.claim_slot(0), Some(Stage::Created));
    }

    #[test]
    fn a_write_failing_across_a_kill_is_cut_off_not_failed() {
        let shared = shared();
        assert!(shared.failed(0), "no kill: a failure");
        shared.window().epoch = 1; // killing
        assert!(!shared.failed(0), "begun before the kill");
        assert!(!shared.failed(1), "begun while the server was down");
        shared.window().epoch = 2; // restarted
        assert!(!shared.failed(1), "begun while down, ended after");
        assert!(shared.failed(2), "begun and failed after the restart");
        let w = shared.window();
        assert_eq!((w.failed, w.interrupted), (2, 3));
    }

    #[test]
    fn acknowledged_versions_keep_the_highest_and_find_what_was_lost() {
        let shared = shared();
        shared.acknowledged("cm/a".into(), Some("10"));
        shared.acknowledged("cm/a".into(), Some("7")); // answered late: not lower
        shared.acknowledged("cm/b".into(), Some("12"));
        shared.acknowledged("secret/c".into(), Some("15"));
        shared.acknowledged("cm/d".into(), Some("not a number"));
        shared.acknowledged("cm/e".into(), None);
        let acknowledged = shared.window().acknowledged.clone();
        assert_eq!(acknowledged.len(), 3);
        assert_eq!(acknowledged["cm/a"], 10);
        let stored: HashMap<String, u64> = [
            ("cm/a".to_owned(), 11),     // written again since: fine
            ("cm/b".to_owned(), 12),     // exactly the acknowledged write
            ("secret/c".to_owned(), 14), // older than acknowledged: lost
        ]
        .into();
        assert_eq!(behind(&acknowledged, &stored), 1);
        let without_b: HashMap<String, u64> = [("cm/a".to_owned(), 10)].into();
        assert_eq!(behind(&acknowledged, &without_b), 2, "gone counts as lost");
    }

    #[test]
    fn watch_lag_counts_from_the_acknowledgement() {
        let shared = Shared {
            window: Mutex::new(Window::default()),
        };
        let t0 = Instant::now();
        shared.acked(1, t0);
        shared.seen(1, t0 + Duration::from_millis(40));
        shared.seen(2, t0);
        shared.acked(2, t0 + Duration::from_millis(5));
        let w = shared.window();
        assert_eq!(w.lags.len(), 2);
        assert!((w.lags[0] - 0.040).abs() < 1e-9);
        assert_eq!(w.lags[1], 0.0, "seen before its acknowledgement");
        assert!(w.acked.is_empty() && w.seen_early.is_empty());
    }
}
