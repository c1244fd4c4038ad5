//! The objects every cluster starts with (upstream's post-start hooks: the system priority classes, the API Priority and Fairness configuration, the default ServiceCIDR): created at start when missing, never overwritten.

use serde_json::Value;

use crate::error::Result;
use crate::object;
use crate::registry::options::WriteOptions;
use crate::registry::update::Target;
use crate::registry::{Registry, ResourceDef, Subresource};

impl Registry {
    /// Creates every entry's [bootstrap objects](ResourceDef::bootstrap_objects) that do not
    /// exist yet, as the entry's bootstrap field manager; a bootstrap object's `status` is then
    /// written through `/status`. An existing object, edited or not, is left as it is (a
    /// restart keeps the stored state: upstream's hooks only create what is missing).
    pub async fn ensure_bootstrap_objects(&self) -> Result<()> {
        for def in self.resources().builtin() {
            let opts = WriteOptions {
                field_manager: Some(def.bootstrap_field_manager.to_owned()),
                ..WriteOptions::default()
            };
            for obj in (def.bootstrap_objects)() {
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
            return Ok(());
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
}
