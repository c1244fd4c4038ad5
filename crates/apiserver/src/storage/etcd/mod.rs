//! The [`Storage`] trait on an etcd v3 cluster, as kube-apiserver's `etcd3` store uses it.
//!
//! etcd already has the semantics the trait describes, so this backend is a thin mapping:
//! one global revision (etcd's), `resourceVersion` = the key's `mod_revision`, and every
//! guarded write a single transaction that compares `create_revision` or `mod_revision` and
//! reads the key back in its `else` branch to tell "not found" from "conflict" (as
//! `store.go`'s `GuaranteedUpdate` does). Lists are etcd ranges at a revision with a limit;
//! watches are etcd watches from `after + 1` with `prev_kv` (the API server's DELETED event
//! needs the last state) and progress notifications on.
//!
//! Compaction: etcd forgets nothing until it is told to. As kube-apiserver's `compact.go`,
//! the revision compacted to is recorded in the key `compact_rev_key` (outside the object
//! prefix), whose version is a logical clock that lets several API servers on one etcd agree
//! that only one of them compacts per interval; the record is also how
//! [`Storage::compacted_revision`] answers without asking etcd for its internal state.
//!
//! Keys are laid out as kube-apiserver lays them out (see `keys`); several API servers may
//! share one etcd, and every write here is safe against the others because each is one
//! conditional transaction. Every unary request is bounded by [`EtcdOptions::request_timeout`]
//! so that a cluster that lost quorum answers with an error instead of hanging the caller.

mod compactor;
mod keys;
pub mod throwaway;

use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, KvClient,
    Txn, TxnOp, TxnOpResponse, TxnResponse, WatchOptions,
};
use futures::StreamExt;

use super::{
    Error, Event, KeyValue, ListOptions, ListResult, Result, Revision, Storage, StorageStats,
    WatchStream,
};
use keys::KeyMapper;

/// The key that records the last compaction (kube-apiserver's `compactRevKey`).
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// kube-apiserver's `--etcd-prefix` default.
pub const DEFAULT_ETCD_PREFIX: &str = "/registry";

/// kube-apiserver's `--etcd-compaction-interval` default.
pub const DEFAULT_COMPACTION_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// How long one etcd request may take before the store reports an error.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How often each watch asks etcd for a progress notification (`RequestWatchProgress`).
/// etcd's own periodic notifications come every 10 minutes by default, far too rarely for
/// bookmarks; a request per watch stream every few seconds costs etcd next to nothing.
pub const DEFAULT_WATCH_PROGRESS_INTERVAL: Duration = Duration::from_secs(5);

/// The largest response accepted from etcd: gRPC's 4 MiB default would fail any list of a
/// few thousand objects, so, as kube-apiserver (`MaxCallRecvMsgSize`), accept up to 2 GiB.
const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

/// What went wrong talking to etcd. Carried inside [`Error::Backend`].
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No `--etcd-servers` were given.
    #[error("no etcd servers given")]
    NoServers,
    /// Reading a TLS file named by `--etcd-cafile`/`--etcd-certfile`/`--etcd-keyfile` failed.
    #[error("reading {path}: {source}")]
    TlsFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A client certificate was given without its key, or the other way round.
    #[error("--etcd-certfile and --etcd-keyfile must be given together")]
    HalfIdentity,
    /// Connecting to the cluster failed.
    #[error("connecting to etcd at {endpoints}: {source}")]
    Connect {
        /// The endpoints tried, comma-separated.
        endpoints: String,
        /// The cause.
        #[source]
        source: etcd_client::Error,
    },
    /// A request failed (the cluster is unreachable, has no leader, or refused it).
    #[error("etcd {op} {key:?}: {source}")]
    Request {
        /// What was being done.
        op: &'static str,
        /// The key or prefix concerned.
        key: String,
        /// The cause.
        #[source]
        source: etcd_client::Error,
    },
    /// A request got no answer within the request timeout (etcd has no quorum, say).
    #[error("etcd {op} {key:?}: no answer within {timeout:?} (is the etcd cluster healthy?)")]
    Timeout {
        /// What was being done.
        op: &'static str,
        /// The key or prefix concerned.
        key: String,
        /// The bound that passed.
        timeout: Duration,
    },
    /// etcd answered with something this store never writes (a foreign or corrupt record).
    #[error("etcd {op} {key:?}: unexpected response: {why}")]
    Unexpected {
        /// What was being done.
        op: &'static str,
        /// The key concerned.
        key: String,
        /// What was wrong.
        why: String,
    },
    /// A watch was cancelled by etcd for a reason other than compaction.
    #[error("etcd cancelled the watch on {prefix:?}: {reason}")]
    WatchCancelled {
        /// The watched prefix.
        prefix: String,
        /// etcd's reason.
        reason: String,
    },
}

