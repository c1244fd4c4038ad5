//! StatefulSet identity, storage, retention, revision and status helpers, as upstream's `stateful_set_utils.go`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_machinery::controller::history::{new_controller_revision, pod_template_value};
use kcm_machinery::controller::pod_control::get_pod_from_template;
use kcm_machinery::controller::{is_pod_available, is_pod_ready, new_controller_ref};
use kcm_machinery::intstr;
use kube::Resource;
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

/// The pod label naming the pod (`statefulset.kubernetes.io/pod-name`), as apps/v1
/// `StatefulSetPodNameLabel`; a headless Service can select one pod with it.
pub const STATEFUL_SET_POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The pod label holding the pod's ordinal, as apps/v1 `PodIndexLabel` (feature `PodIndexLabel`,
/// on by default since 1.28).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The pod label holding the revision a pod was made from, as apps/v1
/// `StatefulSetRevisionLabel` (`ControllerRevisionHashLabelKey`).
pub const STATEFUL_SET_REVISION_LABEL: &str = "controller-revision-hash";

/// `apps/v1 StatefulSet`.
pub fn controller_kind() -> GroupVersionKind {
    GroupVersionKind::gvk("apps", "v1", "StatefulSet")
}

/// `v1 Pod`.
pub fn pod_kind() -> GroupVersionKind {
    GroupVersionKind::gvk("", "v1", "Pod")
}

