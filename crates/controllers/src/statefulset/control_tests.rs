//! Unit tests of the StatefulSet update logic, as upstream's `stateful_set_control_test.go`:
//! scale up and down in order or in parallel, failures, rolling updates with partitions and
//! `maxUnavailable`, `OnDelete`, revisions, start ordinals, claims and their retention.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_machinery::controller::api_status;
use kcm_testing::MetaBuilder;

use super::super::StatefulSetControllerOptions;
use super::super::test_support::{Fixture, fixture, fixture_with, new_set};
use super::super::utils::{
    POD_INDEX_LABEL, STATEFUL_SET_POD_NAME_LABEL, STATEFUL_SET_REVISION_LABEL, pod_revision,
};

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| format!("default/{n}")).collect()
}

/// Bumps the image (a template change: a new revision).
fn new_image(set: &mut k8s_openapi::api::apps::v1::StatefulSet, image: &str) {
    if let Some(c) = set
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .and_then(|p| p.containers.first_mut())
    {
        c.image = Some(image.into());
    }
}

// ---------------------------------------------------------------------------------------------
// Scaling
// ---------------------------------------------------------------------------------------------

/// Upstream's `ScalesUp` / `CreatesPodsWithPodManagementPolicy(OrderedReady)`: one pod at a
/// time, in order, each only after its predecessor is Running and Ready; claims first.
#[tokio::test]
async fn ordered_ready_creates_one_pod_at_a_time() {
    let f = fixture();
    f.add_set(&new_set(3).build());
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.pod_names(), ["web-0"]);
    assert_eq!(f.claim_names(), ["www-web-0"]);
    // web-0 is Pending: nothing more, however often it syncs.
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    f.set_running("web-0");
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        f.pod_names(),
        ["web-0"],
        "Running is not enough, it must be Ready"
    );
    f.set_ready("web-0");
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.pod_names(), ["web-0", "web-1"]);

    let order = f.scale_up(3, 10).await;
    assert_eq!(order, names(&["web-0", "web-1", "web-2"]));
    assert_eq!(f.claim_names(), ["www-web-0", "www-web-1", "www-web-2"]);
    // Every claim was created before its pod.
    let actions: Vec<String> = f
        .objects
        .actions()
        .into_iter()
        .map(|(verb, key)| format!("{verb} {key}"))
        .collect();
    let pos = |s: &str| actions.iter().position(|a| a == s).unwrap_or(usize::MAX);
    for i in 0..3 {
        assert!(
            pos(&format!("create_claim default/www-web-{i}"))
                < pos(&format!("create_pod default/web-{i}"))
        );
    }
    let status = f.status();
    assert_eq!(status.replicas, 3);
    assert_eq!(status.ready_replicas, Some(3));
    assert_eq!(status.available_replicas, Some(3));
    assert_eq!(status.current_replicas, Some(3));
    assert_eq!(status.updated_replicas, Some(3));
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.current_revision, status.update_revision);
    assert!(
        f.recorder
            .events()
            .iter()
            .any(|e| e.reason == "SuccessfulCreate"
                && e.message == "create Pod web-0 in StatefulSet web successful")
    );
    assert!(
        f.recorder
            .events()
            .iter()
            .any(|e| e.reason == "SuccessfulCreate"
                && e.message == "create Claim www-web-0 Pod web-0 in StatefulSet web success")
    );
}

/// A pod that runs but never becomes ready blocks the creation of the next.
#[tokio::test]
async fn a_never_ready_pod_blocks_the_next() {
    let f = fixture();
    f.add_set(&new_set(3).build());
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    f.set_ready("web-0");
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    f.set_running("web-1");
    for _ in 0..5 {
        f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(f.pod_names(), ["web-0", "web-1"]);
}

/// The identity of created pods: hostname, subdomain, labels, volumes, owner.
#[tokio::test]
async fn pods_have_stable_identities() {
    let f = fixture();
    f.add_set(&new_set(1).build());
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    let pod = f.pods().remove(0);
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(STATEFUL_SET_POD_NAME_LABEL).map(String::as_str),
        Some("web-0")
    );
    assert_eq!(labels.get(POD_INDEX_LABEL).map(String::as_str), Some("0"));
    assert!(labels.contains_key(STATEFUL_SET_REVISION_LABEL));
    let spec = pod.spec.clone().unwrap_or_default();
    assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
    assert_eq!(
        spec.volumes
            .unwrap_or_default()
            .first()
            .and_then(|v| v.persistent_volume_claim.clone())
            .map(|c| c.claim_name),
        Some("www-web-0".to_owned())
    );
    let owner = pod.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(
        owner.first().map(|o| (o.kind.as_str(), o.uid.as_str())),
        Some(("StatefulSet", "web-uid"))
    );
}

