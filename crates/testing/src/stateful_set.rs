//! StatefulSets: [`stateful_set`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetOrdinals,
    StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec, StatefulSetStatus,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::meta::MetaBuilder;
use crate::workload::{WorkloadBuilder, stamp_selected_labels};

/// Builds a [`StatefulSet`]. Start with [`stateful_set`].
#[derive(Clone, Debug, Default)]
pub struct StatefulSetBuilder {
    sts: StatefulSet,
    /// See [`WorkloadBuilder::stamped_labels_mut`].
    stamped_labels: BTreeMap<String, String>,
}

/// A StatefulSet named `name`; no namespace, spec or status.
pub fn stateful_set(name: &str) -> StatefulSetBuilder {
    StatefulSetBuilder::default().name(name)
}

impl StatefulSetBuilder {
    fn spec_mut(&mut self) -> &mut StatefulSetSpec {
        self.sts.spec.get_or_insert_default()
    }

    fn status_mut(&mut self) -> &mut StatefulSetStatus {
        self.sts.status.get_or_insert_default()
    }

    fn rolling_mut(&mut self) -> &mut RollingUpdateStatefulSetStrategy {
        let strategy = self.spec_mut().update_strategy.get_or_insert_default();
        strategy.type_ = Some("RollingUpdate".into());
        strategy.rolling_update.get_or_insert_default()
    }

    /// Sets `spec.serviceName`.
    pub fn service_name(mut self, name: &str) -> Self {
        self.spec_mut().service_name = Some(name.into());
        self
    }

    /// Sets `spec.podManagementPolicy` (`OrderedReady` or `Parallel`).
    pub fn pod_management_policy(mut self, policy: &str) -> Self {
        self.spec_mut().pod_management_policy = Some(policy.into());
        self
    }

    /// Sets `spec.ordinals.start`.
    pub fn ordinals_start(mut self, start: i32) -> Self {
        self.spec_mut().ordinals = Some(StatefulSetOrdinals { start: Some(start) });
        self
    }

    /// Sets `spec.revisionHistoryLimit`.
    pub fn revision_history_limit(mut self, limit: i32) -> Self {
        self.spec_mut().revision_history_limit = Some(limit);
        self
    }

    /// A `RollingUpdate` strategy with `partition`.
    pub fn partition(mut self, partition: i32) -> Self {
        self.rolling_mut().partition = Some(partition);
        self
    }

    /// A `RollingUpdate` strategy with `maxUnavailable`.
    pub fn max_unavailable(mut self, value: IntOrString) -> Self {
        self.rolling_mut().max_unavailable = Some(value);
        self
    }

    /// A `RollingUpdate` strategy without parameters.
    pub fn rolling_update(mut self) -> Self {
        self.rolling_mut();
        self
    }

    /// The `OnDelete` strategy.
    pub fn on_delete(mut self) -> Self {
        self.spec_mut().update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        self
    }

    /// Appends a volume claim template.
    pub fn volume_claim_template(mut self, claim: impl Into<PersistentVolumeClaim>) -> Self {
        self.spec_mut()
            .volume_claim_templates
            .get_or_insert_default()
            .push(claim.into());
        self
    }

    /// Sets `spec.persistentVolumeClaimRetentionPolicy` (`Retain` or `Delete` each).
    pub fn retention(mut self, when_deleted: &str, when_scaled: &str) -> Self {
        self.spec_mut().persistent_volume_claim_retention_policy =
            Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: Some(when_deleted.into()),
                when_scaled: Some(when_scaled.into()),
            });
        self
    }

    /// Sets `status.observedGeneration`.
    pub fn observed_generation(mut self, generation: i64) -> Self {
        self.status_mut().observed_generation = Some(generation);
        self
    }

    /// Sets `status.currentRevision` and `status.updateRevision`.
    pub fn revisions(mut self, current: &str, update: &str) -> Self {
        let status = self.status_mut();
        status.current_revision = Some(current.into());
        status.update_revision = Some(update.into());
        self
    }

    /// Sets `status.replicas`.
    pub fn status_replicas(mut self, replicas: i32) -> Self {
        self.status_mut().replicas = replicas;
        self
    }

    /// Sets `status.collisionCount`.
    pub fn collision_count(mut self, count: i32) -> Self {
        self.status_mut().collision_count = Some(count);
        self
    }

    /// Changes anything no setter names (before `selecting`'s template labels are added).
    pub fn with(mut self, f: impl FnOnce(&mut StatefulSet)) -> Self {
        f(&mut self.sts);
        self
    }

    /// The StatefulSet.
    pub fn build(mut self) -> StatefulSet {
        stamp_selected_labels(&mut self);
        self.sts
    }

    /// The StatefulSet, shared as caches hand it out.
    pub fn arc(self) -> Arc<StatefulSet> {
        Arc::new(self.build())
    }
}

impl WorkloadBuilder for StatefulSetBuilder {
    workload_spec_accessors!();

    fn template_mut(&mut self) -> &mut PodTemplateSpec {
        &mut self.spec_mut().template
    }
}

meta_builder!(StatefulSetBuilder => sts);
from_builder!(StatefulSetBuilder => StatefulSet);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{container, labels, pvc};

    #[test]
    fn setters_fill_the_spec() {
        let sts = stateful_set("web")
            .namespace("ns")
            .replicas(3)
            .selecting(&[("app", "web")])
            .container(container("nginx"))
            .service_name("nginx")
            .pod_management_policy("Parallel")
            .ordinals_start(5)
            .partition(2)
            .volume_claim_template(pvc("www").storage("1Gi"))
            .retention("Delete", "Retain")
            .build();
        let spec = sts.spec.unwrap_or_default();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.service_name.as_deref(), Some("nginx"));
        assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
        assert_eq!(spec.ordinals.and_then(|o| o.start), Some(5));
        assert_eq!(
            spec.update_strategy
                .and_then(|s| s.rolling_update)
                .and_then(|r| r.partition),
            Some(2)
        );
        assert_eq!(spec.volume_claim_templates.map(|v| v.len()), Some(1));
        assert_eq!(
            spec.template.metadata.and_then(|m| m.labels),
            Some(labels(&[("app", "web")]))
        );
        let retention = spec
            .persistent_volume_claim_retention_policy
            .unwrap_or_default();
        assert_eq!(retention.when_deleted.as_deref(), Some("Delete"));
    }
}
