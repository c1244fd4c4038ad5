//! The Service CIDR (`--service-cluster-ip-range`, default `10.96.0.0/12`) and the errors of a requested cluster IP; allocation itself is [`super::service_alloc`]'s bitmap.

use std::net::Ipv4Addr;

/// The service CIDR's network address (kube-apiserver's default `--service-cluster-ip-range`).
pub const SERVICE_CIDR_BASE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 0);
/// The service CIDR's prefix length.
pub const SERVICE_CIDR_PREFIX: u32 = 12;
/// The service CIDR as upstream prints it in allocation errors.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The first address of the range, reserved for the `default/kubernetes` Service.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

/// The shortest prefix `--service-cluster-ip-range` may have: kube-apiserver's bitmap
/// allocator holds at most 2^20 IPv4 addresses.
pub const MIN_SERVICE_CIDR_PREFIX: u32 = 12;
/// The longest: two usable addresses, one of them the `default/kubernetes` Service's.
pub const MAX_SERVICE_CIDR_PREFIX: u32 = 30;

/// The IPv4 range Service cluster IPs come from (kube-apiserver's
/// `--service-cluster-ip-range`). Invariants: `base` is the network address (no host bits)
/// and `prefix` is within [`MIN_SERVICE_CIDR_PREFIX`]..=[`MAX_SERVICE_CIDR_PREFIX`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceIpRange {
    base: Ipv4Addr,
    prefix: u32,
    /// The range as written in errors and the default ServiceCIDR (`10.96.0.0/12`).
    text: String,
}

impl Default for ServiceIpRange {
    fn default() -> Self {
        Self {
            base: SERVICE_CIDR_BASE,
            prefix: SERVICE_CIDR_PREFIX,
            text: SERVICE_CIDR.to_owned(),
        }
    }
}

impl std::fmt::Display for ServiceIpRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for ServiceIpRange {
    type Err = String;

    /// Parses an IPv4 CIDR as kube-apiserver checks `--service-cluster-ip-range`: host bits
    /// are masked off (Go's `net.ParseCIDR`), and the range must fit the bitmap allocator.
    fn from_str(s: &str) -> Result<Self, String> {
        let invalid = || format!("service-cluster-ip-range[0]: {s:?} is not a valid CIDR");
        let (addr, prefix) = s.trim().split_once('/').ok_or_else(invalid)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| invalid())?;
        let prefix: u32 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(invalid)?;
        if prefix < MIN_SERVICE_CIDR_PREFIX {
            return Err(
                "specified --service-cluster-ip-range is too large; for 32-bit addresses, the mask must be >= 12"
                    .to_owned(),
            );
        }
        if prefix > MAX_SERVICE_CIDR_PREFIX {
            return Err(format!(
                "specified --service-cluster-ip-range {s} is too small: it must hold at least two addresses (a mask of at most /{MAX_SERVICE_CIDR_PREFIX})"
            ));
        }
        let mask = u32::MAX << (32 - prefix);
        let base = Ipv4Addr::from(u32::from(addr) & mask);
        Ok(Self {
            base,
            prefix,
            text: format!("{base}/{prefix}"),
        })
    }
}

impl ServiceIpRange {
    /// How many cluster IPs the range has: all but its network and broadcast addresses.
    pub fn size(&self) -> u32 {
        (1u32 << (32 - self.prefix)) - 2
    }

    /// The bitmap item of a cluster IP, if the address is allocatable.
    pub fn item(&self, ip: Ipv4Addr) -> Option<u32> {
        let offset = u32::from(ip).checked_sub(u32::from(self.base))?;
        (1..=self.size()).contains(&offset).then(|| offset - 1)
    }

    /// The cluster IP of a bitmap item (below [`size`](Self::size)).
    pub fn ip(&self, item: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.base) + item + 1)
    }

    /// The first address, reserved for the `default/kubernetes` Service.
    pub fn kubernetes_ip(&self) -> Ipv4Addr {
        self.ip(0)
    }

    /// The range as text (`10.96.0.0/12`).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Why a requested cluster IP cannot be allocated (upstream's `ipallocator` errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Another Service holds the address (or it is reserved for `default/kubernetes`).
    #[error("provided IP is already allocated")]
    Allocated,
    /// The address is outside the range, or is its network or broadcast address.
    #[error("the provided IP ({ip}) is not in the valid range. The range of valid IPs is {range}")]
    NotInRange {
        /// The address asked for.
        ip: String,
        /// The range, as configured.
        range: String,
    },
    /// Every address of the range is taken.
    #[error("range is full")]
    Full,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_not_in_range_message_is_upstreams() {
        assert_eq!(
            AllocError::NotInRange {
                ip: "1.1.1.1".to_owned(),
                range: ServiceIpRange::default().to_string()
            }
            .to_string(),
            "the provided IP (1.1.1.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        );
    }

    #[test]
    fn service_cluster_ip_ranges_parse_as_kube_apiservers() {
        let default: ServiceIpRange = SERVICE_CIDR.parse().expect("default");
        assert_eq!(default, ServiceIpRange::default());
        assert_eq!(default.kubernetes_ip(), KUBERNETES_SERVICE_IP);
        assert_eq!(default.size(), (1 << 20) - 2);

        let small: ServiceIpRange = "10.0.0.7/24".parse().expect("host bits masked");
        assert_eq!(small.as_str(), "10.0.0.0/24");
        assert_eq!(small.size(), 254);
        assert_eq!(small.kubernetes_ip(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(small.item(Ipv4Addr::new(10, 0, 0, 1)), Some(0));
        assert_eq!(small.item(Ipv4Addr::new(10, 0, 0, 254)), Some(253));
        assert_eq!(small.item(Ipv4Addr::new(10, 0, 0, 0)), None, "network");
        assert_eq!(small.item(Ipv4Addr::new(10, 0, 0, 255)), None, "broadcast");
        assert_eq!(small.item(Ipv4Addr::new(10, 0, 1, 1)), None, "outside");
        assert_eq!(small.ip(253), Ipv4Addr::new(10, 0, 0, 254));

        assert_eq!(
            "10.0.0.0/8".parse::<ServiceIpRange>(),
            Err("specified --service-cluster-ip-range is too large; for 32-bit addresses, the mask must be >= 12".to_owned())
        );
        for bad in [
            "10.0.0.0/31",
            "10.0.0.0",
            "fd00::/108",
            "10.0.0.0/33",
            "x/12",
        ] {
            assert!(bad.parse::<ServiceIpRange>().is_err(), "{bad}");
        }
    }
}
