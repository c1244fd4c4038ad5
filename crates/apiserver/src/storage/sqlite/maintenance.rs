//! Keeping the SQLite file bounded: WAL checkpoints, incremental vacuum, and the store's figures.
//!
//! Everything here runs on the writer thread's connection (or, for [`SqliteStats`], a reader's)
//! and is a plain function of a [`Connection`], so tests drive it without the store.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

use super::super::Revision;

/// What one `PRAGMA wal_checkpoint(TRUNCATE)` did (SQLite's three result columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Checkpoint {
    /// A reader (or writer) kept the checkpoint from completing within the wait: the WAL was
    /// not reset and keeps its size.
    pub busy: bool,
    /// Frames in the WAL before the checkpoint.
    pub log_frames: i64,
    /// Frames copied into the database file.
    pub checkpointed_frames: i64,
}

/// Runs a TRUNCATE checkpoint: copies every WAL frame into the database file, then waits (at
/// most `wait`, through the busy handler) for readers still reading from the WAL to finish and
/// truncates the WAL to zero bytes. Returns with `busy` set instead of waiting longer, so the
/// writer thread — which nothing else can write through while this runs — is held at most
/// `wait` beyond the copy. The connection's busy timeout is `restore` afterwards.
pub(super) fn checkpoint_truncate(
    conn: &Connection,
    wait: Duration,
    restore: Duration,
) -> rusqlite::Result<Checkpoint> {
    conn.busy_timeout(wait)?;
    let outcome = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        Ok(Checkpoint {
            busy: r.get::<_, i64>(0)? != 0,
            log_frames: r.get(1)?,
            checkpointed_frames: r.get(2)?,
        })
    });
    conn.busy_timeout(restore)?;
    outcome
}

/// SQLite's `PRAGMA auto_vacuum` values.
const AUTO_VACUUM_NONE: i64 = 0;
pub(super) const AUTO_VACUUM_INCREMENTAL: i64 = 2;

/// How [`prepare_auto_vacuum`] left the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AutoVacuum {
    /// Already incremental (or a new database, made incremental before its first table).
    Incremental,
    /// An existing database without auto-vacuum, small enough that it was rewritten (VACUUM)
    /// into incremental mode at open.
    Converted,
    /// An existing database without auto-vacuum, too big to rewrite at open: freed pages are
    /// reused by later writes but never returned to the file system.
    LeftAsIs,
    /// `auto_vacuum=FULL`, set by someone else: SQLite already gives space back at every
    /// commit.
    Full,
}

/// Makes a new database incremental-vacuum (must run before the schema is created), and
/// converts an existing one without auto-vacuum when it is at most `convert_max_bytes`
/// (VACUUM rewrites the whole file, so only a small file is worth converting while the store
/// opens; a larger one is left as is and can be converted offline with
/// `sqlite3 state.db 'PRAGMA auto_vacuum=INCREMENTAL; VACUUM;'`).
pub(super) fn prepare_auto_vacuum(
    conn: &Connection,
    convert_max_bytes: u64,
) -> rusqlite::Result<AutoVacuum> {
    let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
    if mode == AUTO_VACUUM_INCREMENTAL {
        return Ok(AutoVacuum::Incremental);
    }
    if mode != AUTO_VACUUM_NONE {
        return Ok(AutoVacuum::Full);
    }
    let tables: i64 = conn.query_row("SELECT COUNT(*) FROM sqlite_schema", [], |r| r.get(0))?;
    let pages = Pages::read(conn)?;
    conn.pragma_update(None, "auto_vacuum", AUTO_VACUUM_INCREMENTAL)?;
    if pages.page_count == 0 {
        // A new file: the mode takes effect when the first table is created.
        return Ok(AutoVacuum::Incremental);
    }
    if tables > 0 && pages.bytes() > convert_max_bytes {
        return Ok(AutoVacuum::LeftAsIs);
    }
    // An existing file (or an empty one whose header is already written, e.g. by switching
    // it to WAL): only a VACUUM changes its mode.
    conn.execute_batch("VACUUM")?;
    let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
    Ok(match (mode == AUTO_VACUUM_INCREMENTAL, tables > 0) {
        (true, true) => AutoVacuum::Converted,
        (true, false) => AutoVacuum::Incremental,
        (false, _) => AutoVacuum::LeftAsIs,
    })
}

/// The database's page figures (`PRAGMA page_count`, `freelist_count`, `page_size`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Pages {
    /// Pages in the database (the file's size once the WAL is checkpointed).
    pub page_count: u64,
    /// Unused pages in the file, waiting for reuse or an incremental vacuum.
    pub freelist_count: u64,
    /// Bytes per page.
    pub page_size: u64,
}

impl Pages {
    pub(super) fn read(conn: &Connection) -> rusqlite::Result<Self> {
        let get = |pragma: &str| -> rusqlite::Result<u64> {
            let n: i64 = conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))?;
            Ok(u64::try_from(n).unwrap_or_default())
        };
        Ok(Pages {
            page_count: get("page_count")?,
            freelist_count: get("freelist_count")?,
            page_size: get("page_size")?,
        })
    }

    fn bytes(&self) -> u64 {
        self.page_count.saturating_mul(self.page_size)
    }
}

