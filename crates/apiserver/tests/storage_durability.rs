//! Acknowledged writes to the SQLite store survive `kill -9` of the process that made them.
//!
//! The test re-executes its own binary as a writer (selected by an environment variable): the
//! child creates objects through [`SqliteStorage`] from several tasks at once (so writes are
//! group-committed) and prints each acknowledged revision. The parent SIGKILLs it mid-stream,
//! reopens the database and checks that every acknowledged write is there, then does it again
//! on the same file and checks that revisions keep increasing across restarts.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use bytes::Bytes;
use kcm_apiserver::storage::{SqliteOptions, SqliteStorage, Storage};

/// Selects the writer role and names the database file.
const WRITER_ENV: &str = "KCM_STORAGE_DURABILITY_WRITER";
/// The key prefix the writer uses (one per round).
const PREFIX_ENV: &str = "KCM_STORAGE_DURABILITY_PREFIX";
const TEST_NAME: &str = "acknowledged_writes_survive_sigkill";
/// Concurrent writer tasks in the child.
const WRITERS: usize = 4;
/// Acknowledgements the parent waits for before killing the child.
const KILL_AFTER: usize = 400;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The child: writes until killed, printing `ACK <key> <revision>` after each acknowledgement.
fn run_writer(db: &str, prefix: &str) -> ! {
    runtime().block_on(async {
        let store = Arc::new(
            SqliteStorage::open(db, SqliteOptions::default())
                .await
                .expect("open"),
        );
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| {
                let store = Arc::clone(&store);
                let prefix = prefix.to_string();
                tokio::spawn(async move {
                    for i in 0.. {
                        let key = format!("{prefix}{w}-{i}");
                        let rev = store
                            .create(&key, Bytes::from(format!("{{\"n\":{i}}}")))
                            .await
                            .expect("create");
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "ACK {key} {rev}").expect("stdout");
                        out.flush().expect("flush");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("writer task");
        }
    });
    unreachable!("writers never stop")
}

/// Starts a writer child on `db`, kills it after [`KILL_AFTER`] acknowledgements and returns
/// every acknowledgement it printed before dying.
fn write_then_kill(db: &Path, prefix: &str) -> Vec<(String, i64)> {
    let mut child = Command::new(std::env::current_exe().expect("current exe"))
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(WRITER_ENV, db)
        .env(PREFIX_ENV, prefix)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn writer");
    let stdout = child.stdout.take().expect("stdout");
    let mut acks = Vec::new();
    let mut killed = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read line");
        let Some(rest) = line.strip_prefix("ACK ") else {
            continue;
        };
        let (key, rev) = rest.split_once(' ').expect("ACK key rev");
        acks.push((key.to_string(), rev.parse::<i64>().expect("revision")));
        if acks.len() == KILL_AFTER && !killed {
            // SIGKILL: no destructors, no final flush, no checkpoint. Keep reading what the
            // child printed before it died: those writes were acknowledged too.
            child.kill().expect("kill writer");
            killed = true;
        }
    }
    let status = child.wait().expect("wait writer");
    assert!(
        killed,
        "the writer stopped on its own after {} writes: {status}",
        acks.len()
    );
    assert!(!status.success(), "the writer was killed");
    acks
}

/// Reopens the database and checks every acknowledged write; returns the current revision.
async fn verify(db: &Path, acks: &[(String, i64)]) -> i64 {
    let store = SqliteStorage::open(db, SqliteOptions::default())
        .await
        .expect("reopen");
    let current = store.current_revision().await.expect("current revision");
    for (key, rev) in acks {
        let kv = store
            .get(key)
            .await
            .expect("get")
            .unwrap_or_else(|| panic!("acknowledged write {key} at {rev} lost"));
        assert_eq!(kv.mod_revision, *rev, "{key}");
        assert!(
            current >= *rev,
            "current revision {current} below acknowledged {rev}"
        );
    }
    let mut revs: Vec<i64> = acks.iter().map(|(_, r)| *r).collect();
    revs.sort_unstable();
    revs.dedup();
    assert_eq!(
        revs.len(),
        acks.len(),
        "every acknowledgement has its own revision"
    );

    let next = store
        .create("/durability/after-restart", Bytes::from_static(b"{}"))
        .await;
    let next = match next {
        Ok(rev) => rev,
        // The second round finds the first round's marker: update it instead.
        Err(_) => {
            let kv = store
                .get("/durability/after-restart")
                .await
                .expect("get marker")
                .expect("marker");
            store
                .update(
                    "/durability/after-restart",
                    kv.mod_revision,
                    Bytes::from_static(b"{}"),
                )
                .await
                .expect("update marker")
        }
    };
    assert!(
        next > current,
        "a new write ({next}) after restart is above {current}"
    );
    next
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    if let Ok(db) = std::env::var(WRITER_ENV) {
        let prefix = std::env::var(PREFIX_ENV).unwrap_or_else(|_| "/durability/".into());
        run_writer(&db, &prefix);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("state.db");

    let first = write_then_kill(&db, "/durability/a/");
    assert!(first.len() >= KILL_AFTER);
    let after_first = runtime().block_on(verify(&db, &first));

    let second = write_then_kill(&db, "/durability/b/");
    let min_second = second.iter().map(|(_, r)| *r).min().expect("acks");
    assert!(
        min_second > after_first,
        "revisions keep increasing across restarts: {min_second} after {after_first}"
    );
    let all: Vec<_> = first.into_iter().chain(second).collect();
    runtime().block_on(verify(&db, &all));
}
