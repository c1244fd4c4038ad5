//! `kcm up` as a process, driven by the installed `kubectl`: apply the nginx example, wait for
//! it, replace a deleted pod, scale to 0 and back, cordon a node, stop with SIGTERM (exit 0),
//! restart on the same data directory with the cluster's state intact, and delete the
//! workload (its pods go through the garbage collector, when the build has it).
//!
//! Skipped (with a note) when `kubectl` is not installed. The Deployment steps (rollout,
//! image update) run when the build registers the Deployment controller; otherwise the same
//! steps run on the ReplicaSet example. `--validate=false` because kubectl's validation needs
//! the OpenAPI documents, which the API server does not serve yet.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const KCM: &str = env!("CARGO_BIN_EXE_kcm");
/// How long any single wait may take: generous, the machine is shared and the build is debug.
const DEADLINE: Duration = Duration::from_secs(90);
const NODES: [&str; 3] = ["kcm-node-0", "kcm-node-1", "kcm-node-2"];

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A running `kcm up`; killed when dropped, however the test ends.
struct Up {
    child: Child,
    kubeconfig: PathBuf,
    log: PathBuf,
}

impl Up {
    /// Starts `kcm up` on a free port with its data in `data_dir` and returns once it printed
    /// its kubeconfig path (the file is written before the banner).
    fn start(data_dir: &Path, log: PathBuf) -> Self {
        let stderr = std::fs::File::create(&log).expect("log file");
        let mut child = Command::new(KCM)
            .args([
                "up",
                "--listen",
                "127.0.0.1:0",
                "--pod-ready-delay",
                "200ms",
            ])
            .arg("--data-dir")
            .arg(data_dir)
            .env("KCM_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn kcm up");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut up = Up {
            child,
            kubeconfig: PathBuf::new(),
            log,
        };
        let started = Instant::now();
        let mut banner = Vec::new();
        loop {
            let Ok(line) = rx.recv_timeout(DEADLINE.saturating_sub(started.elapsed())) else {
                panic!(
                    "kcm up printed no kubeconfig (stdout: {banner:?})\n{}",
                    up.logs()
                );
            };
            banner.push(line.clone());
            if let Some(path) = line.trim().strip_prefix("kubeconfig: ") {
                up.kubeconfig = PathBuf::from(path);
                break;
            }
        }
        eprintln!("kcm up ready in {:?}", started.elapsed());
        assert!(
            banner[0].starts_with("kcm up: cluster running with 3 simulated nodes"),
            "{banner:?}"
        );
        assert!(
            banner[1]
                .trim()
                .starts_with("API server: https://127.0.0.1:")
        );
        assert!(up.kubeconfig.starts_with(data_dir), "{banner:?}");
        assert!(up.kubeconfig.is_file());
        up
    }

    fn logs(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(60).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("--- kcm up log tail ---\n{}", tail.join("\n"))
    }

    /// Sends SIGTERM and waits for the exit status.
    fn terminate(mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "kcm up did not stop within 30s of SIGTERM\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--request-timeout", "20s"])
            .args(args)
            .output()
            .expect("run kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn kubectl_ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.kubectl(args);
        assert!(
            ok,
            "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {stderr}\n{}",
            self.logs()
        );
        stdout
    }

    /// Polls `f` every 200 ms until it yields a value; panics naming `what` after [`DEADLINE`].
    fn wait_for<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(value) = f() {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The pods matching `selector`.
    fn pods(&self, selector: &str) -> Vec<PodRow> {
        let out = self.kubectl_ok(&[
            "get",
            "pods",
            "-l",
            selector,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}{.status.phase}{\"\\t\"}\
             {.status.conditions[?(@.type==\"Ready\")].status}{\"\\t\"}{.spec.nodeName}{\"\\t\"}\
             {.status.podIP}{\"\\t\"}{.metadata.deletionTimestamp}{\"\\t\"}\
             {.spec.containers[0].image}{\"\\n\"}{end}",
        ]);
        out.lines()
            .filter(|l| !l.is_empty())
            .map(|line| {
                let f: Vec<&str> = line.split('\t').collect();
                assert_eq!(f.len(), 7, "{line:?}");
                PodRow {
                    name: f[0].to_owned(),
                    running_ready: f[1] == "Running" && f[2] == "True" && f[5].is_empty(),
                    node: f[3].to_owned(),
                    ip: f[4].to_owned(),
                    image: f[6].to_owned(),
                }
            })
            .collect()
    }

    /// Waits until exactly `n` pods match `selector`, all Running and Ready (none terminating).
    fn wait_running(&self, selector: &str, n: usize) -> Vec<PodRow> {
        self.wait_for(&format!("{n} running pods {selector}"), || {
            let pods = self.pods(selector);
            (pods.len() == n && pods.iter().all(|p| p.running_ready)).then_some(pods)
        })
    }

    /// Waits until the three simulated nodes are registered and Ready.
    fn wait_nodes_ready(&self) {
        self.wait_for("3 Ready nodes", || {
            let out = self.kubectl_ok(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
            ]);
            let ready: BTreeSet<&str> = out
                .lines()
                .filter_map(|l| l.strip_suffix("=True"))
                .collect();
            (ready == NODES.into_iter().collect()).then_some(())
        });
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone, Debug, PartialEq)]
struct PodRow {
    name: String,
    running_ready: bool,
    node: String,
    ip: String,
    image: String,
}

