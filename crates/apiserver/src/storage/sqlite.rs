//! The default [`Storage`]: kine's append-only revision log in one SQLite file.
//!
//! # Layout (as k3s's kine)
//!
//! Every write appends one row to the `kine` table; the row's `INTEGER PRIMARY KEY
//! AUTOINCREMENT` id is the write's revision (AUTOINCREMENT never reuses an id, even after
//! compaction deleted the newest rows). A row records `name`, whether it `created` the key or
//! `deleted` it (a tombstone), the key's `create_revision` (0 on the create row itself, whose
//! own id is the create revision), the `prev_revision` it replaced (0 for a first create), the
//! new `value` and the replaced `old_value` — so every row is a complete watch event. A UNIQUE
//! index on `(name, prev_revision)` makes "two writers replaced the same version" impossible at
//! the database level. The state at revision R is, per name, the row with the largest id ≤ R,
//! unless that row is a tombstone.
//!
//! Compaction (as kine's `Compact`) deletes, in batches, every row superseded by a row at or
//! below the target and every tombstone at or below it, then records the target. Unlike kine,
//! the compacted revision lives in a `kine_meta` table rather than in a `compact_rev_key` row,
//! so it takes no revision and never shows up in a list of all keys.
//!
//! # Threads and durability
//!
//! rusqlite is synchronous, so nothing here runs SQLite on a runtime thread. One dedicated
//! writer thread owns the only write connection and applies writes in order; it drains
//! whatever is queued into one transaction (group commit), so a burst of writers shares one
//! fsync. Each write is checked against the newest row of its key inside that transaction, so
//! guarded updates are linearizable. After the commit the writer advances the current
//! revision, publishes the events to the watch hub and only then acknowledges the writers.
//! Reads run on `spawn_blocking` with pooled reader connections, each in one read transaction
//! (a WAL snapshot), which is what makes a paginated list or a watch backlog consistent with a
//! concurrent compaction.
//!
//! The journal is WAL. With `synchronous=FULL` (the default) every commit fsyncs the WAL, so an
//! acknowledged write survives power loss; `NORMAL` survives a killed process (the WAL is in
//! the OS page cache before the commit returns) but may lose the last commits on an OS crash.
//!
//! Watches poll nothing: all writes go through this process, so the writer feeds an in-memory
//! hub with a ring of recent events; a watch from older than the ring reads its backlog from
//! the log table.
//!
//! # Keeping the file bounded
//!
//! kine leaves the file to SQLite: nothing checkpoints the WAL, and a steady stream of
//! overlapping read transactions keeps SQLite's automatic (PASSIVE) checkpoints from ever
//! resetting it, so it grows without bound (kine#582); rows deleted by compaction leave free
//! pages that are never given back (kine#607); and compaction runs its batches back to back,
//! holding writers off for as long as it takes (k3s#13720). Here (defaults in
//! [`SqliteMaintenance`]):
//!
//! - **Reads are chunked.** A list reads at most [`SqliteOptions::read_chunk`] (500) keys, and
//!   a watch backlog at most that many revisions, per read transaction, then goes on in a new
//!   one at the same revision; every transaction re-checks the compacted revision, so a read
//!   either joins into one consistent answer or fails with [`Error::Compacted`]. No reader
//!   keeps one WAL snapshot for longer than one chunk (a `get` is one indexed row).
//! - **Checkpoints cannot be starved.** The writer runs `PRAGMA wal_checkpoint(TRUNCATE)` every
//!   minute, after a commit that leaves the `-wal` file at 16 MiB or more, and after a vacuum.
//!   It waits for readers still on the WAL at most 50 ms (the busy handler; every write waits
//!   with it), then gives up until the next trigger; the size trigger then waits until the WAL
//!   has grown another 16 MiB. Since a reader lets go within one chunk, a later attempt
//!   completes and the WAL is truncated to zero bytes.
//! - **Space is given back.** A new file is created with `auto_vacuum=INCREMENTAL`; an
//!   existing one without auto-vacuum is converted (one VACUUM) at open if it is at most
//!   256 MiB, otherwise left as is with a warning (its free pages are reused by later writes;
//!   convert it offline with `PRAGMA auto_vacuum=INCREMENTAL; VACUUM;`). After a compaction
//!   finishes, once `freelist_count` passes 2,048 pages, the writer runs
//!   `PRAGMA incremental_vacuum(256)` steps until no page is free, then checkpoints so the
//!   file itself shrinks.
//! - **Compaction holds the write lock briefly.** Each batch is its own transaction of at
//!   most kine's 1,000 revisions and fewer when the previous batch took longer than 25 ms
//!   (`sqlite/compact_pacer.rs`); never fewer than 10. (At 50 ms, the 2-hour soak's windows
//!   with a compaction had a write p99 18 ms above the others, up to 60 ms.)
//! - **Writes come first.** Compaction batches, vacuum steps and checkpoints are steps of
//!   background work on the writer thread; between two steps the writer commits every queued
//!   write, so a write waits behind one step at most.
//!
//! [`SqliteStorage::stats`] reports the figures (file and WAL sizes, pages, free pages, live
//! and stored rows, revisions) for soak tests; [`SqliteStorage::maintain`] runs the upkeep now.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use rusqlite::{
    Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params,
};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot, watch};

mod compact_pacer;
mod maintenance;

use compact_pacer::CompactPacer;
pub use maintenance::SqliteStats;
use maintenance::{AutoVacuum, Pages, file_len, wal_path};

use super::hub::{Backlog, DEFAULT_WATCHER_BUFFER, WatchHub};
use super::memory::read_revision;
use super::{
    Error, Event, KeyValue, ListOptions, ListResult, Result, Revision, Storage, StorageStats,
    WatchStream,
};

/// The most writes committed in one transaction.
const MAX_BATCH: usize = 256;
/// The most revisions compacted per transaction (kine's `compactBatchSize`); fewer when a
/// batch takes longer than [`SqliteMaintenance::compact_batch_budget`].
const COMPACT_BATCH: Revision = 1000;
/// The fewest revisions compacted per transaction, however slow.
const COMPACT_BATCH_MIN: Revision = 10;
/// How long a connection waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// The queue of writes waiting for the writer thread.
const WRITE_QUEUE: usize = 4096;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kine (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    created INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    prev_revision INTEGER NOT NULL,
    lease INTEGER NOT NULL DEFAULT 0,
    value BLOB,
    old_value BLOB
);
CREATE INDEX IF NOT EXISTS kine_name_id_index ON kine (name, id);
CREATE UNIQUE INDEX IF NOT EXISTS kine_name_prev_revision_uindex ON kine (name, prev_revision);
CREATE TABLE IF NOT EXISTS kine_meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO kine_meta (key, value) VALUES ('compact_rev', 0);
";

/// The newest row of one name.
const LATEST_SQL: &str = "SELECT id, deleted, CASE WHEN created THEN id ELSE create_revision END, \
     value, old_value FROM kine WHERE name = ?1 ORDER BY id DESC LIMIT 1";
const INSERT_SQL: &str = "INSERT INTO kine (name, created, deleted, create_revision, \
     prev_revision, lease, value, old_value) VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?7)";
const COMPACT_REV_SQL: &str = "SELECT value FROM kine_meta WHERE key = 'compact_rev'";
/// Rows superseded by, or tombstones at, a revision in `(?1, ?2]` (kine's `CompactSQL`).
const COMPACT_SQL: &str = "DELETE FROM kine WHERE id IN (
    SELECT prev_revision FROM kine WHERE prev_revision != 0 AND id > ?1 AND id <= ?2
    UNION
    SELECT id FROM kine WHERE deleted != 0 AND id > ?1 AND id <= ?2)";
const SET_COMPACT_REV_SQL: &str = "UPDATE kine_meta SET value = ?1 WHERE key = 'compact_rev'";

