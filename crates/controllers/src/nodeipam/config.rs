//! The node IPAM configuration from kube-controller-manager's flags, validated as upstream's `startNodeIpamController` (`validateCIDRs`, `setNodeCIDRMaskSizes`).

use super::cidr::Cidr;

/// The node mask size for IPv4 clusters when no flag sets one.
pub const DEFAULT_NODE_MASK_CIDR_IPV4: u8 = 24;
/// The node mask size for IPv6 clusters when no flag sets one.
pub const DEFAULT_NODE_MASK_CIDR_IPV6: u8 = 64;
/// The only `--cidr-allocator-type` that works without a cloud provider.
pub const RANGE_ALLOCATOR: &str = "RangeAllocator";
/// The cloud allocator type (refused: kcm has no cloud provider).
pub const CLOUD_ALLOCATOR: &str = "CloudAllocator";

/// The flags the node IPAM controller reads (their kube-controller-manager names in the
/// field docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeIpamFlags {
    /// `--cluster-cidr`: one CIDR, or two of different families.
    pub cluster_cidr: String,
    /// `--cidr-allocator-type`.
    pub cidr_allocator_type: String,
    /// `--node-cidr-mask-size` (0: unset).
    pub node_cidr_mask_size: i32,
    /// `--node-cidr-mask-size-ipv4` (0: unset).
    pub node_cidr_mask_size_ipv4: i32,
    /// `--node-cidr-mask-size-ipv6` (0: unset).
    pub node_cidr_mask_size_ipv6: i32,
    /// `--service-cluster-ip-range`: blocks overlapping it are never handed out.
    pub service_cluster_ip_range: String,
}

/// What the range allocator is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIpamConfig {
    /// The cluster CIDRs (one per family).
    pub cluster_cidrs: Vec<Cidr>,
    /// The node mask size of each cluster CIDR, by index.
    pub node_mask_sizes: Vec<u8>,
    /// The service CIDR, if given and parseable.
    pub service_cidr: Option<Cidr>,
}

/// Why the flags do not make a configuration (upstream's messages).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A cluster CIDR does not parse.
    #[error("{0}")]
    Parse(String),
    /// `--cluster-cidr` is empty.
    #[error(
        "kube-controller-manager: --cluster-cidr must be specified when --allocate-node-cidrs is set"
    )]
    MissingClusterCidr,
    /// Two CIDRs of one family.
    #[error(
        "len of ClusterCIDRs=={0} and they are not configured as dual stack (at least one from each IPFamily"
    )]
    NotDualStack(usize),
    /// More than two CIDRs.
    #[error("length of clusterCIDRs is:{0} more than max allowed of 2")]
    TooMany(usize),
    /// A mask flag not allowed in this configuration.
    #[error("{0}")]
    Mask(&'static str),
    /// A node mask shorter than its cluster CIDR's.
    #[error(
        "controller: invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family"
    )]
    NodeMaskTooShort,
    /// A cloud allocator without a cloud provider.
    #[error(
        "--cidr-allocator-type is set to 'CloudAllocator' but cloud provider is not configured"
    )]
    CloudAllocator,
    /// An allocator type kcm does not know.
    #[error("invalid CIDR allocator type: {0:?}")]
    UnknownAllocator(String),
}

impl NodeIpamFlags {
    /// The configuration these flags describe, checked as kube-controller-manager does.
    pub fn config(&self) -> Result<NodeIpamConfig, ConfigError> {
        match self.cidr_allocator_type.as_str() {
            "" | RANGE_ALLOCATOR => {}
            CLOUD_ALLOCATOR => return Err(ConfigError::CloudAllocator),
            other => return Err(ConfigError::UnknownAllocator(other.to_owned())),
        }
        let cluster_cidrs = validate_cidrs(&self.cluster_cidr)?;
        let service_cidr = match self.service_cluster_ip_range.trim() {
            "" => None,
            range => match range.parse::<Cidr>() {
                Ok(cidr) => Some(cidr),
                Err(err) => {
                    tracing::info!(cidr = range, %err, "Warning: unsuccessful parsing of service CIDR");
                    None
                }
            },
        };
        let node_mask_sizes = self.node_cidr_mask_sizes(&cluster_cidrs)?;
        for (cidr, size) in cluster_cidrs.iter().zip(&node_mask_sizes) {
            if cidr.prefix() > *size {
                return Err(ConfigError::NodeMaskTooShort);
            }
        }
        Ok(NodeIpamConfig {
            cluster_cidrs,
            node_mask_sizes,
            service_cidr,
        })
    }

