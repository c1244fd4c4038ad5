//! Slices grouped by their port list, as upstream's `PortMapKey` and `NewPortMapKey`.

use std::cmp::Ordering;

use k8s_openapi::api::discovery::v1::EndpointPort;

/// A canonical key for a list of endpoint ports: every EndpointSlice holds endpoints that
/// share one list of ports, so slices and desired endpoints are grouped by it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortMapKey(String);

impl PortMapKey {
    /// The key of `ports` (sorted first, as upstream's `NewPortMapKey` sorts them in place;
    /// absent and empty lists share a key).
    pub fn new(ports: &[EndpointPort]) -> Self {
        let mut sorted = ports.to_vec();
        sort_ports(&mut sorted);
        let mut key = String::new();
        for p in &sorted {
            key.push_str(&format!(
                "{}|{}|{}|{};",
                p.name.as_deref().map_or("-", |n| n),
                p.port.map_or_else(|| "-".to_owned(), |n| n.to_string()),
                p.protocol.as_deref().unwrap_or("-"),
                p.app_protocol.as_deref().unwrap_or("-"),
            ));
        }
        Self(key)
    }
}

/// Sorts endpoint ports into one canonical order (by name, number, protocol, app protocol).
/// Upstream orders them by their spew hash; any fixed order serves the same purpose: equal
/// lists compare and hash equal however the Service lists them.
pub fn sort_ports(ports: &mut [EndpointPort]) {
    ports.sort_by(compare_ports);
}

fn compare_ports(a: &EndpointPort, b: &EndpointPort) -> Ordering {
    (&a.name, a.port, &a.protocol, &a.app_protocol).cmp(&(
        &b.name,
        b.port,
        &b.protocol,
        &b.app_protocol,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, number: i32) -> EndpointPort {
        EndpointPort {
            name: Some(name.to_owned()),
            port: Some(number),
            protocol: Some("TCP".to_owned()),
            app_protocol: None,
        }
    }

    #[test]
    fn order_does_not_matter_content_does() {
        let a = PortMapKey::new(&[port("http", 80), port("https", 443)]);
        let b = PortMapKey::new(&[port("https", 443), port("http", 80)]);
        assert_eq!(a, b);
        assert_ne!(
            a,
            PortMapKey::new(&[port("http", 8080), port("https", 443)])
        );
        assert_eq!(PortMapKey::new(&[]), PortMapKey::new(&Vec::new()));
        let mut ports = vec![port("b", 1), port("a", 2)];
        sort_ports(&mut ports);
        assert_eq!(ports[0].name.as_deref(), Some("a"));
    }
}
