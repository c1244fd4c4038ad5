//! Unit tests of the TTL controller: a bare Node cache and a fake client, upstream's `ttl_controller_test.go` cases.

use kcm_machinery::controller::api_status;
use kcm_testing::MetaBuilder;
use serde_json::json;

use super::*;
use crate::ttl::client::{FakeTtlNodeClient, ttl_annotation_patch};

struct Fixture {
    controller: TtlController,
    nodes: Indexer<Node>,
    client: Arc<FakeTtlNodeClient>,
}

impl Fixture {
    fn new() -> Self {
        let nodes = Indexer::new();
        let client = Arc::new(FakeTtlNodeClient::new());
        let controller = TtlController::with_cache(
            nodes.clone(),
            client.clone(),
            TtlControllerOptions::default(),
        );
        Self {
            controller,
            nodes,
            client,
        }
    }

    fn with_desired_ttl(self, ttl_seconds: i32) -> Self {
        self.controller.event_handlers().set_size(ClusterSize {
            desired_ttl_seconds: ttl_seconds,
            ..ClusterSize::default()
        });
        self
    }

    fn cache(&self, node: Node) {
        self.nodes.add(Arc::new(node)).expect("add");
    }
}

fn node(annotations: &[(&str, &str)]) -> Node {
    kcm_testing::node("name").annotations(annotations).build()
}

fn patch(ttl: &str) -> serde_json::Value {
    json!({"metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": ttl}}})
}

/// Upstream's `TestPatchNode`: whatever the Node carried, the patch sets only the annotation.
#[test]
fn the_patch_sets_only_the_ttl_annotation() {
    assert_eq!(
        serde_json::to_string(&ttl_annotation_patch(0)).expect("json"),
        r#"{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"0"}}}"#
    );
    assert_eq!(ttl_annotation_patch(10), patch("10"));
}

/// Upstream's `TestUpdateNodeIfNeeded`: a Node is patched unless its annotation already holds
/// the desired TTL.
#[tokio::test]
async fn a_node_is_patched_unless_it_carries_the_desired_ttl() {
    struct Case {
        name: &'static str,
        annotations: &'static [(&'static str, &'static str)],
        desired: i32,
        patch: Option<&'static str>,
    }
    let cases = [
        Case {
            name: "no annotation, ttl 0",
            annotations: &[],
            desired: 0,
            patch: Some("0"),
        },
        Case {
            name: "no annotation, ttl 15",
            annotations: &[],
            desired: 15,
            patch: Some("15"),
        },
        Case {
            name: "no annotation, ttl 30",
            annotations: &[],
            desired: 30,
            patch: Some("30"),
        },
        Case {
            name: "0 becomes 60",
            annotations: &[(TTL_ANNOTATION, "0")],
            desired: 60,
            patch: Some("60"),
        },
        Case {
            name: "already 60",
            annotations: &[(TTL_ANNOTATION, "60")],
            desired: 60,
            patch: None,
        },
        Case {
            name: "60 comes down to 30",
            annotations: &[(TTL_ANNOTATION, "60")],
            desired: 30,
            patch: Some("30"),
        },
        Case {
            name: "not a number is rewritten",
            annotations: &[(TTL_ANNOTATION, "soon"), ("a", "b")],
            desired: 0,
            patch: Some("0"),
        },
    ];
    for case in cases {
        let f = Fixture::new().with_desired_ttl(case.desired);
        f.cache(node(case.annotations));
        f.controller.sync("name").await.expect(case.name);
        let expected: Vec<_> = case
            .patch
            .map(|ttl| ("name".to_owned(), patch(ttl)))
            .into_iter()
            .collect();
        assert_eq!(f.client.patches(), expected, "{}", case.name);
    }
}

#[tokio::test]
async fn a_node_gone_from_the_cache_is_not_patched() {
    let f = Fixture::new();
    f.controller.sync("gone").await.expect("sync");
    assert!(f.client.patches().is_empty());
}

#[tokio::test]
async fn a_failed_patch_is_an_error_naming_the_node() {
    let f = Fixture::new();
    f.cache(node(&[]));
    f.client
        .set_error(Some(api_status::conflict("nodes", "name", "try again")));
    let err = f.controller.sync("name").await.expect_err("fails");
    assert!(err.to_string().contains("node name"), "{err}");
}

/// Upstream's `TestDesiredTTL`: the size intervals overlap, so the TTL steps up past a
/// boundary's `size_max` and back down only below the next interval's `size_min`.
#[tokio::test]
async fn the_desired_ttl_follows_cluster_size_with_hysteresis() {
    enum Event {
        Add,
        Delete,
    }
    let cases = [
        ("first node", Event::Add, 0, 0, 0, 0),
        ("100th node", Event::Add, 99, 0, 0, 0),
        ("101st node steps up", Event::Add, 100, 0, 0, 15),
        ("down to 100 keeps 15", Event::Delete, 101, 15, 1, 15),
        ("down to 90 keeps 15", Event::Delete, 91, 15, 1, 15),
        ("back to 92 keeps 15", Event::Add, 91, 15, 1, 15),
        ("down to 89 steps down", Event::Delete, 90, 15, 1, 0),
    ];
    for (name, event, node_count, desired, step, expected) in cases {
        let f = Fixture::new();
        let handlers = f.controller.event_handlers();
        handlers.set_size(ClusterSize {
            node_count,
            boundary_step: step,
            desired_ttl_seconds: desired,
        });
        match event {
            Event::Add => handlers.add_node(&node(&[])),
            Event::Delete => handlers.delete_node(),
        }
        assert_eq!(f.controller.desired_ttl_seconds(), expected, "{name}");
    }
}

#[tokio::test]
async fn adds_and_updates_queue_the_node_and_deletes_do_not() {
    let f = Fixture::new();
    let handlers = f.controller.event_handlers();
    handlers.add_node(&node(&[]));
    assert_eq!(f.controller.queue().len(), 1);
    handlers.delete_node();
    assert_eq!(f.controller.queue().len(), 1);
    handlers.update_node(&kcm_testing::node("other").build());
    assert_eq!(f.controller.queue().len(), 2);
}

/// Climbing from empty to past 2000 nodes walks every interval in turn; the top one holds.
#[tokio::test]
async fn a_growing_cluster_walks_every_boundary() {
    let f = Fixture::new();
    let handlers = f.controller.event_handlers();
    let mut seen = vec![f.controller.desired_ttl_seconds()];
    for _ in 0..2500 {
        handlers.add_node(&node(&[]));
        let ttl = f.controller.desired_ttl_seconds();
        if seen.last() != Some(&ttl) {
            seen.push(ttl);
        }
    }
    assert_eq!(seen, [0, 15, 30, 60, 300]);
}
