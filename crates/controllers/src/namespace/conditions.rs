//! The namespace status conditions the deleter maintains, from the failures and leftovers of one pass (upstream `status_condition_utils.go`).
//!
//! Every pass sets all five condition types: `True` with the failure for those that failed,
//! `False` with the "ok" reason and message for the others, so a condition that cleared is
//! shown as cleared.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NamespaceCondition, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use kcm_machinery::discovery::GroupVersionResource;

/// Discovery of some (or all) resources failed.
pub const NAMESPACE_DELETION_DISCOVERY_FAILURE: &str = "NamespaceDeletionDiscoveryFailure";
/// A discovered group version could not be parsed.
pub const NAMESPACE_DELETION_GV_PARSING_FAILURE: &str =
    "NamespaceDeletionGroupVersionParsingFailure";
/// Deleting the content of some resources failed.
pub const NAMESPACE_DELETION_CONTENT_FAILURE: &str = "NamespaceDeletionContentFailure";
/// Some objects are still in the namespace.
pub const NAMESPACE_CONTENT_REMAINING: &str = "NamespaceContentRemaining";
/// Some objects left are held by finalizers.
pub const NAMESPACE_FINALIZERS_REMAINING: &str = "NamespaceFinalizersRemaining";

/// The condition types the deleter maintains, in the order it writes them (upstream's
/// `conditionTypes`).
pub const CONDITION_TYPES: [&str; 5] = [
    NAMESPACE_DELETION_DISCOVERY_FAILURE,
    NAMESPACE_DELETION_GV_PARSING_FAILURE,
    NAMESPACE_DELETION_CONTENT_FAILURE,
    NAMESPACE_CONTENT_REMAINING,
    NAMESPACE_FINALIZERS_REMAINING,
];

