//! The storage protection finalizers and when a protection controller adds or removes one (upstream's `protectionutil` and the finalizer constants of `pkg/volume/util`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Keeps a PersistentVolumeClaim while a pod uses it (upstream's `PVCProtectionFinalizer`).
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
/// Keeps a PersistentVolume while it is bound (upstream's `PVProtectionFinalizer`).
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";
/// Keeps a VolumeAttributesClass while a volume or claim names it (upstream's
/// `VACProtectionFinalizer`).
pub const VAC_PROTECTION_FINALIZER: &str = "kubernetes.io/vac-protection";

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

/// Whether the object is being deleted and still carries `finalizer`: its protection
/// controller decides whether to let it go, as upstream's `IsDeletionCandidate`.
pub fn is_deletion_candidate(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, finalizer)
}

/// Whether the object is live and lacks `finalizer`, as upstream's `NeedToAddFinalizer` (the
/// admission plugin adds it at creation; the controller catches objects created without it).
pub fn need_to_add_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_none() && !has_finalizer(meta, finalizer)
}

/// `meta` with `finalizer` appended.
pub fn with_finalizer(meta: &ObjectMeta, finalizer: &str) -> ObjectMeta {
    let mut meta = meta.clone();
    meta.finalizers
        .get_or_insert_default()
        .push(finalizer.to_owned());
    meta
}

/// `meta` without any `finalizer` (upstream's `slice.RemoveString`, which leaves no list when
/// none remain).
pub fn without_finalizer(meta: &ObjectMeta, finalizer: &str) -> ObjectMeta {
    let mut meta = meta.clone();
    let rest: Vec<String> = meta
        .finalizers
        .take()
        .into_iter()
        .flatten()
        .filter(|f| f != finalizer)
        .collect();
    meta.finalizers = (!rest.is_empty()).then_some(rest);
    meta
}

#[cfg(test)]
mod tests {
    use kcm_testing::{MetaBuilder, meta};

    use super::*;

    #[test]
    fn candidates_and_additions_as_upstream() {
        struct Case {
            name: &'static str,
            meta: ObjectMeta,
            candidate: bool,
            add: bool,
        }
        let deleted = "2024-05-01T12:00:00Z".parse().expect("timestamp");
        let cases = [
            Case {
                name: "live, no finalizer",
                meta: meta("x").build(),
                candidate: false,
                add: true,
            },
            Case {
                name: "live, other finalizer",
                meta: meta("x").finalizers(&["other"]).build(),
                candidate: false,
                add: true,
            },
            Case {
                name: "live, protected",
                meta: meta("x").finalizers(&[PVC_PROTECTION_FINALIZER]).build(),
                candidate: false,
                add: false,
            },
            Case {
                name: "deleted, protected",
                meta: meta("x")
                    .finalizers(&[PVC_PROTECTION_FINALIZER])
                    .deleted_at(deleted)
                    .build(),
                candidate: true,
                add: false,
            },
            Case {
                name: "deleted, not protected",
                meta: meta("x").deleted_at(deleted).build(),
                candidate: false,
                add: false,
            },
        ];
        for case in cases {
            assert_eq!(
                is_deletion_candidate(&case.meta, PVC_PROTECTION_FINALIZER),
                case.candidate,
                "{}",
                case.name
            );
            assert_eq!(
                need_to_add_finalizer(&case.meta, PVC_PROTECTION_FINALIZER),
                case.add,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn removal_drops_every_copy_and_an_empty_list() {
        let m = meta("x")
            .finalizers(&[PV_PROTECTION_FINALIZER, "other", PV_PROTECTION_FINALIZER])
            .build();
        assert_eq!(
            without_finalizer(&m, PV_PROTECTION_FINALIZER).finalizers,
            Some(vec!["other".to_owned()])
        );
        let only = meta("x").finalizers(&[PV_PROTECTION_FINALIZER]).build();
        assert_eq!(
            without_finalizer(&only, PV_PROTECTION_FINALIZER).finalizers,
            None
        );
        assert_eq!(
            with_finalizer(&meta("x").build(), PV_PROTECTION_FINALIZER).finalizers,
            Some(vec![PV_PROTECTION_FINALIZER.to_owned()])
        );
    }
}
