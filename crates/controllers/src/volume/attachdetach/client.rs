//! The attach/detach controller's API calls (VolumeAttachment create and delete, the node status patch of `volumesAttached`) and a recording fake for its tests.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{AttachedVolume, Node};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kcm_machinery::controller::api_status;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::json;

/// The calls, as upstream's `client.StorageV1().VolumeAttachments()` and
/// `nodeutil.PatchNodeStatus`.
#[async_trait]
pub trait AttachDetachClient: Send + Sync {
    /// Creates the VolumeAttachment, as `VolumeAttachments().Create`.
    async fn create_volume_attachment(
        &self,
        attachment: &VolumeAttachment,
    ) -> Result<VolumeAttachment, kube::Error>;

    /// Deletes the VolumeAttachment `name`, as `VolumeAttachments().Delete`.
    async fn delete_volume_attachment(&self, name: &str) -> Result<(), kube::Error>;

    /// Sets `status.volumesAttached` of node `node` to `volumes` (a merge patch of the status
    /// subresource: the list has no merge key, so it is replaced whole).
    async fn patch_node_volumes_attached(
        &self,
        node: &str,
        volumes: &[AttachedVolume],
    ) -> Result<(), kube::Error>;
}

/// [`AttachDetachClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiAttachDetachClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiAttachDetachClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiAttachDetachClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiAttachDetachClient")
            .finish_non_exhaustive()
    }
}

/// The status patch that sets `volumesAttached` (null clears it, as upstream's two-way patch
/// of an emptied list).
pub fn volumes_attached_patch(volumes: &[AttachedVolume]) -> serde_json::Value {
    if volumes.is_empty() {
        json!({ "status": { "volumesAttached": null } })
    } else {
        json!({ "status": { "volumesAttached": volumes } })
    }
}

#[async_trait]
impl AttachDetachClient for ApiAttachDetachClient {
    async fn create_volume_attachment(
        &self,
        attachment: &VolumeAttachment,
    ) -> Result<VolumeAttachment, kube::Error> {
        Api::<VolumeAttachment>::all(self.client.clone())
            .create(&PostParams::default(), attachment)
            .await
    }

    async fn delete_volume_attachment(&self, name: &str) -> Result<(), kube::Error> {
        Api::<VolumeAttachment>::all(self.client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
    }

    async fn patch_node_volumes_attached(
        &self,
        node: &str,
        volumes: &[AttachedVolume],
    ) -> Result<(), kube::Error> {
        Api::<Node>::all(self.client.clone())
            .patch_status(
                node,
                &PatchParams::default(),
                &Patch::Merge(volumes_attached_patch(volumes)),
            )
            .await
            .map(|_| ())
    }
}

/// The kinds of call, for injecting failures into [`FakeAttachDetachClient`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// [`AttachDetachClient::create_volume_attachment`].
    CreateVolumeAttachment,
    /// [`AttachDetachClient::delete_volume_attachment`].
    DeleteVolumeAttachment,
    /// [`AttachDetachClient::patch_node_volumes_attached`].
    PatchNodeStatus,
}

/// One call [`FakeAttachDetachClient`] received, with what was sent.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A VolumeAttachment creation, with the object sent.
    CreateVolumeAttachment(VolumeAttachment),
    /// A deletion of the VolumeAttachment of this name.
    DeleteVolumeAttachment(String),
    /// A node status patch: the node and the unique names of the volumes listed.
    PatchNodeStatus(String, Vec<String>),
}

/// What [`FakeAttachDetachClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// The "server's" VolumeAttachments by name: creations collide with these.
    attachments: BTreeMap<String, VolumeAttachment>,
    /// Every call, in order.
    actions: Vec<Action>,
    /// Per kind of call: how many of the next calls fail, and with what.
    failures: BTreeMap<Verb, (usize, Status)>,
}

impl FakeState {
    /// Records `action` and takes one injected failure of its kind, if any is left.
    fn record(&mut self, verb: Verb, action: Action) -> Result<(), kube::Error> {
        self.actions.push(action);
        if let Some((left, status)) = self.failures.get_mut(&verb)
            && *left > 0
        {
            *left -= 1;
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        Ok(())
    }
}

/// An [`AttachDetachClient`] keeping VolumeAttachments in memory and recording every call, as
/// client-go's fake clientset with a prepended reactor for [`Self::fail`].
#[derive(Debug, Default)]
pub struct FakeAttachDetachClient {
    state: Mutex<FakeState>,
}

impl FakeAttachDetachClient {
    /// A fake holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the next `times` calls of kind `verb` fail with `status` (recorded all the same).
    pub fn fail(&self, verb: Verb, times: usize, status: Status) {
        self.state().failures.insert(verb, (times, status));
    }

    /// Every call so far, in order.
    pub fn actions(&self) -> Vec<Action> {
        self.state().actions.clone()
    }

    /// The "server's" VolumeAttachments by name.
    pub fn attachments(&self) -> BTreeMap<String, VolumeAttachment> {
        self.state().attachments.clone()
    }
}

#[async_trait]
impl AttachDetachClient for FakeAttachDetachClient {
    async fn create_volume_attachment(
        &self,
        attachment: &VolumeAttachment,
    ) -> Result<VolumeAttachment, kube::Error> {
        let mut state = self.state();
        state.record(
            Verb::CreateVolumeAttachment,
            Action::CreateVolumeAttachment(attachment.clone()),
        )?;
        let name = attachment.metadata.name.clone().unwrap_or_default();
        if state.attachments.contains_key(&name) {
            return Err(kube::Error::Api(
                api_status::already_exists("volumeattachments", &name).boxed(),
            ));
        }
        state.attachments.insert(name, attachment.clone());
        Ok(attachment.clone())
    }

    async fn delete_volume_attachment(&self, name: &str) -> Result<(), kube::Error> {
        let mut state = self.state();
        state.record(
            Verb::DeleteVolumeAttachment,
            Action::DeleteVolumeAttachment(name.to_owned()),
        )?;
        match state.attachments.remove(name) {
            Some(_) => Ok(()),
            None => Err(kube::Error::Api(
                api_status::not_found("volumeattachments", name).boxed(),
            )),
        }
    }

    async fn patch_node_volumes_attached(
        &self,
        node: &str,
        volumes: &[AttachedVolume],
    ) -> Result<(), kube::Error> {
        let names = volumes.iter().map(|v| v.name.clone()).collect();
        self.state().record(
            Verb::PatchNodeStatus,
            Action::PatchNodeStatus(node.to_owned(), names),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_list_clears_volumes_attached() {
        assert_eq!(
            volumes_attached_patch(&[]),
            json!({"status": {"volumesAttached": null}})
        );
        let v = AttachedVolume {
            name: "kubernetes.io/csi/d^h".into(),
            device_path: String::new(),
        };
        assert_eq!(
            volumes_attached_patch(&[v]),
            json!({"status": {"volumesAttached": [{"name": "kubernetes.io/csi/d^h", "devicePath": ""}]}})
        );
    }
}
