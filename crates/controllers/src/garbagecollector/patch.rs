//! The patch bodies the collector sends: removing owner references, unblocking them, removing a finalizer (upstream `patch.go`).
//!
//! Owner references are edited with a strategic merge patch keyed by the owner's uid (the
//! `ownerReferences` list merges on `uid`), carrying the dependent's own uid so the patch
//! fails if the object was replaced. Resources that do not accept strategic merge patches
//! (custom resources answer 415) get the JSON merge patch form instead, which replaces the
//! whole list and carries the resourceVersion it was computed from.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};

/// A strategic merge patch deleting the owner references to `owner_uids` from the object
/// with `dependent_uid`, as upstream's `GenerateDeleteOwnerRefStrategicMergeBytes`.
pub fn delete_owner_refs_strategic(dependent_uid: &str, owner_uids: &[&str]) -> Value {
    let pieces: Vec<Value> = owner_uids
        .iter()
        .map(|uid| json!({"$patch": "delete", "uid": uid}))
        .collect();
    json!({"metadata": {"ownerReferences": pieces, "uid": dependent_uid}})
}

/// A JSON merge patch setting the owner references to `current` minus those to `owner_uids`,
/// guarded by `resource_version`, as upstream's `deleteOwnerRefJSONMergePatch`. An empty
/// result is sent as `null` (the field is removed).
pub fn delete_owner_refs_json_merge(
    resource_version: &str,
    current: &[OwnerReference],
    owner_uids: &[&str],
) -> Value {
    let kept: Vec<&OwnerReference> = current
        .iter()
        .filter(|r| !owner_uids.contains(&r.uid.as_str()))
        .collect();
    let refs = if kept.is_empty() {
        Value::Null
    } else {
        json!(kept)
    };
    json!({"metadata": {"resourceVersion": resource_version, "ownerReferences": refs}})
}

/// A strategic merge patch setting `blockOwnerDeletion: false` on every blocking reference of
/// `owners`, for the object with `uid`, as upstream's
/// `unblockOwnerReferencesStrategicMergePatch`.
pub fn unblock_owner_refs_strategic(uid: &str, owners: &[OwnerReference]) -> Value {
    let refs: Vec<OwnerReference> = owners
        .iter()
        .filter(|o| o.block_owner_deletion == Some(true))
        .map(|o| OwnerReference {
            block_owner_deletion: Some(false),
            ..o.clone()
        })
        .collect();
    json!({"metadata": {"ownerReferences": refs, "uid": uid}})
}

/// A JSON merge patch setting every reference of `owners` to `blockOwnerDeletion: false`,
/// guarded by `resource_version`, as upstream's `unblockOwnerReferencesJSONMergePatch`.
pub fn unblock_owner_refs_json_merge(resource_version: &str, owners: &[OwnerReference]) -> Value {
    let refs: Vec<OwnerReference> = owners
        .iter()
        .map(|o| OwnerReference {
            block_owner_deletion: Some(false),
            ..o.clone()
        })
        .collect();
    let refs = if refs.is_empty() {
        Value::Null
    } else {
        json!(refs)
    };
    json!({"metadata": {"resourceVersion": resource_version, "ownerReferences": refs}})
}

/// A JSON merge patch setting the finalizers to `finalizers`, guarded by `resource_version`
/// (a stale one is a 409 Conflict), as upstream's `objectForFinalizersPatch`.
pub fn finalizers_json_merge(resource_version: &str, finalizers: &[String]) -> Value {
    let finalizers = if finalizers.is_empty() {
        Value::Null
    } else {
        json!(finalizers)
    };
    json!({"metadata": {"resourceVersion": resource_version, "finalizers": finalizers}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(uid: &str, block: Option<bool>) -> OwnerReference {
        let r = kcm_testing::owner_ref("v1", "ReplicationController", &format!("rc-{uid}"), uid);
        match block {
            Some(block) => r.block_owner_deletion(block).build(),
            None => r.build(),
        }
    }

    #[test]
    fn delete_owner_refs_strategic_names_each_uid() {
        // As upstream's TestDeleteOwnerRefPatch (the patch; applying it is the server's job).
        assert_eq!(
            delete_owner_refs_strategic("100", &["2", "3"]),
            json!({"metadata": {"ownerReferences": [
                {"$patch": "delete", "uid": "2"},
                {"$patch": "delete", "uid": "3"},
            ], "uid": "100"}})
        );
    }

    #[test]
    fn delete_owner_refs_json_merge_keeps_the_others_or_nulls_the_list() {
        let current = [owner("1", None), owner("2", None), owner("3", None)];
        let patch = delete_owner_refs_json_merge("7", &current, &["2", "3"]);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(
            patch["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc-1", "uid": "1"}])
        );
        let patch = delete_owner_refs_json_merge("7", &current, &["1", "2", "3"]);
        assert_eq!(patch["metadata"]["ownerReferences"], Value::Null);
    }

    #[test]
    fn unblock_strategic_only_touches_blocking_references() {
        // As upstream's TestUnblockOwnerReference.
        let owners = [
            owner("1", Some(true)),
            owner("2", Some(false)),
            owner("3", None),
        ];
        let patch = unblock_owner_refs_strategic("100", &owners);
        assert_eq!(patch["metadata"]["uid"], "100");
        assert_eq!(
            patch["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc-1", "uid": "1",
                    "blockOwnerDeletion": false}])
        );
    }

    #[test]
    fn unblock_json_merge_sets_every_reference_non_blocking() {
        let owners = [owner("1", Some(true)), owner("3", None)];
        let patch = unblock_owner_refs_json_merge("9", &owners);
        let refs = patch["metadata"]["ownerReferences"]
            .as_array()
            .expect("array");
        assert!(refs.iter().all(|r| r["blockOwnerDeletion"] == false));
        assert_eq!(patch["metadata"]["resourceVersion"], "9");
    }

    #[test]
    fn finalizers_patch_nulls_an_empty_list() {
        assert_eq!(
            finalizers_json_merge("5", &[]),
            json!({"metadata": {"resourceVersion": "5", "finalizers": null}})
        );
        assert_eq!(
            finalizers_json_merge("5", &["a".to_string()]),
            json!({"metadata": {"resourceVersion": "5", "finalizers": ["a"]}})
        );
    }
}
