//! Zones, zone states and the eviction rate each state gets (upstream's `handleDisruption`).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Node;

/// `topology.kubernetes.io/region`.
pub const LABEL_TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
/// `topology.kubernetes.io/zone`.
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// The deprecated beta region label, still honoured.
pub const LABEL_FAILURE_DOMAIN_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
/// The deprecated beta zone label, still honoured.
pub const LABEL_FAILURE_DOMAIN_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// Nodes with this label are left out of zone health (upstream's
/// `labelNodeDisruptionExclusion`).
pub const LABEL_NODE_DISRUPTION_EXCLUSION: &str = "node.kubernetes.io/exclude-disruption";

/// The health of a zone, as upstream's `ZoneState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneState {
    /// Just seen; no pass has judged it yet.
    Initial,
    /// Evict at `--node-eviction-rate`.
    Normal,
    /// No node of the zone is ready.
    FullDisruption,
    /// At least `--unhealthy-zone-threshold` of the nodes (and more than 2) are not ready.
    PartialDisruption,
}

impl ZoneState {
    /// Upstream's spelling (`Initial`, `Normal`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneState::Initial => "Initial",
            ZoneState::Normal => "Normal",
            ZoneState::FullDisruption => "FullDisruption",
            ZoneState::PartialDisruption => "PartialDisruption",
        }
    }
}

/// The zone a node belongs to: `region:\0:zone` from the topology labels (GA first, then
/// beta), `""` when it has neither, as component-helpers' `GetZoneKey`.
pub fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get = |ga: &str, beta: &str| {
        labels
            .and_then(|l| l.get(ga).or_else(|| l.get(beta)))
            .map(String::as_str)
            .unwrap_or("")
    };
    let region = get(LABEL_TOPOLOGY_REGION, LABEL_FAILURE_DOMAIN_BETA_REGION);
    let zone = get(LABEL_TOPOLOGY_ZONE, LABEL_FAILURE_DOMAIN_BETA_ZONE);
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    format!("{region}:\x00:{zone}")
}

/// Whether the node is left out of disruption checks.
pub fn is_excluded_from_disruption_checks(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(LABEL_NODE_DISRUPTION_EXCLUSION))
}

/// The eviction parameters (`--node-eviction-rate`, `--secondary-node-eviction-rate`,
/// `--large-cluster-size-threshold`, `--unhealthy-zone-threshold`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvictionRates {
    /// Taints per second in a Normal zone (and a fully disrupted one while others are not).
    pub eviction_qps: f32,
    /// Taints per second in a partially disrupted zone larger than `large_cluster_threshold`.
    pub secondary_eviction_qps: f32,
    /// Zones with at most this many nodes stop evicting when partially disrupted.
    pub large_cluster_threshold: i32,
    /// The unhealthy fraction from which a zone is partially disrupted.
    pub unhealthy_zone_threshold: f32,
}

impl EvictionRates {
    /// `(unhealthy, state)` of a zone whose nodes' Ready statuses are `ready` (`None`: no
    /// condition), as upstream's `ComputeZoneState`.
    pub fn compute_zone_state(&self, ready: &[Option<bool>]) -> (usize, ZoneState) {
        let ready_nodes = ready.iter().filter(|r| **r == Some(true)).count();
        let not_ready = ready.len() - ready_nodes;
        let state = if ready_nodes == 0 && not_ready > 0 {
            ZoneState::FullDisruption
        } else if not_ready > 2
            && (not_ready as f32) / (ready.len() as f32) >= self.unhealthy_zone_threshold
        {
            ZoneState::PartialDisruption
        } else {
            ZoneState::Normal
        };
        (not_ready, state)
    }

    /// The tainting rate of a zone of `zone_size` nodes in `state`, as upstream's
    /// `setLimiterInZone` with `ReducedQPSFunc` / `HealthyQPSFunc`. `None` for
    /// [`ZoneState::Initial`] (the limiter is left as it is).
    pub fn qps_for(&self, zone_size: usize, state: ZoneState) -> Option<f32> {
        match state {
            ZoneState::Normal | ZoneState::FullDisruption => Some(self.eviction_qps),
            ZoneState::PartialDisruption => {
                if i64::try_from(zone_size).unwrap_or(i64::MAX)
                    > i64::from(self.large_cluster_threshold)
                {
                    Some(self.secondary_eviction_qps)
                } else {
                    Some(0.0)
                }
            }
            ZoneState::Initial => None,
        }
    }

