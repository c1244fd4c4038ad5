//! Writing a StatefulSet's status, retrying conflicts on the cached copy, as upstream's `stateful_set_status_updater.go`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::informer::keys::object_key;
use kcm_machinery::informer::store::Indexer;

use super::Error;
use super::client::StatefulSetClient;

/// The delays between status write attempts on conflicts, as client-go's
/// `retry.DefaultRetry` (five attempts, 10ms apart).
const CONFLICT_RETRY_DELAYS: [Duration; 4] = [Duration::from_millis(10); 4];

/// Writes StatefulSet statuses, as upstream's `realStatefulSetStatusUpdater`.
#[derive(Clone)]
pub struct StatusUpdater {
    client: Arc<dyn StatefulSetClient>,
    sets: Indexer<StatefulSet>,
}

impl std::fmt::Debug for StatusUpdater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusUpdater").finish_non_exhaustive()
    }
}

impl StatusUpdater {
    /// Writes through `client`, re-reads from `sets` after a conflict.
    pub fn new(client: Arc<dyn StatefulSetClient>, sets: Indexer<StatefulSet>) -> Self {
        Self { client, sets }
    }

    /// Writes `status` onto `set`, retrying conflicts with the cached copy's resourceVersion,
    /// as `UpdateStatefulSetStatus`. Returns the set as stored.
    pub async fn update_stateful_set_status(
        &self,
        set: &StatefulSet,
        status: &StatefulSetStatus,
    ) -> Result<StatefulSet, Error> {
        let mut current = set.clone();
        let key = object_key(
            set.metadata.namespace.as_deref().unwrap_or_default(),
            set.metadata.name.as_deref().unwrap_or_default(),
        );
        let mut delays = CONFLICT_RETRY_DELAYS.iter();
        loop {
            current.status = Some(status.clone());
            let err = match self.client.update_status(&current).await {
                Ok(stored) => return Ok(stored),
                Err(err) => err,
            };
            match self.sets.get_by_key(&key) {
                Some(cached) => current = (*cached).clone(),
                None => {
                    tracing::error!(statefulset = %key, "error getting updated StatefulSet from the cache")
                }
            }
            match delays.next() {
                Some(delay) if err.is_conflict() => tokio::time::sleep(*delay).await,
                _ => {
                    return Err(Error::UpdateStatus {
                        stateful_set: key,
                        source: err,
                    });
                }
            }
        }
    }
}