/// Upstream's `CreatesPodsWithPodManagementPolicy(Parallel)`: every pod at once.
#[tokio::test]
async fn parallel_creates_every_pod_at_once() {
    let f = fixture();
    f.add_set(&new_set(5).pod_management_policy("Parallel").build());
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.pod_names(), ["web-0", "web-1", "web-2", "web-3", "web-4"]);
    assert_eq!(f.claim_names().len(), 5);
}

/// `spec.ordinals.start`: pods are numbered from it.
#[tokio::test]
async fn start_ordinal_numbers_the_pods() {
    let f = fixture();
    f.add_set(&new_set(2).ordinals_start(5).build());
    f.scale_up(2, 10).await;
    assert_eq!(f.pod_names(), ["web-5", "web-6"]);
    // Moving the start: web-5 goes, web-7 comes.
    f.edit(|s| {
        s.spec.get_or_insert_default().ordinals =
            Some(k8s_openapi::api::apps::v1::StatefulSetOrdinals { start: Some(6) })
    });
    f.scale_up(2, 10).await;
    f.scale_down(2, 10).await;
    assert_eq!(f.pod_names(), ["web-6", "web-7"]);
}

/// Upstream's `ScalesDown`: in reverse order, one at a time.
#[tokio::test]
async fn ordered_ready_scales_down_in_reverse() {
    let f = fixture();
    f.add_set(&new_set(3).build());
    f.scale_up(3, 10).await;
    f.edit(|s| s.spec.get_or_insert_default().replicas = Some(1));
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        f.objects.of("delete_pod"),
        names(&["web-2"]),
        "one at a time"
    );
    let deleted = f.scale_down(1, 10).await;
    assert_eq!(deleted, names(&["web-2", "web-1"]));
    assert_eq!(f.pod_names(), ["web-0"]);
    assert_eq!(f.claim_names().len(), 3, "claims are retained by default");
    assert!(
        f.recorder
            .events()
            .iter()
            .any(|e| e.reason == "SuccessfulDelete"
                && e.message == "delete Pod web-2 in StatefulSet web successful")
    );
}

/// Scale-down waits for a terminating pod (monotonic mode).
#[tokio::test]
async fn scale_down_waits_for_termination() {
    let f = fixture();
    f.add_set(&new_set(3).build());
    f.scale_up(3, 10).await;
    f.set_terminating("web-2");
    f.edit(|s| s.spec.get_or_insert_default().replicas = Some(1));
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(f.objects.of("delete_pod").is_empty());
}

/// Upstream's `RecreatesFailedPod` / `RecreatesSucceededPod`: the finished pod is deleted,
/// and recreated on a later pass.
#[tokio::test]
async fn finished_pods_are_recreated() {
    for phase in ["Failed", "Succeeded"] {
        let f = fixture();
        f.add_set(&new_set(2).build());
        f.scale_up(2, 10).await;
        f.set_phase("web-1", phase);
        f.sync().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.objects.of("delete_pod"), names(&["web-1"]), "{phase}");
        f.sync().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.pod_names(), ["web-0", "web-1"], "{phase}: recreated");
    }
}

/// A failing pod creation is returned (and recorded as `FailedCreate`).
#[tokio::test]
async fn create_failures_are_errors_and_events() {
    let f = fixture();
    f.add_set(&new_set(1).build());
    f.objects
        .set_error("create_pod", Some(api_status::internal_error("boom")), 0);
    let err = f.sync().await.err();
    assert!(
        matches!(err, Some(super::super::Error::Pod { verb: "create", .. })),
        "{err:?}"
    );
    assert!(f.recorder.reasons().contains(&"FailedCreate".to_owned()));
}

/// A claim being deleted keeps its pod from being created.
#[tokio::test]
async fn a_claim_being_deleted_blocks_the_pod() {
    let f = fixture();
    let set = new_set(1).build();
    f.add_set(&set);
    let _ = f.caches.claims.add(std::sync::Arc::new(
        kcm_testing::pvc("www-web-0")
            .namespace("default")
            .deleted_at(super::super::test_support::now())
            .build(),
    ));
    let err = f.sync().await.err();
    assert!(
        matches!(err, Some(super::super::Error::ClaimBeingDeleted { .. })),
        "{err:?}"
    );
    assert!(f.pod_names().is_empty());
}

