//! Services: [`service`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::meta::{MetaBuilder, labels};

/// Builds a [`Service`]. Start with [`service`].
#[derive(Clone, Debug, Default)]
pub struct ServiceBuilder {
    service: Service,
}

/// A Service named `name`; no namespace, spec or status.
pub fn service(name: &str) -> ServiceBuilder {
    ServiceBuilder::default().name(name)
}

impl ServiceBuilder {
    /// Adds `spec.selector` entries: the pods the Service sends traffic to.
    pub fn selector(mut self, pairs: &[(&str, &str)]) -> Self {
        self.spec_mut()
            .selector
            .get_or_insert_default()
            .extend(labels(pairs));
        self
    }

    /// Appends a TCP port `port` forwarding to the pods' `target_port`.
    pub fn port(mut self, port: i32, target_port: i32) -> Self {
        self.spec_mut()
            .ports
            .get_or_insert_default()
            .push(ServicePort {
                port,
                target_port: Some(IntOrString::Int(target_port)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            });
        self
    }

    /// Appends a named TCP port `port` forwarding to the pods' port named `target` (resolved
    /// per pod).
    pub fn named_port(mut self, name: &str, port: i32, target: &str) -> Self {
        self.spec_mut()
            .ports
            .get_or_insert_default()
            .push(ServicePort {
                name: Some(name.to_owned()),
                port,
                target_port: Some(IntOrString::String(target.to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            });
        self
    }

    /// Sets `spec.publishNotReadyAddresses`.
    pub fn publish_not_ready_addresses(mut self, publish: bool) -> Self {
        self.spec_mut().publish_not_ready_addresses = Some(publish);
        self
    }

    /// Sets `spec.ipFamilies` (`"IPv4"`, `"IPv6"`).
    pub fn ip_families(mut self, families: &[&str]) -> Self {
        self.spec_mut().ip_families = Some(families.iter().map(|f| (*f).to_owned()).collect());
        self
    }

    /// Sets `spec.type` (`"ClusterIP"`, `"NodePort"`, `"LoadBalancer"`, `"ExternalName"`).
    pub fn type_(mut self, type_: &str) -> Self {
        self.spec_mut().type_ = Some(type_.to_owned());
        self
    }

    /// Sets `spec.clusterIP` (`"None"` for a headless Service).
    pub fn cluster_ip(mut self, ip: &str) -> Self {
        self.spec_mut().cluster_ip = Some(ip.to_owned());
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut Service)) -> Self {
        f(&mut self.service);
        self
    }

    /// The Service.
    pub fn build(self) -> Service {
        self.service
    }

    /// The Service, shared as caches hand it out.
    pub fn arc(self) -> Arc<Service> {
        Arc::new(self.service)
    }

    fn spec_mut(&mut self) -> &mut ServiceSpec {
        self.service.spec.get_or_insert_default()
    }
}

meta_builder!(ServiceBuilder => service);
from_builder!(ServiceBuilder => Service);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters() {
        let s = service("s")
            .namespace("default")
            .selector(&[("app", "web")])
            .port(80, 8080)
            .type_("ClusterIP")
            .cluster_ip("None")
            .build();
        let spec = s.spec.unwrap_or_default();
        assert_eq!(spec.selector, Some(labels(&[("app", "web")])));
        let ports = spec.ports.unwrap_or_default();
        assert_eq!(ports[0].port, 80);
        assert_eq!(ports[0].target_port, Some(IntOrString::Int(8080)));
        assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    }
}
