//! Unit tests of the range allocator (upstream `range_allocator_test.go`).

use std::sync::Arc;

use kcm_machinery::controller::api_status;
use kcm_machinery::events::FakeRecorder;
use kcm_testing::prelude::*;

use super::*;
use crate::nodeipam::FakeNodeCidrClient;
use crate::nodeipam::config::{NodeIpamFlags, RANGE_ALLOCATOR};

struct Fixture {
    client: Arc<FakeNodeCidrClient>,
    recorder: FakeRecorder,
    nodes: Indexer<Node>,
    allocator: RangeAllocator,
}

fn config(cluster: &str, service: &str, mask: i32) -> NodeIpamConfig {
    NodeIpamFlags {
        cluster_cidr: cluster.to_owned(),
        cidr_allocator_type: RANGE_ALLOCATOR.to_owned(),
        node_cidr_mask_size: mask,
        service_cluster_ip_range: service.to_owned(),
        ..NodeIpamFlags::default()
    }
    .config()
    .expect("valid configuration")
}

fn fixture_with(config: &NodeIpamConfig, existing: &[Node]) -> Fixture {
    let client = Arc::new(FakeNodeCidrClient::new());
    let recorder = FakeRecorder::new();
    let nodes = Indexer::new();
    for node in existing {
        nodes.add(Arc::new(node.clone())).expect("cache");
    }
    let allocator = RangeAllocator::with_cache(
        nodes.clone(),
        client.clone(),
        Arc::new(recorder.clone()),
        config,
        existing,
        None,
    )
    .expect("allocator");
    Fixture {
        client,
        recorder,
        nodes,
        allocator,
    }
}

fn with_cidrs(name: &str, cidrs: &[&str]) -> Node {
    node(name)
        .with(|n| {
            let spec = n.spec.get_or_insert_default();
            spec.pod_cidr = cidrs.first().map(|c| (*c).to_owned());
            spec.pod_cidrs = Some(cidrs.iter().map(|c| (*c).to_owned()).collect());
        })
        .build()
}

fn patched(fx: &Fixture) -> Vec<(String, Vec<String>)> {
    fx.client.patches()
}

/// Upstream's `TestAllocateOrOccupyCIDRSuccess` table: the first free block of every cluster
/// CIDR, skipping the service range and blocks other Nodes hold.
#[tokio::test]
async fn allocates_the_first_free_block() {
    struct Case {
        name: &'static str,
        config: NodeIpamConfig,
        existing: Vec<Node>,
        want: Vec<&'static str>,
    }
    let cases = [
        Case {
            name: "single stack",
            config: config("127.123.234.0/24", "", 30),
            existing: vec![],
            want: vec!["127.123.234.0/30"],
        },
        Case {
            name: "service range filtered out",
            config: config("127.123.234.0/24", "127.123.234.0/26", 30),
            existing: vec![],
            want: vec!["127.123.234.64/30"],
        },
        Case {
            name: "blocks of existing nodes",
            config: config("10.244.0.0/16", "10.96.0.0/12", 0),
            existing: vec![
                with_cidrs("n0", &["10.244.0.0/24"]),
                with_cidrs("n1", &["10.244.1.0/24"]),
            ],
            want: vec!["10.244.2.0/24"],
        },
        Case {
            name: "dual stack",
            config: config("10.244.0.0/16,fd00:10:244::/48", "", 0),
            existing: vec![],
            want: vec!["10.244.0.0/24", "fd00:10:244::/64"],
        },
    ];
    for case in cases {
        let fx = fixture_with(&case.config, &case.existing);
        fx.nodes.add(node("new").arc()).expect("cache");
        fx.allocator.sync("new").await.expect(case.name);
        let want: Vec<String> = case.want.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(patched(&fx), [("new".to_owned(), want)], "{}", case.name);
    }
}

/// A Node that already has CIDRs only occupies them; one whose CIDR the cache shows again is
/// not patched (upstream's "already has allocated CIDR" path).
#[tokio::test]
async fn nodes_with_cidrs_are_occupied_not_patched() {
    let fx = fixture_with(&config("10.244.0.0/16", "", 0), &[]);
    fx.nodes
        .add(Arc::new(with_cidrs("a", &["10.244.7.0/24"])))
        .expect("cache");
    fx.allocator.sync("a").await.expect("occupy");
    assert!(patched(&fx).is_empty());
    assert_eq!(fx.allocator.allocated(), [1]);
    fx.allocator.sync("a").await.expect("occupy again");
    assert_eq!(fx.allocator.allocated(), [1], "occupying twice counts once");
}

