//! Observing and autoscaling simulated pods on `kcm up`, driven by the installed `kubectl` as a
//! user would: `kubectl top nodes` and `kubectl top pods [--containers]` print the simulator's
//! usage model, and `kubectl autoscale deploy web --cpu-percent=50` on pods using 150 % of
//! their CPU request scales the Deployment up to the computed count, then — once the pods'
//! usage drops — back down, but only after the downscale stabilization window (10 s here,
//! through `kcm up`'s flag; the sync period is 1 s); `kubectl logs -f` follows a simulated
//! container's lines and ends when its pod is deleted. Skipped (with a note) when `kubectl` is
//! missing.

mod kcm_up;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kcm_up::{Backend, DEADLINE, Up};

/// Flags that make the HPA act within the test: 1 s syncs, a 10 s downscale window, no CPU
/// initialization period.
const HPA_FLAGS: &[&str] = &[
    "--horizontal-pod-autoscaler-sync-period",
    "1s",
    "--horizontal-pod-autoscaler-downscale-stabilization",
    "10s",
    "--horizontal-pod-autoscaler-cpu-initialization-period",
    "0s",
];

/// The autoscaling test's own queries.
impl Up {
    fn replicas(&self, deploy: &str) -> i64 {
        self.kubectl_ok(&["get", "deploy", deploy, "-o", "jsonpath={.spec.replicas}"])
            .trim()
            .parse()
            .unwrap_or(-1)
    }

    /// The messages of the `SuccessfulRescale` events about HPA `name`, oldest first.
    fn rescales(&self, name: &str) -> Vec<String> {
        let out = self.kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            &format!("reason=SuccessfulRescale,involvedObject.name={name}"),
            "--sort-by=.metadata.creationTimestamp",
            "-o",
            "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
        ]);
        out.lines()
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect()
    }
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        sim.kcm.io/cpu-usage: \"150%\"
    spec:
      containers:
      - name: nginx
        image: nginx
        resources:
          requests: {cpu: 200m, memory: 128Mi}
";

kcm_up::on_each_backend!(
    top_and_autoscale_on_kcm_up_driven_by_kubectl:
        top_and_autoscale_on_kcm_up_driven_by_kubectl_sqlite,
        top_and_autoscale_on_kcm_up_driven_by_kubectl_etcd
);

