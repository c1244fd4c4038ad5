//! The desired state of a mirrored Endpoints and the recycling of slices, as upstream's `endpointslicemirroring/reconciler_helpers.go`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort as CorePort};
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};

use super::utils::{AddrTypePortMapKey, address_to_endpoint, endpoints_ports_to_slice_ports};
use crate::endpointsliceutil::{
    ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6, EndpointSet, PortMapKey, sort_ports,
};

/// The slices to create, update and delete (upstream's `slicesByAction`).
#[derive(Debug, Default)]
pub struct SlicesByAction {
    /// New slices.
    pub to_create: Vec<EndpointSlice>,
    /// Changed slices.
    pub to_update: Vec<EndpointSlice>,
    /// Slices no longer needed.
    pub to_delete: Vec<Arc<EndpointSlice>>,
}

impl SlicesByAction {
    /// Appends `other`'s slices.
    pub fn append(&mut self, other: SlicesByAction) {
        self.to_create.extend(other.to_create);
        self.to_update.extend(other.to_update);
        self.to_delete.extend(other.to_delete);
    }
}

/// Endpoints added, updated and removed (upstream's `totalsByAction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TotalsByAction {
    /// Added.
    pub added: usize,
    /// Changed in place.
    pub updated: usize,
    /// Removed.
    pub removed: usize,
}

impl TotalsByAction {
    /// Adds `other`'s totals.
    pub fn add(&mut self, other: TotalsByAction) {
        self.added += other.added;
        self.updated += other.updated;
        self.removed += other.removed;
    }
}

/// The desired endpoints and ports by address type and port list (upstream's `desiredCalc`).
#[derive(Debug, Default)]
pub struct DesiredCalc {
    /// The ports of each key.
    pub ports_by_key: BTreeMap<AddrTypePortMapKey, Vec<EndpointPort>>,
    /// The desired endpoints of each key.
    pub endpoints_by_key: BTreeMap<AddrTypePortMapKey, EndpointSet>,
}

/// The keys of one subset's port list, one per address type.
#[derive(Clone, Debug)]
pub struct MultiKey {
    v4: AddrTypePortMapKey,
    v6: AddrTypePortMapKey,
}

impl DesiredCalc {
    /// An empty calculation.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a subset's ports for both address types and returns their keys, as
    /// upstream's `initPorts`.
    pub fn init_ports(&mut self, subset_ports: &[CorePort]) -> MultiKey {
        let mut ports = endpoints_ports_to_slice_ports(subset_ports);
        sort_ports(&mut ports);
        let port_key = PortMapKey::new(&ports);
        let key = |t: &str| (t.to_owned(), port_key.clone());
        let multi = MultiKey {
            v4: key(ADDRESS_TYPE_IPV4),
            v6: key(ADDRESS_TYPE_IPV6),
        };
        for k in [&multi.v4, &multi.v6] {
            self.endpoints_by_key.entry(k.clone()).or_default();
            self.ports_by_key.insert(k.clone(), ports.clone());
        }
        multi
    }

    /// Adds an address under the key of its address type, as upstream's `addAddress`; false
    /// for an address that is not an IP.
    pub fn add_address(
        &mut self,
        address: &EndpointAddress,
        multi: &MultiKey,
        ready: bool,
    ) -> bool {
        let Some((endpoint, address_type)) = address_to_endpoint(address, ready) else {
            return false;
        };
        let key = if address_type == ADDRESS_TYPE_IPV4 {
            &multi.v4
        } else {
            &multi.v6
        };
        self.endpoints_by_key
            .entry(key.clone())
            .or_default()
            .insert(endpoint);
        true
    }
}

/// Turns creations into updates of slices that would be deleted (same address type), as
/// upstream's `recycleSlices`.
pub fn recycle_slices(slices: &mut SlicesByAction) {
    let mut creates_by_type: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, s) in slices.to_create.iter().enumerate() {
        creates_by_type
            .entry(s.address_type.clone())
            .or_default()
            .push(i);
    }
    let mut deletes_by_type: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, s) in slices.to_delete.iter().enumerate() {
        deletes_by_type
            .entry(s.address_type.clone())
            .or_default()
            .push(i);
    }
    let mut recycled_creates = Vec::new();
    let mut recycled_deletes = Vec::new();
    for (address_type, creates) in &creates_by_type {
        let Some(deletes) = deletes_by_type.get(address_type) else {
            continue;
        };
        for (c, d) in creates.iter().zip(deletes) {
            recycled_creates.push((*c, *d));
            recycled_deletes.push(*d);
        }
    }
    for (c, d) in &recycled_creates {
        let mut slice = slices.to_create[*c].clone();
        slice.metadata.name = slices.to_delete[*d].metadata.name.clone();
        slice.metadata.generate_name = None;
        slices.to_update.push(slice);
    }
    let created: Vec<usize> = recycled_creates.iter().map(|(c, _)| *c).collect();
    let mut i = 0;
    slices.to_create.retain(|_| {
        let keep = !created.contains(&i);
        i += 1;
        keep
    });
    let mut j = 0;
    slices.to_delete.retain(|_| {
        let keep = !recycled_deletes.contains(&j);
        j += 1;
        keep
    });
}

#[cfg(test)]
mod tests {
    use kcm_testing::prelude::*;

    use super::*;

    #[test]
    fn recycling_pairs_creations_with_deletions_of_the_same_type() {
        let mut slices = SlicesByAction {
            to_create: vec![
                endpoint_slice("").address_type("IPv4").build(),
                endpoint_slice("").address_type("IPv6").build(),
                endpoint_slice("").address_type("IPv4").build(),
            ],
            to_update: vec![],
            to_delete: vec![
                endpoint_slice("old-v4").arc(),
                endpoint_slice("old-v6b").address_type("IPv6").arc(),
            ],
        };
        recycle_slices(&mut slices);
        let updated: Vec<(Option<String>, String)> = slices
            .to_update
            .iter()
            .map(|s| (s.metadata.name.clone(), s.address_type.clone()))
            .collect();
        assert_eq!(
            updated,
            [
                (Some("old-v4".to_owned()), "IPv4".to_owned()),
                (Some("old-v6b".to_owned()), "IPv6".to_owned())
            ]
        );
        assert_eq!(slices.to_create.len(), 1);
        assert!(slices.to_delete.is_empty());
    }

    #[test]
    fn desired_addresses_by_family() {
        let mut d = DesiredCalc::new();
        let ports = [CorePort {
            name: Some("http".into()),
            port: 80,
            protocol: Some("TCP".into()),
            app_protocol: None,
        }];
        let multi = d.init_ports(&ports);
        assert!(d.add_address(
            &EndpointAddress {
                ip: "10.0.0.1".into(),
                ..EndpointAddress::default()
            },
            &multi,
            true
        ));
        assert!(d.add_address(
            &EndpointAddress {
                ip: "fd00::1".into(),
                ..EndpointAddress::default()
            },
            &multi,
            false
        ));
        assert!(!d.add_address(
            &EndpointAddress {
                ip: "nope".into(),
                ..EndpointAddress::default()
            },
            &multi,
            true
        ));
        let sizes: Vec<(String, usize)> = d
            .endpoints_by_key
            .iter()
            .map(|((t, _), set)| (t.clone(), set.len()))
            .collect();
        assert_eq!(sizes, [("IPv4".to_owned(), 1), ("IPv6".to_owned(), 1)]);
    }
}
