//! The annotations a Deployment keeps on itself and its ReplicaSets: revision numbers,
//! revision history, desired and max replicas, and the annotations copied from the Deployment.

use std::num::ParseIntError;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::accessors::{annotation, annotations_mut, deployment_replicas, name, object_key};
use super::strategy::max_surge;

/// Records a ReplicaSet's place in the rollout sequence (also set on the Deployment).
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions a ReplicaSet served (rollbacks re-use a ReplicaSet under a new revision).
pub const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's `spec.replicas` when the ReplicaSet was last scaled by the controller;
/// separates scaling events from rollouts.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` when the ReplicaSet was last scaled; the base of proportional
/// scaling.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// The change cause `kubectl` records; copied from the Deployment like any other annotation.
pub const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";
/// The client-side apply annotation, never copied to ReplicaSets.
pub const LAST_APPLIED_CONFIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The deprecated rollback request annotation (`apps.DeprecatedRollbackTo`).
pub const DEPRECATED_ROLLBACK_TO_ANNOTATION: &str = "deprecated.deployment.rollback.to";
/// Longest `revision-history` value the controller writes (upstream sync.go:
/// `maxRevHistoryLengthInChars`, about 100 revisions).
pub const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;

/// Annotations of the Deployment that are never copied onto its ReplicaSets (and that a
/// rollback leaves on the Deployment), as upstream `annotationsToSkip`.
pub const ANNOTATIONS_TO_SKIP: [&str; 6] = [
    LAST_APPLIED_CONFIG_ANNOTATION,
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    DEPRECATED_ROLLBACK_TO_ANNOTATION,
];

/// Errors reading annotations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The revision annotation of an object is not an integer.
    #[error("parsing the revision {value:?} of {object}")]
    InvalidRevision {
        /// `namespace/name` of the object.
        object: String,
        /// The annotation's value.
        value: String,
        /// Why it does not parse.
        #[source]
        source: ParseIntError,
    },
    /// An annotation that must hold a non-negative 32-bit integer does not.
    #[error("annotation {key} of {object} is not a non-negative int32: {value:?}")]
    InvalidInt32 {
        /// `namespace/name` of the object.
        object: String,
        /// The annotation key.
        key: String,
        /// The annotation's value.
        value: String,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn skip_copy_annotation(key: &str) -> bool {
    ANNOTATIONS_TO_SKIP.contains(&key)
}

/// The revision of an object (0 when the annotation is missing), as upstream `Revision`.
pub fn revision(meta: &ObjectMeta) -> Result<i64> {
    match annotation(meta, REVISION_ANNOTATION) {
        None => Ok(0),
        Some(v) => v.parse::<i64>().map_err(|source| Error::InvalidRevision {
            object: object_key(meta),
            value: v.to_owned(),
            source,
        }),
    }
}

/// The highest revision among `rss`, skipping unparsable ones, as upstream `MaxRevision`.
pub fn max_revision(rss: &[&ReplicaSet]) -> i64 {
    rss.iter()
        .filter_map(|rs| revision(&rs.metadata).ok())
        .fold(0, i64::max)
}

/// The second-highest revision among `rss` (the previous rollout), skipping unparsable ones,
/// as upstream `LastRevision`.
pub fn last_revision(rss: &[&ReplicaSet]) -> i64 {
    let (mut max, mut sec_max) = (0i64, 0i64);
    for v in rss.iter().filter_map(|rs| revision(&rs.metadata).ok()) {
        if v >= max {
            sec_max = max;
            max = v;
        } else if v > sec_max {
            sec_max = v;
        }
    }
    sec_max
}

/// The revision a new ReplicaSet gets: one above every old ReplicaSet's.
pub fn next_revision(old_rss: &[&ReplicaSet]) -> String {
    (max_revision(old_rss).saturating_add(1)).to_string()
}

/// Sets the Deployment's revision annotation; true if it changed, as upstream
/// `SetDeploymentRevision`.
pub fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let annotations = annotations_mut(&mut d.metadata);
    if annotations.get(REVISION_ANNOTATION).map(String::as_str) == Some(revision) {
        return false;
    }
    annotations.insert(REVISION_ANNOTATION.to_owned(), revision.to_owned());
    true
}

