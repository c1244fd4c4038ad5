//! Test support for every crate: an in-process API server on `127.0.0.1:0` with a real HTTPS endpoint and a `kube` client.
//!
//! ```no_run
//! # async fn demo() {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! let server = kcm_apiserver::testing::TestServer::start().await;
//! let cms: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), "default");
//! # let _ = cms;
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::server::{RunningServer, Server, ServerConfig, StorageBackend};
use crate::storage::Storage;

/// An API server for one test: in memory (or SQLite in a given dir), TLS and token on, its
/// data dir (PKI, kubeconfig) in a fresh temporary directory removed on drop.
///
/// Bookmarks come every 200 ms so watch tests need not wait a minute.
pub struct TestServer {
    running: Option<RunningServer>,
    client: kube::Client,
    /// The temporary data dir this server owns (removed on drop), if any.
    owned_dir: Option<PathBuf>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("running", &self.running)
            .finish_non_exhaustive()
    }
}

impl TestServer {
    /// Starts a server on the in-memory store. Panics if it cannot start (a test setup failure).
    pub async fn start() -> Self {
        Self::try_start(StorageBackend::Memory, None)
            .await
            .unwrap_or_else(|e| panic!("starting the test API server: {e}"))
    }

    /// Starts a server on a SQLite store in `dir` (which the caller owns and may reuse to test
    /// restarts). Panics if it cannot start.
    pub async fn start_with_sqlite(dir: impl AsRef<Path>) -> Self {
        Self::try_start(StorageBackend::Sqlite, Some(dir.as_ref().to_path_buf()))
            .await
            .unwrap_or_else(|e| panic!("starting the test API server on SQLite: {e}"))
    }

    /// Starts a server on a caller-supplied store. Panics if it cannot start.
    pub async fn start_with_storage(storage: Arc<dyn Storage>) -> Self {
        Self::try_start(StorageBackend::Custom(storage), None)
            .await
            .unwrap_or_else(|e| panic!("starting the test API server: {e}"))
    }

    /// Starts a server with `storage`, in `dir` or a fresh temporary directory.
    pub async fn try_start(
        storage: StorageBackend,
        dir: Option<PathBuf>,
    ) -> crate::server::Result<Self> {
        let (data_dir, owned_dir) = match dir {
            Some(d) => (d, None),
            None => {
                let d = std::env::temp_dir().join(format!("kcm-test-{}", uuid::Uuid::new_v4()));
                (d.clone(), Some(d))
            }
        };
        let mut config = ServerConfig::new(&data_dir);
        config.listen = "127.0.0.1:0".parse().unwrap_or(config.listen);
        config.storage = storage;
        config.bookmark_interval = Duration::from_millis(200);
        config.compaction_interval = None;
        // No controller manager runs beside a test server: no `default` service account
        // ever appears and no node lifecycle controller lifts a new node's not-ready taint,
        // so ServiceAccount and TaintNodesByCondition are off, as in upstream's integration
        // test servers.
        config.admission = crate::admission::AdmissionConfig::default().disabling(&[
            crate::admission::plugins::SERVICE_ACCOUNT,
            crate::admission::plugins::TAINT_NODES_BY_CONDITION,
        ]);
        let running = Server::start(config).await?;
        // No automatic retries of 429/503/504: tests see every status the server answers.
        let mut kube_config = running.kube_config();
        kube_config.default_retry = false;
        let client =
            kube::Client::try_from(kube_config).map_err(|source| crate::server::Error::Client {
                url: running.url().to_owned(),
                source,
            })?;
        Ok(Self {
            running: Some(running),
            client,
            owned_dir,
        })
    }

    fn running(&self) -> &RunningServer {
        self.running.as_ref().unwrap_or_else(|| {
            unreachable!("running is only taken by shutdown, which consumes self")
        })
    }

    /// A client authenticated as the admin, default namespace `default` (cheap to clone). Unlike
    /// [`RunningServer::client`], it does not retry 429/503/504 answers.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The server URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        self.running().url()
    }

    /// The kubeconfig the server wrote (for `kubectl --kubeconfig` or other processes).
    pub fn kubeconfig_path(&self) -> &Path {
        self.running().kubeconfig_path()
    }

    /// The admin bearer token.
    pub fn token(&self) -> &str {
        self.running().token()
    }

    /// The running server (store, registry, CA).
    pub fn server(&self) -> &RunningServer {
        self.running()
    }

    /// Stops the server and waits for its connections to close.
    pub async fn shutdown(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(running) = &self.running {
            running.shutdown_token().cancel();
        }
        if let Some(dir) = &self.owned_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
