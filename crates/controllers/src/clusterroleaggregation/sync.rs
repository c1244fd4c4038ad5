//! `syncClusterRole`: the union of the selected ClusterRoles' rules, applied when it differs (upstream `clusterroleaggregation_controller.go` from `syncClusterRole`).

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kcm_machinery::labels::Selector;

use super::controller::ClusterRoleAggregationController;
use super::{Error, Result};

/// The rules `role` aggregates from `all` (every ClusterRole): for each selector in turn, the
/// matching roles but itself in name order, each rule not already present appended, as
/// upstream's loop with `ruleExists`. `None` when `role` aggregates nothing.
pub fn aggregated_rules(
    role: &ClusterRole,
    all: &[std::sync::Arc<ClusterRole>],
) -> Result<Option<Vec<PolicyRule>>> {
    let Some(rule) = &role.aggregation_rule else {
        return Ok(None);
    };
    let name = role.metadata.name.as_deref().unwrap_or_default();
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in rule.cluster_role_selectors.iter().flatten() {
        let selector =
            Selector::from_label_selector(selector).map_err(|source| Error::Selector {
                role: name.to_owned(),
                source,
            })?;
        let mut matched: Vec<&ClusterRole> = all
            .iter()
            .map(|r| r.as_ref())
            .filter(|r| {
                let labels = r.metadata.labels.clone().unwrap_or_default();
                selector.matches(&labels)
            })
            .collect();
        matched.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for other in matched {
            if other.metadata.name.as_deref() == Some(name) {
                continue;
            }
            for r in other.rules.iter().flatten() {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
            }
        }
    }
    Ok(Some(rules))
}

impl ClusterRoleAggregationController {
    /// Brings the aggregated ClusterRole `key` up to date, as upstream's `syncClusterRole`:
    /// gone or not aggregated is nothing to do; equal rules are no write.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let Some(role) = self.lister.get_cluster(key) else {
            return Ok(());
        };
        let all = self.lister.list_all(&Selector::everything());
        let Some(rules) = aggregated_rules(&role, &all)? else {
            return Ok(());
        };
        if rules == role.rules.clone().unwrap_or_default() {
            return Ok(());
        }
        tracing::debug!(
            clusterrole = key,
            rules = rules.len(),
            "aggregating ClusterRole rules"
        );
        self.client
            .apply_rules(key, &rules)
            .await
            .map_err(|source| Error::Apply {
                role: key.to_owned(),
                source,
            })
    }
}
