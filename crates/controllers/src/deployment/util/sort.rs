//! Orders of ReplicaSets: by creation time, by size (ties to the older or newer one), and by
//! revision, as upstream `controller.ReplicaSetsByCreationTimestamp`, `ReplicaSetsBySizeOlder`,
//! `ReplicaSetsBySizeNewer` and `deploymentutil.ReplicaSetsByRevision`.
//!
//! Every order is total (ties end at the name), so sorting never depends on input order.

use std::cmp::Ordering;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;

use super::accessors::{name, rs_replicas};
use super::annotations::revision;

/// Creation time (a missing one sorts first, like Go's zero time), then name.
fn creation_key(rs: &ReplicaSet) -> (Option<Timestamp>, &str) {
    (
        rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
        name(&rs.metadata),
    )
}

/// Older first; equal creation times order by name.
pub fn cmp_by_creation_timestamp(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    creation_key(a).cmp(&creation_key(b))
}

/// Larger first; equal sizes put the older first.
pub fn cmp_by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    rs_replicas(b)
        .cmp(&rs_replicas(a))
        .then_with(|| cmp_by_creation_timestamp(a, b))
}

/// Larger first; equal sizes put the newer first.
pub fn cmp_by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    rs_replicas(b)
        .cmp(&rs_replicas(a))
        .then_with(|| cmp_by_creation_timestamp(b, a))
}

/// Lower revision first; equal revisions order by creation time. An unparsable revision counts
/// as 0 like a missing one (upstream falls back to creation time for that pair only, which is
/// not a total order).
pub fn cmp_by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let rev = |rs: &ReplicaSet| revision(&rs.metadata).unwrap_or(0);
    rev(a)
        .cmp(&rev(b))
        .then_with(|| cmp_by_creation_timestamp(a, b))
}

/// Sorts oldest first.
pub fn sort_by_creation_timestamp(rss: &mut [&ReplicaSet]) {
    rss.sort_by(|a, b| cmp_by_creation_timestamp(a, b));
}

/// Sorts largest first, older first among equals (scale-down order).
pub fn sort_by_size_older(rss: &mut [&ReplicaSet]) {
    rss.sort_by(|a, b| cmp_by_size_older(a, b));
}

/// Sorts largest first, newer first among equals (scale-up order).
pub fn sort_by_size_newer(rss: &mut [&ReplicaSet]) {
    rss.sort_by(|a, b| cmp_by_size_newer(a, b));
}

/// Sorts lowest revision first.
pub fn sort_by_revision(rss: &mut [&ReplicaSet]) {
    rss.sort_by(|a, b| cmp_by_revision(a, b));
}

#[cfg(test)]
mod tests {
    use super::super::annotations::REVISION_ANNOTATION;
    use super::super::test_support::{rs, rs_at, ts, with_annotations};
    use super::*;

    fn names(rss: &[&ReplicaSet]) -> Vec<String> {
        rss.iter().map(|r| name(&r.metadata).to_owned()).collect()
    }

    #[test]
    fn sort_orders() {
        let t0 = ts(2016, 5, 20, 0, 0, 0);
        let t1 = ts(2016, 5, 20, 1, 0, 0);
        let t2 = ts(2016, 5, 20, 2, 0, 0);
        let a = rs_at("a", 3, t1);
        let b = rs_at("b", 3, t0);
        let c = rs_at("c", 5, t2);
        let d = rs_at("d", 3, t1);
        let no_ts = rs("e", 1);

        struct Case<'a> {
            name: &'static str,
            sort: fn(&mut [&ReplicaSet]),
            input: Vec<&'a ReplicaSet>,
            want: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "by creation timestamp, ties by name, missing timestamp first",
                sort: sort_by_creation_timestamp,
                input: vec![&c, &d, &a, &no_ts, &b],
                want: &["e", "b", "a", "d", "c"],
            },
            Case {
                name: "by size, older first",
                sort: sort_by_size_older,
                input: vec![&d, &a, &b, &no_ts, &c],
                want: &["c", "b", "a", "d", "e"],
            },
            Case {
                name: "by size, newer first",
                sort: sort_by_size_newer,
                input: vec![&b, &a, &d, &no_ts, &c],
                want: &["c", "d", "a", "b", "e"],
            },
        ];
        for c in cases {
            let mut v = c.input;
            (c.sort)(&mut v);
            assert_eq!(names(&v), c.want, "{}", c.name);
        }
    }

    #[test]
    fn sort_by_revision_falls_back_to_creation() {
        let t = |m| ts(2020, 1, 1, 0, m, 0);
        let r = |n: &str, m, rev: &str| {
            let x = rs_at(n, 0, t(m));
            if rev.is_empty() {
                x
            } else {
                with_annotations(x, &[(REVISION_ANNOTATION, rev)])
            }
        };
        struct Case {
            name: &'static str,
            input: Vec<ReplicaSet>,
            want: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "by revision",
                input: vec![
                    r("a", 1, "3"),
                    r("b", 2, "1"),
                    r("c", 3, "4"),
                    r("d", 4, "2"),
                ],
                want: &["b", "d", "a", "c"],
            },
            Case {
                name: "missing revision is 0",
                input: vec![r("a", 1, "1"), r("b", 2, "")],
                want: &["b", "a"],
            },
            Case {
                name: "equal revisions by creation",
                input: vec![r("b", 2, "1"), r("a", 1, "1")],
                want: &["a", "b"],
            },
            Case {
                name: "garbage does not break the order",
                input: vec![r("a", 1, "2"), r("b", 2, "x"), r("c", 3, "1")],
                want: &["b", "c", "a"],
            },
        ];
        for c in cases {
            let mut v: Vec<&ReplicaSet> = c.input.iter().collect();
            sort_by_revision(&mut v);
            assert_eq!(names(&v), c.want, "{}", c.name);
        }
    }
}
