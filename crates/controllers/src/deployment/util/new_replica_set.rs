//! The new ReplicaSet of a rollout: building it, bringing an existing one up to date, and the
//! Deployment status changes around its creation, as the pure parts of upstream
//! `getNewReplicaSet` in `sync.go`.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::accessors::{
    annotation, deployment_min_ready_seconds, deployment_template, name, rs_min_ready_seconds,
    rs_template,
};
use super::annotations::{
    MAX_REV_HISTORY_LENGTH_IN_CHARS, REVISION_ANNOTATION, set_deployment_revision,
    set_new_replica_set_annotations,
};
use super::conditions::{
    CONDITION_FALSE, CONDITION_TRUE, DEPLOYMENT_PROGRESSING, FAILED_RS_CREATE_REASON,
    FOUND_NEW_RS_REASON, NEW_REPLICA_SET_REASON, get_condition_of, new_deployment_condition,
    set_deployment_condition,
};
use super::strategy::{self, has_progress_deadline, new_rs_new_replicas};
use super::template::{
    DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, clone_and_add_label, clone_selector_and_add_label,
    equal_ignore_hash,
};
use kcm_machinery::controller::hash::compute_hash;

/// `apiVersion` of the Deployments that own ReplicaSets.
pub const DEPLOYMENT_API_VERSION: &str = "apps/v1";
/// `kind` of the Deployments that own ReplicaSets.
pub const DEPLOYMENT_KIND: &str = "Deployment";

