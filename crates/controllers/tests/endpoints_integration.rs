//! The endpoints controller against the embedded API server: a Service's Endpoints follow its pods (ready, not ready, named ports) and go with it.
//!
//! Only the endpoints controller runs; pods get their IPs and readiness from the test (no
//! kubelet). Time is real, so waiting is polling with a deadline that only bounds a failure.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, PodCondition, PodIP, PodStatus, Service};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::endpoint::{EndpointController, EndpointControllerOptions};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{MetaBuilder, PodSpecBuilder, container, pod, service};
use kube::api::{Api, DeleteParams, PostParams};
use manager_support::{timed, wait_until};
use tokio_util::sync::CancellationToken;

/// Bounds the test, so a stuck controller fails instead of hanging CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(90);

/// Creates pod `name` (labelled `app=web`, container port `http`=`port`) and posts its IP and
/// readiness as a kubelet would.
async fn running_pod(pods: &Api<Pod>, name: &str, ip: &str, port: i32, ready: bool) -> Pod {
    let created = pods
        .create(
            &PostParams::default(),
            &pod(name)
                .labels(&[("app", "web")])
                .node("node-1")
                .container(
                    container("app")
                        .image("nginx")
                        .named_port("http", port, "TCP"),
                )
                .build(),
        )
        .await
        .expect("create pod");
    set_status(pods, created, ip, ready).await
}

async fn set_status(pods: &Api<Pod>, mut current: Pod, ip: &str, ready: bool) -> Pod {
    let name = current.metadata.name.clone().unwrap_or_default();
    current.status = Some(PodStatus {
        phase: Some("Running".to_owned()),
        pod_ip: Some(ip.to_owned()),
        pod_ips: Some(vec![PodIP { ip: ip.to_owned() }]),
        conditions: Some(vec![PodCondition {
            type_: "Ready".to_owned(),
            status: if ready { "True" } else { "False" }.to_owned(),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    });
    pods.replace_status(&name, &PostParams::default(), &current)
        .await
        .expect("status")
}

fn addresses(e: &Endpoints) -> (Vec<String>, Vec<String>, Vec<i32>) {
    let subsets = e.subsets.clone().unwrap_or_default();
    let mut ready: Vec<String> = subsets
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .map(|a| a.ip.clone())
        .collect();
    let mut not_ready: Vec<String> = subsets
        .iter()
        .flat_map(|s| s.not_ready_addresses.iter().flatten())
        .map(|a| a.ip.clone())
        .collect();
    let mut ports: Vec<i32> = subsets
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| p.port)
        .collect();
    ready.sort();
    not_ready.sort();
    ports.sort_unstable();
    ports.dedup();
    (ready, not_ready, ports)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_follow_pods_and_go_with_the_service() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let controller = Arc::new(EndpointController::new(
            &factory,
            client.clone(),
            Arc::new(FakeRecorder::new()),
            EndpointControllerOptions::default(),
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let task = tokio::spawn(controller.run(2, cancel.clone()));

        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
        let p1 = running_pod(&pods, "web-1", "10.244.0.5", 8080, true).await;
        running_pod(&pods, "web-2", "10.244.1.5", 9090, true).await;
        services
            .create(
                &PostParams::default(),
                &service("web")
                    .selector(&[("app", "web")])
                    .named_port("http", 80, "http")
                    .build(),
            )
            .await
            .expect("create service");

        let current = |want: (Vec<&'static str>, Vec<&'static str>, Vec<i32>)| {
            let endpoints = endpoints.clone();
            let want = (
                want.0.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
                want.1.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
                want.2,
            );
            async move {
                let got = endpoints
                    .get_opt("web")
                    .await
                    .ok()
                    .flatten()
                    .map(|e| addresses(&e));
                got == Some(want)
            }
        };
        wait_until("both pods listed, each with its own resolved port", || {
            current((vec!["10.244.0.5", "10.244.1.5"], vec![], vec![8080, 9090]))
        })
        .await;

        set_status(
            &pods,
            pods.get("web-1").await.expect("pod"),
            "10.244.0.5",
            false,
        )
        .await;
        wait_until("web-1 not ready", || {
            current((vec!["10.244.1.5"], vec!["10.244.0.5"], vec![8080, 9090]))
        })
        .await;

        pods.delete("web-2", &DeleteParams::default())
            .await
            .expect("delete pod");
        wait_until("web-2 gone", || {
            current((vec![], vec!["10.244.0.5"], vec![8080]))
        })
        .await;
        drop(p1);

        services
            .delete("web", &DeleteParams::default())
            .await
            .expect("delete service");
        wait_until("endpoints deleted with the service", || {
            let endpoints = endpoints.clone();
            async move { matches!(endpoints.get_opt("web").await, Ok(None)) }
        })
        .await;

        cancel.cancel();
        task.await.expect("controller task");
    })
    .await;
}
