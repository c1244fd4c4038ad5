//! Pod IP allocation from a node's /24 pod CIDR, with addresses recycled on pod deletion.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;

/// Hands out pod IPs from one node's /24: `.2` to `.254` (`.1` is the node's bridge, as
/// common CNI plugins reserve it). Allocation is by pod uid, so asking twice for the same pod
/// returns the same address.
///
/// Invariant: `by_pod` and `in_use` hold the same addresses.
#[derive(Debug)]
pub struct PodIpAllocator {
    base: Ipv4Addr,
    in_use: BTreeSet<u8>,
    by_pod: HashMap<String, u8>,
}

impl PodIpAllocator {
    /// An allocator for the /24 starting at `base`.
    pub fn new(base: Ipv4Addr) -> Self {
        Self {
            base,
            in_use: BTreeSet::new(),
            by_pod: HashMap::new(),
        }
    }

    fn address(&self, host: u8) -> Ipv4Addr {
        let [a, b, c, _] = self.base.octets();
        Ipv4Addr::new(a, b, c, host)
    }

    /// The address of pod `uid`, allocating the lowest free one; `None` when the range is full.
    pub fn allocate(&mut self, uid: &str) -> Option<Ipv4Addr> {
        if let Some(host) = self.by_pod.get(uid) {
            return Some(self.address(*host));
        }
        let host = (2u8..=254).find(|h| !self.in_use.contains(h))?;
        self.in_use.insert(host);
        self.by_pod.insert(uid.to_owned(), host);
        Some(self.address(host))
    }

    /// Marks an address already held by a pod (after a restart, from the pod's status).
    /// False when the address is outside the range or held by another pod. A different
    /// address the pod held before is returned to the pool.
    pub fn reserve(&mut self, uid: &str, ip: Ipv4Addr) -> bool {
        let [a, b, c, host] = ip.octets();
        if [a, b, c] != self.base.octets()[..3] || !(2..=254).contains(&host) {
            return false;
        }
        let previous = self.by_pod.get(uid).copied();
        if self.in_use.contains(&host) && previous != Some(host) {
            return false;
        }
        if let Some(old) = previous {
            self.in_use.remove(&old);
        }
        self.in_use.insert(host);
        self.by_pod.insert(uid.to_owned(), host);
        true
    }

    /// The /24 this allocator hands out from.
    pub fn base(&self) -> Ipv4Addr {
        self.base
    }

    /// Returns pod `uid`'s address to the pool.
    pub fn release(&mut self, uid: &str) {
        if let Some(host) = self.by_pod.remove(uid) {
            self.in_use.remove(&host);
        }
    }

    /// Addresses in use.
    pub fn in_use(&self) -> usize {
        self.in_use.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_lowest_free_and_recycles() {
        let mut ipam = PodIpAllocator::new(Ipv4Addr::new(10, 244, 1, 0));
        assert_eq!(ipam.allocate("a"), Some(Ipv4Addr::new(10, 244, 1, 2)));
        assert_eq!(ipam.allocate("b"), Some(Ipv4Addr::new(10, 244, 1, 3)));
        assert_eq!(
            ipam.allocate("a"),
            Some(Ipv4Addr::new(10, 244, 1, 2)),
            "stable per pod"
        );
        ipam.release("a");
        assert_eq!(
            ipam.allocate("c"),
            Some(Ipv4Addr::new(10, 244, 1, 2)),
            "recycled"
        );
        assert_eq!(ipam.in_use(), 2);
    }

    #[test]
    fn full_range_and_reserve() {
        let mut ipam = PodIpAllocator::new(Ipv4Addr::new(10, 244, 0, 0));
        for i in 0..253 {
            assert!(ipam.allocate(&format!("p{i}")).is_some());
        }
        assert_eq!(ipam.allocate("overflow"), None);
        let mut fresh = PodIpAllocator::new(Ipv4Addr::new(10, 244, 0, 0));
        assert!(fresh.reserve("x", Ipv4Addr::new(10, 244, 0, 7)));
        assert!(!fresh.reserve("y", Ipv4Addr::new(10, 244, 0, 7)), "taken");
        assert!(
            !fresh.reserve("z", Ipv4Addr::new(10, 9, 0, 7)),
            "other range"
        );
        assert_eq!(fresh.allocate("w"), Some(Ipv4Addr::new(10, 244, 0, 2)));
        // The pod's status names another address than the one it was given: the given one
        // goes back to the pool.
        assert!(fresh.reserve("w", Ipv4Addr::new(10, 244, 0, 9)));
        assert_eq!(fresh.in_use(), 2);
        assert_eq!(fresh.allocate("v"), Some(Ipv4Addr::new(10, 244, 0, 2)));
    }
}
