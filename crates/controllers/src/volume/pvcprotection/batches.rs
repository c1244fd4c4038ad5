//! Claim keys waiting to be processed, grouped by namespace, as upstream's `pvcProcessingStore`: the claims of one namespace are processed together, so they share one live list of the namespace's pods.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use kcm_machinery::workqueue::Queue;

/// One claim of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedClaim {
    /// Its work-queue key, `namespace/name` (marked done once processed).
    pub key: String,
    /// Its name.
    pub name: String,
}

/// Namespaces with claims to process, and their claims.
///
/// Invariant: a namespace is in `namespaces` (queued or being flushed) exactly while it has an
/// entry in `pending`; [`Self::add`] queues it when it creates the entry, [`Self::next`] removes
/// the entry and marks the namespace done under the same lock.
pub struct ClaimBatches {
    /// The claims of each namespace not yet handed out.
    pending: Mutex<HashMap<String, Vec<QueuedClaim>>>,
    /// The namespaces to flush, in the order they got claims (a plain work queue: one worker
    /// per namespace at a time).
    namespaces: Queue<String>,
}

impl std::fmt::Debug for ClaimBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimBatches")
            .field("namespaces", &self.namespaces.len())
            .finish_non_exhaustive()
    }
}

impl Default for ClaimBatches {
    fn default() -> Self {
        Self::new()
    }
}

impl ClaimBatches {
    /// Nothing pending.
    pub fn new() -> Self {
        Self {
            pending: Mutex::new(HashMap::new()),
            namespaces: Queue::new(),
        }
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<String, Vec<QueuedClaim>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds claim `name` (key `key`) to `namespace`'s batch, queueing the namespace if it had
    /// none, as upstream's `addOrUpdate`.
    pub fn add(&self, namespace: &str, key: String, name: String) {
        let mut pending = self.pending();
        let batch = pending.entry(namespace.to_owned()).or_insert_with(|| {
            self.namespaces.add(namespace.to_owned());
            Vec::new()
        });
        batch.push(QueuedClaim { key, name });
    }

    /// Waits for the next namespace and takes all its claims, as upstream's
    /// `flushNextPVCsByNamespace`. `None` once shut down.
    pub async fn next(&self) -> Option<(String, Vec<QueuedClaim>)> {
        let namespace = self.namespaces.get().await?;
        let mut pending = self.pending();
        let claims = pending.remove(&namespace).unwrap_or_default();
        self.namespaces.done(&namespace);
        Some((namespace, claims))
    }

    /// Namespaces waiting to be flushed.
    pub fn len(&self) -> usize {
        self.namespaces.len()
    }

    /// Whether no namespace is waiting.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
    }

    /// Stops handing out batches: [`Self::next`] returns `None` once the queued ones are out.
    pub fn shut_down(&self) {
        self.namespaces.shut_down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(ns: &str, name: &str) -> QueuedClaim {
        QueuedClaim {
            key: format!("{ns}/{name}"),
            name: name.to_owned(),
        }
    }

    #[tokio::test]
    async fn claims_are_flushed_by_namespace_in_arrival_order() {
        let batches = ClaimBatches::new();
        batches.add("a", "a/1".into(), "1".into());
        batches.add("b", "b/1".into(), "1".into());
        batches.add("a", "a/2".into(), "2".into());
        assert_eq!(batches.len(), 2);
        assert_eq!(
            batches.next().await,
            Some(("a".to_owned(), vec![claim("a", "1"), claim("a", "2")]))
        );
        batches.add("a", "a/3".into(), "3".into());
        assert_eq!(
            batches.next().await,
            Some(("b".to_owned(), vec![claim("b", "1")]))
        );
        assert_eq!(
            batches.next().await,
            Some(("a".to_owned(), vec![claim("a", "3")]))
        );
        assert!(batches.is_empty());
        batches.shut_down();
        assert_eq!(batches.next().await, None);
    }
}
