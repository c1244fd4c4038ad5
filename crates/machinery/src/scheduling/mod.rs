//! Scheduling predicates shared by controllers, as upstream's `k8s.io/component-helpers/scheduling/corev1`.
//!
//! - [`node_affinity`]: a pod's required node affinity (`nodeSelector` plus
//!   `requiredDuringSchedulingIgnoredDuringExecution`) matched against a node, as
//!   `nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)`.
//! - [`taints`]: taints and tolerations (`ToleratesTaint`, `FindMatchingUntoleratedTaint`,
//!   `AddOrUpdateTolerationInPodSpec`).
//! - [`device_taints`]: DRA device taints and tolerations (`resourceclaim.ToleratesTaint`, the
//!   allocator's `taintPreventsAllocation`).
//!
//! The DaemonSet controller decides with these which nodes run a daemon pod, exactly as the
//! scheduler would place it.

pub mod device_taints;
pub mod node_affinity;
pub mod taints;

pub use node_affinity::{NODE_NAME_FIELD, RequiredNodeAffinity};
pub use taints::{
    add_or_update_toleration, find_matching_untolerated_taint, match_toleration, tolerates_taint,
};
