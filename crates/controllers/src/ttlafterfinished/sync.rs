//! Cleaning up one Job: `processJob`, `processTTL` and `timeLeft` (upstream `ttlafterfinished_controller.go`).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::informer::keys::split_meta_namespace_key;

use super::controller::TtlAfterFinishedController;
use super::expiry::finish_and_expire_time;
use super::{Error, Result};

impl TtlAfterFinishedController {
    /// Deletes the Job `key` if it is finished and its TTL expired, as upstream's
    /// `processJob`: the cached Job is checked first; if expired, the Job is read afresh from
    /// the API server (its TTL may have changed, or it may be a namesake) and checked again
    /// before a foreground delete conditioned on its UID. A Job whose TTL has not expired is
    /// requeued for that moment.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let (namespace, name) =
            split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
                key: key.to_owned(),
                source,
            })?;
        let namespace = namespace.unwrap_or_default();
        tracing::trace!(job = key, "Checking if Job is ready for cleanup");
        let Some(job) = self.job_cache.get_by_key(key) else {
            return Ok(());
        };
        if self.process_ttl(key, &job)?.is_none() {
            return Ok(());
        }
        let fresh = match self.client.get(namespace, name).await {
            Ok(fresh) => fresh,
            Err(err) if err.is_not_found() => return Ok(()),
            Err(source) => {
                return Err(Error::Get {
                    job: key.to_owned(),
                    source,
                });
            }
        };
        let Some(expired_at) = self.process_ttl(key, &fresh)? else {
            return Ok(());
        };
        tracing::debug!(job = key, "Cleaning up Job");
        let uid = fresh.metadata.uid.as_deref().unwrap_or_default();
        self.client
            .delete(namespace, name, uid)
            .await
            .map_err(|source| Error::Delete {
                job: key.to_owned(),
                source,
            })?;
        if let Some(metrics) = &self.metrics {
            let late = (self.clock)().duration_since(expired_at);
            metrics.observe_deletion(Duration::try_from(late).unwrap_or(Duration::ZERO));
        }
        Ok(())
    }

    /// When the Job's TTL expired, if it has, as upstream's `processTTL`; a Job whose TTL has
    /// not expired yet is requeued for that moment. Jobs being deleted or not needing clean-up
    /// are ignored.
    fn process_ttl(&self, key: &str, job: &Job) -> Result<Option<Timestamp>> {
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let Some(times) = finish_and_expire_time(job) else {
            return Ok(None);
        };
        let (finished, expire) = times?;
        let now = (self.clock)();
        if finished > now {
            tracing::warn!(
                job = key,
                "Found Job finished in the future. This is likely due to time skew in the cluster. Job cleanup will be deferred."
            );
        }
        let left = now.duration_until(expire);
        tracing::trace!(job = key, %finished, ?left, %expire, "time left");
        if left <= SignedDuration::ZERO {
            return Ok(Some(expire));
        }
        let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
        self.queue.add_after(key.to_owned(), left);
        Ok(None)
    }
}
