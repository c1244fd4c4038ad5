//! Rows of the RBAC bindings: RoleBinding and ClusterRoleBinding (Roles and ClusterRoles have no printer upstream).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::since;
use super::fields::{list_at, name, str_at, time_at};

/// upstream's `printRoleBinding` / `printClusterRoleBinding`: ROLE as `Kind/name`, and the
/// subjects split by kind (`rbac.SubjectsStrings`) for `-o wide`.
pub(super) fn role_binding(obj: &Value, now: Timestamp) -> Row {
    let role = format!(
        "{}/{}",
        str_at(obj, &["roleRef", "kind"]),
        str_at(obj, &["roleRef", "name"])
    );
    let (mut users, mut groups, mut service_accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in list_at(obj, &["subjects"]) {
        let subject_name = str_at(subject, &["name"]);
        match str_at(subject, &["kind"]) {
            "User" => users.push(subject_name.to_owned()),
            "Group" => groups.push(subject_name.to_owned()),
            "ServiceAccount" => service_accounts.push(format!(
                "{}/{subject_name}",
                str_at(subject, &["namespace"])
            )),
            _ => {}
        }
    }
    Row::new(vec![
        json!(name(obj)),
        json!(role),
        json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now)),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(service_accounts.join(", ")),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_print_the_role_and_subjects_by_kind() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().expect("now");
        let binding = json!({
            "metadata": {"name": "read", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "name": "alice"},
                {"kind": "Group", "name": "devs"},
                {"kind": "ServiceAccount", "name": "bot", "namespace": "ci"},
                {"kind": "User", "name": "bob"},
            ]
        });
        let row = role_binding(&binding, now);
        assert_eq!(
            row.cells,
            [
                json!("read"),
                json!("ClusterRole/view"),
                json!("60m"),
                json!("alice, bob"),
                json!("devs"),
                json!("ci/bot")
            ]
        );
    }
}