/// The controller reference a Deployment puts on its ReplicaSets (`metav1.NewControllerRef`:
/// controller and blockOwnerDeletion set).
pub fn controller_ref(d: &Deployment) -> OwnerReference {
    OwnerReference {
        api_version: DEPLOYMENT_API_VERSION.to_owned(),
        kind: DEPLOYMENT_KIND.to_owned(),
        name: name(&d.metadata).to_owned(),
        uid: d.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The `pod-template-hash` of the Deployment's current template and collision count.
pub fn pod_template_hash(d: &Deployment) -> String {
    let zero = PodTemplateSpec::default();
    let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
    compute_hash(deployment_template(d).unwrap_or(&zero), collision_count)
}

/// The ReplicaSet to create for the Deployment's current template: named
/// `<deployment>-<hash>`, the hash added to its labels, selector and pod template, owned by
/// the Deployment, sized by [`new_rs_new_replicas`] against `old_rss`, and annotated with
/// `new_revision` and the Deployment's annotations. As the create path of upstream
/// `getNewReplicaSet`.
pub fn new_replica_set(
    d: &Deployment,
    old_rss: &[&ReplicaSet],
    new_revision: &str,
) -> strategy::Result<ReplicaSet> {
    let hash = pod_template_hash(d);
    let mut template = deployment_template(d).cloned().unwrap_or_default();
    let labels = clone_and_add_label(
        template.metadata.as_ref().and_then(|m| m.labels.as_ref()),
        DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY,
        &hash,
    );
    template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels = Some(labels.clone());
    let selector = d
        .spec
        .as_ref()
        .map(|s| {
            clone_selector_and_add_label(&s.selector, DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, &hash)
        })
        .unwrap_or_default();
    let mut rs = ReplicaSet {
        metadata: ObjectMeta {
            // Deterministic, so a retried create after a lost response finds the same object.
            name: Some(replica_set_name(name(&d.metadata), &hash)),
            namespace: d.metadata.namespace.clone(),
            owner_references: Some(vec![controller_ref(d)]),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: d.spec.as_ref().and_then(|s| s.min_ready_seconds),
            selector,
            template: Some(template),
        }),
        status: None,
    };
    let mut all: Vec<&ReplicaSet> = old_rss.to_vec();
    all.push(&rs);
    let replicas = new_rs_new_replicas(d, &all, &rs)?;
    super::accessors::set_rs_replicas(&mut rs, replicas);
    set_new_replica_set_annotations(
        d,
        &mut rs,
        new_revision,
        false,
        MAX_REV_HISTORY_LENGTH_IN_CHARS,
    );
    Ok(rs)
}

/// The update to send for an existing new ReplicaSet: its annotations synced (revision raised
/// to `new_revision`, the Deployment's annotations copied) and `minReadySeconds` copied;
/// `None` when it is already up to date. As the existing-ReplicaSet path of upstream
/// `getNewReplicaSet`.
pub fn sync_existing_new_replica_set(
    d: &Deployment,
    existing: &ReplicaSet,
    new_revision: &str,
) -> Option<ReplicaSet> {
    let mut copy = existing.clone();
    let annotations_updated = set_new_replica_set_annotations(
        d,
        &mut copy,
        new_revision,
        true,
        MAX_REV_HISTORY_LENGTH_IN_CHARS,
    );
    let min_ready = deployment_min_ready_seconds(d);
    let min_ready_needs_update = rs_min_ready_seconds(&copy) != min_ready;
    if !annotations_updated && !min_ready_needs_update {
        return None;
    }
    if let Some(spec) = copy.spec.as_mut() {
        spec.min_ready_seconds = d.spec.as_ref().and_then(|s| s.min_ready_seconds);
    }
    Some(copy)
}

/// After finding an up-to-date new ReplicaSet: copy its revision onto the Deployment and, if
/// the Deployment has a deadline but no `Progressing` condition yet, add
/// `FoundNewReplicaSet`. True if the Deployment's annotations or status changed (upstream
/// then writes the status).
pub fn record_found_new_replica_set(d: &mut Deployment, rs: &ReplicaSet, now: Timestamp) -> bool {
    let revision = annotation(&rs.metadata, REVISION_ANNOTATION)
        .unwrap_or("")
        .to_owned();
    let mut needs_update = set_deployment_revision(d, &revision);
    if has_progress_deadline(d)
        && get_condition_of(d.status.as_ref(), DEPLOYMENT_PROGRESSING).is_none()
    {
        let condition = new_deployment_condition(
            DEPLOYMENT_PROGRESSING,
            CONDITION_TRUE,
            FOUND_NEW_RS_REASON,
            format!("Found new replica set {:?}", name(&rs.metadata)),
            now,
        );
        set_deployment_condition(d.status.get_or_insert_with(Default::default), condition);
        needs_update = true;
    }
    needs_update
}

/// After creating the new ReplicaSet (or finding it already created by us): set the
/// Deployment's revision and, for a fresh creation with a deadline, `NewReplicaSetCreated`.
/// True if the Deployment must be written.
pub fn record_new_replica_set_created(
    d: &mut Deployment,
    rs_name: &str,
    new_revision: &str,
    already_exists: bool,
    now: Timestamp,
) -> bool {
    let mut needs_update = set_deployment_revision(d, new_revision);
    if !already_exists && has_progress_deadline(d) {
        let condition = new_deployment_condition(
            DEPLOYMENT_PROGRESSING,
            CONDITION_TRUE,
            NEW_REPLICA_SET_REASON,
            format!("Created new replica set {rs_name:?}"),
            now,
        );
        set_deployment_condition(d.status.get_or_insert_with(Default::default), condition);
        needs_update = true;
    }
    needs_update
}

/// After failing to create the new ReplicaSet: the message of the `ReplicaSetCreateError`
/// warning event, and with a deadline a `Progressing=False` condition carrying it. Returns
/// `(message, status_changed)`.
pub fn record_new_replica_set_create_failure(
    d: &mut Deployment,
    rs_name: &str,
    error: &str,
    now: Timestamp,
) -> (String, bool) {
    let message = format!("Failed to create new replica set {rs_name:?}: {error}");
    if !has_progress_deadline(d) {
        return (message, false);
    }
    let condition = new_deployment_condition(
        DEPLOYMENT_PROGRESSING,
        CONDITION_FALSE,
        FAILED_RS_CREATE_REASON,
        message.clone(),
        now,
    );
    set_deployment_condition(d.status.get_or_insert_with(Default::default), condition);
    (message, true)
}

/// After a create failed with AlreadyExists: whether the existing ReplicaSet is ours (owned by
/// this Deployment and running its template, e.g. created by a previous sync whose cache was
/// stale). If not, it is a hash collision: see [`bump_collision_count`].
pub fn is_own_new_replica_set(d: &Deployment, existing: &ReplicaSet) -> bool {
    let owned = existing
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && Some(r.uid.as_str()) == d.metadata.uid.as_deref());
    let zero = PodTemplateSpec::default();
    owned
        && equal_ignore_hash(
            deployment_template(d).unwrap_or(&zero),
            rs_template(existing).unwrap_or(&zero),
        )
}

/// Increments `status.collisionCount` so the next sync computes a different hash; returns
/// `(before, after)`. The controller writes the status and returns the create error.
pub fn bump_collision_count(d: &mut Deployment) -> (i32, i32) {
    let status = d.status.get_or_insert_with(Default::default);
    let before = status.collision_count.unwrap_or(0);
    let after = before.saturating_add(1);
    status.collision_count = Some(after);
    (before, after)
}

