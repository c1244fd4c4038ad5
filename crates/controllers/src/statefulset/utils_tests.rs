//! Unit tests of the StatefulSet helpers, as upstream's `stateful_set_utils_test.go`.

use k8s_openapi::api::apps::v1::StatefulSetStatus;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_testing::{
    MetaBuilder, PodSpecBuilder, WorkloadBuilder, container, controller_ref_of, pod, pod_template,
    pvc, stateful_set,
};

use super::*;

/// A StatefulSet `default/foo` of `replicas` with one claim template `datadir`, as
/// upstream's `newStatefulSet`.
fn new_set(replicas: i32) -> StatefulSet {
    stateful_set("foo")
        .namespace("default")
        .uid("set-uid")
        .replicas(replicas)
        .selecting(&[("foo", "bar")])
        .container(container("nginx").image("nginx"))
        .service_name("governingsvc")
        .volume_claim_template(pvc("datadir").storage("1Gi"))
        .build()
}

#[test]
fn parent_name_and_ordinal_table() {
    let cases = [
        ("foo-1", ("foo", 1)),
        ("foo-bar-12", ("foo-bar", 12)),
        ("foo", ("", -1)),
        ("foo-", ("", -1)),
        ("foo-x1", ("", -1)),
        ("foo-99999999999", ("foo", -1)),
    ];
    for (name, want) in cases {
        let p = pod(name).build();
        assert_eq!(parent_name_and_ordinal(&p), want, "{name}");
    }
}

/// Upstream's `TestIdentityMatches`, `TestUpdateIdentity` and `TestNewStatefulSetPod`.
#[test]
fn new_pods_have_their_identity() {
    let set = new_set(3);
    let p = new_stateful_set_pod(&set, 1);
    assert_eq!(p.metadata.name.as_deref(), Some("foo-1"));
    assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
    assert!(identity_matches(&set, &p));
    assert!(storage_matches(&set, &p));
    let labels = p.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(STATEFUL_SET_POD_NAME_LABEL).map(String::as_str),
        Some("foo-1")
    );
    assert_eq!(labels.get(POD_INDEX_LABEL).map(String::as_str), Some("1"));
    assert_eq!(labels.get("foo").map(String::as_str), Some("bar"));
    let spec = p.spec.clone().unwrap_or_default();
    assert_eq!(spec.hostname.as_deref(), Some("foo-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("governingsvc"));
    let volumes = spec.volumes.unwrap_or_default();
    assert_eq!(volumes.len(), 1);
    assert_eq!(volumes[0].name, "datadir");
    assert_eq!(
        volumes[0]
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.as_str()),
        Some("datadir-foo-1")
    );
    let owner = p.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!(owner[0].kind, "StatefulSet");
    assert_eq!(owner[0].controller, Some(true));
    assert_eq!(p.metadata.generate_name, None);

    let mut renamed = p.clone();
    renamed.metadata.name = Some("foo-2".into());
    assert!(
        !identity_matches(&set, &renamed),
        "pod-name label disagrees"
    );
    update_identity(&set, &mut renamed);
    assert!(identity_matches(&set, &renamed));
    let mut other_ns = p.clone();
    other_ns.metadata.namespace = Some("other".into());
    assert!(!identity_matches(&set, &other_ns));
}

/// Upstream's `TestStorageMatches` and `TestUpdateStorage`: a conflicting local volume of the
/// claim's name is replaced; other volumes stay.
#[test]
fn storage_is_fixed_up() {
    let set = new_set(3);
    let mut p = new_stateful_set_pod(&set, 0);
    if let Some(spec) = p.spec.as_mut() {
        spec.volumes = Some(vec![
            Volume {
                name: "datadir".into(),
                empty_dir: Some(Default::default()),
                ..Volume::default()
            },
            Volume {
                name: "scratch".into(),
                empty_dir: Some(Default::default()),
                ..Volume::default()
            },
        ]);
    }
    assert!(!storage_matches(&set, &p));
    update_storage(&set, &mut p);
    assert!(storage_matches(&set, &p));
    let names: Vec<_> = p
        .spec
        .and_then(|s| s.volumes)
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["datadir", "scratch"]);
}