    /// The node mask size of each cluster CIDR, as upstream's `setNodeCIDRMaskSizes`.
    fn node_cidr_mask_sizes(&self, cidrs: &[Cidr]) -> Result<Vec<u8>, ConfigError> {
        let size = |v: i32| {
            u8::try_from(v)
                .map_err(|_| ConfigError::Mask("node CIDR mask sizes must be between 0 and 128"))
        };
        let sorted = |v4: u8, v6: u8| {
            cidrs
                .iter()
                .map(|c| if c.is_ipv6() { v6 } else { v4 })
                .collect()
        };
        let (mut v4, mut v6) = (DEFAULT_NODE_MASK_CIDR_IPV4, DEFAULT_NODE_MASK_CIDR_IPV6);
        if cidrs.len() > 1 {
            if self.node_cidr_mask_size != 0 {
                return Err(ConfigError::Mask(
                    "usage of --node-cidr-mask-size is not allowed with dual-stack clusters",
                ));
            }
            if self.node_cidr_mask_size_ipv4 != 0 {
                v4 = size(self.node_cidr_mask_size_ipv4)?;
            }
            if self.node_cidr_mask_size_ipv6 != 0 {
                v6 = size(self.node_cidr_mask_size_ipv6)?;
            }
            return Ok(sorted(v4, v6));
        }
        let single_stack_v6 = cidrs.first().is_some_and(Cidr::is_ipv6);
        if self.node_cidr_mask_size != 0 {
            if self.node_cidr_mask_size_ipv4 != 0 || self.node_cidr_mask_size_ipv6 != 0 {
                return Err(ConfigError::Mask(
                    "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags",
                ));
            }
            let mask = size(self.node_cidr_mask_size)?;
            return Ok(sorted(mask, mask));
        }
        if self.node_cidr_mask_size_ipv4 != 0 {
            if single_stack_v6 {
                return Err(ConfigError::Mask(
                    "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster",
                ));
            }
            v4 = size(self.node_cidr_mask_size_ipv4)?;
        }
        if self.node_cidr_mask_size_ipv6 != 0 {
            if !single_stack_v6 {
                return Err(ConfigError::Mask(
                    "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster",
                ));
            }
            v6 = size(self.node_cidr_mask_size_ipv6)?;
        }
        Ok(sorted(v4, v6))
    }
}