/// Copies the Deployment's annotations (except [`ANNOTATIONS_TO_SKIP`]) onto the ReplicaSet;
/// true if any changed, as upstream `copyDeploymentAnnotationsToReplicaSet`.
pub fn copy_deployment_annotations_to_replica_set(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let rs_annotations = annotations_mut(&mut rs.metadata);
    let mut changed = false;
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy_annotation(k) || rs_annotations.get(k) == Some(v) {
            continue;
        }
        rs_annotations.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// Brings a (new) ReplicaSet's annotations up to date: copies the Deployment's annotations,
/// raises its revision to `new_revision` (recording the previous one in `revision-history`,
/// trimmed to `rev_history_limit_in_chars`), and for a ReplicaSet about to be created
/// (`exists == false`) sets the desired/max replicas annotations. True if anything changed.
/// As upstream `SetNewReplicaSetAnnotations`, including giving up (false) when either
/// revision is not an integer.
pub fn set_new_replica_set_annotations(
    d: &Deployment,
    new_rs: &mut ReplicaSet,
    new_revision: &str,
    exists: bool,
    rev_history_limit_in_chars: usize,
) -> bool {
    let mut changed = copy_deployment_annotations_to_replica_set(d, new_rs);
    let rs_name = name(&new_rs.metadata).to_owned();
    let annotations = annotations_mut(&mut new_rs.metadata);
    let old_revision = annotations.get(REVISION_ANNOTATION).cloned();
    let old_revision_int = match old_revision.as_deref() {
        None | Some("") => 0,
        Some(v) => match v.parse::<i64>() {
            Ok(n) => n,
            Err(err) => {
                tracing::warn!(replica_set = %rs_name, %err, "old revision is not an integer");
                return false;
            }
        },
    };
    let new_revision_int = match new_revision.parse::<i64>() {
        Ok(n) => n,
        Err(err) => {
            tracing::warn!(replica_set = %rs_name, %err, "new revision is not an integer");
            return false;
        }
    };
    if old_revision_int < new_revision_int {
        annotations.insert(REVISION_ANNOTATION.to_owned(), new_revision.to_owned());
        changed = true;
        tracing::trace!(replica_set = %rs_name, revision = new_revision, "updating revision");
    }
    // A ReplicaSet that already had a revision and gets a newer one is being rolled back to:
    // keep the revisions it served before.
    if let Some(old_revision) = old_revision.filter(|_| old_revision_int < new_revision_int) {
        let history = annotations
            .get(REVISION_HISTORY_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        if history.is_empty() {
            annotations.insert(REVISION_HISTORY_ANNOTATION.to_owned(), old_revision);
        } else {
            let old_revisions: Vec<&str> = history.split(',').collect();
            let mut total_len = history.len() + old_revision.len() + 1;
            let mut start = 0;
            while total_len > rev_history_limit_in_chars && start < old_revisions.len() {
                total_len -= old_revisions[start].len() + 1;
                start += 1;
            }
            if total_len <= rev_history_limit_in_chars {
                let mut kept: Vec<&str> = old_revisions[start..].to_vec();
                kept.push(&old_revision);
                let joined = kept.join(",");
                annotations.insert(REVISION_HISTORY_ANNOTATION.to_owned(), joined);
            } else {
                tracing::warn!(
                    replica_set = %rs_name,
                    limit = rev_history_limit_in_chars,
                    "not appending revision: history length limit reached"
                );
            }
        }
    }
    if !exists {
        let replicas = deployment_replicas(d);
        if set_replicas_annotations(new_rs, replicas, replicas.saturating_add(max_surge(d))) {
            changed = true;
        }
    }
    changed
}

/// Replaces the Deployment's annotations with the ReplicaSet's, keeping the Deployment's
/// [`ANNOTATIONS_TO_SKIP`]; done only when rolling back to that ReplicaSet, as upstream
/// `SetDeploymentAnnotationsTo`.
pub fn set_deployment_annotations_to(d: &mut Deployment, rollback_to: &ReplicaSet) {
    let mut kept = d.metadata.annotations.take().unwrap_or_default();
    kept.retain(|k, _| skip_copy_annotation(k));
    for (k, v) in rollback_to.metadata.annotations.iter().flatten() {
        if !skip_copy_annotation(k) {
            kept.insert(k.clone(), v.clone());
        }
    }
    d.metadata.annotations = Some(kept);
}

/// Parses a non-negative int32 annotation: `Ok(None)` when missing, as upstream
/// `getNonNegativeInt32FromAnnotation`.
pub fn non_negative_int32_annotation(meta: &ObjectMeta, key: &str) -> Result<Option<i32>> {
    let Some(value) = annotation(meta, key) else {
        return Ok(None);
    };
    let invalid = || Error::InvalidInt32 {
        object: object_key(meta),
        key: key.to_owned(),
        value: value.to_owned(),
    };
    // Go's ParseUint(v, 10, 31): digits only, no sign.
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    value.parse::<i32>().map(Some).map_err(|_| invalid())
}

/// Like [`non_negative_int32_annotation`], logging and returning `None` on bad values, as
/// upstream `getNonNegativeInt32FromAnnotationVerbose`.
fn non_negative_int32_annotation_verbose(meta: &ObjectMeta, key: &str) -> Option<i32> {
    match non_negative_int32_annotation(meta, key) {
        Ok(v) => v,
        Err(err) => {
            tracing::debug!(%err, "ignoring annotation");
            None
        }
    }
}

/// The `desired-replicas` annotation of a ReplicaSet, if present and valid.
pub fn desired_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    non_negative_int32_annotation_verbose(&rs.metadata, DESIRED_REPLICAS_ANNOTATION)
}

/// The `max-replicas` annotation of a ReplicaSet, if present and valid.
pub fn max_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    non_negative_int32_annotation_verbose(&rs.metadata, MAX_REPLICAS_ANNOTATION)
}

