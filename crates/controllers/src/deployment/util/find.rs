//! Telling a Deployment's new ReplicaSet (the one running its current template) from the old
//! ones, as upstream `FindNewReplicaSet`, `FindOldReplicaSets` and `FindActiveOrLatest`.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kcm_machinery::labels::Selector;

use super::accessors::{deployment_template, rs_replicas, rs_template};
use super::counts::filter_active_replica_sets;
use super::sort::{cmp_by_creation_timestamp, sort_by_creation_timestamp};
use super::template::TemplateMatcher;

/// The ReplicaSet whose template equals the Deployment's (ignoring the hash label). Should
/// several match (possible after upgrades, kubernetes#40415) the oldest wins, so the choice is
/// deterministic.
pub fn find_new_replica_set<'a>(d: &Deployment, rss: &[&'a ReplicaSet]) -> Option<&'a ReplicaSet> {
    let zero = PodTemplateSpec::default();
    let matcher = TemplateMatcher::new(deployment_template(d).unwrap_or(&zero));
    rss.iter()
        .copied()
        .filter(|rs| matcher.matches(rs_template(rs).unwrap_or(&zero)))
        .min_by(|a, b| cmp_by_creation_timestamp(a, b))
}

/// The old ReplicaSets: `(those with spec.replicas != 0, all of them)`, each oldest first.
/// The new ReplicaSet (see [`find_new_replica_set`]) is in neither; a duplicate of it that is
/// not the oldest counts as old.
pub fn find_old_replica_sets<'a>(
    d: &Deployment,
    rss: &[&'a ReplicaSet],
) -> (Vec<&'a ReplicaSet>, Vec<&'a ReplicaSet>) {
    let new_rs = find_new_replica_set(d, rss);
    let mut all: Vec<&ReplicaSet> = rss
        .iter()
        .copied()
        .filter(|rs| !new_rs.is_some_and(|n| std::ptr::eq(n, *rs)))
        .collect();
    sort_by_creation_timestamp(&mut all);
    let required = all
        .iter()
        .copied()
        .filter(|rs| rs_replicas(rs) != 0)
        .collect();
    (required, all)
}

/// The only active ReplicaSet (`spec.replicas > 0`) or, with none active, the new one or else
/// the newest old one; `None` when several are active (they need proportional scaling) or
/// there are no ReplicaSets. As upstream `FindActiveOrLatest`.
pub fn find_active_or_latest<'a>(
    new_rs: Option<&'a ReplicaSet>,
    old_rss: &[&'a ReplicaSet],
) -> Option<&'a ReplicaSet> {
    if new_rs.is_none() && old_rss.is_empty() {
        return None;
    }
    let mut all: Vec<&ReplicaSet> = old_rss.to_vec();
    all.extend(new_rs);
    let active = filter_active_replica_sets(&all);
    match active.len() {
        0 => new_rs.or_else(|| {
            old_rss
                .iter()
                .copied()
                .max_by(|a, b| cmp_by_creation_timestamp(a, b))
        }),
        1 => Some(active[0]),
        _ => None,
    }
}

