//! Field management for server-side apply: `managedFields` ownership, apply with conflicts, and `Update` tracking.
//!
//! A documented subset of upstream's field manager (structured-merge-diff):
//! - `PATCH` with `application/apply-patch+yaml` creates the object or merges the
//!   configuration into it ([`apply::apply`]); the applier's `Apply` entry in `managedFields`
//!   lists exactly the fields it set; fields it stops setting are removed unless another
//!   manager owns them; changing a field another manager owns is a 409 conflict unless
//!   `force=true`.
//! - Ownership is tracked once an object carries `managedFields` (it was created or touched
//!   by an apply): from then on every update records an `Update` entry for its field manager
//!   ([`managed::record_update`]). Objects never applied to carry none (upstream tracks every
//!   object); the first apply to such an object credits its existing fields to the
//!   `before-first-apply` manager, as upstream does for objects without `managedFields`, so
//!   changing them conflicts.
//! - List semantics come from the strategic-merge patch table ([`walk`]): associative lists
//!   keyed by the patch merge key, sets, atomic lists; objects are granular (upstream treats
//!   a few structs, e.g. label selectors, as atomic).

pub mod apply;
pub mod fieldset;
pub mod managed;
pub mod walk;
