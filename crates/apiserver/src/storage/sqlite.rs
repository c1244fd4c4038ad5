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

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use rusqlite::{
    Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params,
};
use tokio::sync::{mpsc, oneshot, watch};

use super::hub::{Backlog, DEFAULT_WATCHER_BUFFER, WatchHub};
use super::memory::read_revision;
use super::{
    Error, Event, KeyValue, ListOptions, ListResult, Result, Revision, Storage, WatchStream,
};

/// The most writes committed in one transaction.
const MAX_BATCH: usize = 256;
/// Revisions compacted per transaction, so compaction never holds the write lock for long
/// (kine's `compactBatchSize`).
const COMPACT_BATCH: Revision = 1000;
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
        }
    }
}

/// A revisioned key-value store in one SQLite file, laid out as kine's log.
pub struct SqliteStorage {
    /// The writer thread's queue; dropping it stops the thread.
    writes: mpsc::Sender<Command>,
    readers: Arc<ReaderPool>,
    shared: Arc<Shared>,
    /// The automatic compaction task, stopped on drop.
    compactor: Option<tokio::task::AbortHandle>,
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
        let (conn, revision, compacted) =
            tokio::task::spawn_blocking(move || open_writer(&open_path, sync))
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
        let writer = Writer {
            conn,
            shared: Arc::clone(&shared),
        };
        std::thread::Builder::new()
            .name("kcm-sqlite-writer".into())
            .spawn(move || writer.run(queue))
            .map_err(|source| SqliteError::Spawn { source })?;
        let compactor = options.compact_interval.map(|every| {
            let (writes, shared) = (writes.downgrade(), Arc::downgrade(&shared));
            let retain = options.compact_retain.max(0);
            tokio::spawn(compact_periodically(writes, shared, every, retain)).abort_handle()
        });
        Ok(SqliteStorage {
            writes,
            readers: Arc::new(ReaderPool {
                path,
                idle: Mutex::new(Vec::new()),
                max_idle: options.max_idle_readers,
            }),
            shared,
            compactor,
        })
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
        if let Some(task) = &self.compactor {
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

/// Opens the write connection, creates the schema and reads the current and compacted
/// revisions.
fn open_writer(path: &Path, sync: Synchronous) -> Result<(Connection, Revision, Revision)> {
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

impl ReaderPool {
    fn take(&self, op: &'static str, key: &str) -> Result<Connection> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(conn) = idle {
            return Ok(conn);
        }
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(query_err(op, key))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(query_err(op, key))?;
        plan_without_bound_values(&conn).map_err(query_err(op, key))?;
        conn.pragma_update(None, "query_only", true)
            .map_err(query_err(op, key))?;
        Ok(conn)
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

/// The writer thread: the only connection that writes.
struct Writer {
    conn: Connection,
    shared: Arc<Shared>,
}

impl Writer {
    fn run(mut self, mut queue: mpsc::Receiver<Command>) {
        let mut pending = None;
        loop {
            let first = match pending.take() {
                Some(cmd) => cmd,
                None => match queue.blocking_recv() {
                    Some(cmd) => cmd,
                    None => return,
                },
            };
            match first {
                Command::Compact { target, reply } => {
                    let _ = reply.send(self.compact(target));
                }
                Command::Write { write, reply } => {
                    let mut batch = vec![(write, reply)];
                    while batch.len() < MAX_BATCH {
                        match queue.try_recv() {
                            Ok(Command::Write { write, reply }) => batch.push((write, reply)),
                            Ok(other) => {
                                pending = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.commit_batch(batch);
                }
            }
        }
    }

    /// Applies a batch of writes in one transaction, then publishes and acknowledges them.
    fn commit_batch(&mut self, batch: Vec<(Write, oneshot::Sender<Result<Event>>)>) {
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

    /// Compacts in batches of [`COMPACT_BATCH`] revisions, each its own transaction.
    fn compact(&mut self, target: CompactTarget) -> Result<()> {
        let current = self.shared.revision.load(Ordering::Acquire);
        let mut done = *self.shared.compacted.borrow();
        let target = match target {
            CompactTarget::Exact(rev) if rev > current => {
                return Err(Error::FutureRevision {
                    requested: rev,
                    current,
                });
            }
            CompactTarget::Exact(rev) => rev,
            CompactTarget::Retain(retain) => current - retain,
            CompactTarget::Observed { revision, retain } => revision.min(current - retain),
        };
        while done < target {
            let upto = (done + COMPACT_BATCH).min(target);
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(query_err("compact", ""))?;
            let deleted = tx
                .prepare_cached(COMPACT_SQL)
                .and_then(|mut s| s.execute(params![done, upto]))
                .map_err(query_err("compact", ""))?;
            tx.prepare_cached(SET_COMPACT_REV_SQL)
                .and_then(|mut s| s.execute([upto]))
                .map_err(query_err("compact", ""))?;
            tx.commit().map_err(query_err("compact", ""))?;
            tracing::debug!(from = done, to = upto, deleted, "compacted sqlite store");
            done = upto;
            self.shared.compacted.send_replace(done);
        }
        Ok(())
    }
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
fn compacted_in(tx: &Transaction<'_>) -> rusqlite::Result<Revision> {
    tx.prepare_cached(COMPACT_REV_SQL)?
        .query_row([], |r| r.get(0))
}

fn list_in_snapshot(
    conn: &mut Connection,
    opts: &ListOptions,
    current: Revision,
) -> Result<ListResult> {
    let tx = conn
        .transaction()
        .map_err(query_err("list", &opts.prefix))?;
    let compacted = compacted_in(&tx).map_err(query_err("list", &opts.prefix))?;
    let rev = read_revision(opts.revision, current, compacted)?;
    let (range, args) = name_range("mkv.name", &opts.prefix, opts.start_after.as_deref());
    let limit = opts.limit.filter(|&l| l > 0);
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
    let sql_limit = limit.map_or(-1, |l| {
        i64::try_from(l).unwrap_or(i64::MAX - 1).saturating_add(1)
    });
    let mut stmt = tx
        .prepare_cached(&sql)
        .map_err(query_err("list", &opts.prefix))?;
    let mut params: Vec<&dyn rusqlite::ToSql> =
        args.iter().map(|a| a as &dyn rusqlite::ToSql).collect();
    params.push(&rev);
    params.push(&sql_limit);
    let mut kvs = stmt
        .query_map(params.as_slice(), |r| {
            let value: Option<Vec<u8>> = r.get(3)?;
            Ok(KeyValue {
                mod_revision: r.get(0)?,
                key: Arc::from(r.get::<_, String>(1)?),
                create_revision: r.get(2)?,
                value: Bytes::from(value.unwrap_or_default()),
            })
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(query_err("list", &opts.prefix))?;
    let more = limit.is_some_and(|l| kvs.len() > l);
    if let Some(l) = limit {
        kvs.truncate(l);
    }
    let remaining = match kvs.last() {
        Some(last) if more => count_after(&tx, &opts.prefix, &last.key, rev)?,
        _ => 0,
    };
    Ok(ListResult {
        kvs,
        revision: rev,
        more,
        remaining,
    })
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

/// The events under `prefix` in `(after, upto]`, read from the log in one snapshot.
fn events_in_snapshot(
    conn: &mut Connection,
    prefix: &str,
    after: Revision,
    upto: Revision,
) -> Result<Vec<Event>> {
    let tx = conn.transaction().map_err(query_err("watch", prefix))?;
    let compacted = compacted_in(&tx).map_err(query_err("watch", prefix))?;
    if after < compacted {
        return Err(Error::Compacted {
            requested: after,
            compacted,
        });
    }
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

#[async_trait]
impl Storage for SqliteStorage {
    fn backend(&self) -> &'static str {
        "SQLite"
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
        self.read("list", &prefix, move |conn| {
            list_in_snapshot(conn, &opts, current)
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
                self.read("watch", prefix, move |conn| {
                    events_in_snapshot(conn, &owned, after, upto)
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
            open_writer(&dir.path().join("state.db"), Synchronous::Normal).expect("open");
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
}
