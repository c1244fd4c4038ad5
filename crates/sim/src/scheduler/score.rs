//! Node scoring: least-allocated, balanced allocation and spreading of a workload's pods.

use super::resources::Resources;

/// The highest score a single plugin gives (upstream's `MaxNodeScore`).
pub const MAX_NODE_SCORE: i128 = 100;

/// What scoring needs to know about one feasible node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeLoad {
    /// The node's allocatable resources.
    pub allocatable: Resources,
    /// Non-zero requests of the pods on the node, including the pod being scheduled.
    pub requested: Resources,
    /// Pods on the node that belong to the same workload as the pod being scheduled.
    pub same_workload_pods: usize,
}

/// NodeResourcesFit's LeastAllocated strategy: the mean free fraction of cpu and memory.
pub fn least_allocated(load: &NodeLoad) -> i128 {
    let free = |alloc: i128, req: i128| {
        if alloc <= 0 || req > alloc {
            0
        } else {
            (alloc - req) * MAX_NODE_SCORE / alloc
        }
    };
    (free(load.allocatable.milli_cpu, load.requested.milli_cpu)
        + free(load.allocatable.memory, load.requested.memory))
        / 2
}

/// NodeResourcesBalancedAllocation: prefers nodes whose cpu and memory use stay even
/// (one minus the standard deviation of the two fractions).
pub fn balanced_allocation(load: &NodeLoad) -> i128 {
    let frac = |alloc: i128, req: i128| {
        if alloc <= 0 {
            1.0
        } else {
            (req as f64 / alloc as f64).min(1.0)
        }
    };
    let cpu = frac(load.allocatable.milli_cpu, load.requested.milli_cpu);
    let mem = frac(load.allocatable.memory, load.requested.memory);
    let std = (cpu - mem).abs() / 2.0;
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i128
}

/// Spreading (as the default PodTopologySpread constraint on hostname does): nodes with fewer
/// pods of the same workload score higher, normalized over the feasible nodes.
pub fn spread(loads: &[NodeLoad]) -> Vec<i128> {
    let max = loads
        .iter()
        .map(|l| l.same_workload_pods)
        .max()
        .unwrap_or(0);
    loads
        .iter()
        .map(|l| {
            if max == 0 {
                MAX_NODE_SCORE
            } else {
                (max - l.same_workload_pods) as i128 * MAX_NODE_SCORE / max as i128
            }
        })
        .collect()
}

/// Total scores for the feasible nodes, in the same order: least-allocated + balanced +
/// 2 × spread (spreading replicas weighs most, as topology spread does upstream).
pub fn total_scores(loads: &[NodeLoad]) -> Vec<i128> {
    let spread = spread(loads);
    loads
        .iter()
        .zip(spread)
        .map(|(l, s)| least_allocated(l) + balanced_allocation(l) + 2 * s)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(cpu: i128, mem: i128, same: usize) -> NodeLoad {
        NodeLoad {
            allocatable: Resources {
                milli_cpu: 4000,
                memory: 4000,
                pods: 110,
            },
            requested: Resources {
                milli_cpu: cpu,
                memory: mem,
                pods: 1,
            },
            same_workload_pods: same,
        }
    }

    #[test]
    fn least_allocated_prefers_emptier_nodes() {
        assert_eq!(least_allocated(&load(0, 0, 0)), 100);
        assert_eq!(least_allocated(&load(2000, 2000, 0)), 50);
        assert_eq!(least_allocated(&load(4000, 0, 0)), 50);
        assert_eq!(least_allocated(&load(5000, 5000, 0)), 0);
    }

    #[test]
    fn balanced_prefers_even_use() {
        assert!(balanced_allocation(&load(2000, 2000, 0)) > balanced_allocation(&load(4000, 0, 0)));
        assert_eq!(balanced_allocation(&load(1000, 1000, 0)), 100);
    }

    #[test]
    fn spread_prefers_nodes_without_siblings() {
        let loads = [load(0, 0, 2), load(0, 0, 0), load(0, 0, 1)];
        assert_eq!(spread(&loads), vec![0, 100, 50]);
        let totals = total_scores(&loads);
        assert!(totals[1] > totals[2] && totals[2] > totals[0]);
    }
}
