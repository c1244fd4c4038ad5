//! IP prefixes and addresses as the ServiceCIDR controller compares them: containment and overlap within one family (upstream's `servicecidr.ContainsPrefix`, `ContainsAddress`, `OverlapsPrefix` over `netip`).

use std::net::IpAddr;

/// A parsed CIDR: the network address as bits, the prefix length, the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    bits: u128,
    len: u8,
    v6: bool,
}

fn to_bits(ip: IpAddr) -> (u128, bool) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), false),
        IpAddr::V6(v6) => (u128::from(v6), true),
    }
}

fn width(v6: bool) -> u8 {
    if v6 { 128 } else { 32 }
}

fn mask(bits: u128, len: u8, v6: bool) -> u128 {
    let w = width(v6);
    if len == 0 {
        return 0;
    }
    let keep = u32::from(len.min(w));
    let shift = u32::from(w) - keep;
    (bits >> shift) << shift
}

impl Prefix {
    /// Parses `a.b.c.d/n` or `x::y/n`; the host bits are cleared.
    pub fn parse(cidr: &str) -> Option<Self> {
        let (addr, len) = cidr.split_once('/')?;
        let ip: IpAddr = addr.parse().ok()?;
        let len: u8 = len.parse().ok()?;
        let (bits, v6) = to_bits(ip);
        if len > width(v6) {
            return None;
        }
        Some(Self {
            bits: mask(bits, len, v6),
            len,
            v6,
        })
    }

    /// Whether `other` lies entirely inside this prefix (equal prefixes contain each other).
    pub fn contains_prefix(&self, other: &Prefix) -> bool {
        self.v6 == other.v6
            && self.len <= other.len
            && mask(other.bits, self.len, self.v6) == self.bits
    }

    /// Whether `ip` is inside this prefix.
    pub fn contains_address(&self, ip: IpAddr) -> bool {
        let (bits, v6) = to_bits(ip);
        self.v6 == v6 && mask(bits, self.len, v6) == self.bits
    }

    /// Whether the two prefixes share an address.
    pub fn overlaps(&self, other: &Prefix) -> bool {
        self.contains_prefix(other) || other.contains_prefix(self)
    }

    /// Whether this is an IPv6 prefix.
    pub fn is_v6(&self) -> bool {
        self.v6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        Prefix::parse(s).expect(s)
    }

    #[test]
    fn containment_and_overlap_within_a_family() {
        assert!(p("10.96.0.0/12").contains_prefix(&p("10.96.0.0/24")));
        assert!(p("10.96.0.0/12").contains_prefix(&p("10.96.0.0/12")));
        assert!(!p("10.96.0.0/24").contains_prefix(&p("10.96.0.0/12")));
        assert!(p("10.96.0.0/24").overlaps(&p("10.96.0.0/12")));
        assert!(!p("10.96.0.0/24").overlaps(&p("10.97.0.0/24")));
        assert!(!p("10.0.0.0/8").contains_prefix(&p("fd00::/108")));
        assert!(p("10.96.0.5/12").contains_address("10.111.255.255".parse().expect("ip")));
        assert!(!p("10.96.0.0/12").contains_address("10.112.0.0".parse().expect("ip")));
        assert!(p("fd00::/108").contains_address("fd00::5".parse().expect("ip")));
        assert!(!p("fd00::/108").contains_address("10.96.0.1".parse().expect("ip")));
        assert!(p("0.0.0.0/0").contains_prefix(&p("1.2.3.4/32")));
        assert!(Prefix::parse("10.0.0.0/33").is_none());
        assert!(Prefix::parse("10.0.0.0").is_none());
        assert!(p("fd00::/64").is_v6());
    }
}