/// `spec.replicas`, 1 when unset (the API default).
pub fn replicas(set: &StatefulSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `spec.minReadySeconds`, 0 when unset.
pub fn min_ready_seconds(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// The update strategy's type, `RollingUpdate` when unset (the API default).
pub fn strategy_type(set: &StatefulSet) -> &str {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

/// `spec.updateStrategy.rollingUpdate`, when given.
pub fn rolling_update(
    set: &StatefulSet,
) -> Option<&k8s_openapi::api::apps::v1::RollingUpdateStatefulSetStrategy> {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref())
}

/// `spec.updateStrategy.rollingUpdate.partition`, 0 when unset.
pub fn partition(set: &StatefulSet) -> i32 {
    rolling_update(set).and_then(|r| r.partition).unwrap_or(0)
}

/// `spec.revisionHistoryLimit`, 10 when unset.
pub fn revision_history_limit(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10)
}

/// Splits a pod name into its parent's name and ordinal (`web-2` → `("web", 2)`), as
/// upstream's `getParentNameAndOrdinal` (regexp `(.*)-([0-9]+)$`); `("", -1)` when it has no
/// ordinal.
pub fn parent_name_and_ordinal(pod: &Pod) -> (&str, i32) {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let Some((parent, digits)) = name.rsplit_once('-') else {
        return ("", -1);
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return ("", -1);
    }
    // Digits that overflow an int32 match the pattern but parse to no ordinal.
    (parent, digits.parse::<i32>().unwrap_or(-1))
}

/// The pod's ordinal, -1 when it has none, as `getOrdinal`.
pub fn ordinal(pod: &Pod) -> i32 {
    parent_name_and_ordinal(pod).1
}

/// `spec.ordinals.start`, 0 when unset, as `getStartOrdinal`.
pub fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

/// The last ordinal the set wants (inclusive), as `getEndOrdinal`.
pub fn end_ordinal(set: &StatefulSet) -> i32 {
    start_ordinal(set) + replicas(set) - 1
}

/// Whether the pod's ordinal is one the set wants, as `podInOrdinalRange`.
pub fn pod_in_ordinal_range(pod: &Pod, set: &StatefulSet) -> bool {
    let o = ordinal(pod);
    o >= start_ordinal(set) && o <= end_ordinal(set)
}

/// `<set>-<ordinal>`, as `getPodName`.
pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!(
        "{}-{ordinal}",
        set.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `<claim template>-<set>-<ordinal>`, as `getPersistentVolumeClaimName`.
pub fn persistent_volume_claim_name(
    set: &StatefulSet,
    claim: &PersistentVolumeClaim,
    ordinal: i32,
) -> String {
    format!(
        "{}-{}-{ordinal}",
        claim.metadata.name.as_deref().unwrap_or_default(),
        set.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether `pod` is named as a member of `set`, as `isMemberOf`.
pub fn is_member_of(set: &StatefulSet, pod: &Pod) -> bool {
    parent_name_and_ordinal(pod).0 == set.metadata.name.as_deref().unwrap_or_default()
}

fn pod_label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Whether `pod` has the name, namespace and pod-name label of a member of `set`, as
/// `identityMatches`.
pub fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let (parent, ord) = parent_name_and_ordinal(pod);
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    ord >= 0
        && set.metadata.name.as_deref().unwrap_or_default() == parent
        && name == pod_name(set, ord)
        && pod.metadata.namespace == set.metadata.namespace
        && pod_label(pod, STATEFUL_SET_POD_NAME_LABEL) == Some(name)
}

fn claim_templates(set: &StatefulSet) -> &[PersistentVolumeClaim] {
    set.spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_deref())
        .unwrap_or(&[])
}

/// Whether `pod` mounts every claim of `set`'s templates under the template's name, as
/// `storageMatches`.
pub fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let ord = ordinal(pod);
    if ord < 0 {
        return false;
    }
    let volumes: BTreeMap<&str, &Volume> = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .map(|v| (v.name.as_str(), v))
        .collect();
    claim_templates(set).iter().all(|claim| {
        let template_name = claim.metadata.name.as_deref().unwrap_or_default();
        volumes
            .get(template_name)
            .and_then(|v| v.persistent_volume_claim.as_ref())
            .is_some_and(|pvc| pvc.claim_name == persistent_volume_claim_name(set, claim, ord))
    })
}

/// The PVC retention policy, `Retain`/`Retain` when unset, as
/// `getPersistentVolumeClaimRetentionPolicy`: `(whenDeleted, whenScaled)`.
pub fn retention_policy(set: &StatefulSet) -> (String, String) {
    let policy = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let pick = |v: Option<&String>| v.cloned().unwrap_or_else(|| RETAIN.to_owned());
    (
        pick(policy.and_then(|p| p.when_deleted.as_ref())),
        pick(policy.and_then(|p| p.when_scaled.as_ref())),
    )
}

/// The `Retain` retention policy.
pub const RETAIN: &str = "Retain";
/// The `Delete` retention policy.
pub const DELETE: &str = "Delete";

/// Whether `owner_ref` names `meta` of kind `gvk` (name and kind, not UID), as `matchesRef`.
fn matches_ref(owner_ref: &OwnerReference, meta: &ObjectMeta, gvk: &GroupVersionKind) -> bool {
    gvk.api_version() == owner_ref.api_version
        && gvk.kind == owner_ref.kind
        && meta.name.as_deref() == Some(owner_ref.name.as_str())
}

fn claim_owners(claim: &PersistentVolumeClaim) -> &[OwnerReference] {
    claim.metadata.owner_references.as_deref().unwrap_or(&[])
}

/// Whether the claim has a controller other than the set or pod (or a reference to an
/// earlier set or pod of the same name), under a policy that deletes claims, as
/// `hasUnexpectedController`.
pub fn has_unexpected_controller(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    let (when_deleted, when_scaled) = retention_policy(set);
    if when_scaled == RETAIN && when_deleted == RETAIN {
        return false;
    }
    for owner in claim_owners(claim) {
        if matches_ref(owner, &set.metadata, &controller_kind()) {
            if Some(owner.uid.as_str()) != set.metadata.uid.as_deref() {
                return true;
            }
            continue;
        }
        if matches_ref(owner, &pod.metadata, &pod_kind()) {
            if Some(owner.uid.as_str()) != pod.metadata.uid.as_deref() {
                return true;
            }
            continue;
        }
        if owner.controller == Some(true) {
            return true;
        }
    }
    false
}

/// Whether the set or pod is an owner but not the controller of the claim, as
/// `hasNonControllerOwner`.
fn has_non_controller_owner(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> bool {
    claim_owners(claim).iter().any(|owner| {
        (Some(owner.uid.as_str()) == set.metadata.uid.as_deref()
            || Some(owner.uid.as_str()) == pod.metadata.uid.as_deref())
            && owner.controller != Some(true)
    })
}

/// Whether `target` has an owner reference with `owner`'s UID, as `hasOwnerRef`.
pub fn has_owner_ref(target: &ObjectMeta, owner: &ObjectMeta) -> bool {
    let uid = owner.uid.as_deref().unwrap_or_default();
    target
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == uid)
}

/// Whether the claim references an object named like `meta` of kind `gvk` with another
/// UID (a deleted predecessor), as `hasStaleOwnerRef`.
pub fn has_stale_owner_ref(
    claim: &PersistentVolumeClaim,
    meta: &ObjectMeta,
    gvk: &GroupVersionKind,
) -> bool {
    claim_owners(claim)
        .iter()
        .find(|r| matches_ref(r, meta, gvk))
        .is_some_and(|r| Some(r.uid.as_str()) != meta.uid.as_deref())
}

/// Whether the claim's owner references already implement the retention policy for `pod`,
/// as `isClaimOwnerUpToDate`: `Delete` when the set is deleted means the set owns it,
/// `Delete` when scaled means a pod scaled away owns it. Claims with stale or unexpected
/// owners are left alone.
pub fn is_claim_owner_up_to_date(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    if has_stale_owner_ref(claim, &set.metadata, &controller_kind())
        || has_stale_owner_ref(claim, &pod.metadata, &pod_kind())
    {
        return true;
    }
    if has_unexpected_controller(claim, set, pod) {
        return !(has_owner_ref(&claim.metadata, &set.metadata)
            || has_owner_ref(&claim.metadata, &pod.metadata));
    }
    if has_non_controller_owner(claim, set, pod) {
        return false;
    }
    let (when_deleted, when_scaled) = retention_policy(set);
    let set_ref = has_owner_ref(&claim.metadata, &set.metadata);
    let pod_ref = has_owner_ref(&claim.metadata, &pod.metadata);
    let scaled_down = !pod_in_ordinal_range(pod, set);
    match (when_scaled.as_str(), when_deleted.as_str()) {
        (DELETE, DELETE) => scaled_down != set_ref && scaled_down == pod_ref,
        (DELETE, _) => !set_ref && scaled_down == pod_ref,
        (_, DELETE) => set_ref && !pod_ref,
        _ => !set_ref && !pod_ref,
    }
}

/// Rewrites the claim's owner references to implement the retention policy for `pod`, as
/// `updateClaimOwnerRefForSetAndPod` (references to the set and pod are scrubbed first; with
/// an unexpected controller none are added back).
pub fn update_claim_owner_ref_for_set_and_pod(
    claim: &mut PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) {
    let unexpected = has_unexpected_controller(claim, set, pod);
    let mut refs: Vec<OwnerReference> = claim_owners(claim)
        .iter()
        .filter(|r| {
            !matches_ref(r, &set.metadata, &controller_kind())
                && !matches_ref(r, &pod.metadata, &pod_kind())
        })
        .cloned()
        .collect();
    if !unexpected {
        let (when_deleted, when_scaled) = retention_policy(set);
        let scaled_down = !pod_in_ordinal_range(pod, set);
        let add = |refs: &mut Vec<OwnerReference>, meta: &ObjectMeta, gvk: &GroupVersionKind| {
            if !refs
                .iter()
                .any(|r| Some(r.uid.as_str()) == meta.uid.as_deref())
            {
                refs.push(new_controller_ref(meta, gvk));
            }
        };
        match (when_scaled.as_str(), when_deleted.as_str()) {
            (DELETE, DELETE) => {
                if scaled_down {
                    add(&mut refs, &pod.metadata, &pod_kind());
                } else {
                    add(&mut refs, &set.metadata, &controller_kind());
                }
            }
            (DELETE, _) if scaled_down => add(&mut refs, &pod.metadata, &pod_kind()),
            (_, DELETE) => add(&mut refs, &set.metadata, &controller_kind()),
            _ => {}
        }
    }
    claim.metadata.owner_references = (!refs.is_empty()).then_some(refs);
}

/// The claims `pod` needs, by template name: each template named for the pod, in the set's
/// namespace, labelled with the set's `matchLabels`, as `getPersistentVolumeClaims`.
pub fn persistent_volume_claims(
    set: &StatefulSet,
    pod: &Pod,
) -> BTreeMap<String, PersistentVolumeClaim> {
    let ord = ordinal(pod);
    let match_labels = set
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    claim_templates(set)
        .iter()
        .map(|template| {
            let mut claim = template.clone();
            claim.metadata.name = Some(persistent_volume_claim_name(set, template, ord));
            claim.metadata.namespace = set.metadata.namespace.clone();
            claim
                .metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(match_labels.clone());
            (template.metadata.name.clone().unwrap_or_default(), claim)
        })
        .collect()
}

/// Points the pod's volumes at its claims (replacing same-named volumes), as `updateStorage`.
pub fn update_storage(set: &StatefulSet, pod: &mut Pod) {
    let claims = persistent_volume_claims(set, pod);
    let spec = pod.spec.get_or_insert_with(Default::default);
    let current = spec.volumes.take().unwrap_or_default();
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(name, claim)| Volume {
            name: name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.metadata.name.clone().unwrap_or_default(),
                read_only: Some(false),
            }),
            ..Volume::default()
        })
        .collect();
    volumes.extend(
        current
            .into_iter()
            .filter(|v| !claims.contains_key(&v.name)),
    );
    spec.volumes = (!volumes.is_empty()).then_some(volumes);
}

