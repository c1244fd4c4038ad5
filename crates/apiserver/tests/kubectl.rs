//! End to end: the installed `kubectl` against an in-process API server, verb by verb, checking the output text and the resulting objects.
//!
//! Each test starts its own server on `127.0.0.1:0` and runs `kubectl --kubeconfig` with the
//! kubeconfig the server wrote and a private discovery cache. kubectl runs with its defaults
//! (notably `--validate=strict`, which needs the OpenAPI v3 documents). No controllers run:
//! where a verb waits for one (`rollout status`, `wait`), the test plays the controller by
//! writing the status the controller would. Skipped, with a message, when `kubectl` is not
//! installed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Every test body runs under this timeout.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Whether `kubectl` can be run; prints why a test is skipped when not.
fn kubectl_installed() -> bool {
    let ok = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("kubectl is not installed; skipping the kubectl end-to-end test");
    }
    ok
}

/// A server and a kubectl configured for it.
struct Env {
    server: TestServer,
    /// Manifests, the editor script and kubectl's cache live here.
    dir: tempfile::TempDir,
}

/// What one kubectl run printed.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Env {
    async fn start() -> Self {
        Self {
            server: TestServer::start().await,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn kubeconfig(&self) -> &Path {
        self.server.kubeconfig_path()
    }

    fn client(&self) -> kube::Client {
        self.server.client()
    }

    /// Writes a file into the test's directory and returns its path.
    fn file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).expect("write file");
        path
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(["--request-timeout", "30s"])
            .args(args)
            .env_remove("KUBECONFIG")
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl with `envs` and `stdin`.
    async fn run_with(&self, args: &[&str], envs: &[(&str, &Path)], stdin: Option<&str>) -> Run {
        let mut cmd = self.command(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kubectl");
        if let Some(input) = stdin {
            use tokio::io::AsyncWriteExt;
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(input.as_bytes()).await.expect("write stdin");
            drop(pipe);
        }
        let out = child.wait_with_output().await.expect("kubectl output");
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, &[], None).await
    }

    /// Runs kubectl, which must succeed; returns its stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let run = self.run(args).await;
        assert!(
            run.ok,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            run.stdout, run.stderr
        );
        run.stdout
    }

    /// Runs kubectl, which must fail; returns its stderr.
    async fn fails(&self, args: &[&str]) -> String {
        let run = self.run(args).await;
        assert!(!run.ok, "kubectl {args:?} succeeded:\n{}", run.stdout);
        run.stderr
    }

    /// Runs kubectl with a manifest on stdin (`-f -`), which must succeed.
    async fn ok_stdin(&self, args: &[&str], manifest: &str) -> String {
        let run = self.run_with(args, &[], Some(manifest)).await;
        assert!(
            run.ok,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            run.stdout, run.stderr
        );
        run.stdout
    }

    /// `kubectl get ... -o json` parsed.
    async fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all).await).expect("kubectl printed JSON")
    }

    /// Creates a node and binds `pods` (in `default`) to it through pods/binding.
    async fn bind(&self, node: &str, pods: &[&str]) {
        let nodes: Api<Node> = Api::all(self.client());
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": node}})).expect("node"),
            )
            .await
            .expect("create node");
        for pod in pods {
            let body = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
            let (code, status) = send(
                &self.client(),
                "POST",
                &format!("/api/v1/namespaces/default/pods/{pod}/binding"),
                body,
            )
            .await;
            assert_eq!(code, 201, "binding {pod}: {status}");
        }
    }
}

/// Sends a JSON request; returns the status code and body.
async fn send(client: &kube::Client, method: &str, path: &str, body: Value) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&body).expect("json"),
        ))
        .expect("request");
    let response = client.send(request).await.expect("response");
    let code = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await.expect("body");
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// The whitespace-separated words of the first line of a table.
fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect()
}

/// The first cells of every row after the header.
fn names(table: &str) -> Vec<&str> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

async fn timed<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test timed out")
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: nginx
    image: nginx:1.27
";

