//! `metadata.generation`: which resources have one and what bumps it.
//!
//! The generic registry never sets a generation (upstream's `rest.BeforeCreate` fills only
//! `uid` and `creationTimestamp`; `rest.BeforeUpdate` keeps the stored one); each resource's
//! strategy decides. A ConfigMap has none, a Deployment starts at 1 and counts its spec
//! changes, a webhook configuration counts changes of its `webhooks`, a PriorityClass starts
//! at 1 and keeps it. Deleting bumps a generation that is above 0 (`rest.BeforeDelete`).

use serde_json::Value;

use crate::object;

/// How a resource's strategy keeps `metadata.generation` (upstream's `PrepareForCreate` /
/// `PrepareForUpdate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// No generation: the server neither sets nor bumps it (ConfigMap, Service, Node, ...).
    None,
    /// 1 on create; +1 when `spec` changed (Deployment, Job, Pod since v1.33, CRDs, ...).
    Spec,
    /// 1 on create; +1 when this top-level field changed (`webhooks` of the webhook
    /// configurations, `template` of a PodTemplate).
    Field(&'static str),
    /// 1 on create, never bumped by an update (PriorityClass).
    CreateOnly,
}

impl Generation {
    /// Whether objects of the resource get `generation: 1` when created.
    pub fn set_on_create(self) -> bool {
        self != Self::None
    }

    /// Whether the update from `old` to `new` bumps the generation. A strategy may bump it
    /// for more (a Deployment's annotations, an EndpointSlice's labels, a custom resource's
    /// top-level fields).
    pub fn bumps(self, new: &Value, old: &Value) -> bool {
        match self {
            Self::None | Self::CreateOnly => false,
            Self::Spec => object::spec_changed(new, old),
            Self::Field(field) => new.get(field) != old.get(field),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_rule_bumps_on_its_own_field_only() {
        let old = json!({"spec": {"replicas": 1}, "webhooks": [{"name": "a"}], "value": 5});
        let spec = json!({"spec": {"replicas": 2}, "webhooks": [{"name": "a"}], "value": 5});
        let hooks = json!({"spec": {"replicas": 1}, "webhooks": [{"name": "b"}], "value": 5});
        let value = json!({"spec": {"replicas": 1}, "webhooks": [{"name": "a"}], "value": 6});
        let cases = [
            (Generation::None, [false, false, false]),
            (Generation::Spec, [true, false, false]),
            (Generation::Field("webhooks"), [false, true, false]),
            (Generation::CreateOnly, [false, false, false]),
        ];
        for (rule, want) in cases {
            let got = [&spec, &hooks, &value].map(|new| rule.bumps(new, &old));
            assert_eq!(got, want, "{rule:?}");
        }
        assert!(!Generation::None.set_on_create());
        assert!(Generation::CreateOnly.set_on_create());
        assert!(Generation::Field("template").set_on_create());
    }
}
