//! The registry as the admission chain's [`ObjectSource`], and the calls of the chain from the write verbs (create, update, delete).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::admission::{Attributes, ObjectSource, Operation};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, Result};
use crate::registry::resource::ResourceDef;
use crate::registry::{Registry, decode_stored};
use crate::storage;

#[async_trait]
impl ObjectSource for Registry {
    async fn get(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Value>>> {
        let key = def.storage_key(namespace, name);
        if let Some(cached) = self.object_cache.get(def, &key).await {
            return Ok(cached);
        }
        match self.storage().get(&key).await {
            Ok(Some(kv)) => decode_stored(def, &kv).map(|obj| Some(Arc::new(obj))),
            Ok(None) => Ok(None),
            Err(e) => Err(ApiError::from_storage(e, def.group_resource(), name)),
        }
    }

    async fn list(&self, def: &ResourceDef, namespace: &str) -> Result<Vec<Arc<Value>>> {
        let namespace = (!namespace.is_empty()).then_some(namespace);
        let prefix = def.storage_prefix(namespace);
        if let Some(cached) = self.object_cache.list(def, &prefix).await {
            return Ok(cached);
        }
        let opts = storage::ListOptions {
            prefix,
            ..storage::ListOptions::default()
        };
        let listed = self
            .storage()
            .list(opts)
            .await
            .map_err(|e| ApiError::from_storage(e, def.group_resource(), ""))?;
        listed
            .kvs
            .iter()
            .map(|kv| decode_stored(def, kv).map(Arc::new))
            .collect()
    }

    fn serves(&self, def: &ResourceDef) -> bool {
        self.served
            .builtin()
            .iter()
            .any(|d| d.group == def.group && d.plural == def.plural)
    }

    fn resource_for_kind(&self, api_version: &str, kind: &str) -> Option<crate::registry::DefRef> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.served
            .snapshot()
            .refs()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
    }
}

impl Registry {
    /// Runs the mutating phase of the admission chain on `a`.
    pub(crate) async fn admission_admit(&self, a: &mut Attributes<'_>) -> Result<()> {
        self.admission().admit(self, a).await
    }

    /// Admits the delete of one object (both phases; `old` is the stored object). The
    /// request's user is not carried by delete options yet: the server's identity stands in.
    pub(crate) async fn admit_delete(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<()> {
        let user = UserInfo::apiserver();
        let mut a = Attributes::new(Operation::Delete, def, namespace, name, None, &user)
            .with_old_object(old)
            .with_dry_run(dry_run);
        self.admission_admit(&mut a).await?;
        self.admission_validate(&mut a).await
    }

    /// Runs the validating phase of the admission chain on `a`.
    pub(crate) async fn admission_validate(&self, a: &mut Attributes<'_>) -> Result<()> {
        self.admission().validate(self, a).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::admission::{AdmissionConfig, Chain};
    use crate::registry::options::WriteOptions;
    use crate::resources::namespace::NAMESPACES;
    use crate::resources::pod::PODS;
    use crate::resources::scheduling::PRIORITY_CLASSES;
    use crate::storage::MemoryStorage;

    static ALL: &[&ResourceDef] = &[&NAMESPACES, &PODS, &PRIORITY_CLASSES];

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

    fn pod(name: &str, spec_extra: Value) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
            s.extend(extra.clone());
        }
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec})
    }

    async fn create(registry: &Registry, def: &ResourceDef, obj: Value) -> Result<Value> {
        registry
            .create_checked(def, obj, &WriteOptions::default())
            .await
            .map(|(obj, _)| obj)
    }

    #[tokio::test]
    async fn pods_get_their_class_priority_or_zero() {
        let registry = registry().await;
        let plain = create(&registry, &PODS, pod("plain", json!({})))
            .await
            .expect("admit");
        assert_eq!(plain["spec"]["priority"], 0);
        assert_eq!(plain["spec"]["preemptionPolicy"], "PreemptLowerPriority");

        let critical = create(
            &registry,
            &PODS,
            pod(
                "critical",
                json!({"priorityClassName": "system-node-critical"}),
            ),
        )
        .await
        .expect("admit");
        assert_eq!(critical["spec"]["priority"], 2_000_001_000);

        let err = create(
            &registry,
            &PODS,
            pod("p", json!({"priorityClassName": "gold"})),
        )
        .await
        .expect_err("unknown class");
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: no PriorityClass with name gold was found"
        );

        let err = create(
            &registry,
            &PODS,
            pod(
                "p",
                json!({"priorityClassName": "system-node-critical", "priority": 5}),
            ),
        )
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
        create(&registry, &PRIORITY_CLASSES, class("standard", 100))
            .await
            .expect("first default");
        let err = create(&registry, &PRIORITY_CLASSES, class("other", 200))
            .await
            .expect_err("second default");
        assert_eq!(err.code, 403);
        assert!(err.message.ends_with(
            "PriorityClass standard is already marked as default. Only one default can exist"
        ));
        let mut keep = class("standard", 101);
        keep["description"] = json!("still the default");
        registry
            .update(
                &PRIORITY_CLASSES,
                "",
                "standard",
                keep,
                crate::registry::update::Target::Main,
                &WriteOptions::default(),
            )
            .await
            .map(|_| ())
            .or_else(|e| if e.code == 422 { Ok(()) } else { Err(e) })
            .expect("the default itself may be updated (value is immutable: 422, not 403)");

        let plain = create(&registry, &PODS, pod("plain", json!({})))
            .await
            .expect("admit");
        assert_eq!(plain["spec"]["priorityClassName"], "standard");
        assert_eq!(plain["spec"]["priority"], 100);
    }

    #[tokio::test]
    async fn namespace_lifecycle_refuses_creates_in_missing_namespaces_and_immortal_deletes() {
        let registry = registry().await;
        let mut orphan = pod("p", json!({}));
        orphan["metadata"]["namespace"] = json!("nowhere");
        let err = create(&registry, &PODS, orphan).await.expect_err("missing");
        assert_eq!(err.code, 404);
        let err = registry
            .delete(&NAMESPACES, "", "kube-system", &Default::default())
            .await
            .map(|_| ())
            .expect_err("immortal");
        assert_eq!(
            err.message,
            "namespaces \"kube-system\" is forbidden: this namespace may not be deleted"
        );
    }

    #[tokio::test]
    async fn a_missing_namespace_is_reported_before_service_account_looks_into_it() {
        // The default chain, ServiceAccount included: NamespaceLifecycle decides in the
        // mutating phase, first, so the client learns the namespace is missing rather than
        // that its `default` service account is.
        let registry = registry()
            .await
            .with_admission(Chain::from_config(&AdmissionConfig::default()).expect("chain"));
        let mut orphan = pod("p", json!({}));
        orphan["metadata"]["namespace"] = json!("nowhere");
        let err = create(&registry, &PODS, orphan).await.expect_err("missing");
        assert_eq!(
            (err.code, err.reason, err.message.as_str()),
            (404, "NotFound", "namespaces \"nowhere\" not found")
        );
    }
}
