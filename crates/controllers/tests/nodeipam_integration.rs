//! The node IPAM controller against the embedded API server: Nodes get distinct pod CIDRs from the cluster CIDR, existing ones are kept and never handed out twice.

mod manager_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kcm_apiserver::testing::TestServer;
use kcm_controllers::nodeipam::{
    ApiNodeCidrClient, CIDR_UPDATE_WORKERS, NodeIpamFlags, RangeAllocator,
};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::node;
use kube::api::{Api, ListParams, PostParams};
use manager_support::{timed, wait_until};
use tokio_util::sync::CancellationToken;

const TEST_TIMEOUT: Duration = Duration::from_secs(90);

async fn pod_cidr(nodes: &Api<Node>, name: &str) -> Option<String> {
    nodes
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|n| n.spec.and_then(|s| s.pod_cidr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_get_distinct_cidrs_and_existing_ones_are_kept() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let nodes: Api<Node> = Api::all(client.clone());
        // A node that already has a CIDR (e.g. from before a restart).
        nodes
            .create(
                &PostParams::default(),
                &node("old")
                    .pod_cidr("10.244.0.0/24")
                    .with(|n| {
                        n.spec.get_or_insert_default().pod_cidrs =
                            Some(vec!["10.244.0.0/24".to_owned()]);
                    })
                    .build(),
            )
            .await
            .expect("node");

        let config = NodeIpamFlags {
            cluster_cidr: "10.244.0.0/16".to_owned(),
            cidr_allocator_type: "RangeAllocator".to_owned(),
            service_cluster_ip_range: "10.96.0.0/12".to_owned(),
            ..NodeIpamFlags::default()
        }
        .config()
        .expect("config");
        let existing = nodes
            .list(&ListParams::default())
            .await
            .expect("list")
            .items;
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let allocator = Arc::new(
            RangeAllocator::new(
                &factory.nodes(),
                Arc::new(ApiNodeCidrClient::new(client.clone())),
                Arc::new(FakeRecorder::new()),
                &config,
                &existing,
                None,
            )
            .expect("allocator"),
        );
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let task = tokio::spawn(allocator.clone().run(CIDR_UPDATE_WORKERS, cancel.clone()));

        for i in 0..5 {
            nodes
                .create(&PostParams::default(), &node(&format!("n{i}")).build())
                .await
                .expect("node");
        }
        let mut cidrs = BTreeSet::new();
        for i in 0..5 {
            let name = format!("n{i}");
            wait_until(&format!("{name} has a pod CIDR"), || {
                let nodes = nodes.clone();
                let name = name.clone();
                async move { pod_cidr(&nodes, &name).await.is_some() }
            })
            .await;
            let cidr = pod_cidr(&nodes, &name).await.expect("cidr");
            assert!(
                cidr.starts_with("10.244.") && cidr.ends_with("/24"),
                "{cidr}"
            );
            assert_ne!(cidr, "10.244.0.0/24", "the existing node's block");
            assert!(cidrs.insert(cidr.clone()), "{cidr} twice");
            let node = nodes.get(&name).await.expect("node");
            assert_eq!(node.spec.and_then(|s| s.pod_cidrs), Some(vec![cidr]));
        }
        assert_eq!(allocator.allocated(), [6]);

        cancel.cancel();
        task.await.expect("allocator task");
    })
    .await;
}
