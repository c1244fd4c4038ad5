//! Generic ephemeral volumes, as upstream's `component-helpers/storage/ephemeral`: the claim a
//! pod volume uses ([`pod_volume_claim`], [`volume_claim_name`]) and whether a claim of that name
//! really is the pod's ([`volume_is_for_pod`]).

use std::fmt;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};

use crate::controller::controller_ref::get_controller_of;

/// The name of the claim a generic ephemeral volume gets: `<pod>-<volume>`, as upstream's
/// `ephemeral.VolumeClaimName`. Deterministic, so nothing else is needed to find it; whether a
/// claim of that name really is the pod's is [`volume_is_for_pod`]'s question.
pub fn volume_claim_name(pod: &Pod, volume: &Volume) -> String {
    format!(
        "{}-{}",
        pod.metadata.name.as_deref().unwrap_or_default(),
        volume.name
    )
}

/// The claim a pod volume uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodVolumeClaim {
    /// The claim's name, in the pod's namespace.
    pub name: String,
    /// Whether it is a generic ephemeral volume's claim (made for the pod, see
    /// [`volume_is_for_pod`]).
    pub ephemeral: bool,
}

/// The claim `volume` of `pod` uses: the one its `persistentVolumeClaim` names, or
/// [`volume_claim_name`] for a generic ephemeral volume; `None` for any other volume.
pub fn pod_volume_claim(pod: &Pod, volume: &Volume) -> Option<PodVolumeClaim> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some(PodVolumeClaim {
            name: source.claim_name.clone(),
            ephemeral: false,
        });
    }
    volume.ephemeral.as_ref().map(|_| PodVolumeClaim {
        name: volume_claim_name(pod, volume),
        ephemeral: true,
    })
}

/// A claim with an ephemeral volume's name that the pod does not control.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotOwnedByPod {
    /// The claim, `namespace/name`.
    pub claim: String,
    /// The pod, `namespace/name`.
    pub pod: String,
}

impl fmt::Display for NotOwnedByPod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PVC {} was not created for pod {} (pod is not owner)",
            self.claim, self.pod
        )
    }
}

impl std::error::Error for NotOwnedByPod {}

/// Checks that `claim` is the one made for `pod`'s ephemeral volume: same namespace and
/// controlled by the pod (its UID), as upstream's `ephemeral.VolumeIsForPod`.
pub fn volume_is_for_pod(pod: &Pod, claim: &PersistentVolumeClaim) -> Result<(), NotOwnedByPod> {
    let pod_namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let claim_namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let controlled = get_controller_of(&claim.metadata)
        .is_some_and(|owner| Some(owner.uid.as_str()) == pod.metadata.uid.as_deref());
    if claim_namespace != pod_namespace || !controlled {
        return Err(NotOwnedByPod {
            claim: format!(
                "{claim_namespace}/{}",
                claim.metadata.name.as_deref().unwrap_or_default()
            ),
            pod: format!(
                "{pod_namespace}/{}",
                pod.metadata.name.as_deref().unwrap_or_default()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kcm_testing::{MetaBuilder, PodSpecBuilder, controller_ref_of, owner_ref_of, pod, pvc};

    use super::*;

    #[test]
    fn a_pod_volume_uses_its_own_claim_or_its_ephemeral_one() {
        let p = pod("web")
            .claim_volume("data", "data-claim")
            .ephemeral_volume("scratch", pvc("").storage("1Gi"))
            .empty_dir_volume("tmp")
            .build();
        let claims: Vec<Option<PodVolumeClaim>> = p
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .map(|v| pod_volume_claim(&p, v))
            .collect();
        assert_eq!(
            claims,
            [
                Some(PodVolumeClaim {
                    name: "data-claim".into(),
                    ephemeral: false
                }),
                Some(PodVolumeClaim {
                    name: "web-scratch".into(),
                    ephemeral: true
                }),
                None,
            ]
        );
    }

    /// Upstream `TestVolumeIsForPod`'s facts: the pod must be the claim's controller, in the same
    /// namespace; the error names both.
    #[test]
    fn a_claim_is_for_the_pod_that_controls_it() {
        let p = pod("web").namespace("ns").uid("u1").build();
        let other = pod("other").namespace("ns").uid("u2").build();
        let owned = pvc("web-v")
            .namespace("ns")
            .owner(controller_ref_of(&p))
            .build();
        assert_eq!(volume_is_for_pod(&p, &owned), Ok(()));
        let not_controller = pvc("web-v")
            .namespace("ns")
            .owner(owner_ref_of(&p).build())
            .build();
        let foreign = pvc("web-v")
            .namespace("ns")
            .owner(controller_ref_of(&other))
            .build();
        let elsewhere = pvc("web-v")
            .namespace("elsewhere")
            .owner(controller_ref_of(&p))
            .build();
        for claim in [
            &not_controller,
            &foreign,
            &elsewhere,
            &pvc("web-v").namespace("ns").build(),
        ] {
            assert!(volume_is_for_pod(&p, claim).is_err(), "{claim:?}");
        }
        assert_eq!(
            volume_is_for_pod(&p, &foreign)
                .expect_err("foreign")
                .to_string(),
            "PVC ns/web-v was not created for pod ns/web (pod is not owner)"
        );
    }
}
