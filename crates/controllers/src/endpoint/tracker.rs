//! Endpoints resourceVersions this controller has already replaced, so a sync never acts on a cached copy older than its own write, as upstream's `staleEndpointsTracker`.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::api::core::v1::Endpoints;

/// Remembers, per Endpoints object, the resourceVersion this controller last overwrote: seeing
/// that version again in the cache means the informer has not caught up with the write, and
/// the sync is retried later instead of writing from stale data (issues 126578, 127370).
#[derive(Debug, Default)]
pub struct StaleEndpointsTracker {
    /// `(namespace, name)` → the overwritten resourceVersion.
    stale: RwLock<HashMap<(String, String), String>>,
}

impl StaleEndpointsTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<(String, String), String>> {
        self.stale.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<(String, String), String>> {
        self.stale.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks `endpoints`' resourceVersion as replaced, as upstream's `Stale`.
    pub fn stale(&self, endpoints: &Endpoints) {
        self.write().insert(
            key(endpoints),
            endpoints
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default(),
        );
    }

    /// Whether `endpoints` (a cached copy) carries a resourceVersion already replaced, as
    /// upstream's `IsStale`.
    pub fn is_stale(&self, endpoints: &Endpoints) -> bool {
        self.read()
            .get(&key(endpoints))
            .is_some_and(|rv| Some(rv.as_str()) == endpoints.metadata.resource_version.as_deref())
    }

    /// Forgets `namespace/name`, as upstream's `Delete`.
    pub fn delete(&self, namespace: &str, name: &str) {
        self.write()
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// How many Endpoints have a replaced resourceVersion remembered.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when none has.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }
}

fn key(endpoints: &Endpoints) -> (String, String) {
    (
        endpoints.metadata.namespace.clone().unwrap_or_default(),
        endpoints.metadata.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use kcm_testing::prelude::*;

    use super::*;

    #[test]
    fn stale_until_a_newer_version_is_seen() {
        let tracker = StaleEndpointsTracker::new();
        let v1 = endpoints("svc")
            .namespace("ns")
            .resource_version("1")
            .build();
        let v2 = endpoints("svc")
            .namespace("ns")
            .resource_version("2")
            .build();
        assert!(!tracker.is_stale(&v1));
        tracker.stale(&v1);
        assert!(tracker.is_stale(&v1));
        assert!(!tracker.is_stale(&v2));
        tracker.delete("ns", "svc");
        assert!(!tracker.is_stale(&v1));
    }
}