#[test]
fn claims_are_named_and_labelled_for_the_pod() {
    let set = new_set(3);
    let p = new_stateful_set_pod(&set, 2);
    let claims = persistent_volume_claims(&set, &p);
    let claim = claims.get("datadir").cloned().unwrap_or_default();
    assert_eq!(claim.metadata.name.as_deref(), Some("datadir-foo-2"));
    assert_eq!(claim.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(
        claim
            .metadata
            .labels
            .and_then(|l| l.get("foo").cloned())
            .as_deref(),
        Some("bar")
    );
}

/// Upstream's `TestStartOrdinal`-style ranges.
#[test]
fn ordinal_ranges_follow_the_start() {
    let set = stateful_set("foo").replicas(3).ordinals_start(5).build();
    assert_eq!((start_ordinal(&set), end_ordinal(&set)), (5, 7));
    assert!(pod_in_ordinal_range(&pod("foo-5").build(), &set));
    assert!(pod_in_ordinal_range(&pod("foo-7").build(), &set));
    assert!(!pod_in_ordinal_range(&pod("foo-4").build(), &set));
    assert!(!pod_in_ordinal_range(&pod("foo-8").build(), &set));
}

#[test]
fn running_ready_created_and_terminating() {
    let running = pod("p").phase("Running").ready().build();
    assert!(is_running_and_ready(&running));
    assert!(!is_running_and_ready(
        &pod("p").phase("Pending").ready().build()
    ));
    assert!(!is_running_and_ready(&pod("p").phase("Running").build()));
    assert!(is_created(&running));
    assert!(!is_created(&pod("p").build()));
    let deleting = pod("p")
        .phase("Running")
        .ready()
        .deleted_at(Timestamp::UNIX_EPOCH)
        .build();
    assert!(is_terminating(&deleting));
    assert!(is_unavailable(&deleting, 0, Timestamp::UNIX_EPOCH));
    assert!(!is_unavailable(&running, 0, Timestamp::UNIX_EPOCH));
}

/// Upstream's `TestGetStatefulSetMaxUnavailable`.
#[test]
fn max_unavailable_table() {
    let cases = [
        (None, 10, 1),
        (Some(IntOrString::Int(3)), 10, 3),
        (Some(IntOrString::String("10%".into())), 10, 1),
        (Some(IntOrString::String("50%".into())), 10, 5),
        (Some(IntOrString::String("1%".into())), 10, 1),
        (Some(IntOrString::String("55%".into())), 10, 5),
        (Some(IntOrString::String("100%".into())), 3, 3),
    ];
    for (value, replicas, want) in cases {
        assert_eq!(
            max_unavailable(value.as_ref(), replicas),
            Ok(want),
            "{value:?} of {replicas}"
        );
    }
}

/// Revisions round-trip: the patch restores the template, names follow the data and the
/// collision count, and the set's annotations are copied.
#[test]
fn revisions_apply_back() {
    let set = new_set(2);
    let r = new_revision(&set, 1, 0);
    assert_eq!(r.revision, 1);
    assert!(
        r.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("foo-"))
    );
    let mut changed = set.clone();
    if let Some(spec) = changed.spec.as_mut() {
        spec.template = pod_template()
            .labels(&[("foo", "bar")])
            .container(container("nginx").image("nginx:2"))
            .build();
    }
    let restored = apply_revision(&changed, &r).unwrap_or_else(|e| panic!("{e}"));
    // Equal as Go encodes them (the revision carries Go's zero-valued `resources: {}`).
    let go = |s: &StatefulSet| {
        pod_template_value(&s.spec.clone().map(|s| s.template).unwrap_or_default())
    };
    assert_eq!(go(&restored), go(&set));
    let bumped = new_revision(&changed, 1, 1);
    assert_ne!(
        bumped.metadata.name,
        new_revision(&changed, 1, 0).metadata.name
    );
    let annotated = stateful_set("foo")
        .annotation("kubernetes.io/change-cause", "v2")
        .build();
    let ar = new_revision(&annotated, 1, 0);
    assert_eq!(
        ar.metadata
            .annotations
            .and_then(|a| a.get("kubernetes.io/change-cause").cloned())
            .as_deref(),
        Some("v2")
    );
}

/// Upstream's `TestNewVersionedStatefulSetPod`-style: below the partition the current
/// revision, at or above it the update revision.
#[test]
fn versioned_pods_follow_the_partition() {
    let current = stateful_set("foo")
        .namespace("default")
        .replicas(3)
        .selecting(&[("a", "b")])
        .partition(2)
        .build();
    let mut update = current.clone();
    if let Some(spec) = update.spec.as_mut() {
        spec.template = PodTemplateSpec {
            metadata: spec.template.metadata.clone(),
            spec: Some(Default::default()),
        };
        spec.template
            .spec
            .get_or_insert_default()
            .containers
            .push(container("v2").build());
    }
    let p1 = new_versioned_stateful_set_pod(&current, &update, "rev-1", "rev-2", 1);
    let p2 = new_versioned_stateful_set_pod(&current, &update, "rev-1", "rev-2", 2);
    assert_eq!(pod_revision(&p1), "rev-1");
    assert_eq!(pod_revision(&p2), "rev-2");
    assert!(
        p2.spec
            .is_some_and(|s| s.containers.iter().any(|c| c.name == "v2"))
    );
}