impl From<EtcdError> for Error {
    fn from(err: EtcdError) -> Self {
        Error::Backend(Box::new(err))
    }
}

/// TLS files for talking to etcd (kube-apiserver's `--etcd-cafile`, `--etcd-certfile`,
/// `--etcd-keyfile`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EtcdTls {
    /// The CA bundle that signed the etcd servers' certificates.
    pub ca_file: Option<PathBuf>,
    /// The client certificate (PEM).
    pub cert_file: Option<PathBuf>,
    /// The client key (PEM).
    pub key_file: Option<PathBuf>,
}

impl EtcdTls {
    /// True when no TLS file was given (plain `http://` endpoints).
    pub fn is_empty(&self) -> bool {
        self.ca_file.is_none() && self.cert_file.is_none() && self.key_file.is_none()
    }
}

/// How to reach and use etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdOptions {
    /// Client URLs (`http://127.0.0.1:2379`); the client balances over them.
    pub endpoints: Vec<String>,
    /// The key prefix of every object (`--etcd-prefix`, default `/registry`).
    pub prefix: String,
    /// TLS material; empty for plain HTTP.
    pub tls: EtcdTls,
    /// Compact every this often (`--etcd-compaction-interval`, default 5m); `None` never.
    pub compaction_interval: Option<Duration>,
    /// The bound on each unary request.
    pub request_timeout: Duration,
    /// How often each watch requests a progress notification (see
    /// [`DEFAULT_WATCH_PROGRESS_INTERVAL`]).
    pub watch_progress_interval: Duration,
}

impl EtcdOptions {
    /// kube-apiserver's defaults for `endpoints`.
    pub fn new(endpoints: Vec<String>) -> Self {
        EtcdOptions {
            endpoints,
            prefix: DEFAULT_ETCD_PREFIX.to_owned(),
            tls: EtcdTls::default(),
            compaction_interval: Some(DEFAULT_COMPACTION_INTERVAL),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            watch_progress_interval: DEFAULT_WATCH_PROGRESS_INTERVAL,
        }
    }
}

/// A [`Storage`] on an etcd v3 cluster.
pub struct EtcdStorage {
    client: Client,
    keys: KeyMapper,
    timeout: Duration,
    /// How often each watch requests a progress notification.
    progress_interval: Duration,
    /// The periodic compactor, stopped on drop.
    compactor: Option<tokio::task::AbortHandle>,
}

