//! Nodes: [`node`] with conditions, taints and allocatable resources.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};

use crate::meta::{MetaBuilder, quantities};

/// Builds a [`Node`]. Start with [`node`]; `NodeBuilder::default()` is a node with no name.
#[derive(Clone, Debug, Default)]
pub struct NodeBuilder {
    node: Node,
}

/// A node named `name`; no spec or status.
pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder::default().name(name)
}

impl NodeBuilder {
    /// Makes `spec` present even if no setter fills it.
    pub fn default_spec(mut self) -> Self {
        self.spec_mut();
        self
    }

    /// Makes `status` present even if no setter fills it.
    pub fn default_status(mut self) -> Self {
        self.status_mut();
        self
    }

    /// Sets `spec.unschedulable` (cordoned when true).
    pub fn unschedulable(mut self, unschedulable: bool) -> Self {
        self.spec_mut().unschedulable = Some(unschedulable);
        self
    }

    /// Appends a taint (see [`crate::taint`]).
    pub fn taint(mut self, taint: impl Into<Taint>) -> Self {
        self.spec_mut()
            .taints
            .get_or_insert_default()
            .push(taint.into());
        self
    }

    /// Sets `spec.taints` to exactly `taints` (an empty list stays present).
    pub fn taints(mut self, taints: Vec<Taint>) -> Self {
        self.spec_mut().taints = Some(taints);
        self
    }

    /// Sets `spec.podCIDR`.
    pub fn pod_cidr(mut self, cidr: &str) -> Self {
        self.spec_mut().pod_cidr = Some(cidr.to_owned());
        self
    }

    /// Appends a condition (see [`crate::node_condition`]).
    pub fn condition(mut self, condition: impl Into<NodeCondition>) -> Self {
        self.status_mut()
            .conditions
            .get_or_insert_default()
            .push(condition.into());
        self
    }

    /// Sets `status.conditions` to exactly `conditions` (an empty list stays present, as a
    /// node that never posted its status has).
    pub fn conditions(mut self, conditions: Vec<NodeCondition>) -> Self {
        self.status_mut().conditions = Some(conditions);
        self
    }

    /// Adds `status.allocatable` entries (`("cpu", "4")`).
    pub fn allocatable(mut self, pairs: &[(&str, &str)]) -> Self {
        self.status_mut()
            .allocatable
            .get_or_insert_default()
            .extend(quantities(pairs));
        self
    }

    /// Adds `status.capacity` entries.
    pub fn capacity(mut self, pairs: &[(&str, &str)]) -> Self {
        self.status_mut()
            .capacity
            .get_or_insert_default()
            .extend(quantities(pairs));
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut Node)) -> Self {
        f(&mut self.node);
        self
    }

    /// The node.
    pub fn build(self) -> Node {
        self.node
    }

    /// The node, shared as caches hand it out.
    pub fn arc(self) -> Arc<Node> {
        Arc::new(self.node)
    }

    fn spec_mut(&mut self) -> &mut NodeSpec {
        self.node.spec.get_or_insert_default()
    }

    fn status_mut(&mut self) -> &mut NodeStatus {
        self.node.status.get_or_insert_default()
    }
}

meta_builder!(NodeBuilder => node);
from_builder!(NodeBuilder => Node);

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;
    use crate::{node_condition, taint};

    #[test]
    fn default_spec_and_status() {
        let n = node("n").default_spec().default_status().build();
        assert_eq!(n.spec, Some(NodeSpec::default()));
        assert_eq!(n.status, Some(NodeStatus::default()));
    }

    #[test]
    fn conditions_and_taints_replace_and_keep_an_empty_list() {
        let n = node("n")
            .condition(node_condition("Ready", "True"))
            .conditions(vec![])
            .taint(taint("k", "NoSchedule"))
            .taints(vec![])
            .build();
        assert_eq!(n.status.and_then(|s| s.conditions), Some(vec![]));
        assert_eq!(n.spec.and_then(|s| s.taints), Some(vec![]));
    }

    #[test]
    fn setters() {
        let n = node("n")
            .unschedulable(true)
            .taint(taint("k", "NoSchedule"))
            .pod_cidr("10.0.0.0/24")
            .condition(node_condition("Ready", "True"))
            .condition(node_condition("MemoryPressure", "False"))
            .allocatable(&[("cpu", "4"), ("pods", "110")])
            .capacity(&[("cpu", "8")])
            .arc();
        let spec = n.spec.clone().unwrap_or_default();
        assert_eq!(spec.unschedulable, Some(true));
        assert_eq!(spec.taints.map(|t| t.len()), Some(1));
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.0.0.0/24"));
        let status = n.status.clone().unwrap_or_default();
        assert_eq!(status.conditions.map(|c| c.len()), Some(2));
        let allocatable = status.allocatable.unwrap_or_default();
        assert_eq!(allocatable.get("cpu"), Some(&Quantity("4".into())));
        assert_eq!(allocatable.len(), 2);
        assert_eq!(status.capacity.map(|c| c.len()), Some(1));
    }
}