/// Errors of the SQLite backend, carried inside [`Error::Backend`].
#[derive(Debug, thiserror::Error)]
pub enum SqliteError {
    /// Opening or preparing the database file failed.
    #[error("opening sqlite store {path}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// Creating the directory that holds the database file failed.
    #[error("creating directory {path}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A statement failed.
    #[error("sqlite {op} of {key:?} failed")]
    Query {
        /// The storage operation (`create`, `list`, ...).
        op: &'static str,
        /// The key or prefix it was about.
        key: String,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The transaction holding a write could not be committed, so the write did not happen.
    #[error("sqlite commit of {op} of {key:?} failed")]
    Commit {
        /// The storage operation.
        op: &'static str,
        /// The key written.
        key: String,
        /// What SQLite said (shared by every write of the batch).
        #[source]
        source: Arc<rusqlite::Error>,
    },
    /// A stored row breaks the log's invariants.
    #[error("corrupt row {id} of {key:?}: {reason}")]
    Corrupt {
        /// The row id (revision).
        id: Revision,
        /// Its key.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The writer thread is gone (the store is shutting down or it panicked).
    #[error("sqlite writer stopped before {op} of {key:?}")]
    WriterStopped {
        /// The storage operation.
        op: &'static str,
        /// The key or prefix it was about.
        key: String,
    },
    /// A compaction batch failed; the compaction stopped at the previous batch.
    #[error("sqlite compaction of revisions {from}..={to} failed")]
    Compact {
        /// The compacted revision before the batch.
        from: Revision,
        /// The revision the batch compacted to.
        to: Revision,
        /// What SQLite said (shared by every caller waiting for the compaction).
        #[source]
        source: Arc<rusqlite::Error>,
    },
    /// The writer thread could not be started.
    #[error("starting the sqlite writer thread")]
    Spawn {
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A blocking read task failed to run to completion.
    #[error("sqlite {op} of {key:?} did not complete")]
    Task {
        /// The storage operation.
        op: &'static str,
        /// The key or prefix it was about.
        key: String,
        /// Why the task stopped.
        #[source]
        source: tokio::task::JoinError,
    },
}

impl From<SqliteError> for Error {
    fn from(err: SqliteError) -> Self {
        Error::Backend(Box::new(err))
    }
}

fn query_err<'a>(op: &'static str, key: &'a str) -> impl FnOnce(rusqlite::Error) -> Error + 'a {
    move |source| {
        SqliteError::Query {
            op,
            key: key.to_string(),
            source,
        }
        .into()
    }
}

/// How often commits reach the disk (SQLite's `PRAGMA synchronous`, in WAL mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// fsync the WAL on every commit: acknowledged writes survive power loss.
    #[default]
    Full,
    /// fsync only at checkpoints: acknowledged writes survive a killed process, not an OS
    /// crash.
    Normal,
}

/// How a [`SqliteStorage`] is run.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Commit durability (default [`Synchronous::Full`]).
    pub synchronous: Synchronous,
    /// Automatic compaction keeps this many recent revisions besides the last interval's
    /// (kine's `compactMinRetain`, 1000; 0 here, as kube-apiserver compacting etcd).
    pub compact_retain: Revision,
    /// How often to compact automatically, each time to the revision current at the
    /// previous time; `None` disables it (kine and kube-apiserver: every 5 minutes).
    pub compact_interval: Option<Duration>,
    /// How many recent events stay in memory to serve watches without reading the database.
    pub watch_ring: usize,
    /// How many events a watcher may fall behind before it is cut off.
    pub watcher_buffer: usize,
    /// How many idle reader connections are kept open.
    pub max_idle_readers: usize,
    /// A list reads at most this many keys, and a watch backlog at most this many revisions,
    /// in one read transaction; a longer read goes on in a new one at the same revision. This
    /// bounds how long one reader keeps the WAL from being checkpointed.
    pub read_chunk: usize,
    /// WAL checkpoints, vacuuming and the pace of compaction.
    pub maintenance: SqliteMaintenance,
}

/// The store's upkeep (see the module doc's "Keeping the file bounded").
#[derive(Clone, Debug)]
pub struct SqliteMaintenance {
    /// How often the writer runs a TRUNCATE checkpoint whatever the WAL's size; `None` leaves
    /// it to the size trigger.
    pub checkpoint_interval: Option<Duration>,
    /// A checkpoint is also run after a commit that leaves the WAL at least this big.
    pub checkpoint_wal_bytes: u64,
    /// How long a checkpoint waits for readers still on the WAL before giving up until the
    /// next trigger (the writer, and so every write, waits with it).
    pub checkpoint_wait: Duration,
    /// After a compaction, free pages are given back to the file system once there are more
    /// than this many.
    pub vacuum_free_pages: u64,
    /// Free pages given back per step (one short transaction each, writes served between).
    pub vacuum_step_pages: u32,
    /// How long one compaction transaction should hold the write lock; batches shrink below
    /// kine's 1,000 revisions to stay within it.
    pub compact_batch_budget: Duration,
    /// An existing database without auto-vacuum is converted (rewritten by VACUUM) at open
    /// only when it is at most this big.
    pub convert_max_bytes: u64,
}

impl Default for SqliteMaintenance {
    fn default() -> Self {
        SqliteMaintenance {
            checkpoint_interval: Some(Duration::from_secs(60)),
            checkpoint_wal_bytes: 16 << 20,
            checkpoint_wait: Duration::from_millis(50),
            vacuum_free_pages: 2048,
            vacuum_step_pages: 256,
            compact_batch_budget: Duration::from_millis(25),
            convert_max_bytes: 256 << 20,
        }
    }
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            compact_retain: 0,
            compact_interval: Some(Duration::from_secs(5 * 60)),
            watch_ring: 1000,
            watcher_buffer: DEFAULT_WATCHER_BUFFER,
            max_idle_readers: 4,
            read_chunk: 500,
            maintenance: SqliteMaintenance::default(),
        }
    }
}

/// A revisioned key-value store in one SQLite file, laid out as kine's log.
pub struct SqliteStorage {
    /// The writer thread's queue; dropping it stops the thread.
    writes: mpsc::Sender<Command>,
    readers: Arc<ReaderPool>,
    shared: Arc<Shared>,
    /// Rows or revisions per read transaction ([`SqliteOptions::read_chunk`]), at least 1.
    read_chunk: usize,
    /// The automatic compaction and checkpoint tasks, stopped on drop.
    tasks: Vec<tokio::task::AbortHandle>,
}

/// State shared by the store, its writer thread and the reader tasks.
struct Shared {
    /// The revision of the latest committed write; advanced by the writer after each commit
    /// and before publishing, so every row up to it is visible to a new read transaction.
    revision: AtomicI64,
    /// The compacted revision as last committed by the writer (reads that must be exact
    /// re-read it inside their transaction). A watch channel so tests can await compaction.
    compacted: watch::Sender<Revision>,
    /// Live fan-out, published to only by the writer thread, in revision order.
    hub: WatchHub,
}

/// Idle reader connections.
struct ReaderPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    max_idle: usize,
}

enum Command {
    Write {
        write: Write,
        reply: oneshot::Sender<Result<Event>>,
    },
    Compact {
        target: CompactTarget,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Checkpoint now, vacuum if the free list is over its threshold; reply (if asked) once
    /// the writer has no compaction, vacuum or checkpoint left to do.
    Maintain { reply: Option<oneshot::Sender<()>> },
}

enum Write {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        expected: Revision,
        value: Bytes,
    },
    Delete {
        key: String,
        expected: Revision,
    },
}

impl Write {
    fn op(&self) -> &'static str {
        match self {
            Write::Create { .. } => "create",
            Write::Update { .. } => "update",
            Write::Delete { .. } => "delete",
        }
    }

    fn key(&self) -> &str {
        match self {
            Write::Create { key, .. } | Write::Update { key, .. } | Write::Delete { key, .. } => {
                key
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum CompactTarget {
    /// Compact to exactly this revision.
    Exact(Revision),
    /// Compact to the current revision minus this many (if that moves the point forward).
    Retain(Revision),
    /// Compact to `revision` (current one compaction interval ago), but keep at least
    /// `retain` revisions (the automatic compaction).
    Observed {
        /// The revision current at the previous tick.
        revision: Revision,
        /// Revisions always kept.
        retain: Revision,
    },
}

impl SqliteStorage {
    /// Opens (creating if needed) the store in the file at `path`, starts its writer thread
    /// and, if configured, its automatic compaction. Must be called within a tokio runtime.
    ///
    /// One open store per file: the revision counter and the watch fan-out live in this
    /// process, so a second writer on the same file would not be seen by this one's watchers.
    pub async fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let sync = options.synchronous;
        let open_path = path.clone();
        let convert_max = options.maintenance.convert_max_bytes;
        let (conn, revision, compacted) =
            tokio::task::spawn_blocking(move || open_writer(&open_path, sync, convert_max))
                .await
                .map_err(|source| SqliteError::Task {
                    op: "open",
                    key: path.display().to_string(),
                    source,
                })??;
        let shared = Arc::new(Shared {
            revision: AtomicI64::new(revision),
            compacted: watch::Sender::new(compacted),
            hub: WatchHub::new(revision, options.watch_ring, options.watcher_buffer),
        });
        let (writes, queue) = mpsc::channel(WRITE_QUEUE);
        let writer = Writer::new(
            conn,
            Arc::clone(&shared),
            &path,
            options.maintenance.clone(),
        );
        std::thread::Builder::new()
            .name("kcm-sqlite-writer".into())
            .spawn(move || writer.run(queue))
            .map_err(|source| SqliteError::Spawn { source })?;
        let mut tasks = Vec::new();
        if let Some(every) = options.compact_interval {
            let (writes, shared) = (writes.downgrade(), Arc::downgrade(&shared));
            let retain = options.compact_retain.max(0);
            tasks.push(
                tokio::spawn(compact_periodically(writes, shared, every, retain)).abort_handle(),
            );
        }
        if let Some(every) = options.maintenance.checkpoint_interval {
            tasks.push(
                tokio::spawn(checkpoint_periodically(writes.downgrade(), every)).abort_handle(),
            );
        }
        Ok(SqliteStorage {
            writes,
            readers: Arc::new(ReaderPool {
                path,
                idle: Mutex::new(Vec::new()),
                max_idle: options.max_idle_readers,
            }),
            shared,
            read_chunk: options.read_chunk.max(1),
            tasks,
        })
    }

    /// Runs the writer's upkeep now — a TRUNCATE checkpoint, and an incremental vacuum if the
    /// free list is over [`SqliteMaintenance::vacuum_free_pages`] — and returns once the
    /// writer has no compaction, vacuum or checkpoint left (writes go on being served
    /// between its steps). The periodic and size triggers do the same without waiting.
    pub async fn maintain(&self) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        let stopped = || SqliteError::WriterStopped {
            op: "maintain",
            key: String::new(),
        };
        self.writes
            .send(Command::Maintain { reply: Some(reply) })
            .await
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped().into())
    }

    /// The store's figures (file and WAL sizes, pages, rows, revisions), for soak tests and
    /// operators. Counts every key, so it is not for a hot path.
    pub async fn stats(&self) -> Result<SqliteStats> {
        let current = self.shared.revision.load(Ordering::Acquire);
        let path = self.readers.path.clone();
        let mut stats = self.read("stats", "", read_figures).await?;
        stats.current_revision = current;
        stats.db_file_bytes = file_len(&path);
        stats.wal_file_bytes = file_len(&wal_path(&path));
        Ok(stats)
    }

    /// The figures of the store in the database file `path`, which another process may be
    /// serving, read through a query-only connection of its own (blocking): for a harness
    /// that watches a server it runs as a child, as the soak's `--kill-every` does. The
    /// current revision is the newest row's, or the compacted revision when compaction
    /// removed every newer row (rows above it are never compacted away).
    pub fn stats_of_file(path: &Path) -> Result<SqliteStats> {
        let mut conn = open_reader(path).map_err(|source| SqliteError::Open {
            path: path.to_owned(),
            source,
        })?;
        let mut stats = read_figures(&mut conn)?;
        let newest: Revision = conn
            .query_row("SELECT COALESCE(MAX(id), 0) FROM kine", [], |r| r.get(0))
            .map_err(query_err("stats", ""))?;
        stats.current_revision = newest.max(stats.compacted_revision);
        stats.db_file_bytes = file_len(path);
        stats.wal_file_bytes = file_len(&wal_path(path));
        Ok(stats)
    }

    /// Compacts so that `retain` revisions of history remain (as the automatic compaction
    /// does); a no-op when that would not move the compaction point forward.
    pub async fn compact_keeping(&self, retain: Revision) -> Result<()> {
        self.send_compact(CompactTarget::Retain(retain.max(0)))
            .await
    }

    async fn send_compact(&self, target: CompactTarget) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        let stopped = || SqliteError::WriterStopped {
            op: "compact",
            key: String::new(),
        };
        self.writes
            .send(Command::Compact { target, reply })
            .await
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    async fn write(&self, write: Write) -> Result<Event> {
        let (reply, rx) = oneshot::channel();
        let op = write.op();
        let stopped = |write: &Write| SqliteError::WriterStopped {
            op,
            key: write.key().to_string(),
        };
        let sent = self.writes.send(Command::Write { write, reply }).await;
        if let Err(mpsc::error::SendError(Command::Write { write, .. })) = &sent {
            return Err(stopped(write).into());
        }
        match rx.await {
            Ok(outcome) => outcome,
            Err(_) => Err(SqliteError::WriterStopped {
                op,
                key: String::new(),
            }
            .into()),
        }
    }

    /// Runs `f` on a pooled reader connection off the runtime threads.
    async fn read<T: Send + 'static>(
        &self,
        op: &'static str,
        key: &str,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let pool = Arc::clone(&self.readers);
        let owned_key = key.to_string();
        tokio::task::spawn_blocking(move || {
            let mut conn = pool.take(op, &owned_key)?;
            let out = f(&mut conn);
            pool.give(conn);
            out
        })
        .await
        .map_err(|source| SqliteError::Task {
            op,
            key: key.to_string(),
            source,
        })?
    }
}