/// Sets the `desired-replicas` and `max-replicas` annotations; true if either changed, as
/// upstream `SetReplicasAnnotations`.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let annotations = annotations_mut(&mut rs.metadata);
    let mut updated = false;
    for (key, value) in [
        (DESIRED_REPLICAS_ANNOTATION, desired.to_string()),
        (MAX_REPLICAS_ANNOTATION, max.to_string()),
    ] {
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.to_owned(), value);
            updated = true;
        }
    }
    updated
}

/// Whether [`set_replicas_annotations`] would change anything, as upstream
/// `ReplicasAnnotationsNeedUpdate`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    let Some(annotations) = rs.metadata.annotations.as_ref() else {
        return true;
    };
    annotations.get(DESIRED_REPLICAS_ANNOTATION) != Some(&desired.to_string())
        || annotations.get(MAX_REPLICAS_ANNOTATION) != Some(&max.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::test_support::{deployment, rs, with_annotations};
    use super::*;

    #[test]
    fn revision_parsing() {
        struct Case {
            name: &'static str,
            annotations: &'static [(&'static str, &'static str)],
            want: Option<i64>,
        }
        let cases = [
            Case {
                name: "missing annotation is revision 0",
                annotations: &[],
                want: Some(0),
            },
            Case {
                name: "number",
                annotations: &[(REVISION_ANNOTATION, "12")],
                want: Some(12),
            },
            Case {
                name: "garbage",
                annotations: &[(REVISION_ANNOTATION, "x1")],
                want: None,
            },
        ];
        for c in cases {
            let r = with_annotations(rs("foo", 1), c.annotations);
            assert_eq!(revision(&r.metadata).ok(), c.want, "{}", c.name);
        }
    }

    #[test]
    fn max_and_last_revision() {
        struct Case {
            name: &'static str,
            revisions: &'static [&'static str],
            max: i64,
            last: i64,
        }
        let cases = [
            Case {
                name: "none",
                revisions: &[],
                max: 0,
                last: 0,
            },
            Case {
                name: "one",
                revisions: &["3"],
                max: 3,
                last: 0,
            },
            Case {
                name: "unordered, with garbage",
                revisions: &["2", "bad", "5", "4"],
                max: 5,
                last: 4,
            },
            Case {
                name: "duplicate max",
                revisions: &["5", "5", "1"],
                max: 5,
                last: 5,
            },
        ];
        for c in cases {
            let owned: Vec<ReplicaSet> = c
                .revisions
                .iter()
                .map(|r| with_annotations(rs("foo", 1), &[(REVISION_ANNOTATION, r)]))
                .collect();
            let refs: Vec<&ReplicaSet> = owned.iter().collect();
            assert_eq!(max_revision(&refs), c.max, "{}: max", c.name);
            assert_eq!(last_revision(&refs), c.last, "{}: last", c.name);
            assert_eq!(next_revision(&refs), (c.max + 1).to_string(), "{}", c.name);
        }
    }

    #[test]
    fn set_new_replica_set_annotations_keeps_bounded_history() {
        // Upstream TestAnnotationUtils/SetNewReplicaSetAnnotations.
        let mut d = deployment("nginx", 1);
        annotations_mut(&mut d.metadata).insert(REVISION_ANNOTATION.into(), "1".into());
        let mut r = rs("nginx-abc", 0);
        for i in 10..20 {
            let next = (i + 1).to_string();
            set_new_replica_set_annotations(&d, &mut r, &next, true, 5);
            if i >= 12 {
                assert_eq!(
                    annotation(&r.metadata, REVISION_HISTORY_ANNOTATION),
                    Some(format!("{},{}", i - 1, i).as_str()),
                    "history after revision {next}"
                );
            }
            assert_eq!(
                annotation(&r.metadata, REVISION_ANNOTATION),
                Some(next.as_str())
            );
        }
        // The Deployment's own revision is never copied.
        assert_eq!(annotation(&r.metadata, REVISION_ANNOTATION), Some("20"));
    }

    #[test]
    fn set_new_replica_set_annotations_table() {
        struct Case {
            name: &'static str,
            deployment_annotations: &'static [(&'static str, &'static str)],
            rs_annotations: &'static [(&'static str, &'static str)],
            new_revision: &'static str,
            exists: bool,
            changed: bool,
            want: &'static [(&'static str, &'static str)],
        }
        let cases = [
            Case {
                name: "new replica set gets revision, replicas annotations and the change cause",
                deployment_annotations: &[
                    (CHANGE_CAUSE_ANNOTATION, "kubectl set image"),
                    (LAST_APPLIED_CONFIG_ANNOTATION, "{}"),
                    (REVISION_ANNOTATION, "7"),
                ],
                rs_annotations: &[],
                new_revision: "3",
                exists: false,
                changed: true,
                want: &[
                    (CHANGE_CAUSE_ANNOTATION, "kubectl set image"),
                    (REVISION_ANNOTATION, "3"),
                    (DESIRED_REPLICAS_ANNOTATION, "10"),
                    (MAX_REPLICAS_ANNOTATION, "13"),
                ],
            },
            Case {
                name: "existing replica set already up to date",
                deployment_annotations: &[(CHANGE_CAUSE_ANNOTATION, "x")],
                rs_annotations: &[(CHANGE_CAUSE_ANNOTATION, "x"), (REVISION_ANNOTATION, "3")],
                new_revision: "3",
                exists: true,
                changed: false,
                want: &[(CHANGE_CAUSE_ANNOTATION, "x"), (REVISION_ANNOTATION, "3")],
            },
            Case {
                name: "never lowers a revision",
                deployment_annotations: &[],
                rs_annotations: &[(REVISION_ANNOTATION, "9")],
                new_revision: "4",
                exists: true,
                changed: false,
                want: &[(REVISION_ANNOTATION, "9")],
            },
            Case {
                name: "rollback records the previous revision",
                deployment_annotations: &[],
                rs_annotations: &[
                    (REVISION_ANNOTATION, "2"),
                    (REVISION_HISTORY_ANNOTATION, "1"),
                ],
                new_revision: "5",
                exists: true,
                changed: true,
                want: &[
                    (REVISION_ANNOTATION, "5"),
                    (REVISION_HISTORY_ANNOTATION, "1,2"),
                ],
            },
            Case {
                name: "unparsable old revision gives up",
                deployment_annotations: &[(CHANGE_CAUSE_ANNOTATION, "x")],
                rs_annotations: &[(REVISION_ANNOTATION, "two")],
                new_revision: "5",
                exists: true,
                changed: false,
                want: &[(CHANGE_CAUSE_ANNOTATION, "x"), (REVISION_ANNOTATION, "two")],
            },
        ];
        for c in cases {
            let mut d = with_annotations(deployment("foo", 10), c.deployment_annotations);
            d.spec
                .as_mut()
                .and_then(|s| s.strategy.as_mut())
                .and_then(|s| s.rolling_update.as_mut())
                .expect("rolling update")
                .max_surge =
                Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(3));
            let d = d;
            let mut r = with_annotations(rs("foo-1", 0), c.rs_annotations);
            let changed =
                set_new_replica_set_annotations(&d, &mut r, c.new_revision, c.exists, 2000);
            assert_eq!(changed, c.changed, "{}", c.name);
            let want: BTreeMap<String, String> = c
                .want
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            assert_eq!(
                r.metadata.annotations.unwrap_or_default(),
                want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn replicas_annotations() {
        // Upstream TestAnnotationUtils/SetReplicasAnnotations and TestReplicasAnnotationsNeedUpdate.
        let mut r = rs("hello", 1);
        assert!(replicas_annotations_need_update(&r, 10, 20));
        assert!(set_replicas_annotations(&mut r, 10, 11));
        assert_eq!(
            annotation(&r.metadata, DESIRED_REPLICAS_ANNOTATION),
            Some("10")
        );
        assert_eq!(annotation(&r.metadata, MAX_REPLICAS_ANNOTATION), Some("11"));
        assert!(!set_replicas_annotations(&mut r, 10, 11));

        struct Case {
            name: &'static str,
            annotations: Option<&'static [(&'static str, &'static str)]>,
            expected: bool,
        }
        let cases = [
            Case {
                name: "test Annotations nil",
                annotations: None,
                expected: true,
            },
            Case {
                name: "test desiredReplicas update",
                annotations: Some(&[
                    (DESIRED_REPLICAS_ANNOTATION, "8"),
                    (MAX_REPLICAS_ANNOTATION, "20"),
                ]),
                expected: true,
            },
            Case {
                name: "test maxReplicas update",
                annotations: Some(&[
                    (DESIRED_REPLICAS_ANNOTATION, "10"),
                    (MAX_REPLICAS_ANNOTATION, "16"),
                ]),
                expected: true,
            },
            Case {
                name: "test needn't update",
                annotations: Some(&[
                    (DESIRED_REPLICAS_ANNOTATION, "10"),
                    (MAX_REPLICAS_ANNOTATION, "20"),
                ]),
                expected: false,
            },
        ];
        for c in cases {
            let r = match c.annotations {
                None => rs("hello", 1),
                Some(a) => with_annotations(rs("hello", 1), a),
            };
            assert_eq!(
                replicas_annotations_need_update(&r, 10, 20),
                c.expected,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn non_negative_int32_annotation_table() {
        // Upstream TestGetNonNegativeInt32FromAnnotation.
        struct Case {
            name: &'static str,
            value: Option<String>,
            want: Result<Option<i32>, ()>,
        }
        let cases = [
            Case {
                name: "invalid empty",
                value: None,
                want: Ok(None),
            },
            Case {
                name: "invalid",
                value: Some("invalid".into()),
                want: Err(()),
            },
            Case {
                name: "invalid negative",
                value: Some("-1".into()),
                want: Err(()),
            },
            Case {
                name: "invalid plus sign",
                value: Some("+1".into()),
                want: Err(()),
            },
            Case {
                name: "valid zero",
                value: Some("0".into()),
                want: Ok(Some(0)),
            },
            Case {
                name: "valid",
                value: Some("13".into()),
                want: Ok(Some(13)),
            },
            Case {
                name: "valid max",
                value: Some(i32::MAX.to_string()),
                want: Ok(Some(i32::MAX)),
            },
            Case {
                name: "invalid max out of range",
                value: Some((i32::MAX as u32 + 1).to_string()),
                want: Err(()),
            },
            Case {
                name: "invalid max out of range 2",
                value: Some((u64::from(u32::MAX) + 1).to_string()),
                want: Err(()),
            },
        ];
        for c in cases {
            let mut meta = ObjectMeta::default();
            let a = annotations_mut(&mut meta);
            a.insert("foo".into(), "2".into());
            if let Some(v) = c.value {
                a.insert("test".into(), v);
            }
            let got = non_negative_int32_annotation(&meta, "test").map_err(|_| ());
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn rollback_copies_annotations_except_skipped_ones() {
        let mut d = with_annotations(
            deployment("foo", 1),
            &[
                (REVISION_ANNOTATION, "4"),
                (LAST_APPLIED_CONFIG_ANNOTATION, "{}"),
                ("team", "a"),
            ],
        );
        let r = with_annotations(
            rs("foo-1", 1),
            &[
                (REVISION_ANNOTATION, "1"),
                (CHANGE_CAUSE_ANNOTATION, "v1"),
                (DESIRED_REPLICAS_ANNOTATION, "1"),
            ],
        );
        set_deployment_annotations_to(&mut d, &r);
        let got = d.metadata.annotations.unwrap_or_default();
        let want: BTreeMap<String, String> = [
            (REVISION_ANNOTATION, "4"),
            (LAST_APPLIED_CONFIG_ANNOTATION, "{}"),
            (CHANGE_CAUSE_ANNOTATION, "v1"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn set_deployment_revision_reports_change() {
        let mut d = deployment("foo", 1);
        assert!(set_deployment_revision(&mut d, "2"));
        assert!(!set_deployment_revision(&mut d, "2"));
        assert_eq!(annotation(&d.metadata, REVISION_ANNOTATION), Some("2"));
    }
}
