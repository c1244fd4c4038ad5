//! The EndpointSlice and mirroring controllers against the embedded API server: 250 pods pack into slices of at most 100, one pod's change rewrites only its own slice, and custom Endpoints of a selector-less Service are mirrored.
//!
//! Pods get their IPs and readiness from the test (no kubelet). Time is real, so waiting is
//! polling with a deadline that only bounds a failure.

mod manager_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, PodCondition, PodIP, PodStatus, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm_apiserver::testing::TestServer;
use kcm_controllers::endpointslice::{
    EndpointSliceController, EndpointSliceControllerOptions, EndpointSliceMetrics,
};
use kcm_controllers::endpointslicemirroring::{
    EndpointSliceMirroringController, EndpointSliceMirroringOptions,
};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{MetaBuilder, PodSpecBuilder, container, endpoints, node, pod, service};
use kube::api::{Api, ListParams, PostParams};
use manager_support::{timed, wait_until};
use tokio_util::sync::CancellationToken;

const TEST_TIMEOUT: Duration = Duration::from_secs(150);
const PODS: usize = 250;

fn status(ip: &str, ready: bool) -> PodStatus {
    PodStatus {
        phase: Some("Running".to_owned()),
        pod_ip: Some(ip.to_owned()),
        pod_ips: Some(vec![PodIP { ip: ip.to_owned() }]),
        conditions: Some(vec![PodCondition {
            type_: "Ready".to_owned(),
            status: if ready { "True" } else { "False" }.to_owned(),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    }
}

async fn slices_of(api: &Api<EndpointSlice>, service: &str) -> Vec<EndpointSlice> {
    api.list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

fn ready_count(slices: &[EndpointSlice]) -> (usize, usize) {
    let mut ready = 0;
    let mut total = 0;
    for slice in slices {
        for ep in slice.endpoints.iter().flatten() {
            total += 1;
            if ep.conditions.as_ref().and_then(|c| c.ready) == Some(true) {
                ready += 1;
            }
        }
    }
    (ready, total)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_pack_and_only_the_changed_slice_is_rewritten() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let nodes: Api<Node> = Api::all(client.clone());
        nodes
            .create(
                &PostParams::default(),
                &node("node-1")
                    .labels(&[("topology.kubernetes.io/zone", "zone-a")])
                    .build(),
            )
            .await
            .expect("node");

        let metrics = Arc::new(EndpointSliceMetrics::new());
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let controller = Arc::new(EndpointSliceController::new(
            &factory,
            client.clone(),
            Arc::new(FakeRecorder::new()),
            EndpointSliceControllerOptions {
                controller_metrics: Some(Arc::clone(&metrics)),
                ..EndpointSliceControllerOptions::default()
            },
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let task = tokio::spawn(controller.run(5, cancel.clone()));

        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        services
            .create(
                &PostParams::default(),
                &service("web")
                    .selector(&[("app", "web")])
                    .named_port("http", 80, "http")
                    .build(),
            )
            .await
            .expect("service");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        for i in 0..PODS {
            let created = pods
                .create(
                    &PostParams::default(),
                    &pod(&format!("web-{i}"))
                        .labels(&[("app", "web")])
                        .node("node-1")
                        .container(
                            container("app")
                                .image("nginx")
                                .named_port("http", 8080, "TCP"),
                        )
                        .build(),
                )
                .await
                .expect("pod");
            let mut running = created;
            running.status = Some(status(&format!("10.244.{}.{}", i / 200, i % 200 + 2), true));
            pods.replace_status(&format!("web-{i}"), &PostParams::default(), &running)
                .await
                .expect("status");
        }

        let api: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
        wait_until("250 ready endpoints in slices of at most 100", || {
            let api = api.clone();
            async move {
                let slices = slices_of(&api, "web").await;
                ready_count(&slices) == (PODS, PODS)
                    && slices
                        .iter()
                        .all(|s| s.endpoints.as_ref().map_or(0, Vec::len) <= 100)
                    && slices.len() == 3
            }
        })
        .await;
        let slices = slices_of(&api, "web").await;
        for slice in &slices {
            let labels = slice.metadata.labels.clone().unwrap_or_default();
            assert_eq!(
                labels
                    .get("endpointslice.kubernetes.io/managed-by")
                    .map(String::as_str),
                Some("endpointslice-controller.k8s.io")
            );
            let owner = &slice.metadata.owner_references.clone().unwrap_or_default()[0];
            assert_eq!(
                (owner.kind.as_str(), owner.name.as_str()),
                ("Service", "web")
            );
            assert_eq!(
                slice.ports.clone().unwrap_or_default()[0].port,
                Some(8080),
                "named port resolved"
            );
            assert!(
                slice
                    .endpoints
                    .iter()
                    .flatten()
                    .all(|e| e.zone.as_deref() == Some("zone-a"))
            );
        }

        // Settle, then one pod turns unready: only its slice is rewritten.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before: BTreeMap<String, String> = slices_of(&api, "web")
            .await
            .into_iter()
            .map(|s| {
                (
                    s.metadata.name.unwrap_or_default(),
                    s.metadata.resource_version.unwrap_or_default(),
                )
            })
            .collect();
        let updates_before =
            metrics.changes("update") + metrics.changes("create") + metrics.changes("delete");
        let mut flipped = pods.get("web-137").await.expect("pod");
        flipped.status = Some(status("10.244.0.139", false));
        pods.replace_status("web-137", &PostParams::default(), &flipped)
            .await
            .expect("status");
        wait_until("web-137 not ready in its slice", || {
            let api = api.clone();
            async move { ready_count(&slices_of(&api, "web").await) == (PODS - 1, PODS) }
        })
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after: BTreeMap<String, String> = slices_of(&api, "web")
            .await
            .into_iter()
            .map(|s| {
                (
                    s.metadata.name.unwrap_or_default(),
                    s.metadata.resource_version.unwrap_or_default(),
                )
            })
            .collect();
        let changed: Vec<&String> = after
            .iter()
            .filter(|(name, rv)| before.get(*name) != Some(rv))
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            changed.len(),
            1,
            "only the pod's slice is rewritten: {before:?} → {after:?}"
        );
        let writes =
            metrics.changes("update") + metrics.changes("create") + metrics.changes("delete")
                - updates_before;
        assert_eq!(writes, 1, "one slice write for one pod change");

        cancel.cancel();
        task.await.expect("controller task");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_endpoints_of_selectorless_services_are_mirrored() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let controller = Arc::new(EndpointSliceMirroringController::new(
            &factory,
            client.clone(),
            Arc::new(FakeRecorder::new()),
            EndpointSliceMirroringOptions::default(),
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let task = tokio::spawn(controller.run(2, cancel.clone()));

        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        services
            .create(
                &PostParams::default(),
                &service("legacy").port(80, 8080).build(),
            )
            .await
            .expect("service");
        let eps: Api<Endpoints> = Api::namespaced(client.clone(), "default");
        eps.create(
            &PostParams::default(),
            &endpoints("legacy")
                .subset(
                    &["192.168.1.10", "192.168.1.11"],
                    &["192.168.1.12"],
                    &[("", 8080)],
                )
                .build(),
        )
        .await
        .expect("endpoints");
        let api: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
        wait_until("the mirrored slice", || {
            let api = api.clone();
            async move {
                let slices = slices_of(&api, "legacy").await;
                slices.len() == 1 && ready_count(&slices) == (2, 3)
            }
        })
        .await;
        let slice = slices_of(&api, "legacy").await.remove(0);
        assert_eq!(
            slice
                .metadata
                .labels
                .unwrap_or_default()
                .get("endpointslice.kubernetes.io/managed-by")
                .map(String::as_str),
            Some("endpointslicemirroring-controller.k8s.io")
        );
        // The kubernetes Service's Endpoints opt out (skip-mirror): no slice for it.
        assert!(slices_of(&api, "kubernetes").await.iter().all(|s| {
            s.metadata
                .labels
                .clone()
                .unwrap_or_default()
                .get("endpointslice.kubernetes.io/managed-by")
                .map(String::as_str)
                != Some("endpointslicemirroring-controller.k8s.io")
        }));

        cancel.cancel();
        task.await.expect("controller task");
    })
    .await;
}