fn top_and_autoscale_on_kcm_up_driven_by_kubectl(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = Up::start(
        backend,
        dir.path(),
        HPA_FLAGS,
        "info,kcm_controllers::podautoscaler=debug",
    );

    // kubectl top nodes: every node, with CPU and memory (the system overhead at least).
    let nodes = up.wait_for("kubectl top nodes", || {
        let (ok, out, _) = up.kubectl(&["top", "nodes", "--no-headers"]);
        (ok && out.lines().count() == 3).then_some(out)
    });
    for line in nodes.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols.len(), 5, "{line}");
        assert!(cols[0].starts_with("kcm-node-"), "{line}");
        assert!(cols[1].ends_with('m') && cols[3].ends_with("Mi"), "{line}");
    }

    let manifest = dir.path().join("web.yaml");
    std::fs::write(&manifest, DEPLOYMENT).expect("manifest");
    up.kubectl_ok(&["apply", "-f", manifest.to_str().expect("utf-8 path")]);

    // kubectl top pods [--containers]: 150 % of a 200m request, a quarter of 128Mi.
    let top = up.wait_for("the pod's metrics", || {
        let (ok, out, _) = up.kubectl(&["top", "pods", "--no-headers"]);
        (ok && out.lines().count() == 1).then_some(out)
    });
    let cols: Vec<&str> = top.split_whitespace().collect();
    assert_eq!(&cols[1..], ["300m", "32Mi"], "{top}");
    let containers = up.kubectl_ok(&["top", "pods", "--containers", "--no-headers"]);
    let cols: Vec<&str> = containers.split_whitespace().collect();
    assert_eq!(&cols[1..], ["nginx", "300m", "32Mi"], "{containers}");

    // Utilization 150 % against a 50 % target: ratio 3, one pod -> 3 replicas (max 3 keeps
    // it there while every pod stays at 150 %).
    up.kubectl_ok(&[
        "autoscale",
        "deploy",
        "web",
        "--cpu-percent=50",
        "--min=1",
        "--max=3",
    ]);
    up.wait_for("the scale-up to 3", || {
        (up.replicas("web") == 3).then_some(())
    });
    // Events are written asynchronously, after the scale.
    let rescales = up.wait_for("the SuccessfulRescale event", || {
        Some(up.rescales("web")).filter(|r| !r.is_empty())
    });
    assert_eq!(
        rescales,
        ["New size: 3; reason: cpu resource utilization (percentage of request) above target"]
    );
    up.wait_for("three running pods", || {
        let out = up.kubectl_ok(&["get", "pods", "-l", "app=web", "--no-headers"]);
        (out.lines().filter(|l| l.contains("Running")).count() == 3).then_some(())
    });
    let hpa = up.wait_for("the HPA's status", || {
        let out = up.kubectl_ok(&["get", "hpa", "web", "--no-headers"]);
        out.contains("cpu: 150%/50%").then_some(out)
    });
    assert!(hpa.split_whitespace().any(|c| c == "3"), "{hpa}");

    // Usage drops to 10 %: the HPA wants 1 replica, but waits out the 10 s window.
    up.kubectl_ok(&[
        "annotate",
        "pods",
        "-l",
        "app=web",
        "sim.kcm.io/cpu-usage=10%",
        "--overwrite",
    ]);
    // The HPA sees the low usage but holds 3 replicas inside the window: one read of its
    // status shows both (no timing assumption about when its last high recommendation was).
    let held = up.wait_for("the HPA holding the scale-down in its window", || {
        let out = up.kubectl_ok(&[
            "get",
            "hpa",
            "web",
            "-o",
            "jsonpath={.status.desiredReplicas} {.status.conditions[?(@.type==\"AbleToScale\")].reason}",
        ]);
        out.ends_with("ScaleDownStabilized").then_some(out)
    });
    assert_eq!(held, "3 ScaleDownStabilized");
    up.wait_for("the scale-down to 1", || {
        (up.replicas("web") == 1).then_some(())
    });
    let rescales = up.wait_for("the scale-down event", || {
        Some(up.rescales("web")).filter(|r| r.len() == 2)
    });
    assert_eq!(rescales[1], "New size: 1; reason: All metrics below target");
    let described = up.kubectl_ok(&["describe", "hpa", "web"]);
    assert!(described.contains("ValidMetricFound"), "{described}");

    // kubectl logs -f follows a simulated container and ends when its pod is deleted.
    up.kubectl_ok(&[
        "run",
        "logger",
        "--image=busybox",
        "--annotations=sim.kcm.io/log-line=tick {n}",
        "--annotations=sim.kcm.io/log-interval=200ms",
    ]);
    up.wait_for("the logger's first tick", || {
        let (ok, out, _) = up.kubectl(&["logs", "logger"]);
        (ok && out.contains("tick 1")).then_some(())
    });
    let mut follow = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&up.kubeconfig)
        .args(["logs", "-f", "logger"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl logs -f");
    let stdout = follow.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let first_tick = loop {
        let line = rx
            .recv_timeout(DEADLINE)
            .expect("a line from kubectl logs -f");
        if let Some(n) = line.strip_prefix("tick ") {
            let n: u64 = n.parse().expect("tick number");
            seen.push(line);
            break n;
        }
        seen.push(line);
    };
    // A line written after the follow started arrives through the stream.
    let later = rx.recv_timeout(DEADLINE).expect("a streamed line");
    assert_eq!(later, format!("tick {}", first_tick + 1), "{seen:?}");
    assert!(
        seen[0].starts_with("[kcm-sim] started container logger"),
        "{seen:?}"
    );

    up.kubectl_ok(&["delete", "pod", "logger", "--wait=false"]);
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = follow.try_wait().expect("kubectl logs -f") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl logs -f did not end after the pod was deleted"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "kubectl logs -f: {status}");
}
