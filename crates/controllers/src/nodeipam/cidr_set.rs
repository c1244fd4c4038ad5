//! The set of node-sized blocks of a cluster CIDR, with a bitmap of those allocated, as upstream's `nodeipam/ipam/cidrset`.

use super::cidr::{Cidr, mask};

/// A node block's size may be at most this many bits longer than the cluster prefix for IPv6
/// (the bitmap is uncompressed), as upstream's `clusterSubnetMaxDiff`.
pub const CLUSTER_SUBNET_MAX_DIFF: u8 = 16;

/// Why a CIDR set operation failed (upstream's errors and messages).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CidrSetError {
    /// Every block is allocated (`ErrCIDRRangeNoCIDRsRemaining`).
    #[error(
        "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range"
    )]
    NoCidrsRemaining,
    /// The node mask is too long for an IPv6 cluster CIDR (`ErrCIDRSetSubNetTooBig`).
    #[error("New CIDR set failed; the node CIDR size is too big")]
    SubNetTooBig,
    /// The node mask is shorter than the cluster's.
    #[error(
        "controller: invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family"
    )]
    NodeMaskTooShort,
    /// The CIDR does not overlap the cluster CIDR.
    #[error("cidr {cidr} is out the range of cluster cidr {cluster}")]
    OutOfRange {
        /// The CIDR asked about.
        cidr: String,
        /// The cluster CIDR.
        cluster: String,
    },
    /// The CIDR's families differ from the cluster's.
    #[error("CIDR: {ip}/{node_mask} is out of the range of CIDR allocator")]
    IndexOutOfRange {
        /// The address.
        ip: String,
        /// The node mask size.
        node_mask: u8,
    },
}

/// The node-sized blocks of one cluster CIDR, as upstream's `CidrSet`: allocated in order
/// from a moving candidate (so released blocks are reused last), occupied on demand for
/// nodes that already have one, released when nodes go.
///
/// Invariants: `allocated` is the number of set bits of `used`; `next_candidate < max_cidrs`.
#[derive(Clone, Debug)]
pub struct CidrSet {
    /// The cluster CIDR.
    cluster: Cidr,
    /// The node blocks' prefix length.
    node_mask_size: u8,
    /// How many node blocks the cluster CIDR holds.
    max_cidrs: usize,
    /// How many are allocated.
    allocated: usize,
    /// The block the next allocation tries first.
    next_candidate: usize,
    /// One bit per block.
    used: Vec<u64>,
}

impl CidrSet {
    /// The blocks of `/node_mask_size` in `cluster`, as upstream's `NewCIDRSet`.
    pub fn new(cluster: Cidr, node_mask_size: u8) -> Result<Self, CidrSetError> {
        if node_mask_size < cluster.prefix() || u32::from(node_mask_size) > cluster.bits() {
            return Err(CidrSetError::NodeMaskTooShort);
        }
        let diff = node_mask_size - cluster.prefix();
        if cluster.is_ipv6() && diff > CLUSTER_SUBNET_MAX_DIFF {
            return Err(CidrSetError::SubNetTooBig);
        }
        // IPv4 diffs are at most 32; the bitmap of a /0 split in /32s is 512 MiB, which only a
        // misconfiguration asks for — cap at 2^24 blocks (upstream's effective IPv4 limit with
        // a /8 and /32 is the same order).
        if diff > 24 {
            return Err(CidrSetError::SubNetTooBig);
        }
        let max_cidrs = 1usize << diff;
        Ok(Self {
            cluster,
            node_mask_size,
            max_cidrs,
            allocated: 0,
            next_candidate: 0,
            used: vec![0; max_cidrs.div_ceil(64)],
        })
    }

    /// The cluster CIDR.
    pub fn cluster(&self) -> Cidr {
        self.cluster
    }

    /// How many blocks are allocated.
    pub fn allocated(&self) -> usize {
        self.allocated
    }

    /// How many blocks the set holds.
    pub fn max_cidrs(&self) -> usize {
        self.max_cidrs
    }

    fn bit(&self, i: usize) -> bool {
        self.used[i / 64] & (1 << (i % 64)) != 0
    }

    fn set_bit(&mut self, i: usize, on: bool) {
        if on {
            self.used[i / 64] |= 1 << (i % 64);
        } else {
            self.used[i / 64] &= !(1 << (i % 64));
        }
    }

