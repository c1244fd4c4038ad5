//! Throwaway etcd servers on loopback ports, for tests: one member or a small cluster.
//!
//! Each member runs the `etcd` binary (Debian's `etcd-server` package; `.ci/run` installs it)
//! with its data in a fresh temporary directory that is removed, with the process, on drop.
//! When the binary is missing, [`EtcdCluster::start`] returns `None` after saying so on
//! stderr, so a developer without etcd can still run the rest of the tests; under CI
//! (`CI` set) a missing binary is a failure instead, so CI never silently skips.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary started (override with `KCM_ETCD_BINARY`).
const DEFAULT_BINARY: &str = "etcd";

/// How long a cluster may take to elect a leader and serve.
const START_PATIENCE: Duration = Duration::from_secs(30);

/// One etcd process.
struct Member {
    name: String,
    client_url: String,
    peer_url: String,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// A running etcd cluster; stopped and deleted on drop.
pub struct EtcdCluster {
    binary: String,
    root: PathBuf,
    members: Vec<Member>,
}

impl EtcdCluster {
    /// Starts a `size`-member cluster on free loopback ports and waits until it serves.
    /// `None` (with a message) when the etcd binary is not installed, outside CI.
    ///
    /// # Panics
    /// If etcd is installed but does not come up, or is missing under CI.
    pub async fn start(size: usize) -> Option<Self> {
        let binary = std::env::var("KCM_ETCD_BINARY").unwrap_or_else(|_| DEFAULT_BINARY.into());
        if Command::new(&binary)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            assert!(
                std::env::var_os("CI").is_none(),
                "the etcd binary ({binary}) is missing under CI: .ci/run installs etcd-server"
            );
            eprintln!(
                "skipping: the etcd binary ({binary}) is not installed (apt-get install etcd-server)"
            );
            return None;
        }
        let root = unique_dir();
        let members: Vec<Member> = (0..size.max(1))
            .map(|i| {
                let name = format!("m{i}");
                Member {
                    client_url: format!("http://127.0.0.1:{}", free_port()),
                    peer_url: format!("http://127.0.0.1:{}", free_port()),
                    data_dir: root.join(&name),
                    log: root.join(format!("{name}.log")),
                    name,
                    child: None,
                }
            })
            .collect();
        let mut cluster = EtcdCluster {
            binary,
            root,
            members,
        };
        for i in 0..cluster.members.len() {
            cluster.spawn(i, "new");
        }
        cluster.wait_ready().await;
        Some(cluster)
    }

    /// The client URLs of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// The client URL of member `i`.
    pub fn endpoint(&self, i: usize) -> &str {
        &self.members[i].client_url
    }

    /// Kills member `i` (as a crash would).
    pub fn stop(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Restarts a stopped member `i` on its old data and ports.
    pub fn restart(&mut self, i: usize) {
        if self.members[i].child.is_none() {
            self.spawn(i, "existing");
        }
    }

    /// Whether member `i`'s process is running; one that has exited is forgotten, so that
    /// [`restart`](Self::restart) starts it again.
    pub fn running(&mut self, i: usize) -> bool {
        let exited = match &mut self.members[i].child {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => return false,
        };
        if exited {
            self.members[i].child = None;
        }
        !exited
    }

    /// The last `bytes` of member `i`'s log (its stderr), for a failing test's message.
    pub fn log_tail(&self, i: usize, bytes: usize) -> String {
        let log = std::fs::read_to_string(&self.members[i].log).unwrap_or_default();
        let start = log.len().saturating_sub(bytes);
        let start = (start..log.len())
            .find(|&b| log.is_char_boundary(b))
            .unwrap_or(log.len());
        log[start..].to_owned()
    }

    /// Starts member `i`'s process.
    fn spawn(&mut self, i: usize, state: &str) {
        let initial_cluster = self
            .members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect::<Vec<_>>()
            .join(",");
        let m = &self.members[i];
        let log = std::fs::File::create(&m.log).expect("create the etcd log");
        let child = Command::new(&self.binary)
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&m.data_dir)
            .arg("--listen-client-urls")
            .arg(&m.client_url)
            .arg("--advertise-client-urls")
            .arg(&m.client_url)
            .arg("--listen-peer-urls")
            .arg(&m.peer_url)
            .arg("--initial-advertise-peer-urls")
            .arg(&m.peer_url)
            .arg("--initial-cluster")
            .arg(&initial_cluster)
            .arg("--initial-cluster-state")
            .arg(state)
            .arg("--initial-cluster-token")
            .arg(self.root.file_name().unwrap_or_default())
            // Faster elections than the defaults keep fault tests short.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[i].child = Some(child);
    }

    /// Waits until every running member answers a linearizable read.
    async fn wait_ready(&self) {
        let deadline = Instant::now() + START_PATIENCE;
        for m in self.members.iter().filter(|m| m.child.is_some()) {
            loop {
                if ready(&m.client_url).await {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "etcd member {} did not start; its log: {}",
                    m.name,
                    std::fs::read_to_string(&m.log).unwrap_or_default()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// The directory holding every member's data and log.
    pub fn dir(&self) -> &Path {
        &self.root
    }
}

/// True when `url` answers a linearizable read (so the cluster has a leader).
async fn ready(url: &str) -> bool {
    let connect = etcd_client::ConnectOptions::new().with_connect_timeout(Duration::from_secs(1));
    let attempt = async {
        let mut client = etcd_client::Client::connect([url], Some(connect))
            .await
            .ok()?;
        client.get("health", None).await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), attempt).await,
        Ok(Some(_))
    )
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.stop(i);
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A fresh directory under the system temp dir.
fn unique_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kcm-etcd-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).expect("create the etcd data dir");
    dir
}

/// A port that was free a moment ago (the OS picks it; etcd binds it right after).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("pick a free port")
}
