//! Simulated storage: the default StorageClass `standard` and the external provisioner of its volumes (the PV controller binds them).
//!
//! Where to start: [`Provisioner`]. [`class::default_storage_class`] is what `kcm up` and
//! `kcm sim` create; [`client::VolumeClient`] is the seam the provisioner writes through.
//! [`Attacher`] is the simulated driver's external attacher: it publishes the CSIDriver and marks
//! the VolumeAttachments the attach/detach controller creates attached. [`Resizer`] is its external
//! resizer: it expands the volumes of grown claims and leaves the file system to the node
//! ([`resize_status`] holds the claim status both write).

pub mod attacher;
pub mod class;
pub mod client;
pub mod provisioner;
pub mod resize_status;
pub mod resizer;

pub use attacher::{Attacher, CSI_DRIVER};
pub use class::{DEFAULT_CLASS, PROVISIONER, default_storage_class};
pub use client::{FakeVolumes, KubeVolumeClient, VolumeClient};
pub use provisioner::{Item, Provisioner, StorageCaches};
pub use resizer::Resizer;

/// Runs `create` (an idempotent "ensure it exists") until it succeeds, at most 10 times a
/// second apart: the API server may not serve the group yet. Carries on without it after the
/// last try; `false` when `cancel` fired meanwhile.
pub(crate) async fn ensure_with_retries<F, Fut, E>(
    what: &str,
    cancel: &tokio_util::sync::CancellationToken,
    mut create: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    for attempt in 0..10u32 {
        match create().await {
            Ok(()) => return true,
            Err(err) => {
                tracing::warn!(%err, attempt, "creating {what}");
                tokio::select! {
                    _ = cancel.cancelled() => return false,
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                }
            }
        }
    }
    true
}

/// Whether an informer has synced, as the storage loops keep it.
pub(crate) type Synced = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// Registers `handler` on `informer` (logging a refusal, as the loop runs on without it) and
/// returns the informer's sync check.
pub(crate) fn watch<K, H>(
    what: &str,
    informer: &kcm_machinery::informer::SharedIndexInformer<K>,
    handler: H,
) -> Synced
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    H: kcm_machinery::informer::ResourceEventHandler<K> + Send + Sync + 'static,
{
    if let Err(err) = informer.add_event_handler_with_resync_period(handler, crate::NO_RESYNC) {
        tracing::error!(%err, "registering a {what} event handler");
    }
    let informer = informer.clone();
    std::sync::Arc::new(move || informer.has_synced())
}
