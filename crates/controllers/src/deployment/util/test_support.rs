//! Small builders for the unit tests of this module, modelled on upstream's test helpers.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::Metadata;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
pub use kcm_testing::labels;
use kcm_testing::{
    MetaBuilder, PodSpecBuilder, WorkloadBuilder, container, pod_template, replica_set, selector,
};

/// A template with labels `foo=bar` and one `foo/bar` container.
pub fn template() -> PodTemplateSpec {
    pod_template()
        .labels(&[("foo", "bar")])
        .container(container("foo").image("foo/bar"))
        .build()
}

/// Upstream `newDeployment(name, replicas, nil, maxSurge=0, maxUnavailable=0, {foo: bar})`.
pub fn deployment(name: &str, replicas: i32) -> Deployment {
    deployment_with(name, replicas, IntOrString::Int(0), IntOrString::Int(0))
}

/// A rolling-update Deployment with the given fenceposts.
pub fn deployment_with(
    name: &str,
    replicas: i32,
    max_surge: IntOrString,
    max_unavailable: IntOrString,
) -> Deployment {
    kcm_testing::deployment(name)
        .namespace("default")
        .uid(format!("uid-{name}"))
        .annotations(&[])
        .replicas(replicas)
        .selector(selector(&[("foo", "bar")]))
        .rolling_update(max_surge, max_unavailable)
        .template(template())
        .build()
}

/// A Deployment with the given strategy type and no rolling-update parameters.
pub fn with_strategy(mut d: Deployment, strategy: &str) -> Deployment {
    if let Some(spec) = d.spec.as_mut() {
        spec.strategy = Some(DeploymentStrategy {
            type_: Some(strategy.to_owned()),
            rolling_update: None,
        });
    }
    d
}

/// Upstream `rs(name, replicas, nil, noTimestamp)`: a ReplicaSet with the default template.
pub fn rs(name: &str, replicas: i32) -> ReplicaSet {
    replica_set(name)
        .namespace("default")
        .uid(format!("uid-{name}"))
        .replicas(replicas)
        .selector(selector(&[("foo", "bar")]))
        .template(template())
        .build()
}

/// A ReplicaSet created at `ts`.
pub fn rs_at(name: &str, replicas: i32, ts: Timestamp) -> ReplicaSet {
    let mut r = rs(name, replicas);
    r.metadata.creation_timestamp = Some(Time(ts));
    r
}

/// Sets `status.replicas` and `status.availableReplicas`.
pub fn with_status(mut r: ReplicaSet, status_replicas: i32, available: i32) -> ReplicaSet {
    let status = r.status.get_or_insert_with(ReplicaSetStatus::default);
    status.replicas = status_replicas;
    status.available_replicas = Some(available);
    r
}

/// Adds annotations to any object.
pub fn with_annotations<T: Metadata<Ty = ObjectMeta>>(mut obj: T, pairs: &[(&str, &str)]) -> T {
    let annotations = obj
        .metadata_mut()
        .annotations
        .get_or_insert_with(BTreeMap::new);
    for (k, v) in pairs {
        annotations.insert((*k).to_owned(), (*v).to_owned());
    }
    obj
}

/// A UTC timestamp.
pub fn ts(year: i16, month: i8, day: i8, hour: i8, minute: i8, second: i8) -> Timestamp {
    jiff::civil::date(year, month, day)
        .at(hour, minute, second, 0)
        .to_zoned(jiff::tz::TimeZone::UTC)
        .expect("valid UTC time")
        .timestamp()
}
