//! A webhook's `clientConfig.service` resolved to one ready endpoint of the Service (its EndpointSlices, else its Endpoints), as upstream's endpoint service resolver (`proxy.ResolveEndpoint`).
//!
//! kcm's nodes are simulated, so cluster IPs route nowhere; an endpoint address is what a
//! webhook running beside kcm can be reached at (a selector-less Service with a hand-written
//! EndpointSlice or Endpoints naming the machine's own address; validation refuses loopback
//! addresses there, as upstream). The certificate is verified against
//! `<name>.<namespace>.svc`, as upstream.

use rand::Rng;
use serde_json::Value;

use crate::admission::source::ObjectSource;
use crate::error::Result as ApiResult;
use crate::object;
use crate::pointer::At;
use crate::resources::core::ENDPOINTS;
use crate::resources::discovery::ENDPOINT_SLICES;
use crate::resources::service::SERVICES;

/// Why a service could not be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The Service does not exist.
    #[error("services \"{0}\" not found")]
    NotFound(String),
    /// The Service's type routes nowhere (ExternalName).
    #[error("unsupported service type {0:?}")]
    UnsupportedType(String),
    /// No port of the Service is the configured one.
    #[error("no service port {port} found for service \"{name}\"")]
    NoPort {
        /// The configured port.
        port: i64,
        /// The Service.
        name: String,
    },
    /// No ready endpoint serves the port.
    #[error("no endpoints available for service \"{0}\"")]
    NoEndpoints(String),
    /// Reading the objects failed.
    #[error("{0}")]
    Read(String),
}

/// An endpoint to connect to: address and port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// The IP (or name) to connect to.
    pub host: String,
    /// The endpoint's port (the Service's target port).
    pub port: u16,
}

/// Resolves `namespace/name:port` to a ready endpoint, picked at random among the ready ones.
pub async fn resolve(
    source: &dyn ObjectSource,
    namespace: &str,
    name: &str,
    port: i64,
) -> Result<Address, Error> {
    let service = read(source.get(&SERVICES, namespace, name).await)?
        .ok_or_else(|| Error::NotFound(name.to_owned()))?;
    let ty = object::str_at(&service, &["spec", "type"]).unwrap_or("ClusterIP");
    if !matches!(ty, "ClusterIP" | "NodePort" | "LoadBalancer") {
        return Err(Error::UnsupportedType(ty.to_owned()));
    }
    let port_name = service
        .at("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(port))
        .map(|p| {
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        })
        .ok_or_else(|| Error::NoPort {
            port,
            name: name.to_owned(),
        })?;

    let mut candidates = Vec::new();
    if source.serves(&ENDPOINT_SLICES) {
        let slices = read(source.list(&ENDPOINT_SLICES, namespace).await)?;
        for slice in slices.iter().filter(|s| {
            object::labels(s)
                .get("kubernetes.io/service-name")
                .map(String::as_str)
                == Some(name)
        }) {
            candidates.extend(slice_addresses(slice, &port_name));
        }
    }
    if candidates.is_empty()
        && let Some(endpoints) = read(source.get(&ENDPOINTS, namespace, name).await)?
    {
        candidates.extend(endpoints_addresses(&endpoints, &port_name));
    }
    if candidates.is_empty() {
        return Err(Error::NoEndpoints(name.to_owned()));
    }
    let pick = rand::rng().random_range(0..candidates.len());
    Ok(candidates.swap_remove(pick))
}

/// A read's error as a resolution error.
fn read<T>(r: ApiResult<T>) -> Result<T, Error> {
    r.map_err(|e| Error::Read(e.message))
}

/// The ready addresses of an EndpointSlice for the port named `port_name` (an endpoint with
/// no `ready` condition counts as ready, as upstream).
fn slice_addresses(slice: &Value, port_name: &str) -> Vec<Address> {
    let Some(port) = named_port(slice.get("ports"), port_name) else {
        return Vec::new();
    };
    slice
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|ep| ep.at("/conditions/ready").and_then(Value::as_bool) != Some(false))
        .filter_map(|ep| ep.at("/addresses/0").and_then(Value::as_str))
        .map(|ip| Address {
            host: ip.to_owned(),
            port,
        })
        .collect()
}