/// Returns up to `pages` free pages to the file system (`PRAGMA incremental_vacuum(N)`), in
/// one short transaction of its own; a no-op unless the database is in incremental mode.
pub(super) fn incremental_vacuum(conn: &Connection, pages: u32) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(&format!("PRAGMA incremental_vacuum({pages})"))?;
    let mut rows = stmt.query([])?;
    // Each step of the statement frees one page; run it to completion.
    while rows.next()?.is_some() {}
    Ok(())
}

/// The `-wal` file next to a database file.
pub(super) fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// The size of a file, 0 if it does not exist.
pub(super) fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The SQLite store's figures, for soak tests and operators (see
/// [`super::SqliteStorage::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SqliteStats {
    /// Size of the database file in bytes (kube-apiserver reports the etcd equivalent as
    /// `apiserver_storage_size_bytes`).
    pub db_file_bytes: u64,
    /// Size of the `-wal` file in bytes.
    pub wal_file_bytes: u64,
    /// Pages in the database, as SQLite sees it (including the WAL's newer pages).
    pub page_count: u64,
    /// Unused pages in the database.
    pub freelist_count: u64,
    /// Bytes per page.
    pub page_size: u64,
    /// Keys whose newest row is not a tombstone (the objects stored).
    pub live_rows: u64,
    /// Rows in the log: live rows plus history not yet compacted away.
    pub stored_rows: u64,
    /// Bytes of every row's value and previous value: the live data plus the retained
    /// revisions, which the file should not outgrow by much.
    pub stored_value_bytes: u64,
    /// The compacted revision.
    pub compacted_revision: Revision,
    /// The current revision.
    pub current_revision: Revision,
}

impl From<&SqliteStats> for super::super::StorageStats {
    fn from(s: &SqliteStats) -> Self {
        let pages_in_use = s.page_count.saturating_sub(s.freelist_count);
        Self {
            db_bytes: Some(s.db_file_bytes),
            wal_bytes: Some(s.wal_file_bytes),
            db_in_use_bytes: Some(pages_in_use.saturating_mul(s.page_size)),
            live_keys: Some(s.live_rows),
            stored_rows: Some(s.stored_rows),
            stored_value_bytes: Some(s.stored_value_bytes),
        }
    }
}

/// Reads the figures that need SQL (everything but the file sizes and revisions) in one read
/// transaction. Counting live rows walks the name index: fine for a soak harness, not for a
/// hot path.
pub(super) fn read_stats(conn: &mut Connection) -> rusqlite::Result<SqliteStats> {
    let tx = conn.transaction()?;
    let pages = Pages::read(&tx)?;
    let count = |sql: &str| -> rusqlite::Result<u64> {
        let n: i64 = tx.query_row(sql, [], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or_default())
    };
    let stored_rows = count("SELECT COUNT(*) FROM kine")?;
    let stored_value_bytes = count(
        "SELECT COALESCE(SUM(COALESCE(LENGTH(value), 0) + COALESCE(LENGTH(old_value), 0)), 0) \
         FROM kine",
    )?;
    let live_rows = count(
        "SELECT COUNT(*) FROM (SELECT MAX(id) AS id FROM kine GROUP BY name) AS m \
         JOIN kine AS k ON k.id = m.id WHERE k.deleted = 0",
    )?;
    Ok(SqliteStats {
        page_count: pages.page_count,
        freelist_count: pages.freelist_count,
        page_size: pages.page_size,
        live_rows,
        stored_rows,
        stored_value_bytes,
        ..SqliteStats::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &Path) -> Connection {
        let conn = Connection::open(path).expect("open");
        let _: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .expect("wal");
        conn
    }

    #[test]
    fn a_new_database_is_made_incremental_and_an_old_small_one_converted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fresh = open(&dir.path().join("new.db"));
        assert_eq!(
            prepare_auto_vacuum(&fresh, 0).expect("prepare"),
            AutoVacuum::Incremental
        );
        fresh.execute_batch("CREATE TABLE t (x)").expect("table");
        let mode: i64 = fresh
            .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
            .expect("mode");
        assert_eq!(mode, AUTO_VACUUM_INCREMENTAL);

        let make_old = |name: &str| {
            let conn = open(&dir.path().join(name));
            conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (randomblob(100000));")
                .expect("old");
            conn
        };
        let small = make_old("small.db");
        assert_eq!(
            prepare_auto_vacuum(&small, 1 << 30).expect("prepare"),
            AutoVacuum::Converted
        );
        let big = make_old("big.db");
        assert_eq!(
            prepare_auto_vacuum(&big, 4096).expect("prepare"),
            AutoVacuum::LeftAsIs
        );
    }

    #[test]
    fn wal_path_appends_the_suffix() {
        assert_eq!(
            wal_path(Path::new("/var/lib/kcm/state.db")),
            PathBuf::from("/var/lib/kcm/state.db-wal")
        );
    }
}
