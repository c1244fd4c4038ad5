//! A `kcm up` the soak runs as a child process in a temporary data dir, so that
//! `--kill-every` can `kill -9` it and start it again on the same data dir and port.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::ListParams;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::process::Process;

/// How long a (re)started child may take to answer.
const READY_WITHIN: Duration = Duration::from_secs(180);
/// How often readiness is polled.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// A running `kcm up` child and how to start it again.
pub struct ChildCluster {
    /// The `kcm` binary: this one.
    exe: PathBuf,
    /// `up --data-dir … --listen …` and the rest.
    args: Vec<String>,
    /// Removed when the child is dropped.
    dir: tempfile::TempDir,
    child: Child,
}

impl ChildCluster {
    /// Starts `kcm up <up_args>` with a fresh data dir on a free loopback port and waits until
    /// it answers; returns it with a client.
    pub async fn start(
        up_args: Vec<String>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<(Self, kube::Client)> {
        let exe = std::env::current_exe().context("finding the kcm binary")?;
        let dir = tempfile::Builder::new()
            .prefix("kcm-soak-")
            .tempdir()
            .context("creating a temporary data dir")?;
        // A port picked now and kept, so that clients reconnect to the restarted server.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("picking a free port")?
            .port();
        let mut args = vec![
            "up".to_owned(),
            format!("--data-dir={}", dir.path().display()),
            format!("--listen=127.0.0.1:{port}"),
        ];
        args.extend(up_args);
        let child = spawn(&exe, &args, dir.path())?;
        let mut cluster = Self {
            exe,
            args,
            dir,
            child,
        };
        let client = cluster.wait_ready(cancel).await?;
        Ok((cluster, client))
    }

    /// The child's `/proc` entry.
    pub fn process(&self) -> Option<Process> {
        self.child.id().map(Process::of)
    }

    /// Its SQLite database (absent on etcd).
    pub fn database(&self) -> PathBuf {
        self.dir.path().join("state.db")
    }

    /// `kill -9`s the child, starts it again on the same data dir and port, and waits until it
    /// answers; returns how long that took.
    pub async fn kill_and_restart(
        &mut self,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Duration> {
        let began = Instant::now();
        // SIGKILL: nothing is flushed or shut down.
        self.child.start_kill().context("killing kcm up")?;
        self.child.wait().await.context("reaping kcm up")?;
        self.child = spawn(&self.exe, &self.args, self.dir.path())?;
        self.wait_ready(cancel).await?;
        Ok(began.elapsed())
    }

    /// Polls until the child's kubeconfig exists and its API lists namespaces.
    async fn wait_ready(&mut self, cancel: &CancellationToken) -> anyhow::Result<kube::Client> {
        let deadline = Instant::now() + READY_WITHIN;
        let kubeconfig = self.dir.path().join("kubeconfig");
        let mut last_error = String::from("no kubeconfig written yet");
        loop {
            if let Some(status) = self.child.try_wait().context("watching kcm up")? {
                anyhow::bail!(
                    "kcm up exited ({status}); its log: {}",
                    self.log().display()
                );
            }
            if kubeconfig.is_file() {
                match answers(&kubeconfig).await {
                    Ok(client) => return Ok(client),
                    Err(err) => last_error = format!("{err:#}"),
                }
            }
            if Instant::now() >= deadline || cancel.is_cancelled() {
                anyhow::bail!(
                    "kcm up did not answer within {}s: {last_error}; its log: {}",
                    READY_WITHIN.as_secs(),
                    self.log().display()
                );
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("kcm-up.log")
    }
}

/// `kcm <args>` with its output appended to `dir/kcm-up.log`; killed if dropped.
fn spawn(exe: &Path, args: &[String], dir: &Path) -> anyhow::Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("kcm-up.log"))
        .context("opening the child's log")?;
    let err = log.try_clone().context("opening the child's log")?;
    Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {} {}", exe.display(), args.join(" ")))
}

/// A client from `kubeconfig` once the API it names lists namespaces.
async fn answers(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let client = super::client_from(kubeconfig).await?;
    Api::<Namespace>::all(client.clone())
        .list_metadata(&ListParams::default().limit(1))
        .await
        .context("listing namespaces")?;
    Ok(client)
}
