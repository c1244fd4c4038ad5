//! networking.k8s.io/v1 ingresses, ingressclasses, networkpolicies, ipaddresses and servicecidrs.
//!
//! Stored, validated and defaulted as upstream. No ingress controller or network policy
//! enforcement runs in kcm: an Ingress's `status.loadBalancer` stays as its controller
//! writes it. The default `kubernetes` ServiceCIDR is created at start; Service cluster IPs
//! are allocated by [`crate::registry::service_ip`] without IPAddress objects.

use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::api::networking::v1::{IPAddress, Ingress, NetworkPolicy, ServiceCIDR};

use crate::registry::generation::Generation;
use crate::registry::resource::ResourceDef;
use crate::registry::subresource::Subresource;
use crate::resources::ingress::IngressStrategy;
use crate::resources::ingress_class::{self, IngressClassStrategy};
use crate::resources::network_policy::{self, NetworkPolicyStrategy};
use crate::resources::service_cidr::{self, IpAddressStrategy, ServiceCidrStrategy};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// networking.k8s.io/v1 ingresses.
pub static INGRESSES: ResourceDef = ResourceDef::of::<Ingress>()
    .generation(Generation::Spec)
    .short_names(&["ing"])
    .subresources(&[Subresource::Status])
    .strategy(&IngressStrategy)
    .printer(printers::INGRESS)
    .merge_schema(&kinds::METADATA_ONLY);

/// networking.k8s.io/v1 ingressclasses.
pub static INGRESS_CLASSES: ResourceDef = ResourceDef::of::<IngressClass>()
    .generation(Generation::Spec)
    .decode_with(ingress_class::decode)
    .strategy(&IngressClassStrategy)
    .printer(printers::INGRESS_CLASS)
    .merge_schema(&kinds::METADATA_ONLY);

/// networking.k8s.io/v1 networkpolicies.
pub static NETWORK_POLICIES: ResourceDef = ResourceDef::of::<NetworkPolicy>()
    .generation(Generation::Spec)
    .short_names(&["netpol"])
    .decode_with(network_policy::decode)
    .strategy(&NetworkPolicyStrategy)
    .printer(printers::NETWORK_POLICY)
    .merge_schema(&kinds::METADATA_ONLY);

/// networking.k8s.io/v1 ipaddresses.
pub static IP_ADDRESSES: ResourceDef = ResourceDef::of::<IPAddress>()
    .short_names(&["ip"])
    .strategy(&IpAddressStrategy)
    .printer(printers::IP_ADDRESS)
    .merge_schema(&kinds::METADATA_ONLY);

/// networking.k8s.io/v1 servicecidrs.
pub static SERVICE_CIDRS: ResourceDef = ResourceDef::of::<ServiceCIDR>()
    .subresources(&[Subresource::Status])
    .strategy(&ServiceCidrStrategy)
    .bootstrap(service_cidr::bootstrap_service_cidrs)
    .printer(printers::SERVICE_CIDR)
    .merge_schema(&kinds::STATUS_CONDITIONS);
