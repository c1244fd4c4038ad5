//! One steady-state `sync` of the Deployment controller: a completed rollout with 11 ReplicaSets
//! (revisionHistoryLimit 10 plus the new one) and 30 pods, read from the caches, nothing to write.
//!
//! Run with `cargo bench -p kcm-controllers --bench deployment_controller`. The second case
//! puts 500 other Deployments' ReplicaSets in the same namespace: the claim pass looks at every
//! ReplicaSet of the namespace, as upstream's does.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_controllers::deployment::util::new_replica_set::new_replica_set;
use kcm_controllers::deployment::{
    DeploymentController, DeploymentControllerOptions, FakeDeploymentClient,
};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::store::Indexer;
use kcm_testing::{MetaBuilder, WorkloadBuilder, container, controller_ref_of};

fn deployment(name: &str, version: usize) -> Deployment {
    let quarter = || IntOrString::String("25%".into());
    kcm_testing::deployment(name)
        .namespace("default")
        .uid(format!("uid-{name}"))
        .generation(1)
        .resource_version("1")
        .replicas(30)
        .selecting(&[("app", name)])
        .container(container("web").image(format!("registry/web:v{version}")))
        .rolling_update(quarter(), quarter())
        .revision_history_limit(10)
        .progress_deadline_seconds(600)
        .build()
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
    let mut pod = kcm_testing::pod(&format!(
        "{}-{i}",
        rs.metadata.name.as_deref().unwrap_or_default()
    ))
    .namespace("default")
    .owner(controller_ref_of(rs))
    .build();
    pod.metadata.labels = rs.metadata.labels.clone();
    pod
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
