//! TaintNodesByCondition: a new node starts tainted `node.kubernetes.io/not-ready:NoSchedule`, so nothing is scheduled to it before the node lifecycle controller sees it Ready (upstream's `plugin/pkg/admission/nodetaint`).

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::TAINT_NODES_BY_CONDITION;
use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::resources::core::NODES;
use crate::resources::pod::TAINT_NOT_READY;

/// The plugin.
#[derive(Debug, Default)]
pub struct TaintNodesByCondition;

#[async_trait]
impl Plugin for TaintNodesByCondition {
    fn name(&self) -> &'static str {
        TAINT_NODES_BY_CONDITION
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn admit(&self, _: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !a.is_main(&NODES) {
            return Ok(());
        }
        if let Some(node) = a.object.as_mut() {
            add_not_ready_taint(node);
        }
        Ok(())
    }
}

/// Adds the not-ready NoSchedule taint unless a taint with that key and effect exists
/// (upstream's `addNotReadyTaint`, `Taint.MatchTaint`).
fn add_not_ready_taint(node: &mut Value) {
    let Some(obj) = node.as_object_mut() else {
        return;
    };
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    let taints = spec.entry("taints").or_insert_with(|| json!([]));
    if !taints.is_array() {
        *taints = json!([]);
    }
    let Some(taints) = taints.as_array_mut() else {
        return;
    };
    let present = taints.iter().any(|t| {
        t.get("key").and_then(Value::as_str) == Some(TAINT_NOT_READY)
            && t.get("effect").and_then(Value::as_str) == Some("NoSchedule")
    });
    if !present {
        taints.push(json!({"key": TAINT_NOT_READY, "effect": "NoSchedule"}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;

    #[tokio::test]
    async fn new_nodes_get_the_not_ready_taint_once() {
        struct Case {
            name: &'static str,
            node: Value,
            want: Value,
        }
        let not_ready = json!({"key": TAINT_NOT_READY, "effect": "NoSchedule"});
        let cases = [
            Case {
                name: "no spec",
                node: json!({"metadata": {"name": "n"}}),
                want: json!([not_ready]),
            },
            Case {
                name: "other taints kept",
                node: json!({"spec": {"taints": [{"key": "a", "effect": "NoExecute"}]}}),
                want: json!([{"key": "a", "effect": "NoExecute"}, not_ready]),
            },
            Case {
                name: "already tainted",
                node: json!({"spec": {"taints": [not_ready]}}),
                want: json!([not_ready]),
            },
            Case {
                name: "same key, other effect",
                node: json!({"spec": {"taints": [{"key": TAINT_NOT_READY, "effect": "NoExecute"}]}}),
                want: json!([{"key": TAINT_NOT_READY, "effect": "NoExecute"}, not_ready]),
            },
        ];
        let user = UserInfo::admin();
        for case in cases {
            let mut a = Attributes::new(Operation::Create, &NODES, "", "n", Some(case.node), &user);
            TaintNodesByCondition
                .admit(&Objects::default(), &mut a)
                .await
                .expect("admit");
            let node = a.object.unwrap_or_default();
            assert_eq!(node["spec"]["taints"], case.want, "{}", case.name);
        }
        let status = json!({"spec": {}});
        let mut a = Attributes::new(
            Operation::Create,
            &NODES,
            "",
            "n",
            Some(status.clone()),
            &user,
        )
        .with_subresource("status");
        TaintNodesByCondition
            .admit(&Objects::default(), &mut a)
            .await
            .expect("admit");
        assert_eq!(a.object, Some(status));
    }
}
