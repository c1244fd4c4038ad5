//! ControllerRevision history for the DaemonSet and StatefulSet controllers, as upstream's `pkg/controller/history`.
//!
//! A DaemonSet or StatefulSet records each version of its pod template as a ControllerRevision
//! owned by it. Where to start:
//! - [`hash`]: revision names (`<owner>-<hash>`) and the data hash ([`hash_controller_revision`]).
//! - [`go_json`]: the bytes of revision data as Go writes them, which names and equality use.
//! - [`revisions`]: building ([`new_controller_revision`]), sorting and comparing revisions.
//! - [`controller_history`]: [`History`], listing a controller's revisions from a cache and
//!   creating (with collision counts), renumbering, deleting, adopting and releasing them.
//! - [`client`]: the [`RevisionClient`] seam those writes go through, with a recording fake.

pub mod client;
pub mod controller_history;
pub mod go_json;
pub mod hash;
pub mod revisions;

pub use client::{
    ApiRevisionClient, FakeRevisionClient, RevisionAction, RevisionClient, RevisionPatcher,
};
pub use controller_history::History;
pub use go_json::pod_template_value;
pub use hash::{
    CONTROLLER_REVISION_HASH_LABEL, controller_revision_name, hash_controller_revision,
    hash_controller_revision_raw,
};
pub use revisions::{
    compare_by_revision, equal_revision, find_equal_revisions, max_revision,
    new_controller_revision, next_revision, revision_data_bytes, sort_controller_revisions,
};