/// The Deployments of the ReplicaSet's namespace whose selector matches its labels, as
/// upstream `GetDeploymentsForReplicaSet` (used to find the owner of an orphaned ReplicaSet).
/// Empty when the ReplicaSet has no labels or nothing matches (upstream returns an error
/// then); a Deployment with an empty or invalid selector matches nothing.
pub fn deployments_for_replica_set<'a>(
    deployments: &[&'a Deployment],
    rs: &ReplicaSet,
) -> Vec<&'a Deployment> {
    let Some(labels) = rs.metadata.labels.as_ref().filter(|l| !l.is_empty()) else {
        return Vec::new();
    };
    deployments
        .iter()
        .copied()
        .filter(|d| d.metadata.namespace == rs.metadata.namespace)
        .filter(|d| {
            let Some(spec) = d.spec.as_ref() else {
                return false;
            };
            match Selector::from_label_selector(&spec.selector) {
                Ok(selector) => !selector.is_everything() && selector.matches(labels),
                Err(_) => false,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::accessors::name;
    use super::super::template::DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY;
    use super::super::test_support::{deployment, rs, rs_at, ts};
    use super::*;

    fn names(rss: &[&ReplicaSet]) -> Vec<String> {
        rss.iter().map(|r| name(&r.metadata).to_owned()).collect()
    }

    fn with_hash(mut r: ReplicaSet, hash: &str) -> ReplicaSet {
        if let Some(labels) = r
            .spec
            .as_mut()
            .and_then(|s| s.template.as_mut())
            .and_then(|t| t.metadata.as_mut())
            .and_then(|m| m.labels.as_mut())
        {
            labels.insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), hash.into());
        }
        r
    }

    fn old_template(mut r: ReplicaSet) -> ReplicaSet {
        if let Some(c) = r
            .spec
            .as_mut()
            .and_then(|s| s.template.as_mut())
            .and_then(|t| t.spec.as_mut())
            .and_then(|s| s.containers.first_mut())
        {
            c.name = "nginx-old-1".into();
        }
        r
    }

    #[test]
    fn find_new_replica_set_table() {
        // Upstream TestFindNewReplicaSet.
        let now = ts(2020, 1, 1, 0, 0, 0);
        let later = ts(2020, 1, 1, 0, 1, 0);
        let d = deployment("nginx", 1);
        let new_rs = with_hash(rs_at("new", 0, later), "hash");
        let new_rs_dup = with_hash(rs_at("new-dup", 0, now), "different-hash");
        let old_rs = old_template(rs("old", 0));
        struct Case<'a> {
            name: &'static str,
            rs_list: Vec<&'a ReplicaSet>,
            expected: Option<&'a ReplicaSet>,
        }
        let cases = [
            Case {
                name: "Get new ReplicaSet with the same template as Deployment spec but different pod-template-hash value",
                rs_list: vec![&new_rs, &old_rs],
                expected: Some(&new_rs),
            },
            Case {
                name: "Get the oldest new ReplicaSet when there are more than one ReplicaSet with the same template",
                rs_list: vec![&new_rs, &old_rs, &new_rs_dup],
                expected: Some(&new_rs_dup),
            },
            Case {
                name: "Get nil new ReplicaSet",
                rs_list: vec![&old_rs],
                expected: None,
            },
        ];
        for c in cases {
            let got = find_new_replica_set(&d, &c.rs_list);
            assert_eq!(
                got.map(|r| name(&r.metadata)),
                c.expected.map(|r| name(&r.metadata)),
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn find_old_replica_sets_table() {
        // Upstream TestFindOldReplicaSets.
        let before = ts(2020, 1, 1, 0, 0, 0);
        let now = ts(2020, 1, 1, 0, 1, 0);
        let later = ts(2020, 1, 1, 0, 2, 0);
        let d = deployment("nginx", 1);
        let new_rs = with_hash(rs_at("new", 1, later), "hash");
        let new_rs_dup = with_hash(rs_at("new-dup", 0, now), "different-hash");
        let old_rs = old_template(rs_at("old", 0, before));
        struct Case<'a> {
            name: &'static str,
            rs_list: Vec<&'a ReplicaSet>,
            expected: &'static [&'static str],
            expected_require: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "Get old ReplicaSets",
                rs_list: vec![&new_rs, &old_rs],
                expected: &["old"],
                expected_require: &[],
            },
            Case {
                name: "Get old ReplicaSets with no new ReplicaSet",
                rs_list: vec![&old_rs],
                expected: &["old"],
                expected_require: &[],
            },
            Case {
                name: "Get old ReplicaSets with two new ReplicaSets, only the oldest new ReplicaSet is seen as new ReplicaSet",
                rs_list: vec![&old_rs, &new_rs, &new_rs_dup],
                expected: &["old", "new"],
                expected_require: &["new"],
            },
            Case {
                name: "Get empty old ReplicaSets",
                rs_list: vec![&new_rs],
                expected: &[],
                expected_require: &[],
            },
        ];
        for c in cases {
            let (required, all) = find_old_replica_sets(&d, &c.rs_list);
            assert_eq!(names(&all), c.expected, "{}", c.name);
            assert_eq!(names(&required), c.expected_require, "{}: required", c.name);
        }
    }

    #[test]
    fn find_active_or_latest_table() {
        let t = |m| ts(2020, 1, 1, 0, m, 0);
        let new_active = rs_at("new", 2, t(3));
        let new_idle = rs_at("new", 0, t(3));
        let old_active = rs_at("old-active", 3, t(1));
        let old_idle_a = rs_at("old-a", 0, t(1));
        let old_idle_b = rs_at("old-b", 0, t(2));
        struct Case<'a> {
            name: &'static str,
            new_rs: Option<&'a ReplicaSet>,
            old: Vec<&'a ReplicaSet>,
            expected: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "nothing",
                new_rs: None,
                old: vec![],
                expected: None,
            },
            Case {
                name: "only the new one is active",
                new_rs: Some(&new_active),
                old: vec![&old_idle_a],
                expected: Some("new"),
            },
            Case {
                name: "only an old one is active",
                new_rs: Some(&new_idle),
                old: vec![&old_active, &old_idle_b],
                expected: Some("old-active"),
            },
            Case {
                name: "several active",
                new_rs: Some(&new_active),
                old: vec![&old_active],
                expected: None,
            },
            Case {
                name: "none active: the new one",
                new_rs: Some(&new_idle),
                old: vec![&old_idle_a, &old_idle_b],
                expected: Some("new"),
            },
            Case {
                name: "none active, no new: the newest old one",
                new_rs: None,
                old: vec![&old_idle_a, &old_idle_b],
                expected: Some("old-b"),
            },
        ];
        for c in cases {
            let got = find_active_or_latest(c.new_rs, &c.old).map(|r| name(&r.metadata));
            assert_eq!(got, c.expected, "{}", c.name);
        }
    }

    #[test]
    fn deployments_for_replica_set_table() {
        // Upstream TestGetDeploymentsForReplicaSet plus selector edge cases.
        use super::super::test_support::labels;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
        let dep = |i: usize, selector: Option<LabelSelector>| {
            let mut d = deployment(&format!("deployment-{i}"), 1);
            d.metadata.namespace = Some("test".into());
            if let (Some(spec), Some(sel)) = (d.spec.as_mut(), selector) {
                spec.selector = sel;
            }
            d
        };
        let sel = |app: &str| {
            Some(LabelSelector {
                match_labels: Some(labels(&[("app", app)])),
                ..Default::default()
            })
        };
        let deployments = [
            dep(0, sel("test-0")),
            dep(1, sel("test-1")),
            dep(2, sel("test-2")),
            dep(3, Some(LabelSelector::default())),
        ];
        let refs: Vec<&Deployment> = deployments.iter().collect();
        let replica_set = |i: usize, ns: &str, with_labels: bool| {
            let mut r = rs(&format!("test-replicaSet-{i}"), 1);
            r.metadata.namespace = Some(ns.into());
            r.metadata.labels = with_labels.then(|| {
                labels(&[
                    ("app", &format!("test-{i}")),
                    ("label", &format!("label-{i}")),
                ])
            });
            r
        };
        struct Case {
            name: &'static str,
            rs: ReplicaSet,
            expected: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "rs-0",
                rs: replica_set(0, "test", true),
                expected: &["deployment-0"],
            },
            Case {
                name: "rs-1",
                rs: replica_set(1, "test", true),
                expected: &["deployment-1"],
            },
            Case {
                name: "rs-2",
                rs: replica_set(2, "test", true),
                expected: &["deployment-2"],
            },
            Case {
                name: "rs-3: the empty selector matches nothing",
                rs: replica_set(3, "test", true),
                expected: &[],
            },
            Case {
                name: "rs-4",
                rs: replica_set(4, "test", true),
                expected: &[],
            },
            Case {
                name: "no labels",
                rs: replica_set(0, "test", false),
                expected: &[],
            },
            Case {
                name: "other namespace",
                rs: replica_set(0, "other", true),
                expected: &[],
            },
        ];
        for c in cases {
            let got: Vec<&str> = deployments_for_replica_set(&refs, &c.rs)
                .into_iter()
                .map(|d| name(&d.metadata))
                .collect();
            assert_eq!(got, c.expected, "{}", c.name);
        }
    }
}
