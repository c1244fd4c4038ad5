//! Recalculating one quota: `syncResourceQuota` and `CalculateUsage` (upstream `resource_quota_controller.go`, `pkg/quota/v1/resources.go`).

use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaStatus};
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::quota::resource_list::{self, Amount, ResourceList};
use kcm_machinery::quota::{Evaluator, Object, counted_group_resource, scope_selectors};

use super::controller::ResourceQuotaController;
use super::{Error, Result};

impl ResourceQuotaController {
    /// Recalculates the quota `key` from the caches and writes its status if it changed
    /// (upstream's `syncResourceQuotaFromKey`). A quota no longer cached needs nothing.
    pub async fn sync(&self, key: &str) -> Result<()> {
        kcm_machinery::informer::keys::split_meta_namespace_key(key).map_err(|source| {
            Error::InvalidKey {
                key: key.to_owned(),
                source,
            }
        })?;
        let Some(quota) = self.caches.quotas.get_by_key(key) else {
            tracing::trace!(quota = key, "Resource quota has been deleted");
            return Ok(());
        };
        self.sync_resource_quota(key, &quota).await
    }

    /// Upstream's `syncResourceQuota`: `status.hard` becomes `spec.hard`, `status.used` the
    /// measured usage of every limit some evaluator measures (others keep what they had), and
    /// the status is written when either changed or was never set. Usage that failed to be
    /// measured keeps its old value, and the error is returned (the key is retried) after
    /// the rest is written.
    async fn sync_resource_quota(&self, key: &str, quota: &ResourceQuota) -> Result<()> {
        let spec_hard = quota.spec.as_ref().and_then(|s| s.hard.as_ref());
        let status = quota.status.as_ref();
        let status_hard = status.and_then(|s| s.hard.as_ref());
        let status_used = status.and_then(|s| s.used.as_ref());
        let hard = resource_list::from_quantities(spec_hard);
        let old_hard = resource_list::from_quantities(status_hard);
        let old_used = resource_list::from_quantities(status_used);
        // Semantic equality: nil and empty lists are equal, quantities compare by value.
        let limits_dirty = !resource_list::equals(&hard, &old_hard);
        let mut dirty = limits_dirty || status_hard.is_none() || status_used.is_none();

        let (measured, failure) = self.calculate_usage(quota, &hard).await;
        let mut used = old_used.clone();
        used.extend(measured);
        let used = resource_list::mask(&used, hard.keys());
        dirty = dirty || !resource_list::equals(&used, &old_used);

        if dirty {
            let mut updated = quota.clone();
            updated.status = Some(ResourceQuotaStatus {
                hard: Some(resource_list::to_quantities(&hard)),
                used: Some(resource_list::to_quantities(&used)),
            });
            self.client
                .update_status(&updated)
                .await
                .map_err(|source| Error::UpdateStatus {
                    quota: key.to_owned(),
                    source,
                })?;
        }
        failure.map_or(Ok(()), Err)
    }

    /// The usage of every limit of `hard` that an evaluator measures, in the quota's
    /// namespace and scopes (upstream's `CalculateUsage`), and the first failure, whose
    /// limits are left out.
    async fn calculate_usage(
        &self,
        quota: &ResourceQuota,
        hard: &ResourceList,
    ) -> (ResourceList, Option<Error>) {
        let namespace = quota.metadata.namespace.as_deref().unwrap_or_default();
        let names: Vec<String> = hard.keys().cloned().collect();
        let now = (self.clock)();
        let mut usage = ResourceList::new();
        let mut typed_names: Vec<String> = Vec::new();

        let pods = self
            .caches
            .pods
            .by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_default();
        let services = self
            .caches
            .services
            .by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_default();
        let pvcs = self
            .caches
            .pvcs
            .by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_default();
        let typed: [(Evaluator, Vec<Object<'_>>); 3] = [
            (
                Evaluator::Pods,
                pods.iter().map(|p| Object::Pod(p)).collect(),
            ),
            (
                Evaluator::Services,
                services.iter().map(|s| Object::Service(s)).collect(),
            ),
            (
                Evaluator::Pvcs,
                pvcs.iter().map(|p| Object::Pvc(p)).collect(),
            ),
        ];
        for (evaluator, objects) in typed {
            let matched = evaluator.matching_resources(&names);
            if matched.is_empty() {
                continue;
            }
            typed_names.extend(matched.iter().cloned());
            let stats = evaluator.usage_stats(quota, &matched, objects, now);
            usage = resource_list::add(&usage, &stats);
        }

        // Other object counts: no scope selects them; otherwise counted on the server.
        let scoped = !scope_selectors(quota).is_empty();
        let mut failure = None;
        for name in names.iter().filter(|n| !typed_names.contains(n)) {
            let Some((group, resource)) = counted_group_resource(name) else {
                continue;
            };
            if scoped {
                usage.insert(name.clone(), Amount::count(0));
                continue;
            }
            match self.client.count(namespace, &group, &resource).await {
                Ok(n) => {
                    usage.insert(name.clone(), Amount::count(n));
                }
                Err(source) => {
                    failure.get_or_insert(Error::Count {
                        resource: name.clone(),
                        namespace: namespace.to_owned(),
                        source,
                    });
                }
            }
        }
        (usage, failure)
    }
}