impl EtcdStorage {
    /// Connects to etcd and, if `options.compaction_interval` is set, starts compacting.
    /// Must be called within a tokio runtime.
    pub async fn connect(options: EtcdOptions) -> Result<Self> {
        if options.endpoints.is_empty() {
            return Err(EtcdError::NoServers.into());
        }
        let mut connect = ConnectOptions::new()
            .with_connect_timeout(options.request_timeout)
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            // Without this a watch on a member cut off from the leader waits silently.
            .with_require_leader(true);
        if !options.tls.is_empty() {
            connect = connect.with_tls(tls_options(&options.tls)?);
        }
        let client = tokio::time::timeout(
            options.request_timeout,
            Client::connect(&options.endpoints, Some(connect)),
        )
        .await
        .map_err(|_| EtcdError::Timeout {
            op: "connect",
            key: options.endpoints.join(","),
            timeout: options.request_timeout,
        })?
        .map_err(|source| EtcdError::Connect {
            endpoints: options.endpoints.join(","),
            source,
        })?;
        let mut store = EtcdStorage {
            client,
            keys: KeyMapper::new(&options.prefix),
            timeout: options.request_timeout,
            progress_interval: options.watch_progress_interval,
            compactor: None,
        };
        // Fail early, with a clear error, when nothing answers.
        store.current_revision().await?;
        if let Some(every) = options.compaction_interval {
            let task = compactor::Compactor::new(store.client.kv_client(), store.timeout, every);
            store.compactor = Some(tokio::spawn(task.run()).abort_handle());
        }
        Ok(store)
    }

    fn kv(&self) -> KvClient {
        self.client
            .kv_client()
            .max_decoding_message_size(MAX_RESPONSE_BYTES)
    }
}

impl Drop for EtcdStorage {
    fn drop(&mut self) {
        if let Some(task) = self.compactor.take() {
            task.abort();
        }
    }
}

/// Builds tonic's TLS settings from the PEM files.
fn tls_options(tls: &EtcdTls) -> Result<etcd_client::TlsOptions> {
    let read = |path: &PathBuf| {
        std::fs::read(path).map_err(|source| EtcdError::TlsFile {
            path: path.clone(),
            source,
        })
    };
    let mut options = etcd_client::TlsOptions::new();
    if let Some(ca) = &tls.ca_file {
        options = options.ca_certificate(etcd_client::Certificate::from_pem(read(ca)?));
    }
    match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => {
            options = options.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
        }
        (None, None) => {}
        _ => return Err(EtcdError::HalfIdentity.into()),
    }
    Ok(options)
}

/// Runs one etcd request within `timeout`, naming the operation and key in any error.
/// `request` builds the request afresh for each attempt: one that etcd certainly never
/// applied (no connection to that member, or the member has no leader) is retried, after a
/// short pause, until the timeout, because the client balances requests over every endpoint
/// and would otherwise fail a share of them whenever one member is down.
pub(crate) async fn bounded<T, Fut>(
    timeout: Duration,
    op: &'static str,
    key: &str,
    mut request: impl FnMut() -> Fut,
) -> std::result::Result<T, EtcdError>
where
    Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    let mut last_unsent: Option<etcd_client::Error> = None;
    let attempts = async {
        loop {
            match request().await {
                Err(err) if never_applied(&err) => {
                    last_unsent = Some(err);
                    tokio::time::sleep(UNSENT_RETRY_PAUSE).await;
                }
                done => return done,
            }
        }
    };
    let outcome = tokio::time::timeout(timeout, attempts).await;
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(EtcdError::Request {
            op,
            key: key.to_owned(),
            source,
        }),
        Err(_) => Err(match last_unsent {
            Some(source) => EtcdError::Request {
                op,
                key: key.to_owned(),
                source,
            },
            None => EtcdError::Timeout {
                op,
                key: key.to_owned(),
                timeout,
            },
        }),
    }
}

/// gRPC's UNAVAILABLE status code.
const GRPC_UNAVAILABLE: i32 = 14;

/// The pause before retrying a request etcd never applied.
const UNSENT_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// True for failures that prove the request was not applied: the connection to the chosen
/// member could not be made, or the member refused it for want of a leader (etcd checks
/// that before proposing).
fn never_applied(err: &etcd_client::Error) -> bool {
    match err {
        etcd_client::Error::TransportError(_) => true,
        etcd_client::Error::GRpcStatus(status) => {
            // gRPC UNAVAILABLE (14); tonic's `Code` is not re-exported by etcd-client.
            status.code() as i32 == GRPC_UNAVAILABLE
                && (status.message().contains("connect error")
                    || status.message().contains("no leader"))
        }
        _ => false,
    }
}

