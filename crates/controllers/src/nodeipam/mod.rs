//! The node IPAM controller: pod CIDRs for Nodes from the cluster CIDR, as kube-controller-manager's (with the range allocator, the one that needs no cloud provider).
//!
//! Where to start: [`RangeAllocator`] (kubernetes `pkg/controller/nodeipam`, `ipam/range_allocator.go`).
//! It runs only with `--allocate-node-cidrs`; `--cluster-cidr` (one CIDR, or two of different
//! families) is split into `/--node-cidr-mask-size` blocks (24 for IPv4, 64 for IPv6 by
//! default) tracked in a [`CidrSet`] each. Blocks of Nodes that already have them are occupied
//! before anything is allocated; each Node without gets the next free block of every cluster
//! CIDR, patched into `spec.podCIDR`/`spec.podCIDRs`; a deleted Node's blocks are freed.
//!
//! - [`cidr`]: an IP network, as Go's `net.IPNet`.
//! - [`cidr_set`]: upstream's `cidrset`.
//! - [`config`]: the flags, validated as `startNodeIpamController`.
//! - `range_allocator`: the controller.
//! - [`client`]: the seam for the Node patch, with a recording fake.

pub mod cidr;
pub mod cidr_set;
pub mod client;
pub mod config;
mod range_allocator;

pub use cidr::Cidr;
pub use cidr_set::{CidrSet, CidrSetError};
pub use client::{ApiNodeCidrClient, FakeNodeCidrClient, NodeCidrClient};
pub use config::{NodeIpamConfig, NodeIpamFlags};
pub use range_allocator::{
    CIDR_UPDATE_RETRIES, CIDR_UPDATE_WORKERS, CONTROLLER_ALIAS, CONTROLLER_NAME, EVENT_COMPONENT,
    QUEUE_NAME, RangeAllocator, RangeAllocatorEventHandlers,
};

use kcm_machinery::controller::api_status::error_message;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a Node's CIDRs could not be handled.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A cluster CIDR could not be made into a set.
    #[error("cluster CIDR {cidr}: {source}")]
    CidrSet {
        /// The cluster CIDR.
        cidr: String,
        /// Why.
        #[source]
        source: CidrSetError,
    },
    /// A Node's pod CIDR does not parse.
    #[error("failed to parse node {node}, CIDR {cidr}")]
    ParseNodeCidr {
        /// The Node.
        node: String,
        /// The CIDR.
        cidr: String,
    },
    /// A Node holds more CIDRs than there are cluster CIDRs.
    #[error(
        "node:{node} has an allocated cidr: {cidr} at index:{index} that does not exist in cluster cidrs configuration"
    )]
    CidrIndex {
        /// The Node.
        node: String,
        /// The CIDR.
        cidr: String,
        /// Its index.
        index: usize,
    },
    /// A Node's CIDR is outside its cluster CIDR.
    #[error("failed to mark cidr[{cidr}] at idx [{index}] as occupied for node: {node}: {source}")]
    Occupy {
        /// The Node.
        node: String,
        /// The CIDR.
        cidr: String,
        /// Its index.
        index: usize,
        /// Why.
        #[source]
        source: CidrSetError,
    },
    /// Releasing a CIDR failed.
    #[error("error when releasing CIDR {cidr}: {source}")]
    Release {
        /// The CIDR.
        cidr: String,
        /// Why.
        #[source]
        source: CidrSetError,
    },
    /// A cluster CIDR is full.
    #[error("failed to allocate cidr from cluster cidr at idx:{index}: {source}")]
    Allocate {
        /// The cluster CIDR's index.
        index: usize,
        /// Why.
        #[source]
        source: CidrSetError,
    },
    /// The Node vanished between allocation and patch.
    #[error("node {node} not found")]
    NodeNotFound {
        /// The Node.
        node: String,
    },
    /// Patching the Node failed every attempt.
    #[error("failed to patch node {node} CIDRs {cidrs}: {message}", message = .source.as_ref().map(|e| error_message(e)).unwrap_or_default())]
    Patch {
        /// The Node.
        node: String,
        /// The CIDRs.
        cidrs: String,
        /// The last client error.
        #[source]
        source: Option<Box<kube::Error>>,
    },
}
