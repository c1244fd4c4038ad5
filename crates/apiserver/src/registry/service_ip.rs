//! Service cluster IP allocation from the service CIDR (`10.96.0.0/12`), unique across the stored Services.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use rand::Rng;
use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::object;
use crate::registry::Registry;
use crate::resources::service as svc_resource;
use crate::storage::ListOptions;
use crate::validation::{FieldError, FieldErrorKind};

/// The service CIDR's network address (kube-apiserver's default `--service-cluster-ip-range`).
pub const SERVICE_CIDR_BASE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 0);
/// The service CIDR's prefix length.
pub const SERVICE_CIDR_PREFIX: u32 = 12;
/// The service CIDR as upstream prints it in allocation errors.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The first address of the range, reserved for the `default/kubernetes` Service.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

/// How many random picks are tried before scanning the range in order.
const RANDOM_ATTEMPTS: usize = 64;

/// Why a requested cluster IP cannot be allocated (upstream's `ipallocator` errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Another Service holds the address (or it is reserved for `default/kubernetes`).
    #[error("provided IP is already allocated")]
    Allocated,
    /// The address is outside the range, or is its network or broadcast address.
    #[error(
        "the provided IP ({0}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
    )]
    NotInRange(String),
    /// Every address of the range is taken.
    #[error("range is full")]
    Full,
}

/// The allocatable offsets of the range: the network (0) and broadcast addresses are never
/// handed out, as upstream's IPv4 allocator.
fn offset_range() -> std::ops::RangeInclusive<u32> {
    1..=(1u32 << (32 - SERVICE_CIDR_PREFIX)) - 2
}

/// The offset of `ip` in the range, if it is an allocatable address of it.
fn offset_of(ip: Ipv4Addr) -> Option<u32> {
    let offset = u32::from(ip).checked_sub(u32::from(SERVICE_CIDR_BASE))?;
    offset_range().contains(&offset).then_some(offset)
}

/// Checks a requested address: in range, not used, and `10.96.0.1` only for the kubernetes
/// Service (`is_kubernetes`).
pub fn check_requested(
    ip: &str,
    used: &HashSet<Ipv4Addr>,
    is_kubernetes: bool,
) -> Result<Ipv4Addr, AllocError> {
    let parsed: Ipv4Addr = ip
        .parse()
        .map_err(|_| AllocError::NotInRange(ip.to_owned()))?;
    if offset_of(parsed).is_none() {
        return Err(AllocError::NotInRange(ip.to_owned()));
    }
    if used.contains(&parsed) || (parsed == KUBERNETES_SERVICE_IP && !is_kubernetes) {
        return Err(AllocError::Allocated);
    }
    Ok(parsed)
}

/// Picks a free address at random (never the network, broadcast or kubernetes address).
pub fn allocate_next(used: &HashSet<Ipv4Addr>, rng: &mut impl Rng) -> Result<Ipv4Addr, AllocError> {
    let free = |offset: u32| {
        let ip = Ipv4Addr::from(u32::from(SERVICE_CIDR_BASE) + offset);
        (ip != KUBERNETES_SERVICE_IP && !used.contains(&ip)).then_some(ip)
    };
    let range = offset_range();
    for _ in 0..RANDOM_ATTEMPTS {
        if let Some(ip) = free(rng.random_range(range.clone())) {
            return Ok(ip);
        }
    }
    range.into_iter().find_map(free).ok_or(AllocError::Full)
}

/// Whether an update from `old` to `new` needs a cluster IP allocated: the Service had none
/// (it was `ExternalName`) and now has a type that carries one.
pub fn needs_allocation(new: &Value, old: &Value) -> bool {
    let has_ip = |svc: &Value| {
        svc.pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .is_some_and(|ip| !ip.is_empty())
    };
    let kind = new
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    kind != "ExternalName" && !has_ip(old)
}

impl Registry {
    /// Every cluster IP held by a stored Service, read from the store.
    async fn used_cluster_ips(&self) -> Result<HashSet<Ipv4Addr>> {
        let def = &svc_resource::SERVICES;
        let listed = self
            .storage()
            .list(ListOptions {
                prefix: def.storage_prefix(None),
                ..ListOptions::default()
            })
            .await
            .map_err(|e| ApiError::from_storage(e, def.group_resource(), ""))?;
        let mut used = HashSet::with_capacity(listed.kvs.len());
        for kv in &listed.kvs {
            let Ok(svc) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            let ips = svc.pointer("/spec/clusterIPs").and_then(Value::as_array);
            let single = svc.pointer("/spec/clusterIP");
            for ip in ips.into_iter().flatten().chain(single) {
                if let Some(ip) = ip.as_str().and_then(|s| s.parse::<Ipv4Addr>().ok()) {
                    used.insert(ip);
                }
            }
        }
        Ok(used)
    }

