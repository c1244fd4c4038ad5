//! Waiting for a spawned `kcm up` or `kcm apiserver` to serve: both print `kubeconfig: PATH` on stdout once they do.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Reads `child`'s piped stdout on a thread until its `kubeconfig: PATH` line and returns the
/// path; `None` when no such line came within `limit` (the process died or hangs). The
/// thread keeps draining stdout afterwards so the child never blocks on a full pipe.
pub fn wait_for_kubeconfig(child: &mut Child, limit: Duration) -> Option<PathBuf> {
    let stdout = child.stdout.take()?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let started = Instant::now();
    loop {
        let line = rx
            .recv_timeout(limit.saturating_sub(started.elapsed()))
            .ok()?;
        if let Some(path) = line.trim().strip_prefix("kubeconfig: ") {
            return Some(PathBuf::from(path));
        }
    }
}
