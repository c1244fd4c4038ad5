//! Building, ordering and comparing ControllerRevisions, as upstream's `NewControllerRevision`, `SortControllerRevisions`, `EqualRevision`, `FindEqualRevisions` and the StatefulSet's `nextRevision`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::core::GroupVersionKind;
use serde_json::Value;

use super::go_json::marshal;
use super::hash::{
    CONTROLLER_REVISION_HASH_LABEL, controller_revision_name, hash_controller_revision_raw,
};
use crate::controller::controller_ref::new_controller_ref;

/// A revision of `parent` (of kind `parent_kind`) holding `data`, numbered `revision`,
/// labelled with `template_labels` and its hash, controlled by `parent`, and named
/// `<parent>-<hash of data and collision count>`, as upstream's `NewControllerRevision`.
/// The namespace is left to the create call.
pub fn new_controller_revision(
    parent: &ObjectMeta,
    parent_kind: &GroupVersionKind,
    template_labels: Option<&BTreeMap<String, String>>,
    data: Value,
    revision: i64,
    collision_count: Option<i32>,
) -> ControllerRevision {
    let hash = hash_controller_revision_raw(&marshal(&data), collision_count);
    let mut labels = template_labels.cloned().unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.to_owned(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(controller_revision_name(
                parent.name.as_deref().unwrap_or_default(),
                &hash,
            )),
            labels: Some(labels),
            owner_references: Some(vec![new_controller_ref(parent, parent_kind)]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// The bytes of a revision's `data`, as Go's `json.Marshal` writes them (empty for none): what
/// upstream compares as `Data.Raw`.
pub fn revision_data_bytes(revision: &ControllerRevision) -> Vec<u8> {
    revision
        .data
        .as_ref()
        .map(|d| marshal(&d.0))
        .unwrap_or_default()
}

/// Upstream's `byRevision.Less`: by `revision`, then creation time, then name.
pub fn compare_by_revision(a: &ControllerRevision, b: &ControllerRevision) -> Ordering {
    a.revision
        .cmp(&b.revision)
        .then_with(|| {
            let t = |r: &ControllerRevision| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
            t(a).cmp(&t(b))
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// Sorts `revisions` by [`compare_by_revision`], stably, as `SortControllerRevisions`.
pub fn sort_controller_revisions(revisions: &mut [Arc<ControllerRevision>]) {
    revisions.sort_by(|a, b| compare_by_revision(a, b));
}

/// The hash label of a revision when it parses as a 32-bit integer, as `EqualRevision` reads
/// it (safe-encoded hashes usually do not, and are then ignored).
fn numeric_hash(revision: &ControllerRevision) -> Option<u32> {
    let label = revision
        .metadata
        .labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH_LABEL)?;
    label.parse::<i32>().ok().map(|h| h as u32)
}

/// Whether two revisions hold the same data (a differing numeric hash label settles it
/// first), as upstream's `EqualRevision`.
pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    if let (Some(ha), Some(hb)) = (numeric_hash(a), numeric_hash(b))
        && ha != hb
    {
        return false;
    }
    revision_data_bytes(a) == revision_data_bytes(b)
}

/// The revisions equal to `needle`, in order, as `FindEqualRevisions`.
pub fn find_equal_revisions(
    revisions: &[Arc<ControllerRevision>],
    needle: &ControllerRevision,
) -> Vec<Arc<ControllerRevision>> {
    revisions
        .iter()
        .filter(|r| equal_revision(r, needle))
        .cloned()
        .collect()
}

/// The revision number after the last of `revisions` (sorted), 1 for none, as the StatefulSet
/// controller's `nextRevision`.
pub fn next_revision(revisions: &[Arc<ControllerRevision>]) -> i64 {
    revisions.last().map_or(1, |r| r.revision + 1)
}

/// The highest revision number among `revisions` (0 for none), as the DaemonSet controller's
/// `maxRevision`.
pub fn max_revision(revisions: &[Arc<ControllerRevision>]) -> i64 {
    revisions.iter().map(|r| r.revision).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;

    fn parent() -> ObjectMeta {
        ObjectMeta {
            name: Some("ss1".into()),
            namespace: Some("default".into()),
            uid: Some("uid-1".into()),
            ..ObjectMeta::default()
        }
    }

    fn gvk() -> GroupVersionKind {
        GroupVersionKind::gvk("apps", "v1", "StatefulSet")
    }

    fn rev(name: &str, revision: i64, data: Value, created: i64) -> Arc<ControllerRevision> {
        Arc::new(ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(
                    Timestamp::from_second(created).unwrap_or(Timestamp::UNIX_EPOCH),
                )),
                ..ObjectMeta::default()
            },
            data: Some(RawExtension(data)),
            revision,
        })
    }

    #[test]
    fn new_controller_revision_names_labels_and_owns() {
        let labels: BTreeMap<String, String> = [("app".to_owned(), "web".to_owned())].into();
        let data = json!({"spec": {"template": {"metadata": {"labels": {"foo": "bar"}}}}});
        let r = new_controller_revision(&parent(), &gvk(), Some(&labels), data, 3, None);
        assert_eq!(r.metadata.name.as_deref(), Some("ss1-86669dc9cf"));
        let l = r.metadata.labels.clone().unwrap_or_default();
        assert_eq!(l.get("app").map(String::as_str), Some("web"));
        assert_eq!(
            l.get(CONTROLLER_REVISION_HASH_LABEL).map(String::as_str),
            Some("86669dc9cf")
        );
        let owner = r.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owner.len(), 1);
        assert_eq!(owner[0].kind, "StatefulSet");
        assert_eq!(owner[0].controller, Some(true));
        assert_eq!(r.revision, 3);
        let bumped = new_controller_revision(&parent(), &gvk(), None, json!({"a": 1}), 1, Some(1));
        let plain = new_controller_revision(&parent(), &gvk(), None, json!({"a": 1}), 1, None);
        assert_ne!(
            bumped.metadata.name, plain.metadata.name,
            "the collision count renames"
        );
    }

    /// Upstream's `TestSortControllerRevisions`: by revision, then time, then name.
    #[test]
    fn sort_by_revision_then_time_then_name() {
        let mut revs = vec![
            rev("c", 2, json!(1), 10),
            rev("b", 1, json!(1), 20),
            rev("a", 1, json!(1), 20),
            rev("z", 1, json!(1), 5),
        ];
        sort_controller_revisions(&mut revs);
        let names: Vec<_> = revs
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        assert_eq!(names, ["z", "a", "b", "c"]);
        assert_eq!(next_revision(&revs), 3);
        assert_eq!(next_revision(&[]), 1);
        assert_eq!(max_revision(&revs), 2);
    }

    /// Upstream's `TestEqualRevision` and `TestFindEqualRevisions`.
    #[test]
    fn equal_revisions_compare_data() {
        let a = rev("a", 1, json!({"x": 1}), 0);
        let b = rev("b", 2, json!({"x": 1}), 0);
        let c = rev("c", 3, json!({"x": 2}), 0);
        assert!(equal_revision(&a, &b));
        assert!(!equal_revision(&a, &c));
        let with_hash = |r: &ControllerRevision, h: &str| {
            let mut r = r.clone();
            r.metadata.labels =
                Some([(CONTROLLER_REVISION_HASH_LABEL.to_owned(), h.to_owned())].into());
            r
        };
        assert!(
            !equal_revision(&with_hash(&a, "1"), &with_hash(&b, "2")),
            "numeric hashes differ"
        );
        assert!(
            equal_revision(&with_hash(&a, "x1"), &with_hash(&b, "x2")),
            "non-numeric hashes are ignored"
        );
        let found = find_equal_revisions(&[a.clone(), c.clone(), b.clone()], &a);
        let names: Vec<_> = found
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }
}
