//! The manifests in `deploy/`: well-formed, consistent with each other and with `kcm run`'s
//! flags (the Deployment's arguments are run through the real binary), RBAC as documented.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde::de::DeserializeOwned;

const KCM: &str = env!("CARGO_BIN_EXE_kcm");

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(deploy_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn one<T: DeserializeOwned>(file: &str) -> T {
    serde_saphyr::from_str(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// `(apiGroups, resources, resourceNames, verbs)` of a rule, for comparison as a set.
type Rule = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

fn rules(rules: Option<Vec<PolicyRule>>) -> BTreeSet<Rule> {
    rules
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            (
                r.api_groups.unwrap_or_default(),
                r.resources.unwrap_or_default(),
                r.resource_names.unwrap_or_default(),
                r.verbs,
            )
        })
        .collect()
}

fn rule(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Rule {
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
    (owned(groups), owned(resources), owned(names), owned(verbs))
}

/// The value of `--name=value` in `args`.
fn flag<'a>(args: &'a [String], name: &str) -> &'a str {
    let prefix = format!("--{name}=");
    args.iter()
        .find_map(|a| a.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("--{name} missing from {args:?}"))
}

#[test]
fn manifests_agree_with_each_other_and_with_kcm_run() {
    let namespace: Namespace = one("namespace.yaml");
    let ns = namespace.metadata.name.expect("namespace name");
    let sa: ServiceAccount = one("serviceaccount.yaml");
    assert_eq!(sa.metadata.namespace.as_deref(), Some(&*ns));
    let sa_name = sa.metadata.name.expect("sa name");

    let deployment: Deployment = one("deployment.yaml");
    assert_eq!(deployment.metadata.namespace.as_deref(), Some(&*ns));
    let spec = deployment.spec.expect("spec");
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some(&*sa_name));
    let container = &pod.containers[0];
    let args = container.args.clone().expect("args");
    assert_eq!(args[0], "run");
    assert_eq!(flag(&args, "leader-elect"), "true");
    assert_eq!(flag(&args, "leader-elect-resource-namespace"), ns);
    let lease = flag(&args, "leader-elect-resource-name");
    assert_ne!(
        lease, "kube-controller-manager",
        "must not compete with kube-controller-manager for its lease"
    );
    let port: i32 = flag(&args, "secure-port").parse().expect("port");
    let ports = container.ports.clone().expect("ports");
    assert_eq!(ports[0].container_port, port);
    let port_name = ports[0].name.clone().expect("port name");
    for (probe, path) in [
        (container.liveness_probe.clone(), "/healthz"),
        (container.readiness_probe.clone(), "/readyz"),
    ] {
        let get = probe.and_then(|p| p.http_get).expect("httpGet probe");
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(get.scheme.as_deref(), Some("HTTPS"));
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(port_name.clone())
        );
    }

    // The arguments are valid for the real binary: it gets past flag validation and fails
    // only where a pod would not, loading the client configuration.
    let out = Command::new(KCM)
        .args(&args)
        .arg("--kubeconfig=/nonexistent/kubeconfig")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("kcm");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("load client configuration from /nonexistent/kubeconfig"),
        "{stderr}"
    );

    // Leader election: the Lease named in the flags, in the namespace, nothing else.
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&read("leader-election-role.yaml")).expect("yaml");
    let role: Role = serde_json::from_value(docs[0].clone()).expect("role");
    let binding: RoleBinding = serde_json::from_value(docs[1].clone()).expect("binding");
    assert_eq!(role.metadata.namespace.as_deref(), Some(&*ns));
    assert_eq!(
        rules(role.rules),
        BTreeSet::from([
            rule(&["coordination.k8s.io"], &["leases"], &[], &["create"]),
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &[lease],
                &["get", "update"]
            ),
        ])
    );
    assert_eq!(
        binding.role_ref.name,
        role.metadata.name.expect("role name")
    );
    let subject = &binding.subjects.expect("subjects")[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        (&*sa_name, Some(&*ns))
    );

    // The controllers' permissions: exactly what the ReplicaSet, ReplicationController,
    // DaemonSet and StatefulSet controllers, the storage controllers, the endpoint
    // controllers, node IPAM, the root CA publisher, the CSR controllers and the service
    // controllers call.
    let role: ClusterRole = one("clusterrole.yaml");
    let workloads = ["replicasets", "daemonsets", "statefulsets"];
    let sub = |s: &str| workloads.map(|w| format!("{w}/{s}"));
    let (status, finalizers) = (sub("status"), sub("finalizers"));
    assert_eq!(
        rules(role.rules),
        BTreeSet::from([
            rule(&["apps"], &workloads, &[], &["get", "list", "watch"]),
            rule(
                &["apps"],
                &status.each_ref().map(String::as_str),
                &[],
                &["update"]
            ),
            rule(
                &["apps"],
                &finalizers.each_ref().map(String::as_str),
                &[],
                &["update"]
            ),
            rule(
                &[""],
                &["replicationcontrollers"],
                &[],
                &["get", "list", "watch"]
            ),
            rule(
                &[""],
                &[
                    "replicationcontrollers/status",
                    "replicationcontrollers/finalizers"
                ],
                &[],
                &["update"]
            ),
            rule(
                &["apps"],
                &["controllerrevisions"],
                &[],
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete"
                ]
            ),
            rule(
                &[""],
                &["pods"],
                &[],
                &["list", "watch", "create", "update", "delete", "patch"]
            ),
            rule(&[""], &["nodes"], &[], &["list", "watch"]),
            rule(
                &[""],
                &["persistentvolumeclaims"],
                &[],
                &["list", "watch", "create", "update"]
            ),
            rule(&[""], &["events"], &[], &["create", "patch"]),
            // The storage controllers: protection finalizers and ephemeral claims.
            rule(
                &[""],
                &["persistentvolumes"],
                &[],
                &["list", "watch", "update"]
            ),
            rule(&[""], &["pods/finalizers"], &[], &["update"]),
            rule(
                &["resource.k8s.io"],
                &["resourceclaims"],
                &[],
                &["list", "watch", "create", "update", "delete"]
            ),
            rule(
                &["resource.k8s.io"],
                &["resourceclaimtemplates"],
                &[],
                &["list", "watch"]
            ),
            rule(
                &["resource.k8s.io"],
                &["resourceclaims/status"],
                &[],
                &["update"]
            ),
            // The device taint eviction controller: its informers and the read before a delete.
            rule(
                &["resource.k8s.io"],
                &["resourceslices", "deviceclasses", "devicetaintrules"],
                &[],
                &["list", "watch"]
            ),
            rule(&[""], &["pods"], &[], &["get"]),
            rule(&[""], &["pods/status"], &[], &["patch"]),
            rule(
                &["storage.k8s.io"],
                &["volumeattributesclasses"],
                &[],
                &["list", "watch", "update"]
            ),
            // The PV binder: the newest copy before a reclaim, deletion, status writes, classes.
            rule(&[""], &["persistentvolumes"], &[], &["get", "delete"]),
            rule(&[""], &["persistentvolumeclaims"], &[], &["get"]),
            rule(
                &[""],
                &["persistentvolumes/status", "persistentvolumeclaims/status"],
                &[],
                &["update"]
            ),
            rule(
                &["storage.k8s.io"],
                &["storageclasses"],
                &[],
                &["list", "watch"]
            ),
            // The attach/detach controller: VolumeAttachments, CSIDrivers, volumesAttached.
            rule(
                &["storage.k8s.io"],
                &["volumeattachments"],
                &[],
                &["list", "watch", "create", "delete"]
            ),
            rule(
                &["storage.k8s.io"],
                &["csidrivers"],
                &[],
                &["list", "watch"]
            ),
            rule(&[""], &["nodes/status"], &[], &["patch"]),
            // The endpoint controllers, node IPAM and the root CA publisher.
            rule(
                &[""],
                &["services", "endpoints", "nodes", "namespaces", "configmaps"],
                &[],
                &["list", "watch"]
            ),
            rule(&[""], &["endpoints"], &[], &["create", "update", "delete"]),
            rule(&[""], &["endpoints/restricted"], &[], &["create"]),
            rule(
                &[""],
                &["services/finalizers", "endpoints/finalizers"],
                &[],
                &["update"]
            ),
            rule(
                &["discovery.k8s.io"],
                &["endpointslices"],
                &[],
                &["list", "watch", "create", "update", "delete"]
            ),
            rule(&[""], &["nodes"], &[], &["patch"]),
            rule(&[""], &["configmaps"], &[], &["create", "update"]),
            // The CSR approver, signers and cleaner.
            rule(
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
                &[],
                &["list", "watch", "delete"]
            ),
            rule(
                &["certificates.k8s.io"],
                &[
                    "certificatesigningrequests/status",
                    "certificatesigningrequests/approval"
                ],
                &[],
                &["update"]
            ),
            rule(
                &["certificates.k8s.io"],
                &["signers"],
                &["kubernetes.io/kube-apiserver-client-kubelet"],
                &["approve"]
            ),
            rule(
                &["certificates.k8s.io"],
                &["signers"],
                &[
                    "kubernetes.io/legacy-unknown",
                    "kubernetes.io/kube-apiserver-client",
                    "kubernetes.io/kube-apiserver-client-kubelet",
                    "kubernetes.io/kubelet-serving"
                ],
                &["sign"]
            ),
            // The service-lb controller (with a cloud) and the ServiceCIDR controller.
            rule(&[""], &["services/status"], &[], &["patch"]),
            rule(
                &["networking.k8s.io"],
                &["servicecidrs", "servicecidrs/status"],
                &[],
                &["list", "watch", "patch"]
            ),
            rule(
                &["networking.k8s.io"],
                &["ipaddresses"],
                &[],
                &["list", "watch"]
            ),
            // The legacy service account token cleaner.
            rule(
                &[""],
                &["serviceaccounts", "secrets"],
                &[],
                &["list", "watch"]
            ),
            rule(
                &[""],
                &["configmaps"],
                &["kube-apiserver-legacy-service-account-token-tracking"],
                &["get"]
            ),
            rule(&[""], &["secrets"], &[], &["patch", "delete"]),
            // The ValidatingAdmissionPolicy status controller.
            rule(
                &["admissionregistration.k8s.io"],
                &[
                    "validatingadmissionpolicies",
                    "validatingadmissionpolicies/status"
                ],
                &[],
                &["list", "watch", "patch"]
            ),
            // The endpoint's delegated authentication and authorization.
            rule(
                &["authentication.k8s.io"],
                &["tokenreviews"],
                &[],
                &["create"]
            ),
            rule(
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
                &[],
                &["create"]
            ),
        ])
    );
    let binding: ClusterRoleBinding = one("clusterrolebinding.yaml");
    assert_eq!(binding.role_ref.name, role.metadata.name.expect("name"));
    let subject = &binding.subjects.expect("subjects")[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        (&*sa_name, Some(&*ns))
    );
}

#[test]
fn kustomize_renders_every_manifest() {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(deploy_dir())
        .output()
        .expect("kubectl kustomize");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = String::from_utf8(out.stdout).expect("utf-8");
    let kinds: BTreeSet<&str> = rendered
        .lines()
        .filter_map(|l| l.strip_prefix("kind: "))
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Namespace",
            "Role",
            "RoleBinding",
            "ServiceAccount",
        ])
    );
}
