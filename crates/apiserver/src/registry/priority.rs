//! The Priority admission plugin: a pod's `spec.priority` resolved from its PriorityClass (or the global default) on create, and at most one PriorityClass marked `globalDefault`.
//!
//! As upstream's `plugin/pkg/admission/priority`. It only runs when the registry serves
//! priority classes. A pod naming a class that does not exist is refused (403), as is a pod
//! whose own `priority` or `preemptionPolicy` contradicts its class. Not enforced: the
//! quota-based limit on which namespaces may use the system classes (upstream configures it
//! through an admission configuration file, off by default).

use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::object;
use crate::registry::Registry;
use crate::registry::list::ListOptions;
use crate::registry::resource::ResourceDef;
use crate::resources::pod::PODS;
use crate::resources::scheduling::PRIORITY_CLASSES;

/// A pod's priority when it names no class and no class is the global default.
const DEFAULT_PRIORITY: i64 = 0;

impl Registry {
    /// Admits a create (`create`) or an update of `obj`: resolves a new pod's priority, and
    /// keeps `globalDefault` unique among PriorityClasses.
    pub(crate) async fn admit_priority(
        &self,
        def: &ResourceDef,
        obj: &mut Value,
        create: bool,
    ) -> Result<()> {
        if self.served(&PRIORITY_CLASSES).is_none() {
            return Ok(());
        }
        if std::ptr::eq(def, &PODS) && create {
            return self.resolve_pod_priority(obj).await;
        }
        if std::ptr::eq(def, &PRIORITY_CLASSES)
            && obj.get("globalDefault").and_then(Value::as_bool) == Some(true)
            && let Some(existing) = self.default_priority_class().await?
            && (create || object::name(&existing) != object::name(obj))
        {
            return Err(ApiError::forbidden(
                def.group_resource(),
                object::name(obj),
                &format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    object::name(&existing)
                ),
            ));
        }
        Ok(())
    }

    /// Sets `spec.priority` (and `spec.preemptionPolicy`) of a new pod from the class it
    /// names, or the global default class, or 0 (upstream's `admitPod`).
    async fn resolve_pod_priority(&self, pod: &mut Value) -> Result<()> {
        let gr = PODS.group_resource();
        let class_name = pod
            .pointer("/spec/priorityClassName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let (priority, policy) = if class_name.is_empty() {
            match self.default_priority_class().await? {
                Some(class) => {
                    pod["spec"]["priorityClassName"] = json!(object::name(&class));
                    class_priority(&class)
                }
                None => (DEFAULT_PRIORITY, json!("PreemptLowerPriority")),
            }
        } else {
            match self.get(&PRIORITY_CLASSES, "", &class_name).await {
                Ok(class) => class_priority(&class),
                Err(e) if e.code == 404 => {
                    return Err(ApiError::forbidden(
                        gr,
                        object::name(pod),
                        &format!("no PriorityClass with name {class_name} was found"),
                    ));
                }
                Err(e) => return Err(e),
            }
        };
        if let Some(asked) = pod.pointer("/spec/priority").and_then(Value::as_i64)
            && asked != priority
        {
            return Err(ApiError::forbidden(
                gr,
                object::name(pod),
                &format!(
                    "the integer value of priority ({asked}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
                ),
            ));
        }
        if let Some(asked) = pod
            .pointer("/spec/preemptionPolicy")
            .and_then(Value::as_str)
            && Some(asked) != policy.as_str()
        {
            return Err(ApiError::forbidden(
                gr,
                object::name(pod),
                &format!(
                    "the string value of PreemptionPolicy ({asked}) must not be provided in pod spec; priority admission controller computed {} from the given PriorityClass name",
                    policy.as_str().unwrap_or("")
                ),
            ));
        }
        if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("priority".to_owned(), json!(priority));
            spec.insert("preemptionPolicy".to_owned(), policy);
        }
        Ok(())
    }

    /// The global default class: of several (possible when created concurrently), the one
    /// with the lowest value, as upstream's `getDefaultPriorityClass`.
    async fn default_priority_class(&self) -> Result<Option<Value>> {
        let list = self
            .list(&PRIORITY_CLASSES, None, &ListOptions::default())
            .await?;
        Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c.get("globalDefault").and_then(Value::as_bool) == Some(true))
            .min_by_key(|c| c.get("value").and_then(Value::as_i64).unwrap_or(0))
            .cloned())
    }
}