/// Longest object name the API server accepts (`validation.DNS1123SubdomainMaxLength`).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// `<deployment>-<hash>`, with the Deployment name cut short when the result would exceed
/// the 253-character name limit (the hash is never cut), as upstream `generateReplicaSetName`.
pub fn replica_set_name(deployment_name: &str, hash: &str) -> String {
    let max_name_len = DNS1123_SUBDOMAIN_MAX_LENGTH
        .saturating_sub(1)
        .saturating_sub(hash.len());
    let mut name = deployment_name;
    if name.len() > max_name_len && max_name_len > 0 {
        let mut cut = max_name_len;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name = &name[..cut];
    }
    let mut out = String::with_capacity(name.len() + 1 + hash.len());
    out.push_str(name);
    out.push('-');
    out.push_str(hash);
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DeploymentStatus;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::super::accessors::{annotations_mut, rs_replicas};
    use super::super::annotations::{
        CHANGE_CAUSE_ANNOTATION, DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION,
    };
    use super::super::conditions::{get_deployment_condition, reason};
    use super::super::test_support::{deployment, deployment_with, rs, ts, with_annotations};
    use super::*;

    fn hash_label(rs: &ReplicaSet) -> Option<&str> {
        rs.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY))
            .map(String::as_str)
    }

    #[test]
    fn new_replica_set_carries_hash_owner_and_annotations() {
        let mut d = deployment_with("web", 10, IntOrString::Int(3), IntOrString::Int(1));
        annotations_mut(&mut d.metadata)
            .insert(CHANGE_CAUSE_ANNOTATION.into(), "kubectl apply".into());
        let old = rs("web-old", 10);
        let created = new_replica_set(&d, &[&old], "2").expect("builds");
        let hash = pod_template_hash(&d);
        assert_eq!(
            created.metadata.name.as_deref(),
            Some(format!("web-{hash}").as_str())
        );
        assert_eq!(hash_label(&created), Some(hash.as_str()));
        let spec = created.spec.as_ref().expect("spec");
        assert_eq!(
            spec.selector
                .match_labels
                .as_ref()
                .and_then(|l| l.get(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY))
                .map(String::as_str),
            Some(hash.as_str())
        );
        let template_labels = spec
            .template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.as_ref())
            .expect("template labels");
        assert_eq!(template_labels.get("foo").map(String::as_str), Some("bar"));
        assert_eq!(
            template_labels.get(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY),
            Some(&hash)
        );
        // The Deployment's own template is untouched and still matches (ignoring the hash).
        assert!(is_own_new_replica_set(&d, &created));
        // 10 old pods + maxSurge 3: the new ReplicaSet starts at 3.
        assert_eq!(rs_replicas(&created), 3);
        assert_eq!(
            annotation(&created.metadata, REVISION_ANNOTATION),
            Some("2")
        );
        assert_eq!(
            annotation(&created.metadata, DESIRED_REPLICAS_ANNOTATION),
            Some("10")
        );
        assert_eq!(
            annotation(&created.metadata, MAX_REPLICAS_ANNOTATION),
            Some("13")
        );
        assert_eq!(
            annotation(&created.metadata, CHANGE_CAUSE_ANNOTATION),
            Some("kubectl apply")
        );
        let owner = &created.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Deployment", "uid-web")
        );
        assert_eq!(
            (owner.controller, owner.block_owner_deletion),
            (Some(true), Some(true))
        );
    }

    #[test]
    fn collision_count_renames_the_new_replica_set() {
        let mut d = deployment("web", 1);
        let first = new_replica_set(&d, &[], "1").expect("builds");
        assert_eq!(bump_collision_count(&mut d), (0, 1));
        let second = new_replica_set(&d, &[], "1").expect("builds");
        assert_ne!(first.metadata.name, second.metadata.name);
        assert_eq!(bump_collision_count(&mut d), (1, 2));
    }

    #[test]
    fn foreign_or_different_replica_set_is_a_collision() {
        let d = deployment("web", 1);
        let ours = new_replica_set(&d, &[], "1").expect("builds");
        let mut foreign = ours.clone();
        if let Some(refs) = foreign.metadata.owner_references.as_mut() {
            refs[0].uid = "someone-else".into();
        }
        assert!(!is_own_new_replica_set(&d, &foreign));
        let mut other_template = ours.clone();
        if let Some(c) = other_template
            .spec
            .as_mut()
            .and_then(|s| s.template.as_mut())
            .and_then(|t| t.spec.as_mut())
            .and_then(|s| s.containers.first_mut())
        {
            c.image = Some("other".into());
        }
        assert!(!is_own_new_replica_set(&d, &other_template));
        assert!(is_own_new_replica_set(&d, &ours));
    }

    #[test]
    fn sync_existing_new_replica_set_table() {
        struct Case {
            name: &'static str,
            rs_annotations: &'static [(&'static str, &'static str)],
            rs_min_ready: Option<i32>,
            new_revision: &'static str,
            updated: bool,
        }
        let cases = [
            Case {
                name: "up to date",
                rs_annotations: &[(REVISION_ANNOTATION, "3")],
                rs_min_ready: Some(5),
                new_revision: "3",
                updated: false,
            },
            Case {
                name: "revision behind",
                rs_annotations: &[(REVISION_ANNOTATION, "2")],
                rs_min_ready: Some(5),
                new_revision: "3",
                updated: true,
            },
            Case {
                name: "minReadySeconds changed",
                rs_annotations: &[(REVISION_ANNOTATION, "3")],
                rs_min_ready: None,
                new_revision: "3",
                updated: true,
            },
        ];
        for c in cases {
            let mut d = deployment("web", 1);
            if let Some(s) = d.spec.as_mut() {
                s.min_ready_seconds = Some(5);
            }
            let mut existing = with_annotations(rs("web-1", 1), c.rs_annotations);
            if let Some(s) = existing.spec.as_mut() {
                s.min_ready_seconds = c.rs_min_ready;
            }
            let got = sync_existing_new_replica_set(&d, &existing, c.new_revision);
            assert_eq!(got.is_some(), c.updated, "{}", c.name);
            if let Some(updated) = got {
                assert_eq!(rs_min_ready_seconds(&updated), 5, "{}", c.name);
                assert_eq!(
                    annotation(&updated.metadata, REVISION_ANNOTATION),
                    Some(c.new_revision),
                    "{}",
                    c.name
                );
            }
        }
    }

    #[test]
    fn deployment_side_records() {
        let now = ts(2020, 1, 1, 0, 0, 0);
        let with_deadline = || {
            let mut d = deployment("web", 1);
            if let Some(s) = d.spec.as_mut() {
                s.progress_deadline_seconds = Some(600);
            }
            d
        };
        // Found: revision copied, FoundNewReplicaSet added once.
        let mut d = with_deadline();
        let found = with_annotations(rs("web-1", 1), &[(REVISION_ANNOTATION, "4")]);
        assert!(record_found_new_replica_set(&mut d, &found, now));
        assert_eq!(annotation(&d.metadata, REVISION_ANNOTATION), Some("4"));
        let status = d.status.clone().unwrap_or_default();
        let c = get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).expect("added");
        assert_eq!(reason(c), FOUND_NEW_RS_REASON);
        assert_eq!(
            c.message.as_deref(),
            Some("Found new replica set \"web-1\"")
        );
        assert!(!record_found_new_replica_set(&mut d, &found, now));

        // Created: NewReplicaSetCreated unless it already existed.
        let mut d = with_deadline();
        assert!(record_new_replica_set_created(
            &mut d, "web-2", "5", false, now
        ));
        let status = d.status.clone().unwrap_or_default();
        let c = get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).expect("added");
        assert_eq!(reason(c), NEW_REPLICA_SET_REASON);
        let mut d = deployment("web", 1);
        d.status = Some(DeploymentStatus::default());
        assert!(
            record_new_replica_set_created(&mut d, "web-2", "5", true, now),
            "revision changed"
        );
        assert!(!record_new_replica_set_created(
            &mut d, "web-2", "5", true, now
        ));

        // Create failure: message and Progressing=False with a deadline only.
        let mut d = with_deadline();
        let (msg, changed) =
            record_new_replica_set_create_failure(&mut d, "web-3", "quota exceeded", now);
        assert_eq!(
            msg,
            "Failed to create new replica set \"web-3\": quota exceeded"
        );
        assert!(changed);
        let status = d.status.clone().unwrap_or_default();
        let c = get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).expect("added");
        assert_eq!(
            (c.status.as_str(), reason(c)),
            (CONDITION_FALSE, FAILED_RS_CREATE_REASON)
        );
        let mut d = deployment("web", 1);
        assert!(!record_new_replica_set_create_failure(&mut d, "web-3", "x", now).1);
    }

    #[test]
    fn replica_set_name_truncates_like_upstream() {
        struct Case {
            name: &'static str,
            deployment: String,
            hash: String,
            want: String,
        }
        let cases = [
            Case {
                name: "short name",
                deployment: "my-deployment".into(),
                hash: "abcde12345".into(),
                want: "my-deployment-abcde12345".into(),
            },
            Case {
                name: "maximum length without truncating",
                deployment: "a".repeat(242),
                hash: "abcde12345".into(),
                want: "a".repeat(242) + "-abcde12345",
            },
            Case {
                name: "very long deployment name is truncated",
                deployment: "b".repeat(250),
                hash: "abcde12345".into(),
                want: "b".repeat(242) + "-abcde12345",
            },
            Case {
                name: "very long hash is not truncated",
                deployment: "d".repeat(252),
                hash: "h".repeat(252),
                want: "d".repeat(252) + "-" + &"h".repeat(252),
            },
        ];
        for c in cases {
            assert_eq!(
                replica_set_name(&c.deployment, &c.hash),
                c.want,
                "{}",
                c.name
            );
        }
    }
}