impl Drop for SqliteStorage {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Turns on SQLite's query planner stability guarantee: plans are made without looking at the
/// values bound to a statement. Without it, this build of SQLite (STAT4 enabled) marks a
/// cached statement to be compiled again whenever a parameter it might plan with is bound to
/// a new value — `latest_row`'s `name = ?1` was re-parsed and re-planned on every write (~4 %
/// of a pod create's CPU). The store's queries are written for one plan (name ranges on the
/// name index, the log by id), and there are no statistics tables for values to matter.
fn plan_without_bound_values(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(|_| ())
}

/// Opens the write connection, makes the file incremental-vacuum (see
/// [`maintenance::prepare_auto_vacuum`]), creates the schema and reads the current and
/// compacted revisions.
fn open_writer(
    path: &Path,
    sync: Synchronous,
    convert_max_bytes: u64,
) -> Result<(Connection, Revision, Revision)> {
    let open_err = |source| SqliteError::Open {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| SqliteError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let conn = Connection::open(path).map_err(open_err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
    plan_without_bound_values(&conn).map_err(open_err)?;
    // Before the journal mode and the schema: a new file's auto-vacuum mode is fixed when its
    // first table is created.
    match maintenance::prepare_auto_vacuum(&conn, convert_max_bytes).map_err(open_err)? {
        AutoVacuum::Incremental | AutoVacuum::Full => {}
        AutoVacuum::Converted => tracing::info!(
            path = %path.display(),
            "converted sqlite store to auto_vacuum=INCREMENTAL"
        ),
        AutoVacuum::LeftAsIs => tracing::warn!(
            path = %path.display(),
            max_bytes = convert_max_bytes,
            "sqlite store has no auto-vacuum and is too big to convert while opening: space \
             freed by compaction is reused but not returned; convert it offline with \
             `PRAGMA auto_vacuum=INCREMENTAL; VACUUM;`"
        ),
    }
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(open_err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(path = %path.display(), mode, "sqlite store is not in WAL mode");
    }
    let sync = match sync {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)
        .map_err(open_err)?;
    conn.execute_batch(SCHEMA).map_err(open_err)?;
    let revision: Revision = conn
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'kine'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(open_err)?
        .unwrap_or(0);
    let compacted: Revision = conn
        .query_row(COMPACT_REV_SQL, [], |r| r.get(0))
        .map_err(open_err)?;
    Ok((conn, revision, compacted))
}

/// A query-only connection to the database file `path`, as every reader uses.
fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    plan_without_bound_values(&conn)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

impl ReaderPool {
    fn take(&self, op: &'static str, key: &str) -> Result<Connection> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(conn) = idle {
            return Ok(conn);
        }
        open_reader(&self.path).map_err(query_err(op, key))
    }

    fn give(&self, conn: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }
}

/// The newest row of a key.
struct Latest {
    id: Revision,
    deleted: bool,
    create_revision: Revision,
    /// The row's value (a live row) or the deleted value (a tombstone).
    value: Option<Vec<u8>>,
}

fn latest_row(conn: &Connection, key: &str) -> rusqlite::Result<Option<Latest>> {
    conn.prepare_cached(LATEST_SQL)?
        .query_row([key], |r| {
            let deleted: bool = r.get(1)?;
            Ok(Latest {
                id: r.get(0)?,
                deleted,
                create_revision: r.get(2)?,
                value: if deleted { r.get(4)? } else { r.get(3)? },
            })
        })
        .optional()
}

/// The writer thread: the only connection that writes, and the only one that compacts,
/// vacuums and checkpoints.
///
/// Writes come first: between two steps of background work (one compaction batch, one
/// vacuum step or one checkpoint) the writer commits whatever writes are queued, so a write
/// waits behind at most one step however long the compaction is.
struct Writer {
    conn: Connection,
    shared: Arc<Shared>,
    /// The database's `-wal` file, measured after commits for the size trigger.
    wal: PathBuf,
    options: SqliteMaintenance,
    /// A command taken from the queue while draining a write batch, handled next.
    pending: Option<Command>,
    /// The compaction in progress, advanced one batch per step.
    compaction: Option<Compaction>,
    pacer: CompactPacer,
    /// Free pages are to be given back, one step at a time.
    vacuum: bool,
    /// A checkpoint is to run.
    checkpoint: bool,
    /// The WAL size from which the size trigger fires again: the threshold, or after a
    /// checkpoint that readers kept from completing, a threshold more than the WAL had then
    /// (so a long reader does not make every commit wait for a checkpoint).
    wal_trigger: u64,
    /// Callers of [`SqliteStorage::maintain`], answered when no background work is left.
    idle_waiters: Vec<oneshot::Sender<()>>,
    /// Every transaction the writer ran, in order, for tests to assert on.
    #[cfg(test)]
    log: Vec<Tx>,
}

/// A compaction in progress.
struct Compaction {
    /// The revision to compact to: the largest any waiter asked for.
    target: Revision,
    /// Callers with the revision each waits for; answered as the compaction passes it.
    waiters: Vec<(Revision, oneshot::Sender<Result<()>>)>,
}

/// One transaction of the writer, as recorded for tests.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tx {
    /// A batch of this many writes.
    Writes(usize),
    /// A compaction batch from one compacted revision to the next.
    Compact { from: Revision, to: Revision },
    /// An incremental vacuum step.
    Vacuum,
    /// A TRUNCATE checkpoint, and whether readers kept it from completing.
    Checkpoint { busy: bool },
}

impl Writer {
    fn new(conn: Connection, shared: Arc<Shared>, db: &Path, options: SqliteMaintenance) -> Self {
        Writer {
            conn,
            shared,
            wal: wal_path(db),
            pacer: CompactPacer::new(
                COMPACT_BATCH_MIN,
                COMPACT_BATCH,
                options.compact_batch_budget,
            ),
            wal_trigger: options.checkpoint_wal_bytes,
            options,
            pending: None,
            compaction: None,
            vacuum: false,
            checkpoint: false,
            idle_waiters: Vec::new(),
            #[cfg(test)]
            log: Vec::new(),
        }
    }

    fn run(mut self, mut queue: mpsc::Receiver<Command>) {
        while self.step(&mut queue, true) {}
    }

    fn has_background_work(&self) -> bool {
        self.compaction.is_some() || self.vacuum || self.checkpoint
    }