/// The ready addresses of an Endpoints object's subsets for the port named `port_name`.
fn endpoints_addresses(endpoints: &Value, port_name: &str) -> Vec<Address> {
    let mut out = Vec::new();
    for subset in endpoints
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(port) = named_port(subset.get("ports"), port_name) else {
            continue;
        };
        let addresses = subset.get("addresses").and_then(Value::as_array);
        out.extend(
            addresses
                .into_iter()
                .flatten()
                .filter_map(|a| a.get("ip").and_then(Value::as_str))
                .map(|ip| Address {
                    host: ip.to_owned(),
                    port,
                }),
        );
    }
    out
}

/// The number of the port named `name` in a `ports` list (a missing name is `""`).
fn named_port(ports: Option<&Value>, name: &str) -> Option<u16> {
    ports
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == name)
        .and_then(|p| p.get("port").and_then(Value::as_u64))
        .and_then(|p| u16::try_from(p).ok())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::testing::Objects;

    fn service(ty: &str) -> Value {
        json!({"metadata": {"name": "hook", "namespace": "ns"},
            "spec": {"type": ty, "ports": [{"name": "https", "port": 443, "targetPort": 8443}]}})
    }

    fn slice(ready: bool) -> Value {
        json!({"metadata": {"name": "hook-abc", "namespace": "ns",
                "labels": {"kubernetes.io/service-name": "hook"}},
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": 8443}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": ready}}]})
    }

    #[tokio::test]
    async fn services_resolve_to_a_ready_endpoint() {
        struct Case {
            name: &'static str,
            objects: Vec<(&'static crate::registry::resource::ResourceDef, Value)>,
            port: i64,
            want: Result<Address, Error>,
        }
        let at = |host: &str, port| {
            Ok(Address {
                host: host.to_owned(),
                port,
            })
        };
        let cases = [
            Case {
                name: "a ready slice endpoint",
                objects: vec![
                    (&SERVICES, service("ClusterIP")),
                    (&ENDPOINT_SLICES, slice(true)),
                ],
                port: 443,
                want: at("127.0.0.1", 8443),
            },
            Case {
                name: "no service",
                objects: vec![],
                port: 443,
                want: Err(Error::NotFound("hook".to_owned())),
            },
            Case {
                name: "an external name",
                objects: vec![(&SERVICES, service("ExternalName"))],
                port: 443,
                want: Err(Error::UnsupportedType("ExternalName".to_owned())),
            },
            Case {
                name: "another port",
                objects: vec![
                    (&SERVICES, service("ClusterIP")),
                    (&ENDPOINT_SLICES, slice(true)),
                ],
                port: 444,
                want: Err(Error::NoPort {
                    port: 444,
                    name: "hook".to_owned(),
                }),
            },
            Case {
                name: "only unready endpoints",
                objects: vec![
                    (&SERVICES, service("ClusterIP")),
                    (&ENDPOINT_SLICES, slice(false)),
                ],
                port: 443,
                want: Err(Error::NoEndpoints("hook".to_owned())),
            },
            Case {
                name: "endpoints when there is no slice",
                objects: vec![
                    (&SERVICES, service("NodePort")),
                    (
                        &ENDPOINTS,
                        json!({"metadata": {"name": "hook", "namespace": "ns"},
                            "subsets": [{"addresses": [{"ip": "10.0.0.7"}],
                                "ports": [{"name": "https", "port": 9443}]}]}),
                    ),
                ],
                port: 443,
                want: at("10.0.0.7", 9443),
            },
        ];
        for case in cases {
            let source = Objects::new(case.objects);
            let got = resolve(&source, "ns", "hook", case.port).await;
            assert_eq!(got, case.want, "{}", case.name);
        }
    }
}