#[test]
fn complete_rolling_update_moves_current_to_update() {
    let set = stateful_set("foo").replicas(2).build();
    let mut status = StatefulSetStatus {
        replicas: 2,
        ready_replicas: Some(2),
        updated_replicas: Some(2),
        current_replicas: Some(0),
        current_revision: Some("r1".into()),
        update_revision: Some("r2".into()),
        ..Default::default()
    };
    complete_rolling_update(&set, &mut status);
    assert_eq!(status.current_revision.as_deref(), Some("r2"));
    assert_eq!(status.current_replicas, Some(2));
    assert!(inconsistent_status(&set, &status));
}

/// Upstream's `TestIsClaimOwnerUpToDate` / `TestUpdateClaimOwnerRefForSetAndPod` table.
#[test]
fn claim_ownership_follows_the_retention_policy() {
    struct Case {
        name: &'static str,
        when_deleted: &'static str,
        when_scaled: &'static str,
        scaled_down: bool,
        want_set_ref: bool,
        want_pod_ref: bool,
    }
    let cases = [
        Case {
            name: "retain/retain",
            when_deleted: RETAIN,
            when_scaled: RETAIN,
            scaled_down: false,
            want_set_ref: false,
            want_pod_ref: false,
        },
        Case {
            name: "delete on set deletion",
            when_deleted: DELETE,
            when_scaled: RETAIN,
            scaled_down: false,
            want_set_ref: true,
            want_pod_ref: false,
        },
        Case {
            name: "delete on scale, in range",
            when_deleted: RETAIN,
            when_scaled: DELETE,
            scaled_down: false,
            want_set_ref: false,
            want_pod_ref: false,
        },
        Case {
            name: "delete on scale, scaled down",
            when_deleted: RETAIN,
            when_scaled: DELETE,
            scaled_down: true,
            want_set_ref: false,
            want_pod_ref: true,
        },
        Case {
            name: "delete/delete, in range",
            when_deleted: DELETE,
            when_scaled: DELETE,
            scaled_down: false,
            want_set_ref: true,
            want_pod_ref: false,
        },
        Case {
            name: "delete/delete, scaled down",
            when_deleted: DELETE,
            when_scaled: DELETE,
            scaled_down: true,
            want_set_ref: false,
            want_pod_ref: true,
        },
    ];
    for c in cases {
        let set = stateful_set("foo")
            .namespace("default")
            .uid("set-uid")
            .replicas(if c.scaled_down { 1 } else { 3 })
            .retention(c.when_deleted, c.when_scaled)
            .build();
        let p = pod("foo-2").namespace("default").uid("pod-uid").build();
        let mut claim = pvc("datadir-foo-2").namespace("default").build();
        // A claim with both references, and a foreign non-controller owner that must stay.
        claim.metadata.owner_references = Some(vec![
            controller_ref_of(&set),
            controller_ref_of(&p),
            kcm_testing::owner_ref("v1", "ConfigMap", "cm", "cm-uid").build(),
        ]);
        update_claim_owner_ref_for_set_and_pod(&mut claim, &set, &p);
        assert_eq!(
            has_owner_ref(&claim.metadata, &set.metadata),
            c.want_set_ref,
            "{}: set",
            c.name
        );
        assert_eq!(
            has_owner_ref(&claim.metadata, &p.metadata),
            c.want_pod_ref,
            "{}: pod",
            c.name
        );
        assert!(
            is_claim_owner_up_to_date(&claim, &set, &p),
            "{}: up to date after the update",
            c.name
        );
        assert!(
            claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == "cm-uid"),
            "{}: foreign owner kept",
            c.name
        );
    }
}

/// A claim owned by an earlier set of the same name is stale: left alone.
#[test]
fn stale_owner_refs_leave_the_claim_alone() {
    let set = stateful_set("foo")
        .uid("new")
        .retention(DELETE, DELETE)
        .replicas(1)
        .build();
    let p = pod("foo-0").uid("pod").build();
    let old_set = stateful_set("foo").uid("old").build();
    let mut claim = pvc("c").build();
    claim.metadata.owner_references = Some(vec![controller_ref_of(&old_set)]);
    assert!(has_stale_owner_ref(
        &claim,
        &set.metadata,
        &controller_kind()
    ));
    assert!(is_claim_owner_up_to_date(&claim, &set, &p));
    assert!(has_unexpected_controller(&claim, &set, &p));
}