/// A full range is a `CIDRNotAvailable` event and an error (upstream's
/// `TestAllocateOrOccupyCIDRFailure`).
#[tokio::test]
async fn full_range_is_an_event() {
    let fx = fixture_with(&config("127.123.234.0/28", "", 30), &[]);
    for name in ["a", "b", "c", "d"] {
        fx.nodes.add(node(name).arc()).expect("cache");
        fx.allocator.sync(name).await.expect("room");
    }
    fx.nodes.add(node("e").arc()).expect("cache");
    let err = fx.allocator.sync("e").await.expect_err("full");
    assert!(
        err.to_string()
            .contains("there are no remaining CIDRs left to allocate"),
        "{err}"
    );
    assert_eq!(fx.recorder.reasons(), ["CIDRNotAvailable"]);
    assert_eq!(
        fx.recorder.events()[0].message,
        "Node e status is now: CIDRNotAvailable"
    );
}

/// A patch failing every attempt is a `CIDRAssignmentFailed` event, and the block goes back
/// (upstream's `TestReleaseCIDRSuccess` / update failure path).
#[tokio::test]
async fn failed_patches_release_the_block() {
    let fx = fixture_with(&config("10.244.0.0/16", "", 0), &[]);
    fx.client
        .fail_next(CIDR_UPDATE_RETRIES, api_status::internal_error("boom"));
    fx.nodes.add(node("a").arc()).expect("cache");
    assert!(fx.allocator.sync("a").await.is_err());
    assert_eq!(patched(&fx).len(), CIDR_UPDATE_RETRIES);
    assert_eq!(fx.recorder.reasons(), ["CIDRAssignmentFailed"]);
    assert_eq!(fx.allocator.allocated(), [0], "released");
    fx.allocator.sync("a").await.expect("retry succeeds");
    assert_eq!(fx.allocator.allocated(), [1]);
}

/// A sync on a cached copy older than this allocator's own patch does not allocate again;
/// the Node's update (with its CIDR) settles it.
#[tokio::test]
async fn stale_node_cache_does_not_double_allocate() {
    let fx = fixture_with(&config("10.244.0.0/16", "", 0), &[]);
    fx.nodes.add(node("a").arc()).expect("cache");
    fx.allocator.sync("a").await.expect("patched");
    fx.allocator.sync("a").await.expect("stale copy");
    assert_eq!(patched(&fx).len(), 1);
    fx.nodes
        .update(Arc::new(with_cidrs("a", &["10.244.0.0/24"])))
        .expect("cache");
    fx.allocator.sync("a").await.expect("observed");
    assert_eq!(fx.allocator.allocated(), [1]);
}

/// A deleted Node's blocks are freed by the delete handler, and handed out again once the
/// set wraps around.
#[tokio::test]
async fn deleted_nodes_give_their_blocks_back() {
    let fx = fixture_with(
        &config("10.244.0.0/16", "", 0),
        &[with_cidrs("old", &["10.244.0.0/24"])],
    );
    assert_eq!(fx.allocator.allocated(), [1]);
    let handlers = fx.allocator.event_handlers();
    ResourceEventHandler::<Node>::on_delete(
        handlers,
        DeletedObject::Object(Arc::new(with_cidrs("old", &["10.244.0.0/24"]))),
    );
    assert_eq!(fx.allocator.allocated(), [0]);
    assert_eq!(fx.allocator.queue().len(), 1, "queued too");
}

/// Garbage or out-of-range CIDRs on existing Nodes stop the allocator from starting.
#[tokio::test]
async fn bad_existing_cidrs_are_fatal() {
    let bad = [
        with_cidrs("a", &["garbage"]),
        with_cidrs("b", &["192.168.0.0/24"]),
    ];
    for node in bad {
        let result = RangeAllocator::with_cache(
            Indexer::new(),
            Arc::new(FakeNodeCidrClient::new()),
            Arc::new(FakeRecorder::new()),
            &config("10.244.0.0/16", "", 0),
            &[node],
            None,
        );
        assert!(result.is_err());
    }
}

/// A panic in the sync is recovered, counted and retried.
#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let client = Arc::new(FakeNodeCidrClient::new());
    let nodes = Indexer::new();
    nodes.add(node("a").arc()).expect("cache");
    let allocator = RangeAllocator::with_cache(
        nodes,
        client.clone(),
        Arc::new(FakeRecorder::new()),
        &config("10.244.0.0/16", "", 0),
        &[],
        Some(metrics.clone()),
    )
    .expect("allocator");
    client.panic_on_next_call();
    allocator.queue().add("a".to_owned());
    assert!(allocator.process_next_work_item().await);
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1);
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    assert!(allocator.process_next_work_item().await);
    assert_eq!(client.patches().len(), 1);
}
