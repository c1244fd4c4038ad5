//! The installed `kubectl` against a spawned `kcm apiserver`: get, create -f, delete.
//!
//! Skipped (with a note) when `kubectl` is not installed. Uses `--validate=false` because the
//! OpenAPI documents kubectl validates against are served by part 2 of the API server.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Kills the spawned server when the test ends, however it ends.
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `kcm apiserver` on a free port and returns it with its kubeconfig path, read from
/// the line it prints once the kubeconfig is written.
fn start_server(data_dir: &Path) -> (ServerProcess, PathBuf) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcm"))
        .args([
            "apiserver",
            "--listen",
            "127.0.0.1:0",
            "--storage",
            "memory",
            // No controller manager runs beside it to create `default` service accounts,
            // so pods could never be admitted (as with a bare kube-apiserver).
            "--disable-admission-plugins=ServiceAccount",
            "--data-dir",
        ])
        .arg(data_dir)
        .env("KCM_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn kcm apiserver");
    let stdout = child.stdout.take().expect("stdout");
    let server = ServerProcess(child);
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read stdout");
        if let Some(path) = line.strip_prefix("kubeconfig: ") {
            return (server, PathBuf::from(path));
        }
    }
    panic!("kcm apiserver exited before printing its kubeconfig");
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
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

fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, stdout, stderr) = kubectl(kubeconfig, args);
    assert!(
        ok,
        "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {stderr}"
    );
    stdout
}

#[test]
fn kubectl_gets_creates_and_deletes() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("kubectl is not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, kubeconfig) = start_server(dir.path());

    let namespaces = kubectl_ok(&kubeconfig, &["get", "ns", "-o", "name"]);
    for ns in ["default", "kube-node-lease", "kube-public", "kube-system"] {
        assert!(
            namespaces.contains(&format!("namespace/{ns}")),
            "{namespaces}"
        );
    }
    let (ok, stdout, stderr) = kubectl(&kubeconfig, &["get", "pods"]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.is_empty() && stderr.contains("No resources found"),
        "{stdout} {stderr}"
    );

    let manifest = dir.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels:\n    app: web\nspec:\n  containers:\n  - name: nginx\n    image: nginx:1.27\n",
    )
    .expect("write manifest");
    let manifest = manifest.to_str().expect("utf-8 path");
    let created = kubectl_ok(&kubeconfig, &["create", "-f", manifest, "--validate=false"]);
    assert_eq!(created.trim(), "pod/web created");

    let table = kubectl_ok(&kubeconfig, &["get", "pods"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{table}"
    );
    assert!(
        table.lines().nth(1).unwrap_or("").starts_with("web "),
        "{table}"
    );
    let pods = kubectl_ok(&kubeconfig, &["get", "pods", "-o", "name"]);
    assert_eq!(pods.trim(), "pod/web");
    let phase = kubectl_ok(
        &kubeconfig,
        &["get", "pod", "web", "-o", "jsonpath={.status.phase}"],
    );
    assert_eq!(phase, "Pending");
    let by_label = kubectl_ok(&kubeconfig, &["get", "pods", "-l", "app=web", "-o", "name"]);
    assert_eq!(by_label.trim(), "pod/web");
    let by_field = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "pods",
            "-A",
            "--field-selector",
            "spec.nodeName=",
            "-o",
            "name",
        ],
    );
    assert_eq!(by_field.trim(), "pod/web");

    let (ok, _, stderr) = kubectl(&kubeconfig, &["create", "-f", manifest, "--validate=false"]);
    assert!(!ok);
    assert!(
        stderr.contains("AlreadyExists") && stderr.contains("pods \"web\" already exists"),
        "{stderr}"
    );

    // Typed `create` subcommands send protobuf bodies.
    assert_eq!(
        kubectl_ok(&kubeconfig, &["create", "namespace", "team"]).trim(),
        "namespace/team created"
    );
    assert_eq!(
        kubectl_ok(
            &kubeconfig,
            &[
                "create",
                "deployment",
                "api",
                "--image=nginx:1.27",
                "--replicas=2"
            ]
        )
        .trim(),
        "deployment.apps/api created"
    );
    // `apply` of a changed manifest sends a strategic merge patch; `scale` patches /scale.
    let deployment = dir.path().join("deploy.yaml");
    let manifest_for = |replicas: u32, image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: nginx\n        image: {image}\n      - name: sidecar\n        image: busybox:1\n"
        )
    };
    std::fs::write(&deployment, manifest_for(1, "nginx:1.27")).expect("write");
    let deployment = deployment.to_str().expect("utf-8 path").to_owned();
    assert_eq!(
        kubectl_ok(
            &kubeconfig,
            &["apply", "-f", &deployment, "--validate=false"]
        )
        .trim(),
        "deployment.apps/web created"
    );
    std::fs::write(&deployment, manifest_for(3, "nginx:1.28")).expect("write");
    assert_eq!(
        kubectl_ok(
            &kubeconfig,
            &["apply", "-f", &deployment, "--validate=false"]
        )
        .trim(),
        "deployment.apps/web configured"
    );
    let images = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[*].image} {.metadata.generation}",
        ],
    );
    assert_eq!(images, "3 nginx:1.28 busybox:1 2");
    kubectl_ok(&kubeconfig, &["scale", "deploy/web", "--replicas=5"]);
    let replicas = kubectl_ok(
        &kubeconfig,
        &["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"],
    );
    assert_eq!(replicas, "5");
    let deployments = kubectl_ok(&kubeconfig, &["get", "deployments"]);
    let header: Vec<&str> = deployments
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{deployments}"
    );

    // Unscheduled pods go at once.
    let deleted = kubectl_ok(&kubeconfig, &["delete", "pod", "web", "--wait=false"]);
    assert_eq!(deleted.trim(), "pod \"web\" deleted");
    let (ok, _, stderr) = kubectl(&kubeconfig, &["get", "pod", "web"]);
    assert!(!ok);
    assert!(stderr.contains("NotFound"), "{stderr}");
}