/// Parses `--cluster-cidr`, as upstream's `validateCIDRs`: comma-separated, at most two, of
/// different families when two.
fn validate_cidrs(list: &str) -> Result<Vec<Cidr>, ConfigError> {
    if list.trim().is_empty() {
        return Err(ConfigError::MissingClusterCidr);
    }
    let cidrs = list
        .trim()
        .split(',')
        .map(|s| {
            s.parse::<Cidr>()
                .map_err(|e| ConfigError::Parse(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let dual_stack = cidrs.iter().any(Cidr::is_ipv6) && cidrs.iter().any(|c| !c.is_ipv6());
    if cidrs.len() > 1 && !dual_stack {
        return Err(ConfigError::NotDualStack(cidrs.len()));
    }
    if cidrs.len() > 2 {
        return Err(ConfigError::TooMany(cidrs.len()));
    }
    Ok(cidrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(cluster: &str, mask: i32, v4: i32, v6: i32) -> NodeIpamFlags {
        NodeIpamFlags {
            cluster_cidr: cluster.to_owned(),
            cidr_allocator_type: RANGE_ALLOCATOR.to_owned(),
            node_cidr_mask_size: mask,
            node_cidr_mask_size_ipv4: v4,
            node_cidr_mask_size_ipv6: v6,
            service_cluster_ip_range: String::new(),
        }
    }

    /// Upstream's `TestSetNodeCIDRMaskSizes` and `validateCIDRs` cases.
    #[test]
    fn mask_sizes_like_upstream() {
        struct Case {
            name: &'static str,
            flags: NodeIpamFlags,
            want: Result<Vec<u8>, ()>,
        }
        let cases = [
            Case {
                name: "ipv4 default",
                flags: flags("10.244.0.0/16", 0, 0, 0),
                want: Ok(vec![24]),
            },
            Case {
                name: "ipv4 mask flag",
                flags: flags("10.244.0.0/16", 26, 0, 0),
                want: Ok(vec![26]),
            },
            Case {
                name: "ipv4 family flag",
                flags: flags("10.244.0.0/16", 0, 25, 0),
                want: Ok(vec![25]),
            },
            Case {
                name: "ipv6 flag on ipv4",
                flags: flags("10.244.0.0/16", 0, 0, 64),
                want: Err(()),
            },
            Case {
                name: "both kinds of flag",
                flags: flags("10.244.0.0/16", 24, 24, 0),
                want: Err(()),
            },
            Case {
                name: "ipv6 default",
                flags: flags("fd00::/48", 0, 0, 0),
                want: Ok(vec![64]),
            },
            Case {
                name: "ipv4 flag on ipv6",
                flags: flags("fd00::/48", 0, 24, 0),
                want: Err(()),
            },
            Case {
                name: "dual stack defaults",
                flags: flags("10.244.0.0/16,fd00::/48", 0, 0, 0),
                want: Ok(vec![24, 64]),
            },
            Case {
                name: "dual stack family flags",
                flags: flags("fd00::/48,10.244.0.0/16", 0, 26, 60),
                want: Ok(vec![60, 26]),
            },
            Case {
                name: "dual stack with mask flag",
                flags: flags("10.244.0.0/16,fd00::/48", 24, 0, 0),
                want: Err(()),
            },
            Case {
                name: "two ipv4",
                flags: flags("10.244.0.0/16,10.245.0.0/16", 0, 0, 0),
                want: Err(()),
            },
            Case {
                name: "three",
                flags: flags("10.244.0.0/16,fd00::/48,10.1.0.0/16", 0, 0, 0),
                want: Err(()),
            },
            Case {
                name: "missing",
                flags: flags("", 0, 0, 0),
                want: Err(()),
            },
            Case {
                name: "garbage",
                flags: flags("10.244.0.0", 0, 0, 0),
                want: Err(()),
            },
            Case {
                name: "node mask shorter than cluster",
                flags: flags("10.244.0.0/16", 12, 0, 0),
                want: Err(()),
            },
        ];
        for case in cases {
            let got = case
                .flags
                .config()
                .map(|c| c.node_mask_sizes)
                .map_err(|_| ());
            assert_eq!(got, case.want, "{}", case.name);
        }
        let mut cloud = flags("10.244.0.0/16", 0, 0, 0);
        cloud.cidr_allocator_type = CLOUD_ALLOCATOR.to_owned();
        assert_eq!(cloud.config(), Err(ConfigError::CloudAllocator));
        assert_eq!(
            flags("", 0, 0, 0)
                .config()
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some(
                "kube-controller-manager: --cluster-cidr must be specified when --allocate-node-cidrs is set"
            )
        );
    }

    #[test]
    fn service_range_is_optional() {
        let mut f = flags("10.244.0.0/16", 0, 0, 0);
        f.service_cluster_ip_range = "10.96.0.0/12".to_owned();
        assert_eq!(
            f.config()
                .expect("ok")
                .service_cidr
                .map(|c| c.to_string())
                .as_deref(),
            Some("10.96.0.0/12")
        );
        f.service_cluster_ip_range = "garbage".to_owned();
        assert_eq!(
            f.config().expect("ok").service_cidr,
            None,
            "a bad service range is only a warning"
        );
    }
}
