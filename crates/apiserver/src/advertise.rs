//! The address the server advertises in the `default/kubernetes` Endpoints and EndpointSlice, as kube-apiserver's `--advertise-address` default (`utilnet.ResolveBindAddress`): the bind address, unless it is loopback or unspecified, in which case the address of the interface the default route leaves by.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// The address to advertise for a server listening on `listen`: `listen` itself when it is a
/// routable address; otherwise the host's default-route address (found by asking the kernel
/// which source address a datagram to a public address would leave from; connecting a UDP
/// socket sends nothing); otherwise (no route: an offline machine) the loopback address of
/// `listen`'s family, which EndpointSlice validation refuses, so no slice is kept then.
pub fn resolve_advertise_address(listen: IpAddr) -> IpAddr {
    if !listen.is_loopback() && !listen.is_unspecified() {
        return listen;
    }
    let (bind, probe, loopback): (SocketAddr, SocketAddr, IpAddr) = if listen.is_ipv6() {
        (
            (Ipv6Addr::UNSPECIFIED, 0).into(),
            // 2001:4860:4860::8888, a public address; nothing is sent.
            (
                Ipv6Addr::new(0x2001, 0x4860, 0x4860, 0, 0, 0, 0, 0x8888),
                53,
            )
                .into(),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        )
    } else {
        (
            (Ipv4Addr::UNSPECIFIED, 0).into(),
            (Ipv4Addr::new(8, 8, 8, 8), 53).into(),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        )
    };
    UdpSocket::bind(bind)
        .and_then(|s| s.connect(probe).and_then(|()| s.local_addr()))
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
        .unwrap_or(loopback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routable_listen_address_is_advertised_as_is() {
        let ip: IpAddr = "192.0.2.10".parse().expect("ip");
        assert_eq!(resolve_advertise_address(ip), ip);
    }

    #[test]
    fn loopback_and_wildcard_listeners_advertise_a_non_loopback_address_or_loopback() {
        for listen in [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        ] {
            let got = resolve_advertise_address(listen);
            assert!(got.is_ipv4(), "{got}");
            assert!(!got.is_unspecified(), "{got}");
            // With a default route: its interface's address; without one: loopback.
            let routed = UdpSocket::bind("0.0.0.0:0")
                .and_then(|s| s.connect("8.8.8.8:53").and_then(|()| s.local_addr()))
                .is_ok();
            assert_eq!(got.is_loopback(), !routed, "{got}");
        }
    }
}
