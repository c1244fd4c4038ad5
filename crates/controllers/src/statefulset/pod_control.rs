//! Creating, updating and deleting a StatefulSet's pods and their claims, with the upstream events, as upstream's `stateful_pod_control.go` (`StatefulPodControl`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod};
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::events::{EventRecorder, EventType};
use kube::Resource;

use super::Error;
use super::client::StatefulPodObjectManager;
use super::utils::{
    RETAIN, has_stale_owner_ref, identity_matches, is_claim_owner_up_to_date, ordinal,
    persistent_volume_claim_name, persistent_volume_claims, pod_kind, retention_policy,
    storage_matches, update_claim_owner_ref_for_set_and_pod, update_identity, update_storage,
};

/// The delays between attempts of [`StatefulPodControl::update_stateful_pod`] on conflicts, as
/// client-go's `retry.DefaultBackoff` (four attempts).
const CONFLICT_RETRY_DELAYS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(250),
];

/// Writes a StatefulSet's pods and claims, recording upstream's events
/// (`SuccessfulCreate`/`FailedCreate`/`SuccessfulUpdate`/`FailedUpdate`/`SuccessfulDelete`/
/// `FailedDelete` about pods and claims) against the set.
#[derive(Clone)]
pub struct StatefulPodControl {
    object_mgr: Arc<dyn StatefulPodObjectManager>,
    recorder: Arc<dyn EventRecorder>,
}

impl std::fmt::Debug for StatefulPodControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulPodControl").finish_non_exhaustive()
    }
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn set_ref(set: &StatefulSet) -> ObjectReference {
    set.object_ref(&())
}