    /// Handles the next command (waiting for one only if `block` and nothing else is to be
    /// done), then runs one step of background work. Returns false once the store is gone.
    fn step(&mut self, queue: &mut mpsc::Receiver<Command>, block: bool) -> bool {
        let next = match self.pending.take() {
            Some(cmd) => Some(cmd),
            None if block && !self.has_background_work() => match queue.blocking_recv() {
                Some(cmd) => Some(cmd),
                None => return false,
            },
            None => match queue.try_recv() {
                Ok(cmd) => Some(cmd),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => return false,
            },
        };
        match next {
            Some(Command::Write { write, reply }) => {
                let mut batch = vec![(write, reply)];
                while batch.len() < MAX_BATCH {
                    match queue.try_recv() {
                        Ok(Command::Write { write, reply }) => batch.push((write, reply)),
                        Ok(other) => {
                            self.pending = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                self.commit_batch(batch);
                if file_len(&self.wal) >= self.wal_trigger {
                    self.checkpoint = true;
                }
            }
            Some(Command::Compact { target, reply }) => self.start_compaction(target, reply),
            Some(Command::Maintain { reply }) => {
                self.checkpoint = true;
                self.check_free_pages();
                self.idle_waiters.extend(reply);
            }
            None => {}
        }
        self.background_step();
        if !self.has_background_work() {
            for waiter in self.idle_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
        true
    }

    /// One step of background work: a compaction batch, else a vacuum step, else a
    /// checkpoint.
    fn background_step(&mut self) {
        if self.compaction.is_some() {
            self.compact_batch();
        } else if self.vacuum {
            self.vacuum_step();
        } else if self.checkpoint {
            self.checkpoint_now();
        }
    }

    /// Applies a batch of writes in one transaction, then publishes and acknowledges them.
    fn commit_batch(&mut self, batch: Vec<(Write, oneshot::Sender<Result<Event>>)>) {
        #[cfg(test)]
        self.log.push(Tx::Writes(batch.len()));
        let mut outcomes: Vec<Result<Event>> = Vec::with_capacity(batch.len());
        let commit = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .and_then(|tx| {
                outcomes.extend(batch.iter().map(|(write, _)| apply(&tx, write)));
                tx.commit()
            });
        if let Err(err) = commit {
            // Nothing of the batch happened: every write that had succeeded fails instead.
            let err = Arc::new(err);
            let mut applied = std::mem::take(&mut outcomes).into_iter();
            outcomes = batch
                .iter()
                .map(|(write, _)| match applied.next() {
                    Some(Err(refused)) => Err(refused),
                    _ => Err(SqliteError::Commit {
                        op: write.op(),
                        key: write.key().to_string(),
                        source: Arc::clone(&err),
                    }
                    .into()),
                })
                .collect();
        }
        if let Some(last) = outcomes.iter().rev().find_map(|o| o.as_ref().ok()) {
            self.shared
                .revision
                .store(last.revision(), Ordering::Release);
        }
        for outcome in outcomes.iter().flatten() {
            self.shared.hub.publish(outcome.clone());
        }
        for ((_, reply), outcome) in batch.into_iter().zip(outcomes) {
            let _ = reply.send(outcome);
        }
    }

    /// Resolves a compaction request and joins it to the compaction in progress (or starts
    /// one); answers at once if there is nothing to do.
    fn start_compaction(&mut self, target: CompactTarget, reply: oneshot::Sender<Result<()>>) {
        let current = self.shared.revision.load(Ordering::Acquire);
        let done = *self.shared.compacted.borrow();
        let target = match target {
            CompactTarget::Exact(rev) if rev > current => {
                let _ = reply.send(Err(Error::FutureRevision {
                    requested: rev,
                    current,
                }));
                return;
            }
            CompactTarget::Exact(rev) => rev,
            CompactTarget::Retain(retain) => current - retain,
            CompactTarget::Observed { revision, retain } => revision.min(current - retain),
        };
        if target <= done {
            let _ = reply.send(Ok(()));
            return;
        }
        let job = self.compaction.get_or_insert_with(|| Compaction {
            target,
            waiters: Vec::new(),
        });
        job.target = job.target.max(target);
        job.waiters.push((target, reply));
    }

    /// Compacts one batch of the compaction in progress, in its own transaction, sized by
    /// the pacer so it holds the write lock about [`SqliteMaintenance::compact_batch_budget`].
    fn compact_batch(&mut self) {
        let Some(mut job) = self.compaction.take() else {
            return;
        };
        let from = *self.shared.compacted.borrow();
        let to = from.saturating_add(self.pacer.next()).min(job.target);
        #[cfg(test)]
        self.log.push(Tx::Compact { from, to });
        let started = Instant::now();
        match compact_range(&mut self.conn, from, to) {
            Ok(deleted) => {
                let took = started.elapsed();
                self.pacer.record(to - from, took);
                tracing::debug!(
                    from,
                    to,
                    deleted,
                    took_us = took.as_micros() as u64,
                    "compacted sqlite store"
                );
                self.shared.compacted.send_replace(to);
                let (reached, waiting) = std::mem::take(&mut job.waiters)
                    .into_iter()
                    .partition::<Vec<_>, _>(|(rev, _)| *rev <= to);
                for (_, reply) in reached {
                    let _ = reply.send(Ok(()));
                }
                job.waiters = waiting;
                if to < job.target {
                    self.compaction = Some(job);
                } else {
                    self.check_free_pages();
                }
            }
            Err(err) => {
                let source = Arc::new(err);
                for (_, reply) in job.waiters {
                    let _ = reply.send(Err(SqliteError::Compact {
                        from,
                        to,
                        source: Arc::clone(&source),
                    }
                    .into()));
                }
            }
        }
    }

    /// Asks for vacuum steps if the free list is over its threshold.
    fn check_free_pages(&mut self) {
        let incremental = self
            .conn
            .query_row("PRAGMA auto_vacuum", [], |r| r.get::<_, i64>(0))
            .is_ok_and(|mode| mode == maintenance::AUTO_VACUUM_INCREMENTAL);
        if !incremental {
            return;
        }
        match Pages::read(&self.conn) {
            Ok(pages) => {
                if pages.freelist_count > self.options.vacuum_free_pages {
                    self.vacuum = true;
                }
            }
            Err(err) => tracing::warn!(error = %err, "reading sqlite free pages failed"),
        }
    }

    /// Gives back one step of free pages; when none are left, asks for a checkpoint so the
    /// database file itself shrinks. A step that frees nothing (a file left without auto-vacuum) ends the vacuum, so it can
    /// never spin.
    fn vacuum_step(&mut self) {
        #[cfg(test)]
        self.log.push(Tx::Vacuum);
        let started = Instant::now();
        let outcome = Pages::read(&self.conn).and_then(|before| {
            maintenance::incremental_vacuum(&self.conn, self.options.vacuum_step_pages)?;
            Ok((before, Pages::read(&self.conn)?))
        });
        if let Ok((before, after)) = &outcome {
            tracing::debug!(
                freed = before.freelist_count.saturating_sub(after.freelist_count),
                took_us = started.elapsed().as_micros() as u64,
                "sqlite incremental vacuum step"
            );
        }
        match outcome {
            Ok((_, after)) if after.freelist_count == 0 => {
                self.vacuum = false;
                self.checkpoint = true;
            }
            Ok((before, after)) if after.freelist_count < before.freelist_count => {}
            Ok((_, after)) => {
                tracing::debug!(
                    free_pages = after.freelist_count,
                    "sqlite incremental vacuum freed nothing: the file has no auto-vacuum"
                );
                self.vacuum = false;
            }
            Err(err) => {
                tracing::warn!(error = %err, "sqlite incremental vacuum failed");
                self.vacuum = false;
            }
        }
    }

    /// Runs a TRUNCATE checkpoint, waiting for readers at most
    /// [`SqliteMaintenance::checkpoint_wait`].
    fn checkpoint_now(&mut self) {
        self.checkpoint = false;
        let started = Instant::now();
        let outcome = maintenance::checkpoint_truncate(
            &self.conn,
            self.options.checkpoint_wait,
            BUSY_TIMEOUT,
        );
        #[cfg(test)]
        self.log.push(Tx::Checkpoint {
            busy: outcome.as_ref().map_or(true, |c| c.busy),
        });
        match outcome {
            Ok(c) if !c.busy => {
                self.wal_trigger = self.options.checkpoint_wal_bytes;
                tracing::debug!(
                    frames = c.checkpointed_frames,
                    took_us = started.elapsed().as_micros() as u64,
                    "checkpointed sqlite WAL"
                );
            }
            Ok(c) => {
                let wal = file_len(&self.wal);
                self.wal_trigger = wal.saturating_add(self.options.checkpoint_wal_bytes);
                tracing::debug!(
                    frames = c.log_frames,
                    checkpointed = c.checkpointed_frames,
                    wal_bytes = wal,
                    took_us = started.elapsed().as_micros() as u64,
                    "sqlite WAL checkpoint kept from completing by a reader"
                );
            }
            Err(err) => tracing::warn!(error = %err, "sqlite WAL checkpoint failed"),
        }
    }
}

/// Deletes, in one IMMEDIATE transaction, the rows compaction from `from` to `to` removes and
/// records `to` as the compacted revision; returns the rows deleted.
fn compact_range(conn: &mut Connection, from: Revision, to: Revision) -> rusqlite::Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let deleted = tx.prepare_cached(COMPACT_SQL)?.execute(params![from, to])?;
    tx.prepare_cached(SET_COMPACT_REV_SQL)?.execute([to])?;
    tx.commit()?;
    Ok(deleted)
}

/// Applies one write inside the batch transaction; returns its event.
fn apply(tx: &Transaction<'_>, write: &Write) -> Result<Event> {
    let op = write.op();
    let key = write.key();
    let err = |source| -> Error {
        SqliteError::Query {
            op,
            key: key.to_string(),
            source,
        }
        .into()
    };
    let latest = latest_row(tx, key).map_err(err)?;
    let name: Arc<str> = Arc::from(key);
    match write {
        Write::Create { value, .. } => {
            let prev_revision = match &latest {
                Some(l) if !l.deleted => return Err(Error::AlreadyExists { key: key.into() }),
                Some(l) => l.id,
                None => 0,
            };
            let id = insert(tx, key, true, false, 0, prev_revision, Some(value), None)
                .map_err(|e| write_err(e, op, key, || Error::AlreadyExists { key: key.into() }))?;
            Ok(Event::Put {
                kv: KeyValue {
                    key: name,
                    value: value.clone(),
                    create_revision: id,
                    mod_revision: id,
                },
                prev: None,
            })
        }
        Write::Update {
            expected, value, ..
        } => {
            let prev = guard(key, *expected, latest, &name)?;
            let id = insert(
                tx,
                key,
                false,
                false,
                prev.create_revision,
                prev.mod_revision,
                Some(value),
                Some(&prev.value),
            )
            .map_err(|e| write_err(e, op, key, || conflict_after_race(tx, key, *expected)))?;
            Ok(Event::Put {
                kv: KeyValue {
                    key: name,
                    value: value.clone(),
                    create_revision: prev.create_revision,
                    mod_revision: id,
                },
                prev: Some(prev),
            })
        }
        Write::Delete { expected, .. } => {
            let prev = guard(key, *expected, latest, &name)?;
            let id = insert(
                tx,
                key,
                false,
                true,
                prev.create_revision,
                prev.mod_revision,
                None,
                Some(&prev.value),
            )
            .map_err(|e| write_err(e, op, key, || conflict_after_race(tx, key, *expected)))?;
            Ok(Event::Delete { revision: id, prev })
        }
    }
}

/// Checks an update's or delete's precondition against the key's newest row.
fn guard(
    key: &str,
    expected: Revision,
    latest: Option<Latest>,
    name: &Arc<str>,
) -> Result<KeyValue> {
    let latest = match latest {
        Some(l) if !l.deleted => l,
        _ => return Err(Error::NotFound { key: key.into() }),
    };
    if latest.id != expected {
        return Err(Error::Conflict {
            key: key.into(),
            expected,
            actual: latest.id,
        });
    }
    Ok(KeyValue {
        key: Arc::clone(name),
        value: latest.value.map(Bytes::from).unwrap_or_default(),
        create_revision: latest.create_revision,
        mod_revision: latest.id,
    })
}

/// The error for a write the UNIQUE (name, prev_revision) index rejected, which can only
/// happen if another writer replaced the same version.
fn conflict_after_race(tx: &Transaction<'_>, key: &str, expected: Revision) -> Error {
    let actual = latest_row(tx, key)
        .ok()
        .flatten()
        .filter(|l| !l.deleted)
        .map_or(0, |l| l.id);
    Error::Conflict {
        key: key.into(),
        expected,
        actual,
    }
}

/// The store error for a failed insert: a UNIQUE (name, prev_revision) violation becomes the
/// error `on_unique` makes (another writer replaced the same version), anything else a
/// backend error naming the write.
fn write_err(
    err: rusqlite::Error,
    op: &'static str,
    key: &str,
    on_unique: impl FnOnce() -> Error,
) -> Error {
    match err.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => on_unique(),
        _ => query_err(op, key)(err),
    }
}

fn insert(
    tx: &Transaction<'_>,
    key: &str,
    created: bool,
    deleted: bool,
    create_revision: Revision,
    prev_revision: Revision,
    value: Option<&Bytes>,
    old_value: Option<&Bytes>,
) -> rusqlite::Result<Revision> {
    tx.prepare_cached(INSERT_SQL)?.execute(params![
        key,
        created,
        deleted,
        create_revision,
        prev_revision,
        value.map(|v| &v[..]),
        old_value.map(|v| &v[..]),
    ])?;
    Ok(tx.last_insert_rowid())
}

/// The smallest string greater than every string starting with `prefix` (`None` when no
/// such bound exists, e.g. for the empty prefix).
fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = (last as u32 + 1..=char::MAX as u32).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The SQL condition and parameters selecting names in a prefix range, optionally after a
/// key. `col` is the name column expression.
fn name_range(col: &str, prefix: &str, start_after: Option<&str>) -> (String, Vec<String>) {
    let mut sql = String::new();
    let mut args = Vec::new();
    match start_after {
        Some(after) if after >= prefix => {
            sql.push_str(&format!("{col} > ?"));
            args.push(after.to_string());
        }
        _ => {
            sql.push_str(&format!("{col} >= ?"));
            args.push(prefix.to_string());
        }
    }
    if let Some(end) = prefix_end(prefix) {
        sql.push_str(&format!(" AND {col} < ?"));
        args.push(end);
    }
    (sql, args)
}

/// Reads a row into the event it recorded.
fn row_event(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Event>> {
    let id: Revision = r.get(0)?;
    let name: String = r.get(1)?;
    let created: bool = r.get(2)?;
    let deleted: bool = r.get(3)?;
    let create_revision: Revision = r.get(4)?;
    let prev_revision: Revision = r.get(5)?;
    let value: Option<Vec<u8>> = r.get(6)?;
    let old_value: Option<Vec<u8>> = r.get(7)?;
    let key: Arc<str> = Arc::from(name);
    let create_revision = if created { id } else { create_revision };
    let prev = KeyValue {
        key: Arc::clone(&key),
        value: Bytes::from(old_value.unwrap_or_default()),
        create_revision,
        mod_revision: prev_revision,
    };
    let event = if deleted {
        Event::Delete { revision: id, prev }
    } else {
        let Some(value) = value else {
            return Ok(Err(SqliteError::Corrupt {
                id,
                key: key.to_string(),
                reason: "a live row has no value",
            }
            .into()));
        };
        Event::Put {
            prev: (!created).then_some(prev),
            kv: KeyValue {
                key: Arc::clone(&key),
                value: Bytes::from(value),
                create_revision,
                mod_revision: id,
            },
        }
    };
    Ok(Ok(event))
}

/// The compacted revision as recorded in the database (inside the caller's transaction).
/// [`maintenance::read_stats`] and the compacted revision; the file sizes and the current
/// revision are the caller's to fill in.
fn read_figures(conn: &mut Connection) -> Result<SqliteStats> {
    let tx = conn.transaction().map_err(query_err("stats", ""))?;
    let compacted = compacted_in(&tx).map_err(query_err("stats", ""))?;
    drop(tx);
    let mut stats = maintenance::read_stats(conn).map_err(query_err("stats", ""))?;
    stats.compacted_revision = compacted;
    Ok(stats)
}

fn compacted_in(tx: &Transaction<'_>) -> rusqlite::Result<Revision> {
    tx.prepare_cached(COMPACT_REV_SQL)?
        .query_row([], |r| r.get(0))
}

/// Lists in read transactions of at most `chunk` keys each, all at the revision the first
/// one resolved, so no reader holds one WAL snapshot for a whole large list. The pages join
/// into one consistent list: a key's newest row at or below that revision stays put until
/// compaction passes the revision, and each transaction re-checks that it has not
/// (compaction records its revision in the transaction that deletes the rows), failing with
/// [`Error::Compacted`] otherwise, as a list at a compacted revision does. `between` runs
/// between two transactions (a test seam; nothing in the store).
fn list_in_chunks(
    conn: &mut Connection,
    opts: &ListOptions,
    current: Revision,
    chunk: usize,
    between: &mut dyn FnMut(),
) -> Result<ListResult> {
    let prefix = opts.prefix.as_str();
    let limit = opts.limit.filter(|&l| l > 0);
    // One key past the limit tells whether there are more.
    let wanted = limit.map(|l| l.saturating_add(1));
    let chunk = chunk.max(1);
    let mut kvs: Vec<KeyValue> = Vec::new();
    let mut rev = None;
    loop {
        let tx = conn.transaction().map_err(query_err("list", prefix))?;
        let compacted = compacted_in(&tx).map_err(query_err("list", prefix))?;
        let at = match rev {
            None => read_revision(opts.revision, current, compacted)?,
            Some(at) if at < compacted => {
                return Err(Error::Compacted {
                    requested: at,
                    compacted,
                });
            }
            Some(at) => at,
        };
        rev = Some(at);
        let start_after = kvs
            .last()
            .map(|kv| kv.key.to_string())
            .or_else(|| opts.start_after.clone());
        let take = wanted.map_or(chunk, |w| w.saturating_sub(kvs.len()).min(chunk));
        let page = list_page(&tx, prefix, start_after.as_deref(), at, take)?;
        let last_chunk = page.len() < take || wanted.is_some_and(|w| kvs.len() + page.len() >= w);
        kvs.extend(page);
        if last_chunk {
            let more = limit.is_some_and(|l| kvs.len() > l);
            if let Some(l) = limit {
                kvs.truncate(l);
            }
            let remaining = match kvs.last() {
                Some(last) if more => count_after(&tx, prefix, &last.key, at)?,
                _ => 0,
            };
            return Ok(ListResult {
                kvs,
                revision: at,
                more,
                remaining,
            });
        }
        drop(tx);
        between();
    }
}

/// Up to `take` live keys under `prefix` after `start_after`, as of `rev`, in key order.
fn list_page(
    tx: &Transaction<'_>,
    prefix: &str,
    start_after: Option<&str>,
    rev: Revision,
    take: usize,
) -> Result<Vec<KeyValue>> {
    let (range, args) = name_range("mkv.name", prefix, start_after);
    let sql = format!(
        // The subquery yields each name's newest row at `rev` in name order (from the index),
        // so the outer query streams without a sort and stops at the limit.
        "SELECT kv.id, kv.name, CASE WHEN kv.created THEN kv.id ELSE kv.create_revision END, kv.value
         FROM (SELECT mkv.name AS name, MAX(mkv.id) AS id FROM kine AS mkv
               WHERE {range} AND mkv.id <= ? GROUP BY mkv.name ORDER BY mkv.name) AS maxkv
         JOIN kine AS kv ON kv.id = maxkv.id
         WHERE kv.deleted = 0
         ORDER BY maxkv.name ASC
         LIMIT ?"
    );
    let sql_limit = i64::try_from(take).unwrap_or(i64::MAX);
    let mut stmt = tx.prepare_cached(&sql).map_err(query_err("list", prefix))?;
    let mut params: Vec<&dyn rusqlite::ToSql> =
        args.iter().map(|a| a as &dyn rusqlite::ToSql).collect();
    params.push(&rev);
    params.push(&sql_limit);
    stmt.query_map(params.as_slice(), |r| {
        let value: Option<Vec<u8>> = r.get(3)?;
        Ok(KeyValue {
            mod_revision: r.get(0)?,
            key: Arc::from(r.get::<_, String>(1)?),
            create_revision: r.get(2)?,
            value: Bytes::from(value.unwrap_or_default()),
        })
    })
    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
    .map_err(query_err("list", prefix))
}

/// How many live keys under `prefix` sort after `after` as of `rev` (inside the list's
/// snapshot), for a cut list's `remainingItemCount`.
fn count_after(tx: &Transaction<'_>, prefix: &str, after: &str, rev: Revision) -> Result<u64> {
    let (range, args) = name_range("mkv.name", prefix, Some(after));
    let sql = format!(
        "SELECT COUNT(*)
         FROM (SELECT MAX(mkv.id) AS id FROM kine AS mkv
               WHERE {range} AND mkv.id <= ? GROUP BY mkv.name) AS maxkv
         JOIN kine AS kv ON kv.id = maxkv.id
         WHERE kv.deleted = 0"
    );
    let mut params: Vec<&dyn rusqlite::ToSql> =
        args.iter().map(|a| a as &dyn rusqlite::ToSql).collect();
    params.push(&rev);
    let count: i64 = tx
        .prepare_cached(&sql)
        .and_then(|mut stmt| stmt.query_row(params.as_slice(), |r| r.get(0)))
        .map_err(query_err("list", prefix))?;
    Ok(u64::try_from(count).unwrap_or_default())
}

/// The events under `prefix` in `(after, upto]`, read from the log in read transactions of
/// at most `chunk` revisions each (for the same reason, and with the same compaction check,
/// as [`list_in_chunks`]; `between` likewise).
fn events_in_chunks(
    conn: &mut Connection,
    prefix: &str,
    after: Revision,
    upto: Revision,
    chunk: usize,
    between: &mut dyn FnMut(),
) -> Result<Vec<Event>> {
    let chunk = Revision::try_from(chunk.max(1)).unwrap_or(Revision::MAX);
    let mut events = Vec::new();
    let mut from = after;
    loop {
        let tx = conn.transaction().map_err(query_err("watch", prefix))?;
        let compacted = compacted_in(&tx).map_err(query_err("watch", prefix))?;
        if after < compacted {
            return Err(Error::Compacted {
                requested: after,
                compacted,
            });
        }
        let to = from.saturating_add(chunk).min(upto);
        events.extend(events_between(&tx, prefix, from, to)?);
        if to >= upto {
            return Ok(events);
        }
        from = to;
        drop(tx);
        between();
    }
}

/// The events under `prefix` in `(after, upto]`, inside the caller's transaction.
fn events_between(
    tx: &Transaction<'_>,
    prefix: &str,
    after: Revision,
    upto: Revision,
) -> Result<Vec<Event>> {
    // `+name` keeps SQLite on the id range (the recent history) instead of the name index.
    let (range, args) = name_range("+name", prefix, None);
    let sql = format!(
        "SELECT id, name, created, deleted, create_revision, prev_revision, value, old_value
         FROM kine WHERE id > ? AND id <= ? AND {range} ORDER BY id ASC"
    );
    let mut stmt = tx
        .prepare_cached(&sql)
        .map_err(query_err("watch", prefix))?;
    let mut params: Vec<&dyn rusqlite::ToSql> = vec![&after, &upto];
    params.extend(args.iter().map(|a| a as &dyn rusqlite::ToSql));
    let rows = stmt
        .query_map(params.as_slice(), row_event)
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(query_err("watch", prefix))?;
    rows.into_iter().collect()
}

/// Compacts every `every` as kube-apiserver's `compact.go` does etcd: each tick compacts to
/// the revision that was current at the previous tick, so the last interval of history (at
/// least) stays for watches to resume and paginated lists to continue in, and a `continue`
/// token expires within two intervals; `retain` revisions are kept besides (kine's
/// `compactMinRetain`). Runs until the store is dropped.
async fn compact_periodically(
    writes: mpsc::WeakSender<Command>,
    shared: Weak<Shared>,
    every: Duration,
    retain: Revision,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    // Nothing is compacted at the first tick: it only observes.
    let mut observed = None;
    loop {
        ticker.tick().await;
        let (Some(writes), Some(shared)) = (writes.upgrade(), shared.upgrade()) else {
            return;
        };
        let now = shared.revision.load(Ordering::Acquire);
        drop(shared);
        if let Some(revision) = observed.replace(now) {
            let (reply, rx) = oneshot::channel();
            let target = CompactTarget::Observed { revision, retain };
            if writes
                .send(Command::Compact { target, reply })
                .await
                .is_err()
            {
                return;
            }
            drop(writes);
            match rx.await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!(error = %err, "automatic compaction failed"),
                Err(_) => return,
            }
        }
    }
}

/// Asks the writer for a checkpoint every `every` (see [`SqliteMaintenance`]), until the store
/// is dropped.
async fn checkpoint_periodically(writes: mpsc::WeakSender<Command>, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let Some(writes) = writes.upgrade() else {
            return;
        };
        if writes
            .send(Command::Maintain { reply: None })
            .await
            .is_err()
        {
            return;
        }
    }
}

#[async_trait]
impl Storage for SqliteStorage {
    fn backend(&self) -> &'static str {
        "SQLite"
    }

