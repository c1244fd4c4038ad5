//! The EndpointSlice generations this process wrote, per Service, so a sync never acts on a slice cache older than its own writes, as upstream's `EndpointSliceTracker`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::LABEL_SERVICE_NAME;

/// The generation recorded for a slice this process deleted (upstream's `deletionExpected`).
const DELETION_EXPECTED: i64 = -1;

/// A Service's `(namespace, name)`.
type ServiceName = (String, String);

/// What the tracker holds, behind one lock.
#[derive(Debug, Default)]
struct State {
    /// Per Service, the generation last written for each of its slices (by slice UID), or
    /// [`DELETION_EXPECTED`] for slices this process deleted and has not yet seen go.
    generations_by_service: HashMap<ServiceName, HashMap<String, i64>>,
    /// The UID of each Service last checked by [`EndpointSliceTracker::stale_slices`]: a new UID
    /// (deleted and recreated) makes the old writes obsolete.
    services_by_uid: HashMap<ServiceName, String>,
}

/// Tracks the generations of the EndpointSlices a controller wrote, as upstream's
/// `EndpointSliceTracker`: like expectations, a Service whose cached slices are older than the
/// controller's own writes (or still include a slice it deleted, or lack one it created) is
/// not reconciled until the informer catches up.
#[derive(Debug, Default)]
pub struct EndpointSliceTracker {
    state: Mutex<State>,
}

impl EndpointSliceTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a generation (or an expected deletion) is tracked for `slice`, as upstream's
    /// `Has`.
    pub fn has(&self, slice: &EndpointSlice) -> bool {
        let state = self.state();
        state
            .generations_by_service
            .get(&service_of(slice))
            .is_some_and(|g| g.contains_key(uid_of(slice)))
    }

    /// Whether an observed `slice` is news to this controller, as upstream's `ShouldSync`: no
    /// generation tracked for it, or a newer one than the controller wrote.
    pub fn should_sync(&self, slice: &EndpointSlice) -> bool {
        let state = self.state();
        let Some(generations) = state.generations_by_service.get(&service_of(slice)) else {
            return true;
        };
        match generations.get(uid_of(slice)) {
            None => true,
            Some(tracked) => generation_of(slice) > *tracked,
        }
    }

    /// Whether the cached `slices` of `service` lag behind this controller's writes, as
    /// upstream's `StaleSlices`: one is older than written, one was deleted by us, or one we
    /// wrote is missing. A Service recreated under a new UID first drops the old writes.
    pub fn stale_slices(
        &self,
        service: &Service,
        slices: &[std::sync::Arc<EndpointSlice>],
    ) -> bool {
        let mut state = self.state();
        let key = (
            service.metadata.namespace.clone().unwrap_or_default(),
            service.metadata.name.clone().unwrap_or_default(),
        );
        let uid = service.metadata.uid.clone().unwrap_or_default();
        if let Some(tracked) = state.services_by_uid.get(&key)
            && !tracked.is_empty()
            && !uid.is_empty()
            && *tracked != uid
        {
            state.generations_by_service.remove(&key);
        }
        state.services_by_uid.insert(key.clone(), uid);
        let Some(generations) = state.generations_by_service.get(&key) else {
            return false;
        };
        let mut provided = HashMap::with_capacity(slices.len());
        for slice in slices {
            provided.insert(uid_of(slice), generation_of(slice));
            if let Some(tracked) = generations.get(uid_of(slice))
                && (*tracked == DELETION_EXPECTED || *tracked > generation_of(slice))
            {
                return true;
            }
        }
        generations.iter().any(|(uid, generation)| {
            *generation != DELETION_EXPECTED && !provided.contains_key(uid.as_str())
        })
    }

    /// Records the generation of a slice this controller just created or updated (the
    /// server's answer), as upstream's `Update`.
    pub fn update(&self, slice: &EndpointSlice) {
        self.state()
            .generations_by_service
            .entry(service_of(slice))
            .or_default()
            .insert(uid_of(slice).to_owned(), generation_of(slice));
    }

    /// Records that this controller deleted `slice`, as upstream's `ExpectDeletion`.
    pub fn expect_deletion(&self, slice: &EndpointSlice) {
        self.state()
            .generations_by_service
            .entry(service_of(slice))
            .or_default()
            .insert(uid_of(slice).to_owned(), DELETION_EXPECTED);
    }

    /// Forgets `slice`, seen deleted; true if the deletion was expected (or the slice was
    /// never tracked), as upstream's `HandleDeletion`.
    pub fn handle_deletion(&self, slice: &EndpointSlice) -> bool {
        let mut state = self.state();
        if let Some(generations) = state.generations_by_service.get_mut(&service_of(slice))
            && let Some(generation) = generations.remove(uid_of(slice))
        {
            return generation == DELETION_EXPECTED;
        }
        true
    }

    /// Forgets everything about Service `namespace/name`, as upstream's `DeleteService`.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        let mut state = self.state();
        state.generations_by_service.remove(&key);
        state.services_by_uid.remove(&key);
    }

    /// How many Services have tracked generations (tests, metrics).
    pub fn tracked_services(&self) -> usize {
        self.state().generations_by_service.len()
    }
}

