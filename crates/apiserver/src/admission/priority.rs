//! Priority: a new pod's `spec.priority` resolved from its PriorityClass (or the global default), and at most one PriorityClass marked `globalDefault` (upstream's `plugin/pkg/admission/priority`).
//!
//! It only acts when the server serves priority classes. A pod naming a class that does not
//! exist is refused (403), as is a pod whose own `priority` or `preemptionPolicy` contradicts
//! its class. Not enforced: the quota-based limit on which namespaces may use the system
//! classes (upstream configures it through an admission configuration file, off by default).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::PRIORITY;
use crate::admission::source::ObjectSource;
use crate::error::{ApiError, Result};
use crate::object;
use crate::pointer::At;
use crate::resources::pod::PODS;
use crate::resources::scheduling::PRIORITY_CLASSES;

/// A pod's priority when it names no class and no class is the global default.
const DEFAULT_PRIORITY: i64 = 0;

/// The plugin: mutating for pods, validating for PriorityClasses.
#[derive(Debug, Default)]
pub struct Priority;

#[async_trait]
impl Plugin for Priority {
    fn name(&self) -> &'static str {
        PRIORITY
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    fn mutates(&self) -> bool {
        true
    }

    fn validates(&self) -> bool {
        true
    }

    /// Upstream's `Admit`: only pod creates (the priority of a pod never changes).
    async fn admit(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if a.operation != Operation::Create
            || !a.is_main(&PODS)
            || !source.serves(&PRIORITY_CLASSES)
        {
            return Ok(());
        }
        let name = a.name;
        let Some(pod) = a.object.as_mut() else {
            return Ok(());
        };
        resolve_pod_priority(source, pod, name).await
    }

    /// Upstream's `Validate`: only one PriorityClass may be the global default.
    async fn validate(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !a.is_main(&PRIORITY_CLASSES) {
            return Ok(());
        }
        let Some(class) = a.object.as_ref() else {
            return Ok(());
        };
        if class.get("globalDefault").and_then(Value::as_bool) != Some(true) {
            return Ok(());
        }
        if let Some(existing) = default_priority_class(source).await?
            && (a.operation == Operation::Create || object::name(&existing) != object::name(class))
        {
            return Err(a.forbidden(&format!(
                "PriorityClass {} is already marked as default. Only one default can exist",
                object::name(&existing)
            )));
        }
        Ok(())
    }
}

/// Sets `spec.priority` (and `spec.preemptionPolicy`) of a new pod from the class it names,
/// or the global default class, or 0 (upstream's `admitPod`).
async fn resolve_pod_priority(
    source: &dyn ObjectSource,
    pod: &mut Value,
    name: &str,
) -> Result<()> {
    let gr = PODS.group_resource();
    let class_name = pod
        .at("/spec/priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let (priority, policy) = if class_name.is_empty() {
        match default_priority_class(source).await? {
            Some(class) => {
                pod["spec"]["priorityClassName"] = json!(object::name(&class));
                class_priority(&class)
            }
            None => (DEFAULT_PRIORITY, json!("PreemptLowerPriority")),
        }
    } else {
        match source.get(&PRIORITY_CLASSES, "", &class_name).await? {
            Some(class) => class_priority(&class),
            None => {
                return Err(ApiError::forbidden(
                    gr,
                    name,
                    &format!("no PriorityClass with name {class_name} was found"),
                ));
            }
        }
    };
    if let Some(asked) = pod.at("/spec/priority").and_then(Value::as_i64)
        && asked != priority
    {
        return Err(ApiError::forbidden(
            gr,
            name,
            &format!(
                "the integer value of priority ({asked}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
            ),
        ));
    }
    if let Some(asked) = pod.at("/spec/preemptionPolicy").and_then(Value::as_str)
        && Some(asked) != policy.as_str()
    {
        return Err(ApiError::forbidden(
            gr,
            name,
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

/// The global default class: of several (possible when created concurrently), the one with
/// the lowest value, as upstream's `getDefaultPriorityClass`.
async fn default_priority_class(source: &dyn ObjectSource) -> Result<Option<Arc<Value>>> {
    Ok(source
        .list(&PRIORITY_CLASSES, "")
        .await?
        .into_iter()
        .filter(|c| c.get("globalDefault").and_then(Value::as_bool) == Some(true))
        .min_by_key(|c| c.get("value").and_then(Value::as_i64).unwrap_or(0)))
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