/// Sets the name, namespace and identity labels, plus (on creation only) the hostname and
/// subdomain, as `initIdentity`.
pub fn init_identity(set: &StatefulSet, pod: &mut Pod) {
    update_identity(set, pod);
    let name = pod.metadata.name.clone();
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = name;
    spec.subdomain = set
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty());
}

/// Sets the name, namespace, pod-name label and pod-index label the ordinal implies, as
/// `updateIdentity`.
pub fn update_identity(set: &StatefulSet, pod: &mut Pod) {
    let ord = ordinal(pod);
    let name = pod_name(set, ord);
    pod.metadata.name = Some(name.clone());
    pod.metadata.namespace = set.metadata.namespace.clone();
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(STATEFUL_SET_POD_NAME_LABEL.to_owned(), name);
    labels.insert(POD_INDEX_LABEL.to_owned(), ord.to_string());
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Running with a Ready condition, as `isRunningAndReady`.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && is_pod_ready(pod)
}

/// Available for `min_ready_seconds` at `now`, as `isRunningAndAvailable`.
pub fn is_running_and_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    is_pod_available(pod, min_ready_seconds, now)
}

/// Known to the API server (it has a phase), as `isCreated`.
pub fn is_created(pod: &Pod) -> bool {
    !phase(pod).is_empty()
}