fn deployment(replicas: u32, image: &str, extra: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: {replicas}
{extra}  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: {image}
      - name: sidecar
        image: busybox:1.36
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_prints_tables_formats_and_follows_selectors() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let (_, stderr) = {
            let run = env.run(&["get", "pods"]).await;
            assert!(run.ok, "{}", run.stderr);
            (run.stdout, run.stderr)
        };
        assert!(stderr.contains("No resources found in default namespace."), "{stderr}");

        env.ok_stdin(&["create", "-f", "-"], POD).await;
        env.ok(&["create", "namespace", "other"]).await;
        env.ok(&["run", "db", "-n", "other", "--image=postgres:16", "--labels=app=db"])
            .await;
        env.bind("node-1", &["web"]).await;

        let table = env.ok(&["get", "pods"]).await;
        assert_eq!(header(&table), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], "{table}");
        assert_eq!(names(&table), ["web"]);
        assert!(table.lines().nth(1).unwrap_or("").contains("0/1"), "{table}");
        let wide = env.ok(&["get", "pods", "-o", "wide"]).await;
        assert_eq!(
            header(&wide),
            ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"],
            "{wide}"
        );
        assert!(wide.contains("node-1"), "{wide}");
        let all = env.ok(&["get", "pods", "-A"]).await;
        assert_eq!(header(&all)[..2], ["NAMESPACE", "NAME"], "{all}");
        assert_eq!(names(&all), ["default", "other"], "{all}");

        let yaml = env.ok(&["get", "pod", "web", "-o", "yaml"]).await;
        let parsed: Value = serde_saphyr::from_str(&yaml).expect("yaml");
        assert_eq!(parsed["spec"]["nodeName"], "node-1");
        assert_eq!(parsed["kind"], "Pod");
        let list = env.json(&["get", "pods", "-A"]).await;
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
        let jsonpath = env
            .ok(&["get", "pods", "-A", "-o", "jsonpath={.items[*].metadata.name}"])
            .await;
        assert_eq!(jsonpath, "web db");
        let by_label = env.ok(&["get", "pods", "-A", "-l", "app=db", "-o", "name"]).await;
        assert_eq!(by_label.trim(), "pod/db");
        let by_field = env
            .ok(&["get", "pods", "-A", "--field-selector", "spec.nodeName=node-1", "-o", "name"])
            .await;
        assert_eq!(by_field.trim(), "pod/web");
        let by_both = env
            .ok(&["get", "pods", "-A", "-l", "app", "--field-selector", "metadata.namespace!=default", "-o", "name"])
            .await;
        assert_eq!(by_both.trim(), "pod/db");

        // Other kinds print upstream's columns.
        env.ok(&["create", "deployment", "api", "--image=nginx:1.27", "--replicas=2"])
            .await;
        let cases: [(&[&str], &[&str]); 6] = [
            (&["get", "deployments"], &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]),
            (&["get", "rs"], &["NAME", "DESIRED", "CURRENT", "READY", "AGE"]),
            (&["get", "nodes"], &["NAME", "STATUS", "ROLES", "AGE", "VERSION"]),
            (&["get", "namespaces"], &["NAME", "STATUS", "AGE"]),
            (&["get", "configmaps", "-A"], &["NAMESPACE", "NAME", "DATA", "AGE"]),
            (&["get", "deploy", "-o", "wide"], &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]),
        ];
        let rs: Api<ReplicaSet> = Api::namespaced(env.client(), "default");
        rs.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "api-1"}, "spec": {"replicas": 2,
                "selector": {"matchLabels": {"app": "api"}},
                "template": {"metadata": {"labels": {"app": "api"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
            .expect("rs"),
        )
        .await
        .expect("create rs");
        for (args, want) in cases {
            let out = env.ok(args).await;
            // An empty table prints only "No resources found" on stderr.
            if !out.is_empty() {
                assert_eq!(header(&out), want, "kubectl {args:?}:\n{out}");
            }
        }
        let rs_table = env.ok(&["get", "rs"]).await;
        assert!(
            rs_table.lines().nth(1).unwrap_or("").split_whitespace().collect::<Vec<_>>()[..4]
                == ["api-1", "2", "0", "0"],
            "{rs_table}"
        );
        let nodes = env.ok(&["get", "nodes"]).await;
        assert!(nodes.contains("node-1"), "{nodes}");

        // A watch prints the current rows, then one row per event, until its timeout.
        let mut watch = env
            .command(&["get", "pods", "-w", "--output-watch-events", "--request-timeout=20s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn watch");
        let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await.expect("watch output") {
            let done = line.contains("web");
            seen.push(line);
            if done {
                break;
            }
        }
        assert_eq!(header(&seen[0]), ["EVENT", "NAME", "READY", "STATUS", "RESTARTS", "AGE"], "{seen:?}");
        assert!(seen[1].starts_with("ADDED"), "{seen:?}");
        env.ok(&["label", "pod", "web", "tier=frontend"]).await;
        let modified = lines.next_line().await.expect("watch output").unwrap_or_default();
        assert!(modified.starts_with("MODIFIED") && modified.contains("web"), "{modified}");
        watch.kill().await.expect("stop watch");
        let short = env.run(&["get", "pods", "-w", "--request-timeout=1s"]).await;
        assert!(short.ok, "a watch ends at its request timeout: {}", short.stderr);
        assert_eq!(names(&short.stdout), ["web"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_create_replace_edit_and_patch_with_strict_validation() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
        let manifest = env.file("web.yaml", &deployment(1, "nginx:1.27", ""));
        let manifest = manifest.to_str().expect("utf-8");

        // Client-side apply: create, then a strategic-merge update.
        assert_eq!(env.ok(&["apply", "-f", manifest]).await.trim(), "deployment.apps/web created");
        assert_eq!(env.ok(&["apply", "-f", manifest]).await.trim(), "deployment.apps/web unchanged");
        // A container someone else added survives the next apply: kubectl's three-way patch
        // merges containers by name (from the OpenAPI document's patch extensions).
        env.ok(&["patch", "deployment", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"injected","image":"envoy:1"}]}}}}"#])
            .await;
        env.file("web.yaml", &deployment(3, "nginx:1.28", ""));
        let run = env.run(&["apply", "-f", manifest, "-v=8"]).await;
        assert!(run.ok, "{}", run.stderr);
        assert_eq!(run.stdout.trim(), "deployment.apps/web configured");
        let patch_line = run
            .stderr
            .lines()
            .find(|l| l.contains("Request Body") && l.contains("$setElementOrder/containers"))
            .unwrap_or_else(|| panic!("no strategic merge patch in:\n{}", run.stderr));
        assert!(patch_line.contains("nginx:1.28"), "{patch_line}");
        assert!(run.stderr.contains("Content-Type: application/strategic-merge-patch+json"));
        let web = deployments.get("web").await.expect("get");
        let spec = web.spec.expect("spec");
        assert_eq!(spec.replicas, Some(3));
        let images: Vec<_> = spec.template.spec.expect("pod spec").containers.into_iter().map(|c| c.image.unwrap_or_default()).collect();
        // Upstream's order: the patch's new item first, then the applied order.
        assert_eq!(images, ["envoy:1", "nginx:1.28", "busybox:1.36"]);
        assert_eq!(web.metadata.generation, Some(3));

        // Unknown fields: refused under the default --validate=strict, warned under warn.
        let bad = env.file("bad.yaml", &deployment(3, "nginx:1.28", "  replicaz: 2\n"));
        let bad = bad.to_str().expect("utf-8");
        let err = env.fails(&["apply", "-f", bad]).await;
        assert!(err.contains(r#"strict decoding error: unknown field "spec.replicaz""#), "{err}");
        let err = env.fails(&["create", "-f", bad]).await;
        assert!(
            err.contains(r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.replicaz""#),
            "{err}"
        );
        let run = env.run(&["replace", "-f", bad, "--validate=warn"]).await;
        assert!(run.ok, "{}", run.stderr);
        assert!(run.stderr.contains(r#"Warning: unknown field "spec.replicaz""#), "{}", run.stderr);
        assert_eq!(run.stdout.trim(), "deployment.apps/web replaced");

        // create -f, then replace -f with a change.
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: blue\n";
        assert_eq!(env.ok_stdin(&["create", "-f", "-"], cm).await.trim(), "configmap/settings created");
        let err = env.run_with(&["create", "-f", "-"], &[], Some(cm)).await;
        assert!(!err.ok && err.stderr.contains(r#"configmaps "settings" already exists"#), "{}", err.stderr);
        let replaced = env
            .ok_stdin(&["replace", "-f", "-"], &cm.replace("blue", "green"))
            .await;
        assert_eq!(replaced.trim(), "configmap/settings replaced");
        let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
        let settings = cms.get("settings").await.expect("get");
        assert_eq!(settings.data.and_then(|d| d.get("mode").cloned()).as_deref(), Some("green"));

        // edit with a non-interactive editor.
        let editor = env.file("editor.sh", "#!/bin/sh\nsed -i 's/mode: green/mode: red/' \"$1\"\n");
        let mut perms = std::fs::metadata(&editor).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&editor, perms).expect("chmod");
        let run = env.run_with(&["edit", "configmap", "settings"], &[("KUBE_EDITOR", &editor)], None).await;
        assert!(run.ok, "{}", run.stderr);
        assert_eq!(run.stdout.trim(), "configmap/settings edited");
        let settings = cms.get("settings").await.expect("get");
        assert_eq!(settings.data.and_then(|d| d.get("mode").cloned()).as_deref(), Some("red"));

        // patch: strategic (the default), merge, json.
        let out = env
            .ok(&["patch", "deployment", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.37"}]}}}}"#])
            .await;
        assert_eq!(out.trim(), "deployment.apps/web patched");
        env.ok(&["patch", "deployment", "web", "--type=merge", "-p", r#"{"metadata":{"labels":{"patched":"merge"}}}"#]).await;
        env.ok(&["patch", "deployment", "web", "--type=json", "-p", r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#]).await;
        let web = deployments.get("web").await.expect("get");
        let spec = web.spec.expect("spec");
        assert_eq!(spec.replicas, Some(4));
        let containers = spec.template.spec.expect("pod spec").containers;
        // (`replace` above put the manifest's two containers back.)
        assert_eq!(containers.len(), 2, "strategic merge kept the other container");
        assert_eq!(containers[1].image.as_deref(), Some("busybox:1.37"));
        assert_eq!(web.metadata.labels.and_then(|l| l.get("patched").cloned()).as_deref(), Some("merge"));
        let err = env.fails(&["patch", "deployment", "web", "--type=json", "-p", r#"[{"op":"test","path":"/spec/replicas","value":9}]"#]).await;
        assert!(err.contains("is invalid"), "{err}");

        // Server-side apply: create-or-merge with managedFields, conflicts, force.
        let ssa = env.file("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n  b: \"2\"\n");
        let ssa = ssa.to_str().expect("utf-8");
        assert_eq!(env.ok(&["apply", "--server-side", "-f", ssa]).await.trim(), "configmap/ssa serverside-applied");
        let managed = env.json(&["get", "configmap", "ssa", "--show-managed-fields"]).await;
        assert_eq!(managed["metadata"]["managedFields"][0]["manager"], "kubectl");
        assert_eq!(managed["metadata"]["managedFields"][0]["operation"], "Apply");
        assert_eq!(
            managed["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        env.ok(&["patch", "configmap", "ssa", "--type=merge", "-p", r#"{"data":{"a":"9"}}"#]).await;
        env.file("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n");
        let err = env.fails(&["apply", "--server-side", "-f", ssa]).await;
        assert!(
            err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.a"#),
            "{err}"
        );
        env.ok(&["apply", "--server-side", "--force-conflicts", "-f", ssa]).await;
        let ssa_cm = cms.get("ssa").await.expect("get");
        let data = ssa_cm.data.expect("data");
        assert_eq!(data.get("a").map(String::as_str), Some("1"));
        assert!(!data.contains_key("b"), "b was dropped from the configuration: {data:?}");

        // Moving from client-side to server-side apply takes the fields over without conflicts.
        let csa = env.file("csa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: csa\ndata:\n  a: \"1\"\n");
        let csa = csa.to_str().expect("utf-8");
        env.ok(&["apply", "-f", csa]).await;
        env.file("csa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: csa\ndata:\n  a: \"2\"\n");
        assert_eq!(env.ok(&["apply", "--server-side", "-f", csa]).await.trim(), "configmap/csa serverside-applied");
        let upgraded = cms.get("csa").await.expect("get");
        assert_eq!(upgraded.data.and_then(|d| d.get("a").cloned()).as_deref(), Some("2"));
        let last = upgraded.metadata.annotations.unwrap_or_default();
        assert!(
            last.get("kubectl.kubernetes.io/last-applied-configuration").is_some_and(|l| l.contains(r#""a":"2""#)),
            "{last:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_label_annotate_scale_set_image_and_rollout() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
        // Typed create subcommands send protobuf bodies.
        assert_eq!(env.ok(&["create", "namespace", "team"]).await.trim(), "namespace/team created");
        assert_eq!(
            env.ok(&["create", "configmap", "cfg", "-n", "team", "--from-literal=k=v"]).await.trim(),
            "configmap/cfg created"
        );
        assert_eq!(
            env.ok(&["create", "deployment", "web", "--image=nginx:1.26", "--replicas=2"]).await.trim(),
            "deployment.apps/web created"
        );
        let cfg: Api<ConfigMap> = Api::namespaced(env.client(), "team");
        assert_eq!(cfg.get("cfg").await.expect("cfg").data.and_then(|d| d.get("k").cloned()).as_deref(), Some("v"));

        assert_eq!(env.ok(&["label", "deploy", "web", "tier=frontend"]).await.trim(), "deployment.apps/web labeled");
        assert_eq!(env.ok(&["annotate", "deploy", "web", "owner=team-a"]).await.trim(), "deployment.apps/web annotated");
        let err = env.fails(&["label", "deploy", "web", "tier=backend"]).await;
        assert!(err.contains("already has a value (frontend)"), "{err}");
        env.ok(&["label", "deploy", "web", "tier=backend", "--overwrite"]).await;
        assert_eq!(env.ok(&["scale", "deploy/web", "--replicas=5"]).await.trim(), "deployment.apps/web scaled");
        assert_eq!(
            env.ok(&["set", "image", "deploy/web", "nginx=nginx:1.27"]).await.trim(),
            "deployment.apps/web image updated"
        );
        let web = deployments.get("web").await.expect("get");
        let labels = web.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("tier").map(String::as_str), Some("backend"));
        assert_eq!(web.metadata.annotations.clone().unwrap_or_default().get("owner").map(String::as_str), Some("team-a"));
        let spec = web.spec.clone().expect("spec");
        assert_eq!(spec.replicas, Some(5));
        assert_eq!(spec.template.spec.clone().expect("pod").containers[0].image.as_deref(), Some("nginx:1.27"));

        // pause / resume / restart.
        assert_eq!(env.ok(&["rollout", "pause", "deploy/web"]).await.trim(), "deployment.apps/web paused");
        assert_eq!(deployments.get("web").await.expect("get").spec.and_then(|s| s.paused), Some(true));
        let err = env.fails(&["rollout", "pause", "deploy/web"]).await;
        assert!(err.contains("already paused"), "{err}");
        assert_eq!(env.ok(&["rollout", "resume", "deploy/web"]).await.trim(), "deployment.apps/web resumed");
        assert_ne!(deployments.get("web").await.expect("get").spec.and_then(|s| s.paused), Some(true));
        assert_eq!(env.ok(&["rollout", "restart", "deploy/web"]).await.trim(), "deployment.apps/web restarted");
        let template_annotations = deployments
            .get("web")
            .await
            .expect("get")
            .spec
            .and_then(|s| s.template.metadata)
            .and_then(|m| m.annotations)
            .unwrap_or_default();
        assert!(template_annotations.contains_key("kubectl.kubernetes.io/restartedAt"), "{template_annotations:?}");

        // history / undo, with the ReplicaSets the Deployment controller would have made.
        let web = deployments.get("web").await.expect("get");
        let uid = web.metadata.uid.clone().expect("uid");
        let rs: Api<ReplicaSet> = Api::namespaced(env.client(), "default");
        for (revision, image) in [("1", "nginx:1.25"), ("2", "nginx:1.26")] {
            let hash = format!("h{revision}");
            rs.create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": format!("web-{hash}"), "labels": {"app": "web", "pod-template-hash": hash},
                        "annotations": {"deployment.kubernetes.io/revision": revision},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": uid, "controller": true}]},
                    "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web", "pod-template-hash": hash}},
                        "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": hash}},
                            "spec": {"containers": [{"name": "nginx", "image": image}]}}}
                }))
                .expect("rs"),
            )
            .await
            .expect("create rs");
        }
        let history = env.ok(&["rollout", "history", "deploy/web"]).await;
        let rows: Vec<Vec<&str>> = history.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0], ["deployment.apps/web"], "{history}");
        assert_eq!(rows[1], ["REVISION", "CHANGE-CAUSE"], "{history}");
        assert_eq!(rows[2], ["1", "<none>"], "{history}");
        assert_eq!(rows[3], ["2", "<none>"], "{history}");
        let one = env.ok(&["rollout", "history", "deploy/web", "--revision=1"]).await;
        assert!(one.contains("nginx:1.25"), "{one}");
        assert_eq!(
            env.ok(&["rollout", "undo", "deploy/web", "--to-revision=1"]).await.trim(),
            "deployment.apps/web rolled back"
        );
        let image = deployments.get("web").await.expect("get").spec.and_then(|s| s.template.spec).map(|s| s.containers[0].image.clone());
        assert_eq!(image, Some(Some("nginx:1.25".to_owned())));

        // status: waits for the controller; done once the status says so.
        let err = env.fails(&["rollout", "status", "deploy/web", "--timeout=1s"]).await;
        assert!(err.contains("timed out waiting for the condition"), "{err}");
        let web = deployments.get("web").await.expect("get");
        let generation = web.metadata.generation.expect("generation");
        deployments
            .patch_status(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"observedGeneration": generation, "replicas": 5,
                    "updatedReplicas": 5, "readyReplicas": 5, "availableReplicas": 5}})),
            )
            .await
            .expect("status");
        let status = env.ok(&["rollout", "status", "deploy/web", "--timeout=10s"]).await;
        assert_eq!(status.trim(), r#"deployment "web" successfully rolled out"#);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_lists_events_and_wait_sees_conditions() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        env.ok_stdin(&["create", "-f", "-"], POD).await;
        let pods: Api<Pod> = Api::namespaced(env.client(), "default");
        let uid = pods.get("web").await.expect("get").metadata.uid.expect("uid");
        let (code, event) = send(
            &env.client(),
            "POST",
            "/api/v1/namespaces/default/events",
            json!({"metadata": {"name": "web.1"}, "type": "Warning", "reason": "BackOff",
                "message": "Back-off pulling image \"nginx:1.27\"", "count": 3,
                "source": {"component": "kubelet"},
                "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z",
                "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "uid": uid, "apiVersion": "v1"}}),
        )
        .await;
        assert_eq!(code, 201, "{event}");
        let described = env.ok(&["describe", "pod", "web"]).await;
        assert!(described.starts_with("Name:"), "{described}");
        let events = described.split("Events:").nth(1).expect("an Events section");
        let row: Vec<&str> = events.lines().find(|l| l.contains("BackOff")).expect("the event").split_whitespace().collect();
        assert_eq!(row[..2], ["Warning", "BackOff"], "{events}");
        assert!(events.contains("(x3 over"), "{events}");
        assert!(events.contains("kubelet"), "{events}");
        let listed = env.ok(&["get", "events"]).await;
        assert_eq!(header(&listed), ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], "{listed}");
        assert!(listed.contains("pod/web"), "{listed}");

        // wait --for=condition: times out, then sees the condition the kubelet would set.
        let err = env.fails(&["wait", "--for=condition=Ready", "pod/web", "--timeout=1s"]).await;
        assert!(err.contains("timed out waiting for the condition"), "{err}");
        let waiter = env.run(&["wait", "--for=condition=Ready", "pod/web", "--timeout=20s"]);
        let setter = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            pods.patch_status(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
            )
            .await
            .expect("status");
        };
        let (run, ()) = tokio::join!(waiter, setter);
        assert!(run.ok, "{}", run.stderr);
        assert_eq!(run.stdout.trim(), "pod/web condition met");
        let jp = env.ok(&["wait", "--for=jsonpath={.status.phase}=Running", "pod/web", "--timeout=5s"]).await;
        assert_eq!(jp.trim(), "pod/web condition met");
        let deleting = env.run(&["wait", "--for=delete", "pod/web", "--timeout=20s"]);
        let deleter = async {
            // kubectl prints nothing when the pod is gone before its first read: give the
            // process time to start on a loaded machine.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            pods.delete("web", &Default::default()).await.expect("delete");
        };
        let (run, ()) = tokio::join!(deleting, deleter);
        assert!(run.ok, "{}", run.stderr);
        assert_eq!(run.stdout.trim(), "pod/web condition met");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_cascades_force_cordon_and_drain() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
        for name in ["bg", "fg", "orphan"] {
            env.ok(&["create", "deployment", name, "--image=nginx:1.27"])
                .await;
        }
        assert_eq!(
            env.ok(&["delete", "deploy", "bg", "--cascade=background"])
                .await
                .trim(),
            r#"deployment.apps "bg" deleted"#
        );
        assert!(deployments.get_opt("bg").await.expect("get").is_none());
        // Foreground and orphan deletions wait for the garbage collector (not running here):
        // the objects stay, marked with its finalizers.
        for (name, cascade, finalizer) in [
            ("fg", "foreground", "foregroundDeletion"),
            ("orphan", "orphan", "orphan"),
        ] {
            let out = env
                .ok(&[
                    "delete",
                    "deploy",
                    name,
                    &format!("--cascade={cascade}"),
                    "--wait=false",
                ])
                .await;
            assert_eq!(out.trim(), format!(r#"deployment.apps "{name}" deleted"#));
            let d = deployments.get(name).await.expect("still there");
            assert!(d.metadata.deletion_timestamp.is_some());
            assert_eq!(d.metadata.finalizers, Some(vec![finalizer.to_owned()]));
        }

        // Pods on a node: cordon, then drain evicts them.
        let pods: Api<Pod> = Api::namespaced(env.client(), "default");
        for name in ["a", "b", "c"] {
            env.ok_stdin(
                &["create", "-f", "-"],
                &POD.replace("name: web", &format!("name: {name}")),
            )
            .await;
        }
        env.bind("node-1", &["a", "b", "c"]).await;
        assert_eq!(
            env.ok(&["cordon", "node-1"]).await.trim(),
            "node/node-1 cordoned"
        );
        let nodes: Api<Node> = Api::all(env.client());
        assert_eq!(
            nodes
                .get("node-1")
                .await
                .expect("node")
                .spec
                .and_then(|s| s.unschedulable),
            Some(true)
        );
        let table = env.ok(&["get", "nodes"]).await;
        assert!(table.contains("SchedulingDisabled"), "{table}");

        // A bound pod is deleted gracefully (its kubelet would confirm); --force skips that.
        let forced = env
            .run(&["delete", "pod", "c", "--grace-period=0", "--force"])
            .await;
        assert!(forced.ok, "{}", forced.stderr);
        assert_eq!(forced.stdout.trim(), r#"pod "c" force deleted"#);
        assert!(
            forced
                .stderr
                .contains("Immediate deletion does not wait for confirmation"),
            "{}",
            forced.stderr
        );
        assert!(pods.get_opt("c").await.expect("get").is_none());

        let drain = env
            .run(&[
                "drain",
                "node-1",
                "--force",
                "--grace-period=0",
                "--timeout=30s",
            ])
            .await;
        assert!(drain.ok, "{}\n{}", drain.stdout, drain.stderr);
        assert!(
            drain.stdout.contains("node/node-1 already cordoned"),
            "{}",
            drain.stdout
        );
        assert!(
            drain.stdout.contains("pod/a evicted") && drain.stdout.contains("pod/b evicted"),
            "{}",
            drain.stdout
        );
        assert!(
            drain.stdout.trim_end().ends_with("node/node-1 drained"),
            "{}",
            drain.stdout
        );
        assert!(
            drain
                .stderr
                .contains("deleting Pods that declare no controller: default/a, default/b"),
            "{}",
            drain.stderr
        );
        assert!(pods.get_opt("a").await.expect("get").is_none());
        assert!(pods.get_opt("b").await.expect("get").is_none());
        assert_eq!(
            env.ok(&["uncordon", "node-1"]).await.trim(),
            "node/node-1 uncordoned"
        );

        // A namespace's deletion starts; finishing it (emptying it, then dropping the
        // `kubernetes` finalizer) is the namespace controller's job.
        env.ok(&["create", "namespace", "gone"]).await;
        assert_eq!(
            env.ok(&["delete", "namespace", "gone", "--wait=false"])
                .await
                .trim(),
            r#"namespace "gone" deleted"#
        );
        let namespaces: Api<Namespace> = Api::all(env.client());
        let ns = namespaces.get("gone").await.expect("terminating");
        assert_eq!(
            ns.status.and_then(|s| s.phase).as_deref(),
            Some("Terminating")
        );
        let err = env.fails(&["create", "configmap", "x", "-n", "gone"]).await;
        assert!(err.contains("because it is being terminated"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_explain_and_top() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let resources = env.ok(&["api-resources"]).await;
        assert_eq!(
            header(&resources),
            ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
            "{resources}"
        );
        for row in [
            ["pods", "po", "v1", "true", "Pod"],
            ["deployments", "deploy", "apps/v1", "true", "Deployment"],
            ["replicasets", "rs", "apps/v1", "true", "ReplicaSet"],
            ["nodes", "no", "v1", "false", "Node"],
            ["namespaces", "ns", "v1", "false", "Namespace"],
            [
                "poddisruptionbudgets",
                "pdb",
                "policy/v1",
                "true",
                "PodDisruptionBudget",
            ],
        ] {
            assert!(
                resources
                    .lines()
                    .any(|l| l.split_whitespace().collect::<Vec<_>>() == row),
                "{row:?} in\n{resources}"
            );
        }
        let all = env
            .ok(&["api-resources", "--categories=all", "-o", "name"])
            .await;
        for name in ["pods", "deployments.apps", "replicasets.apps", "services"] {
            assert!(
                all.lines().any(|l| l == name),
                "{name} in category all:\n{all}"
            );
        }

        let explained = env.ok(&["explain", "deployment.spec.replicas"]).await;
        let lines: Vec<&str> = explained.lines().collect();
        assert_eq!(
            lines[..3],
            [
                "GROUP:      apps",
                "KIND:       Deployment",
                "VERSION:    v1"
            ],
            "{explained}"
        );
        assert!(
            explained.contains("FIELD: replicas <integer>"),
            "{explained}"
        );
        assert!(explained.contains("Number of desired pods."), "{explained}");
        let pod = env.ok(&["explain", "pods.spec.containers"]).await;
        assert!(pod.contains("FIELD: containers <[]Container>"), "{pod}");
        assert!(pod.contains("image\t<string>"), "{pod}");
        let err = env.fails(&["explain", "deployment.spec.nope"]).await;
        assert!(err.contains(r#"field "nope" does not exist"#), "{err}");

        // metrics.k8s.io is served, but a bare API server has no usage source (kcm up
        // registers the simulator's): 503, as the aggregator answers while metrics-server is
        // down.
        let err = env.fails(&["top", "pod"]).await;
        assert!(err.contains("the metrics API has no usage source"), "{err}");
        let err = env.fails(&["top", "node"]).await;
        assert!(err.contains("ServiceUnavailable"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_svc_shows_the_kubernetes_service_and_allocation_errors() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let port = env.server.server().addr().port();
        let table = env.ok(&["get", "svc"]).await;
        assert_eq!(
            header(&table),
            ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
            "{table}"
        );
        let row: Vec<&str> = table.lines().nth(1).unwrap_or("").split_whitespace().collect();
        assert_eq!(row[..5], ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"], "{table}");
        // The advertised address: the default route's, for a loopback listener.
        let advertised =
            kcm_apiserver::advertise::resolve_advertise_address(std::net::Ipv4Addr::LOCALHOST.into());
        let eps = env.ok(&["get", "endpoints", "kubernetes"]).await;
        assert!(eps.contains(&format!("{advertised}:{port}")), "{eps}");

        env.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080", "--clusterip=10.96.0.20"])
            .await;
        let err = env
            .fails(&["create", "service", "clusterip", "db", "--tcp=80:80", "--clusterip=10.96.0.20"])
            .await;
        assert!(
            err.contains("spec.clusterIPs: Invalid value: []string{\"10.96.0.20\"}: failed to allocate IP 10.96.0.20: provided IP is already allocated"),
            "{err}"
        );
        let err = env
            .fails(&["create", "service", "clusterip", "db", "--tcp=80:80", "--clusterip=1.1.1.1"])
            .await;
        assert!(
            err.contains("the provided IP (1.1.1.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"),
            "{err}"
        );
        env.server.shutdown().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Issue 17, part a: the core/v1, apps, batch, autoscaling, scheduling and node kinds added
// next to the first sixteen, one test per group, driving kubectl as a user does.
// ---------------------------------------------------------------------------------------

/// The cells of the table row whose first cell is `name`.
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&name))
        .unwrap_or_default()
}

const CORE_KINDS: &str = "apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-data
spec:
  capacity:
    storage: 5Gi
  accessModes: [ReadWriteOnce, ReadOnlyMany]
  storageClassName: manual
  hostPath:
    path: /mnt/data
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  resources:
    requests:
      storage: 1Gi
---
apiVersion: v1
kind: ResourceQuota
metadata:
  name: compute
spec:
  hard:
    pods: \"10\"
    limits.memory: 4Gi
---
apiVersion: v1
kind: LimitRange
metadata:
  name: defaults
spec:
  limits:
  - type: Container
    max: {cpu: \"1\"}
---
apiVersion: v1
kind: ReplicationController
metadata:
  name: legacy
spec:
  template:
    metadata:
      labels: {app: legacy}
    spec:
      containers:
      - name: web
        image: nginx:1.27
---
apiVersion: v1
kind: PodTemplate
metadata:
  name: base
template:
  metadata:
    labels: {app: base}
  spec:
    containers:
    - name: c
      image: busybox:1.36
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_kinds_apply_print_scale_and_explain_what_simulated_nodes_cannot_do() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let applied = env.ok_stdin(&["apply", "-f", "-"], CORE_KINDS).await;
        for line in [
            "persistentvolume/pv-data created",
            "persistentvolumeclaim/data created",
            "resourcequota/compute created",
            "limitrange/defaults created",
            "replicationcontroller/legacy created",
            "podtemplate/base created",
        ] {
            assert!(applied.contains(line), "{line} in\n{applied}");
        }
        let pv = env.ok(&["get", "pv", "-o", "wide"]).await;
        assert_eq!(
            header(&pv),
            ["NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS", "CLAIM",
                "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE", "VOLUMEMODE"],
            "{pv}"
        );
        let cells = row(&pv, "pv-data");
        assert_eq!(cells[1..6], ["5Gi", "RWO,ROX", "Retain", "Pending", "manual"], "{pv}");
        let pvc = env.ok(&["get", "pvc"]).await;
        assert_eq!(row(&pvc, "data")[1..3], ["Pending", "manual"], "{pvc}");
        let quota = env.ok(&["get", "quota"]).await;
        assert_eq!(header(&quota), ["NAME", "AGE", "REQUEST", "LIMIT"], "{quota}");
        let limits = env.ok(&["get", "limits"]).await;
        assert_eq!(header(&limits), ["NAME", "CREATED", "AT"], "{limits}");
        let range = env.json(&["get", "limitrange", "defaults"]).await;
        assert_eq!(range["spec"]["limits"][0]["defaultRequest"]["cpu"], "1");

        env.ok(&["scale", "rc", "legacy", "--replicas=3"]).await;
        let rc = env.ok(&["get", "rc", "-o", "wide"]).await;
        assert_eq!(row(&rc, "legacy")[..2], ["legacy", "3"], "{rc}");
        assert!(rc.contains("app=legacy"), "{rc}");
        let templates = env.ok(&["get", "podtemplates"]).await;
        assert_eq!(header(&templates), ["NAME", "CONTAINERS", "IMAGES", "POD", "LABELS"], "{templates}");

        let run = env.run(&["get", "cs"]).await;
        assert!(run.ok, "{}", run.stderr);
        assert!(run.stderr.contains("Warning: v1 ComponentStatus is deprecated in v1.19+"), "{}", run.stderr);
        assert_eq!(header(&run.stdout), ["NAME", "STATUS", "MESSAGE", "ERROR"], "{}", run.stdout);
        assert_eq!(row(&run.stdout, "etcd-0")[..2], ["etcd-0", "Healthy"], "{}", run.stdout);

        env.ok_stdin(&["apply", "-f", "-"], POD).await;
        env.bind("sim-1", &["web"]).await;
        let err = env.fails(&["logs", "web"]).await;
        assert_eq!(
            err.trim(),
            "Error from server (BadRequest): pod \"web\" runs on the simulated node \"sim-1\": there are no container logs to read"
        );
        let err = env.fails(&["exec", "web", "--", "ls"]).await;
        assert!(
            err.contains("pod \"web\" runs on the simulated node \"sim-1\": there is no container to exec into"),
            "{err}"
        );
        let err = env.fails(&["get", "--raw", "/api/v1/nodes/sim-1/proxy/metrics"]).await;
        assert!(err.contains("node \"sim-1\" is simulated: there is no kubelet to proxy to"), "{err}");
    })
    .await;
}

const CRON_JOB: &str = "apiVersion: batch/v1
kind: CronJob
metadata:
  name: hello
spec:
  schedule: \"*/5 * * * *\"
  timeZone: Europe/Paris
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: hello
            image: busybox:1.36
            command: [sh, -c, date]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_jobs_from_cronjobs_and_their_tables() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        env.ok_stdin(&["apply", "-f", "-"], CRON_JOB).await;
        let cj = env.ok(&["get", "cj"]).await;
        assert_eq!(
            header(&cj),
            ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"],
            "{cj}"
        );
        assert_eq!(row(&cj, "hello")[1..7], ["*/5", "*", "*", "*", "*", "Europe/Paris"], "{cj}");

        let created = env.ok(&["create", "job", "--from=cronjob/hello", "manual-1"]).await;
        assert_eq!(created.trim(), "job.batch/manual-1 created");
        let job = env.json(&["get", "job", "manual-1"]).await;
        assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "CronJob");
        assert_eq!(job["metadata"]["ownerReferences"][0]["name"], "hello");
        assert_eq!(job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"], "manual");
        let uid = job["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
        assert_eq!(
            job["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        );
        assert_eq!(job["spec"]["backoffLimit"], 6);
        assert_eq!(job["spec"]["template"]["metadata"]["labels"]["job-name"], "manual-1");

        env.ok(&["create", "job", "pi", "--image=perl:5.34", "--", "perl", "-e", "print 1"]).await;
        let jobs = env.ok(&["get", "jobs", "-o", "wide"]).await;
        assert_eq!(
            header(&jobs),
            ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"],
            "{jobs}"
        );
        assert_eq!(row(&jobs, "pi")[1..3], ["Running", "0/1"], "{jobs}");

        let err = env
            .fails(&["create", "cronjob", "bad", "--image=busybox", "--schedule=* * *"])
            .await;
        assert!(
            err.contains("spec.schedule: Invalid value: \"* * *\": expected exactly 5 fields, found 3: [* * *]"),
            "{err}"
        );
        env.ok(&["delete", "job", "pi"]).await;
        let err = env.fails(&["get", "job", "pi"]).await;
        assert!(err.contains("NotFound"), "kubectl deletes in the background: {err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscale_creates_an_hpa_both_versions_read() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        env.ok_stdin(&["apply", "-f", "-"], &deployment(2, "nginx:1.27", ""))
            .await;
        let out = env
            .ok(&[
                "autoscale",
                "deployment",
                "web",
                "--min=2",
                "--max=5",
                "--cpu-percent=60",
            ])
            .await;
        assert_eq!(
            out.trim(),
            "horizontalpodautoscaler.autoscaling/web autoscaled"
        );
        let hpa = env.ok(&["get", "hpa"]).await;
        assert_eq!(
            header(&hpa),
            [
                "NAME",
                "REFERENCE",
                "TARGETS",
                "MINPODS",
                "MAXPODS",
                "REPLICAS",
                "AGE"
            ],
            "{hpa}"
        );
        assert_eq!(
            row(&hpa, "web")[1..7],
            ["Deployment/web", "cpu:", "<unknown>/60%", "2", "5", "0"],
            "{hpa}"
        );
        let v1 = env
            .json(&["get", "horizontalpodautoscalers.v1.autoscaling", "web"])
            .await;
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        let v2 = env.json(&["get", "hpa", "web"]).await;
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            60
        );
        let err = env
            .fails(&[
                "patch",
                "hpa",
                "web",
                "--type=merge",
                "-p",
                r#"{"spec":{"minReplicas":9}}"#,
            ])
            .await;
        assert!(
            err.contains(
                "spec.maxReplicas: Invalid value: 5: must be greater than or equal to `minReplicas`"
            ),
            "{err}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_runtime_classes_and_controller_revisions() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let pc = env.ok(&["get", "pc"]).await;
        assert_eq!(
            header(&pc),
            ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
            "{pc}"
        );
        assert_eq!(row(&pc, "system-node-critical")[1..3], ["2000001000", "false"], "{pc}");
        assert_eq!(row(&pc, "system-cluster-critical")[1], "2000000000", "{pc}");
        env.ok(&["create", "priorityclass", "high", "--value=1000", "--description=important"])
            .await;
        env.ok(&["create", "priorityclass", "standard", "--value=10", "--global-default"])
            .await;
        let err = env
            .fails(&["create", "priorityclass", "other", "--value=20", "--global-default"])
            .await;
        assert!(
            err.contains("PriorityClass standard is already marked as default. Only one default can exist"),
            "{err}"
        );
        let err = env.fails(&["delete", "pc", "system-node-critical"]).await;
        assert!(err.contains("this is a system priority class and cannot be deleted"), "{err}");

        env.ok_stdin(
            &["apply", "-f", "-"],
            "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: gvisor\nhandler: runsc\n",
        )
        .await;
        let rc = env.ok(&["get", "runtimeclass"]).await;
        assert_eq!(header(&rc), ["NAME", "HANDLER", "AGE"], "{rc}");
        assert_eq!(row(&rc, "gvisor")[1], "runsc", "{rc}");

        env.ok_stdin(
            &["apply", "-f", "-"],
            "apiVersion: apps/v1\nkind: ControllerRevision\nmetadata:\n  name: web-5d8f\nrevision: 1\ndata:\n  spec: {}\n",
        )
        .await;
        let revisions = env.ok(&["get", "controllerrevisions"]).await;
        assert_eq!(header(&revisions), ["NAME", "CONTROLLER", "REVISION", "AGE"], "{revisions}");
        assert_eq!(row(&revisions, "web-5d8f")[1..3], ["<none>", "1"], "{revisions}");
    })
    .await;
}

// ---- Issue 17b: the APIs every v1.33 kube-apiserver serves (RBAC, networking, storage,
// discovery, certificates, admissionregistration, flowcontrol, apiregistration, reviews) ----

/// Every verb a stored resource serves, as `kubectl api-resources -o wide` prints them.
const ALL_VERBS: &str = "create,delete,deletecollection,get,list,patch,update,watch";

/// `kubectl api-resources -o wide` against a v1.36 kube-apiserver with its default API
/// resources (the stable group versions of `DefaultAPIResourceConfigSource`; no beta or
/// alpha version is served by default), row by row (NAME, SHORTNAMES, APIVERSION,
/// NAMESPACED, KIND, VERBS, CATEGORIES; empty cells left out), plus metrics.k8s.io, which
/// kcm serves itself where a cluster runs metrics-server. Rows marked `17a`, `18` or
/// `v1.36` say which issue (or version) brought them.
const API_RESOURCES_V1_36: &[&str] = &[
    "bindings v1 true Binding create",                        // 17a
    "componentstatuses cs v1 false ComponentStatus get,list", // 17a
    "configmaps cm v1 true ConfigMap ALL",
    "endpoints ep v1 true Endpoints ALL",
    "events ev v1 true Event ALL",
    "limitranges limits v1 true LimitRange ALL", // 17a
    "namespaces ns v1 false Namespace create,delete,get,list,patch,update,watch",
    "nodes no v1 false Node ALL",
    "persistentvolumeclaims pvc v1 true PersistentVolumeClaim ALL", // 17a
    "persistentvolumes pv v1 false PersistentVolume ALL",           // 17a
    "pods po v1 true Pod ALL all",
    "podtemplates v1 true PodTemplate ALL", // 17a
    "replicationcontrollers rc v1 true ReplicationController ALL all", // 17a
    "resourcequotas quota v1 true ResourceQuota ALL", // 17a
    "secrets v1 true Secret ALL",
    "serviceaccounts sa v1 true ServiceAccount ALL",
    "services svc v1 true Service ALL all",
    "mutatingadmissionpolicies admissionregistration.k8s.io/v1 false MutatingAdmissionPolicy ALL api-extensions", // v1.36
    "mutatingadmissionpolicybindings admissionregistration.k8s.io/v1 false MutatingAdmissionPolicyBinding ALL api-extensions", // v1.36
    "mutatingwebhookconfigurations admissionregistration.k8s.io/v1 false MutatingWebhookConfiguration ALL api-extensions",
    "validatingadmissionpolicies admissionregistration.k8s.io/v1 false ValidatingAdmissionPolicy ALL api-extensions",
    "validatingadmissionpolicybindings admissionregistration.k8s.io/v1 false ValidatingAdmissionPolicyBinding ALL api-extensions",
    "validatingwebhookconfigurations admissionregistration.k8s.io/v1 false ValidatingWebhookConfiguration ALL api-extensions",
    "customresourcedefinitions crd,crds apiextensions.k8s.io/v1 false CustomResourceDefinition ALL api-extensions", // 18
    "apiservices apiregistration.k8s.io/v1 false APIService ALL api-extensions",
    "controllerrevisions apps/v1 true ControllerRevision ALL", // 17a
    "daemonsets ds apps/v1 true DaemonSet ALL all",
    "deployments deploy apps/v1 true Deployment ALL all",
    "replicasets rs apps/v1 true ReplicaSet ALL all",
    "statefulsets sts apps/v1 true StatefulSet ALL all",
    "selfsubjectreviews authentication.k8s.io/v1 false SelfSubjectReview create",
    "tokenreviews authentication.k8s.io/v1 false TokenReview create",
    "localsubjectaccessreviews authorization.k8s.io/v1 true LocalSubjectAccessReview create",
    "selfsubjectaccessreviews authorization.k8s.io/v1 false SelfSubjectAccessReview create",
    "selfsubjectrulesreviews authorization.k8s.io/v1 false SelfSubjectRulesReview create",
    "subjectaccessreviews authorization.k8s.io/v1 false SubjectAccessReview create",
    "horizontalpodautoscalers hpa autoscaling/v2 true HorizontalPodAutoscaler ALL all", // 17a
    "cronjobs cj batch/v1 true CronJob ALL all",                                        // 17a
    "jobs batch/v1 true Job ALL all",                                                   // 17a
    "certificatesigningrequests csr certificates.k8s.io/v1 false CertificateSigningRequest ALL",
    "leases coordination.k8s.io/v1 true Lease ALL",
    "endpointslices discovery.k8s.io/v1 true EndpointSlice ALL",
    "events ev events.k8s.io/v1 true Event ALL",
    "flowschemas flowcontrol.apiserver.k8s.io/v1 false FlowSchema ALL",
    "prioritylevelconfigurations flowcontrol.apiserver.k8s.io/v1 false PriorityLevelConfiguration ALL",
    "nodes metrics.k8s.io/v1beta1 false NodeMetrics get,list", // served by kcm itself (issue 24)
    "pods metrics.k8s.io/v1beta1 true PodMetrics get,list",
    "ingressclasses networking.k8s.io/v1 false IngressClass ALL",
    "ingresses ing networking.k8s.io/v1 true Ingress ALL",
    "ipaddresses ip networking.k8s.io/v1 false IPAddress ALL",
    "networkpolicies netpol networking.k8s.io/v1 true NetworkPolicy ALL",
    "servicecidrs networking.k8s.io/v1 false ServiceCIDR ALL",
    "runtimeclasses node.k8s.io/v1 false RuntimeClass ALL", // 17a
    "poddisruptionbudgets pdb policy/v1 true PodDisruptionBudget ALL",
    "clusterrolebindings rbac.authorization.k8s.io/v1 false ClusterRoleBinding ALL",
    "clusterroles rbac.authorization.k8s.io/v1 false ClusterRole ALL",
    "rolebindings rbac.authorization.k8s.io/v1 true RoleBinding ALL",
    "roles rbac.authorization.k8s.io/v1 true Role ALL",
    "deviceclasses resource.k8s.io/v1 false DeviceClass ALL", // v1.34
    "resourceclaims resource.k8s.io/v1 true ResourceClaim ALL", // v1.34
    "resourceclaimtemplates resource.k8s.io/v1 true ResourceClaimTemplate ALL", // v1.34
    "resourceslices resource.k8s.io/v1 false ResourceSlice ALL", // v1.34
    "priorityclasses pc scheduling.k8s.io/v1 false PriorityClass ALL", // 17a
    "csidrivers storage.k8s.io/v1 false CSIDriver ALL",
    "csinodes storage.k8s.io/v1 false CSINode ALL",
    "csistoragecapacities storage.k8s.io/v1 true CSIStorageCapacity ALL",
    "storageclasses sc storage.k8s.io/v1 false StorageClass ALL",
    "volumeattachments storage.k8s.io/v1 false VolumeAttachment ALL",
    "volumeattributesclasses vac storage.k8s.io/v1 false VolumeAttributesClass ALL", // v1.34
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_wide_lists_what_v1_36_serves() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let table = env.ok(&["api-resources", "-o", "wide"]).await;
        assert_eq!(
            header(&table),
            [
                "NAME",
                "SHORTNAMES",
                "APIVERSION",
                "NAMESPACED",
                "KIND",
                "VERBS",
                "CATEGORIES"
            ],
            "{table}"
        );
        let got: Vec<String> = table
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        let want: Vec<String> = API_RESOURCES_V1_36
            .iter()
            .map(|row| row.replace(" ALL", &format!(" {ALL_VERBS}")))
            .collect();
        assert_eq!(got, want, "kubectl api-resources -o wide:\n{table}");
    })
    .await;
}

/// The install manifests of `tests/data/install/` (an ingress controller's all-in-one and a
/// metrics server's): every object is created on the first apply (but the metrics
/// APIService kcm registers itself, which is configured) and unchanged on the second. The ingress controller's Jobs need batch/v1 (issue 17a's half).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_manifests_apply_cleanly_and_reapply_unchanged() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/install");
        for manifest in ["edge-ingress.yaml", "cluster-metrics.yaml"] {
            let path = dir.join(manifest);
            let path = path.to_str().expect("utf-8 path");
            let first = env.run(&["apply", "-f", path]).await;
            // kcm registers v1beta1.metrics.k8s.io itself (it serves the group), so the
            // metrics server's APIService is configured rather than created, and kubectl
            // warns that the existing object has no last-applied annotation.
            let local = "apiservice.apiregistration.k8s.io/v1beta1.metrics.k8s.io configured";
            assert!(
                first.ok
                    && first.stderr.lines().all(|l| l.contains(
                        "apiservices/v1beta1.metrics.k8s.io is missing the kubectl.kubernetes.io/last-applied-configuration"
                    )),
                "{manifest}: {}\n{}",
                first.stdout,
                first.stderr
            );
            assert!(
                first.stdout.lines().all(|l| l.ends_with(" created") || l == local),
                "{manifest}:\n{}",
                first.stdout
            );
            let second = env.run(&["apply", "-f", path]).await;
            assert!(
                second.ok && second.stderr.is_empty(),
                "{manifest}: {}\n{}",
                second.stdout,
                second.stderr
            );
            assert!(
                second.stdout.lines().all(|l| l.ends_with(" unchanged")),
                "{manifest} re-applied:\n{}",
                second.stdout
            );
            assert_eq!(first.stdout.lines().count(), second.stdout.lines().count());
        }
        let apiservice = env
            .ok(&["get", "apiservice", "v1beta1.metrics.k8s.io"])
            .await;
        assert_eq!(
            names(&apiservice),
            ["v1beta1.metrics.k8s.io"],
            "{apiservice}"
        );
        assert!(
            apiservice.contains("kube-system/cluster-metrics"),
            "{apiservice}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_create_role_binding_clusterrole_and_immutable_role_ref() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        env.ok(&["create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods,pods/log"]).await;
        env.ok(&["create", "rolebinding", "read-pods", "--role=pod-reader", "--user=alice", "--group=devs",
            "--serviceaccount=default:bot"]).await;
        env.ok(&["create", "clusterrole", "monitoring",
            "--aggregation-rule=rbac.example.com/aggregate-to-monitoring=true"]).await;
        env.ok(&["create", "clusterrolebinding", "ops", "--clusterrole=view", "--group=ops"]).await;

        let roles = env.ok(&["get", "roles"]).await;
        assert_eq!(header(&roles), ["NAME", "CREATED", "AT"], "{roles}");
        assert_eq!(names(&roles), ["pod-reader"]);
        let bindings = env.ok(&["get", "rolebinding", "read-pods", "-o", "wide"]).await;
        assert_eq!(header(&bindings), ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"], "{bindings}");
        let row: Vec<&str> = bindings.lines().nth(1).unwrap_or("").split_whitespace().collect();
        assert_eq!((row[0], row[1], row[3], row[4], row[5]), ("read-pods", "Role/pod-reader", "alice", "devs", "default/bot"), "{bindings}");
        let role = env.json(&["get", "role", "pod-reader"]).await;
        assert_eq!(role["rules"], json!([{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]}]));
        let aggregated = env.json(&["get", "clusterrole", "monitoring"]).await;
        assert_eq!(
            aggregated["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.example.com/aggregate-to-monitoring"],
            "true"
        );
        let err = env.fails(&["patch", "clusterrolebinding", "ops", "--type=merge", "-p", r#"{"roleRef":{"name":"admin"}}"#]).await;
        assert!(
            err.contains(r#"roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"admin"}: cannot change roleRef"#),
            "{err}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn networking_ingresses_classes_and_policies() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        env.ok(&[
            "create",
            "ingress",
            "web",
            "--class=edge",
            "--rule=web.example.com/*=web:80",
            "--rule=api.example.com/v1=api:http,tls=api-tls",
        ])
        .await;
        let table = env.ok(&["get", "ing"]).await;
        assert_eq!(
            header(&table),
            ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
            "{table}"
        );
        let row: Vec<&str> = table
            .lines()
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        assert_eq!(
            row[..5],
            [
                "web",
                "edge",
                "web.example.com,api.example.com",
                "80,",
                "443"
            ],
            "{table}"
        );
        let ing = env.json(&["get", "ingress", "web"]).await;
        assert_eq!(
            ing["spec"]["rules"][0]["http"]["paths"][0]["pathType"],
            "Prefix"
        );
        assert_eq!(ing["status"], json!({"loadBalancer": {}}));

        let manifest = "apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: edge
spec:
  controller: example.io/edge
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: db
spec:
  podSelector:
    matchLabels:
      app: db
  ingress:
  - ports:
    - port: 5432
";
        env.ok_stdin(&["apply", "-f", "-"], manifest).await;
        let policies = env.ok(&["get", "netpol"]).await;
        assert_eq!(
            header(&policies),
            ["NAME", "POD-SELECTOR", "AGE"],
            "{policies}"
        );
        assert!(
            policies.lines().nth(1).unwrap_or("").starts_with("db "),
            "{policies}"
        );
        assert!(policies.contains("app=db"), "{policies}");
        let policy = env.json(&["get", "networkpolicy", "db"]).await;
        assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
        assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
        let classes = env.ok(&["get", "ingressclass"]).await;
        assert_eq!(
            header(&classes),
            ["NAME", "CONTROLLER", "PARAMETERS", "AGE"],
            "{classes}"
        );
        let cidrs = env.ok(&["get", "servicecidr"]).await;
        assert!(
            cidrs
                .lines()
                .nth(1)
                .unwrap_or("")
                .starts_with("kubernetes "),
            "{cidrs}"
        );
        assert!(cidrs.contains("10.96.0.0/12"), "{cidrs}");

        let bad = "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: bad
spec:
  rules:
  - http:
      paths:
      - path: /
        backend:
          service:
            name: web
            port:
              number: 80
";
        let run = env.run_with(&["apply", "-f", "-"], &[], Some(bad)).await;
        assert!(!run.ok);
        assert!(
            run.stderr.contains(
                "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"
            ),
            "{}",
            run.stderr
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_classes_and_csi_objects() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let manifest = "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: \"true\"
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: hostpath.csi.k8s.io
spec:
  podInfoOnMount: true
  volumeLifecycleModes: [Persistent, Ephemeral]
";
        env.ok_stdin(&["apply", "-f", "-"], manifest).await;
        let classes = env.ok(&["get", "sc"]).await;
        assert_eq!(
            header(&classes),
            [
                "NAME",
                "PROVISIONER",
                "RECLAIMPOLICY",
                "VOLUMEBINDINGMODE",
                "ALLOWVOLUMEEXPANSION",
                "AGE"
            ],
            "{classes}"
        );
        let row: Vec<&str> = classes
            .lines()
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        assert_eq!(
            row[..6],
            [
                "standard",
                "(default)",
                "rancher.io/local-path",
                "Delete",
                "WaitForFirstConsumer",
                "false"
            ],
            "{classes}"
        );
        let err = env
            .fails(&[
                "patch",
                "sc",
                "standard",
                "--type=merge",
                "-p",
                r#"{"provisioner":"example.com/other"}"#,
            ])
            .await;
        assert!(
            err.contains("provisioner: Forbidden: updates to provisioner are forbidden."),
            "{err}"
        );
        let drivers = env.ok(&["get", "csidrivers"]).await;
        let row: Vec<&str> = drivers
            .lines()
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        assert_eq!(
            row[..7],
            [
                "hostpath.csi.k8s.io",
                "true",
                "true",
                "false",
                "<unset>",
                "false",
                "Persistent,Ephemeral"
            ],
            "{drivers}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_slices_print_their_ports_and_addresses() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let manifest = "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc12
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- name: http
  port: 8080
endpoints:
- addresses: [10.244.0.5]
  conditions:
    ready: true
- addresses: [10.244.0.6]
";
        env.ok_stdin(&["apply", "-f", "-"], manifest).await;
        let table = env.ok(&["get", "endpointslices"]).await;
        assert_eq!(
            header(&table),
            ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
            "{table}"
        );
        // The API server's own `kubernetes` slice (when it advertises a routable address)
        // sorts first.
        let row: Vec<&str> = table
            .lines()
            .skip(1)
            .find(|l| l.starts_with("web-abc12"))
            .unwrap_or("")
            .split_whitespace()
            .collect();
        assert_eq!(
            row[..4],
            ["web-abc12", "IPv4", "8080", "10.244.0.5,10.244.0.6"],
            "{table}"
        );
        let slice = env.json(&["get", "endpointslice", "web-abc12"]).await;
        assert_eq!(slice["ports"][0]["protocol"], "TCP");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_approve_and_deny() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        use base64::Engine;
        let env = Env::start().await;
        let csr = |name: &str| {
            let key = rcgen::KeyPair::generate().expect("key");
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            let pem = params
                .serialize_request(&key)
                .expect("csr")
                .pem()
                .expect("pem");
            format!(
                "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: {name}
spec:
  request: {}
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 86400
  usages: [client auth]
",
                base64::engine::general_purpose::STANDARD.encode(pem)
            )
        };
        env.ok_stdin(&["apply", "-f", "-"], &csr("alice")).await;
        env.ok_stdin(&["apply", "-f", "-"], &csr("bob")).await;
        let table = env.ok(&["get", "csr"]).await;
        assert_eq!(
            header(&table),
            [
                "NAME",
                "AGE",
                "SIGNERNAME",
                "REQUESTOR",
                "REQUESTEDDURATION",
                "CONDITION"
            ],
            "{table}"
        );
        let out = env.ok(&["certificate", "approve", "alice"]).await;
        assert!(
            out.contains("certificatesigningrequest.certificates.k8s.io/alice approved"),
            "{out}"
        );
        env.ok(&["certificate", "deny", "bob"]).await;
        let table = env.ok(&["get", "csr"]).await;
        let rows: Vec<Vec<&str>> = table
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows.iter()
                .map(|r| (r[0], r[3], r[4], r[5]))
                .collect::<Vec<_>>(),
            [
                ("alice", "kubernetes-admin", "24h", "Approved"),
                ("bob", "kubernetes-admin", "24h", "Denied")
            ],
            "{table}"
        );
        let alice = env.json(&["get", "csr", "alice"]).await;
        assert_eq!(alice["status"]["conditions"][0]["reason"], "KubectlApprove");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_configurations_are_listed_and_called() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let manifest = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: deny-all
webhooks:
- name: deny.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    url: https://deny.example.com/validate
  rules:
  - apiGroups: ['']
    apiVersions: [v1]
    operations: [CREATE]
    resources: [configmaps]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: max-replicas
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 5
";
        env.ok_stdin(&["apply", "-f", "-"], manifest).await;
        let hooks = env.ok(&["get", "validatingwebhookconfigurations"]).await;
        assert_eq!(header(&hooks), ["NAME", "WEBHOOKS", "AGE"], "{hooks}");
        assert!(
            hooks.lines().nth(1).unwrap_or("").starts_with("deny-all "),
            "{hooks}"
        );
        let policies = env.ok(&["get", "validatingadmissionpolicies"]).await;
        assert_eq!(
            header(&policies),
            ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"],
            "{policies}"
        );
        let hook = env
            .json(&["get", "validatingwebhookconfiguration", "deny-all"])
            .await;
        assert_eq!(hook["webhooks"][0]["failurePolicy"], "Fail");
        assert_eq!(hook["webhooks"][0]["timeoutSeconds"], 10);
        // Called: the Fail webhook matching configmaps cannot be reached, so the create is
        // refused with upstream's text; without the configuration it goes through.
        let refused = env
            .fails(&["create", "configmap", "still-works", "--from-literal=a=b"])
            .await;
        assert!(
            refused.contains("Internal error occurred: failed calling webhook \"deny.example.com\": failed to call webhook: Post \"https://deny.example.com/validate?timeout=10s\""),
            "{refused}"
        );
        env.ok(&["delete", "validatingwebhookconfiguration", "deny-all"])
            .await;
        env.ok(&["create", "configmap", "still-works", "--from-literal=a=b"])
            .await;
        let all = env.ok(&["get", "api-extensions", "-o", "name"]).await;
        assert!(
            all.contains("validatingadmissionpolicy.admissionregistration.k8s.io/max-replicas"),
            "{all}"
        );
        assert!(
            all.contains("apiservice.apiregistration.k8s.io/v1.apps"),
            "{all}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flowcontrol_bootstrap_configuration_is_listed() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let schemas = env.ok(&["get", "flowschemas"]).await;
        assert_eq!(
            header(&schemas),
            [
                "NAME",
                "PRIORITYLEVEL",
                "MATCHINGPRECEDENCE",
                "DISTINGUISHERMETHOD",
                "AGE",
                "MISSINGPL"
            ],
            "{schemas}"
        );
        let exempt: Vec<&str> = schemas
            .lines()
            .find(|l| l.starts_with("exempt "))
            .unwrap_or("")
            .split_whitespace()
            .collect();
        assert_eq!(
            (exempt[1], exempt[2], exempt[3], exempt[5]),
            ("exempt", "1", "<none>", "False"),
            "{schemas}"
        );
        let levels = env.ok(&["get", "prioritylevelconfigurations"]).await;
        let catch_all: Vec<&str> = levels
            .lines()
            .find(|l| l.starts_with("catch-all "))
            .unwrap_or("")
            .split_whitespace()
            .collect();
        assert_eq!(catch_all[1..3], ["Limited", "5"], "{levels}");
        for name in [
            "exempt",
            "global-default",
            "leader-election",
            "node-high",
            "system",
            "workload-high",
            "workload-low",
        ] {
            assert!(names(&levels).contains(&name), "{name} in\n{levels}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiservices_list_every_served_group_version_as_local() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let table = env.ok(&["get", "apiservices"]).await;
        assert_eq!(
            header(&table),
            ["NAME", "SERVICE", "AVAILABLE", "AGE"],
            "{table}"
        );
        for row in table.lines().skip(1) {
            let cells: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(cells[1..3], ["Local", "True"], "{row}");
        }
        for name in [
            "v1.",
            "v1.apps",
            "v1.rbac.authorization.k8s.io",
            "v1.flowcontrol.apiserver.k8s.io",
        ] {
            assert!(names(&table).contains(&name), "{name} in\n{table}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_whoami_and_can_i_answer_for_the_admin() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let me = env.ok(&["auth", "whoami"]).await;
        let rows: Vec<Vec<&str>> = me.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0], ["ATTRIBUTE", "VALUE"], "{me}");
        assert_eq!(rows[1], ["Username", "kubernetes-admin"], "{me}");
        assert_eq!(
            rows[2],
            ["Groups", "[system:masters", "system:authenticated]"],
            "{me}"
        );
        assert_eq!(
            env.ok(&["auth", "can-i", "create", "pods"]).await.trim(),
            "yes"
        );
        assert_eq!(
            env.ok(&["auth", "can-i", "delete", "nodes", "--all-namespaces"])
                .await
                .trim(),
            "yes"
        );
        let list = env.ok(&["auth", "can-i", "--list"]).await;
        let rows: Vec<Vec<&str>> = list
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            [
                "Resources",
                "Non-Resource",
                "URLs",
                "Resource",
                "Names",
                "Verbs"
            ],
            "{list}"
        );
        assert_eq!(rows[1], ["*.*", "[]", "[]", "[*]"], "{list}");
        assert_eq!(rows[2], ["[*]", "[]", "[*]"], "{list}");
        assert!(
            list.contains("selfsubjectaccessreviews.authorization.k8s.io"),
            "{list}"
        );
    })
    .await;
}

// ---- Issue 18: custom resources ----

/// The sample-controller's CRD and example Foo, as a newcomer applies them.
const SAMPLE_CRD: &str =
    include_str!("../../../examples/sample-controller/artifacts/examples/crd.yaml");
const SAMPLE_FOO: &str =
    include_str!("../../../examples/sample-controller/artifacts/examples/example-foo.yaml");

/// Waits (bounded) until `kubectl get foos` works after the CRD is applied.
async fn wait_for_foos(env: &Env) {
    for _ in 0..200 {
        if env.run(&["get", "foos"]).await.ok {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("foos never served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_through_kubectl() {
    if !kubectl_installed() {
        return;
    }
    timed(async {
        let env = Env::start().await;
        let crd = env.file("crd.yaml", SAMPLE_CRD);
        env.ok(&["apply", "-f", crd.to_str().expect("path")]).await;
        env.ok(&["wait", "--for=condition=Established", "crd/foos.samplecontroller.k8s.io", "--timeout=10s"])
            .await;
        wait_for_foos(&env).await;
        let resources = env.ok(&["api-resources", "--api-group=samplecontroller.k8s.io", "-o", "wide"]).await;
        assert!(
            resources.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["foos", "samplecontroller.k8s.io/v1alpha1", "true", "Foo", "create,delete,deletecollection,get,list,patch,update,watch"]),
            "{resources}"
        );
        let foo = env.file("foo.yaml", SAMPLE_FOO);
        env.ok(&["apply", "-f", foo.to_str().expect("path")]).await;
        let table = env.ok(&["get", "foo", "example-foo"]).await;
        assert_eq!(header(&table), ["NAME", "DEPLOYMENT", "DESIRED", "AVAILABLE", "AGE"], "{table}");
        // No status yet: AVAILABLE is blank, as upstream prints a custom column with no value.
        assert_eq!(row(&table, "example-foo").len(), 4, "{table}");
        assert_eq!(row(&table, "example-foo")[1..3], ["example-foo", "1"], "{table}");

        // The scale subresource.
        env.ok(&["scale", "foo/example-foo", "--replicas=3"]).await;
        let got = env.json(&["get", "foo", "example-foo"]).await;
        assert_eq!(got["spec"]["replicas"], 3);

        // explain reads the published schema's descriptions.
        let explained = env.ok(&["explain", "foo.spec"]).await;
        assert!(explained.contains("FooSpec is the spec for a Foo resource."), "{explained}");
        assert!(explained.contains("deploymentName"), "{explained}");

        // A schema violation is a 422 naming the field; an unknown field is dropped.
        let bad = env.file("bad.yaml", &SAMPLE_FOO.replace("replicas: 1", "replicas: 11").replace("example-foo\nspec", "bad-foo\nspec"));
        let err = env.fails(&["apply", "-f", bad.to_str().expect("path")]).await;
        assert!(err.contains("spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"), "{err}");
        let extra = env.file("extra.yaml", &format!("{}  colour: blue\n", SAMPLE_FOO.replace("example-foo\nspec", "extra-foo\nspec")));
        let run = env.run(&["apply", "--validate=false", "-f", extra.to_str().expect("path")]).await;
        assert!(run.ok, "{}", run.stderr);
        let got = env.json(&["get", "foo", "extra-foo"]).await;
        assert!(got["spec"].get("colour").is_none(), "{got}");

        // kubectl get all includes custom resources in the `all` category only; Foo is not.
        let all = env.ok(&["get", "all"]).await;
        assert!(!all.contains("foo.samplecontroller.k8s.io/example-foo"), "{all}");

        // Deleting the CRD removes its resources and endpoints.
        env.ok(&["delete", "-f", crd.to_str().expect("path"), "--wait=true", "--timeout=20s"]).await;
        // kubectl's cached discovery still knows the resource; the server no longer serves it.
        let err = env.fails(&["get", "foos"]).await;
        assert!(
            err.contains("the server doesn't have a resource type \"foos\"")
                || err.contains("the server could not find the requested resource"),
            "{err}"
        );
    })
    .await;
}
