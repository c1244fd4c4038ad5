//! The sample-controller's acceptance on `kcm up`, driven by the installed `kubectl` as its README does: apply the Foo CRD and a Foo (a Deployment owned by the Foo, its pod Ready, `availableReplicas` 1), edit to 3 replicas, `kubectl scale` the Foo, a Deployment of the Foo's name that it does not control (event `ErrResourceExists`, untouched), delete the Foo (its Deployment and pods go). The controller runs in-process; `kcm up` is the real binary. Skipped (with a note) when `kubectl` is not installed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

const KCM: &str = env!("CARGO_BIN_EXE_kcm");
/// The longest any single wait may take (a failure bound; most waits take a second or two).
const DEADLINE: Duration = Duration::from_secs(45);
/// The bound on the cascade after deleting the Foo: the garbage collector monitors Foos only
/// after its next discovery resync (every 30 s, as upstream), which may come that late.
const GC_DEADLINE: Duration = Duration::from_secs(75);

fn artifact(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/sample-controller/artifacts/examples")
        .join(name)
}

/// A running `kcm up`, killed when dropped.
struct Up {
    child: Child,
    kubeconfig: PathBuf,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Up {
    fn start(data_dir: &Path) -> Self {
        let child = Command::new(KCM)
            .args([
                "up",
                "--listen",
                "127.0.0.1:0",
                "--pod-ready-delay",
                "200ms",
            ])
            .arg("--data-dir")
            .arg(data_dir)
            .env("KCM_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kcm up");
        // Owned by `Up` at once, so a failed start still kills and reaps the process.
        let mut up = Up {
            child,
            kubeconfig: PathBuf::new(),
        };
        let stdout = up.child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let started = Instant::now();
        loop {
            let line = rx
                .recv_timeout(DEADLINE.saturating_sub(started.elapsed()))
                .expect("kcm up printed its kubeconfig");
            if let Some(path) = line.trim().strip_prefix("kubeconfig: ") {
                up.kubeconfig = PathBuf::from(path);
                return up;
            }
        }
    }

    fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--request-timeout", "20s"])
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("run kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.kubectl(args);
        assert!(ok, "kubectl {args:?}: {stderr}");
        stdout
    }

    fn json(&self, args: &[&str]) -> Option<Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let (ok, stdout, _) = self.kubectl(&all);
        ok.then(|| serde_json::from_str(&stdout).ok()).flatten()
    }

    /// Polls `f` every 200 ms until it answers, or fails after [`DEADLINE`].
    async fn wait_for<T>(&self, what: &str, f: impl FnMut(&Self) -> Option<T>) -> T {
        self.wait_within(DEADLINE, what, f).await
    }

    /// Polls `f` every 200 ms until it answers, or fails after `deadline`.
    async fn wait_within<T>(
        &self,
        deadline: Duration,
        what: &str,
        mut f: impl FnMut(&Self) -> Option<T>,
    ) -> T {
        let started = Instant::now();
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(started.elapsed() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// How many pods selected by `selector` are Ready.
    fn ready_pods(&self, selector: &str) -> usize {
        self.json(&["get", "pods", "-l", selector])
            .and_then(|list| list["items"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|p| {
                p["metadata"]["deletionTimestamp"].is_null()
                    && p["status"]["conditions"].as_array().is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
            .count()
    }
}

fn kubectl_installed() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_controller_on_kcm_up() {
    if !kubectl_installed() {
        eprintln!("kubectl is not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let up = Up::start(&dir.path().join("data"));
    let crd = artifact("crd.yaml");
    up.ok(&["apply", "-f", crd.to_str().expect("path")]);
    up.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/foos.samplecontroller.k8s.io",
        "--timeout=20s",
    ]);

    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&up.kubeconfig).expect("kubeconfig"),
        &Default::default(),
    )
    .await
    .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let cancel = CancellationToken::new();
    let controller = tokio::spawn(sample_controller::run(client, 2, cancel.clone()));

    // A Foo with 1 replica: its Deployment, owned by the Foo, one Ready pod, status 1.
    let foo = artifact("example-foo.yaml");
    up.ok(&["apply", "-f", foo.to_str().expect("path")]);
    let deployment = up
        .wait_for("the Foo's Deployment", |up| {
            up.json(&["get", "deployment", "example-foo"])
        })
        .await;
    let owner = &deployment["metadata"]["ownerReferences"][0];
    assert_eq!(
        (
            owner["kind"].as_str(),
            owner["name"].as_str(),
            owner["controller"].as_bool()
        ),
        (Some("Foo"), Some("example-foo"), Some(true))
    );
    let selector = "app=nginx,controller=example-foo";
    up.wait_for("1 Ready pod", |up| {
        (up.ready_pods(selector) == 1).then_some(())
    })
    .await;
    let available = |up: &Up, n: i64| {
        up.json(&["get", "foo", "example-foo"])
            .filter(|f| f["status"]["availableReplicas"] == n)
            .map(drop)
    };
    up.wait_for("availableReplicas 1", |up| available(up, 1))
        .await;
    let table = up.ok(&["get", "foo", "example-foo"]);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(3) == Some("1")),
        "{table}"
    );

    // Edit to 3: 3 Ready pods and status 3.
    up.ok(&[
        "patch",
        "foo",
        "example-foo",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    up.wait_for("3 Ready pods", |up| {
        (up.ready_pods(selector) == 3).then_some(())
    })
    .await;
    up.wait_for("availableReplicas 3", |up| available(up, 3))
        .await;

    // kubectl scale through the Foo's scale subresource.
    up.ok(&["scale", "foo/example-foo", "--replicas=2"]);
    up.wait_for("the Deployment scaled to 2", |up| {
        up.json(&["get", "deployment", "example-foo"])
            .filter(|d| d["spec"]["replicas"] == 2)
            .map(drop)
    })
    .await;

    // A Deployment of the Foo's name it does not control: an event, the Deployment untouched.
    up.ok(&["create", "deployment", "taken", "--image=nginx"]);
    let taken = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: taken\nspec:\n  deploymentName: taken\n  replicas: 2\n";
    let taken_path = dir.path().join("taken.yaml");
    std::fs::write(&taken_path, taken).expect("write");
    up.ok(&["apply", "-f", taken_path.to_str().expect("path")]);
    let event = up
        .wait_for("ErrResourceExists", |up| {
            up.json(&[
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=taken,involvedObject.kind=Foo",
            ])
            .and_then(|l| l["items"].as_array().and_then(|i| i.first().cloned()))
        })
        .await;
    assert_eq!(event["reason"], "ErrResourceExists");
    assert_eq!(
        event["message"],
        "Resource \"taken\" already exists and is not managed by Foo"
    );
    let untouched = up.json(&["get", "deployment", "taken"]).expect("taken");
    assert_eq!(untouched["spec"]["replicas"], 1);
    assert!(untouched["metadata"]["ownerReferences"].is_null());

    // Deleting the Foo deletes its Deployment and pods (the garbage collector).
    up.ok(&["delete", "foo", "example-foo"]);
    up.wait_within(GC_DEADLINE, "the Deployment and pods gone", |up| {
        let deployment_gone = !up.kubectl(&["get", "deployment", "example-foo"]).0;
        let pods = up
            .json(&["get", "pods", "-l", selector])
            .and_then(|l| l["items"].as_array().map(Vec::len))
            .unwrap_or(1);
        (deployment_gone && pods == 0).then_some(())
    })
    .await;

    cancel.cancel();
    controller.await.expect("the controller stops on cancel");
}
