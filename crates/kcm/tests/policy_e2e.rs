//! ResourceQuota and PodDisruptionBudget on `kcm up`, driven by the installed `kubectl` as a
//! user would: a Deployment's third pod is refused by a `pods: 2` quota (the ReplicaSet
//! reports `FailedCreate` with the quota's message) and created once the quota is raised; a
//! PDB `minAvailable: 2` over three pods allows one disruption, so `kubectl drain` of the
//! nodes evicts one pod and keeps waiting. Skipped (with a note) when `kubectl` is missing.

mod kcm_up;

use kcm_up::{Backend, Up};

impl Up {
    /// Names of the pods in `namespace` with `selector` that are not being deleted.
    fn live_pods(&self, namespace: &str, selector: &str) -> Vec<String> {
        let out = self.kubectl_ok(&[
            "get",
            "pods",
            "-n",
            namespace,
            "-l",
            selector,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}{.metadata.deletionTimestamp}{\"\\n\"}{end}",
        ]);
        out.lines()
            .filter_map(|l| {
                let (name, deleting) = l.split_once('\t').unwrap_or((l, ""));
                (!name.is_empty() && deleting.is_empty()).then(|| name.to_owned())
            })
            .collect()
    }

    fn apply(&self, dir: &std::path::Path, name: &str, manifest: &str) {
        let file = dir.join(name);
        std::fs::write(&file, manifest).expect("manifest");
        self.kubectl_ok(&["apply", "-f", &file.to_string_lossy()]);
    }
}

kcm_up::on_each_backend!(
    quota_refuses_the_third_pod_until_raised:
        quota_refuses_the_third_pod_until_raised_sqlite,
        quota_refuses_the_third_pod_until_raised_etcd
);

fn quota_refuses_the_third_pod_until_raised(backend: &Backend) {
    let dir = tempfile::tempdir().expect("data dir");
    let up = Up::start(backend, dir.path(), &[], "info");
    up.kubectl_ok(&["create", "namespace", "quota"]);
    up.apply(
        dir.path(),
        "quota.yaml",
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: pods\n  namespace: quota\n\
         spec:\n  hard:\n    pods: \"2\"\n",
    );
    // The quota applies once the controller computed its status.
    up.wait_for("the quota's status", || {
        let used = up.kubectl_ok(&[
            "get",
            "quota",
            "pods",
            "-n",
            "quota",
            "-o",
            "jsonpath={.status.used.pods}",
        ]);
        (used == "0").then_some(())
    });
    up.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "-n",
        "quota",
        "--image=nginx",
        "--replicas=3",
    ]);
    let message = up.wait_for("the ReplicaSet's FailedCreate event", || {
        let out = up.kubectl_ok(&[
            "get",
            "events",
            "-n",
            "quota",
            "-o",
            "jsonpath={range .items[*]}{.reason}{\"\\t\"}{.involvedObject.kind}{\"\\t\"}{.message}{\"\\n\"}{end}",
        ]);
        out.lines()
            .find(|l| l.starts_with("FailedCreate\tReplicaSet\t"))
            .map(str::to_owned)
    });
    assert!(
        message.contains(
            "is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2"
        ),
        "{message}"
    );
    assert_eq!(up.live_pods("quota", "app=web").len(), 2);
    let used = up.kubectl_ok(&[
        "get",
        "quota",
        "pods",
        "-n",
        "quota",
        "-o",
        "jsonpath={.status.used.pods}",
    ]);
    assert_eq!(used, "2");

    up.kubectl_ok(&[
        "patch",
        "quota",
        "pods",
        "-n",
        "quota",
        "--type=merge",
        "-p",
        r#"{"spec":{"hard":{"pods":"3"}}}"#,
    ]);
    up.wait_for("the third pod", || {
        (up.live_pods("quota", "app=web").len() == 3).then_some(())
    });

    // Deleting a pod releases its usage (the controller recalculates on deletes).
    up.kubectl_ok(&["scale", "deployment", "web", "-n", "quota", "--replicas=1"]);
    up.wait_for("usage released", || {
        let used = up.kubectl_ok(&[
            "get",
            "quota",
            "pods",
            "-n",
            "quota",
            "-o",
            "jsonpath={.status.used.pods}",
        ]);
        (used == "1").then_some(())
    });
}

kcm_up::on_each_backend!(
    drain_respects_the_disruption_budget:
        drain_respects_the_disruption_budget_sqlite,
        drain_respects_the_disruption_budget_etcd
);

fn drain_respects_the_disruption_budget(backend: &Backend) {
    let dir = tempfile::tempdir().expect("data dir");
    // Two nodes: draining both leaves the evicted pod's replacement nowhere to run, so the
    // budget stays exhausted and drain must wait.
    let up = Up::start(backend, dir.path(), &["--nodes", "2"], "info");
    up.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=3",
    ]);
    up.kubectl_ok(&[
        "create",
        "poddisruptionbudget",
        "web",
        "--selector=app=web",
        "--min-available=2",
    ]);
    let pdb_field =
        |path: &str| up.kubectl_ok(&["get", "pdb", "web", "-o", &format!("jsonpath={path}")]);
    up.wait_for("disruptionsAllowed 1", || {
        (pdb_field("{.status.currentHealthy}/{.status.desiredHealthy}/{.status.expectedPods}/{.status.disruptionsAllowed}")
            == "3/2/3/1")
            .then_some(())
    });
    assert_eq!(
        pdb_field("{.status.conditions[?(@.type==\"DisruptionAllowed\")].reason}"),
        "SufficientPods"
    );
    let before = up.live_pods("default", "app=web");
    assert_eq!(before.len(), 3);

    let (ok, _stdout, stderr) = up.kubectl(&[
        "drain",
        "kcm-node-0",
        "kcm-node-1",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=4s",
    ]);
    assert!(
        !ok,
        "drain must not finish while the budget holds: {stderr}"
    );
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    // Exactly one of the original pods was evicted; the budget records it.
    let after = up.live_pods("default", "app=web");
    let survivors = before.iter().filter(|p| after.contains(p)).count();
    assert_eq!(survivors, 2, "before {before:?}, after {after:?}");
    assert_eq!(pdb_field("{.status.disruptionsAllowed}"), "0");
}
