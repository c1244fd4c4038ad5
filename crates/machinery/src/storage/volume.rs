//! The matching rules of claims and volumes, as upstream's `component-helpers/storage/volume` (`FindMatchingVolume`, `CheckVolumeModeMismatches`, `CheckAccessModes`, `IsVolumeBoundToClaim`, the class helpers, `GetDefaultClass`) and `pkg/volume/util` (`CheckNodeAffinity`): the PV controller and the scheduler's volume binding share them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::labels::Selector;
use crate::quota::Amount;
use crate::scheduling::node_affinity::ParsedNodeSelector;
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec,
};
use k8s_openapi::api::storage::v1::StorageClass;

/// Set on a claim once its binding is complete (`AnnBindCompleted`).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a claim or volume the controller bound, not the user (`AnnBoundByController`).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The provisioner that made a volume (`AnnDynamicallyProvisioned`).
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
/// The provisioner asked to provision a claim (`AnnStorageProvisioner`).
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The deprecated beta spelling of [`ANN_STORAGE_PROVISIONER`] (`AnnBetaStorageProvisioner`).
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// The node the scheduler picked for a delayed-binding claim (`AnnSelectedNode`).
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// A volume handed to a CSI driver by migration (`AnnMigratedTo`): the PV controller stands
/// down from reclaiming it.
pub const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";
/// The class annotation that predates `storageClassName` (`v1.BetaStorageClassAnnotation`).
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// Marks the default StorageClass.
pub const IS_DEFAULT_STORAGE_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// The beta spelling of [`IS_DEFAULT_STORAGE_CLASS_ANNOTATION`].
pub const BETA_IS_DEFAULT_STORAGE_CLASS_ANNOTATION: &str =
    "storageclass.beta.kubernetes.io/is-default-class";
