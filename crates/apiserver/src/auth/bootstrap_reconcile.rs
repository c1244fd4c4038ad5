//! Reconciling stored bootstrap ClusterRoles and bindings with the expected ones at start (upstream's `reconciliation.computeReconciledRole` / `computeReconciledRoleBinding` in union mode): missing rules, selectors, subjects, labels and annotations are added, nothing a user added is removed, and `autoupdate: "false"` opts out.

use serde_json::{Map, Value};

use crate::auth::rbac_rule::{PolicyRule, covers};
use crate::pointer::At;

/// The annotation that lets a user protect a bootstrap object from reconciliation.
pub const AUTO_UPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// What to do with a stored bootstrap object.
#[derive(Clone, Debug, PartialEq)]
pub enum Reconcile {
    /// It already holds everything expected (or is protected).
    Keep,
    /// Write this object (the stored one with what was missing added).
    Update(Value),
    /// The binding's `roleRef` differs and cannot be updated: delete it and create this.
    Recreate(Value),
}

/// Whether `existing` opted out with `autoupdate: "false"`.
fn protected(existing: &Value) -> bool {
    existing
        .at("/metadata/annotations")
        .and_then(|a| a.get(AUTO_UPDATE_ANNOTATION))
        .and_then(Value::as_str)
        == Some("false")
}