/// What the test drives: the Deployment when the build runs its controller, else the
/// ReplicaSet example.
struct Workload {
    /// `deployment/nginx` or `replicaset/frontend`.
    resource: &'static str,
    file: &'static str,
    selector: &'static str,
}

/// Whether this build registers the controller `name` (as `kcm run --help` lists them).
fn has_controller(name: &str) -> bool {
    let out = Command::new(KCM)
        .args(["run", "--help"])
        .output()
        .expect("kcm run --help");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("All controllers: "))
        .is_some_and(|names| names.split(", ").any(|n| n == name))
}

fn kubectl_installed() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn up_runs_a_cluster_that_kubectl_drives_and_resumes_after_restart() {
    if !kubectl_installed() {
        eprintln!("kubectl is not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let up = Up::start(&data, dir.path().join("up-1.log"));
    up.wait_nodes_ready();

    let workload = if has_controller("deployment-controller") {
        Workload {
            resource: "deployment/nginx",
            file: "nginx-deployment.yaml",
            selector: "app=nginx",
        }
    } else {
        eprintln!("the Deployment controller is not in this build: driving the ReplicaSet example");
        Workload {
            resource: "replicaset/frontend",
            file: "nginx-replicaset.yaml",
            selector: "app=frontend",
        }
    };
    let deployment = workload.resource.starts_with("deployment/");
    let manifest = examples_dir().join(workload.file);
    let manifest = manifest.to_str().expect("utf-8 path");
    up.kubectl_ok(&["apply", "--validate=false", "-f", manifest]);

    // Rolled out: three Running, Ready pods, one per node, each with an IP from its node's
    // /24 (10.244.<node index>.0/24).
    if deployment {
        up.kubectl_ok(&["rollout", "status", workload.resource, "--timeout=90s"]);
    }
    up.wait_for("the pods to exist", || {
        (up.pods(workload.selector).len() == 3).then_some(())
    });
    up.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod",
        "-l",
        workload.selector,
        "--timeout=90s",
    ]);
    let pods = up.wait_running(workload.selector, 3);
    let wide = up.kubectl_ok(&["get", "pods", "-l", workload.selector, "-o", "wide"]);
    let rows: Vec<Vec<&str>> = wide
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{wide}");
    let mut nodes_used = BTreeSet::new();
    for row in &rows {
        // NAME READY STATUS RESTARTS AGE IP NODE ...
        assert_eq!(&row[1..3], ["1/1", "Running"], "{wide}");
        let node = row[6];
        let index = node.strip_prefix("kcm-node-").expect("a simulated node");
        assert!(
            row[5].starts_with(&format!("10.244.{index}.")),
            "pod IP from the node's CIDR: {wide}"
        );
        nodes_used.insert(node);
    }
    assert_eq!(nodes_used.len(), 3, "spread over the nodes: {wide}");
    let ips: BTreeSet<&str> = pods.iter().map(|p| p.ip.as_str()).collect();
    assert_eq!(ips.len(), 3, "distinct IPs: {pods:?}");

    if deployment {
        // Image update: a new ReplicaSet rolls out and replaces every pod.
        up.kubectl_ok(&["set", "image", workload.resource, "nginx=nginx:1.28"]);
        up.kubectl_ok(&["rollout", "status", workload.resource, "--timeout=90s"]);
        let pods = up.wait_for("the new image on every pod", || {
            let pods = up.wait_running(workload.selector, 3);
            pods.iter().all(|p| p.image == "nginx:1.28").then_some(pods)
        });
        let old: BTreeSet<&str> = rows.iter().map(|r| r[0]).collect();
        assert!(pods.iter().all(|p| !old.contains(p.name.as_str())));
    }

    // A deleted pod is finalized by its node and replaced.
    let victim = up.pods(workload.selector)[0].name.clone();
    up.kubectl_ok(&["delete", "pod", &victim, "--timeout=60s"]);
    let pods = up.wait_for("the deleted pod's replacement", || {
        let pods = up.wait_running(workload.selector, 3);
        pods.iter().all(|p| p.name != victim).then_some(pods)
    });
    assert_eq!(pods.len(), 3);

    // Scale to zero and back.
    up.kubectl_ok(&["scale", workload.resource, "--replicas=0"]);
    up.wait_running(workload.selector, 0);
    up.kubectl_ok(&["scale", workload.resource, "--replicas=3"]);
    up.wait_running(workload.selector, 3);

    // Cordon a node: new pods avoid it.
    let cordoned = NODES[0];
    up.kubectl_ok(&["cordon", cordoned]);
    // A probe pinned to the cordoned node proves the scheduler has seen the cordon before
    // the workload grows (the node and pod watches are separate streams).
    let probe = dir.path().join("probe.yaml");
    std::fs::write(
        &probe,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: cordon-probe\nspec:\n  \
             nodeSelector:\n    kubernetes.io/hostname: {cordoned}\n  containers:\n  \
             - name: c\n    image: nginx:1.27\n"
        ),
    )
    .expect("write probe");
    let probe = probe.to_str().expect("utf-8 path");
    up.kubectl_ok(&["apply", "--validate=false", "-f", probe]);
    up.wait_for("the probe to be refused by the cordon", || {
        let reason = up.kubectl_ok(&[
            "get",
            "pod",
            "cordon-probe",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}",
        ]);
        (reason == "Unschedulable").then_some(())
    });
    up.kubectl_ok(&["delete", "pod", "cordon-probe", "--timeout=60s"]);
    let on_cordoned = |pods: &[PodRow]| -> BTreeSet<String> {
        pods.iter()
            .filter(|p| p.node == cordoned)
            .map(|p| p.name.clone())
            .collect()
    };
    let before = on_cordoned(&up.pods(workload.selector));
    up.kubectl_ok(&["scale", workload.resource, "--replicas=7"]);
    let pods = up.wait_running(workload.selector, 7);
    let after = on_cordoned(&pods);
    assert!(
        after.is_subset(&before),
        "no new pod lands on the cordoned {cordoned}: before {before:?}, after {after:?}"
    );
    let ips: BTreeSet<&str> = pods.iter().map(|p| p.ip.as_str()).collect();
    assert_eq!(ips.len(), 7, "distinct IPs: {pods:?}");

    // SIGTERM stops gracefully.
    let state: BTreeMap<String, PodRow> = pods.into_iter().map(|p| (p.name.clone(), p)).collect();
    let status = up.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );

    // Restart on the same data directory: same nodes (still cordoned), same pods, same IPs.
    let up = Up::start(&data, dir.path().join("up-2.log"));
    up.wait_nodes_ready();
    let unschedulable = up.kubectl_ok(&[
        "get",
        "node",
        cordoned,
        "-o",
        "jsonpath={.spec.unschedulable}",
    ]);
    assert_eq!(unschedulable, "true", "the cordon survives the restart");
    let replicas = up.kubectl_ok(&["get", workload.resource, "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(replicas, "7");
    let resumed: BTreeMap<String, PodRow> = up
        .wait_running(workload.selector, 7)
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect();
    assert_eq!(resumed, state, "the pods, their nodes and IPs are kept");

    // The resumed cluster keeps working, and a new pod does not reuse a kept IP.
    up.kubectl_ok(&["uncordon", cordoned]);
    up.kubectl_ok(&["scale", workload.resource, "--replicas=8"]);
    let pods = up.wait_running(workload.selector, 8);
    let ips: BTreeSet<&str> = pods.iter().map(|p| p.ip.as_str()).collect();
    assert_eq!(ips.len(), 8, "distinct IPs after the restart: {pods:?}");

    // Deleting the workload takes its pods with it, through the garbage collector.
    if has_controller("garbage-collector-controller") {
        up.kubectl_ok(&["delete", workload.resource, "--timeout=60s"]);
        up.wait_for("the garbage collector to delete the pods", || {
            up.pods(workload.selector).is_empty().then_some(())
        });
    }

    let status = up.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );
}
