//! Converting Endpoints into slice parts and naming mirrored slices, as upstream's `endpointslicemirroring/utils.go`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort as CorePort, Endpoints};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::endpointsliceutil::slices::endpoint_slice_prefix;
use crate::endpointsliceutil::{
    ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6, ENDPOINTS_LAST_CHANGE_TRIGGER_TIME, LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME, LABEL_SKIP_MIRROR, LAST_APPLIED_CONFIG_ANNOTATION,
    LEADER_ELECTION_RECORD_ANNOTATION, PortMapKey,
};

/// The `managed-by` value of mirrored slices (upstream's `controllerName`).
pub const MANAGED_BY: &str = "endpointslicemirroring-controller.k8s.io";

/// Mirrored slices are grouped by address type and port list (upstream's
/// `addrTypePortMapKey`).
pub type AddrTypePortMapKey = (String, PortMapKey);

/// A mirrored slice for `endpoints` with `ports` and `address_type`, as upstream's
/// `newEndpointSlice`: owned by the Endpoints, with its labels (plus the Service name and
/// `managed-by`) and its annotations but the trigger time and kubectl's last-applied
/// configuration; named `slice_name`, or `generateName`d when empty.
pub fn new_endpoint_slice(
    endpoints: &Endpoints,
    ports: &[EndpointPort],
    address_type: &str,
    slice_name: &str,
) -> EndpointSlice {
    let name = endpoints.metadata.name.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> =
        endpoints.metadata.labels.clone().unwrap_or_default();
    labels.insert(LABEL_SERVICE_NAME.to_owned(), name.clone());
    labels.insert(LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned());
    EndpointSlice {
        metadata: ObjectMeta {
            name: (!slice_name.is_empty()).then(|| slice_name.to_owned()),
            generate_name: slice_name.is_empty().then(|| endpoint_slice_prefix(&name)),
            namespace: endpoints.metadata.namespace.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Endpoints".to_owned(),
                name,
                uid: endpoints.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            labels: Some(labels),
            annotations: Some(mirrored_annotations(
                endpoints.metadata.annotations.as_ref(),
            )),
            ..ObjectMeta::default()
        },
        address_type: address_type.to_owned(),
        endpoints: Some(Vec::new()),
        ports: Some(ports.to_vec()),
    }
}

/// The annotations a mirrored slice carries: the Endpoints' own, but the trigger time and
/// kubectl's last-applied configuration.
pub fn mirrored_annotations(
    annotations: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    annotations
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            k.as_str() != ENDPOINTS_LAST_CHANGE_TRIGGER_TIME
                && k.as_str() != LAST_APPLIED_CONFIG_ANNOTATION
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The slice endpoint of one Endpoints address and its address type, as upstream's
/// `addressToEndpoint`; `None` for an address that is not an IP.
pub fn address_to_endpoint(
    address: &EndpointAddress,
    ready: bool,
) -> Option<(Endpoint, &'static str)> {
    let ip: IpAddr = address.ip.parse().ok()?;
    let address_type = if ip.is_ipv4() {
        ADDRESS_TYPE_IPV4
    } else {
        ADDRESS_TYPE_IPV6
    };
    let endpoint = Endpoint {
        // Re-formatted in case the Endpoints holds an irregular spelling.
        addresses: vec![ip.to_string()],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: None,
            terminating: None,
        }),
        target_ref: address.target_ref.clone(),
        node_name: address.node_name.clone(),
        hostname: address.hostname.clone().filter(|h| !h.is_empty()),
        ..Endpoint::default()
    };
    Some((endpoint, address_type))
}

/// The slice ports of an Endpoints subset's ports, as upstream's `epPortsToEpsPorts`.
pub fn endpoints_ports_to_slice_ports(ports: &[CorePort]) -> Vec<EndpointPort> {
    ports
        .iter()
        .map(|p| EndpointPort {
            name: Some(p.name.clone().unwrap_or_default()),
            port: Some(p.port),
            protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".to_owned())),
            app_protocol: p.app_protocol.clone(),
        })
        .collect()
}

/// Whether the Endpoints opted out of mirroring (`endpointslice.kubernetes.io/skip-mirror:
/// "true"`), as upstream's `skipMirror`.
pub fn skip_mirror(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(LABEL_SKIP_MIRROR))
        .is_some_and(|v| v == "true")
}

/// Whether the Endpoints is a leader-election lock, as upstream's `hasLeaderElection`.
pub fn has_leader_election(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations.is_some_and(|a| a.contains_key(LEADER_ELECTION_RECORD_ANNOTATION))
}

/// Whether `endpoints` should be mirrored (not opted out, not a lock), as upstream's
/// `shouldMirror`. That its Service exists without a selector is checked by the sync.
pub fn should_mirror(endpoints: &Endpoints) -> bool {
    !skip_mirror(endpoints.metadata.labels.as_ref())
        && !has_leader_election(endpoints.metadata.annotations.as_ref())
}

#[cfg(test)]
mod tests {
    use kcm_testing::prelude::*;

    use super::*;

    #[test]
    fn addresses_become_endpoints() {
        let address = EndpointAddress {
            ip: "10.0.0.1".into(),
            hostname: Some("h".into()),
            node_name: Some("n".into()),
            target_ref: None,
        };
        let (ep, t) = address_to_endpoint(&address, false).expect("ip");
        assert_eq!(t, "IPv4");
        assert_eq!(ep.conditions.and_then(|c| c.ready), Some(false));
        assert_eq!(ep.hostname.as_deref(), Some("h"));
        let v6 = EndpointAddress {
            ip: "FD00:0::1".into(),
            ..EndpointAddress::default()
        };
        let (ep, t) = address_to_endpoint(&v6, true).expect("ip");
        assert_eq!((t, ep.addresses[0].as_str()), ("IPv6", "fd00::1"));
        assert!(
            address_to_endpoint(
                &EndpointAddress {
                    ip: "foo".into(),
                    ..EndpointAddress::default()
                },
                true
            )
            .is_none()
        );
    }

    #[test]
    fn mirrored_slices_copy_labels_and_annotations() {
        let ep = endpoints("svc")
            .namespace("ns")
            .uid("ep-uid")
            .labels(&[("app", "x")])
            .annotations(&[
                ("keep", "1"),
                (ENDPOINTS_LAST_CHANGE_TRIGGER_TIME, "t"),
                (LAST_APPLIED_CONFIG_ANNOTATION, "{}"),
            ])
            .build();
        let slice = new_endpoint_slice(&ep, &[], "IPv4", "");
        assert_eq!(slice.metadata.generate_name.as_deref(), Some("svc-"));
        let labels = slice.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("app").map(String::as_str), Some("x"));
        assert_eq!(
            labels.get(LABEL_MANAGED_BY).map(String::as_str),
            Some(MANAGED_BY)
        );
        assert_eq!(
            slice.metadata.annotations.clone().unwrap_or_default().len(),
            1
        );
        let owner = &slice.metadata.owner_references.unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Endpoints", "ep-uid")
        );
        assert!(should_mirror(&ep));
        assert!(!should_mirror(
            &endpoints("k")
                .labels(&[(LABEL_SKIP_MIRROR, "true")])
                .build()
        ));
        assert!(!should_mirror(
            &endpoints("k")
                .annotations(&[(LEADER_ELECTION_RECORD_ANNOTATION, "{}")])
                .build()
        ));
    }
}