    /// What one monitor pass does to zones, as upstream's `handleDisruption`: `current` is the
    /// state of every known zone (new zones `Initial`), `observed` the Ready status of every
    /// node of each zone seen in this pass.
    pub fn plan_disruption(
        &self,
        current: &HashMap<String, ZoneState>,
        observed: &BTreeMap<String, Vec<Option<bool>>>,
    ) -> DisruptionPlan {
        let mut new_states = HashMap::new();
        let mut all_are_fully_disrupted = true;
        for (zone, ready) in observed {
            let (_, state) = self.compute_zone_state(ready);
            if state != ZoneState::FullDisruption {
                all_are_fully_disrupted = false;
            }
            new_states.insert(zone.clone(), state);
        }
        // Zones no longer observed are forgotten; among the others, were all fully disrupted?
        let mut states: HashMap<String, ZoneState> = current
            .iter()
            .filter(|(z, _)| observed.contains_key(*z))
            .map(|(z, s)| (z.clone(), *s))
            .collect();
        for zone in observed.keys() {
            states.entry(zone.clone()).or_insert(ZoneState::Initial);
        }
        let all_was_fully_disrupted = states.values().all(|s| *s == ZoneState::FullDisruption);
        let removed_zones: Vec<String> = current
            .keys()
            .filter(|z| !observed.contains_key(*z))
            .cloned()
            .collect();

        let mut plan = DisruptionPlan {
            states: states.clone(),
            limiters: Vec::new(),
            transition: MasterDisruption::None,
            removed_zones,
        };
        if all_are_fully_disrupted && all_was_fully_disrupted {
            return plan;
        }
        if all_are_fully_disrupted {
            plan.transition = MasterDisruption::Entering;
            for (zone, state) in plan.states.iter_mut() {
                plan.limiters.push((zone.clone(), 0.0));
                *state = ZoneState::FullDisruption;
            }
            return plan;
        }
        if all_was_fully_disrupted {
            plan.transition = MasterDisruption::Exiting;
            for (zone, state) in plan.states.iter_mut() {
                let new = new_states.get(zone).copied().unwrap_or(ZoneState::Normal);
                let size = observed.get(zone).map_or(0, Vec::len);
                if let Some(qps) = self.qps_for(size, new) {
                    plan.limiters.push((zone.clone(), qps));
                }
                *state = new;
            }
            return plan;
        }
        for (zone, state) in plan.states.iter_mut() {
            let new = new_states.get(zone).copied().unwrap_or(ZoneState::Normal);
            if *state == new {
                continue;
            }
            let size = observed.get(zone).map_or(0, Vec::len);
            if let Some(qps) = self.qps_for(size, new) {
                plan.limiters.push((zone.clone(), qps));
            }
            *state = new;
        }
        plan
    }
}

/// Whether the whole control plane looks cut off (every zone fully disrupted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MasterDisruption {
    /// No change of mode.
    None,
    /// Every zone just became fully disrupted: stop tainting and remove NoExecute taints.
    Entering,
    /// Some node is ready again: reset every node's probe time and the limiters.
    Exiting,
}

/// The outcome of [`EvictionRates::plan_disruption`].
#[derive(Clone, Debug, PartialEq)]
pub struct DisruptionPlan {
    /// The state of every zone after the pass.
    pub states: HashMap<String, ZoneState>,
    /// `(zone, qps)`: the tainting rates to swap in.
    pub limiters: Vec<(String, f32)>,
    /// Entering or leaving "master disruption" mode.
    pub transition: MasterDisruption,
    /// Zones with no node any more.
    pub removed_zones: Vec<String>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const RATES: EvictionRates = EvictionRates {
        eviction_qps: 0.1,
        secondary_eviction_qps: 0.01,
        large_cluster_threshold: 50,
        unhealthy_zone_threshold: 0.55,
    };

    fn zone(ready: usize, not_ready: usize) -> Vec<Option<bool>> {
        let mut v = vec![Some(true); ready];
        v.extend(std::iter::repeat_n(Some(false), not_ready));
        v
    }

    #[test]
    fn zone_state_follows_upstream_thresholds() {
        struct Case {
            name: &'static str,
            ready: usize,
            not_ready: usize,
            want: ZoneState,
        }
        let cases = [
            Case {
                name: "all ready",
                ready: 3,
                not_ready: 0,
                want: ZoneState::Normal,
            },
            Case {
                name: "none ready",
                ready: 0,
                not_ready: 2,
                want: ZoneState::FullDisruption,
            },
            Case {
                name: "two of three unhealthy is not enough (needs more than 2)",
                ready: 1,
                not_ready: 2,
                want: ZoneState::Normal,
            },
            Case {
                name: "three of five unhealthy (0.6 >= 0.55)",
                ready: 2,
                not_ready: 3,
                want: ZoneState::PartialDisruption,
            },
            Case {
                name: "three of six unhealthy (0.5 < 0.55)",
                ready: 3,
                not_ready: 3,
                want: ZoneState::Normal,
            },
        ];
        for case in cases {
            let (_, state) = RATES.compute_zone_state(&zone(case.ready, case.not_ready));
            assert_eq!(state, case.want, "{}", case.name);
        }
        assert_eq!(
            RATES.compute_zone_state(&[None, Some(true)]).0,
            1,
            "no condition counts as unhealthy"
        );
    }

