//! The sample-controller's acceptance on `kcm up`, driven by the installed `kubectl` as its README does: apply the Foo CRD and a Foo (a Deployment owned by the Foo, its pod Ready, `availableReplicas` 1), edit to 3 replicas, `kubectl scale` the Foo, a Deployment of the Foo's name that it does not control (event `ErrResourceExists`, untouched), delete the Foo (its Deployment and pods go). The controller runs in-process; `kcm up` is the real binary. Runs on SQLite and on etcd; skipped (with a note) when `kubectl` (or, for the etcd run, `etcd`) is not installed.

mod kcm_up;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kcm_up::{Backend, Up, etcd_or_skip, kubectl_installed};
use tokio_util::sync::CancellationToken;

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

/// The sample-controller's queries; waits yield to the runtime the controller runs on.
impl Up {
    /// Polls `f` every 200 ms until it answers, or fails after [`DEADLINE`].
    async fn wait_async<T>(&self, what: &str, f: impl FnMut(&Self) -> Option<T>) -> T {
        self.wait_within_async(DEADLINE, what, f).await
    }

    /// Polls `f` every 200 ms until it answers, or fails after `deadline`.
    async fn wait_within_async<T>(
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
            assert!(
                started.elapsed() < deadline,
                "timed out waiting for {what}\n{}",
                self.logs()
            );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_controller_on_kcm_up_sqlite() {
    if kubectl_installed() {
        sample_controller_on_kcm_up(&Backend::sqlite()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_controller_on_kcm_up_etcd() {
    if let Some(etcd) = etcd_or_skip() {
        sample_controller_on_kcm_up(&etcd).await;
    }
}

/// The sample-controller's README, step by step.
async fn sample_controller_on_kcm_up(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = Up::start(backend, &dir.path().join("data"), &[], "warn");
    let crd = artifact("crd.yaml");
    up.kubectl_ok(&["apply", "-f", crd.to_str().expect("path")]);
    up.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/foos.samplecontroller.k8s.io",
        "--timeout=20s",
    ]);

    let client = up.client().await;
    let cancel = CancellationToken::new();
    let controller = tokio::spawn(sample_controller::run(client, 2, cancel.clone()));

    // A Foo with 1 replica: its Deployment, owned by the Foo, one Ready pod, status 1.
    let example = artifact("example-foo.yaml");
    up.kubectl_ok(&["apply", "-f", example.to_str().expect("path")]);
    let deployment = up
        .wait_async("the Foo's Deployment", |up| {
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
    up.wait_async("1 Ready pod", |up| {
        (up.ready_pods(selector) == 1).then_some(())
    })
    .await;
    let available = |up: &Up, n: i64| {
        up.json(&["get", "foo", "example-foo"])
            .filter(|f| f["status"]["availableReplicas"] == n)
            .map(drop)
    };
    up.wait_async("availableReplicas 1", |up| available(up, 1))
        .await;
    let table = up.kubectl_ok(&["get", "foo", "example-foo"]);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(3) == Some("1")),
        "{table}"
    );

    // Edit to 3: 3 Ready pods and status 3.
    up.kubectl_ok(&[
        "patch",
        "foo",
        "example-foo",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    up.wait_async("3 Ready pods", |up| {
        (up.ready_pods(selector) == 3).then_some(())
    })
    .await;
    up.wait_async("availableReplicas 3", |up| available(up, 3))
        .await;

    // kubectl scale through the Foo's scale subresource.
    up.kubectl_ok(&["scale", "foo/example-foo", "--replicas=2"]);
    up.wait_async("the Deployment scaled to 2", |up| {
        up.json(&["get", "deployment", "example-foo"])
            .filter(|d| d["spec"]["replicas"] == 2)
            .map(drop)
    })
    .await;

    // A Deployment of the Foo's name it does not control: an event, the Deployment untouched.
    up.kubectl_ok(&["create", "deployment", "taken", "--image=nginx"]);
    let taken = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: taken\nspec:\n  deploymentName: taken\n  replicas: 2\n";
    let taken_path = dir.path().join("taken.yaml");
    std::fs::write(&taken_path, taken).expect("write");
    up.kubectl_ok(&["apply", "-f", taken_path.to_str().expect("path")]);
    let event = up
        .wait_async("ErrResourceExists", |up| {
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
    up.kubectl_ok(&["delete", "foo", "example-foo"]);
    up.wait_within_async(GC_DEADLINE, "the Deployment and pods gone", |up| {
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
