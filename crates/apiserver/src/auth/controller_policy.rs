//! The `system:controller:*` ClusterRoles and their bindings to the controllers' service accounts in `kube-system` (upstream's `bootstrappolicy/controller_policy.go`), for the controllers kcm implements.

use serde_json::{Value, json};

/// The prefix of every controller role (upstream's `saRolePrefix`).
pub const CONTROLLER_ROLE_PREFIX: &str = "system:controller:";

const LEGACY: &str = "";
const APPS: &str = "apps";
const EXTENSIONS: &str = "extensions";
const BATCH: &str = "batch";
const RBAC: &str = "rbac.authorization.k8s.io";
const POLICY: &str = "policy";
const DISCOVERY: &str = "discovery.k8s.io";
const AUTOSCALING: &str = "autoscaling";
const STORAGE: &str = "storage.k8s.io";
const NETWORKING: &str = "networking.k8s.io";
const ADMISSIONREGISTRATION: &str = "admissionregistration.k8s.io";
const CERTIFICATES: &str = "certificates.k8s.io";
const AUTHORIZATION: &str = "authorization.k8s.io";
const RESOURCE: &str = "resource.k8s.io";

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

/// A rule limited to the objects named `names` (upstream's `.Names(...)`).
fn named_rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "resourceNames": names})
}

/// Upstream's `eventsRule`: events in the core and `events.k8s.io` groups.
fn events() -> Value {
    rule(
        &["create", "update", "patch"],
        &[LEGACY, "events.k8s.io"],
        &["events"],
    )
}

