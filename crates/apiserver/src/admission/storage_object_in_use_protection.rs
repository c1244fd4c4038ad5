//! StorageObjectInUseProtection: new PersistentVolumes and claims carry the `kubernetes.io/pv-protection` / `kubernetes.io/pvc-protection` finalizer, which the protection controllers remove once nothing uses them (upstream's `plugin/pkg/admission/storage/storageobjectinuseprotection`).
//!
//! On by default, as in kube-apiserver. The finalizers are removed by kcm's
//! `persistentvolumeclaim-protection-controller` and `persistentvolume-protection-controller`;
//! an API server whose cluster runs neither keeps deleted claims and volumes `Terminating`, as
//! kube-apiserver without kube-controller-manager does.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::STORAGE_OBJECT_IN_USE_PROTECTION;
use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::resources::core::{PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES};

/// The finalizer of a protected PersistentVolume.
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";
/// The finalizer of a protected PersistentVolumeClaim.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";

/// The plugin.
#[derive(Debug, Default)]
pub struct StorageObjectInUseProtection;

#[async_trait]
impl Plugin for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        STORAGE_OBJECT_IN_USE_PROTECTION
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn admit(&self, _: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        let finalizer = if a.is_main(&PERSISTENT_VOLUMES) {
            PV_PROTECTION_FINALIZER
        } else if a.is_main(&PERSISTENT_VOLUME_CLAIMS) {
            PVC_PROTECTION_FINALIZER
        } else {
            return Ok(());
        };
        let Some(meta) = a
            .object
            .as_mut()
            .and_then(|o| o.get_mut("metadata"))
            .and_then(Value::as_object_mut)
        else {
            return Ok(());
        };
        let finalizers = meta.entry("finalizers").or_insert_with(|| json!([]));
        if !finalizers.is_array() {
            *finalizers = json!([]);
        }
        if let Some(list) = finalizers.as_array_mut()
            && !list.iter().any(|f| f.as_str() == Some(finalizer))
        {
            list.push(json!(finalizer));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;

    #[tokio::test]
    async fn volumes_and_claims_get_their_finalizer_once() {
        let user = UserInfo::admin();
        for (def, finalizer) in [
            (&PERSISTENT_VOLUMES, PV_PROTECTION_FINALIZER),
            (&PERSISTENT_VOLUME_CLAIMS, PVC_PROTECTION_FINALIZER),
        ] {
            for start in [json!([]), json!(["other"]), json!([finalizer])] {
                let obj = json!({"metadata": {"name": "x", "finalizers": start.clone()}});
                let mut a = Attributes::new(Operation::Create, def, "ns", "x", Some(obj), &user);
                StorageObjectInUseProtection
                    .admit(&Objects::default(), &mut a)
                    .await
                    .expect("admit");
                let got = a.object.unwrap_or_default();
                let list = got["metadata"]["finalizers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(
                    list.iter()
                        .filter(|f| f.as_str() == Some(finalizer))
                        .count(),
                    1,
                    "{start}"
                );
            }
        }
    }
}
