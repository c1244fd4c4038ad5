//! ValidatingAdmissionPolicy on `kcm up`, driven by the installed `kubectl`: the kubernetes.io example (`object.spec.replicas <= 5` on Deployments) refuses a Deployment of 6 with upstream's message under a `Deny` binding, kubectl prints the warning under a `Warn` binding, a ConfigMap `paramKind` sets the limit per binding, and a policy with a type error shows it in `status.typeChecking`. Skipped (with a note) when `kubectl` is missing.

mod kcm_up;

use std::path::Path;

use kcm_up::{Backend, Up};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("manifest");
    path.display().to_string()
}

/// The docs' policy, with `validations` and anything else given.
fn policy(name: &str, extra: &str, validations: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: {name}\nspec:\n  failurePolicy: Fail\n{extra}  matchConstraints:\n    resourceRules:\n    - apiGroups: [\"apps\"]\n      apiVersions: [\"v1\"]\n      operations: [\"CREATE\", \"UPDATE\"]\n      resources: [\"deployments\"]\n  validations:\n{validations}"
    )
}

/// A binding of `policy` for namespaces labelled `env=<env>`.
fn binding(name: &str, policy: &str, action: &str, env: &str, extra: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata:\n  name: {name}\nspec:\n  policyName: {policy}\n  validationActions: [{action}]\n{extra}  matchResources:\n    namespaceSelector:\n      matchLabels:\n        env: {env}\n"
    )
}

kcm_up::on_each_backend!(
    validating_admission_policies_refuse_warn_and_read_params_on_kcm_up:
        validating_admission_policies_refuse_warn_and_read_params_on_kcm_up_sqlite,
        validating_admission_policies_refuse_warn_and_read_params_on_kcm_up_etcd
);

fn validating_admission_policies_refuse_warn_and_read_params_on_kcm_up(backend: &Backend) {
    let dir = tempfile::tempdir().expect("data dir");
    let up = Up::start(backend, dir.path(), &[], "info");
    for (ns, env) in [("deny", "test"), ("warn", "staging"), ("params", "params")] {
        up.kubectl_ok(&["create", "namespace", ns]);
        up.kubectl_ok(&["label", "namespace", ns, &format!("env={env}")]);
    }
    let demo = write(
        dir.path(),
        "policy.yaml",
        &policy(
            "demo-policy.example.com",
            "",
            "  - expression: \"object.spec.replicas <= 5\"\n",
        ),
    );
    up.kubectl_ok(&["apply", "-f", &demo]);
    let deny = write(
        dir.path(),
        "deny.yaml",
        &binding(
            "demo-binding-test.example.com",
            "demo-policy.example.com",
            "Deny",
            "test",
            "",
        ),
    );
    up.kubectl_ok(&["apply", "-f", &deny]);
    let warn = write(
        dir.path(),
        "warn.yaml",
        &binding(
            "demo-binding-warn.example.com",
            "demo-policy.example.com",
            "Warn",
            "staging",
            "",
        ),
    );
    up.kubectl_ok(&["apply", "-f", &warn]);

    // Deny: the docs' example, refused with upstream's message.
    let (ok, _, stderr) = up.kubectl(&[
        "create",
        "deployment",
        "nginx",
        "--image=nginx",
        "--replicas=6",
        "-n",
        "deny",
    ]);
    assert!(!ok, "6 replicas were admitted");
    assert!(
        stderr.contains(
            "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5"
        ),
        "{stderr}"
    );
    up.kubectl_ok(&[
        "create",
        "deployment",
        "nginx",
        "--image=nginx",
        "--replicas=5",
        "-n",
        "deny",
    ]);

    // Warn: admitted, and kubectl prints the warning.
    let (ok, _, stderr) = up.kubectl(&[
        "create",
        "deployment",
        "nginx",
        "--image=nginx",
        "--replicas=6",
        "-n",
        "warn",
    ]);
    assert!(ok, "a Warn binding refused: {stderr}");
    assert!(
        stderr.contains(
            "Warning: Validation failed for ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-warn.example.com': failed expression: object.spec.replicas <= 5"
        ),
        "{stderr}"
    );

    // Params: the limit comes from the binding's ConfigMap.
    let limited = write(
        dir.path(),
        "limited.yaml",
        &policy(
            "replica-limit.example.com",
            "  paramKind:\n    apiVersion: v1\n    kind: ConfigMap\n",
            "  - expression: \"object.spec.replicas <= int(params.data.maxReplicas)\"\n    messageExpression: \"'replicas must be no greater than ' + params.data.maxReplicas\"\n    reason: Forbidden\n",
        ),
    );
    up.kubectl_ok(&["apply", "-f", &limited]);
    let by_params = write(
        dir.path(),
        "by-params.yaml",
        &binding(
            "replica-limit-params.example.com",
            "replica-limit.example.com",
            "Deny",
            "params",
            "  paramRef:\n    name: replica-limit\n    parameterNotFoundAction: Deny\n",
        ),
    );
    up.kubectl_ok(&["apply", "-f", &by_params]);
    let (ok, _, stderr) = up.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=1",
        "-n",
        "params",
    ]);
    assert!(!ok, "admitted without params");
    assert!(
        stderr.contains("failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{stderr}"
    );
    up.kubectl_ok(&[
        "create",
        "configmap",
        "replica-limit",
        "--from-literal=maxReplicas=3",
        "-n",
        "params",
    ]);
    up.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=3",
        "-n",
        "params",
    ]);
    let (ok, _, stderr) = up.kubectl(&[
        "create",
        "deployment",
        "big",
        "--image=nginx",
        "--replicas=4",
        "-n",
        "params",
    ]);
    assert!(!ok, "4 replicas were admitted over a limit of 3");
    assert!(
        stderr.contains(
            "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'replica-limit.example.com' with binding 'replica-limit-params.example.com' denied request: replicas must be no greater than 3"
        ),
        "{stderr}"
    );

    // The status controller type-checks each policy against the kinds it matches.
    let typo = write(
        dir.path(),
        "typo.yaml",
        &policy(
            "typo.example.com",
            "",
            "  - expression: \"object.spec.replicas > 'five'\"\n",
        ),
    );
    up.kubectl_ok(&["apply", "-f", &typo]);
    let warning = up.wait_for("typo's status.typeChecking", || {
        let (ok, out, _) = up.kubectl(&[
            "get",
            "validatingadmissionpolicy",
            "typo.example.com",
            "-o",
            "jsonpath={.status.typeChecking.expressionWarnings[0].fieldRef}|{.status.typeChecking.expressionWarnings[0].warning}",
        ]);
        (ok && out.contains('|') && !out.ends_with('|')).then_some(out)
    });
    assert!(
        warning.starts_with(
            "spec.validations[0].expression|apps/v1, Kind=Deployment: ERROR: <input>:1:"
        ) && warning.contains("found no matching overload for '_>_' applied to '(int, string)'"),
        "{warning}"
    );
    // A policy without errors gets an empty typeChecking.
    let generation = up.wait_for("demo-policy checked", || {
        let (ok, out, _) = up.kubectl(&[
            "get",
            "validatingadmissionpolicy",
            "demo-policy.example.com",
            "-o",
            "jsonpath={.status.observedGeneration}|{.status.typeChecking}",
        ]);
        (ok && !out.starts_with('|')).then_some(out)
    });
    assert_eq!(generation, "1|{}");
}