/// `(service account name, rules)` of each controller, upstream's order and rules.
fn controllers() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        (
            "attachdetach-controller",
            vec![
                rule(
                    &["list", "watch"],
                    &[LEGACY],
                    &["persistentvolumes", "persistentvolumeclaims"],
                ),
                rule(&["get", "list", "watch"], &[LEGACY], &["nodes"]),
                rule(&["patch", "update"], &[LEGACY], &["nodes/status"]),
                rule(&["list", "watch"], &[LEGACY], &["pods"]),
                events(),
                rule(
                    &["get", "create", "delete", "list", "watch"],
                    &[STORAGE],
                    &["volumeattachments"],
                ),
                rule(&["get", "watch", "list"], &[STORAGE], &["csidrivers"]),
                rule(&["get", "watch", "list"], &[STORAGE], &["csinodes"]),
            ],
        ),
        (
            "clusterrole-aggregation-controller",
            vec![rule(
                &["escalate", "get", "list", "watch", "update", "patch"],
                &[RBAC],
                &["clusterroles"],
            )],
        ),
        (
            "cronjob-controller",
            vec![
                rule(&["get", "list", "watch", "update"], &[BATCH], &["cronjobs"]),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "delete", "patch",
                    ],
                    &[BATCH],
                    &["jobs"],
                ),
                rule(&["update"], &[BATCH], &["cronjobs/status"]),
                rule(&["update"], &[BATCH], &["cronjobs/finalizers"]),
                rule(&["list", "watch", "delete"], &[LEGACY], &["pods"]),
                events(),
            ],
        ),
        (
            "daemon-set-controller",
            vec![
                rule(
                    &["get", "list", "watch"],
                    &[EXTENSIONS, APPS],
                    &["daemonsets"],
                ),
                rule(&["update"], &[EXTENSIONS, APPS], &["daemonsets/status"]),
                rule(&["update"], &[EXTENSIONS, APPS], &["daemonsets/finalizers"]),
                rule(&["list", "watch"], &[LEGACY], &["nodes"]),
                rule(
                    &["list", "watch", "create", "delete", "patch"],
                    &[LEGACY],
                    &["pods"],
                ),
                rule(&["create"], &[LEGACY], &["pods/binding"]),
                rule(
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                    &[APPS],
                    &["controllerrevisions"],
                ),
                events(),
            ],
        ),
        (
            "deployment-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[EXTENSIONS, APPS],
                    &["deployments"],
                ),
                rule(&["update"], &[EXTENSIONS, APPS], &["deployments/status"]),
                rule(
                    &["update"],
                    &[EXTENSIONS, APPS],
                    &["deployments/finalizers"],
                ),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                rule(&["get", "list", "watch", "update"], &[LEGACY], &["pods"]),
                events(),
            ],
        ),
        (
            "disruption-controller",
            vec![
                rule(
                    &["get", "list", "watch"],
                    &[EXTENSIONS, APPS],
                    &["deployments"],
                ),
                rule(
                    &["get", "list", "watch"],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                rule(
                    &["get", "list", "watch"],
                    &[LEGACY],
                    &["replicationcontrollers"],
                ),
                rule(
                    &["get", "list", "watch"],
                    &[POLICY],
                    &["poddisruptionbudgets"],
                ),
                rule(&["get", "list", "watch"], &[APPS], &["statefulsets"]),
                rule(&["update"], &[POLICY], &["poddisruptionbudgets/status"]),
                rule(&["patch", "update"], &[LEGACY], &["pods/status"]),
                rule(&["get"], &["*"], &["*/scale"]),
                events(),
            ],
        ),
        (
            "ephemeral-volume-controller",
            vec![
                rule(&["get", "list", "watch"], &[LEGACY], &["pods"]),
                rule(&["update"], &[LEGACY], &["pods/finalizers"]),
                rule(
                    &["get", "list", "watch", "create"],
                    &[LEGACY],
                    &["persistentvolumeclaims"],
                ),
                events(),
            ],
        ),
        (
            // Served only with DynamicResourceAllocation, GA and on since v1.34.
            "resource-claim-controller",
            vec![
                rule(&["get", "list", "watch"], &[LEGACY], &["pods"]),
                rule(&["update"], &[LEGACY], &["pods/finalizers"]),
                rule(
                    &["get", "list", "watch", "create", "delete"],
                    &[RESOURCE],
                    &["resourceclaims"],
                ),
                rule(
                    &["update", "patch"],
                    &[RESOURCE],
                    &["resourceclaims", "resourceclaims/status"],
                ),
                rule(&["update", "patch"], &[LEGACY], &["pods/status"]),
                events(),
            ],
        ),
        (
            // Upstream adds it with DRADeviceTaints (beta and on since v1.36); the
            // DeviceTaintRule rules come with DRADeviceTaintRules, off by default in v1.36.
            "device-taint-eviction-controller",
            vec![
                // Deletes pods to evict them.
                rule(&["get", "list", "watch", "delete"], &[LEGACY], &["pods"]),
                // Sets pod conditions.
                rule(&["update", "patch"], &[LEGACY], &["pods/status"]),
                // The rest is read-only.
                rule(&["get", "list", "watch"], &[RESOURCE], &["resourceclaims"]),
                rule(&["get", "list", "watch"], &[RESOURCE], &["resourceslices"]),
                rule(&["get", "list", "watch"], &[RESOURCE], &["deviceclasses"]),
                rule(
                    &["get", "list", "watch"],
                    &[RESOURCE],
                    &["devicetaintrules"],
                ),
                events(),
            ],
        ),
        (
            "expand-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[LEGACY],
                    &["persistentvolumes"],
                ),
                rule(
                    &["update", "patch"],
                    &[LEGACY],
                    &["persistentvolumeclaims/status"],
                ),
                rule(
                    &["get", "list", "watch"],
                    &[LEGACY],
                    &["persistentvolumeclaims"],
                ),
                rule(&["get", "list", "watch"], &[STORAGE], &["storageclasses"]),
                rule(&["get"], &[LEGACY], &["services", "endpoints"]),
                rule(&["get"], &[LEGACY], &["secrets"]),
                events(),
            ],
        ),
        (
            "endpoint-controller",
            vec![
                rule(&["get", "list", "watch"], &[LEGACY], &["services", "pods"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[LEGACY],
                    &["endpoints"],
                ),
                rule(&["create"], &[LEGACY], &["endpoints/restricted"]),
                events(),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                rule(
                    &["get", "list", "watch"],
                    &[LEGACY],
                    &["services", "pods", "nodes"],
                ),
                rule(&["update"], &[LEGACY], &["services/finalizers"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[DISCOVERY],
                    &["endpointslices"],
                ),
                events(),
            ],
        ),
        (
            "endpointslicemirroring-controller",
            vec![
                rule(
                    &["get", "list", "watch"],
                    &[LEGACY],
                    &["services", "endpoints"],
                ),
                rule(&["update"], &[LEGACY], &["services/finalizers"]),
                rule(&["update"], &[LEGACY], &["endpoints/finalizers"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[DISCOVERY],
                    &["endpointslices"],
                ),
                events(),
            ],
        ),
        (
            "generic-garbage-collector",
            vec![
                rule(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    &["*"],
                    &["*"],
                ),
                events(),
            ],
        ),
        (
            "horizontal-pod-autoscaler",
            vec![
                rule(
                    &["get", "list", "watch"],
                    &[AUTOSCALING],
                    &["horizontalpodautoscalers"],
                ),
                rule(
                    &["update"],
                    &[AUTOSCALING],
                    &["horizontalpodautoscalers/status"],
                ),
                rule(&["get", "update"], &["*"], &["*/scale"]),
                rule(&["list", "watch"], &[LEGACY], &["pods"]),
                rule(&["list", "watch"], &["metrics.k8s.io"], &["pods"]),
                rule(
                    &["get", "list", "watch"],
                    &["custom.metrics.k8s.io"],
                    &["*"],
                ),
                rule(
                    &["get", "list", "watch"],
                    &["external.metrics.k8s.io"],
                    &["*"],
                ),
                events(),
            ],
        ),
        (
            "job-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[BATCH],
                    &["jobs"],
                ),
                rule(&["update"], &[BATCH], &["jobs/status"]),
                rule(&["update"], &[BATCH], &["jobs/finalizers"]),
                rule(
                    &["list", "watch", "create", "delete", "patch"],
                    &[LEGACY],
                    &["pods"],
                ),
                events(),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(
                    &["get", "list", "watch", "delete"],
                    &[LEGACY],
                    &["namespaces"],
                ),
                rule(
                    &["update"],
                    &[LEGACY],
                    &["namespaces/finalize", "namespaces/status"],
                ),
                rule(
                    &["get", "list", "watch", "delete", "deletecollection"],
                    &["*"],
                    &["*"],
                ),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "delete", "patch"],
                    &[LEGACY],
                    &["nodes"],
                ),
                rule(&["patch", "update"], &[LEGACY], &["nodes/status"]),
                rule(&["patch", "update"], &[LEGACY], &["pods/status"]),
                rule(&["list", "watch", "get", "delete"], &[LEGACY], &["pods"]),
                events(),
            ],
        ),
        (
            "persistent-volume-binder",
            vec![
                rule(
                    &["get", "list", "watch", "update", "create", "delete"],
                    &[LEGACY],
                    &["persistentvolumes"],
                ),
                rule(&["update"], &[LEGACY], &["persistentvolumes/status"]),
                rule(
                    &["get", "list", "watch", "update"],
                    &[LEGACY],
                    &["persistentvolumeclaims"],
                ),
                rule(&["update"], &[LEGACY], &["persistentvolumeclaims/status"]),
                rule(
                    &["list", "watch", "get", "create", "delete"],
                    &[LEGACY],
                    &["pods"],
                ),
                rule(&["get", "list", "watch"], &[STORAGE], &["storageclasses"]),
                rule(
                    &["get", "create", "update", "delete"],
                    &[LEGACY],
                    &["endpoints"],
                ),
                rule(&["get", "create", "delete"], &[LEGACY], &["services"]),
                rule(&["get"], &[LEGACY], &["secrets"]),
                rule(&["get", "list"], &[LEGACY], &["nodes"]),
                rule(&["watch"], &[LEGACY], &["events"]),
                events(),
            ],
        ),
        (
            "pod-garbage-collector",
            vec![
                rule(&["list", "watch", "delete"], &[LEGACY], &["pods"]),
                rule(&["get", "list", "watch"], &[LEGACY], &["nodes"]),
                rule(&["patch"], &[LEGACY], &["pods/status"]),
            ],
        ),
        (
            "pvc-protection-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[LEGACY],
                    &["persistentvolumeclaims"],
                ),
                rule(&["list", "watch", "get"], &[LEGACY], &["pods"]),
                events(),
            ],
        ),
        (
            "pv-protection-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[LEGACY],
                    &["persistentvolumes"],
                ),
                events(),
            ],
        ),
        (
            "replicaset-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                rule(&["update"], &[APPS, EXTENSIONS], &["replicasets/status"]),
                rule(
                    &["update"],
                    &[APPS, EXTENSIONS],
                    &["replicasets/finalizers"],
                ),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[LEGACY],
                    &["pods"],
                ),
                events(),
            ],
        ),
        (
            "replication-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[LEGACY],
                    &["replicationcontrollers"],
                ),
                rule(&["update"], &[LEGACY], &["replicationcontrollers/status"]),
                rule(
                    &["update"],
                    &[LEGACY],
                    &["replicationcontrollers/finalizers"],
                ),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[LEGACY],
                    &["pods"],
                ),
                events(),
            ],
        ),
        (
            "resourcequota-controller",
            vec![
                // Quota counts anything, so it may list and watch everything.
                rule(&["list", "watch"], &["*"], &["*"]),
                rule(&["update"], &[LEGACY], &["resourcequotas/status"]),
                events(),
            ],
        ),
        (
            "service-account-controller",
            vec![rule(&["create"], &[LEGACY], &["serviceaccounts"]), events()],
        ),
        (
            "service-cidrs-controller",
            vec![
                rule(
                    &["get", "list", "watch", "patch", "update"],
                    &[NETWORKING],
                    &["servicecidrs"],
                ),
                rule(
                    &["patch", "update"],
                    &[NETWORKING],
                    &["servicecidrs/finalizers"],
                ),
                rule(
                    &["patch", "update"],
                    &[NETWORKING],
                    &["servicecidrs/status"],
                ),
                rule(&["get", "list", "watch"], &[NETWORKING], &["ipaddresses"]),
                events(),
            ],
        ),
        (
            "validatingadmissionpolicy-status-controller",
            vec![
                rule(
                    &["get", "list", "watch"],
                    &[ADMISSIONREGISTRATION],
                    &["validatingadmissionpolicies"],
                ),
                rule(
                    &["get", "patch", "update"],
                    &[ADMISSIONREGISTRATION],
                    &["validatingadmissionpolicies/status"],
                ),
                events(),
            ],
        ),
        (
            "service-controller",
            vec![
                rule(&["get", "list", "watch"], &[LEGACY], &["services"]),
                rule(&["patch", "update"], &[LEGACY], &["services/status"]),
                rule(&["list", "watch"], &[LEGACY], &["nodes"]),
                events(),
            ],
        ),
        (
            "statefulset-controller",
            vec![
                rule(&["list", "watch"], &[LEGACY], &["pods"]),
                rule(&["get", "list", "watch"], &[APPS], &["statefulsets"]),
                rule(&["update"], &[APPS], &["statefulsets/status"]),
                rule(&["update"], &[APPS], &["statefulsets/finalizers"]),
                rule(
                    &["get", "create", "delete", "update", "patch"],
                    &[LEGACY],
                    &["pods"],
                ),
                rule(
                    &[
                        "get", "create", "delete", "update", "patch", "list", "watch",
                    ],
                    &[APPS],
                    &["controllerrevisions"],
                ),
                rule(
                    &["get", "create", "list", "watch"],
                    &[LEGACY],
                    &["persistentvolumeclaims"],
                ),
                rule(
                    &["update", "delete"],
                    &[LEGACY],
                    &["persistentvolumeclaims"],
                ),
                rule(&["update"], &[LEGACY], &["pods/finalizers"]),
                events(),
            ],
        ),
        (
            "ttl-controller",
            vec![
                rule(&["update", "patch", "list", "watch"], &[LEGACY], &["nodes"]),
                events(),
            ],
        ),
        (
            "certificate-controller",
            vec![
                rule(
                    &["get", "list", "watch", "delete"],
                    &[CERTIFICATES],
                    &["certificatesigningrequests"],
                ),
                rule(
                    &["update"],
                    &[CERTIFICATES],
                    &[
                        "certificatesigningrequests/status",
                        "certificatesigningrequests/approval",
                    ],
                ),
                named_rule(
                    &["approve"],
                    &[CERTIFICATES],
                    &["signers"],
                    &["kubernetes.io/kube-apiserver-client-kubelet"],
                ),
                named_rule(
                    &["sign"],
                    &[CERTIFICATES],
                    &["signers"],
                    &[
                        "kubernetes.io/legacy-unknown",
                        "kubernetes.io/kube-apiserver-client",
                        "kubernetes.io/kube-apiserver-client-kubelet",
                        "kubernetes.io/kubelet-serving",
                    ],
                ),
                rule(&["create"], &[AUTHORIZATION], &["subjectaccessreviews"]),
                events(),
            ],
        ),
        (
            "ttl-after-finished-controller",
            vec![
                rule(&["get", "list", "watch", "delete"], &[BATCH], &["jobs"]),
                events(),
            ],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                rule(&["create", "update"], &[LEGACY], &["configmaps"]),
                events(),
            ],
        ),
        (
            "volumeattributesclass-protection-controller",
            vec![
                rule(
                    &["list", "watch", "get"],
                    &[LEGACY],
                    &["persistentvolumeclaims"],
                ),
                rule(&["list", "watch", "get"], &[LEGACY], &["persistentvolumes"]),
                rule(
                    &["get", "list", "watch", "update"],
                    &[STORAGE],
                    &["volumeattributesclasses"],
                ),
                events(),
            ],
        ),
        (
            "legacy-service-account-token-cleaner",
            vec![
                named_rule(
                    &["get"],
                    &[LEGACY],
                    &["configmaps"],
                    &["kube-apiserver-legacy-service-account-token-tracking"],
                ),
                rule(&["patch", "delete"], &[LEGACY], &["secrets"]),
            ],
        ),
    ]
}

