//! Endpoints identified by their addresses, hostname and target pod, as upstream's `EndpointSet` and `EndpointsEqualBeyondHash`.

use std::collections::BTreeMap;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};

use super::refs_equal_ignoring_resource_version;

/// What identifies an endpoint across syncs, as upstream's `endpointHashObj`: its sorted
/// addresses, hostname and target's namespace and name. Conditions, zone or node may change
/// without the endpoint becoming another one, so they are updated in place.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointKey {
    /// The addresses, sorted.
    pub addresses: Vec<String>,
    /// The hostname, empty when absent.
    pub hostname: String,
    /// The target reference's namespace, empty when absent.
    pub namespace: String,
    /// The target reference's name, empty when absent.
    pub name: String,
}

impl EndpointKey {
    /// The key of `endpoint`, as upstream's `hashEndpoint`.
    pub fn of(endpoint: &Endpoint) -> Self {
        let mut addresses = endpoint.addresses.clone();
        addresses.sort_unstable();
        let target = endpoint.target_ref.as_ref();
        Self {
            addresses,
            hostname: endpoint.hostname.clone().unwrap_or_default(),
            namespace: target.and_then(|t| t.namespace.clone()).unwrap_or_default(),
            name: target.and_then(|t| t.name.clone()).unwrap_or_default(),
        }
    }
}

/// A set of desired endpoints by [`EndpointKey`], as upstream's `EndpointSet`. Ordered, so the
/// endpoints a sync places (`pop_any`) are deterministic where upstream's map order is random.
#[derive(Clone, Debug, Default)]
pub struct EndpointSet {
    /// Each endpoint under its key. Invariant: `items[k]` has key `k`.
    items: BTreeMap<EndpointKey, Endpoint>,
}

impl EndpointSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) `endpoint`.
    pub fn insert(&mut self, endpoint: Endpoint) {
        self.items.insert(EndpointKey::of(&endpoint), endpoint);
    }

    /// Removes the endpoint with `endpoint`'s key.
    pub fn remove(&mut self, endpoint: &Endpoint) -> Option<Endpoint> {
        self.items.remove(&EndpointKey::of(endpoint))
    }

    /// The desired endpoint with `endpoint`'s key, if any.
    pub fn get(&self, endpoint: &Endpoint) -> Option<&Endpoint> {
        self.items.get(&EndpointKey::of(endpoint))
    }

    /// Takes one endpoint out (the smallest key).
    pub fn pop_any(&mut self) -> Option<Endpoint> {
        self.items.pop_first().map(|(_, endpoint)| endpoint)
    }

    /// How many endpoints are in the set.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Whether two endpoints with the same [`EndpointKey`] are equal in everything else a sync
/// writes, as upstream's `EndpointsEqualBeyondHash`: node name, zone, the three conditions and
/// the target reference (ignoring its resourceVersion).
pub fn endpoints_equal_beyond_hash(a: &Endpoint, b: &Endpoint) -> bool {
    let default = EndpointConditions::default();
    let (ca, cb) = (
        a.conditions.as_ref().unwrap_or(&default),
        b.conditions.as_ref().unwrap_or(&default),
    );
    a.node_name == b.node_name
        && a.zone == b.zone
        && ca.ready == cb.ready
        && ca.serving == cb.serving
        && ca.terminating == cb.terminating
        && refs_equal_ignoring_resource_version(a.target_ref.as_ref(), b.target_ref.as_ref())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;

    use super::*;

    fn endpoint(addresses: &[&str], pod: &str) -> Endpoint {
        Endpoint {
            addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some("ns".into()),
                name: Some(pod.into()),
                ..ObjectReference::default()
            }),
            ..Endpoint::default()
        }
    }

    #[test]
    fn identity_is_addresses_hostname_and_target() {
        let mut set = EndpointSet::new();
        set.insert(endpoint(&["10.0.0.2", "fd00::2"], "a"));
        assert!(
            set.get(&endpoint(&["fd00::2", "10.0.0.2"], "a")).is_some(),
            "address order"
        );
        assert!(
            set.get(&endpoint(&["10.0.0.2", "fd00::2"], "b")).is_none(),
            "other pod"
        );
        let mut ready = endpoint(&["10.0.0.2", "fd00::2"], "a");
        ready.conditions = Some(EndpointConditions {
            ready: Some(true),
            ..EndpointConditions::default()
        });
        let existing = set.get(&ready).cloned().expect("same identity");
        assert!(
            !endpoints_equal_beyond_hash(&existing, &ready),
            "conditions differ"
        );
        set.insert(ready.clone());
        assert_eq!(set.len(), 1);
        assert!(endpoints_equal_beyond_hash(
            set.get(&ready).expect("there"),
            &ready
        ));
        assert!(set.pop_any().is_some());
        assert!(set.is_empty());
    }

    #[test]
    fn equality_beyond_the_key() {
        let base = endpoint(&["10.0.0.1"], "a");
        let mut rv = base.clone();
        if let Some(t) = rv.target_ref.as_mut() {
            t.resource_version = Some("9".into());
        }
        assert!(
            endpoints_equal_beyond_hash(&base, &rv),
            "resourceVersion ignored"
        );
        let mut zone = base.clone();
        zone.zone = Some("z".into());
        assert!(!endpoints_equal_beyond_hash(&base, &zone));
        let mut node = base.clone();
        node.node_name = Some("n".into());
        assert!(!endpoints_equal_beyond_hash(&base, &node));
        let mut empty_conditions = base.clone();
        empty_conditions.conditions = Some(EndpointConditions::default());
        assert!(
            endpoints_equal_beyond_hash(&base, &empty_conditions),
            "absent and empty conditions"
        );
    }
}