    async fn stats(&self) -> Result<Option<StorageStats>> {
        Ok(Some(StorageStats::from(&SqliteStorage::stats(self).await?)))
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.shared.revision.load(Ordering::Acquire))
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        Ok(*self.shared.compacted.borrow())
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let event = self
            .write(Write::Create {
                key: key.to_string(),
                value,
            })
            .await?;
        Ok(event.revision())
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let owned = key.to_string();
        self.read("get", key, move |conn| {
            let latest = latest_row(conn, &owned).map_err(query_err("get", &owned))?;
            Ok(latest.filter(|l| !l.deleted).map(|l| KeyValue {
                key: Arc::from(owned.as_str()),
                value: Bytes::from(l.value.unwrap_or_default()),
                create_revision: l.create_revision,
                mod_revision: l.id,
            }))
        })
        .await
    }

    async fn list(&self, opts: ListOptions) -> Result<ListResult> {
        // Read the current revision before the snapshot opens: every row up to it is committed.
        let current = self.shared.revision.load(Ordering::Acquire);
        let prefix = opts.prefix.clone();
        let chunk = self.read_chunk;
        self.read("list", &prefix, move |conn| {
            list_in_chunks(conn, &opts, current, chunk, &mut || {})
        })
        .await
    }

    async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision> {
        let event = self
            .write(Write::Update {
                key: key.to_string(),
                expected,
                value,
            })
            .await?;
        Ok(event.revision())
    }

