//! NamespaceLifecycle: no new objects in a missing or terminating namespace, and the immortal namespaces may not be deleted (upstream's `plugin/namespace/lifecycle`).
//!
//! Upstream's plugin is a mutating one (it implements `Admit`), so it runs first in the
//! mutating phase: a create in a missing namespace is refused as `namespaces "x" not found`
//! before ServiceAccount or LimitRanger look for that namespace's objects.

use async_trait::async_trait;
use serde_json::Value;

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::NAMESPACE_LIFECYCLE;
use crate::admission::source::ObjectSource;
use crate::error::{ApiError, Result};
use crate::object;
use crate::pointer::At;
use crate::resources::namespace::NAMESPACES;

/// Namespaces that may never be deleted (upstream's `immortalNamespaces`).
pub const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// The plugin. It changes nothing, but decides in the mutating phase, as upstream's `Admit`.
#[derive(Debug, Default)]
pub struct NamespaceLifecycle;

#[async_trait]
impl Plugin for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        NAMESPACE_LIFECYCLE
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(
            operation,
            Operation::Create | Operation::Update | Operation::Delete
        )
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn admit(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        let is_namespace = a.is_resource(&NAMESPACES);
        if a.operation == Operation::Delete {
            if is_namespace && IMMORTAL_NAMESPACES.contains(&a.name) {
                return Err(a.forbidden("this namespace may not be deleted"));
            }
            // Deleting anything else is always allowed.
            return Ok(());
        }
        // Cluster-scoped objects and namespaces themselves are always allowed; an update
        // needs the namespace to exist, a create also needs it not terminating.
        if a.namespace.is_empty() || is_namespace || !a.resource.namespaced {
            return Ok(());
        }
        let Some(ns) = a.namespace_object(source).await? else {
            return Err(ApiError::not_found(
                NAMESPACES.group_resource(),
                a.namespace,
            ));
        };
        let terminating = ns.at("/status/phase").and_then(Value::as_str) == Some("Terminating")
            || object::deletion_timestamp(&ns).is_some();
        if terminating && a.operation == Operation::Create {
            let namespace = a.namespace;
            return Err(a
                .forbidden(&format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ))
                .with_cause(
                    "NamespaceTerminating",
                    format!("namespace {namespace} is being terminated"),
                    "metadata.namespace",
                ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;
    use crate::resources::core::CONFIGMAPS;

    #[tokio::test]
    async fn creates_need_a_live_namespace_and_immortal_ones_stay() {
        let objects = Objects::new(vec![
            (&NAMESPACES, json!({"metadata": {"name": "live"}})),
            (
                &NAMESPACES,
                json!({"metadata": {"name": "dying"}, "status": {"phase": "Terminating"}}),
            ),
        ]);
        let user = UserInfo::admin();
        struct Case {
            name: &'static str,
            operation: Operation,
            namespace: &'static str,
            want: Option<(u16, &'static str)>,
        }
        let cases = [
            Case {
                name: "live namespace",
                operation: Operation::Create,
                namespace: "live",
                want: None,
            },
            Case {
                name: "missing namespace",
                operation: Operation::Create,
                namespace: "gone",
                want: Some((404, "namespaces \"gone\" not found")),
            },
            Case {
                name: "terminating namespace",
                operation: Operation::Create,
                namespace: "dying",
                want: Some((
                    403,
                    "configmaps \"c\" is forbidden: unable to create new content in namespace dying because it is being terminated",
                )),
            },
            Case {
                name: "update in a terminating namespace",
                operation: Operation::Update,
                namespace: "dying",
                want: None,
            },
            Case {
                name: "update in a missing namespace",
                operation: Operation::Update,
                namespace: "gone",
                want: Some((404, "namespaces \"gone\" not found")),
            },
        ];
        for case in cases {
            let mut a = Attributes::new(
                case.operation,
                &CONFIGMAPS,
                case.namespace,
                "c",
                Some(json!({})),
                &user,
            );
            let got = NamespaceLifecycle
                .admit(&objects, &mut a)
                .await
                .err()
                .map(|e| (e.code, e.message));
            assert_eq!(
                got,
                case.want.map(|(c, m)| (c, m.to_owned())),
                "{}",
                case.name
            );
        }

        let mut delete = Attributes::new(
            Operation::Delete,
            &NAMESPACES,
            "",
            "kube-system",
            None,
            &user,
        );
        let err = NamespaceLifecycle
            .admit(&objects, &mut delete)
            .await
            .expect_err("immortal");
        assert_eq!(
            err.message,
            "namespaces \"kube-system\" is forbidden: this namespace may not be deleted"
        );
        let mut delete = Attributes::new(Operation::Delete, &NAMESPACES, "", "live", None, &user);
        NamespaceLifecycle
            .admit(&objects, &mut delete)
            .await
            .expect("mortal");
    }
}
