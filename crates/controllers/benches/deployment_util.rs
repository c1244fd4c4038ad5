//! Hot paths of the Deployment controller's decision layer, per sync of one Deployment.
//!
//! Run with `cargo bench -p kcm-controllers --bench deployment_util`. The template is a
//! realistic single-container pod (ports, env, resources, probes); the Deployment has 11
//! ReplicaSets (revisionHistoryLimit 10 plus the new one).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_controllers::deployment::util::{find, scale, status, template};
use kcm_machinery::controller::hash;
use kcm_testing::{MetaBuilder, WorkloadBuilder, replica_set, selector};

const TEMPLATE: &str = r#"{
  "metadata": {"labels": {"app": "web"}},
  "spec": {
    "containers": [{
      "name": "web", "image": "registry/web:v@@V@@",
      "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
      "env": [{"name": "MODE", "value": "prod"}, {"name": "REGION", "value": "eu"}],
      "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "512Mi"}},
      "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
        "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
      "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"
    }],
    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
    "securityContext": {}
  }
}"#;

fn template(version: usize) -> PodTemplateSpec {
    serde_json::from_str(&TEMPLATE.replace("@@V@@", &version.to_string())).expect("template")
}

fn deployment() -> Deployment {
    let quarter = || IntOrString::String("25%".into());
    kcm_testing::deployment("web")
        .namespace("default")
        .uid("uid-web")
        .replicas(30)
        .selector(selector(&[("app", "web")]))
        .rolling_update(quarter(), quarter())
        .template(template(10))
        .build()
}

/// Revisions 0..=10; the last one runs the Deployment's template with the hash label added.
fn replica_sets() -> Vec<ReplicaSet> {
    (0..=10)
        .map(|v| {
            let mut t = template(v);
            if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
                labels.insert(
                    template::DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(),
                    format!("h{v}"),
                );
            }
            let (replicas, available) = if v >= 9 { (15, 12) } else { (0, 0) };
            replica_set(&format!("web-h{v}"))
                .replicas(replicas)
                .template(t)
                .status_replicas(replicas)
                .available_replicas(available)
                .build()
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let d = deployment();
    let rss = replica_sets();
    let refs: Vec<&ReplicaSet> = rss.iter().collect();
    let d_template = &d.spec.as_ref().expect("spec").template;
    let same = rss[10]
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .expect("template");
    let different = rss[0]
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .expect("template");

    c.bench_function("compute_hash", |b| {
        b.iter(|| hash::compute_hash(black_box(d_template), Some(0)))
    });
    // What kcm hashed before it matched upstream: FNV-32a over the canonical JSON. Kept as a
    // yardstick for the cost of rendering go-spew's text.
    c.bench_function("compute_hash/json_fnv_baseline", |b| {
        b.iter(|| {
            let mut hasher = hash::Fnv32a::new();
            serde_json::to_writer(&mut hasher, black_box(d_template)).expect("serialize");
            black_box(hasher.sum32())
        })
    });
    c.bench_function("equal_ignore_hash/equal", |b| {
        b.iter(|| template::equal_ignore_hash(black_box(d_template), black_box(same)))
    });
    c.bench_function("equal_ignore_hash/different", |b| {
        b.iter(|| template::equal_ignore_hash(black_box(d_template), black_box(different)))
    });
    c.bench_function("find_old_replica_sets/11", |b| {
        b.iter(|| find::find_old_replica_sets(black_box(&d), black_box(&refs)))
    });
    c.bench_function("scale/proportional", |b| {
        let mut scaled = d.clone();
        if let Some(s) = scaled.spec.as_mut() {
            s.replicas = Some(50);
        }
        b.iter(|| {
            let plan = scale::scale(black_box(&scaled), Some(refs[10]), black_box(&refs[..10]));
            black_box(plan.sizes().len())
        })
    });
    c.bench_function("calculate_status/11", |b| {
        let now = jiff::Timestamp::UNIX_EPOCH;
        b.iter(|| status::calculate_status(black_box(&refs), Some(refs[10]), black_box(&d), now))
    });
}

criterion_group!(deployment_util, benches);
criterion_main!(deployment_util);
