//! Object references (`involvedObject` of events, the controller a pod-control call names): [`object_ref_of`].

use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A reference to `obj`: its type's apiVersion and kind, its namespace, name and UID (unset
/// where the object has none); no resourceVersion or field path.
pub fn object_ref_of<K: Metadata<Ty = ObjectMeta>>(obj: &K) -> ObjectReference {
    let m = obj.metadata();
    ObjectReference {
        api_version: Some(K::API_VERSION.to_owned()),
        kind: Some(K::KIND.to_owned()),
        namespace: m.namespace.clone(),
        name: m.name.clone(),
        uid: m.uid.clone(),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ReplicationController;

    use super::*;
    use crate::{MetaBuilder, meta};

    #[test]
    fn object_ref_of_names_kind_namespace_name_and_uid() {
        let rc = ReplicationController {
            metadata: meta("foobar").namespace("default").uid("uid-1").build(),
            ..ReplicationController::default()
        };
        assert_eq!(
            object_ref_of(&rc),
            ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ReplicationController".into()),
                namespace: Some("default".into()),
                name: Some("foobar".into()),
                uid: Some("uid-1".into()),
                ..ObjectReference::default()
            }
        );
    }
}
