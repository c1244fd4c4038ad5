//! One steady-state `sync` of the Deployment controller: a completed rollout with 11 ReplicaSets
//! (revisionHistoryLimit 10 plus the new one) and 30 pods, read from the caches, nothing to write.
//!
//! Run with `cargo bench -p kcm-controllers --bench deployment_controller`. The second case
//! puts 500 other Deployments' ReplicaSets in the same namespace: the claim pass looks at every
//! ReplicaSet of the namespace, as upstream's does.

use std::collections::BTreeMap;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, ReplicaSetStatus,
    RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_controllers::deployment::util::new_replica_set::new_replica_set;
use kcm_controllers::deployment::{
    DeploymentController, DeploymentControllerOptions, FakeDeploymentClient,
};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::store::Indexer;

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), app.to_owned())])
}

fn deployment(name: &str, version: usize) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(30),
            selector: LabelSelector {
                match_labels: Some(labels(name)),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(name)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some(format!("registry/web:v{version}")),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::String("25%".into())),
                    max_unavailable: Some(IntOrString::String("25%".into())),
                }),
            }),
            revision_history_limit: Some(10),
            progress_deadline_seconds: Some(600),
            ..Default::default()
        }),
        status: None,
    }
}

/// Revisions 1..=11 of `name`; the last runs the current template with every pod available.
fn replica_sets(name: &str) -> Vec<ReplicaSet> {
    (1..=11)
        .map(|v| {
            let mut rs = new_replica_set(&deployment(name, v), &[], &v.to_string()).expect("rs");
            let replicas = if v == 11 { 30 } else { 0 };
            rs.metadata.uid = rs.metadata.name.clone();
            rs.metadata.resource_version = Some("1".into());
            rs.metadata.generation = Some(1);
            rs.metadata.creation_timestamp = Some(Time(
                jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(v as i64),
            ));
            if let Some(s) = rs.spec.as_mut() {
                s.replicas = Some(replicas);
            }
            rs.status = Some(ReplicaSetStatus {
                replicas,
                ready_replicas: Some(replicas),
                available_replicas: Some(replicas),
                observed_generation: Some(1),
                ..Default::default()
            });
            rs
        })
        .collect()
}

fn pod(rs: &ReplicaSet, i: usize) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{i}",
                rs.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: Some("default".into()),
            labels: rs.metadata.labels.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: rs.metadata.name.clone().unwrap_or_default(),
                uid: rs.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: None,
        status: None,
    }
}

/// A controller whose caches hold `web` (settled: its status already written) and `others`
/// more Deployments' ReplicaSets in the namespace.
fn steady_controller(rt: &tokio::runtime::Runtime, others: usize) -> DeploymentController {
    let d_cache = Indexer::new();
    let rs_cache = Indexer::new();
    let pod_cache = Indexer::new();
    let client = Arc::new(FakeDeploymentClient::new());
    let d = deployment("web", 11);
    d_cache.add(Arc::new(d.clone())).expect("cache");
    client.insert_deployment(d.clone());
    for rs in replica_sets("web") {
        for i in 0..usize::try_from(rs.status.as_ref().map_or(0, |s| s.replicas)).unwrap_or(0) {
            pod_cache.add(Arc::new(pod(&rs, i))).expect("cache");
        }
        rs_cache.add(Arc::new(rs.clone())).expect("cache");
        client.insert_replica_set(rs);
    }
    for n in 0..others {
        for rs in replica_sets(&format!("other-{n}")).into_iter().take(1) {
            rs_cache.add(Arc::new(rs)).expect("cache");
        }
    }
    let controller = rt.block_on(async {
        DeploymentController::with_caches(
            d_cache.clone(),
            rs_cache,
            pod_cache,
            client.clone(),
            Arc::new(FakeRecorder::new()),
            DeploymentControllerOptions::default(),
        )
        .with_clock(Arc::new(|| jiff::Timestamp::UNIX_EPOCH))
    });
    // Two passes settle the status (revision, conditions); after that a sync writes nothing.
    for _ in 0..2 {
        rt.block_on(controller.sync("default/web")).expect("sync");
        let stored = client.deployment("default", "web").expect("stored");
        d_cache.update(Arc::new(stored)).expect("cache");
    }
    client.clear_actions();
    rt.block_on(controller.sync("default/web")).expect("sync");
    assert!(
        client.actions().is_empty(),
        "steady state: {:?}",
        client.actions()
    );
    controller
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for (name, others) in [("sync/steady/11rs", 0), ("sync/steady/11rs+500ns", 500)] {
        let controller = steady_controller(&rt, others);
        c.bench_function(name, |b| {
            b.to_async(&rt)
                .iter(|| async { controller.sync("default/web").await.expect("sync") })
        });
    }
}

criterion_group!(deployment_controller, benches);
criterion_main!(deployment_controller);
