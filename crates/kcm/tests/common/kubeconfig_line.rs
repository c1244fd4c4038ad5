//! Waiting for a spawned `kcm up` or `kcm apiserver` to serve: both print `kubeconfig: PATH` on stdout once they do.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a server printed on stdout up to and including its `kubeconfig: PATH` line.
pub struct Banner {
    /// Every line printed, the kubeconfig line last.
    pub lines: Vec<String>,
    /// The path on the kubeconfig line.
    pub kubeconfig: PathBuf,
}

/// Reads `child`'s piped stdout on a thread until its `kubeconfig: PATH` line and returns the
/// lines so far; `None` when no such line came within `limit` (the process died or hangs).
/// The thread keeps draining stdout afterwards so the child never blocks on a full pipe.
pub fn wait_for_banner(child: &mut Child, limit: Duration) -> Option<Banner> {
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
    let mut lines = Vec::new();
    loop {
        let line = rx
            .recv_timeout(limit.saturating_sub(started.elapsed()))
            .ok()?;
        let kubeconfig = line.trim().strip_prefix("kubeconfig: ").map(PathBuf::from);
        lines.push(line);
        if let Some(kubeconfig) = kubeconfig {
            return Some(Banner { lines, kubeconfig });
        }
    }
}

/// As [`wait_for_banner`], only the kubeconfig path.
#[allow(dead_code)] // not every test binary that includes this file calls it
pub fn wait_for_kubeconfig(child: &mut Child, limit: Duration) -> Option<PathBuf> {
    wait_for_banner(child, limit).map(|b| b.kubeconfig)
}