/// A class's value and preemption policy (`PreemptLowerPriority` when unset).
fn class_priority(class: &Value) -> (i64, Value) {
    (
        class.get("value").and_then(Value::as_i64).unwrap_or(0),
        class
            .get("preemptionPolicy")
            .cloned()
            .unwrap_or_else(|| json!("PreemptLowerPriority")),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::registry::options::WriteOptions;
    use crate::storage::MemoryStorage;

    static ALL: &[&ResourceDef] = &[
        &crate::resources::namespace::NAMESPACES,
        &PODS,
        &PRIORITY_CLASSES,
    ];

    async fn registry() -> Registry {
        let registry = Registry::with_resources(Arc::new(MemoryStorage::new()), ALL);
        registry
            .ensure_default_namespaces()
            .await
            .expect("namespaces");
        registry
            .ensure_bootstrap_objects()
            .await
            .expect("bootstrap");
        registry
    }

    fn pod(spec_extra: Value) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
            s.extend(extra.clone());
        }
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"}, "spec": spec})
    }

    #[tokio::test]
    async fn pods_get_their_class_priority_or_zero() {
        let registry = registry().await;
        let mut plain = pod(json!({}));
        registry
            .admit_priority(&PODS, &mut plain, true)
            .await
            .expect("admit");
        assert_eq!(plain["spec"]["priority"], 0);
        assert_eq!(plain["spec"]["preemptionPolicy"], "PreemptLowerPriority");

        let mut critical = pod(json!({"priorityClassName": "system-node-critical"}));
        registry
            .admit_priority(&PODS, &mut critical, true)
            .await
            .expect("admit");
        assert_eq!(critical["spec"]["priority"], 2_000_001_000);

        let mut unknown = pod(json!({"priorityClassName": "gold"}));
        let err = registry
            .admit_priority(&PODS, &mut unknown, true)
            .await
            .expect_err("unknown class");
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: no PriorityClass with name gold was found"
        );

        let mut contradicting =
            pod(json!({"priorityClassName": "system-node-critical", "priority": 5}));
        let err = registry
            .admit_priority(&PODS, &mut contradicting, true)
            .await
            .expect_err("priority set");
        assert!(
            err.message
                .contains("the integer value of priority (5) must not be provided in pod spec")
        );
    }

    #[tokio::test]
    async fn one_global_default_which_pods_then_get() {
        let registry = registry().await;
        let class = |name: &str, value: i64| {
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, "globalDefault": true})
        };
        registry
            .create_checked(
                &PRIORITY_CLASSES,
                class("standard", 100),
                &WriteOptions::default(),
            )
            .await
            .expect("first default");
        let err = registry
            .create_checked(
                &PRIORITY_CLASSES,
                class("other", 200),
                &WriteOptions::default(),
            )
            .await
            .expect_err("second default");
        assert_eq!(err.code, 403);
        assert!(err.message.ends_with(
            "PriorityClass standard is already marked as default. Only one default can exist"
        ));
        let mut keep = class("standard", 100);
        registry
            .admit_priority(&PRIORITY_CLASSES, &mut keep, false)
            .await
            .expect("the default itself may be updated");

        let mut plain = pod(json!({}));
        registry
            .admit_priority(&PODS, &mut plain, true)
            .await
            .expect("admit");
        assert_eq!(plain["spec"]["priorityClassName"], "standard");
        assert_eq!(plain["spec"]["priority"], 100);
    }
}