    /// The block at `index`, as upstream's `indexToCIDRBlock`.
    fn block(&self, index: usize) -> Cidr {
        let shift = self.cluster.bits() - u32::from(self.node_mask_size);
        let value = self.cluster.value() | ((index as u128) << shift);
        self.cluster
            .with_value(value, self.node_mask_size)
            .unwrap_or(self.cluster)
    }

    /// Allocates the next free block, as upstream's `AllocateNext`.
    pub fn allocate_next(&mut self) -> Result<Cidr, CidrSetError> {
        if self.allocated == self.max_cidrs {
            return Err(CidrSetError::NoCidrsRemaining);
        }
        let mut candidate = self.next_candidate;
        for _ in 0..self.max_cidrs {
            if !self.bit(candidate) {
                break;
            }
            candidate = (candidate + 1) % self.max_cidrs;
        }
        self.next_candidate = (candidate + 1) % self.max_cidrs;
        self.set_bit(candidate, true);
        self.allocated += 1;
        Ok(self.block(candidate))
    }

    /// The index of the block holding `ip`, as upstream's `getIndexForIP`.
    fn index_of(&self, cidr: &Cidr, value: u128) -> Result<usize, CidrSetError> {
        let shift = self.cluster.bits() - u32::from(self.node_mask_size);
        let index = (self.cluster.value() ^ value) >> shift;
        if index >= self.max_cidrs as u128 {
            return Err(CidrSetError::IndexOutOfRange {
                ip: cidr.addr().to_string(),
                node_mask: self.node_mask_size,
            });
        }
        Ok(index as usize)
    }

    /// The first and last block indices `cidr` covers, as upstream's
    /// `getBeginningAndEndIndices`.
    fn indices(&self, cidr: &Cidr) -> Result<(usize, usize), CidrSetError> {
        if cidr.is_ipv6() != self.cluster.is_ipv6() || !self.cluster.overlaps(cidr) {
            return Err(CidrSetError::OutOfRange {
                cidr: cidr.to_string(),
                cluster: self.cluster.to_string(),
            });
        }
        if self.cluster.prefix() >= cidr.prefix() {
            // The CIDR covers the whole cluster range.
            return Ok((0, self.max_cidrs - 1));
        }
        let bits = self.cluster.bits();
        let node_mask = mask(bits, self.node_mask_size);
        let begin = self.index_of(cidr, cidr.value() & node_mask)?;
        let last = cidr.value() | (!mask(bits, cidr.prefix()) & full(bits));
        let end = self.index_of(cidr, last & node_mask)?;
        Ok((begin, end))
    }

    /// Marks every block `cidr` covers as used (already used is fine), as upstream's
    /// `Occupy`.
    pub fn occupy(&mut self, cidr: &Cidr) -> Result<(), CidrSetError> {
        let (begin, end) = self.indices(cidr)?;
        for i in begin..=end {
            if !self.bit(i) {
                self.set_bit(i, true);
                self.allocated += 1;
            }
        }
        Ok(())
    }

    /// Marks every block `cidr` covers as free, as upstream's `Release`.
    pub fn release(&mut self, cidr: &Cidr) -> Result<(), CidrSetError> {
        let (begin, end) = self.indices(cidr)?;
        for i in begin..=end {
            if self.bit(i) {
                self.set_bit(i, false);
                self.allocated -= 1;
            }
        }
        Ok(())
    }

    /// Whether the block holding `cidr`'s address is allocated (tests, diagnostics).
    pub fn is_occupied(&self, cidr: &Cidr) -> bool {
        self.indices(cidr)
            .is_ok_and(|(b, e)| (b..=e).all(|i| self.bit(i)))
    }
}