/// `volumeBindingMode: WaitForFirstConsumer`.
pub const VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// Whether `meta` carries annotation `key` (any value), as `metav1.HasAnnotation`.
pub fn has_annotation(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The class a claim asks for: the beta annotation, else `spec.storageClassName`, else `""`,
/// as `GetPersistentVolumeClaimClass`.
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(class) = annotation(&claim.metadata, BETA_STORAGE_CLASS_ANNOTATION) {
        return class;
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or_default()
}

/// Whether the claim names a class at all (even `""`), as `PersistentVolumeClaimHasClass`.
pub fn claim_has_class(claim: &PersistentVolumeClaim) -> bool {
    has_annotation(&claim.metadata, BETA_STORAGE_CLASS_ANNOTATION)
        || claim
            .spec
            .as_ref()
            .is_some_and(|s| s.storage_class_name.is_some())
}

/// The class of a volume, as `GetPersistentVolumeClass`.
pub fn volume_class(volume: &PersistentVolume) -> &str {
    if let Some(class) = annotation(&volume.metadata, BETA_STORAGE_CLASS_ANNOTATION) {
        return class;
    }
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or_default()
}

/// Whether the class is marked default (either annotation `"true"`), as
/// `IsDefaultAnnotation`.
pub fn is_default_class(class: &StorageClass) -> bool {
    [
        IS_DEFAULT_STORAGE_CLASS_ANNOTATION,
        BETA_IS_DEFAULT_STORAGE_CLASS_ANNOTATION,
    ]
    .iter()
    .any(|key| annotation(&class.metadata, key) == Some("true"))
}

/// The default class: of several, the newest, then the first by name, as `GetDefaultClass`.
pub fn default_class(classes: &[Arc<StorageClass>]) -> Option<Arc<StorageClass>> {
    let created = |c: &StorageClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
    classes
        .iter()
        .filter(|c| is_default_class(c))
        .min_by(|a, b| {
            created(b)
                .cmp(&created(a))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        })
        .cloned()
}

/// The `storage` quantity of a resource list in thousandths; a missing or unparsable value
/// is zero (Go's zero `Quantity`).
pub fn storage_milli(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> i128 {
    list.and_then(|l| l.get("storage"))
        .and_then(|q| Amount::parse(&q.0))
        .map_or(0, |a| a.milli)
}

/// What the claim requests, in thousandths of bytes.
pub fn requested_storage(claim: &PersistentVolumeClaim) -> i128 {
    storage_milli(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
    )
}

/// The volume's capacity, in thousandths of bytes.
pub fn volume_capacity(volume: &PersistentVolume) -> i128 {
    storage_milli(volume.spec.as_ref().and_then(|s| s.capacity.as_ref()))
}

/// Whether claim and volume ask for different volume modes (unset is `Filesystem`), as
/// `CheckVolumeModeMismatches`.
pub fn volume_mode_mismatches(
    claim: &PersistentVolumeClaimSpec,
    volume: &PersistentVolumeSpec,
) -> bool {
    let claim_mode = claim.volume_mode.as_deref().unwrap_or("Filesystem");
    let volume_mode = volume.volume_mode.as_deref().unwrap_or("Filesystem");
    claim_mode != volume_mode
}

/// Whether the volume offers every access mode the claim asks for, as `CheckAccessModes`.
pub fn access_modes_satisfied(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let offered = volume
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default();
    claim
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default()
        .iter()
        .all(|mode| offered.contains(mode))
}

/// The access modes as the index keys them: the set in the fixed order `RWO,ROX,RWX,RWOP`, as
/// `GetAccessModesAsString`.
pub fn access_modes_key(modes: &[String]) -> String {
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.iter().any(|m| m == mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The claim's `namespace/name`.
pub fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A claim reference's `namespace/name`, as `claimrefToClaimKey`.
pub fn claim_ref_key(claim_ref: &ObjectReference) -> String {
    format!(
        "{}/{}",
        claim_ref.namespace.as_deref().unwrap_or_default(),
        claim_ref.name.as_deref().unwrap_or_default()
    )
}

/// A reference to `claim`, as a volume's `claimRef` or an event's subject (upstream's
/// `reference.GetReference`).
pub fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("PersistentVolumeClaim".to_owned()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The volume's claim reference, if any.
pub fn claim_ref(volume: &PersistentVolume) -> Option<&ObjectReference> {
    volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
}

/// Whether the volume is bound (or pre-bound, the UID unset) to this claim, as
/// `IsVolumeBoundToClaim`.
pub fn is_volume_bound_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(claim_ref) = claim_ref(volume) else {
        return false;
    };
    if claim_ref.name != claim.metadata.name || claim_ref.namespace != claim.metadata.namespace {
        return false;
    }
    let ref_uid = claim_ref.uid.as_deref().unwrap_or_default();
    ref_uid.is_empty() || Some(ref_uid) == claim.metadata.uid.as_deref()
}

/// Whether the volume's node affinity admits a node with `labels`, as `CheckNodeAffinity`
/// (a volume without required affinity admits every node).
pub fn check_node_affinity(volume: &PersistentVolume, node: &Node) -> bool {
    let Some(required) = volume
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    ParsedNodeSelector::new(required).matches(node)
}

/// The phase of a volume (`""` when unset).
pub fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The phase of a claim (`""` when unset).
pub fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The best volume for `claim` among `volumes`, as `FindMatchingVolume`: a volume pre-bound to
/// the claim wins outright (unless `node` is given and the volume's affinity excludes it);
/// otherwise the smallest `Available` volume that is large enough, of the same volume mode,
/// VolumeAttributesClass and class, not being deleted, matching the claim's selector (and, with
/// `node`, admitting it and offering the claim's access modes). With `delay_binding` and no
/// node (the PV controller's path) only pre-bound volumes are considered: the scheduler binds
/// the others. Errors only when the claim's selector does not parse.
pub fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: impl IntoIterator<Item = &'a Arc<PersistentVolume>>,
    node: Option<&Node>,
    delay_binding: bool,
) -> Result<Option<Arc<PersistentVolume>>, String> {
    let no_claim_spec;
    let spec = match &claim.spec {
        Some(spec) => spec,
        None => {
            no_claim_spec = PersistentVolumeClaimSpec::default();
            &no_claim_spec
        }
    };
    let no_volume_spec = PersistentVolumeSpec::default();
    let requested = requested_storage(claim);
    let requested_class = claim_class(claim);
    let selector = match &spec.selector {
        Some(selector) => Some(Selector::from_label_selector(selector).map_err(|err| {
            format!(
                "error creating internal label selector for claim: {}: {err}",
                claim_key(claim)
            )
        })?),
        None => None,
    };
    let claim_vac = spec
        .volume_attributes_class_name
        .as_deref()
        .unwrap_or_default();
    let mut smallest: Option<(&Arc<PersistentVolume>, i128)> = None;
    for volume in volumes {
        if claim_ref(volume).is_some() && !is_volume_bound_to_claim(volume, claim) {
            continue;
        }
        let volume_spec = volume.spec.as_ref().unwrap_or(&no_volume_spec);
        let capacity = volume_capacity(volume);
        if capacity < requested {
            continue;
        }
        if volume_mode_mismatches(spec, volume_spec) {
            continue;
        }
        if volume_spec
            .volume_attributes_class_name
            .as_deref()
            .unwrap_or_default()
            != claim_vac
        {
            continue;
        }
        if volume.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let node_affinity_valid = node.is_none_or(|node| check_node_affinity(volume, node));
        if is_volume_bound_to_claim(volume, claim) {
            if !node_affinity_valid {
                return Ok(None);
            }
            return Ok(Some(Arc::clone(volume)));
        }
        if node.is_none() && delay_binding {
            continue;
        }
        if volume_phase(volume) != "Available" {
            continue;
        }
        if selector
            .as_ref()
            .is_some_and(|s| !s.matches_opt(volume.metadata.labels.as_ref()))
        {
            continue;
        }
        if volume_class(volume) != requested_class || !node_affinity_valid {
            continue;
        }
        if node.is_some() && !access_modes_satisfied(claim, volume) {
            continue;
        }
        if smallest.is_none_or(|(_, size)| size > capacity) {
            smallest = Some((volume, capacity));
        }
    }
    Ok(smallest.map(|(volume, _)| Arc::clone(volume)))
}

/// Why a volume the claim names in `spec.volumeName` cannot be bound to it, as
/// `checkVolumeSatisfyClaim`.
pub fn check_volume_satisfies_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Result<(), String> {
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    if volume.metadata.deletion_timestamp.is_some() {
        return Err(format!("the volume is marked for deletion {name:?}"));
    }
    if volume_capacity(volume) < requested_storage(claim) {
        return Err("requested PV is too small".to_owned());
    }
    if volume_class(volume) != claim_class(claim) {
        return Err("storageClassName does not match".to_owned());
    }
    let (no_claim_spec, no_volume_spec);
    let claim_spec = match &claim.spec {
        Some(spec) => spec,
        None => {
            no_claim_spec = PersistentVolumeClaimSpec::default();
            &no_claim_spec
        }
    };
    let volume_spec = match &volume.spec {
        Some(spec) => spec,
        None => {
            no_volume_spec = PersistentVolumeSpec::default();
            &no_volume_spec
        }
    };
    if claim_spec
        .volume_attributes_class_name
        .as_deref()
        .unwrap_or_default()
        != volume_spec
            .volume_attributes_class_name
            .as_deref()
            .unwrap_or_default()
    {
        return Err("volumeAttributesClassName does not match".to_owned());
    }
    if volume_mode_mismatches(claim_spec, volume_spec) {
        return Err("incompatible volumeMode".to_owned());
    }
    if !access_modes_satisfied(claim, volume) {
        return Err("incompatible accessMode".to_owned());
    }
    Ok(())
}

#[cfg(test)]
#[path = "volume_tests.rs"]
mod tests;
