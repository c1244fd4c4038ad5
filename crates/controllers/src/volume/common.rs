//! What the storage controllers share about pods and claims: the pod-to-claim index (upstream's `volume/common`), the naming and ownership rules of generic ephemeral volumes (re-exported from `kcm_machinery::storage::ephemeral`, upstream's `component-helpers/storage/ephemeral`) and when a pod is done with its volumes (`volume/util.IsPodTerminated`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, Volume};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{IndexFunc, Indexers};
use kcm_machinery::storage::ephemeral::pod_volume_claim;
pub use kcm_machinery::storage::ephemeral::{NotOwnedByPod, volume_claim_name, volume_is_for_pod};

/// The name of the pod index by the claims a pod uses (upstream's `PodPVCIndex`).
pub const POD_PVC_INDEX: &str = "pod-pvc-index";

/// The `namespace/name` keys of the claims `pod` uses: those its `persistentVolumeClaim`
/// volumes name and those its generic ephemeral volumes get, as upstream's `PodPVCIndexFunc`.
pub fn pod_pvc_index(pod: &Pod) -> Vec<String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    pod_volumes(pod)
        .filter_map(|volume| pod_volume_claim(pod, volume))
        .filter(|claim| !claim.name.is_empty())
        .map(|claim| format!("{namespace}/{}", claim.name))
        .collect()
}

/// Adds [`POD_PVC_INDEX`] to the pod cache unless another controller sharing it already did,
/// as upstream's `AddPodPVCIndexerIfNotPresent`.
pub fn add_pod_pvc_indexer(pods: &Indexer<Pod>) -> kcm_machinery::informer::store::Result<()> {
    if pods.index_names().iter().any(|name| name == POD_PVC_INDEX) {
        return Ok(());
    }
    let mut indexers: Indexers<Pod> = Indexers::new();
    let index: IndexFunc<Pod> = Arc::new(pod_pvc_index);
    indexers.insert(POD_PVC_INDEX.to_owned(), index);
    pods.add_indexers(indexers)
}

/// The volumes of `pod`'s spec.
pub fn pod_volumes(pod: &Pod) -> impl Iterator<Item = &Volume> {
    pod.spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
}

/// Whether `pod` is done with its volumes: `Succeeded` or `Failed`, or being deleted with no
/// container (init, regular or ephemeral) running, as upstream's `volumeutil.IsPodTerminated`.
pub fn is_pod_terminated(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return true;
    }
    let not_running = |statuses: Option<&Vec<ContainerStatus>>| {
        statuses.into_iter().flatten().all(|s| {
            s.state
                .as_ref()
                .is_some_and(|state| state.terminated.is_some() || state.waiting.is_some())
        })
    };
    pod.metadata.deletion_timestamp.is_some()
        && not_running(status.and_then(|s| s.init_container_statuses.as_ref()))
        && not_running(status.and_then(|s| s.container_statuses.as_ref()))
        && not_running(status.and_then(|s| s.ephemeral_container_statuses.as_ref()))
}

/// Whether `pod` is scheduled (`spec.nodeName` set): only then can a kubelet be using its
/// volumes.
pub fn is_scheduled(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|node| !node.is_empty())
}

#[cfg(test)]
mod tests {
    use kcm_testing::{MetaBuilder, PodSpecBuilder, container_status, pod, pvc};

    use super::*;

    fn deleted() -> jiff::Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("timestamp")
    }

    #[test]
    fn index_names_direct_and_ephemeral_claims() {
        let p = pod("web")
            .namespace("ns")
            .claim_volume("data", "data-claim")
            .ephemeral_volume("scratch", pvc("").storage("1Gi"))
            .empty_dir_volume("tmp")
            .build();
        assert_eq!(pod_pvc_index(&p), vec!["ns/data-claim", "ns/web-scratch"]);
        assert!(pod_pvc_index(&pod("bare").build()).is_empty());
    }

    #[test]
    fn the_indexer_is_added_once() {
        let pods: Indexer<Pod> = Indexer::new();
        pods.add(Arc::new(
            pod("web").namespace("ns").claim_volume("v", "c").build(),
        ))
        .expect("add");
        add_pod_pvc_indexer(&pods).expect("first");
        add_pod_pvc_indexer(&pods).expect("second is a no-op");
        let users = pods.by_index(POD_PVC_INDEX, "ns/c").expect("indexed");
        assert_eq!(users.len(), 1);
    }

    #[test]
    fn terminated_pods_as_upstream() {
        struct Case {
            name: &'static str,
            pod: Pod,
            want: bool,
        }
        let cases = [
            Case {
                name: "running",
                pod: pod("p").phase("Running").build(),
                want: false,
            },
            Case {
                name: "succeeded",
                pod: pod("p").phase("Succeeded").build(),
                want: true,
            },
            Case {
                name: "failed",
                pod: pod("p").phase("Failed").build(),
                want: true,
            },
            Case {
                name: "deleted, no container statuses",
                pod: pod("p").phase("Running").deleted_at(deleted()).build(),
                want: true,
            },
            Case {
                name: "deleted, a container still running",
                pod: pod("p")
                    .phase("Running")
                    .deleted_at(deleted())
                    .container_status(container_status("a").terminated(0))
                    .container_status(container_status("b").running_since(deleted()))
                    .build(),
                want: false,
            },
            Case {
                name: "deleted, containers terminated or waiting",
                pod: pod("p")
                    .phase("Running")
                    .deleted_at(deleted())
                    .container_status(container_status("a").terminated(0))
                    .container_status(container_status("b").waiting("ContainerCreating"))
                    .build(),
                want: true,
            },
        ];
        for case in cases {
            assert_eq!(is_pod_terminated(&case.pod), case.want, "{}", case.name);
        }
    }
}
