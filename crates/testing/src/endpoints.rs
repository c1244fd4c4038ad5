//! Endpoints and EndpointSlices: [`endpoints`], [`endpoint_slice`] and their parts.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference,
};
use k8s_openapi::api::discovery::v1::{
    Endpoint, EndpointConditions, EndpointPort as SlicePort, EndpointSlice,
};

use crate::meta::MetaBuilder;

/// Builds core/v1 [`Endpoints`]. Start with [`endpoints`].
#[derive(Clone, Debug, Default)]
pub struct EndpointsBuilder {
    endpoints: Endpoints,
}

/// Endpoints named `name`; no namespace, no subsets.
pub fn endpoints(name: &str) -> EndpointsBuilder {
    EndpointsBuilder::default().name(name)
}

impl EndpointsBuilder {
    /// Appends a subset of ready `ips` (and not-ready `not_ready`) offering TCP `ports`
    /// (`(name, port)`).
    pub fn subset(mut self, ips: &[&str], not_ready: &[&str], ports: &[(&str, i32)]) -> Self {
        let address = |ip: &&str| EndpointAddress {
            ip: (*ip).to_owned(),
            ..EndpointAddress::default()
        };
        let subset = EndpointSubset {
            addresses: (!ips.is_empty()).then(|| ips.iter().map(address).collect()),
            not_ready_addresses: (!not_ready.is_empty())
                .then(|| not_ready.iter().map(address).collect()),
            ports: (!ports.is_empty()).then(|| {
                ports
                    .iter()
                    .map(|(name, port)| EndpointPort {
                        name: (!name.is_empty()).then(|| (*name).to_owned()),
                        port: *port,
                        protocol: Some("TCP".to_owned()),
                        app_protocol: None,
                    })
                    .collect()
            }),
        };
        self.endpoints.subsets.get_or_insert_default().push(subset);
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut Endpoints)) -> Self {
        f(&mut self.endpoints);
        self
    }

    /// The Endpoints.
    pub fn build(self) -> Endpoints {
        self.endpoints
    }

    /// The Endpoints, shared as caches hand them out.
    pub fn arc(self) -> Arc<Endpoints> {
        Arc::new(self.endpoints)
    }
}

/// Builds a discovery/v1 [`EndpointSlice`]. Start with [`endpoint_slice`].
#[derive(Clone, Debug, Default)]
pub struct EndpointSliceBuilder {
    slice: EndpointSlice,
}

/// An EndpointSlice named `name` of address type `IPv4`; no endpoints, no ports.
pub fn endpoint_slice(name: &str) -> EndpointSliceBuilder {
    EndpointSliceBuilder {
        slice: EndpointSlice {
            address_type: "IPv4".to_owned(),
            ..EndpointSlice::default()
        },
    }
    .name(name)
}

impl EndpointSliceBuilder {
    /// Sets `addressType`.
    pub fn address_type(mut self, address_type: &str) -> Self {
        self.slice.address_type = address_type.to_owned();
        self
    }

    /// Appends an endpoint.
    pub fn endpoint(mut self, endpoint: impl Into<Endpoint>) -> Self {
        self.slice
            .endpoints
            .get_or_insert_default()
            .push(endpoint.into());
        self
    }

    /// Appends a TCP port `(name, port)`.
    pub fn port(mut self, name: &str, port: i32) -> Self {
        self.slice.ports.get_or_insert_default().push(SlicePort {
            name: Some(name.to_owned()),
            port: Some(port),
            protocol: Some("TCP".to_owned()),
            app_protocol: None,
        });
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut EndpointSlice)) -> Self {
        f(&mut self.slice);
        self
    }

    /// The EndpointSlice.
    pub fn build(self) -> EndpointSlice {
        self.slice
    }

    /// The EndpointSlice, shared as caches hand it out.
    pub fn arc(self) -> Arc<EndpointSlice> {
        Arc::new(self.slice)
    }
}

/// Builds one [`Endpoint`] of a slice. Start with [`slice_endpoint`].
#[derive(Clone, Debug, Default)]
pub struct SliceEndpointBuilder {
    endpoint: Endpoint,
}

/// An endpoint at `address`, with no conditions or target.
pub fn slice_endpoint(address: &str) -> SliceEndpointBuilder {
    SliceEndpointBuilder {
        endpoint: Endpoint {
            addresses: vec![address.to_owned()],
            ..Endpoint::default()
        },
    }
}

impl SliceEndpointBuilder {
    /// Sets the three conditions.
    pub fn conditions(mut self, ready: bool, serving: bool, terminating: bool) -> Self {
        self.endpoint.conditions = Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        });
        self
    }

    /// Targets pod `namespace/name`.
    pub fn pod(mut self, namespace: &str, name: &str) -> Self {
        self.endpoint.target_ref = Some(ObjectReference {
            kind: Some("Pod".to_owned()),
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            ..ObjectReference::default()
        });
        self
    }

    /// Sets `nodeName`.
    pub fn node(mut self, node: &str) -> Self {
        self.endpoint.node_name = Some(node.to_owned());
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut Endpoint)) -> Self {
        f(&mut self.endpoint);
        self
    }

    /// The endpoint.
    pub fn build(self) -> Endpoint {
        self.endpoint
    }
}

meta_builder!(EndpointsBuilder => endpoints, EndpointSliceBuilder => slice);
from_builder!(EndpointsBuilder => Endpoints, EndpointSliceBuilder => EndpointSlice, SliceEndpointBuilder => Endpoint);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters() {
        let e = endpoints("svc")
            .namespace("ns")
            .subset(&["10.0.0.1"], &["10.0.0.2"], &[("http", 80)])
            .build();
        let subset = &e.subsets.unwrap_or_default()[0];
        assert_eq!(subset.addresses.as_ref().map(Vec::len), Some(1));
        assert_eq!(subset.not_ready_addresses.as_ref().map(Vec::len), Some(1));
        assert_eq!(subset.ports.as_ref().map(|p| p[0].port), Some(80));

        let s = endpoint_slice("svc-1")
            .namespace("ns")
            .port("http", 8080)
            .endpoint(
                slice_endpoint("10.0.0.1")
                    .conditions(true, true, false)
                    .pod("ns", "p")
                    .node("n"),
            )
            .build();
        assert_eq!(s.address_type, "IPv4");
        assert_eq!(
            s.endpoints.as_deref().unwrap_or_default()[0]
                .node_name
                .as_deref(),
            Some("n")
        );
        assert_eq!(s.ports.unwrap_or_default()[0].port, Some(8080));
    }
}