/// A pod whose identity drifted (its pod-name label removed) is fixed with an update.
#[tokio::test]
async fn identity_drift_is_fixed() {
    let f = fixture();
    f.add_set(&new_set(1).build());
    f.scale_up(1, 5).await;
    let mut pod = (*f.pods().remove(0)).clone();
    pod.metadata
        .labels
        .get_or_insert_default()
        .remove(STATEFUL_SET_POD_NAME_LABEL);
    let _ = f.caches.pods.update(std::sync::Arc::new(pod));
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.objects.of("update_pod"), names(&["web-0"]));
    let fixed = f.pods().remove(0);
    assert_eq!(
        fixed
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get(STATEFUL_SET_POD_NAME_LABEL)
            .map(String::as_str),
        Some("web-0")
    );
}

// ---------------------------------------------------------------------------------------------
// Updates
// ---------------------------------------------------------------------------------------------

/// Upstream's `TestStatefulSetControlRollingUpdate`: pods are replaced from the highest
/// ordinal down, one at a time (each replacement Ready before the next deletion), and the
/// update revision becomes current at the end.
#[tokio::test]
async fn rolling_update_replaces_pods_from_the_highest_ordinal() {
    let f = fixture();
    f.add_set(&new_set(3).build());
    f.scale_up(3, 10).await;
    let first = f.status().update_revision.unwrap_or_default();
    f.objects.clear();
    f.edit(|s| new_image(s, "nginx:2"));
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.objects.of("delete_pod"), names(&["web-2"]));
    let status = f.status();
    let second = status.update_revision.clone().unwrap_or_default();
    assert_ne!(first, second);
    assert_eq!(status.current_revision.as_deref(), Some(first.as_str()));

    for _ in 0..20 {
        f.sync().await.unwrap_or_else(|e| panic!("{e}"));
        f.set_all_ready();
    }
    assert_eq!(
        f.objects.of("delete_pod"),
        names(&["web-2", "web-1", "web-0"])
    );
    assert!(f.pods().iter().all(|p| pod_revision(p) == second));
    let status = f.status();
    assert_eq!(
        status.current_revision.as_deref(),
        Some(second.as_str()),
        "the rollout completed"
    );
    assert_eq!(status.updated_replicas, Some(3));
}

/// A partition of 2: only web-2 (and up) is updated.
#[tokio::test]
async fn partition_updates_only_ordinals_at_or_above_it() {
    let f = fixture();
    f.add_set(&new_set(3).partition(2).build());
    f.scale_up(3, 10).await;
    let first = f.status().update_revision.unwrap_or_default();
    f.objects.clear();
    f.edit(|s| new_image(s, "nginx:2"));
    for _ in 0..10 {
        f.sync().await.unwrap_or_else(|e| panic!("{e}"));
        f.set_all_ready();
    }
    assert_eq!(f.objects.of("delete_pod"), names(&["web-2"]));
    let second = f.status().update_revision.unwrap_or_default();
    let revisions: Vec<String> = f
        .pods()
        .iter()
        .map(|p| pod_revision(p).to_owned())
        .collect();
    assert_eq!(revisions, [first.clone(), first.clone(), second.clone()]);
    let status = f.status();
    assert_eq!(
        status.current_revision.as_deref(),
        Some(first.as_str()),
        "not complete below the partition"
    );
    assert_eq!(status.updated_replicas, Some(1));
    assert_eq!(status.current_replicas, Some(2));
}

/// `OnDelete`: nothing is deleted; a pod deleted by the user comes back at the new revision.
#[tokio::test]
async fn on_delete_updates_only_deleted_pods() {
    let f = fixture();
    f.add_set(&new_set(2).on_delete().build());
    f.scale_up(2, 10).await;
    f.objects.clear();
    f.edit(|s| new_image(s, "nginx:2"));
    for _ in 0..3 {
        f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(f.objects.of("delete_pod").is_empty());
    let second = f.status().update_revision.unwrap_or_default();
    // The user deletes web-1.
    if let Some(p) = f.caches.pods.get_by_key("default/web-1") {
        let _ = f.caches.pods.delete(&p);
    }
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    let web1 = f
        .pods()
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some("web-1"));
    assert_eq!(web1.map(|p| pod_revision(&p).to_owned()), Some(second));
}

/// Four Parallel pods with maxUnavailable 2, all running, then a new image and one sync.
async fn start_update_with_max_unavailable_2(f: &Fixture) {
    f.add_set(
        &new_set(4)
            .pod_management_policy("Parallel")
            .max_unavailable(IntOrString::Int(2))
            .build(),
    );
    f.scale_up(4, 10).await;
    f.objects.clear();
    f.edit(|s| new_image(s, "nginx:2"));
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
}

