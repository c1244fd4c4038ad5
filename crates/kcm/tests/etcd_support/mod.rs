//! Shared by the etcd tests: `kcm apiserver` processes on a throwaway etcd.

#![allow(dead_code)]

#[path = "../common/kubeconfig_line.rs"]
mod kubeconfig_line;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kubeconfig_line::wait_for_kubeconfig;

use k8s_openapi::api::core::v1::ConfigMap;
use kcm_apiserver::storage::etcd::throwaway::EtcdCluster;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

pub const KCM: &str = env!("CARGO_BIN_EXE_kcm");
/// The bound on any one wait (a hang guard; the shared machine builds in debug).
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A `kcm apiserver` process, killed on drop.
pub struct Apiserver {
    child: Child,
    pub kubeconfig: PathBuf,
    log: PathBuf,
}

impl Apiserver {
    /// Starts `kcm apiserver` on a free port with its identity in `dir` and objects in etcd.
    pub fn start(dir: &Path, etcd: &[String]) -> Self {
        Self::start_on(dir, etcd, "127.0.0.1:0")
    }

    /// As [`Apiserver::start`], listening on `listen` (a restart reuses its port).
    pub fn start_on(dir: &Path, etcd: &[String], listen: &str) -> Self {
        std::fs::create_dir_all(dir).expect("data dir");
        let log = dir.join("apiserver.log");
        let mut child = Command::new(KCM)
            .args(["apiserver", "--listen", listen, "--data-dir"])
            .arg(dir)
            .arg("--etcd-servers")
            .arg(etcd.join(","))
            .env("KCM_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn kcm apiserver");
        let kubeconfig = wait_for_kubeconfig(&mut child, DEADLINE);
        let mut server = Apiserver {
            child,
            kubeconfig: PathBuf::new(),
            log,
        };
        match kubeconfig {
            Some(path) => {
                server.kubeconfig = path;
                server
            }
            None => panic!("kcm apiserver printed no kubeconfig\n{}", server.logs()),
        }
    }

    /// The server's log so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An admin client from the server's kubeconfig.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig");
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("config");
        kube::Client::try_from(config).expect("client")
    }
}

impl Drop for Apiserver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One etcd and two API servers on it; `None` when etcd is not installed.
pub async fn two_servers() -> Option<(EtcdCluster, tempfile::TempDir, Apiserver, Apiserver)> {
    let etcd = EtcdCluster::start(1).await?;
    let dir = tempfile::tempdir().expect("tempdir");
    let a = Apiserver::start(&dir.path().join("a"), &etcd.endpoints());
    let b = Apiserver::start(&dir.path().join("b"), &etcd.endpoints());
    Some((etcd, dir, a, b))
}

/// The port in a server's kubeconfig.
pub fn port_of(server: &Apiserver) -> u16 {
    let text = std::fs::read_to_string(&server.kubeconfig).expect("kubeconfig");
    text.lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .and_then(|url| url.rsplit(':').next())
        .and_then(|p| p.trim().parse().ok())
        .expect("server port")
}

/// A ConfigMap `default/NAME` with `data.v = value`.
pub fn config_map(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "data": {"v": value},
    }))
    .expect("config map")
}

/// An object's resourceVersion as a number (etcd's mod_revision).
pub fn rv(cm: &ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("numeric resourceVersion")
}