/// The reason and message of a condition type that is not failing (upstream's `okReasons` and
/// `okMessages`).
fn ok_reason_and_message(condition_type: &str) -> (&'static str, &'static str) {
    match condition_type {
        NAMESPACE_DELETION_DISCOVERY_FAILURE => (
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        NAMESPACE_DELETION_GV_PARSING_FAILURE => (
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        NAMESPACE_DELETION_CONTENT_FAILURE => (
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
        _ => ("ContentRemoved", "All content successfully removed"),
    }
}

/// What is left in a namespace after a pass (upstream's `allGVRDeletionMetadata`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentTotals {
    /// How many objects of each resource remain (only non-zero counts are kept).
    pub remaining_by_resource: BTreeMap<GroupVersionResource, usize>,
    /// How many remaining objects each finalizer holds.
    pub remaining_by_finalizer: BTreeMap<String, usize>,
}

/// Collects one pass's failures and leftovers, then writes them as conditions (upstream's
/// `namespaceConditionUpdater`).
#[derive(Debug, Default)]
pub struct ConditionUpdater {
    /// The failing conditions found so far.
    new_conditions: Vec<NamespaceCondition>,
    /// The messages of the per-resource content deletion failures.
    delete_content_errors: Vec<String>,
}

fn failing(
    condition_type: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> NamespaceCondition {
    NamespaceCondition {
        type_: condition_type.to_owned(),
        status: "True".to_owned(),
        last_transition_time: Some(Time(now)),
        reason: Some(reason.to_owned()),
        message: Some(message),
    }
}

impl ConditionUpdater {
    /// An updater with nothing failing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Discovery failed: `failed_groups` group versions failed (0 when discovery failed as a
    /// whole), and `message` is the error (upstream's `ProcessDiscoverResourcesErr`).
    pub fn process_discover_resources_err(
        &mut self,
        failed_groups: usize,
        message: &str,
        now: Timestamp,
    ) {
        let message = if failed_groups > 0 {
            format!("Discovery failed for some groups, {failed_groups} failing: {message}")
        } else {
            message.to_owned()
        };
        self.new_conditions.push(failing(
            NAMESPACE_DELETION_DISCOVERY_FAILURE,
            "DiscoveryFailed",
            message,
            now,
        ));
    }

    /// A group version could not be parsed (upstream's `ProcessGroupVersionErr`).
    pub fn process_group_version_err(&mut self, message: &str, now: Timestamp) {
        self.new_conditions.push(failing(
            NAMESPACE_DELETION_GV_PARSING_FAILURE,
            "GroupVersionParsingFailed",
            message.to_owned(),
            now,
        ));
    }

    /// Deleting one resource's content failed with `message` (upstream's
    /// `ProcessDeleteContentErr`).
    pub fn process_delete_content_err(&mut self, message: String) {
        self.delete_content_errors.push(message);
    }

    /// Objects remain: the `NamespaceContentRemaining` and `NamespaceFinalizersRemaining`
    /// conditions, messages sorted for stable updates (upstream's `ProcessContentTotals`).
    pub fn process_content_totals(&mut self, totals: &ContentTotals, now: Timestamp) {
        let mut by_resource: Vec<String> = totals
            .remaining_by_resource
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(gvr, n)| format!("{}.{} has {n} resource instances", gvr.resource, gvr.group))
            .collect();
        if !totals.remaining_by_resource.is_empty() {
            by_resource.sort();
            self.new_conditions.push(failing(
                NAMESPACE_CONTENT_REMAINING,
                "SomeResourcesRemain",
                format!("Some resources are remaining: {}", by_resource.join(", ")),
                now,
            ));
        }
        let mut by_finalizer: Vec<String> = totals
            .remaining_by_finalizer
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(finalizer, n)| format!("{finalizer} in {n} resource instances"))
            .collect();
        if !totals.remaining_by_finalizer.is_empty() {
            by_finalizer.sort();
            self.new_conditions.push(failing(
                NAMESPACE_FINALIZERS_REMAINING,
                "SomeFinalizerRemain",
                format!("Some finalizers are remaining: {}", by_finalizer.join(", ")),
                now,
            ));
        }
    }

    /// Writes the conditions into `status`; true when anything changed (upstream's `Update`).
    /// A condition keeps its transition time unless its status flips.
    pub fn update(mut self, status: &mut NamespaceStatus, now: Timestamp) -> bool {
        if !self.delete_content_errors.is_empty()
            && find(&self.new_conditions, NAMESPACE_DELETION_CONTENT_FAILURE).is_none()
        {
            let mut messages = std::mem::take(&mut self.delete_content_errors);
            messages.sort();
            self.new_conditions.push(failing(
                NAMESPACE_DELETION_CONTENT_FAILURE,
                "ContentDeletionFailed",
                format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    messages.len(),
                    messages.join(", ")
                ),
                now,
            ));
        }
        let mut changed = false;
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        for condition_type in CONDITION_TYPES {
            let new = find(&self.new_conditions, condition_type)
                .cloned()
                .unwrap_or_else(|| {
                    let (reason, message) = ok_reason_and_message(condition_type);
                    NamespaceCondition {
                        type_: condition_type.to_owned(),
                        status: "False".to_owned(),
                        last_transition_time: Some(Time(now)),
                        reason: Some(reason.to_owned()),
                        message: Some(message.to_owned()),
                    }
                });
            match conditions.iter_mut().find(|c| c.type_ == condition_type) {
                None => {
                    conditions.push(new);
                    changed = true;
                }
                Some(old)
                    if old.status != new.status
                        || old.reason != new.reason
                        || old.message != new.message =>
                {
                    if old.status != new.status {
                        old.last_transition_time = Some(Time(now));
                    }
                    old.status = new.status;
                    old.reason = new.reason;
                    old.message = new.message;
                    changed = true;
                }
                Some(_) => {}
            }
        }
        changed
    }
}

