//! Unit tests of the ClusterRole aggregation controller (upstream `clusterroleaggregation_controller_test.go`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kcm_machinery::informer::store::Indexer;

use super::*;
use crate::clusterroleaggregation::{FakeAggregationClient, aggregated_rules};

fn rule(verb: &str, resource: &str) -> PolicyRule {
    PolicyRule {
        verbs: vec![verb.to_owned()],
        api_groups: Some(vec![String::new()]),
        resources: Some(vec![resource.to_owned()]),
        ..PolicyRule::default()
    }
}

fn role(name: &str, labels: &[(&str, &str)], rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        rules: Some(rules),
        aggregation_rule: None,
    }
}

fn aggregated(name: &str, selects: &[&str], rules: Vec<PolicyRule>) -> ClusterRole {
    let mut r = role(name, &[], rules);
    r.aggregation_rule = Some(AggregationRule {
        cluster_role_selectors: Some(
            selects
                .iter()
                .map(|s| LabelSelector {
                    match_labels: Some(BTreeMap::from([((*s).to_owned(), "true".to_owned())])),
                    ..LabelSelector::default()
                })
                .collect(),
        ),
    });
    r
}

fn arcs(roles: &[ClusterRole]) -> Vec<Arc<ClusterRole>> {
    roles.iter().cloned().map(Arc::new).collect()
}

#[test]
fn aggregated_rules_as_upstream() {
    struct Case {
        name: &'static str,
        roles: Vec<ClusterRole>,
        want: Option<Vec<PolicyRule>>,
    }
    let cases = [
        Case {
            name: "not aggregated",
            roles: vec![role("target", &[], vec![rule("get", "pods")])],
            want: None,
        },
        Case {
            name: "no match: empty",
            roles: vec![
                aggregated("target", &["foo"], vec![rule("get", "pods")]),
                role("other", &[("bar", "true")], vec![rule("list", "pods")]),
            ],
            want: Some(vec![]),
        },
        Case {
            name: "matches in name order, itself skipped, duplicates once",
            roles: vec![
                aggregated("target", &["foo"], vec![]),
                role(
                    "zz",
                    &[("foo", "true")],
                    vec![rule("get", "pods"), rule("delete", "pods")],
                ),
                role(
                    "aa",
                    &[("foo", "true")],
                    vec![rule("list", "pods"), rule("get", "pods")],
                ),
            ],
            want: Some(vec![
                rule("list", "pods"),
                rule("get", "pods"),
                rule("delete", "pods"),
            ]),
        },
        Case {
            name: "two selectors, in selector order",
            roles: vec![
                aggregated("target", &["second", "first"], vec![]),
                role("a", &[("first", "true")], vec![rule("get", "a")]),
                role("b", &[("second", "true")], vec![rule("get", "b")]),
            ],
            want: Some(vec![rule("get", "b"), rule("get", "a")]),
        },
        Case {
            name: "a role labelled for itself does not feed itself",
            roles: vec![{
                let mut r = aggregated("target", &["foo"], vec![rule("get", "x")]);
                r.metadata.labels = Some(BTreeMap::from([("foo".to_owned(), "true".to_owned())]));
                r
            }],
            want: Some(vec![]),
        },
    ];
    for case in cases {
        let all = arcs(&case.roles);
        let got = aggregated_rules(&case.roles[0], &all).expect(case.name);
        assert_eq!(got, case.want, "{}", case.name);
    }
}

async fn controller(
    roles: &[ClusterRole],
) -> (ClusterRoleAggregationController, Arc<FakeAggregationClient>) {
    let cache = Indexer::<ClusterRole>::new();
    for r in roles {
        cache.add(Arc::new(r.clone())).expect("cached");
    }
    let client = Arc::new(FakeAggregationClient::new());
    let c = ClusterRoleAggregationController::with_cache(cache, client.clone(), None);
    (c, client)
}

#[tokio::test]
async fn sync_applies_only_when_the_rules_differ() {
    let edit = role(
        "edit-ish",
        &[("aggregate-to-admin", "true")],
        vec![rule("create", "pods")],
    );
    let (c, client) = controller(&[
        aggregated("admin", &["aggregate-to-admin"], vec![]),
        aggregated(
            "up-to-date",
            &["aggregate-to-admin"],
            vec![rule("create", "pods")],
        ),
        edit,
    ])
    .await;
    c.sync("admin").await.expect("sync");
    c.sync("up-to-date").await.expect("sync");
    c.sync("edit-ish").await.expect("not aggregated");
    c.sync("gone").await.expect("deleted");
    assert_eq!(
        client.applies(),
        vec![("admin".to_owned(), vec![rule("create", "pods")])]
    );
}

#[tokio::test]
async fn events_enqueue_every_aggregated_role_and_errors_are_retried() {
    let (c, client) = controller(&[
        aggregated("admin", &["a"], vec![]),
        aggregated("view", &["v"], vec![]),
        role("source", &[("a", "true")], vec![rule("get", "pods")]),
    ])
    .await;
    c.event_handlers().enqueue();
    assert_eq!(c.queue().len(), 2);

    client.set_error(Some(kcm_machinery::controller::api_status::not_found(
        "clusterroles.rbac.authorization.k8s.io",
        "admin",
    )));
    assert!(c.process_next_work_item().await);
    assert!(c.process_next_work_item().await);
    assert!(client.applies().is_empty());
    // The failed key went back rate-limited.
    assert_eq!(c.queue().num_requeues(&"admin".to_owned()), 1);
    client.set_error(None);
    c.sync("admin").await.expect("sync");
    assert_eq!(client.applies().len(), 1);
    c.queue().shut_down();
}
