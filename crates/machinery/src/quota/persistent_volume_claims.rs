//! The PersistentVolumeClaim evaluator's pure parts (kubernetes `pkg/quota/v1/evaluator/core/persistent_volume_claims.go`).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::resource_list::{Amount, ResourceList};

/// `<class>.storageclass.storage.k8s.io/<resource>` charges a resource to one class.
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
/// The names the claim evaluator charges (`pvcResources`).
const PVC_RESOURCES: [&str; 3] = [
    "persistentvolumeclaims",
    "count/persistentvolumeclaims",
    "requests.storage",
];
/// The beta annotation that names a claim's class before `spec.storageClassName`.
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The names of `input` the claim evaluator charges, per class ones included.
pub fn matching_resources<'a>(input: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    input
        .into_iter()
        .filter(|n| {
            PVC_RESOURCES.contains(&n.as_str())
                || PVC_RESOURCES
                    .iter()
                    .any(|r| n.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
        })
        .cloned()
        .collect()
}

/// The claim's class (`storagehelpers.GetPersistentVolumeClaimClass`).
fn storage_class(pvc: &PersistentVolumeClaim) -> &str {
    if let Some(class) = pvc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
    {
        return class;
    }
    pvc.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// The claim's usage (`pvcEvaluator.Usage`): one claim and its requested storage (the larger
/// of the request and what an expansion already allocated), also charged to its class.
pub fn usage(pvc: &PersistentVolumeClaim) -> ResourceList {
    let mut result = ResourceList::new();
    result.insert("persistentvolumeclaims".to_owned(), Amount::count(1));
    result.insert("count/persistentvolumeclaims".to_owned(), Amount::count(1));
    let class = storage_class(pvc);
    if !class.is_empty() {
        result.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            Amount::count(1),
        );
    }
    let requested = pvc
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| Amount::parse(&q.0));
    let allocated = pvc
        .status
        .as_ref()
        .and_then(|s| s.allocated_resources.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| Amount::parse(&q.0));
    let storage = match (requested, allocated) {
        (Some(r), Some(a)) if a.milli > r.milli => Some(a),
        (Some(r), _) => Some(r),
        (None, a) => a,
    };
    if let Some(storage) = storage {
        result.insert("requests.storage".to_owned(), storage);
        if !class.is_empty() {
            result.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                storage,
            );
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::quota::resource_list::pretty_print;

    #[test]
    fn usage_charges_the_class() {
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {},
            "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "10Gi"}}}
        }))
        .expect("pvc");
        assert_eq!(
            pretty_print(&usage(&pvc)),
            "count/persistentvolumeclaims=1,gold.storageclass.storage.k8s.io/persistentvolumeclaims=1,gold.storageclass.storage.k8s.io/requests.storage=10Gi,persistentvolumeclaims=1,requests.storage=10Gi"
        );
        let names: Vec<String> = [
            "requests.storage",
            "pods",
            "gold.storageclass.storage.k8s.io/requests.storage",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            matching_resources(&names),
            [
                "requests.storage",
                "gold.storageclass.storage.k8s.io/requests.storage"
            ]
        );
    }
}
