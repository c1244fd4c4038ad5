//! The objects kube-apiserver creates for itself at start, beyond namespaces and the `kubernetes` Service: the API Priority and Fairness configuration and the default ServiceCIDR (created when missing, never overwritten).

use crate::error::Result;
use crate::object;
use crate::registry::Registry;
use crate::registry::options::WriteOptions;
use crate::registry::update::Target;
use crate::resources::flowcontrol::{FLOW_SCHEMAS, PRIORITY_LEVEL_CONFIGURATIONS};
use crate::resources::flowcontrol_bootstrap::{flow_schemas, found_status, priority_levels};
use crate::resources::networking::SERVICE_CIDRS;
use crate::resources::service_cidr::default_service_cidr;

/// The field manager upstream's APF configuration producer writes with.
const APF_FIELD_MANAGER: &str = "api-priority-and-fairness-config-producer-v1";
/// The field manager of the default ServiceCIDR.
const SERVICE_CIDR_FIELD_MANAGER: &str = "kube-apiserver";

impl Registry {
    /// Creates the bootstrap objects that are missing: the mandatory and suggested
    /// PriorityLevelConfigurations and FlowSchemas (with the `Dangling: False` status the
    /// configuration controller would give them) and the default `kubernetes` ServiceCIDR
    /// (Ready). Existing objects, edited or not, are kept.
    pub async fn ensure_bootstrap_objects(&self) -> Result<()> {
        let now = object::now_rfc3339();
        if let Some(def) = self.served(&PRIORITY_LEVEL_CONFIGURATIONS) {
            let opts = field_manager(APF_FIELD_MANAGER);
            for pl in priority_levels() {
                self.create_missing(def, pl, None, &opts).await?;
            }
        }
        if let Some(def) = self.served(&FLOW_SCHEMAS) {
            let opts = field_manager(APF_FIELD_MANAGER);
            for fs in flow_schemas() {
                let level = fs["spec"]["priorityLevelConfiguration"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                self.create_missing(def, fs, Some(found_status(&level, &now)), &opts)
                    .await?;
            }
        }
        if let Some(def) = self.served(&SERVICE_CIDRS) {
            let mut cidr = default_service_cidr(&now);
            let status = cidr.as_object_mut().and_then(|m| m.remove("status"));
            self.create_missing(
                def,
                cidr,
                status,
                &field_manager(SERVICE_CIDR_FIELD_MANAGER),
            )
            .await?;
        }
        Ok(())
    }

    /// Creates `obj` (cluster-scoped) unless an object of its name exists, then writes
    /// `status` through `/status` (a create drops it, as upstream's strategies do).
    async fn create_missing(
        &self,
        def: &'static crate::registry::ResourceDef,
        obj: serde_json::Value,
        status: Option<serde_json::Value>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let name = object::name(&obj).to_owned();
        if self.get_kv(def, "", &name).await?.is_some() {
            return Ok(());
        }
        let mut created = match self.create(def, "", obj, opts).await {
            Ok(created) => created.object,
            Err(e) if e.reason == "AlreadyExists" => return Ok(()),
            Err(e) => return Err(e),
        };
        if let Some(status) = status {
            created["status"] = status;
            self.update(def, "", &name, created, Target::Status, opts)
                .await?;
        }
        Ok(())
    }
}

fn field_manager(name: &str) -> WriteOptions {
    WriteOptions {
        field_manager: Some(name.to_owned()),
        ..WriteOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::registry::list::ListOptions;
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