/// `create` → `Create`, as Go's `strings.Title` on the verbs used here.
fn title(verb: &str) -> String {
    let mut chars = verb.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

impl StatefulPodControl {
    /// Pod control writing through `object_mgr`, reporting to `recorder`.
    pub fn new(
        object_mgr: Arc<dyn StatefulPodObjectManager>,
        recorder: Arc<dyn EventRecorder>,
    ) -> Self {
        Self {
            object_mgr,
            recorder,
        }
    }

    /// The object manager (reads of the pod and claim caches).
    pub fn object_manager(&self) -> &Arc<dyn StatefulPodObjectManager> {
        &self.object_mgr
    }

    /// Records `verb` on `pod` of `set`, as upstream's `recordPodEvent`.
    fn record_pod_event(&self, verb: &str, set: &StatefulSet, pod: &Pod, err: Option<&str>) {
        let (pod_name, set_name) = (name_of(&pod.metadata), name_of(&set.metadata));
        match err {
            None => self.recorder.event(
                &set_ref(set),
                EventType::Normal,
                &format!("Successful{}", title(verb)),
                format!("{verb} Pod {pod_name} in StatefulSet {set_name} successful"),
            ),
            Some(err) => self.recorder.event(
                &set_ref(set),
                EventType::Warning,
                &format!("Failed{}", title(verb)),
                format!("{verb} Pod {pod_name} in StatefulSet {set_name} failed error: {err}"),
            ),
        }
    }

    /// Records `verb` on `claim` of `pod`, as upstream's `recordClaimEvent`.
    fn record_claim_event(
        &self,
        verb: &str,
        set: &StatefulSet,
        pod: &Pod,
        claim: &PersistentVolumeClaim,
        err: Option<&str>,
    ) {
        let (claim_name, pod_name, set_name) = (
            name_of(&claim.metadata),
            name_of(&pod.metadata),
            name_of(&set.metadata),
        );
        match err {
            None => self.recorder.event(
                &set_ref(set),
                EventType::Normal,
                &format!("Successful{}", title(verb)),
                format!("{verb} Claim {claim_name} Pod {pod_name} in StatefulSet {set_name} success"),
            ),
            Some(err) => self.recorder.event(
                &set_ref(set),
                EventType::Warning,
                &format!("Failed{}", title(verb)),
                format!("{verb} Claim {claim_name} for Pod {pod_name} in StatefulSet {set_name} failed error: {err}"),
            ),
        }
    }

    /// Creates the pod's claims, then the pod, then sets the claims' owners for the retention
    /// policy, as upstream's `CreateStatefulPod`. An AlreadyExists pod is returned without an
    /// event.
    pub async fn create_stateful_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<(), Error> {
        if let Err(err) = self.create_persistent_volume_claims(set, pod).await {
            self.record_pod_event("create", set, pod, Some(&err.to_string()));
            return Err(err);
        }
        let created = match self.object_mgr.create_pod(pod).await {
            // Someone else made it (a stale cache): no event, the next pass sees it.
            Err(err) if err.is_already_exists() => return Err(pod_error("create", pod, err)),
            other => other,
        };
        // Upstream sets the claims' owners even when the creation failed.
        if let Err(err) = self.update_pod_claim_for_retention_policy(set, pod).await {
            self.record_pod_event("update", set, pod, Some(&err.to_string()));
            return Err(err);
        }
        match created {
            Ok(()) => {
                self.record_pod_event("create", set, pod, None);
                Ok(())
            }
            Err(err) => {
                self.record_pod_event("create", set, pod, Some(&error_message(&err)));
                Err(pod_error("create", pod, err))
            }
        }
    }

    /// Brings the pod's identity, storage and claim ownership in line with `set`, updating
    /// it (retrying conflicts on the cached copy) only when something changed, as upstream's
    /// `UpdateStatefulPod`.
    pub async fn update_stateful_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<(), Error> {
        let mut pod = pod.clone();
        let mut attempted = false;
        let mut delays = CONFLICT_RETRY_DELAYS.iter();
        let result = loop {
            let mut consistent = true;
            if !identity_matches(set, &pod) {
                update_identity(set, &mut pod);
                consistent = false;
            }
            if !storage_matches(set, &pod) {
                update_storage(set, &mut pod);
                consistent = false;
                if let Err(err) = self.create_persistent_volume_claims(set, &pod).await {
                    self.record_pod_event("update", set, &pod, Some(&err.to_string()));
                    break Err(err);
                }
            }
            match self.claims_match_retention_policy(set, &pod) {
                Err(err) => {
                    self.record_pod_event("update", set, &pod, Some(&err.to_string()));
                    break Err(err);
                }
                Ok(false) => {
                    if let Err(err) = self.update_pod_claim_for_retention_policy(set, &pod).await {
                        self.record_pod_event("update", set, &pod, Some(&err.to_string()));
                        break Err(err);
                    }
                    consistent = false;
                }
                Ok(true) => {}
            }
            if consistent {
                break Ok(());
            }
            attempted = true;
            let err = match self.object_mgr.update_pod(&pod).await {
                Ok(()) => break Ok(()),
                Err(err) => err,
            };
            let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
            match self.object_mgr.get_pod(namespace, name_of(&pod.metadata)) {
                Ok(updated) => pod = (*updated).clone(),
                Err(get_err) => {
                    tracing::error!(pod = name_of(&pod.metadata), err = %get_err, "error getting updated Pod")
                }
            }
            match delays.next() {
                Some(delay) if err.is_conflict() => tokio::time::sleep(*delay).await,
                _ => break Err(pod_error("update", &pod, err)),
            }
        };
        if attempted {
            let message = result.as_ref().err().map(ToString::to_string);
            self.record_pod_event("update", set, &pod, message.as_deref());
        }
        result
    }

    /// Deletes the pod (its claims stay), as upstream's `DeleteStatefulPod`.
    pub async fn delete_stateful_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<(), Error> {
        match self.object_mgr.delete_pod(pod).await {
            Ok(()) => {
                self.record_pod_event("delete", set, pod, None);
                Ok(())
            }
            Err(err) => {
                self.record_pod_event("delete", set, pod, Some(&error_message(&err)));
                Err(pod_error("delete", pod, err))
            }
        }
    }

    /// Whether every existing claim of the pod has the owners the retention policy asks
    /// for, as upstream's `ClaimsMatchRetentionPolicy` (missing claims are picked up later).
    pub fn claims_match_retention_policy(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> Result<bool, Error> {
        let ord = ordinal(pod);
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        for template in set
            .spec
            .iter()
            .flat_map(|s| s.volume_claim_templates.iter().flatten())
        {
            let claim_name = persistent_volume_claim_name(set, template, ord);
            match self.object_mgr.get_claim(namespace, &claim_name) {
                Ok(claim) => {
                    if !is_claim_owner_up_to_date(&claim, set, pod) {
                        return Ok(false);
                    }
                }
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(claim_error("get", &claim_name, err)),
            }
        }
        Ok(true)
    }

    /// Rewrites the owners of the pod's claims for the retention policy, as upstream's
    /// `UpdatePodClaimForRetentionPolicy`.
    pub async fn update_pod_claim_for_retention_policy(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> Result<(), Error> {
        let ord = ordinal(pod);
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        for template in set
            .spec
            .iter()
            .flat_map(|s| s.volume_claim_templates.iter().flatten())
        {
            let claim_name = persistent_volume_claim_name(set, template, ord);
            let claim = match self.object_mgr.get_claim(namespace, &claim_name) {
                Ok(claim) => claim,
                Err(err) if err.is_not_found() => continue,
                Err(err) => return Err(claim_error("get", &claim_name, err)),
            };
            if is_claim_owner_up_to_date(&claim, set, pod) {
                continue;
            }
            let mut updated = (*claim).clone();
            update_claim_owner_ref_for_set_and_pod(&mut updated, set, pod);
            self.object_mgr
                .update_claim(&updated)
                .await
                .map_err(|err| claim_error("update", &claim_name, err))?;
        }
        Ok(())
    }

    /// Whether a claim of the pod still belongs to an earlier pod of that name (so creating
    /// the pod must wait), under a `Delete`-on-scale policy, as upstream's `PodClaimIsStale`.
    pub fn pod_claim_is_stale(&self, set: &StatefulSet, pod: &Pod) -> Result<bool, Error> {
        let (_, when_scaled) = retention_policy(set);
        if when_scaled == RETAIN {
            return Ok(false);
        }
        for claim in persistent_volume_claims(set, pod).values() {
            let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
            let name = name_of(&claim.metadata);
            match self.object_mgr.get_claim(namespace, name) {
                Ok(existing) => {
                    if has_stale_owner_ref(&existing, &pod.metadata, &pod_kind()) {
                        return Ok(true);
                    }
                }
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(claim_error("get", name, err)),
            }
        }
        Ok(false)
    }

    /// Creates the missing claims of a pending pod and sets their owners, as upstream's
    /// `createMissingPersistentVolumeClaims`.
    pub async fn create_missing_persistent_volume_claims(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> Result<(), Error> {
        self.create_persistent_volume_claims(set, pod).await?;
        if let Err(err) = self.update_pod_claim_for_retention_policy(set, pod).await {
            self.record_pod_event("update", set, pod, Some(&err.to_string()));
            return Err(err);
        }
        Ok(())
    }

    /// Creates every claim the pod needs that does not exist yet, as upstream's
    /// `createPersistentVolumeClaims`. A claim being deleted is an error (the pod must wait);
    /// every failure is returned together.
    pub async fn create_persistent_volume_claims(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> Result<(), Error> {
        let mut errors = Vec::new();
        for claim in persistent_volume_claims(set, pod).values() {
            let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
            let name = name_of(&claim.metadata);
            match self.object_mgr.get_claim(namespace, name) {
                Err(err) if err.is_not_found() => match self.object_mgr.create_claim(claim).await {
                    Ok(()) => self.record_claim_event("create", set, pod, claim, None),
                    Err(err) => {
                        if !err.is_already_exists() {
                            self.record_claim_event(
                                "create",
                                set,
                                pod,
                                claim,
                                Some(&error_message(&err)),
                            );
                        }
                        errors.push(Error::Claim {
                            verb: "create",
                            claim: name.to_owned(),
                            source: err,
                        });
                    }
                },
                Err(err) => {
                    self.record_claim_event("create", set, pod, claim, Some(&error_message(&err)));
                    errors.push(claim_error("get", name, err));
                }
                Ok(existing) => {
                    if existing.metadata.deletion_timestamp.is_some() {
                        errors.push(Error::ClaimBeingDeleted {
                            claim: name.to_owned(),
                        });
                    }
                }
            }
        }
        Error::aggregate(errors)
    }
}

fn pod_error(verb: &'static str, pod: &Pod, source: kube::Error) -> Error {
    Error::Pod {
        verb,
        pod: name_of(&pod.metadata).to_owned(),
        source,
    }
}

fn claim_error(verb: &'static str, claim: &str, source: kube::Error) -> Error {
    Error::Claim {
        verb,
        claim: claim.to_owned(),
        source,
    }
}
