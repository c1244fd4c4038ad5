//! A `kcm up` process for the kubectl end-to-end tests: started on a free port, driven with the
//! installed `kubectl`, its log tail shown when an assertion fails, killed when dropped.
#![allow(dead_code)] // each test binary uses its own subset

#[path = "../common/kubeconfig_line.rs"]
mod kubeconfig_line;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kubeconfig_line::wait_for_kubeconfig;

const KCM: &str = env!("CARGO_BIN_EXE_kcm");
/// How long any single wait may take: generous, the machine is shared and the build is debug.
pub const DEADLINE: Duration = Duration::from_secs(90);

/// A running `kcm up`; killed when dropped, however the test ends.
pub struct Up {
    child: Child,
    /// The kubeconfig `kcm up` wrote (admin credentials).
    pub kubeconfig: PathBuf,
    log: PathBuf,
}

impl Up {
    /// Starts `kcm up --listen 127.0.0.1:0 --pod-ready-delay 200ms` plus `extra` in
    /// `data_dir`, logging at `KCM_LOG=log_filter` to `data_dir/up.log`, and returns once it
    /// printed its kubeconfig path.
    pub fn start(data_dir: &Path, extra: &[&str], log_filter: &str) -> Self {
        let log = data_dir.join("up.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        let mut child = Command::new(KCM)
            .args([
                "up",
                "--listen",
                "127.0.0.1:0",
                "--pod-ready-delay",
                "200ms",
            ])
            .args(extra)
            .arg("--data-dir")
            .arg(data_dir)
            .env("KCM_LOG", log_filter)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn kcm up");
        let kubeconfig = wait_for_kubeconfig(&mut child, DEADLINE);
        let mut up = Up {
            child,
            kubeconfig: PathBuf::new(),
            log,
        };
        match kubeconfig {
            Some(path) => {
                up.kubeconfig = path;
                up
            }
            None => panic!("kcm up printed no kubeconfig\n{}", up.logs()),
        }
    }

    /// The last 60 lines of the process's log, for failure messages.
    pub fn logs(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(60).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("--- kcm up log tail ---\n{}", tail.join("\n"))
    }

    /// Runs kubectl against the cluster: (success, stdout, stderr).
    pub fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--request-timeout", "20s"])
            .args(args)
            .output()
            .expect("run kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs kubectl and returns its stdout; panics with both outputs and the log on failure.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.kubectl(args);
        assert!(
            ok,
            "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {stderr}\n{}",
            self.logs()
        );
        stdout
    }

    /// Polls `f` every 200 ms until it yields a value; panics naming `what` after [`DEADLINE`].
    pub fn wait_for<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(value) = f() {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the `kubectl` these tests drive is installed.
pub fn kubectl_installed() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}
