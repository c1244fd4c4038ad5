//! The objects every cluster starts with (upstream's post-start hooks: the system priority classes, the API Priority and Fairness configuration, the default ServiceCIDR, the RBAC bootstrap policy): created at start when missing, never overwritten — except the RBAC policy, which is reconciled (missing rules and subjects added, see [`crate::auth::bootstrap_reconcile`]).

use serde_json::Value;

use crate::auth::bootstrap_reconcile::Reconcile;
use crate::error::Result;
use crate::object;
use crate::registry::delete::DeleteOptions;
use crate::registry::options::WriteOptions;
use crate::registry::update::Target;
use crate::registry::{Registry, ResourceDef, Subresource};

impl Registry {
    /// Creates every entry's [bootstrap objects](ResourceDef::bootstrap_objects) that do not
    /// exist yet, as the entry's bootstrap field manager; a bootstrap object's `status` is then
    /// written through `/status`. An existing object, edited or not, is left as it is (a
    /// restart keeps the stored state: upstream's hooks only create what is missing).
    pub async fn ensure_bootstrap_objects(&self) -> Result<()> {
        // Namespaced bootstrap objects (the controllers' Roles) live in the system namespaces.
        self.ensure_default_namespaces().await?;
        let context = crate::registry::resource::BootstrapContext {
            service_ip_range: self.service_ip_range(),
        };
        for def in self.resources().builtin() {
            let opts = WriteOptions {
                field_manager: Some(def.bootstrap_field_manager.to_owned()),
                ..WriteOptions::default()
            };
            for obj in (def.bootstrap_objects)(&context) {
                self.create_missing(def, obj, &opts).await?;
            }
        }
        Ok(())
    }

    /// Creates `obj` unless an object of its name exists, then writes its `status`.
    async fn create_missing(
        &self,
        def: &'static ResourceDef,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> Result<()> {
        let namespace = object::namespace(&obj).to_owned();
        let name = object::name(&obj).to_owned();
        if self.get_kv(def, &namespace, &name).await?.is_some() {
            return self.reconcile_bootstrap(def, &name, &obj, opts).await;
        }
        let status = if def.has_subresource(Subresource::Status) {
            obj.as_object_mut().and_then(|m| m.remove("status"))
        } else {
            None
        };
        let mut created = match self.create(def, &namespace, obj, opts).await {
            Ok(created) => created.object,
            // Another server sharing the store created it meanwhile.
            Err(e) if e.code == 409 => return Ok(()),
            Err(e) => return Err(e),
        };
        if let Some(status) = status {
            created["status"] = status;
            self.update(def, &namespace, &name, created, Target::Status, opts)
                .await?;
        }
        Ok(())
    }
}