    #[test]
    fn rates_per_state_and_zone_size() {
        assert_eq!(RATES.qps_for(10, ZoneState::Normal), Some(0.1));
        assert_eq!(RATES.qps_for(10, ZoneState::FullDisruption), Some(0.1));
        assert_eq!(RATES.qps_for(50, ZoneState::PartialDisruption), Some(0.0));
        assert_eq!(RATES.qps_for(51, ZoneState::PartialDisruption), Some(0.01));
        assert_eq!(RATES.qps_for(51, ZoneState::Initial), None);
    }

    #[test]
    fn zone_transitions_swap_limiters() {
        let mut current = HashMap::from([
            ("a".to_owned(), ZoneState::Initial),
            ("b".to_owned(), ZoneState::Initial),
        ]);
        let observed =
            BTreeMap::from([("a".to_owned(), zone(3, 0)), ("b".to_owned(), zone(60, 0))]);
        let plan = RATES.plan_disruption(&current, &observed);
        assert_eq!(plan.transition, MasterDisruption::None);
        assert_eq!(plan.states["a"], ZoneState::Normal);
        let mut limiters = plan.limiters.clone();
        limiters.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(limiters, [("a".to_owned(), 0.1), ("b".to_owned(), 0.1)]);
        current = plan.states;

        // Zone b (60 nodes) partially disrupted: secondary rate; zone a fully down: normal rate.
        let observed =
            BTreeMap::from([("a".to_owned(), zone(0, 3)), ("b".to_owned(), zone(20, 40))]);
        let plan = RATES.plan_disruption(&current, &observed);
        assert_eq!(plan.states["a"], ZoneState::FullDisruption);
        assert_eq!(plan.states["b"], ZoneState::PartialDisruption);
        let mut limiters = plan.limiters.clone();
        limiters.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(limiters, [("a".to_owned(), 0.1), ("b".to_owned(), 0.01)]);

        // A small partially disrupted zone stops tainting.
        let observed =
            BTreeMap::from([("a".to_owned(), zone(1, 4)), ("b".to_owned(), zone(60, 0))]);
        let plan = RATES.plan_disruption(&plan.states, &observed);
        assert!(plan.limiters.contains(&("a".to_owned(), 0.0)));
    }

    #[test]
    fn all_zones_down_enters_and_leaves_master_disruption() {
        let current = HashMap::from([
            ("a".to_owned(), ZoneState::Normal),
            ("b".to_owned(), ZoneState::Normal),
        ]);
        let down = BTreeMap::from([("a".to_owned(), zone(0, 2)), ("b".to_owned(), zone(0, 1))]);
        let plan = RATES.plan_disruption(&current, &down);
        assert_eq!(plan.transition, MasterDisruption::Entering);
        assert!(plan.limiters.iter().all(|(_, qps)| *qps == 0.0));
        assert_eq!(plan.limiters.len(), 2);
        assert!(
            plan.states
                .values()
                .all(|s| *s == ZoneState::FullDisruption)
        );

        // Staying down changes nothing.
        let again = RATES.plan_disruption(&plan.states, &down);
        assert_eq!(again.transition, MasterDisruption::None);
        assert!(again.limiters.is_empty());

        // One node back: exit, every zone gets the rate of its new state.
        let up = BTreeMap::from([("a".to_owned(), zone(1, 1)), ("b".to_owned(), zone(0, 1))]);
        let exit = RATES.plan_disruption(&again.states, &up);
        assert_eq!(exit.transition, MasterDisruption::Exiting);
        assert_eq!(exit.states["a"], ZoneState::Normal);
        assert_eq!(exit.states["b"], ZoneState::FullDisruption);
        assert_eq!(exit.limiters.len(), 2);
        assert!(exit.limiters.iter().all(|(_, qps)| *qps == 0.1));
    }

    #[test]
    fn zone_key_from_topology_labels() {
        let mut node = Node::default();
        assert_eq!(zone_key(&node), "");
        node.metadata.labels = Some(
            [
                (LABEL_TOPOLOGY_REGION.to_owned(), "r".to_owned()),
                (LABEL_FAILURE_DOMAIN_BETA_ZONE.to_owned(), "z".to_owned()),
            ]
            .into(),
        );
        assert_eq!(zone_key(&node), "r:\x00:z");
    }
}
