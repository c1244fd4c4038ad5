//! DefaultTolerationSeconds: pods tolerate the `not-ready` and `unreachable` NoExecute taints for 300 s unless they already tolerate them (upstream's `plugin/pkg/admission/defaulttolerationseconds`).

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Toleration;
use serde_json::{Value, json};

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::DEFAULT_TOLERATION_SECONDS;
use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::registry::strategy::typed;
use crate::resources::pod::{self, PODS, TAINT_NOT_READY, TAINT_UNREACHABLE};

/// The plugin, with its two durations (`--default-not-ready-toleration-seconds`,
/// `--default-unreachable-toleration-seconds`, 300 s each).
#[derive(Debug)]
pub struct DefaultTolerationSeconds {
    /// Seconds a pod tolerates a not-ready node.
    pub not_ready_seconds: i64,
    /// Seconds a pod tolerates an unreachable node.
    pub unreachable_seconds: i64,
}

impl Default for DefaultTolerationSeconds {
    fn default() -> Self {
        Self {
            not_ready_seconds: pod::DEFAULT_TOLERATION_SECONDS,
            unreachable_seconds: pod::DEFAULT_TOLERATION_SECONDS,
        }
    }
}

#[async_trait]
impl Plugin for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        DEFAULT_TOLERATION_SECONDS
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn admit(&self, _: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !a.is_main(&PODS) {
            return Ok(());
        }
        if let Some(pod) = a.object.as_mut() {
            self.add_default_tolerations(pod);
        }
        Ok(())
    }
}

impl DefaultTolerationSeconds {
    /// Appends the tolerations the pod lacks: a toleration with the taint's key (or no key)
    /// and effect NoExecute (or no effect) already covers it.
    pub fn add_default_tolerations(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        let existing: Vec<Toleration> = spec
            .get("tolerations")
            .and_then(typed::<Vec<Toleration>>)
            .unwrap_or_default();
        let tolerates = |key: &str| {
            existing.iter().any(|t| {
                let k = t.key.as_deref().unwrap_or("");
                let e = t.effect.as_deref().unwrap_or("");
                (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
            })
        };
        let mut added = Vec::new();
        for (key, seconds) in [
            (TAINT_NOT_READY, self.not_ready_seconds),
            (TAINT_UNREACHABLE, self.unreachable_seconds),
        ] {
            if !tolerates(key) {
                added.push(json!({
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": seconds,
                }));
            }
        }
        if added.is_empty() {
            return;
        }
        let list = spec
            .as_object_mut()
            .map(|m| m.entry("tolerations").or_insert_with(|| json!([])));
        if let Some(Value::Array(list)) = list {
            list.extend(added);
        } else if let Some(slot) = list {
            *slot = Value::Array(added);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;

    #[test]
    fn default_tolerations_are_added_once_and_respect_existing_ones() {
        struct Case {
            name: &'static str,
            tolerations: Value,
            want_keys: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "none: both added",
                tolerations: json!([]),
                want_keys: vec![TAINT_NOT_READY, TAINT_UNREACHABLE],
            },
            Case {
                name: "not-ready tolerated forever: only unreachable added",
                tolerations: json!([{"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute"}]),
                want_keys: vec![TAINT_NOT_READY, TAINT_UNREACHABLE],
            },
            Case {
                name: "tolerates everything: nothing added",
                tolerations: json!([{"operator": "Exists"}]),
                want_keys: vec![""],
            },
            Case {
                name: "a NoSchedule toleration does not count",
                tolerations: json!([{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoSchedule"}]),
                want_keys: vec![TAINT_UNREACHABLE, TAINT_NOT_READY, TAINT_UNREACHABLE],
            },
        ];
        let plugin = DefaultTolerationSeconds::default();
        for case in cases {
            let mut pod = json!({"spec": {"tolerations": case.tolerations}});
            plugin.add_default_tolerations(&mut pod);
            plugin.add_default_tolerations(&mut pod);
            let keys: Vec<&str> = pod["spec"]["tolerations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| t["key"].as_str().unwrap_or(""))
                .collect();
            assert_eq!(keys, case.want_keys, "{}", case.name);
        }
    }

    #[tokio::test]
    async fn only_pods_proper_get_tolerations_for_300_seconds() {
        let user = UserInfo::admin();
        let pod = json!({"spec": {"containers": [{"name": "c"}]}});
        let mut a = Attributes::new(
            Operation::Create,
            &PODS,
            "ns",
            "p",
            Some(pod.clone()),
            &user,
        );
        DefaultTolerationSeconds::default()
            .admit(&Objects::default(), &mut a)
            .await
            .expect("admit");
        let got = a.object.unwrap_or_default();
        assert_eq!(got["spec"]["tolerations"][0]["tolerationSeconds"], 300);
        assert_eq!(got["spec"]["tolerations"][1]["key"], TAINT_UNREACHABLE);

        let mut status = Attributes::new(
            Operation::Update,
            &PODS,
            "ns",
            "p",
            Some(pod.clone()),
            &user,
        )
        .with_subresource("status");
        DefaultTolerationSeconds::default()
            .admit(&Objects::default(), &mut status)
            .await
            .expect("admit");
        assert_eq!(status.object, Some(pod));
    }
}