fn service_of(slice: &EndpointSlice) -> ServiceName {
    let name = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_SERVICE_NAME))
        .cloned()
        .unwrap_or_default();
    (slice.metadata.namespace.clone().unwrap_or_default(), name)
}

fn uid_of(slice: &EndpointSlice) -> &str {
    slice.metadata.uid.as_deref().unwrap_or_default()
}

fn generation_of(slice: &EndpointSlice) -> i64 {
    slice.metadata.generation.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kcm_testing::prelude::*;

    use super::*;

    fn slice(name: &str, uid: &str, generation: i64) -> EndpointSlice {
        EndpointSlice {
            metadata: meta(name)
                .namespace("ns")
                .uid(uid)
                .generation(generation)
                .labels(&[(LABEL_SERVICE_NAME, "svc")])
                .build(),
            ..EndpointSlice::default()
        }
    }

    fn svc(uid: &str) -> Service {
        service("svc").namespace("ns").uid(uid).build()
    }

    #[test]
    fn should_sync_like_upstream() {
        let tracker = EndpointSliceTracker::new();
        let s1 = slice("a", "1", 1);
        assert!(tracker.should_sync(&s1), "untracked");
        tracker.update(&s1);
        assert!(!tracker.should_sync(&s1), "own write");
        assert!(tracker.should_sync(&slice("a", "1", 2)), "newer");
        assert!(tracker.should_sync(&slice("b", "2", 1)), "other slice");
        assert!(tracker.has(&s1));
    }

    #[test]
    fn stale_slices_like_upstream() {
        struct Case {
            name: &'static str,
            tracked: Vec<(EndpointSlice, bool)>,
            provided: Vec<EndpointSlice>,
            want: bool,
        }
        let cases = [
            Case {
                name: "nothing tracked",
                tracked: vec![],
                provided: vec![slice("a", "1", 1)],
                want: false,
            },
            Case {
                name: "same generation",
                tracked: vec![(slice("a", "1", 1), false)],
                provided: vec![slice("a", "1", 1)],
                want: false,
            },
            Case {
                name: "cache newer",
                tracked: vec![(slice("a", "1", 1), false)],
                provided: vec![slice("a", "1", 2)],
                want: false,
            },
            Case {
                name: "cache older",
                tracked: vec![(slice("a", "1", 2), false)],
                provided: vec![slice("a", "1", 1)],
                want: true,
            },
            Case {
                name: "deleted still cached",
                tracked: vec![(slice("a", "1", 1), true)],
                provided: vec![slice("a", "1", 1)],
                want: true,
            },
            Case {
                name: "deleted and gone",
                tracked: vec![(slice("a", "1", 1), true)],
                provided: vec![],
                want: false,
            },
            Case {
                name: "created not yet cached",
                tracked: vec![(slice("a", "1", 1), false)],
                provided: vec![],
                want: true,
            },
        ];
        for case in cases {
            let tracker = EndpointSliceTracker::new();
            for (s, deleted) in &case.tracked {
                if *deleted {
                    tracker.expect_deletion(s);
                } else {
                    tracker.update(s);
                }
            }
            let provided: Vec<Arc<EndpointSlice>> =
                case.provided.into_iter().map(Arc::new).collect();
            assert_eq!(
                tracker.stale_slices(&svc("u1"), &provided),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn a_recreated_service_drops_old_writes() {
        let tracker = EndpointSliceTracker::new();
        assert!(!tracker.stale_slices(&svc("u1"), &[]));
        tracker.update(&slice("a", "1", 3));
        assert!(tracker.stale_slices(&svc("u1"), &[]), "own slice missing");
        assert!(
            !tracker.stale_slices(&svc("u2"), &[]),
            "new Service, old writes obsolete"
        );
    }

    #[test]
    fn deletions_expected_or_not() {
        let tracker = EndpointSliceTracker::new();
        let s = slice("a", "1", 1);
        tracker.update(&s);
        assert!(!tracker.handle_deletion(&s), "someone else deleted it");
        tracker.expect_deletion(&s);
        assert!(tracker.handle_deletion(&s), "ours");
        assert!(
            tracker.handle_deletion(&slice("b", "2", 1)),
            "never tracked"
        );
        tracker.update(&s);
        tracker.delete_service("ns", "svc");
        assert_eq!(tracker.tracked_services(), 0);
    }
}
