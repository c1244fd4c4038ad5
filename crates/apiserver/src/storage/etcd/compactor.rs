//! Periodic compaction shared by every API server on one etcd, as kube-apiserver's `compact.go`.
//!
//! Each tick, a server compacts to the revision it saw one interval earlier, but only if no
//! other server recorded a compaction since its previous tick: the version of
//! `compact_rev_key` is a logical clock, and a changed version means someone else did this
//! interval's work. So with N servers etcd is still compacted about once per interval, and
//! one interval of history (5 minutes by default) is always kept for watches to resume in.

use std::time::Duration;

use etcd_client::{GetOptions, KvClient};

use super::{COMPACT_REV_KEY, bounded, compact_to, read_compact_record};
use crate::storage::Revision;

/// The compaction loop of one API server.
pub(super) struct Compactor {
    kv: KvClient,
    timeout: Duration,
    interval: Duration,
}

/// What the loop remembers between ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tick {
    /// The version of `compact_rev_key` seen at the last tick (`compact.go`'s `compactTime`).
    version: i64,
    /// The revision current at the last tick: the next compaction target.
    revision: Revision,
}

impl Compactor {
    pub(super) fn new(kv: KvClient, timeout: Duration, interval: Duration) -> Self {
        Compactor {
            kv,
            timeout,
            interval,
        }
    }

    /// Runs until the task is aborted. Errors are logged and retried at the next tick.
    pub(super) async fn run(mut self) {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        let mut last = Tick::default();
        loop {
            ticker.tick().await;
            match self.tick(last).await {
                Ok(next) => last = next,
                Err(err) => tracing::warn!(error = %err, "etcd compaction failed"),
            }
        }
    }

    /// One round of `compact.go`'s loop: compact to `last.revision` if nobody else compacted
    /// since `last`, then remember the present for the next round.
    async fn tick(&mut self, last: Tick) -> crate::storage::Result<Tick> {
        let (_, _, version) = read_compact_record(&mut self.kv, self.timeout).await?;
        if version == last.version && last.revision > 0 {
            compact_to(&mut self.kv, self.timeout, last.revision).await?;
            tracing::info!(revision = last.revision, "compacted etcd");
        }
        let (_, _, version) = read_compact_record(&mut self.kv, self.timeout).await?;
        let resp = bounded(self.timeout, "read the revision", COMPACT_REV_KEY, || {
            let mut kv = self.kv.clone();
            async move {
                kv.get(COMPACT_REV_KEY, Some(GetOptions::new().with_count_only()))
                    .await
            }
        })
        .await?;
        Ok(Tick {
            version,
            revision: resp.header().map_or(0, |h| h.revision()),
        })
    }
}