/// All ones in a `bits`-bit address.
fn full(bits: u32) -> u128 {
    if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        s.parse().expect("cidr")
    }

    /// Upstream's `TestCIDRSetFullyAllocated` and `TestIndexToCIDRBlock` in spirit.
    #[test]
    fn allocates_in_order_until_full() {
        let mut set = CidrSet::new(cidr("127.123.234.0/30"), 30).expect("set");
        assert_eq!(
            set.allocate_next().expect("one").to_string(),
            "127.123.234.0/30"
        );
        assert_eq!(set.allocate_next(), Err(CidrSetError::NoCidrsRemaining));
        set.release(&cidr("127.123.234.0/30")).expect("release");
        assert_eq!(
            set.allocate_next().expect("again").to_string(),
            "127.123.234.0/30"
        );

        let mut set = CidrSet::new(cidr("10.244.0.0/16"), 24).expect("set");
        let got: Vec<String> = (0..3)
            .map(|_| set.allocate_next().expect("block").to_string())
            .collect();
        assert_eq!(got, ["10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"]);
        set.release(&cidr("10.244.1.0/24")).expect("release");
        assert_eq!(
            set.allocate_next().expect("next").to_string(),
            "10.244.3.0/24",
            "released blocks are reused last"
        );
        assert_eq!(set.allocated(), 3);

        let mut v6 = CidrSet::new(cidr("fd00:10:244::/48"), 64).expect("set");
        assert_eq!(
            v6.allocate_next().expect("block").to_string(),
            "fd00:10:244::/64"
        );
        assert_eq!(
            v6.allocate_next().expect("block").to_string(),
            "fd00:10:244:1::/64"
        );
    }

    /// Upstream's `TestOccupy` table.
    #[test]
    fn occupy_like_upstream() {
        struct Case {
            name: &'static str,
            cluster: &'static str,
            subnet_mask: u8,
            occupy: &'static str,
            want_begin: usize,
            want_end: usize,
            want_err: bool,
        }
        let cases = [
            Case {
                name: "whole range",
                cluster: "127.0.0.0/8",
                subnet_mask: 16,
                occupy: "127.0.0.0/8",
                want_begin: 0,
                want_end: 255,
                want_err: false,
            },
            Case {
                name: "bigger than the range",
                cluster: "127.0.0.0/8",
                subnet_mask: 16,
                occupy: "127.0.0.0/2",
                want_begin: 0,
                want_end: 255,
                want_err: false,
            },
            Case {
                name: "one block",
                cluster: "127.0.0.0/8",
                subnet_mask: 16,
                occupy: "127.0.0.0/16",
                want_begin: 0,
                want_end: 0,
                want_err: false,
            },
            Case {
                name: "lower half",
                cluster: "127.0.0.0/8",
                subnet_mask: 16,
                occupy: "127.0.0.0/9",
                want_begin: 0,
                want_end: 127,
                want_err: false,
            },
            Case {
                name: "inside a block",
                cluster: "127.0.0.0/8",
                subnet_mask: 16,
                occupy: "127.0.0.0/28",
                want_begin: 0,
                want_end: 0,
                want_err: false,
            },
            Case {
                name: "upper blocks",
                cluster: "127.0.0.0/8",
                subnet_mask: 16,
                occupy: "127.255.0.0/9",
                want_begin: 128,
                want_end: 255,
                want_err: false,
            },
            Case {
                name: "out of range",
                cluster: "127.0.0.0/8",
                subnet_mask: 16,
                occupy: "10.0.0.0/16",
                want_begin: 0,
                want_end: 0,
                want_err: true,
            },
        ];
        for case in cases {
            let set = CidrSet::new(cidr(case.cluster), case.subnet_mask);
            let Ok(mut set) = set else {
                assert!(case.want_err, "{}: set creation failed", case.name);
                continue;
            };
            let occupied = set.occupy(&cidr(case.occupy));
            assert_eq!(
                occupied.is_err(),
                case.want_err,
                "{}: {occupied:?}",
                case.name
            );
            if case.want_err {
                continue;
            }
            assert_eq!(
                set.allocated(),
                case.want_end - case.want_begin + 1,
                "{}",
                case.name
            );
            assert!(
                set.bit(case.want_begin) && set.bit(case.want_end),
                "{}",
                case.name
            );
            set.release(&cidr(case.occupy)).expect("release");
            assert_eq!(set.allocated(), 0, "{}", case.name);
        }
    }

    #[test]
    fn invalid_sets() {
        assert_eq!(
            CidrSet::new(cidr("fd00::/32"), 64).err(),
            Some(CidrSetError::SubNetTooBig)
        );
        assert_eq!(
            CidrSet::new(cidr("10.0.0.0/24"), 16).err(),
            Some(CidrSetError::NodeMaskTooShort)
        );
    }
}
