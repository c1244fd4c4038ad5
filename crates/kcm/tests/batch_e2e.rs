//! Jobs on `kcm up`, driven by the installed `kubectl` as a user would: `kubectl create job`
//! runs to completion, `completions: 5, parallelism: 2` never has more than two active pods,
//! an Indexed Job numbers its pods, `suspend: true` deletes the active pods, a
//! `podFailurePolicy` rule fails a Job on an exit code, and `ttlSecondsAfterFinished` deletes
//! a finished Job and its pods. The Jobs run concurrently on one cluster, so the whole test
//! takes about as long as its slowest Job. Skipped (with a note) when `kubectl` is missing.
//!
//! The slow acceptance checks (a `backoffLimit` exhausted through the 10 s + 20 s back-off, a
//! CronJob's minute, podgc's 40 s quarantine after a node is deleted) are checked by hand;
//! their logic is covered by unit tests with paused time and by the controllers' integration
//! tests with short periods.

mod kcm_up;

use std::collections::BTreeSet;

use kcm_up::{Backend, Up};

/// The Jobs' own queries.
impl Up {
    fn job_field(&self, job: &str, path: &str) -> String {
        self.kubectl_ok(&["get", "job", job, "-o", &format!("jsonpath={path}")])
    }

    /// The pods of `job` as `name phase deleting annotation-index` lines.
    fn job_pods(&self, job: &str) -> Vec<(String, String, bool, String)> {
        let out = self.kubectl_ok(&[
            "get",
            "pods",
            "-l",
            &format!("batch.kubernetes.io/job-name={job}"),
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}{.status.phase}{\"\\t\"}\
             {.metadata.deletionTimestamp}{\"\\t\"}\
             {.metadata.annotations.batch\\.kubernetes\\.io/job-completion-index}{\"\\n\"}{end}",
        ]);
        out.lines()
            .filter(|l| !l.is_empty())
            .map(|line| {
                let f: Vec<&str> = line.split('\t').collect();
                assert_eq!(f.len(), 4, "{line:?}");
                (
                    f[0].to_owned(),
                    f[1].to_owned(),
                    !f[2].is_empty(),
                    f[3].to_owned(),
                )
            })
            .collect()
    }

    /// Pods of `job` neither finished nor being deleted.
    fn active_pods(&self, job: &str) -> usize {
        self.job_pods(job)
            .iter()
            .filter(|(_, phase, deleting, _)| {
                !deleting && phase != "Succeeded" && phase != "Failed"
            })
            .count()
    }
}

/// A Job manifest: `name`, the spec fields in `spec` (YAML, indented for `spec:`), pods
/// annotated with `annotations` (YAML map entries) for the simulated kubelet.
fn job_manifest(name: &str, spec: &str, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\nspec:\n{spec}  template:\n    \
         metadata:\n      annotations:\n{annotations}    spec:\n      restartPolicy: Never\n      \
         containers:\n      - name: main\n        image: busybox\n"
    )
}

kcm_up::on_each_backend!(
    jobs_on_kcm_up_driven_by_kubectl:
        jobs_on_kcm_up_driven_by_kubectl_sqlite,
        jobs_on_kcm_up_driven_by_kubectl_etcd
);

fn jobs_on_kcm_up_driven_by_kubectl(backend: &Backend) {
    let dir = tempfile::tempdir().expect("data dir");
    let up = Up::start(backend, dir.path(), &[], "info");
    up.wait_for("the default namespace's service account", || {
        up.kubectl(&["get", "serviceaccount", "default"])
            .0
            .then_some(())
    });

    // Everything starts at once; the checks follow.
    up.kubectl_ok(&[
        "create",
        "job",
        "pi",
        "--image=perl",
        "--",
        "perl",
        "-e",
        "1",
    ]);
    let one_second = "        sim.kcm.io/duration: 1s\n";
    let manifests = [
        job_manifest("five", "  completions: 5\n  parallelism: 2\n", one_second),
        job_manifest(
            "indexed",
            "  completions: 3\n  parallelism: 3\n  completionMode: Indexed\n",
            one_second,
        ),
        job_manifest(
            "pausable",
            "  completions: 4\n  parallelism: 2\n",
            "        sim.kcm.io/duration: 1h\n",
        ),
        job_manifest(
            "exits-42",
            "  backoffLimit: 6\n  podFailurePolicy:\n    rules:\n    - action: FailJob\n      \
             onExitCodes:\n        operator: In\n        values: [42]\n",
            "        sim.kcm.io/duration: 1s\n        sim.kcm.io/exit-code: \"42\"\n",
        ),
        job_manifest("short-lived", "  ttlSecondsAfterFinished: 2\n", one_second),
    ];
    let file = dir.path().join("jobs.yaml");
    std::fs::write(&file, manifests.join("---\n")).expect("manifests");
    up.kubectl_ok(&["apply", "-f", &file.to_string_lossy()]);

    // `completions: 5, parallelism: 2`: never more than two active pods, then Complete with
    // five successes and five pods.
    up.wait_for("job/five complete", || {
        let active = up.active_pods("five");
        assert!(active <= 2, "job/five has {active} active pods");
        (up.job_field(
            "five",
            "{.status.conditions[?(@.type==\"Complete\")].status}",
        ) == "True")
            .then_some(())
    });
    assert_eq!(up.job_field("five", "{.status.succeeded}"), "5");
    assert_eq!(up.job_pods("five").len(), 5, "no pod counted twice or lost");

    // `kubectl create job`: `kubectl wait` sees it complete.
    up.kubectl_ok(&[
        "wait",
        "--for=condition=complete",
        "job/pi",
        "--timeout=60s",
    ]);
    assert_eq!(up.job_field("pi", "{.status.succeeded}"), "1");

    // Indexed: pods 0..2, then all indexes completed.
    up.wait_for("job/indexed complete", || {
        (up.job_field("indexed", "{.status.completedIndexes}") == "0-2").then_some(())
    });
    let indexes: BTreeSet<String> = up
        .job_pods("indexed")
        .into_iter()
        .map(|(_, _, _, index)| index)
        .collect();
    assert_eq!(
        indexes,
        ["0", "1", "2"].into_iter().map(String::from).collect()
    );

    // A container exiting 42 matches the FailJob rule.
    up.wait_for("job/exits-42 failed by its pod failure policy", || {
        (up.job_field(
            "exits-42",
            "{.status.conditions[?(@.type==\"Failed\")].reason}",
        ) == "PodFailurePolicy")
            .then_some(())
    });

    // `suspend: true` deletes the active pods.
    up.wait_for("job/pausable running two pods", || {
        (up.active_pods("pausable") == 2).then_some(())
    });
    up.kubectl_ok(&[
        "patch",
        "job",
        "pausable",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    up.wait_for("job/pausable suspended without pods", || {
        let suspended = up.job_field(
            "pausable",
            "{.status.conditions[?(@.type==\"Suspended\")].status}",
        );
        (suspended == "True" && up.job_pods("pausable").is_empty()).then_some(())
    });

    // `ttlSecondsAfterFinished: 2`: the Job and its pod go.
    up.wait_for("job/short-lived and its pods deleted", || {
        let (exists, _, _) = up.kubectl(&["get", "job", "short-lived"]);
        (!exists && up.job_pods("short-lived").is_empty()).then_some(())
    });
}