fn find<'a>(
    conditions: &'a [NamespaceCondition],
    condition_type: &str,
) -> Option<&'a NamespaceCondition> {
    conditions.iter().find(|c| c.type_ == condition_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("valid")
    }

    fn condition<'a>(status: &'a NamespaceStatus, condition_type: &str) -> &'a NamespaceCondition {
        status
            .conditions
            .as_deref()
            .and_then(|c| find(c, condition_type))
            .expect("condition present")
    }

    #[test]
    fn a_clean_pass_sets_every_condition_false_with_the_ok_texts() {
        let mut status = NamespaceStatus::default();
        assert!(ConditionUpdater::new().update(&mut status, at(10)));
        let types: Vec<&str> = status
            .conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, CONDITION_TYPES);
        let content = condition(&status, NAMESPACE_DELETION_CONTENT_FAILURE);
        assert_eq!(content.status, "False");
        assert_eq!(content.reason.as_deref(), Some("ContentDeleted"));
        assert_eq!(
            content.message.as_deref(),
            Some("All content successfully deleted, may be waiting on finalization")
        );
        let gv = condition(&status, NAMESPACE_DELETION_GV_PARSING_FAILURE);
        assert_eq!(gv.reason.as_deref(), Some("ParsedGroupVersions"));
        // The same pass again changes nothing.
        assert!(!ConditionUpdater::new().update(&mut status, at(20)));
    }

    #[test]
    fn failures_and_leftovers_become_true_conditions() {
        struct Case {
            name: &'static str,
            fill: fn(&mut ConditionUpdater),
            condition_type: &'static str,
            reason: &'static str,
            message: &'static str,
        }
        let cases = [
            Case {
                name: "partial discovery",
                fill: |u| {
                    u.process_discover_resources_err(
                        1,
                        "unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server is currently unable to handle the request",
                        at(1),
                    )
                },
                condition_type: NAMESPACE_DELETION_DISCOVERY_FAILURE,
                reason: "DiscoveryFailed",
                message: "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server is currently unable to handle the request",
            },
            Case {
                name: "discovery failed outright",
                fill: |u| u.process_discover_resources_err(0, "connection refused", at(1)),
                condition_type: NAMESPACE_DELETION_DISCOVERY_FAILURE,
                reason: "DiscoveryFailed",
                message: "connection refused",
            },
            Case {
                name: "group version parsing",
                fill: |u| {
                    u.process_group_version_err("unexpected GroupVersion string: a/b/c", at(1))
                },
                condition_type: NAMESPACE_DELETION_GV_PARSING_FAILURE,
                reason: "GroupVersionParsingFailed",
                message: "unexpected GroupVersion string: a/b/c",
            },
            Case {
                name: "content deletion errors, sorted",
                fill: |u| {
                    u.process_delete_content_err("zeta failed".into());
                    u.process_delete_content_err("alpha failed".into());
                },
                condition_type: NAMESPACE_DELETION_CONTENT_FAILURE,
                reason: "ContentDeletionFailed",
                message: "Failed to delete all resource types, 2 remaining: alpha failed, zeta failed",
            },
            Case {
                name: "content remaining",
                fill: |u| {
                    let mut totals = ContentTotals::default();
                    totals
                        .remaining_by_resource
                        .insert(GroupVersionResource::new("", "v1", "pods"), 2);
                    totals
                        .remaining_by_resource
                        .insert(GroupVersionResource::new("apps", "v1", "replicasets"), 1);
                    u.process_content_totals(&totals, at(1));
                },
                condition_type: NAMESPACE_CONTENT_REMAINING,
                reason: "SomeResourcesRemain",
                message: "Some resources are remaining: pods. has 2 resource instances, replicasets.apps has 1 resource instances",
            },
            Case {
                name: "finalizers remaining",
                fill: |u| {
                    let mut totals = ContentTotals::default();
                    totals
                        .remaining_by_resource
                        .insert(GroupVersionResource::new("", "v1", "configmaps"), 3);
                    totals
                        .remaining_by_finalizer
                        .insert("example.com/b".into(), 1);
                    totals
                        .remaining_by_finalizer
                        .insert("example.com/a".into(), 2);
                    u.process_content_totals(&totals, at(1));
                },
                condition_type: NAMESPACE_FINALIZERS_REMAINING,
                reason: "SomeFinalizerRemain",
                message: "Some finalizers are remaining: example.com/a in 2 resource instances, example.com/b in 1 resource instances",
            },
        ];
        for case in cases {
            let mut updater = ConditionUpdater::new();
            (case.fill)(&mut updater);
            let mut status = NamespaceStatus::default();
            assert!(updater.update(&mut status, at(1)), "{}", case.name);
            let c = condition(&status, case.condition_type);
            assert_eq!(c.status, "True", "{}", case.name);
            assert_eq!(c.reason.as_deref(), Some(case.reason), "{}", case.name);
            assert_eq!(c.message.as_deref(), Some(case.message), "{}", case.name);
            assert_eq!(
                status.conditions.as_ref().map(Vec::len),
                Some(5),
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut status = NamespaceStatus::default();
        let mut failing_pass = ConditionUpdater::new();
        failing_pass.process_delete_content_err("boom".into());
        failing_pass.update(&mut status, at(1));

        // Another failure message: changed, same status, same transition time.
        let mut again = ConditionUpdater::new();
        again.process_delete_content_err("bang".into());
        assert!(again.update(&mut status, at(2)));
        let c = condition(&status, NAMESPACE_DELETION_CONTENT_FAILURE);
        assert_eq!(c.last_transition_time, Some(Time(at(1))));
        assert!(c.message.as_deref().is_some_and(|m| m.ends_with("bang")));

        // Cleared: flips to False at the new time.
        assert!(ConditionUpdater::new().update(&mut status, at(3)));
        let c = condition(&status, NAMESPACE_DELETION_CONTENT_FAILURE);
        assert_eq!(c.status, "False");
        assert_eq!(c.last_transition_time, Some(Time(at(3))));
        // The conditions that never failed kept their first time.
        let d = condition(&status, NAMESPACE_DELETION_DISCOVERY_FAILURE);
        assert_eq!(d.last_transition_time, Some(Time(at(1))));
    }
}
