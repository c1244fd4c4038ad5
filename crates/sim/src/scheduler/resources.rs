//! Resource requests of pods and what a node has left, as the scheduler's NodeResourcesFit sees them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use crate::quantity::Quantity;

/// Requests for the resources the scheduler accounts for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// CPU in millicores.
    pub milli_cpu: i128,
    /// Memory in bytes.
    pub memory: i128,
    /// Pod slots (each pod takes one).
    pub pods: i128,
}

impl Resources {
    /// Component-wise sum.
    pub fn plus(self, other: Resources) -> Resources {
        Resources {
            milli_cpu: self.milli_cpu.saturating_add(other.milli_cpu),
            memory: self.memory.saturating_add(other.memory),
            pods: self.pods.saturating_add(other.pods),
        }
    }

    /// Component-wise difference, saturating (never below what `i128` holds).
    pub fn minus(self, other: Resources) -> Resources {
        Resources {
            milli_cpu: self.milli_cpu.saturating_sub(other.milli_cpu),
            memory: self.memory.saturating_sub(other.memory),
            pods: self.pods.saturating_sub(other.pods),
        }
    }

    /// Component-wise maximum.
    fn max(self, other: Resources) -> Resources {
        Resources {
            milli_cpu: self.milli_cpu.max(other.milli_cpu),
            memory: self.memory.max(other.memory),
            pods: self.pods.max(other.pods),
        }
    }
}

/// The CPU a pod without a cpu request is assumed to use when scoring (upstream's
/// `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i128 = 100;
/// The memory a pod without a memory request is assumed to use when scoring (upstream's
/// `DefaultMemoryRequest`, 200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i128 = 200 * 1024 * 1024;

fn quantity_in(map: Option<&BTreeMap<String, K8sQuantity>>, name: &str) -> Option<Quantity> {
    // A malformed quantity cannot reach a stored pod through the API server's validation;
    // should one appear anyway it counts as zero rather than failing the whole pass.
    map.and_then(|m| m.get(name))
        .and_then(|q| Quantity::parse(&q.0).ok())
}

/// A pod's effective requests, as upstream's `computePodResourceRequest`: the larger of the
/// sum over containers and the largest init container, plus overhead, plus one pod slot.
/// With `non_zero`, containers without a cpu/memory request count the scoring defaults.
pub fn pod_requests(pod: &Pod, non_zero: bool) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources {
            pods: 1,
            ..Resources::default()
        };
    };
    let container_requests = |c: &k8s_openapi::api::core::v1::Container| {
        let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        let cpu = quantity_in(requests, "cpu").map(Quantity::milli);
        let memory = quantity_in(requests, "memory").map(Quantity::value);
        Resources {
            milli_cpu: match cpu {
                Some(v) => v,
                None if non_zero => DEFAULT_MILLI_CPU_REQUEST,
                None => 0,
            },
            memory: match memory {
                Some(v) => v,
                None if non_zero => DEFAULT_MEMORY_REQUEST,
                None => 0,
            },
            pods: 0,
        }
    };
    let sum = spec
        .containers
        .iter()
        .map(container_requests)
        .fold(Resources::default(), Resources::plus);
    let init_max = spec
        .init_containers
        .iter()
        .flatten()
        .map(container_requests)
        .fold(Resources::default(), Resources::max);
    let overhead = spec.overhead.as_ref();
    let overhead = Resources {
        milli_cpu: quantity_in(overhead, "cpu").map_or(0, Quantity::milli),
        memory: quantity_in(overhead, "memory").map_or(0, Quantity::value),
        pods: 0,
    };
    sum.max(init_max).plus(overhead).plus(Resources {
        pods: 1,
        ..Resources::default()
    })
}

/// A node's allocatable resources (falling back to capacity, as the kubelet reports both).
pub fn node_allocatable(node: &Node) -> Resources {
    let status = node.status.as_ref();
    let alloc = status
        .and_then(|s| s.allocatable.as_ref())
        .or_else(|| status.and_then(|s| s.capacity.as_ref()));
    Resources {
        milli_cpu: quantity_in(alloc, "cpu").map_or(0, Quantity::milli),
        memory: quantity_in(alloc, "memory").map_or(0, Quantity::value),
        pods: quantity_in(alloc, "pods").map_or(0, Quantity::value),
    }
}

/// Whether a pod still holds its node's resources: bound and not terminal.
pub fn occupies_node(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded") | Some("Failed"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_testing::{ContainerBuilder, PodBuilder, PodSpecBuilder};

    /// Container `c` requesting `cpu` (always given here) and `memory`.
    fn container(cpu: &str, memory: Option<&str>) -> ContainerBuilder {
        let c = kcm_testing::container("c").request("cpu", cpu);
        match memory {
            Some(memory) => c.request("memory", memory),
            None => c,
        }
    }

    #[test]
    fn requests_sum_containers_and_max_init() {
        let pod = PodBuilder::default()
            .container(container("100m", Some("64Mi")))
            .container(container("200m", None))
            .init_container(container("500m", Some("1Mi")))
            .build();
        let r = pod_requests(&pod, false);
        assert_eq!(r.milli_cpu, 500, "init container's larger cpu wins");
        assert_eq!(r.memory, 64 * 1024 * 1024);
        assert_eq!(r.pods, 1);
        let nz = pod_requests(&pod, true);
        assert_eq!(nz.memory, 64 * 1024 * 1024 + DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn no_requests_count_defaults_only_for_scoring() {
        let pod = PodBuilder::default()
            .container(kcm_testing::container("c"))
            .build();
        assert_eq!(pod_requests(&pod, false).milli_cpu, 0);
        assert_eq!(
            pod_requests(&pod, true).milli_cpu,
            DEFAULT_MILLI_CPU_REQUEST
        );
    }
}
