//! RuntimeClass: a new pod naming a RuntimeClass gets its pod overhead and scheduling constraints, and is refused when the class does not exist or the overhead contradicts it (upstream's `plugin/pkg/admission/runtimeclass`).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::RUNTIME_CLASS;
use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::pointer::At;
use crate::resources::node::RUNTIME_CLASSES;
use crate::resources::pod::PODS;

/// The plugin.
#[derive(Debug, Default)]
pub struct RuntimeClass;

#[async_trait]
impl Plugin for RuntimeClass {
    fn name(&self) -> &'static str {
        RUNTIME_CLASS
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    fn mutates(&self) -> bool {
        true
    }

    fn validates(&self) -> bool {
        true
    }

    /// Upstream's `Admit`: the class's overhead and scheduling copied into the pod.
    async fn admit(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !a.is_main(&PODS) {
            return Ok(());
        }
        let Some(class) = runtime_class(source, a).await? else {
            return Ok(());
        };
        let Some(pod) = a.object.as_ref() else {
            return Ok(());
        };
        let class_overhead = class.at("/overhead/podFixed").cloned();
        let pod_overhead = pod.at("/spec/overhead").cloned();
        if let (Some(fixed), Some(own)) = (&class_overhead, &pod_overhead)
            && own.as_object().is_some_and(|o| !o.is_empty())
            && fixed != own
        {
            return Err(a.forbidden(
                "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
            ));
        }
        if let Some(selector) = class
            .at("/scheduling/nodeSelector")
            .and_then(Value::as_object)
        {
            let own = pod.at("/spec/nodeSelector").and_then(Value::as_object);
            for (key, wanted) in selector {
                if let Some(have) = own.and_then(|o| o.get(key))
                    && have != wanted
                {
                    return Err(a.forbidden(&format!(
                        "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {}; pod.spec.nodeSelector[{key}] = {}",
                        wanted.as_str().unwrap_or(""),
                        have.as_str().unwrap_or("")
                    )));
                }
            }
        }
        let Some(spec) = a
            .object
            .as_mut()
            .and_then(|p| p.get_mut("spec"))
            .and_then(Value::as_object_mut)
        else {
            return Ok(());
        };
        if let Some(fixed) = class_overhead {
            spec.insert("overhead".to_owned(), fixed);
        }
        if let Some(selector) = class
            .at("/scheduling/nodeSelector")
            .and_then(Value::as_object)
        {
            let own = spec.entry("nodeSelector").or_insert_with(|| json!({}));
            if let Some(own) = own.as_object_mut() {
                for (k, v) in selector {
                    own.insert(k.clone(), v.clone());
                }
            }
        }
        if let Some(extra) = class
            .at("/scheduling/tolerations")
            .and_then(Value::as_array)
        {
            let own = spec.entry("tolerations").or_insert_with(|| json!([]));
            if let Some(own) = own.as_array_mut() {
                for t in extra {
                    if !own.contains(t) {
                        own.push(t.clone());
                    }
                }
            }
        }
        Ok(())
    }

    /// Upstream's `Validate`: a pod overhead needs a class defining the same one.
    async fn validate(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !a.is_main(&PODS) {
            return Ok(());
        }
        let class = runtime_class(source, a).await?;
        let Some(pod) = a.object.as_ref() else {
            return Ok(());
        };
        let Some(own) = pod
            .at("/spec/overhead")
            .filter(|o| o.as_object().is_some_and(|o| !o.is_empty()))
        else {
            return Ok(());
        };
        let Some(class) = class else {
            return Err(
                a.forbidden("pod rejected: Overhead set without corresponding RuntimeClass")
            );
        };
        match class.at("/overhead/podFixed") {
            None => Err(a.forbidden(
                "pod rejected: Overhead set without corresponding RuntimeClass defined Overhead",
            )),
            Some(fixed) if fixed != own => Err(a.forbidden(
                "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
            )),
            Some(_) => Ok(()),
        }
    }
}

/// The class the pod names, `None` when it names none; a missing class is refused.
async fn runtime_class(
    source: &dyn ObjectSource,
    a: &Attributes<'_>,
) -> Result<Option<Arc<Value>>> {
    let Some(name) = a
        .object
        .as_ref()
        .and_then(|p| p.at("/spec/runtimeClassName"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        return Ok(None);
    };
    if !source.serves(&RUNTIME_CLASSES) {
        return Ok(None);
    }
    match source.get(&RUNTIME_CLASSES, "", name).await? {
        Some(class) => Ok(Some(class)),
        None => Err(a.forbidden(&format!("pod rejected: RuntimeClass {name:?} not found"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;

    fn classes() -> Objects {
        Objects::new(vec![(
            &RUNTIME_CLASSES,
            json!({"metadata": {"name": "gvisor"}, "handler": "runsc",
                "overhead": {"podFixed": {"cpu": "250m"}},
                "scheduling": {"nodeSelector": {"sandbox": "yes"},
                    "tolerations": [{"key": "sandbox", "operator": "Exists"}]}}),
        )])
    }

    async fn run(spec: Value) -> Result<Value> {
        let user = UserInfo::admin();
        let mut a = Attributes::new(
            Operation::Create,
            &PODS,
            "ns",
            "p",
            Some(json!({"spec": spec})),
            &user,
        );
        RuntimeClass.admit(&classes(), &mut a).await?;
        RuntimeClass.validate(&classes(), &mut a).await?;
        Ok(a.object.unwrap_or_default())
    }

    #[tokio::test]
    async fn the_class_overhead_and_scheduling_are_copied_or_refused() {
        let pod = run(json!({"runtimeClassName": "gvisor", "nodeSelector": {"zone": "a"}}))
            .await
            .expect("admitted");
        assert_eq!(pod["spec"]["overhead"], json!({"cpu": "250m"}));
        assert_eq!(
            pod["spec"]["nodeSelector"],
            json!({"zone": "a", "sandbox": "yes"})
        );
        assert_eq!(pod["spec"]["tolerations"][0]["key"], "sandbox");

        struct Case {
            name: &'static str,
            spec: Value,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "missing class",
                spec: json!({"runtimeClassName": "kata"}),
                want: "pods \"p\" is forbidden: pod rejected: RuntimeClass \"kata\" not found",
            },
            Case {
                name: "contradicting overhead",
                spec: json!({"runtimeClassName": "gvisor", "overhead": {"cpu": "1"}}),
                want: "pods \"p\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
            },
            Case {
                name: "overhead without a class",
                spec: json!({"overhead": {"cpu": "1"}}),
                want: "pods \"p\" is forbidden: pod rejected: Overhead set without corresponding RuntimeClass",
            },
            Case {
                name: "node selector conflict",
                spec: json!({"runtimeClassName": "gvisor", "nodeSelector": {"sandbox": "no"}}),
                want: "pods \"p\" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = yes; pod.spec.nodeSelector[sandbox] = no",
            },
        ];
        for case in cases {
            let err = run(case.spec).await.expect_err(case.name);
            assert_eq!(err.message, case.want, "{}", case.name);
        }
    }
}
