//! Addresses, CIDRs and ports as apimachinery's validation helpers check them (`IsValidCIDR`, `IsValidPortNum`, `IsValidPortName`, `IsWildcardDNS1123Subdomain`).

use std::net::IpAddr;

use kcm_machinery::labels::is_dns1123_subdomain;

/// Upstream's message for an unparsable CIDR.
pub const INVALID_CIDR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// Upstream's message for a port number out of range.
pub const INVALID_PORT_NUM: &str = "must be between 1 and 65535, inclusive";

/// Upstream's message for a malformed wildcard host.
pub const WILDCARD_DNS1123_SUBDOMAIN_MESSAGE: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// An IP address, accepting IPv4 with leading zeros as Go's `ParseIPSloppy` does.
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<&str> = s.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut bytes = [0u8; 4];
    for (b, o) in bytes.iter_mut().zip(&octets) {
        if o.is_empty() || o.len() > 3 || !o.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        *b = o.parse().ok()?;
    }
    Some(IpAddr::from(bytes))
}

/// A CIDR: its network address (host bits cleared) and prefix length, or `None` when it
/// does not parse (`ParseCIDRSloppy`).
pub fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, len) = s.split_once('/')?;
    let ip = parse_ip(ip)?;
    if len.is_empty() || len.len() > 3 || !len.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let len: u8 = len.parse().ok()?;
    let network = match ip {
        IpAddr::V4(v4) if len <= 32 => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::from((u32::from(v4) & mask).to_be_bytes())
        }
        IpAddr::V6(v6) if len <= 128 => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::from((u128::from(v6) & mask).to_be_bytes())
        }
        _ => return None,
    };
    Some((network, len))
}

/// Whether `inner` lies inside `outer` and is strictly smaller (NetworkPolicy's `except`).
pub fn strict_subset(outer: (IpAddr, u8), inner: (IpAddr, u8)) -> bool {
    let contains = match (outer.0, inner.0) {
        (IpAddr::V4(o), IpAddr::V4(i)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(outer.1)).unwrap_or(0);
            u32::from(i) & mask == u32::from(o)
        }
        (IpAddr::V6(o), IpAddr::V6(i)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(outer.1)).unwrap_or(0);
            u128::from(i) & mask == u128::from(o)
        }
        _ => false,
    };
    contains && outer.1 < inner.1
}

/// Upstream's `IsValidPortNum`.
pub fn port_num_errors(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![INVALID_PORT_NUM.to_owned()]
    }
}

/// Upstream's `IsValidPortName`: an IANA service name.
pub fn port_name_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters".to_owned());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned(),
        );
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_owned());
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens".to_owned());
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_owned());
    }
    errs
}

/// Upstream's `IsWildcardDNS1123Subdomain`.
pub fn is_wildcard_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.strip_prefix("*.").is_some_and(is_dns1123_subdomain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_sloppily_and_nest() {
        assert_eq!(
            parse_cidr("10.96.1.7/12"),
            Some(("10.96.0.0".parse().expect("ip"), 12))
        );
        assert_eq!(parse_cidr("010.001.0.0/16").map(|c| c.1), Some(16));
        assert!(parse_cidr("10.0.0.0/33").is_none());
        assert!(parse_cidr("10.0.0.0").is_none());
        assert!(parse_cidr("fd00::/108").is_some());
        let outer = parse_cidr("10.0.0.0/8").expect("cidr");
        assert!(strict_subset(
            outer,
            parse_cidr("10.1.0.0/16").expect("cidr")
        ));
        assert!(!strict_subset(
            outer,
            parse_cidr("10.0.0.0/8").expect("cidr")
        ));
        assert!(!strict_subset(
            outer,
            parse_cidr("11.0.0.0/16").expect("cidr")
        ));
    }

    #[test]
    fn ports() {
        assert!(port_num_errors(443).is_empty());
        assert_eq!(port_num_errors(0), [INVALID_PORT_NUM]);
        assert!(port_name_errors("http-metrics").is_empty());
        assert_eq!(
            port_name_errors("80"),
            ["must contain at least one letter (a-z)"]
        );
        assert_eq!(port_name_errors("a--b").len(), 1);
        assert!(is_wildcard_dns1123_subdomain("*.example.com"));
        assert!(!is_wildcard_dns1123_subdomain("a.*.example.com"));
    }
}