/// `existing`'s string map at `field` of the metadata, with `expected`'s keys it lacks
/// added (upstream's `merge(expected, existing)`: the stored value wins).
fn merged_map(existing: &Value, expected: &Value, field: &str) -> Map<String, Value> {
    let mut out = existing
        .at(&format!("/metadata/{field}"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(want) = expected
        .at(&format!("/metadata/{field}"))
        .and_then(Value::as_object)
    {
        for (k, v) in want {
            out.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    out
}

/// `existing` with `expected`'s labels and annotations merged in; whether anything changed.
fn merge_metadata(existing: &Value, expected: &Value, result: &mut Value) -> bool {
    let mut changed = false;
    for field in ["labels", "annotations"] {
        let merged = merged_map(existing, expected, field);
        let before = existing
            .at(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .map_or(0, Map::len);
        if merged.len() != before {
            changed = true;
            result["metadata"][field] = Value::Object(merged);
        }
    }
    changed
}

/// A stored ClusterRole against the bootstrap one: the rules it does not cover appended
/// (the broken-down missing rules, as upstream), the aggregation selectors it lacks added,
/// labels and annotations merged.
pub fn reconcile_role(existing: &Value, expected: &Value) -> Reconcile {
    if protected(existing) {
        return Reconcile::Keep;
    }
    let mut result = existing.clone();
    let mut changed = merge_metadata(existing, expected, &mut result);

    let have = PolicyRule::rules_of(existing);
    let (_, missing) = covers(&have, &PolicyRule::rules_of(expected));
    if !missing.is_empty() {
        let mut rules = existing
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        rules.extend(missing.iter().map(PolicyRule::to_json));
        result["rules"] = Value::Array(rules);
        changed = true;
    }

    if let Some(want) = expected
        .at("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
    {
        let mut selectors = existing
            .at("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let before = selectors.len();
        for s in want {
            if !selectors.contains(s) {
                selectors.push(s.clone());
            }
        }
        if selectors.len() != before || existing.get("aggregationRule").is_none() {
            result["aggregationRule"] = serde_json::json!({"clusterRoleSelectors": selectors});
            changed = true;
        }
    }
    if changed {
        Reconcile::Update(result)
    } else {
        Reconcile::Keep
    }
}

/// A stored ClusterRoleBinding against the bootstrap one: recreated when its `roleRef`
/// differs (immutable), else the subjects it lacks appended, labels and annotations merged.
pub fn reconcile_binding(existing: &Value, expected: &Value) -> Reconcile {
    if protected(existing) {
        return Reconcile::Keep;
    }
    let mut result = existing.clone();
    if existing.get("roleRef") != expected.get("roleRef") {
        result["roleRef"] = expected["roleRef"].clone();
        merge_metadata(existing, expected, &mut result);
        add_subjects(existing, expected, &mut result);
        if let Some(meta) = result.get_mut("metadata").and_then(Value::as_object_mut) {
            // A new object: the stored identity and version do not carry over.
            for k in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "managedFields",
            ] {
                meta.remove(k);
            }
        }
        return Reconcile::Recreate(result);
    }
    let changed = merge_metadata(existing, expected, &mut result)
        | add_subjects(existing, expected, &mut result);
    if changed {
        Reconcile::Update(result)
    } else {
        Reconcile::Keep
    }
}

/// Appends `expected`'s subjects that `existing` lacks; whether any were.
fn add_subjects(existing: &Value, expected: &Value, result: &mut Value) -> bool {
    let key = |s: &Value| {
        (
            s.get("kind").cloned(),
            s.get("name").cloned(),
            s.get("namespace").cloned().filter(|n| n != ""),
        )
    };
    let mut subjects = existing
        .get("subjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let before = subjects.len();
    for s in expected
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if !subjects.iter().any(|have| key(have) == key(s)) {
            subjects.push(s.clone());
        }
    }
    let changed = subjects.len() != before;
    if changed {
        result["subjects"] = Value::Array(subjects);
    }
    changed
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn role(annotations: Value, rules: Value) -> Value {
        json!({
            "metadata": {"name": "r", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}, "annotations": annotations},
            "rules": rules,
        })
    }

    #[test]
    fn roles_gain_missing_rules_and_keep_additions() {
        let auto = json!({AUTO_UPDATE_ANNOTATION: "true"});
        let expected = role(
            auto.clone(),
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]),
        );
        let cases = [
            (
                "already covered: kept",
                role(
                    auto.clone(),
                    json!([{"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}]),
                ),
                None,
            ),
            (
                "a user's addition stays, the missing verb is appended",
                role(
                    auto.clone(),
                    json!([
                        {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                        {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]},
                    ]),
                ),
                Some(json!([
                    {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                    {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]},
                    {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]},
                ])),
            ),
            (
                "autoupdate false: left alone",
                role(json!({AUTO_UPDATE_ANNOTATION: "false"}), json!([])),
                None,
            ),
        ];
        for (name, existing, want_rules) in cases {
            match (reconcile_role(&existing, &expected), want_rules) {
                (Reconcile::Keep, None) => {}
                (Reconcile::Update(updated), Some(rules)) => {
                    assert_eq!(updated["rules"], rules, "{name}");
                    assert_eq!(updated["metadata"]["name"], "r", "{name}");
                }
                (got, want) => panic!("{name}: got {got:?}, want rules {want:?}"),
            }
        }
    }

    #[test]
    fn labels_annotations_and_selectors_are_merged_the_stored_value_winning() {
        let expected = json!({
            "metadata": {"name": "admin", "labels": {"a": "1", "b": "2"}, "annotations": {AUTO_UPDATE_ANNOTATION: "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "true"}}]},
            "rules": [],
        });
        let existing = json!({
            "metadata": {"name": "admin", "labels": {"a": "mine"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"mine": "true"}}]},
            "rules": [{"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["foos"]}],
        });
        let Reconcile::Update(got) = reconcile_role(&existing, &expected) else {
            panic!("an update");
        };
        assert_eq!(got["metadata"]["labels"], json!({"a": "mine", "b": "2"}));
        assert_eq!(
            got["metadata"]["annotations"],
            json!({AUTO_UPDATE_ANNOTATION: "true"})
        );
        assert_eq!(
            got["aggregationRule"]["clusterRoleSelectors"],
            json!([{"matchLabels": {"mine": "true"}}, {"matchLabels": {"x": "true"}}])
        );
        assert_eq!(got["rules"], existing["rules"], "aggregated rules are kept");
        assert_eq!(
            reconcile_role(&got, &expected),
            Reconcile::Keep,
            "idempotent"
        );
    }

    #[test]
    fn bindings_gain_subjects_and_are_recreated_for_another_role() {
        let group =
            |n: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": n});
        let binding = |role: &str, subjects: Vec<Value>| {
            json!({
                "metadata": {"name": "b", "uid": "u1", "resourceVersion": "5", "annotations": {AUTO_UPDATE_ANNOTATION: "true"}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": subjects,
            })
        };
        let expected = binding("view", vec![group("system:authenticated")]);
        assert_eq!(
            reconcile_binding(
                &binding("view", vec![group("system:authenticated")]),
                &expected
            ),
            Reconcile::Keep
        );
        let Reconcile::Update(got) =
            reconcile_binding(&binding("view", vec![group("devs")]), &expected)
        else {
            panic!("an update");
        };
        assert_eq!(
            got["subjects"],
            json!([group("devs"), group("system:authenticated")])
        );
        let Reconcile::Recreate(got) =
            reconcile_binding(&binding("edit", vec![group("devs")]), &expected)
        else {
            panic!("a recreate");
        };
        assert_eq!(got["roleRef"]["name"], "view");
        assert_eq!(got["metadata"].get("uid"), None);
        assert_eq!(got["metadata"].get("resourceVersion"), None);
        let mut protected = binding("edit", vec![]);
        protected["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] = json!("false");
        assert_eq!(reconcile_binding(&protected, &expected), Reconcile::Keep);
    }
}