    /// Allocates the cluster IP of a Service being created, as upstream's service REST
    /// `allocIPs`: a requested `spec.clusterIP` must be in range and free (422 `Invalid`
    /// otherwise), an empty one gets a random free address; `clusterIPs`, `ipFamilies` and
    /// `ipFamilyPolicy` are set alongside. Headless (`None`) and `ExternalName` Services are
    /// left alone. The caller holds the allocation lock until the Service is stored.
    pub(crate) async fn allocate_cluster_ip_locked(&self, svc: &mut Value) -> Result<()> {
        let kind = svc
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP");
        if kind == "ExternalName" {
            return Ok(());
        }
        let requested = svc
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .filter(|ip| !ip.is_empty())
            .or_else(|| {
                svc.pointer("/spec/clusterIPs/0")
                    .and_then(Value::as_str)
                    .filter(|ip| !ip.is_empty())
            })
            .map(str::to_owned);
        if requested.as_deref() == Some("None") {
            return Ok(());
        }
        let used = self.used_cluster_ips().await?;
        let name = object::name(svc).to_owned();
        let ip = match &requested {
            Some(ip) => {
                let is_kubernetes = object::namespace(svc) == "default" && name == "kubernetes";
                check_requested(ip, &used, is_kubernetes).map_err(|e| {
                    ApiError::invalid(
                        svc_resource::SERVICES.group_kind(),
                        &name,
                        // The value as upstream prints `spec.clusterIPs` (`%#v` of a Go slice).
                        &[FieldError {
                            kind: FieldErrorKind::Invalid,
                            field: "spec.clusterIPs".to_owned(),
                            value: format!("[]string{{{ip:?}}}"),
                            detail: format!("failed to allocate IP {ip}: {e}"),
                        }],
                    )
                })?
            }
            None => allocate_next(&used, &mut rand::rng())
                .map_err(|e| ApiError::internal(format!("failed to allocate a serviceIP: {e}")))?,
        };
        let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let ip = ip.to_string();
        spec.insert("clusterIP".to_owned(), json!(ip));
        spec.insert("clusterIPs".to_owned(), json!([ip]));
        spec.insert("ipFamilies".to_owned(), json!(["IPv4"]));
        spec.insert("ipFamilyPolicy".to_owned(), json!("SingleStack"));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requested_addresses_are_checked_like_upstream() {
        struct Case {
            name: &'static str,
            ip: &'static str,
            kubernetes: bool,
            want: Result<Ipv4Addr, AllocError>,
        }
        let used: HashSet<Ipv4Addr> = [Ipv4Addr::new(10, 96, 0, 10)].into();
        let cases = [
            Case {
                name: "free address",
                ip: "10.100.3.4",
                kubernetes: false,
                want: Ok(Ipv4Addr::new(10, 100, 3, 4)),
            },
            Case {
                name: "taken address",
                ip: "10.96.0.10",
                kubernetes: false,
                want: Err(AllocError::Allocated),
            },
            Case {
                name: "first address for a user service",
                ip: "10.96.0.1",
                kubernetes: false,
                want: Err(AllocError::Allocated),
            },
            Case {
                name: "first address for the kubernetes service",
                ip: "10.96.0.1",
                kubernetes: true,
                want: Ok(KUBERNETES_SERVICE_IP),
            },
            Case {
                name: "network address",
                ip: "10.96.0.0",
                kubernetes: false,
                want: Err(AllocError::NotInRange("10.96.0.0".to_owned())),
            },
            Case {
                name: "broadcast address",
                ip: "10.111.255.255",
                kubernetes: false,
                want: Err(AllocError::NotInRange("10.111.255.255".to_owned())),
            },
            Case {
                name: "last usable address",
                ip: "10.111.255.254",
                kubernetes: false,
                want: Ok(Ipv4Addr::new(10, 111, 255, 254)),
            },
            Case {
                name: "outside the range",
                ip: "10.112.0.1",
                kubernetes: false,
                want: Err(AllocError::NotInRange("10.112.0.1".to_owned())),
            },
            Case {
                name: "not an address",
                ip: "bogus",
                kubernetes: false,
                want: Err(AllocError::NotInRange("bogus".to_owned())),
            },
        ];
        for case in cases {
            assert_eq!(
                check_requested(case.ip, &used, case.kubernetes),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn only_a_service_gaining_a_cluster_ip_needs_allocation() {
        struct Case {
            name: &'static str,
            new: Value,
            old: Value,
            want: bool,
        }
        let cases = [
            Case {
                name: "ExternalName to ClusterIP",
                new: json!({"spec": {"type": "ClusterIP"}}),
                old: json!({"spec": {"type": "ExternalName"}}),
                want: true,
            },
            Case {
                name: "ClusterIP kept",
                new: json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.9"}}),
                old: json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.9"}}),
                want: false,
            },
            Case {
                name: "to ExternalName",
                new: json!({"spec": {"type": "ExternalName"}}),
                old: json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.9"}}),
                want: false,
            },
        ];
        for case in cases {
            assert_eq!(
                needs_allocation(&case.new, &case.old),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn the_not_in_range_message_is_upstreams() {
        assert_eq!(
            AllocError::NotInRange("1.1.1.1".to_owned()).to_string(),
            "the provided IP (1.1.1.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        );
    }

    #[test]
    fn next_addresses_are_unique_and_in_range() {
        let mut used = HashSet::new();
        let mut rng = rand::rng();
        for _ in 0..2000 {
            let ip = allocate_next(&used, &mut rng).expect("range has room");
            assert!(offset_of(ip).is_some(), "{ip} in range");
            assert_ne!(ip, KUBERNETES_SERVICE_IP);
            assert!(used.insert(ip), "{ip} handed out twice");
        }
    }

    #[test]
    fn a_nearly_full_range_still_finds_the_last_address() {
        let last = Ipv4Addr::new(10, 100, 0, 7);
        let used: HashSet<Ipv4Addr> = offset_range()
            .map(|o| Ipv4Addr::from(u32::from(SERVICE_CIDR_BASE) + o))
            .filter(|ip| *ip != last)
            .collect();
        assert_eq!(allocate_next(&used, &mut rand::rng()), Ok(last));
        let mut full = used;
        full.insert(last);
        assert_eq!(
            allocate_next(&full, &mut rand::rng()),
            Err(AllocError::Full)
        );
    }
}
