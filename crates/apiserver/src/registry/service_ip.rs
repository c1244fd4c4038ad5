//! The Service CIDR (`10.96.0.0/12`) and the errors of a requested cluster IP; allocation itself is [`super::service_alloc`]'s bitmap.

use std::net::Ipv4Addr;

/// The service CIDR's network address (kube-apiserver's default `--service-cluster-ip-range`).
pub const SERVICE_CIDR_BASE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 0);
/// The service CIDR's prefix length.
pub const SERVICE_CIDR_PREFIX: u32 = 12;
/// The service CIDR as upstream prints it in allocation errors.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The first address of the range, reserved for the `default/kubernetes` Service.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_not_in_range_message_is_upstreams() {
        assert_eq!(
            AllocError::NotInRange("1.1.1.1".to_owned()).to_string(),
            "the provided IP (1.1.1.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        );
    }
}