/// The revision in a response header (etcd always sends one; 0 if a proxy dropped it).
fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Revision {
    header.map_or(0, |h| h.revision())
}

/// Which of etcd's revision errors a failed request carries, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RevisionError {
    Compacted,
    Future,
}

/// etcd reports these as gRPC `OutOfRange` with fixed messages (`mvcc.ErrCompacted`,
/// `mvcc.ErrFutureRev`).
fn revision_error(err: &EtcdError) -> Option<RevisionError> {
    let EtcdError::Request {
        source: etcd_client::Error::GRpcStatus(status),
        ..
    } = err
    else {
        return None;
    };
    let message = status.message();
    if message.contains("required revision has been compacted") {
        Some(RevisionError::Compacted)
    } else if message.contains("required revision is a future revision") {
        Some(RevisionError::Future)
    } else {
        None
    }
}

/// The revision recorded in `compact_rev_key` and that key's mod revision (0, 0 if absent).
pub(crate) async fn read_compact_record(
    kv: &mut KvClient,
    timeout: Duration,
) -> std::result::Result<(Revision, Revision, i64), EtcdError> {
    let resp = bounded(timeout, "read", COMPACT_REV_KEY, || {
        let mut kv = kv.clone();
        async move { kv.get(COMPACT_REV_KEY, None).await }
    })
    .await?;
    let Some(kv) = resp.kvs().first() else {
        return Ok((0, 0, 0));
    };
    let compacted = std::str::from_utf8(kv.value())
        .ok()
        .and_then(|s| s.trim().parse::<Revision>().ok())
        .ok_or_else(|| EtcdError::Unexpected {
            op: "read",
            key: COMPACT_REV_KEY.to_owned(),
            why: "the value is not a revision".to_owned(),
        })?;
    Ok((compacted, kv.mod_revision(), kv.version()))
}

