//! Upstream's `controller_test.go`: caches seeded directly, `sync` called, the fake client's actions and the recorder's events compared.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::lister::Lister;
use kcm_machinery::informer::store::Indexer;

use super::*;
use crate::client::{Action, FakeSampleClient};
use crate::foo::{FooSpec, FooStatus};

/// A Foo in `default` with upstream's test values.
fn new_foo(name: &str, replicas: Option<i32>) -> Foo {
    Foo {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        spec: FooSpec {
            deployment_name: format!("{name}-deployment"),
            replicas,
        },
        status: FooStatus::default(),
    }
}

/// Caches, a fake client and a recorder around one controller (upstream's `fixture`).
struct Fixture {
    foos: Indexer<Foo>,
    deployments: Indexer<Deployment>,
    client: FakeSampleClient,
    recorder: FakeRecorder,
    controller: Controller,
}

impl Fixture {
    fn new() -> Self {
        let (foos, deployments) = (Indexer::new(), Indexer::new());
        let client = FakeSampleClient::new();
        let recorder = FakeRecorder::new();
        let controller = Controller::with_listers(
            Arc::new(client.clone()),
            Lister::new(foos.clone()),
            Lister::new(deployments.clone()),
            Arc::new(recorder.clone()),
        );
        Self {
            foos,
            deployments,
            client,
            recorder,
            controller,
        }
    }

    fn with_foo(self, foo: Foo) -> Self {
        self.foos.add(Arc::new(foo)).expect("add foo");
        self
    }

    fn with_deployment(self, d: Deployment) -> Self {
        self.deployments.add(Arc::new(d)).expect("add deployment");
        self
    }
}

fn status_of(foo: &Foo, available: i32) -> Foo {
    let mut copy = foo.clone();
    copy.status.available_replicas = available;
    copy
}

#[tokio::test]
async fn creates_a_deployment() {
    let foo = new_foo("test", Some(1));
    let f = Fixture::new().with_foo(foo.clone());
    f.controller.sync("default/test").await.expect("sync");
    assert_eq!(
        f.client.actions(),
        [
            Action::CreateDeployment(new_deployment(&foo)),
            Action::UpdateFooStatus(status_of(&foo, 0)),
        ]
    );
    let created = new_deployment(&foo);
    let owner = &created.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Foo", Some(true)));
    assert_eq!(owner.uid, "uid-test");
    assert_eq!(created.metadata.name.as_deref(), Some("test-deployment"));
    assert_eq!(created.spec.as_ref().and_then(|s| s.replicas), Some(1));
    assert_eq!(f.recorder.reasons(), [SUCCESS_SYNCED]);
    assert_eq!(f.recorder.events()[0].message, MESSAGE_RESOURCE_SYNCED);
}

#[tokio::test]
async fn does_nothing_but_status_when_in_step() {
    let foo = new_foo("test", Some(1));
    let mut d = new_deployment(&foo);
    d.status = Some(DeploymentStatus {
        available_replicas: Some(1),
        ..DeploymentStatus::default()
    });
    let f = Fixture::new().with_foo(foo.clone()).with_deployment(d);
    f.controller.sync("default/test").await.expect("sync");
    assert_eq!(
        f.client.actions(),
        [Action::UpdateFooStatus(status_of(&foo, 1))]
    );
}

#[tokio::test]
async fn scales_the_deployment_when_replicas_differ() {
    let foo = new_foo("test", Some(1));
    let mut d = new_deployment(&foo);
    let mut scaled_foo = foo.clone();
    scaled_foo.spec.replicas = Some(2);
    d.metadata.resource_version = Some("7".to_owned());
    let f = Fixture::new()
        .with_foo(scaled_foo.clone())
        .with_deployment(d);
    f.controller.sync("default/test").await.expect("sync");
    let mut want = new_deployment(&scaled_foo);
    want.metadata.resource_version = Some("7".to_owned());
    assert_eq!(
        f.client.actions(),
        [
            Action::UpdateDeployment(want),
            Action::UpdateFooStatus(status_of(&scaled_foo, 0)),
        ]
    );
}

#[tokio::test]
async fn leaves_a_deployment_it_does_not_control_alone() {
    let foo = new_foo("test", Some(1));
    let mut d = new_deployment(&foo);
    d.metadata.owner_references = None;
    let f = Fixture::new().with_foo(foo).with_deployment(d);
    let err = f
        .controller
        .sync("default/test")
        .await
        .expect_err("not ours");
    assert!(matches!(err, Error::ResourceExists(_)));
    assert!(f.client.actions().is_empty(), "nothing written");
    let events = f.recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, ERR_RESOURCE_EXISTS);
    assert_eq!(events[0].type_, EventType::Warning);
    assert_eq!(
        events[0].message,
        "Resource \"test-deployment\" already exists and is not managed by Foo"
    );
}

#[tokio::test]
async fn a_missing_foo_or_deployment_name_is_not_retried() {
    let f = Fixture::new().with_foo(Foo {
        spec: FooSpec::default(),
        ..new_foo("unnamed", None)
    });
    f.controller.sync("default/gone").await.expect("gone foo");
    f.controller.sync("default/unnamed").await.expect("no name");
    assert!(f.client.actions().is_empty());
}

#[tokio::test]
async fn deployments_enqueue_the_foo_that_controls_them() {
    let foo = new_foo("test", Some(1));
    let foos = Indexer::new();
    foos.add(Arc::new(foo.clone())).expect("add");
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    let lister = Lister::new(foos);
    handle_object(&queue, &lister, &new_deployment(&foo).metadata);
    assert_eq!(queue.len(), 1);
    let mut orphan = new_deployment(&new_foo("other", None));
    handle_object(&queue, &lister, &orphan.metadata);
    orphan.metadata.owner_references = None;
    handle_object(&queue, &lister, &orphan.metadata);
    assert_eq!(
        queue.len(),
        1,
        "only the existing controlling Foo is enqueued"
    );
}