/// Phase `Pending`, as `isPending`.
pub fn is_pending(pod: &Pod) -> bool {
    phase(pod) == "Pending"
}

/// Phase `Failed`, as `isFailed`.
pub fn is_failed(pod: &Pod) -> bool {
    phase(pod) == "Failed"
}

/// Phase `Succeeded`, as `isSucceeded`.
pub fn is_succeeded(pod: &Pod) -> bool {
    phase(pod) == "Succeeded"
}

/// Being deleted, as `isTerminating`.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Not available, or being deleted, as `isUnavailable`.
pub fn is_unavailable(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    !is_running_and_available(pod, min_ready_seconds, now) || is_terminating(pod)
}

/// Whether pods may be created and deleted in parallel (`podManagementPolicy: Parallel`), as
/// `allowsBurst`.
pub fn allows_burst(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        == Some("Parallel")
}

/// Labels the pod with `revision`, as `setPodRevision`.
pub fn set_pod_revision(pod: &mut Pod, revision: &str) {
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(STATEFUL_SET_REVISION_LABEL.to_owned(), revision.to_owned());
}

/// The pod's revision label, empty when it has none, as `getPodRevision`.
pub fn pod_revision(pod: &Pod) -> &str {
    pod_label(pod, STATEFUL_SET_REVISION_LABEL).unwrap_or_default()
}

/// The pod a set creates for `ordinal`: from the template, owned by the set, with its
/// identity (hostname, subdomain, labels) and volumes, as `newStatefulSetPod`.
pub fn new_stateful_set_pod(set: &StatefulSet, ordinal: i32) -> Pod {
    let template = set
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let controller_ref = new_controller_ref(&set.metadata, &controller_kind());
    let mut pod = get_pod_from_template(&template, &set.object_ref(&()), Some(&controller_ref));
    pod.metadata.generate_name = None;
    pod.metadata.name = Some(pod_name(set, ordinal));
    init_identity(set, &mut pod);
    update_storage(set, &mut pod);
    pod
}

/// The pod for `ordinal` at the revision it should have: the current revision below the
/// partition (rolling updates), the update revision otherwise, as
/// `newVersionedStatefulSetPod` (including Go's operator precedence in its condition).
pub fn new_versioned_stateful_set_pod(
    current_set: &StatefulSet,
    update_set: &StatefulSet,
    current_revision: &str,
    update_revision: &str,
    ordinal: i32,
) -> Pod {
    let start = start_ordinal(current_set);
    let rolling = rolling_update(current_set);
    let current_replicas = current_set
        .status
        .as_ref()
        .and_then(|s| s.current_replicas)
        .unwrap_or(0);
    let use_current = (strategy_type(current_set) == "RollingUpdate"
        && rolling.is_none()
        && ordinal < start + current_replicas)
        || rolling.is_some_and(|r| ordinal < start + r.partition.unwrap_or(0));
    if use_current {
        let mut pod = new_stateful_set_pod(current_set, ordinal);
        set_pod_revision(&mut pod, current_revision);
        return pod;
    }
    let mut pod = new_stateful_set_pod(update_set, ordinal);
    set_pod_revision(&mut pod, update_revision);
    pod
}

/// The strategic-merge patch that restores the set's template, the data of its revisions, as
/// upstream's `getPatch`.
pub fn get_patch(set: &StatefulSet) -> Value {
    let template = set
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let mut value = pod_template_value(&template);
    if let Some(t) = value.as_object_mut() {
        t.insert("$patch".to_owned(), Value::String("replace".to_owned()));
    }
    json!({"spec": {"template": value}})
}