/// Compacts etcd to `revision` and records it, unless it is already compacted that far.
/// Records first, as `compact.go` does: a crash in between leaves the record ahead of etcd,
/// which only makes reads at those revisions fail early.
pub(crate) async fn compact_to(
    kv: &mut KvClient,
    timeout: Duration,
    revision: Revision,
) -> Result<()> {
    loop {
        let (recorded, record_rev, _) = read_compact_record(kv, timeout).await?;
        if recorded >= revision {
            return Ok(());
        }
        let txn = Txn::new()
            .when([Compare::mod_revision(
                COMPACT_REV_KEY,
                CompareOp::Equal,
                record_rev,
            )])
            .and_then([TxnOp::put(COMPACT_REV_KEY, revision.to_string(), None)]);
        let resp = bounded(timeout, "record compaction", COMPACT_REV_KEY, || {
            let (mut kv, txn) = (kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await?;
        if resp.succeeded() {
            break;
        }
        // Another API server recorded a compaction in between: look again.
    }
    match bounded(timeout, "compact", "", || {
        let mut kv = kv.clone();
        async move { kv.compact(revision, None).await }
    })
    .await
    {
        Ok(_) => Ok(()),
        Err(err) if revision_error(&err) == Some(RevisionError::Compacted) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// The storage form of an etcd key-value.
fn to_kv(key: String, kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
    }
}

/// The key-values of the `Get` in a failed transaction's `else` branch.
fn else_get(resp: &TxnResponse) -> Option<etcd_client::KeyValue> {
    resp.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().cloned(),
        _ => None,
    })
}

/// Why a guarded write on `key` expecting `expected` failed, from the `else` branch's read.
fn guard_failure(key: &str, expected: Revision, resp: &TxnResponse) -> Error {
    match else_get(resp) {
        None => Error::NotFound {
            key: key.to_owned(),
        },
        Some(current) => Error::Conflict {
            key: key.to_owned(),
            expected,
            actual: current.mod_revision(),
        },
    }
}

/// The guard of an update or delete: the key exists and was last written at `expected`.
fn guard(key: &str, expected: Revision) -> [Compare; 2] {
    [
        Compare::mod_revision(key, CompareOp::Equal, expected),
        // A missing key compares as revision 0, so `expected == 0` alone would match it.
        Compare::create_revision(key, CompareOp::Greater, 0),
    ]
}

#[async_trait]
impl Storage for EtcdStorage {
    fn backend(&self) -> &'static str {
        "etcd"
    }

    /// etcd's `dbSize` and `dbSizeInUse` (from the member this client talks to), and the
    /// keys under the prefix; etcd does not tell how many old revisions it keeps.
    async fn stats(&self) -> Result<Option<StorageStats>> {
        let status = bounded(self.timeout, "read the status", "", || {
            let mut maintenance = self.client.maintenance_client();
            async move { maintenance.status().await }
        })
        .await?;
        let prefix = self.keys.to_etcd(keys::STORAGE_ROOT);
        let counted = bounded(self.timeout, "count the keys", &prefix, || {
            let mut kv = self.kv();
            let prefix = prefix.clone();
            async move {
                kv.get(
                    prefix,
                    Some(GetOptions::new().with_prefix().with_count_only()),
                )
                .await
            }
        })
        .await?;
        Ok(Some(StorageStats {
            db_bytes: u64::try_from(status.db_size()).ok(),
            db_in_use_bytes: u64::try_from(status.raft_used_db_size()).ok(),
            live_keys: u64::try_from(counted.count()).ok(),
            ..StorageStats::default()
        }))
    }

    async fn current_revision(&self) -> Result<Revision> {
        let resp = bounded(self.timeout, "read the revision", "", || {
            let mut kv = self.kv();
            async move {
                kv.get(COMPACT_REV_KEY, Some(GetOptions::new().with_count_only()))
                    .await
            }
        })
        .await?;
        Ok(header_revision(resp.header()))
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        let (compacted, _, _) = read_compact_record(&mut self.kv(), self.timeout).await?;
        Ok(compacted)
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let k = self.keys.to_etcd(key);
        let txn = Txn::new()
            .when([Compare::create_revision(k.as_str(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(k.as_str(), value.to_vec(), None)]);
        let resp = bounded(self.timeout, "create", key, || {
            let (mut kv, txn) = (self.kv(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await?;
        if !resp.succeeded() {
            return Err(Error::AlreadyExists {
                key: key.to_owned(),
            });
        }
        Ok(header_revision(resp.header()))
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let k = self.keys.to_etcd(key);
        let resp = bounded(self.timeout, "get", key, || {
            let (mut kv, k) = (self.kv(), k.clone());
            async move { kv.get(k, None).await }
        })
        .await?;
        Ok(resp.kvs().first().map(|kv| to_kv(key.to_owned(), kv)))
    }

    async fn list(&self, opts: ListOptions) -> Result<ListResult> {
        let (mut start, end) = self.keys.range(&opts.prefix);
        if let Some(after) = &opts.start_after {
            let mut next = self.keys.to_etcd(after).into_bytes();
            next.push(0);
            start = start.max(next);
        }
        let mut get = GetOptions::new().with_range(end);
        let at = opts.revision.filter(|r| *r > 0);
        if let Some(rev) = at {
            get = get.with_revision(rev);
        }
        if let Some(limit) = opts.limit.filter(|l| *l > 0) {
            get = get.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        let resp = match bounded(self.timeout, "list", &opts.prefix, || {
            let (mut kv, start, get) = (self.kv(), start.clone(), get.clone());
            async move { kv.get(start, Some(get)).await }
        })
        .await
        {
            Ok(resp) => resp,
            Err(err) => {
                let requested = at.unwrap_or_default();
                return Err(match revision_error(&err) {
                    Some(RevisionError::Compacted) => Error::Compacted {
                        requested,
                        compacted: self.compacted_revision().await?.max(requested + 1),
                    },
                    Some(RevisionError::Future) => Error::FutureRevision {
                        requested,
                        current: self.current_revision().await?,
                    },
                    None => err.into(),
                });
            }
        };
        let kvs: Vec<KeyValue> = resp
            .kvs()
            .iter()
            .filter_map(|kv| {
                let key = self.keys.storage_key(kv.key())?;
                key.starts_with(&opts.prefix).then(|| to_kv(key, kv))
            })
            .collect();
        let more = resp.more();
        // etcd counts every key in the range, the page included.
        let remaining = if more {
            u64::try_from(resp.count())
                .unwrap_or_default()
                .saturating_sub(kvs.len() as u64)
        } else {
            0
        };
        Ok(ListResult {
            kvs,
            revision: at.unwrap_or_else(|| header_revision(resp.header())),
            more,
            remaining,
        })
    }

    async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision> {
        let k = self.keys.to_etcd(key);
        let txn = Txn::new()
            .when(guard(&k, expected))
            .and_then([TxnOp::put(k.as_str(), value.to_vec(), None)])
            .or_else([TxnOp::get(k.as_str(), None)]);
        let resp = bounded(self.timeout, "update", key, || {
            let (mut kv, txn) = (self.kv(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await?;
        if !resp.succeeded() {
            return Err(guard_failure(key, expected, &resp));
        }
        Ok(header_revision(resp.header()))
    }

    async fn delete(&self, key: &str, expected: Revision) -> Result<(Revision, KeyValue)> {
        let k = self.keys.to_etcd(key);
        let txn = Txn::new()
            .when(guard(&k, expected))
            .and_then([TxnOp::delete(
                k.as_str(),
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(k.as_str(), None)]);
        let resp = bounded(self.timeout, "delete", key, || {
            let (mut kv, txn) = (self.kv(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await?;
        if !resp.succeeded() {
            return Err(guard_failure(key, expected, &resp));
        }
        let prev = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Delete(del) => del.prev_kvs().first().cloned(),
            _ => None,
        });
        match prev {
            Some(prev) => Ok((header_revision(resp.header()), to_kv(key.to_owned(), &prev))),
            None => Err(EtcdError::Unexpected {
                op: "delete",
                key: key.to_owned(),
                why: "the delete returned no previous value".to_owned(),
            }
            .into()),
        }
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        let compacted = self.compacted_revision().await?;
        if after < compacted {
            return Err(Error::Compacted {
                requested: after,
                compacted,
            });
        }
        let (start, end) = self.keys.range(prefix);
        let options = WatchOptions::new()
            .with_range(end)
            .with_start_revision(after + 1)
            .with_prev_key()
            .with_progress_notify();
        let stream = bounded(self.timeout, "watch", prefix, || {
            let mut watch = self
                .client
                .watch_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES);
            let (start, options) = (start.clone(), options.clone());
            async move { watch.watch(start, Some(options)).await }
        })
        .await?;
        let (requests, stream) = stream.split();
        // Never zero: tokio's interval panics on it.
        let every = self.progress_interval.max(Duration::from_millis(1));
        let mut progress_every =
            tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        progress_every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let state = WatchState {
            stream,
            requests,
            progress_every,
            keys: self.keys.clone(),
            prefix: prefix.to_owned(),
            after,
            last: after,
            pending: VecDeque::new(),
            done: false,
        };
        Ok(futures::stream::unfold(state, WatchState::next).boxed())
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let current = self.current_revision().await?;
        if revision > current {
            return Err(Error::FutureRevision {
                requested: revision,
                current,
            });
        }
        compact_to(&mut self.kv(), self.timeout, revision).await
    }
}

/// An etcd watch turned into storage events.
struct WatchState {
    stream: etcd_client::WatchResponseStream,
    /// The request side of the same gRPC stream, for progress requests.
    requests: etcd_client::WatchRequestSender,
    /// When to ask etcd for the next progress notification.
    progress_every: tokio::time::Interval,
    keys: KeyMapper,
    /// The storage prefix watched (the etcd range may be wider).
    prefix: String,
    /// The revision the watch started after (for the Compacted error).
    after: Revision,
    /// The highest revision handed out (`after` before the first event): a progress
    /// notification is passed on only when it is newer.
    last: Revision,
    /// Events of the last response not yet handed out.
    pending: VecDeque<Result<Event>>,
    /// Set once an error was queued: the stream ends after it.
    done: bool,
}

impl WatchState {
    async fn next(mut self) -> Option<(Result<Event>, Self)> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some((item, self));
            }
            if self.done {
                return None;
            }
            let message = tokio::select! {
                message = self.stream.next() => message,
                _ = self.progress_every.tick() => {
                    // etcd answers on the response stream, once every watch of this stream
                    // has caught up (`RequestWatchProgress`). A failed send means the stream
                    // is gone, which the response side reports.
                    let _ = self.requests.request_progress().await;
                    continue;
                }
            };
            match message {
                Some(Ok(resp)) => self.absorb(&resp),
                None => return None,
                Some(Err(source)) => {
                    self.fail(
                        EtcdError::Request {
                            op: "watch",
                            key: self.prefix.clone(),
                            source,
                        }
                        .into(),
                    );
                }
            }
        }
    }

    fn fail(&mut self, err: Error) {
        self.pending.push_back(Err(err));
        self.done = true;
    }

    /// Queues the events of one response. A response without events is the "created"
    /// acknowledgement (ignored: the watch may still be replaying history) or a progress
    /// notification, queued as [`Event::Progress`] at the header's revision when that is
    /// newer than anything handed out, as kube-apiserver's `etcd3/watcher.go` turns it into
    /// a bookmark.
    fn absorb(&mut self, resp: &etcd_client::WatchResponse) {
        if resp.canceled() {
            let err = if resp.compact_revision() > 0 {
                Error::Compacted {
                    requested: self.after,
                    compacted: resp.compact_revision(),
                }
            } else {
                EtcdError::WatchCancelled {
                    prefix: self.prefix.clone(),
                    reason: resp.cancel_reason().to_owned(),
                }
                .into()
            };
            self.fail(err);
            return;
        }
        if resp.events().is_empty() {
            let revision = resp.header().map_or(0, |h| h.revision());
            if !resp.created() && revision > self.last {
                self.last = revision;
                self.pending.push_back(Ok(Event::Progress { revision }));
            }
            return;
        }
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            self.last = self.last.max(kv.mod_revision());
            let Some(key) = self.keys.storage_key(kv.key()) else {
                continue;
            };
            if !key.starts_with(&self.prefix) {
                continue;
            }
            let prev = event.prev_kv().map(|p| to_kv(key.clone(), p));
            let item = match event.event_type() {
                EventType::Put => {
                    let kv = to_kv(key, kv);
                    // etcd sends no prev_kv for a create; an update always has one unless
                    // compaction removed it (then the event reads as a create of the new state).
                    Ok(Event::Put {
                        prev: prev.filter(|_| kv.create_revision != kv.mod_revision),
                        kv,
                    })
                }
                EventType::Delete => match prev {
                    Some(prev) => Ok(Event::Delete {
                        revision: kv.mod_revision(),
                        prev,
                    }),
                    None => Err(EtcdError::Unexpected {
                        op: "watch",
                        key,
                        why: "a delete event without the previous value".to_owned(),
                    }
                    .into()),
                },
            };
            let failed = item.is_err();
            self.pending.push_back(item);
            if failed {
                self.done = true;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
