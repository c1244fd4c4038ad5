//! Shared by the kcm crate's in-process cluster tests: bounded polling, opt-in logging, and the
//! scheduler and simulated nodes started as `kcm sim` starts them.

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kcm_machinery::events::{EventBroadcaster, KubeEventSink};
use kcm_machinery::informer::SharedInformerFactory;
use kcm_sim::{Scheduler, Simulator, SimulatorConfig};
use tokio_util::sync::CancellationToken;

/// Polls `f` every `every` until it yields a value; panics naming `what` once `limit` has
/// passed (real time: the API server runs for real).
pub async fn poll<T, F, Fut>(what: &str, limit: Duration, every: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = f().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(every).await;
    }
}

/// Logs to the test's output when `KCM_LOG` is set (e.g. `KCM_LOG=kcm_sim=debug`).
pub fn init_logging() {
    if let Ok(filter) = std::env::var("KCM_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

/// Starts a scheduler with its own informers and a real event recorder.
pub fn start_scheduler(client: kube::Client, cancel: &CancellationToken) {
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let broadcaster = EventBroadcaster::new(Arc::new(KubeEventSink::new(client.clone())));
    let recorder = broadcaster.recorder("default-scheduler", None);
    let scheduler = Scheduler::new(client, &factory, recorder).expect("scheduler");
    factory.start(cancel);
    let cancel = cancel.clone();
    tokio::spawn(async move {
        scheduler.run(cancel).await;
        broadcaster.shutdown().await;
    });
}

/// Starts a simulator with its own informers; the handle ends when its task does.
pub fn start_simulator(
    client: kube::Client,
    config: SimulatorConfig,
    cancel: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let broadcaster = EventBroadcaster::new(Arc::new(KubeEventSink::new(client.clone())));
    let simulator = Simulator::new(client, &factory, &broadcaster, config).expect("simulator");
    factory.start(cancel);
    let cancel = cancel.clone();
    tokio::spawn(async move {
        simulator.run(cancel).await;
        broadcaster.shutdown().await;
    })
}