/// `(namespace, service account name, rules)` of the controllers whose roles are namespaced
/// (upstream's `NamespaceRoles` for the bootstrap signer and the token cleaner).
fn namespaced_controllers() -> Vec<(&'static str, &'static str, Vec<Value>)> {
    vec![
        (
            "kube-system",
            "bootstrap-signer",
            vec![rule(&["get", "list", "watch"], &[LEGACY], &["secrets"])],
        ),
        (
            "kube-system",
            "token-cleaner",
            vec![
                rule(&["delete", "get", "list", "watch"], &[LEGACY], &["secrets"]),
                events(),
            ],
        ),
        (
            "kube-public",
            "bootstrap-signer",
            vec![
                rule(&["get", "list", "watch"], &[LEGACY], &["configmaps"]),
                named_rule(&["update"], &[LEGACY], &["configmaps"], &["cluster-info"]),
                events(),
            ],
        ),
    ]
}

/// The controller Roles in `kube-system` and `kube-public` (upstream's `NamespaceRoles`
/// for controllers).
pub fn controller_namespaced_roles() -> Vec<Value> {
    namespaced_controllers()
        .into_iter()
        .map(|(namespace, sa, rules)| {
            let mut meta = metadata(&format!("{CONTROLLER_ROLE_PREFIX}{sa}"));
            meta["namespace"] = json!(namespace);
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": meta,
                "rules": rules,
            })
        })
        .collect()
}

