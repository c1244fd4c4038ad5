//! The local APIServices kube-apiserver registers for the group versions it serves (kube-aggregator's `autoregister` controller, run once at start): one `v1.`, `v1.apps`, ... per served group version, `Local` and `Available`.

use kcm_machinery::labels::Selector;
use serde_json::{Value, json};

use crate::error::Result;
use crate::object;
use crate::pointer::At;
use crate::registry::Registry;
use crate::registry::delete::DeleteOptions;
use crate::registry::list::ListOptions;
use crate::registry::options::WriteOptions;
use crate::registry::update::Target;
use crate::resources::apiregistration::API_SERVICES;

/// The label marking the APIServices the server registered itself.
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
/// Its value for the ones registered from the served group versions at start.
pub const AUTOMANAGED_ON_START: &str = "onstart";
/// The field manager of the server's APIService writes.
const FIELD_MANAGER: &str = "kube-apiserver";

/// The aggregator's own group, which has no APIService of its own.
const APIREGISTRATION_GROUP: &str = "apiregistration.k8s.io";

/// `(group, version, groupPriorityMinimum, versionPriority)`: upstream's
/// `apiVersionPriorities` for the built-in group versions, which order `/apis` discovery.
const PRIORITIES: &[(&str, &str, i32, i32)] = &[
    ("", "v1", 18000, 1),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    // metrics-server's APIService.
    ("metrics.k8s.io", "v1beta1", 100, 100),
];

/// The priorities of a group version; a group upstream does not list gets the lowest.
fn priorities(group: &str, version: &str) -> (i32, i32) {
    PRIORITIES
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version)
        .map_or((1000, 15), |&(_, _, g, v)| (g, v))
}

/// The APIService name of a group version: `version.group` (`v1.` for core).
pub fn api_service_name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// The local APIService of a served group version, as autoregister writes it.
pub fn local_api_service(group: &str, version: &str) -> Value {
    let (group_priority, version_priority) = priorities(group, version);
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": api_service_name(group, version),
            "labels": {AUTOMANAGED_LABEL: AUTOMANAGED_ON_START},
        },
        "spec": {
            "group": group,
            "version": version,
            "groupPriorityMinimum": group_priority,
            "versionPriority": version_priority,
        },
    })
}

/// The status of a local APIService: always available.
fn local_status(now: &str) -> Value {
    json!({"conditions": [{
        "type": "Available",
        "status": "True",
        "lastTransitionTime": now,
        "reason": "Local",
        "message": "Local APIServices are always available",
    }]})
}

impl Registry {
    /// The group versions this registry serves, in discovery order, without the
    /// aggregator's own.
    pub fn served_group_versions(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for def in self.resources().iter() {
            if def.group != APIREGISTRATION_GROUP
                && !out
                    .iter()
                    .any(|(g, v)| *g == def.group && *v == def.version)
            {
                out.push((def.group.to_string(), def.version.to_string()));
            }
        }
        out
    }

    /// Registers a local APIService for every served group version (created if missing,
    /// its spec restored if changed, marked available), and removes the ones registered
    /// at an earlier start for group versions no longer served. An APIService a user
    /// pointed at a Service is left alone.
    pub async fn ensure_local_api_services(&self) -> Result<()> {
        let Some(def) = self.served(&API_SERVICES) else {
            return Ok(());
        };
        let opts = WriteOptions {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..WriteOptions::default()
        };
        let now = object::now_rfc3339();
        let desired: Vec<Value> = self
            .served_group_versions()
            .into_iter()
            .map(|(g, v)| local_api_service(&g, &v))
            .collect();
        for want in &desired {
            let name = object::name(want).to_owned();
            let current = match self.get_kv(def, "", &name).await? {
                Some((current, _)) => current,
                None => match self.create(def, "", want.clone(), &opts).await {
                    Ok(created) => created.object,
                    Err(e) if e.reason == "AlreadyExists" => continue,
                    Err(e) => return Err(e),
                },
            };
            if current.at("/spec/service").is_some_and(|s| !s.is_null()) {
                continue;
            }
            let mut current = current;
            if current.get("spec") != want.get("spec") {
                current["spec"] = want["spec"].clone();
                current = self
                    .update(def, "", &name, current, Target::Main, &opts)
                    .await?
                    .object;
            }
            let available = current
                .at("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Available" && c["status"] == "True")
                });
            if !available {
                current["status"] = local_status(&now);
                self.update(def, "", &name, current, Target::Status, &opts)
                    .await?;
            }
        }
        let registered = ListOptions {
            label_selector: Selector::parse(&format!("{AUTOMANAGED_LABEL}={AUTOMANAGED_ON_START}"))
                .ok(),
            ..ListOptions::default()
        };
        let list = self.list(def, None, &registered).await?;
        let stale = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| object::name(item).to_owned())
            .filter(|name| !desired.iter().any(|d| object::name(d) == name));
        for name in stale.collect::<Vec<_>>() {
            match self.delete(def, "", &name, &DeleteOptions::default()).await {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::storage::memory::MemoryStorage;

    #[tokio::test]
    async fn local_api_services_follow_the_served_group_versions() {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        // A stale one from an earlier start, and a user's remote one.
        let mut stale = local_api_service("example.com", "v1");
        stale["spec"]["groupPriorityMinimum"] = json!(100);
        registry
            .create(&API_SERVICES, "", stale, &WriteOptions::default())
            .await
            .expect("stale");
        registry.ensure_local_api_services().await.expect("synced");
        registry
            .ensure_local_api_services()
            .await
            .expect("idempotent");
        let list = registry
            .list(&API_SERVICES, None, &ListOptions::default())
            .await
            .expect("list");
        let names: Vec<&str> = list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(object::name)
            .collect();
        for name in [
            "v1.",
            "v1.apps",
            "v1.rbac.authorization.k8s.io",
            "v1.flowcontrol.apiserver.k8s.io",
        ] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
        assert!(!names.contains(&"v1.example.com"), "{names:?}");
        assert!(!names.contains(&"v1.apiregistration.k8s.io"), "{names:?}");
        let core = registry.get(&API_SERVICES, "", "v1.").await.expect("v1.");
        assert_eq!(core["spec"]["groupPriorityMinimum"], 18000);
        assert_eq!(core["status"]["conditions"][0]["reason"], "Local");
        assert_eq!(core["metadata"]["labels"][AUTOMANAGED_LABEL], "onstart");
    }
}
