//! The one harness of the `kcm up` end-to-end tests: a `kcm up` process on a free port, on
//! SQLite or on a throwaway etcd, driven with the installed `kubectl`, its log tail shown when
//! an assertion fails, killed when dropped.
//!
//! Each scenario is a function taking a [`Backend`], called by a `_sqlite` test and an `_etcd`
//! test (issue 27: the same scenarios pass on `kcm up` and on `kcm up --etcd-servers`). The
//! etcd test is skipped, with a note, only when no `etcd` binary is installed (and fails
//! instead under CI, where `.ci/run` installs it).
#![allow(dead_code)] // each test binary uses its own subset

#[path = "../common/kubeconfig_line.rs"]
mod kubeconfig_line;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use kcm_apiserver::storage::etcd::throwaway::EtcdCluster;
use kubeconfig_line::wait_for_banner;

const KCM: &str = env!("CARGO_BIN_EXE_kcm");
/// How long any single wait may take: generous, the machine is shared and the build is debug.
pub const DEADLINE: Duration = Duration::from_secs(90);

/// Where a `kcm up` keeps the cluster's objects. Cloning shares the etcd, which lives until
/// the last clone (and every [`Up`] started on it) is gone, so a test can restart `kcm up` on
/// the same state.
#[derive(Clone)]
pub struct Backend {
    /// `None`: the SQLite file in the data dir (`kcm up`'s default).
    etcd: Option<Arc<EtcdCluster>>,
    /// The `--etcd-prefix`, unique per backend so that clusters never see each other's keys.
    prefix: String,
}

impl Backend {
    /// `kcm up`'s default store: `DATA_DIR/state.db`.
    pub fn sqlite() -> Self {
        Backend {
            etcd: None,
            prefix: String::new(),
        }
    }

    /// A fresh one-member etcd on loopback ports and a unique key prefix in it; `None`, after
    /// saying so on stderr, when the `etcd` binary is not installed (outside CI).
    pub fn etcd() -> Option<Self> {
        // The harness is synchronous and may be called from inside a tokio test, where a
        // nested runtime cannot block: start etcd on a thread with its own runtime.
        let etcd = std::thread::spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime to start etcd")
                .block_on(EtcdCluster::start(1))
        })
        .join()
        .expect("etcd start-up thread")?;
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let prefix = format!(
            "/kcm-e2e-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        Some(Backend {
            etcd: Some(Arc::new(etcd)),
            prefix,
        })
    }

    /// `sqlite` or `etcd`, for messages.
    pub fn name(&self) -> &'static str {
        if self.etcd.is_some() {
            "etcd"
        } else {
            "sqlite"
        }
    }

    /// The flags that put `kcm up`'s objects in this store.
    fn args(&self) -> Vec<String> {
        match &self.etcd {
            None => Vec::new(),
            Some(etcd) => vec![
                "--etcd-servers".to_owned(),
                etcd.endpoints().join(","),
                "--etcd-prefix".to_owned(),
                self.prefix.clone(),
            ],
        }
    }
}

/// A running `kcm up`; killed when dropped, however the test ends.
pub struct Up {
    child: Child,
    /// The kubeconfig `kcm up` wrote (admin credentials).
    pub kubeconfig: PathBuf,
    /// What `kcm up` printed on stdout before it served, its kubeconfig line last.
    pub banner: Vec<String>,
    log: PathBuf,
    /// Keeps the etcd up for as long as this process may use it (dropped after `child`).
    _backend: Backend,
}

impl Up {
    /// Starts `kcm up --listen 127.0.0.1:0 --pod-ready-delay 200ms` plus `extra` on `backend`
    /// in `data_dir`, logging at `KCM_LOG=log_filter` to `data_dir/up.log`, and returns once it
    /// printed its kubeconfig path.
    pub fn start(backend: &Backend, data_dir: &Path, extra: &[&str], log_filter: &str) -> Self {
        std::fs::create_dir_all(data_dir).expect("data dir");
        let log = data_dir.join("up.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        let started = Instant::now();
        let mut child = Command::new(KCM)
            .args([
                "up",
                "--listen",
                "127.0.0.1:0",
                "--pod-ready-delay",
                "200ms",
            ])
            .args(backend.args())
            .args(extra)
            .arg("--data-dir")
            .arg(data_dir)
            .env("KCM_LOG", log_filter)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn kcm up");
        let banner = wait_for_banner(&mut child, DEADLINE);
        let mut up = Up {
            child,
            kubeconfig: PathBuf::new(),
            banner: Vec::new(),
            log,
            _backend: backend.clone(),
        };
        match banner {
            Some(banner) => {
                eprintln!(
                    "kcm up on {} ready in {:?}",
                    backend.name(),
                    started.elapsed()
                );
                up.kubeconfig = banner.kubeconfig;
                up.banner = banner.lines;
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
        kubectl_with(&self.kubeconfig, args)
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

    /// `kubectl ARGS -o json`, parsed; `None` when kubectl fails (e.g. the object is absent).
    pub fn json(&self, args: &[&str]) -> Option<serde_json::Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let (ok, stdout, _) = self.kubectl(&all);
        ok.then(|| serde_json::from_str(&stdout).ok()).flatten()
    }

    /// Polls `f` every 200 ms until it yields a value; panics naming `what` after [`DEADLINE`].
    pub fn wait_for<T>(&self, what: &str, f: impl FnMut() -> Option<T>) -> T {
        self.wait_within(DEADLINE, what, f)
    }

    /// Polls `f` every 200 ms until it yields a value; panics naming `what` after `limit`.
    pub fn wait_within<T>(
        &self,
        limit: Duration,
        what: &str,
        mut f: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + limit;
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

    /// An admin client from the kubeconfig.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    }

    /// Sends SIGTERM and waits (up to 30 s) for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "kcm up did not stop within 30s of SIGTERM\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs kubectl with `kubeconfig` (and no `KUBECONFIG` from the environment): (success,
/// stdout, stderr).
pub fn kubectl_with(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--request-timeout", "20s"])
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether the `kubectl` these tests drive is installed (says so on stderr when not).
pub fn kubectl_installed() -> bool {
    let installed = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("skipping: kubectl is not installed");
    }
    installed
}

/// The store for an `_etcd` test, or `None` (the test returns early, skipped with a note).
pub fn etcd_or_skip() -> Option<Backend> {
    kubectl_installed().then(Backend::etcd).flatten()
}

/// Declares the two tests of a scenario `fn(&Backend)`: `$sqlite` on `kcm up`'s SQLite file,
/// `$etcd` on a throwaway etcd, each skipped (with a note) when what it needs is missing.
#[allow(unused_macros)] // the async scenarios write their two tests by hand
macro_rules! on_each_backend {
    ($scenario:ident: $sqlite:ident, $etcd:ident) => {
        #[test]
        fn $sqlite() {
            if $crate::kcm_up::kubectl_installed() {
                $scenario(&$crate::kcm_up::Backend::sqlite());
            }
        }

        #[test]
        fn $etcd() {
            if let Some(etcd) = $crate::kcm_up::etcd_or_skip() {
                $scenario(&etcd);
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_each_backend;