    async fn delete(&self, key: &str, expected: Revision) -> Result<(Revision, KeyValue)> {
        match self
            .write(Write::Delete {
                key: key.to_string(),
                expected,
            })
            .await?
        {
            Event::Delete { revision, prev } => Ok((revision, prev)),
            other => Err(SqliteError::Corrupt {
                id: other.revision(),
                key: key.to_string(),
                reason: "a delete recorded something else",
            }
            .into()),
        }
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        let compacted = *self.shared.compacted.borrow();
        if after < compacted {
            return Err(Error::Compacted {
                requested: after,
                compacted,
            });
        }
        let (backlog, subscription) = self.shared.hub.subscribe(prefix, after);
        let backlog = match backlog {
            Backlog::Ready(events) => events,
            Backlog::Missing { upto } => {
                let owned = prefix.to_string();
                let chunk = self.read_chunk;
                self.read("watch", prefix, move |conn| {
                    events_in_chunks(conn, &owned, after, upto, chunk, &mut || {})
                })
                .await?
            }
        };
        Ok(subscription.into_stream(backlog))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.send_compact(CompactTarget::Exact(revision)).await
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::storage::conformance;

    #[test]
    fn a_cached_statement_is_not_compiled_again_for_each_new_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (conn, _, _) =
            open_writer(&dir.path().join("state.db"), Synchronous::Normal, 0).expect("open");
        for i in 0..20 {
            latest_row(&conn, &format!("/registry/core/pods/default/p{i}")).expect("read");
        }
        let statement = conn.prepare_cached(LATEST_SQL).expect("statement");
        assert_eq!(
            statement.get_status(rusqlite::StatementStatus::RePrepare),
            0,
            "latest_row's statement was re-prepared"
        );
        assert!(statement.get_status(rusqlite::StatementStatus::VmStep) > 0);
    }