/// Upstream's `TestStatefulSetControlRollingUpdateWithMaxUnavailable`: with the
/// `MaxUnavailableStatefulSet` gate and maxUnavailable 2 (Parallel), two pods are replaced at
/// once.
#[tokio::test]
async fn max_unavailable_replaces_several_pods_at_once() {
    let f = fixture_with(StatefulSetControllerOptions {
        max_unavailable_stateful_set: true,
        ..StatefulSetControllerOptions::default()
    });
    start_update_with_max_unavailable_2(&f).await;
    assert_eq!(f.objects.of("delete_pod"), names(&["web-3", "web-2"]));
}

/// Without the `MaxUnavailableStatefulSet` gate (v1.36's default), maxUnavailable is not
/// honoured: the highest ordinal is replaced alone, and the next waits until it is available.
#[tokio::test]
async fn without_the_gate_pods_are_replaced_one_at_a_time() {
    let f = fixture();
    start_update_with_max_unavailable_2(&f).await;
    assert_eq!(f.objects.of("delete_pod"), names(&["web-3"]));
    // web-3 is recreated at the new revision but not yet ready: nothing more is deleted.
    f.objects.clear();
    for _ in 0..3 {
        f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(f.objects.of("delete_pod"), names(&[]));
}

/// Revisions: one per template; going back to an old template renumbers its revision;
/// history beyond `revisionHistoryLimit` is deleted when no pod uses it.
#[tokio::test]
async fn revisions_and_history() {
    let f = fixture();
    f.add_set(&new_set(1).revision_history_limit(1).build());
    f.scale_up(1, 5).await;
    assert_eq!(f.revisions.objects().len(), 1);
    for image in ["nginx:2", "nginx:3"] {
        f.edit(|s| new_image(s, image));
        for _ in 0..6 {
            f.sync().await.unwrap_or_else(|e| panic!("{e}"));
            f.set_all_ready();
        }
    }
    // r1 (nginx:1) is neither live nor within the limit of one old revision: deleted.
    let mut numbers: Vec<i64> = f.revisions.objects().iter().map(|r| r.revision).collect();
    numbers.sort();
    assert_eq!(numbers, [2, 3]);
    // Rolling back to nginx:2 reuses revision 2, renumbered 4.
    let r2 = f
        .revisions
        .objects()
        .into_iter()
        .find(|r| r.revision == 2)
        .and_then(|r| r.metadata.name);
    f.edit(|s| new_image(s, "nginx:2"));
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    let again = f
        .revisions
        .objects()
        .into_iter()
        .find(|r| r.metadata.name == r2)
        .map(|r| r.revision);
    assert_eq!(again, Some(4));
    assert_eq!(f.status().update_revision, r2);
}

// ---------------------------------------------------------------------------------------------
// Claims and retention
// ---------------------------------------------------------------------------------------------

/// `whenScaled: Delete`: the claim of a scaled-down pod gets the pod as its controller (so
/// the garbage collector deletes it with the pod); `whenDeleted: Delete`: claims in range are
/// owned by the set.
#[tokio::test]
async fn retention_policy_sets_claim_owners() {
    let f = fixture();
    f.add_set(&new_set(2).retention("Delete", "Delete").build());
    f.scale_up(2, 10).await;
    let owner_kinds = |name: &str| -> Vec<String> {
        f.claim(name)
            .and_then(|c| c.metadata.owner_references.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.kind)
            .collect()
    };
    assert_eq!(owner_kinds("www-web-0"), ["StatefulSet"]);
    assert_eq!(owner_kinds("www-web-1"), ["StatefulSet"]);
    f.edit(|s| s.spec.get_or_insert_default().replicas = Some(1));
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        owner_kinds("www-web-1"),
        ["Pod"],
        "the condemned pod owns its claim"
    );
    assert_eq!(f.objects.of("delete_pod"), names(&["web-1"]));
}

/// Retain/Retain (the default): claims get no owners at all.
#[tokio::test]
async fn retained_claims_have_no_owners() {
    let f = fixture();
    f.add_set(&new_set(1).build());
    f.scale_up(1, 5).await;
    assert_eq!(
        f.claim("www-web-0")
            .and_then(|c| c.metadata.owner_references.clone()),
        None
    );
}

/// Status writes that conflict are retried on the cached copy.
#[tokio::test]
async fn status_conflicts_are_retried() {
    let f = fixture();
    f.add_set(&new_set(1).build());
    f.set_client.fail_updates(vec![api_status::conflict(
        "statefulsets.apps",
        "web",
        "stale",
    )]);
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.set_client.status_updates().len(), 2);
    assert_eq!(f.status().observed_generation, Some(1));
}