/// A revision of `set` numbered `revision` (named with `collision_count`), carrying the set's
/// annotations, as `newRevision`.
pub fn new_revision(set: &StatefulSet, revision: i64, collision_count: i32) -> ControllerRevision {
    let labels = set
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    let mut cr = new_controller_revision(
        &set.metadata,
        &controller_kind(),
        labels,
        get_patch(set),
        revision,
        Some(collision_count),
    );
    let annotations = cr.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.extend(set.metadata.annotations.clone().unwrap_or_default());
    cr
}

/// Why a revision cannot be applied.
#[derive(Debug, thiserror::Error)]
#[error("revision {revision} does not hold a pod template: {source}")]
pub struct ApplyRevisionError {
    /// The revision's name.
    pub revision: String,
    /// The decoding error.
    #[source]
    pub source: serde_json::Error,
}

/// `set` with the template the revision records (its `spec.template` replace patch), as
/// upstream's `ApplyRevision`.
pub fn apply_revision(
    set: &StatefulSet,
    revision: &ControllerRevision,
) -> Result<StatefulSet, ApplyRevisionError> {
    let mut template = revision
        .data
        .as_ref()
        .and_then(|d| d.0.pointer("/spec/template").cloned())
        .unwrap_or(Value::Null);
    if let Some(t) = template.as_object_mut() {
        t.remove("$patch");
    }
    let mut restored = set.clone();
    if template.is_null() {
        return Ok(restored);
    }
    let template = serde_json::from_value(template).map_err(|source| ApplyRevisionError {
        revision: revision.metadata.name.clone().unwrap_or_default(),
        source,
    })?;
    if let Some(spec) = restored.spec.as_mut() {
        spec.template = template;
    }
    Ok(restored)
}

/// Whether `status` differs from the set's in anything that is written, as
/// `inconsistentStatus` (absent counts are zero).
pub fn inconsistent_status(set: &StatefulSet, status: &StatefulSetStatus) -> bool {
    let default = StatefulSetStatus::default();
    let cur = set.status.as_ref().unwrap_or(&default);
    let n = |v: Option<i32>| v.unwrap_or(0);
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    status.observed_generation.unwrap_or(0) > cur.observed_generation.unwrap_or(0)
        || status.replicas != cur.replicas
        || n(status.current_replicas) != n(cur.current_replicas)
        || n(status.ready_replicas) != n(cur.ready_replicas)
        || n(status.updated_replicas) != n(cur.updated_replicas)
        || s(&status.current_revision) != s(&cur.current_revision)
        || n(status.available_replicas) != n(cur.available_replicas)
        || s(&status.update_revision) != s(&cur.update_revision)
}

/// Marks a finished rolling update: every replica updated and ready, so the update revision
/// becomes the current one, as `completeRollingUpdate`.
pub fn complete_rolling_update(set: &StatefulSet, status: &mut StatefulSetStatus) {
    let want = replicas(set);
    if strategy_type(set) == "RollingUpdate"
        && status.updated_replicas.unwrap_or(0) == want
        && status.ready_replicas.unwrap_or(0) == want
        && status.replicas == want
    {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
}

/// Orders pods by ascending ordinal (pods without one first), as `ascendingOrdinal`.
pub fn compare_ascending_ordinal(a: &Pod, b: &Pod) -> Ordering {
    ordinal(a).cmp(&ordinal(b))
}

/// Sorts pods by descending ordinal, as `descendingOrdinal`.
pub fn sort_descending_ordinal(pods: &mut [Arc<Pod>]) {
    pods.sort_by(|a, b| compare_ascending_ordinal(b, a));
}

/// The number of pods a rolling update may take down at once (at least 1), as
/// `getStatefulSetMaxUnavailable`.
pub fn max_unavailable(
    value: Option<&IntOrString>,
    replica_count: i32,
) -> Result<i32, intstr::Error> {
    let default = IntOrString::Int(1);
    let n = intstr::scaled_value(Some(value.unwrap_or(&default)), replica_count, false)?;
    Ok(n.max(1))
}

/// Orders overlapping StatefulSets, oldest (then by name) first, as
/// `overlappingStatefulSets`.
pub fn compare_overlapping(a: &StatefulSet, b: &StatefulSet) -> Ordering {
    let t = |s: &StatefulSet| s.metadata.creation_timestamp.as_ref().map(|t| t.0);
    t(a).cmp(&t(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

#[cfg(test)]
#[path = "utils_tests.rs"]
mod tests;