    async fn open_temp(options: SqliteOptions) -> (tempfile::TempDir, SqliteStorage) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStorage::open(dir.path().join("state.db"), options)
            .await
            .expect("open");
        (dir, store)
    }

    conformance::suite!(async {
        let (dir, store) = open_temp(SqliteOptions {
            synchronous: Synchronous::Normal,
            ..SqliteOptions::default()
        })
        .await;
        (dir, Arc::new(store) as Arc<dyn Storage>)
    });

    /// The conformance suite again with no in-memory ring, so every watch backlog is read
    /// from the log table.
    mod without_ring {
        use super::*;

        conformance::suite!(async {
            let (dir, store) = open_temp(SqliteOptions {
                synchronous: Synchronous::Normal,
                watch_ring: 0,
                ..SqliteOptions::default()
            })
            .await;
            (dir, Arc::new(store) as Arc<dyn Storage>)
        });
    }

    #[test]
    fn prefix_end_is_the_least_upper_bound() {
        struct Case {
            name: &'static str,
            prefix: &'static str,
            want: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "empty",
                prefix: "",
                want: None,
            },
            Case {
                name: "slash",
                prefix: "/registry/pods/",
                want: Some("/registry/pods0"),
            },
            Case {
                name: "last char max",
                prefix: "a\u{10FFFF}",
                want: Some("b"),
            },
            Case {
                name: "only max",
                prefix: "\u{10FFFF}",
                want: None,
            },
            Case {
                name: "skips surrogates",
                prefix: "\u{D7FF}",
                want: Some("\u{E000}"),
            },
        ];
        for case in cases {
            assert_eq!(
                prefix_end(case.prefix).as_deref(),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reopen_keeps_data_and_revisions_keep_increasing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nested/state.db");
        let (r1, r2) = {
            let store = SqliteStorage::open(&path, SqliteOptions::default())
                .await
                .expect("open");
            let r1 = store
                .create("/a", Bytes::from_static(b"1"))
                .await
                .expect("create");
            let r2 = store
                .create("/b", Bytes::from_static(b"2"))
                .await
                .expect("create");
            let (_, _) = store.delete("/b", r2).await.expect("delete");
            store.compact(r2 + 1).await.expect("compact");
            (r1, r2)
        };
        let store = SqliteStorage::open(&path, SqliteOptions::default())
            .await
            .expect("reopen");
        assert_eq!(
            store.current_revision().await.expect("rev"),
            r2 + 1,
            "the tombstone's id is not reused"
        );
        assert_eq!(store.compacted_revision().await.expect("compacted"), r2 + 1);
        assert_eq!(
            store
                .get("/a")
                .await
                .expect("get")
                .map(|kv| kv.mod_revision),
            Some(r1)
        );
        let r3 = store
            .create("/b", Bytes::from_static(b"3"))
            .await
            .expect("create");
        assert_eq!(r3, r2 + 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compaction_deletes_superseded_rows_and_tombstones() {
        let (_dir, store) = open_temp(SqliteOptions::default()).await;
        let mut rev = store
            .create("/a", Bytes::from_static(b"0"))
            .await
            .expect("create");
        for i in 0..20 {
            rev = store
                .update("/a", rev, Bytes::from(format!("{i}")))
                .await
                .expect("update");
        }
        let b = store
            .create("/b", Bytes::from_static(b"b"))
            .await
            .expect("create");
        store.delete("/b", b).await.expect("delete");
        let rows = |store: &SqliteStorage| {
            let pool = Arc::clone(&store.readers);
            async move {
                tokio::task::spawn_blocking(move || {
                    let conn = pool.take("test", "").expect("conn");
                    conn.query_row("SELECT COUNT(*) FROM kine", [], |r| r.get::<_, i64>(0))
                        .expect("count")
                })
                .await
                .expect("join")
            }
        };
        assert_eq!(rows(&store).await, 23);
        store
            .compact(store.current_revision().await.expect("rev"))
            .await
            .expect("compact");
        assert_eq!(rows(&store).await, 1, "only /a's current row remains");
        assert_eq!(
            store.get("/a").await.expect("get").map(|kv| kv.value),
            Some(Bytes::from_static(b"19"))
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compact_keeping_retains_a_window() {
        let (_dir, store) = open_temp(SqliteOptions::default()).await;
        for i in 0..30 {
            store
                .create(&format!("/k/{i}"), Bytes::from_static(b"v"))
                .await
                .expect("create");
        }
        store.compact_keeping(10).await.expect("compact");
        assert_eq!(store.compacted_revision().await.expect("compacted"), 20);
        store.compact_keeping(100).await.expect("no-op compact");
        assert_eq!(store.compacted_revision().await.expect("compacted"), 20);
        let mut watch = store.watch("/k/", 20).await.expect("watch in window");
        assert_eq!(conformance::next_event(&mut watch).await.revision(), 21);
        assert!(matches!(
            store.watch("/k/", 19).await,
            Err(Error::Compacted { compacted: 20, .. })
        ));
    }

    // Real time: the compactor waits on the writer thread, and paused time would race ahead
    // while it does. The test awaits the compaction itself; the timeout only guards a hang.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn automatic_compaction_runs_on_its_interval() {
        let (_dir, store) = open_temp(SqliteOptions {
            compact_retain: 5,
            compact_interval: Some(Duration::from_millis(10)),
            synchronous: Synchronous::Normal,
            ..SqliteOptions::default()
        })
        .await;
        for i in 0..12 {
            store
                .create(&format!("/k/{i}"), Bytes::from_static(b"v"))
                .await
                .expect("create");
        }
        // The compactor may have run part-way during the writes; at its next tick it catches
        // up with the last write.
        let mut compacted = store.shared.compacted.subscribe();
        tokio::time::timeout(Duration::from_secs(20), compacted.wait_for(|&rev| rev == 7))
            .await
            .expect("compaction")
            .expect("store alive");
        assert_eq!(store.compacted_revision().await.expect("compacted"), 7);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn watch_backlog_older_than_the_ring_comes_from_the_log() {
        let (_dir, store) = open_temp(SqliteOptions {
            watch_ring: 3,
            synchronous: Synchronous::Normal,
            ..SqliteOptions::default()
        })
        .await;
        for i in 0..10 {
            store
                .create(&format!("/k/{i}"), Bytes::from(format!("{i}")))
                .await
                .expect("create");
        }
        assert_eq!(store.shared.hub.floor(), 7);
        let mut watch = store.watch("/k/", 2).await.expect("watch");
        let mut got = Vec::new();
        for _ in 0..8 {
            got.push(conformance::next_event(&mut watch).await.revision());
        }
        assert_eq!(got, (3..=10).collect::<Vec<_>>());
        let r = store
            .create("/k/x", Bytes::from_static(b"x"))
            .await
            .expect("create");
        assert_eq!(
            watch
                .next()
                .await
                .and_then(Result::ok)
                .map(|e| e.revision()),
            Some(r)
        );
    }

    /// A value big enough that a few hundred writes make a WAL of megabytes.
    fn big_value(i: usize) -> Bytes {
        Bytes::from(format!("{i:04}").repeat(1024))
    }

    /// Applies writes straight on a write connection, as the writer does, one transaction.
    fn write_all(conn: &mut Connection, writes: impl IntoIterator<Item = Write>) {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .expect("begin");
        for write in writes {
            apply(&tx, &write).expect("write");
        }
        tx.commit().expect("commit");
    }

    fn reader(path: &Path) -> Connection {
        let pool = ReaderPool {
            path: path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
            max_idle: 0,
        };
        pool.take("test", "").expect("reader")
    }

    #[test]
    fn a_long_list_lets_checkpoints_truncate_the_wal_between_its_chunks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        let (mut writer, _, _) = open_writer(&path, Synchronous::Normal, 0).expect("open");
        write_all(
            &mut writer,
            (0..25).map(|i| Write::Create {
                key: format!("/k/{i:02}"),
                value: Bytes::from(format!("{i}")),
            }),
        );
        let mut list_conn = reader(&path);
        let wal = wal_path(&path);
        let mut checkpoints = Vec::new();
        let mut next = 0;
        let listed = list_in_chunks(
            &mut list_conn,
            &ListOptions {
                prefix: "/k/".into(),
                ..ListOptions::default()
            },
            25,
            10,
            &mut || {
                // Many writes while the list is only part-way through.
                write_all(
                    &mut writer,
                    (next..next + 200).map(|i| Write::Create {
                        key: format!("/other/{i}"),
                        value: big_value(i),
                    }),
                );
                next += 200;
                let before = file_len(&wal);
                let done = maintenance::checkpoint_truncate(&writer, Duration::ZERO, BUSY_TIMEOUT)
                    .expect("checkpoint");
                checkpoints.push((before, done.busy, file_len(&wal)));
            },
        )
        .expect("list");
        assert_eq!(listed.revision, 25);
        assert_eq!(
            listed
                .kvs
                .iter()
                .map(|kv| kv.key.to_string())
                .collect::<Vec<_>>(),
            (0..25).map(|i| format!("/k/{i:02}")).collect::<Vec<_>>(),
            "the list is the state at its revision, whatever was written between its chunks"
        );
        assert_eq!(
            checkpoints.len(),
            2,
            "keys 0-9, 10-19 and 20-24 in three chunks"
        );
        for (before, busy, after) in checkpoints {
            assert!(before > 500_000, "the WAL had grown to {before} bytes");
            assert!(!busy, "the list held a snapshot between its chunks");
            assert_eq!(after, 0, "the WAL was not truncated");
        }
    }

    #[test]
    fn a_watch_backlog_is_read_in_chunks_of_revisions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        let (mut writer, _, _) = open_writer(&path, Synchronous::Normal, 0).expect("open");
        write_all(
            &mut writer,
            (0..25).map(|i| Write::Create {
                key: format!("/k/{i:02}"),
                value: Bytes::from(format!("{i}")),
            }),
        );
        let mut conn = reader(&path);
        let mut gaps = 0;
        let events =
            events_in_chunks(&mut conn, "/k/", 2, 25, 10, &mut || gaps += 1).expect("backlog");
        assert_eq!(
            events.iter().map(Event::revision).collect::<Vec<_>>(),
            (3..=25).collect::<Vec<_>>()
        );
        assert_eq!(
            gaps, 2,
            "revisions 3-12, 13-22 and 23-25 in three transactions"
        );
    }

    #[test]
    fn a_chunked_list_fails_rather_than_mixing_revisions_when_compaction_passes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        let (mut writer, _, _) = open_writer(&path, Synchronous::Normal, 0).expect("open");
        write_all(
            &mut writer,
            (0..4).map(|i| Write::Create {
                key: format!("/k/{i}"),
                value: Bytes::from_static(b"v"),
            }),
        );
        let mut conn = reader(&path);
        let err = list_in_chunks(
            &mut conn,
            &ListOptions {
                prefix: "/k/".into(),
                ..ListOptions::default()
            },
            4,
            2,
            &mut || {
                write_all(
                    &mut writer,
                    [Write::Update {
                        key: "/k/3".into(),
                        expected: 4,
                        value: Bytes::from_static(b"w"),
                    }],
                );
                compact_range(&mut writer, 0, 5).expect("compact");
            },
        )
        .expect_err("compacted under the list");
        assert!(
            matches!(
                err,
                Error::Compacted {
                    requested: 4,
                    compacted: 5
                }
            ),
            "{err:?}"
        );
    }

    fn test_writer(path: &Path, maintenance: SqliteMaintenance) -> Writer {
        let (conn, revision, compacted) = open_writer(path, Synchronous::Normal, 0).expect("open");
        let shared = Arc::new(Shared {
            revision: AtomicI64::new(revision),
            compacted: watch::Sender::new(compacted),
            hub: WatchHub::new(revision, 16, 16),
        });
        Writer::new(conn, shared, path, maintenance)
    }

    fn queue_create(queue: &mpsc::Sender<Command>, key: &str) {
        let (reply, _) = oneshot::channel();
        queue
            .try_send(Command::Write {
                write: Write::Create {
                    key: key.into(),
                    value: Bytes::from_static(b"v"),
                },
                reply,
            })
            .expect("queue");
    }

    /// Steps the writer (never blocking) until it has nothing queued and nothing to do.
    fn run_until_idle(writer: &mut Writer, queue: &mut mpsc::Receiver<Command>) {
        for _ in 0..10_000 {
            if queue.is_empty() && writer.pending.is_none() && !writer.has_background_work() {
                return;
            }
            assert!(writer.step(queue, false), "writer stopped");
        }
        panic!("the writer never went idle");
    }

    #[test]
    fn writes_queued_behind_a_compaction_wait_for_one_batch_at_most() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = test_writer(
            &dir.path().join("state.db"),
            SqliteMaintenance {
                checkpoint_wal_bytes: u64::MAX,
                ..SqliteMaintenance::default()
            },
        );
        // Batches of exactly ten revisions, however fast or slow.
        writer.pacer = CompactPacer::new(10, 10, Duration::MAX);
        let (tx, mut rx) = mpsc::channel(128);
        for i in 0..50 {
            queue_create(&tx, &format!("/k/{i}"));
        }
        run_until_idle(&mut writer, &mut rx);
        writer.log.clear();

        let (reply, mut compacted) = oneshot::channel();
        tx.try_send(Command::Compact {
            target: CompactTarget::Exact(50),
            reply,
        })
        .expect("queue");
        queue_create(&tx, "/a");
        queue_create(&tx, "/b");
        assert!(writer.step(&mut rx, false));
        assert!(writer.step(&mut rx, false));
        // A write that arrives while the compaction is part-way.
        queue_create(&tx, "/c");
        assert!(
            compacted.try_recv().is_err(),
            "answered before the compaction finished"
        );
        run_until_idle(&mut writer, &mut rx);
        assert_eq!(
            writer.log,
            vec![
                Tx::Compact { from: 0, to: 10 },
                Tx::Writes(2),
                Tx::Compact { from: 10, to: 20 },
                Tx::Writes(1),
                Tx::Compact { from: 20, to: 30 },
                Tx::Compact { from: 30, to: 40 },
                Tx::Compact { from: 40, to: 50 },
            ]
        );
        assert!(matches!(compacted.try_recv(), Ok(Ok(()))));
        assert_eq!(*writer.shared.compacted.borrow(), 50);
    }

    #[test]
    fn a_file_left_without_auto_vacuum_is_never_vacuumed_in_a_loop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        // An old file, made before auto-vacuum, too big (anything is, with a limit of 0) to
        // convert at open.
        Connection::open(&path)
            .and_then(|c| c.execute_batch("CREATE TABLE old (x)"))
            .expect("old file");
        let mut writer = test_writer(
            &path,
            SqliteMaintenance {
                checkpoint_wal_bytes: u64::MAX,
                vacuum_free_pages: 0,
                ..SqliteMaintenance::default()
            },
        );
        let (tx, mut rx) = mpsc::channel(512);
        for i in 0..100 {
            let (reply, _) = oneshot::channel();
            tx.try_send(Command::Write {
                write: Write::Create {
                    key: format!("/k/{i}"),
                    value: big_value(i),
                },
                reply,
            })
            .expect("queue");
        }
        run_until_idle(&mut writer, &mut rx);
        for i in 0..100_i64 {
            let (reply, _) = oneshot::channel();
            tx.try_send(Command::Write {
                write: Write::Delete {
                    key: format!("/k/{i}"),
                    expected: i + 1,
                },
                reply,
            })
            .expect("queue");
        }
        let (reply, _) = oneshot::channel();
        tx.try_send(Command::Compact {
            target: CompactTarget::Retain(0),
            reply,
        })
        .expect("queue");
        tx.try_send(Command::Maintain { reply: None })
            .expect("queue");
        run_until_idle(&mut writer, &mut rx);
        assert_eq!(*writer.shared.compacted.borrow(), 200);
        let pages = Pages::read(&writer.conn).expect("pages");
        assert!(
            pages.freelist_count > 0,
            "compaction freed pages: {pages:?}"
        );
        assert!(!writer.log.contains(&Tx::Vacuum), "{:?}", writer.log);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_is_truncated_once_a_long_reader_lets_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        let threshold = 256 << 10;
        let store = SqliteStorage::open(
            &path,
            SqliteOptions {
                synchronous: Synchronous::Normal,
                compact_interval: None,
                maintenance: SqliteMaintenance {
                    checkpoint_interval: None,
                    checkpoint_wal_bytes: threshold,
                    checkpoint_wait: Duration::ZERO,
                    ..SqliteMaintenance::default()
                },
                ..SqliteOptions::default()
            },
        )
        .await
        .expect("open");
        let write_many = |from: usize| {
            let store = &store;
            async move {
                for i in from..from + 300 {
                    store
                        .create(&format!("/k/{i}"), big_value(i))
                        .await
                        .expect("create");
                }
            }
        };
        // Without readers, a commit that takes the WAL past the threshold truncates it (the
        // writer acknowledges a write before it checks, so allow one write's frames).
        let bound = threshold + (64 << 10);
        write_many(0).await;
        let wal = store.stats().await.expect("stats").wal_file_bytes;
        assert!(wal < bound, "WAL of {wal} bytes without readers");

        // A reader holding one snapshot keeps every checkpoint from completing.
        let long_reader = Connection::open(&path).expect("reader");
        long_reader
            .execute_batch("BEGIN; SELECT COUNT(*) FROM kine;")
            .expect("snapshot");
        write_many(300).await;
        let wal = store.stats().await.expect("stats").wal_file_bytes;
        assert!(
            wal > 2 * threshold,
            "WAL of {wal} bytes under a long reader"
        );

        // Once it lets go, the next checkpoint empties the WAL.
        long_reader.execute_batch("COMMIT").expect("end snapshot");
        store.maintain().await.expect("maintain");
        assert_eq!(store.stats().await.expect("stats").wal_file_bytes, 0);
        write_many(600).await;
        let wal = store.stats().await.expect("stats").wal_file_bytes;
        assert!(wal < bound, "WAL of {wal} bytes after the reader went");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compaction_then_maintenance_gives_the_space_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStorage::open(
            dir.path().join("state.db"),
            SqliteOptions {
                synchronous: Synchronous::Normal,
                compact_interval: None,
                maintenance: SqliteMaintenance {
                    checkpoint_interval: None,
                    vacuum_free_pages: 16,
                    vacuum_step_pages: 32,
                    ..SqliteMaintenance::default()
                },
                ..SqliteOptions::default()
            },
        )
        .await
        .expect("open");
        let keep = store
            .create("/keep", Bytes::from_static(b"v"))
            .await
            .expect("create");
        let mut rev = keep;
        // Many revisions of one churning key, and keys created and deleted.
        for i in 0..200 {
            rev = store
                .create(&format!("/gone/{i}"), big_value(i))
                .await
                .expect("create");
            rev = store
                .delete(&format!("/gone/{i}"), rev)
                .await
                .expect("delete")
                .0;
        }
        let before = store.stats().await.expect("stats");
        let path = dir.path().join("state.db");
        // Another connection reads the same figures from the file.
        assert_eq!(
            SqliteStorage::stats_of_file(&path).expect("stats of the file"),
            before
        );
        assert_eq!(before.stored_rows, 401);
        assert_eq!(before.live_rows, 1);
        store.compact(rev).await.expect("compact");
        store.maintain().await.expect("maintain");
        let after = store.stats().await.expect("stats");
        assert_eq!(after.stored_rows, 1);
        assert_eq!(after.live_rows, 1);
        assert_eq!(after.compacted_revision, rev);
        assert_eq!(after.current_revision, rev);
        assert_eq!(after.freelist_count, 0, "free pages left: {after:?}");
        assert!(
            after.page_count * 10 < before.page_count,
            "pages before {} after {}",
            before.page_count,
            after.page_count
        );
        assert!(
            after.db_file_bytes * 10 < before.page_count * before.page_size,
            "file of {} bytes after checkpoint",
            after.db_file_bytes
        );
        assert_eq!(after.wal_file_bytes, 0);
        assert_eq!(
            SqliteStorage::stats_of_file(&path).expect("stats of the file"),
            after
        );
    }
}
