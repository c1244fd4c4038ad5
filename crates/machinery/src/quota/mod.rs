//! Resource quota accounting shared by the ResourceQuota controller and quota admission (kubernetes `pkg/quota/v1`).
//!
//! Start at [`evaluator::Evaluator`]: per group/resource, which quota names an object charges
//! ([`pods`], [`services`], [`persistent_volume_claims`], or an object count), whether a
//! quota's scopes select it, and its usage. [`resource_list`] is the arithmetic over
//! ResourceLists (`quota.Add`, `Mask`, `LessThanOrEqual`, …) both sides share.

pub mod evaluator;
pub mod persistent_volume_claims;
pub mod pods;
pub mod resource_list;
pub mod services;

pub use evaluator::{
    Evaluator, Object, Operation, counted_group_resource, object_count_name, scope_selectors,
};
pub use resource_list::{Amount, ResourceList};
