//! An IP network (`10.244.0.0/16`, `fd00::/48`) as Go's `net.IPNet`: parsed sloppily, held masked, printed canonically.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IPv4 or IPv6 network: an address with its host bits cleared, and a prefix length.
///
/// Invariant: `addr` has no bits set past `prefix` (as `net.ParseCIDR` returns the network).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// Why a string is not a CIDR (Go's `net.ParseError`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid CIDR address: {0}")]
pub struct ParseCidrError(pub String);

impl Cidr {
    /// The network of `addr`/`prefix` (host bits cleared); `None` for a prefix too long.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Self> {
        let bits = bits_of(addr);
        if u32::from(prefix) > bits {
            return None;
        }
        let value = to_u128(addr) & mask(bits, prefix);
        Some(Self {
            addr: from_u128(value, addr.is_ipv4()),
            prefix,
        })
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether this is an IPv6 network.
    pub fn is_ipv6(&self) -> bool {
        self.addr.is_ipv6()
    }

    /// Address length in bits (32 or 128).
    pub fn bits(&self) -> u32 {
        bits_of(self.addr)
    }

    /// Whether `ip` (of the same family) is inside this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4()
            && to_u128(ip) & mask(self.bits(), self.prefix) == to_u128(self.addr)
    }

    /// Whether the two networks share an address (one contains the other's network), as
    /// upstream checks before filtering a service range out of a cluster range.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.addr) || other.contains(self.addr)
    }

    /// The address as a number in the low bits of a `u128`.
    pub fn value(&self) -> u128 {
        to_u128(self.addr)
    }

    /// The network whose address is `value` (of this network's family) and prefix `prefix`.
    pub fn with_value(&self, value: u128, prefix: u8) -> Option<Cidr> {
        Cidr::new(from_u128(value, self.addr.is_ipv4()), prefix)
    }
}

fn bits_of(addr: IpAddr) -> u32 {
    if addr.is_ipv4() { 32 } else { 128 }
}

/// The mask of `prefix` ones in a `bits`-bit address, as a `u128`.
pub fn mask(bits: u32, prefix: u8) -> u128 {
    let all: u128 = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    let host_bits = bits - u32::from(prefix);
    if host_bits >= 128 {
        0
    } else {
        all & !((1u128 << host_bits) - 1)
    }
}

fn to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_u128(value: u128, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::from(
            u32::try_from(value & u128::from(u32::MAX)).unwrap_or(0),
        ))
    } else {
        IpAddr::V6(Ipv6Addr::from(value))
    }
}

impl FromStr for Cidr {
    type Err = ParseCidrError;

    /// Parses `ip/prefix` as k8s.io/utils' `ParseCIDRSloppy` (IPv4 octets with leading zeros
    /// accepted); the result is the network, host bits cleared.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseCidrError(s.to_owned());
        let (ip, prefix) = s.trim().split_once('/').ok_or_else(err)?;
        let addr = parse_ip_sloppy(ip).ok_or_else(err)?;
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) || prefix.len() > 3 {
            return Err(err());
        }
        let prefix: u8 = prefix.parse().map_err(|_| err())?;
        Cidr::new(addr, prefix).ok_or_else(err)
    }
}

/// Parses an IP address, accepting IPv4 octets with leading zeros (`010.000.000.001`), as
/// k8s.io/utils' `ParseIPSloppy`.
pub fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<&str> = s.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut out = [0u8; 4];
    for (o, part) in out.iter_mut().zip(&octets) {
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *o = part.parse().ok()?;
    }
    Some(IpAddr::V4(Ipv4Addr::from(out)))
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_like_go() {
        struct Case {
            input: &'static str,
            want: Option<&'static str>,
        }
        let cases = [
            Case {
                input: "10.244.0.0/16",
                want: Some("10.244.0.0/16"),
            },
            Case {
                input: "10.244.3.7/16",
                want: Some("10.244.0.0/16"),
            },
            Case {
                input: "010.244.000.000/16",
                want: Some("10.244.0.0/16"),
            },
            Case {
                input: "fd00:10:244::1/48",
                want: Some("fd00:10:244::/48"),
            },
            Case {
                input: "0.0.0.0/0",
                want: Some("0.0.0.0/0"),
            },
            Case {
                input: "10.0.0.0/33",
                want: None,
            },
            Case {
                input: "10.0.0.0",
                want: None,
            },
            Case {
                input: "10.0.0.0/-1",
                want: None,
            },
            Case {
                input: "bogus/8",
                want: None,
            },
            Case {
                input: "::/129",
                want: None,
            },
        ];
        for case in cases {
            let got = case.input.parse::<Cidr>().ok().map(|c| c.to_string());
            assert_eq!(got.as_deref(), case.want, "{}", case.input);
        }
    }

    #[test]
    fn containment_and_overlap() {
        let cluster: Cidr = "10.244.0.0/16".parse().expect("cidr");
        let node: Cidr = "10.244.3.0/24".parse().expect("cidr");
        let service: Cidr = "10.96.0.0/12".parse().expect("cidr");
        assert!(cluster.contains(node.addr()));
        assert!(cluster.overlaps(&node) && node.overlaps(&cluster));
        assert!(!cluster.overlaps(&service));
        let v6: Cidr = "fd00::/64".parse().expect("cidr");
        assert!(!cluster.contains(v6.addr()), "families differ");
    }
}
