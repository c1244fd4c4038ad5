//! Transform hooks applied to objects before they are cached, as client-go's `TransformFunc`.

use std::sync::Arc;

use kube::Resource;

/// Rewrites an object on its way into the cache (e.g. to drop fields no controller reads and
/// save memory). Applied once per object received from the API server, before the DeltaFIFO
/// stores it; never to tombstones or resync deltas, which carry already cached objects.
pub type TransformFunc<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// Drops `metadata.managedFields`, which controllers never read and which is often the
/// largest part of an object. The default transform of every informer.
pub fn drop_managed_fields<K: Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

/// The default transform as a [`TransformFunc`].
pub fn default_transform<K: Resource + 'static>() -> TransformFunc<K> {
    Arc::new(drop_managed_fields::<K>)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kube::api::ObjectMeta;

    use super::*;

    #[test]
    fn default_transform_drops_managed_fields_only() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("a".into()),
                managed_fields: Some(vec![ManagedFieldsEntry {
                    manager: Some("kubectl".into()),
                    ..ManagedFieldsEntry::default()
                }]),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let out = default_transform::<Pod>()(pod);
        assert_eq!(out.metadata.managed_fields, None);
        assert_eq!(out.metadata.name.as_deref(), Some("a"));
    }
}
