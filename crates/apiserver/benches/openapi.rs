//! OpenAPI benchmarks: building every v3 document (once per process), and the per-request cost of field validation and of server-side apply on a pod-sized object.
//!
//! Run: `cargo bench -p kcm-apiserver --bench openapi`.

use criterion::{Criterion, criterion_group, criterion_main};
use kcm_apiserver::fieldmanager::apply::apply;
use kcm_apiserver::fieldmanager::managed::Writer;
use kcm_apiserver::fieldmanager::walk::Scope;
use kcm_apiserver::openapi::OpenApi;
use kcm_apiserver::resources;
use serde_json::{Value, json};

/// A pod as a controller writes it: two containers with env, ports, mounts; a status.
fn pod() -> Value {
    let container = |name: &str| {
        json!({"name": name, "image": "registry.example.com/app:1.2.3", "args": ["--port=8080", "--verbose"],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d9f8b-abcde", "namespace": "default", "labels": {"app": "web", "pod-template-hash": "7d9f8b"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b", "uid": "u", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [container("app"), container("sidecar")], "volumes": [{"name": "data", "emptyDir": {}}],
            "nodeName": "node-1", "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "image": "i", "imageID": "", "started": true, "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}]},
    })
}

fn bench(c: &mut Criterion) {
    c.bench_function("openapi_build_all_documents", |b| {
        b.iter(|| OpenApi::build(resources::ALL))
    });
    let api = OpenApi::build(resources::ALL);
    let pod = pod();
    let pods = &resources::pod::PODS;
    c.bench_function("field_validation_pod", |b| {
        b.iter(|| api.unknown_fields(pods.openapi.as_ref(), &pod))
    });
    let root = pods.patch_schema().root();
    let writer = Writer {
        manager: "kubectl",
        api_version: "v1",
        subresource: "",
        now: "2025-01-01T00:00:00Z",
    };
    let scope = Scope::Main {
        status_subresource: true,
    };
    let live = apply(None, &pod, root, scope, writer, false).expect("first apply");
    c.bench_function("server_side_apply_pod_reapply", |b| {
        b.iter(|| apply(Some(&live), &pod, root, scope, writer, false).expect("reapply"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