/// Each namespaced controller Role bound, in its namespace, to the service account
/// `kube-system/<controller>` (upstream's `NamespaceRoleBindings`).
pub fn controller_namespaced_role_bindings() -> Vec<Value> {
    namespaced_controllers()
        .into_iter()
        .map(|(namespace, sa, _)| {
            let name = format!("{CONTROLLER_ROLE_PREFIX}{sa}");
            let mut meta = metadata(&name);
            meta["namespace"] = json!(namespace);
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": meta,
                "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": "kube-system"}],
            })
        })
        .collect()
}

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

/// The controller ClusterRoles (upstream's `ControllerRoles`).
pub fn controller_roles() -> Vec<Value> {
    controllers()
        .into_iter()
        .map(|(sa, rules)| {
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": metadata(&format!("{CONTROLLER_ROLE_PREFIX}{sa}")),
                "rules": rules,
            })
        })
        .collect()
}

/// Each controller role bound to the service account `kube-system/<controller>` (upstream's
/// `ControllerRoleBindings`).
pub fn controller_role_bindings() -> Vec<Value> {
    controllers()
        .into_iter()
        .map(|(sa, _)| {
            let name = format!("{CONTROLLER_ROLE_PREFIX}{sa}");
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": metadata(&name),
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": "kube-system"}],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::rbac_rule::{PolicyRule, covers};

    fn rules_of(sa: &str) -> Vec<PolicyRule> {
        let roles = controller_roles();
        let role = roles
            .iter()
            .find(|r| r["metadata"]["name"] == format!("{CONTROLLER_ROLE_PREFIX}{sa}"))
            .unwrap_or_else(|| panic!("{sa}"));
        PolicyRule::rules_of(role)
    }

    fn one(verb: &str, group: &str, resource: &str) -> PolicyRule {
        PolicyRule::from_json(&rule(&[verb], &[group], &[resource]))
    }

    #[test]
    fn controller_roles_grant_what_each_controller_calls() {
        let cases = [
            (
                "service-controller",
                one("patch", "", "services/status"),
                true,
            ),
            ("service-controller", one("update", "", "services"), false),
            (
                "certificate-controller",
                one(
                    "update",
                    "certificates.k8s.io",
                    "certificatesigningrequests/approval",
                ),
                true,
            ),
            (
                "certificate-controller",
                one("create", "authorization.k8s.io", "subjectaccessreviews"),
                true,
            ),
            (
                "certificate-controller",
                one(
                    "create",
                    "certificates.k8s.io",
                    "certificatesigningrequests",
                ),
                false,
            ),
            ("ttl-controller", one("patch", "", "nodes"), true),
            (
                "validatingadmissionpolicy-status-controller",
                one(
                    "patch",
                    "admissionregistration.k8s.io",
                    "validatingadmissionpolicies/status",
                ),
                true,
            ),
            (
                "validatingadmissionpolicy-status-controller",
                one(
                    "update",
                    "admissionregistration.k8s.io",
                    "validatingadmissionpolicies",
                ),
                false,
            ),
            ("ttl-controller", one("delete", "", "nodes"), false),
            ("replicaset-controller", one("create", "", "pods"), true),
            (
                "replicaset-controller",
                one("update", "apps", "replicasets/status"),
                true,
            ),
            (
                "replicaset-controller",
                one("delete", "apps", "replicasets"),
                false,
            ),
            (
                "deployment-controller",
                one("delete", "apps", "replicasets"),
                true,
            ),
            (
                "generic-garbage-collector",
                one("delete", "example.com", "foos"),
                true,
            ),
            (
                "namespace-controller",
                one("deletecollection", "apps", "deployments"),
                true,
            ),
            ("namespace-controller", one("create", "", "pods"), false),
            (
                "ttl-after-finished-controller",
                one("delete", "batch", "jobs"),
                true,
            ),
            (
                "ttl-after-finished-controller",
                one("create", "", "events"),
                true,
            ),
            (
                "clusterrole-aggregation-controller",
                one("escalate", RBAC, "clusterroles"),
                true,
            ),
            ("pod-garbage-collector", one("create", "", "events"), false),
            (
                "horizontal-pod-autoscaler",
                one("update", "apps", "deployments/scale"),
                true,
            ),
            (
                "horizontal-pod-autoscaler",
                one("list", "metrics.k8s.io", "pods"),
                true,
            ),
            ("endpoint-controller", one("create", "", "endpoints"), true),
            (
                "endpointslice-controller",
                one("delete", "discovery.k8s.io", "endpointslices"),
                true,
            ),
            ("endpointslice-controller", one("delete", "", "pods"), false),
            (
                "resourcequota-controller",
                one("update", "", "resourcequotas/status"),
                true,
            ),
            (
                "resourcequota-controller",
                one("list", "apps", "deployments"),
                true,
            ),
            (
                "resourcequota-controller",
                one("update", "", "resourcequotas"),
                false,
            ),
            (
                "disruption-controller",
                one("update", "policy", "poddisruptionbudgets/status"),
                true,
            ),
            (
                "resourcequota-controller",
                one("watch", "apps", "deployments"),
                true,
            ),
            (
                "root-ca-cert-publisher",
                one("update", "", "configmaps"),
                true,
            ),
            (
                "root-ca-cert-publisher",
                one("delete", "", "configmaps"),
                false,
            ),
            (
                "disruption-controller",
                one("get", "apps", "deployments/scale"),
                true,
            ),
            (
                "pvc-protection-controller",
                one("update", "", "persistentvolumeclaims"),
                true,
            ),
            ("pvc-protection-controller", one("list", "", "pods"), true),
            (
                "pvc-protection-controller",
                one("delete", "", "pods"),
                false,
            ),
            (
                "pv-protection-controller",
                one("update", "", "persistentvolumes"),
                true,
            ),
            (
                "pv-protection-controller",
                one("update", "", "persistentvolumeclaims"),
                false,
            ),
            (
                "persistent-volume-binder",
                one("update", "", "persistentvolumeclaims/status"),
                true,
            ),
            (
                "persistent-volume-binder",
                one("delete", "", "persistentvolumes"),
                true,
            ),
            (
                "persistent-volume-binder",
                one("delete", "", "persistentvolumeclaims"),
                false,
            ),
            (
                "expand-controller",
                one("patch", "", "persistentvolumeclaims/status"),
                true,
            ),
            (
                "attachdetach-controller",
                one("create", "storage.k8s.io", "volumeattachments"),
                true,
            ),
            (
                "attachdetach-controller",
                one("patch", "", "nodes/status"),
                true,
            ),
            (
                "attachdetach-controller",
                one("update", "", "persistentvolumes"),
                false,
            ),
            (
                "expand-controller",
                one("update", "", "persistentvolumeclaims"),
                false,
            ),
            (
                "ephemeral-volume-controller",
                one("create", "", "persistentvolumeclaims"),
                true,
            ),
            (
                "ephemeral-volume-controller",
                one("update", "", "pods/finalizers"),
                true,
            ),
            (
                "ephemeral-volume-controller",
                one("delete", "", "persistentvolumeclaims"),
                false,
            ),
            (
                "resource-claim-controller",
                one("create", RESOURCE, "resourceclaims"),
                true,
            ),
            (
                "resource-claim-controller",
                one("delete", RESOURCE, "resourceclaims"),
                true,
            ),
            (
                "resource-claim-controller",
                one("update", RESOURCE, "resourceclaims/status"),
                true,
            ),
            (
                "resource-claim-controller",
                one("patch", "", "pods/status"),
                true,
            ),
            (
                "resource-claim-controller",
                one("list", RESOURCE, "resourceclaimtemplates"),
                false,
            ),
            (
                "resource-claim-controller",
                one("delete", "", "pods"),
                false,
            ),
            (
                "device-taint-eviction-controller",
                one("delete", "", "pods"),
                true,
            ),
            (
                "device-taint-eviction-controller",
                one("patch", "", "pods/status"),
                true,
            ),
            (
                "device-taint-eviction-controller",
                one("watch", RESOURCE, "resourceslices"),
                true,
            ),
            (
                "device-taint-eviction-controller",
                one("list", RESOURCE, "deviceclasses"),
                true,
            ),
            (
                "device-taint-eviction-controller",
                one("watch", RESOURCE, "devicetaintrules"),
                true,
            ),
            (
                "device-taint-eviction-controller",
                one("update", RESOURCE, "resourceclaims"),
                false,
            ),
            (
                "volumeattributesclass-protection-controller",
                one("update", STORAGE, "volumeattributesclasses"),
                true,
            ),
            (
                "volumeattributesclass-protection-controller",
                one("update", "", "persistentvolumeclaims"),
                false,
            ),
            (
                "legacy-service-account-token-cleaner",
                one("delete", "", "secrets"),
                true,
            ),
            (
                "legacy-service-account-token-cleaner",
                one("patch", "", "secrets"),
                true,
            ),
            (
                "legacy-service-account-token-cleaner",
                one("update", "", "secrets"),
                false,
            ),
            (
                "legacy-service-account-token-cleaner",
                one("get", "", "configmaps"),
                false,
            ),
            (
                "legacy-service-account-token-cleaner",
                PolicyRule::from_json(&named_rule(
                    &["get"],
                    &[""],
                    &["configmaps"],
                    &["kube-apiserver-legacy-service-account-token-tracking"],
                )),
                true,
            ),
        ];
        for (sa, wanted, allowed) in cases {
            assert_eq!(
                covers(&rules_of(sa), std::slice::from_ref(&wanted)).0,
                allowed,
                "{sa}: {wanted:?}"
            );
        }
    }

    #[test]
    fn namespaced_roles_are_upstreams_and_bound_in_their_namespace() {
        let roles = controller_namespaced_roles();
        let bindings = controller_namespaced_role_bindings();
        let placed: Vec<(&str, &str)> = roles
            .iter()
            .map(|r| {
                (
                    r["metadata"]["namespace"].as_str().expect("namespace"),
                    r["metadata"]["name"].as_str().expect("name"),
                )
            })
            .collect();
        assert_eq!(
            placed,
            [
                ("kube-system", "system:controller:bootstrap-signer"),
                ("kube-system", "system:controller:token-cleaner"),
                ("kube-public", "system:controller:bootstrap-signer"),
            ]
        );
        for (role, binding) in roles.iter().zip(&bindings) {
            assert_eq!(
                binding["metadata"]["namespace"],
                role["metadata"]["namespace"]
            );
            assert_eq!(binding["roleRef"]["kind"], "Role");
            assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
            assert_eq!(binding["subjects"][0]["namespace"], "kube-system");
        }
        // The signer may update cluster-info only.
        assert_eq!(
            roles[2]["rules"][1]["resourceNames"],
            json!(["cluster-info"])
        );
    }

    #[test]
    fn each_role_is_bound_to_its_service_account() {
        let roles = controller_roles();
        let bindings = controller_role_bindings();
        assert_eq!(roles.len(), bindings.len());
        for (role, binding) in roles.iter().zip(&bindings) {
            let name = role["metadata"]["name"].as_str().expect("name");
            assert!(name.starts_with(CONTROLLER_ROLE_PREFIX));
            assert_eq!(binding["roleRef"]["name"], name);
            assert_eq!(binding["subjects"][0]["namespace"], "kube-system");
            assert_eq!(
                binding["subjects"][0]["name"],
                &name[CONTROLLER_ROLE_PREFIX.len()..]
            );
        }
    }
}
