//! The device taint eviction controller against the embedded API server: real HTTP, real informers; a NoExecute taint published in a ResourceSlice evicts the pod using the allocated claim, and a tolerated one does not.

mod manager_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationResult, DeviceRequestAllocationResult, DeviceTaint,
    DeviceToleration, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus,
    ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_apiserver::testing::TestServer;
use kcm_controllers::devicetainteviction::{
    DISRUPTION_TARGET, DeviceTaintEvictionController, DeviceTaintEvictionOptions,
    REASON_DELETION_BY_DEVICE_TAINT_MANAGER,
};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{MetaBuilder, PodSpecBuilder, container, pod};
use kube::api::{Api, PostParams};
use manager_support::{timed, wait_until};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const TEST_LIMIT: Duration = Duration::from_secs(60);
const NODE: &str = "worker";
const DRIVER: &str = "gpu.example.com";

fn slice(devices: &[(&str, Option<&str>)]) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(format!("{NODE}-gpus")),
            ..ObjectMeta::default()
        },
        spec: ResourceSliceSpec {
            driver: DRIVER.to_owned(),
            node_name: Some(NODE.to_owned()),
            pool: ResourcePool {
                name: NODE.to_owned(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(
                devices
                    .iter()
                    .map(|(name, effect)| Device {
                        name: (*name).to_owned(),
                        // No timeAdded: the API server sets it.
                        taints: effect.map(|effect| {
                            vec![DeviceTaint {
                                key: "example.com/unhealthy".to_owned(),
                                effect: effect.to_owned(),
                                ..DeviceTaint::default()
                            }]
                        }),
                        ..Device::default()
                    })
                    .collect(),
            ),
            ..ResourceSliceSpec::default()
        },
    }
}

/// Creates pod `name` using claim `<name>-gpu` allocated device `device` (with `tolerations`)
/// and reserved for the pod.
async fn pod_with_claim(
    client: &kube::Client,
    name: &str,
    device: &str,
    tolerations: Option<Vec<DeviceToleration>>,
) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let claim_name = format!("{name}-gpu");
    let pod = pods
        .create(
            &PostParams::default(),
            &pod(name)
                .namespace("default")
                .node(NODE)
                .container(container("c").image("busybox"))
                .with(|p| {
                    p.spec.get_or_insert_with(Default::default).resource_claims =
                        Some(vec![PodResourceClaim {
                            name: "gpu".to_owned(),
                            resource_claim_name: Some(claim_name.clone()),
                            ..PodResourceClaim::default()
                        }]);
                })
                .build(),
        )
        .await
        .expect("pod");
    let mut claim = claims
        .create(
            &PostParams::default(),
            &ResourceClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name.clone()),
                    ..ObjectMeta::default()
                },
                ..ResourceClaim::default()
            },
        )
        .await
        .expect("claim");
    claim.status = Some(ResourceClaimStatus {
        allocation: Some(AllocationResult {
            devices: Some(DeviceAllocationResult {
                results: Some(vec![DeviceRequestAllocationResult {
                    driver: DRIVER.to_owned(),
                    pool: NODE.to_owned(),
                    device: device.to_owned(),
                    request: "gpu".to_owned(),
                    tolerations,
                    ..DeviceRequestAllocationResult::default()
                }]),
                ..DeviceAllocationResult::default()
            }),
            ..AllocationResult::default()
        }),
        reserved_for: Some(vec![ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".to_owned(),
            name: name.to_owned(),
            uid: pod.metadata.uid.clone().expect("uid"),
        }]),
        ..ResourceClaimStatus::default()
    });
    claims
        .replace_status(&claim_name, &PostParams::default(), &claim)
        .await
        .expect("claim status");
    pod
}

/// A pod whose allocated device is tainted NoExecute is marked `DisruptionTarget` and deleted;
/// one whose claim tolerates the taint for an hour stays, as does one on an untainted device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_execute_device_taint_evicts_the_pod_using_the_device() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let slices: Api<ResourceSlice> = Api::all(client.clone());
        let created = slices
            .create(
                &PostParams::default(),
                &slice(&[
                    ("gpu-0", Some("NoExecute")),
                    ("gpu-1", Some("NoExecute")),
                    ("gpu-2", None),
                ]),
            )
            .await
            .expect("slice");
        let devices = created.spec.devices.expect("devices");
        assert!(
            devices[0].taints.as_ref().expect("taints")[0]
                .time_added
                .is_some(),
            "the API server defaults timeAdded"
        );
        pod_with_claim(&client, "evicted", "gpu-0", None).await;
        pod_with_claim(
            &client,
            "tolerating",
            "gpu-1",
            Some(vec![DeviceToleration {
                operator: Some("Exists".to_owned()),
                effect: Some("NoExecute".to_owned()),
                toleration_seconds: Some(3600),
                ..DeviceToleration::default()
            }]),
        )
        .await;
        pod_with_claim(&client, "untainted", "gpu-2", None).await;

        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let cancel = CancellationToken::new();
        let recorder = FakeRecorder::new();
        let controller = DeviceTaintEvictionController::new(
            &factory,
            client.clone(),
            Arc::new(recorder.clone()),
            DeviceTaintEvictionOptions::default(),
        );
        factory.start(&cancel);
        tokio::spawn(controller.clone().run(2, cancel.clone()));

        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        wait_until("the pod on the tainted device is evicted", || async {
            match pods.get_opt("evicted").await.expect("get") {
                None => true,
                Some(p) => p.metadata.deletion_timestamp.is_some(),
            }
        })
        .await;
        if let Some(evicted) = pods.get_opt("evicted").await.expect("get") {
            let conditions = evicted
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default();
            let target = conditions
                .iter()
                .find(|c| c.type_ == DISRUPTION_TARGET)
                .expect("DisruptionTarget");
            assert_eq!(target.status, "True");
            assert_eq!(
                target.reason.as_deref(),
                Some(REASON_DELETION_BY_DEVICE_TAINT_MANAGER)
            );
        }
        wait_until("the deletion is counted", || async {
            controller.metrics().pod_deletions() == 1
        })
        .await;
        for kept in ["tolerating", "untainted"] {
            let pod = pods.get(kept).await.expect("kept");
            assert!(pod.metadata.deletion_timestamp.is_none(), "{kept}");
        }
        assert_eq!(recorder.reasons(), ["DeviceTaintManagerEviction"]);
        cancel.cancel();
    })
    .await;
}