impl Registry {
    /// Brings a stored bootstrap object up to the expected one with its entry's
    /// [reconcile](ResourceDef::bootstrap_reconcile) (the RBAC policy: upstream's
    /// `ensureRBACPolicy` post-start hook, union mode); other kinds are left.
    async fn reconcile_bootstrap(
        &self,
        def: &'static ResourceDef,
        name: &str,
        expected: &Value,
        opts: &WriteOptions,
    ) -> Result<()> {
        let Some(reconcile) = def.bootstrap_reconcile else {
            return Ok(());
        };
        let existing = self.get(def, "", name).await?;
        match reconcile(&existing, expected) {
            Reconcile::Keep => Ok(()),
            Reconcile::Update(updated) => {
                tracing::info!(kind = %def.kind, %name, "reconciling bootstrap policy");
                match self
                    .update(def, "", name, updated, Target::Main, opts)
                    .await
                {
                    // Another server sharing the store updated it meanwhile.
                    Err(e) if e.code == 409 => Ok(()),
                    other => other.map(drop),
                }
            }
            Reconcile::Recreate(replacement) => {
                tracing::info!(kind = %def.kind, %name, "recreating bootstrap object (its immutable fields changed)");
                self.delete(def, "", name, &DeleteOptions::default())
                    .await?;
                match self.create(def, "", replacement, opts).await {
                    Err(e) if e.code == 409 => Ok(()),
                    other => other.map(drop),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::registry::list::ListOptions;
    use crate::resources::flowcontrol::{FLOW_SCHEMAS, PRIORITY_LEVEL_CONFIGURATIONS};
    use crate::resources::flowcontrol_bootstrap::flow_schemas;
    use crate::resources::networking::SERVICE_CIDRS;
    use crate::storage::memory::MemoryStorage;

    #[tokio::test]
    async fn bootstrap_objects_are_created_once_and_edits_survive() {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        registry
            .ensure_bootstrap_objects()
            .await
            .expect("bootstrap");
        let exempt = registry
            .get(&FLOW_SCHEMAS, "", "exempt")
            .await
            .expect("exempt");
        assert_eq!(exempt["spec"]["matchingPrecedence"], 1);
        assert_eq!(exempt["status"]["conditions"][0]["type"], "Dangling");
        let catch_all = registry
            .get(&PRIORITY_LEVEL_CONFIGURATIONS, "", "catch-all")
            .await
            .expect("catch-all");
        assert_eq!(
            catch_all["spec"]["limited"]["limitResponse"]["type"],
            "Reject"
        );
        let cidr = registry
            .get(&SERVICE_CIDRS, "", "kubernetes")
            .await
            .expect("cidr");
        assert_eq!(cidr["spec"]["cidrs"], json!(["10.96.0.0/12"]));
        assert_eq!(cidr["status"]["conditions"][0]["status"], "True");

        // A user's edit is kept across restarts.
        let mut edited = registry
            .get(&PRIORITY_LEVEL_CONFIGURATIONS, "", "workload-low")
            .await
            .expect("workload-low");
        edited["spec"]["limited"]["nominalConcurrencyShares"] = json!(7);
        registry
            .update(
                &PRIORITY_LEVEL_CONFIGURATIONS,
                "",
                "workload-low",
                edited,
                Target::Main,
                &WriteOptions::default(),
            )
            .await
            .expect("edit");
        registry.ensure_bootstrap_objects().await.expect("again");
        let kept = registry
            .get(&PRIORITY_LEVEL_CONFIGURATIONS, "", "workload-low")
            .await
            .expect("workload-low");
        assert_eq!(kept["spec"]["limited"]["nominalConcurrencyShares"], 7);
        let schemas = registry
            .list(&FLOW_SCHEMAS, None, &ListOptions::default())
            .await
            .expect("list");
        assert_eq!(
            schemas["items"].as_array().map(Vec::len),
            Some(flow_schemas().len())
        );
    }

    #[tokio::test]
    async fn bootstrap_rbac_is_reconciled_keeping_users_additions() {
        use crate::resources::rbac::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES};
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        registry
            .ensure_bootstrap_objects()
            .await
            .expect("bootstrap");
        let expected_view = registry
            .get(&CLUSTER_ROLES, "", "system:aggregate-to-view")
            .await
            .expect("view");

        // A user drops a rule and adds one; another binds the discovery role to a group.
        let mut edited = expected_view.clone();
        let mut rules = edited["rules"].as_array().cloned().expect("rules");
        rules.remove(0);
        rules.push(json!({"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["foos"]}));
        edited["rules"] = Value::Array(rules);
        registry
            .update(
                &CLUSTER_ROLES,
                "",
                "system:aggregate-to-view",
                edited,
                Target::Main,
                &WriteOptions::default(),
            )
            .await
            .expect("edit");
        let mut binding = registry
            .get(&CLUSTER_ROLE_BINDINGS, "", "system:discovery")
            .await
            .expect("binding");
        binding["subjects"] =
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]);
        registry
            .update(
                &CLUSTER_ROLE_BINDINGS,
                "",
                "system:discovery",
                binding,
                Target::Main,
                &WriteOptions::default(),
            )
            .await
            .expect("edit binding");
        // A protected role is left as the user wrote it.
        let mut basic = registry
            .get(&CLUSTER_ROLES, "", "system:basic-user")
            .await
            .expect("basic");
        basic["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] =
            json!("false");
        basic["rules"] = json!([]);
        registry
            .update(
                &CLUSTER_ROLES,
                "",
                "system:basic-user",
                basic,
                Target::Main,
                &WriteOptions::default(),
            )
            .await
            .expect("protect");

        registry.ensure_bootstrap_objects().await.expect("restart");
        let view = registry
            .get(&CLUSTER_ROLES, "", "system:aggregate-to-view")
            .await
            .expect("view");
        let have = crate::auth::rbac_rule::PolicyRule::rules_of(&view);
        let want = crate::auth::rbac_rule::PolicyRule::rules_of(&expected_view);
        assert!(
            crate::auth::rbac_rule::covers(&have, &want).0,
            "the dropped rule is back"
        );
        assert!(
            view["rules"]
                .as_array()
                .expect("rules")
                .iter()
                .any(|r| r["resources"] == json!(["foos"])),
            "the user's rule stays"
        );
        let binding = registry
            .get(&CLUSTER_ROLE_BINDINGS, "", "system:discovery")
            .await
            .expect("binding");
        let names: Vec<&str> = binding["subjects"]
            .as_array()
            .expect("subjects")
            .iter()
            .filter_map(|s| s["name"].as_str())
            .collect();
        assert_eq!(names, ["devs", "system:authenticated"]);
        let basic = registry
            .get(&CLUSTER_ROLES, "", "system:basic-user")
            .await
            .expect("basic");
        assert_eq!(basic["rules"], json!([]));
        // A second start changes nothing.
        let rv = view["metadata"]["resourceVersion"].clone();
        registry.ensure_bootstrap_objects().await.expect("again");
        let again = registry
            .get(&CLUSTER_ROLES, "", "system:aggregate-to-view")
            .await
            .expect("view");
        assert_eq!(again["metadata"]["resourceVersion"], rv);
    }
}
