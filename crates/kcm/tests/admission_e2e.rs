//! kube-apiserver's admission chain on `kcm up`, driven by the installed `kubectl`: a LimitRange default fills a pod's requests, a pod gets the `kube-api-access-*` volume and the 300 s tolerations, an unknown `priorityClassName` is refused, a `restricted` namespace refuses a privileged pod with upstream's message and a `warn` namespace lets it in with kubectl printing the warning. Skipped (with a note) when `kubectl` is missing.

mod kcm_up;

use std::path::Path;

use kcm_up::{Backend, Up};

/// A one-container pod manifest with `extra` appended under the container.
fn pod(name: &str, namespace: &str, spec_extra: &str, container_extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n{spec_extra}  containers:\n  - name: c\n    image: nginx\n{container_extra}"
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("manifest");
    path.display().to_string()
}

kcm_up::on_each_backend!(
    admission_shapes_and_refuses_pods_on_kcm_up:
        admission_shapes_and_refuses_pods_on_kcm_up_sqlite,
        admission_shapes_and_refuses_pods_on_kcm_up_etcd
);

fn admission_shapes_and_refuses_pods_on_kcm_up(backend: &Backend) {
    let dir = tempfile::tempdir().expect("data dir");
    let up = Up::start(backend, dir.path(), &[], "info");
    for ns in ["adm", "strict", "loose"] {
        up.kubectl_ok(&["create", "namespace", ns]);
    }
    up.kubectl_ok(&[
        "label",
        "namespace",
        "strict",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    up.kubectl_ok(&[
        "label",
        "namespace",
        "loose",
        "pod-security.kubernetes.io/warn=baseline",
    ]);
    let limits = write(
        dir.path(),
        "limits.yaml",
        "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: defaults\n  namespace: adm\nspec:\n  limits:\n  - type: Container\n    defaultRequest:\n      cpu: 150m\n    default:\n      cpu: 300m\n",
    );
    up.kubectl_ok(&["apply", "-f", &limits]);
    up.wait_for("adm's default service account", || {
        up.kubectl(&["get", "serviceaccount", "default", "-n", "adm"])
            .0
            .then_some(())
    });

    // LimitRanger, ServiceAccount and DefaultTolerationSeconds shape a plain pod (the
    // ServiceAccount plugin waits for the namespace's `default` account).
    let plain = write(dir.path(), "plain.yaml", &pod("plain", "adm", "", ""));
    up.kubectl_ok(&["apply", "-f", &plain]);
    let shaped = up.kubectl_ok(&[
        "get", "pod", "plain", "-n", "adm", "-o",
        "jsonpath={.spec.containers[0].resources.requests.cpu} {.spec.containers[0].resources.limits.cpu} \
         {.spec.serviceAccountName} {.spec.volumes[0].name} {.spec.containers[0].volumeMounts[0].mountPath} \
         {.spec.tolerations[*].tolerationSeconds}",
    ]);
    let fields: Vec<&str> = shaped.split_whitespace().collect();
    assert_eq!(fields.len(), 7, "{shaped}");
    assert_eq!(&fields[..3], ["150m", "300m", "default"], "{shaped}");
    assert!(fields[3].starts_with("kube-api-access-"), "{shaped}");
    assert_eq!(fields[4], "/var/run/secrets/kubernetes.io/serviceaccount");
    assert_eq!(&fields[5..], ["300", "300"], "{shaped}");

    // Priority refuses a class that does not exist.
    let gold = write(
        dir.path(),
        "gold.yaml",
        &pod("gold", "adm", "  priorityClassName: gold\n", ""),
    );
    let (ok, _, stderr) = up.kubectl(&["apply", "-f", &gold]);
    assert!(!ok);
    assert!(
        stderr.contains("pods \"gold\" is forbidden: no PriorityClass with name gold was found"),
        "{stderr}"
    );

    // PodSecurity: refused at enforce, warned about at warn.
    let privileged = "    securityContext:\n      privileged: true\n";
    let strict = write(
        dir.path(),
        "strict.yaml",
        &pod("root", "strict", "", privileged),
    );
    let (ok, _, stderr) = up.kubectl(&["apply", "-f", &strict]);
    assert!(!ok);
    assert!(
        stderr.contains(
            "pods \"root\" is forbidden: violates PodSecurity \"restricted:latest\": privileged (container \"c\" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false)"
        ),
        "{stderr}"
    );
    let loose = write(
        dir.path(),
        "loose.yaml",
        &pod("root", "loose", "", privileged),
    );
    let (ok, _, stderr) = up.kubectl(&["apply", "-f", &loose]);
    assert!(ok, "{stderr}\n{}", up.logs());
    assert!(
        stderr.contains(
            "Warning: would violate PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"
        ),
        "{stderr}"
    );
}
