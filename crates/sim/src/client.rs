//! The API calls the scheduler and the simulated kubelets make, behind one seam.
//!
//! [`ClusterClient`] names each write by what it means (bind a pod, post a node's status,
//! renew a Lease) rather than by HTTP verb, so the loops read like the kubelet and
//! kube-scheduler code they mirror. [`KubeClusterClient`] sends them to an API server with
//! `kube`; [`crate::fake::FakeCluster`] keeps an in-memory cluster for tests.
//!
//! Errors are `kube::Error`s so callers classify them with
//! [`kcm_machinery::controller::api_status::ApiStatus`] (NotFound, Conflict, AlreadyExists).

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Binding, Namespace, Node, NodeStatus, ObjectReference, PersistentVolumeClaim, Pod, PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use kcm_machinery::controller::api_status::ApiStatus;

/// The result of one API call.
pub type Result<T, E = kube::Error> = std::result::Result<T, E>;

/// Every API call the scheduler and the simulated nodes make.
///
/// Implementations must be cheap to share (`Arc<dyn ClusterClient>`) and safe to call from
/// many tasks at once. None of the calls retries: the caller's work queue does.
#[async_trait]
pub trait ClusterClient: Send + Sync {
    /// Binds `pod` to `node` by POSTing a `Binding` (with the pod's uid, so a pod recreated
    /// under the same name is not bound by mistake) to `pods/{name}/binding`, as
    /// kube-scheduler's DefaultBinder. A pod already bound gets a Conflict.
    async fn bind(&self, pod: &Pod, node: &str) -> Result<()>;

    /// Sets one condition in the pod's status (merged by `type`), as kube-scheduler's
    /// `PatchPodStatus` does for `PodScheduled`.
    async fn patch_pod_condition(&self, pod: &Pod, condition: &PodCondition) -> Result<()>;

    /// Replaces the pod's status through `pods/status` with `pod.status`, guarded by
    /// `pod.metadata.resourceVersion` (a Conflict when the pod changed since).
    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod>;

    /// Deletes the pod now (grace period 0) if its uid is still `uid`, as the kubelet's
    /// final delete. A pod already gone is not an error.
    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<()>;

    /// Creates a Node (an AlreadyExists error when one with that name exists).
    async fn create_node(&self, node: &Node) -> Result<Node>;

    /// The Node `name`, or `None` when there is none.
    async fn get_node(&self, name: &str) -> Result<Option<Node>>;

    /// Patches node `name`'s status through `nodes/status` with the fields `status` sets
    /// (a strategic merge: conditions merge by `type`), as the kubelet's `PatchNodeStatus`.
    /// No resourceVersion guard: the kubelet owns these fields.
    async fn patch_node_status(&self, name: &str, status: &NodeStatus) -> Result<Node>;

    /// Creates namespace `name` unless it exists.
    async fn ensure_namespace(&self, name: &str) -> Result<()>;

    /// The Lease `namespace/name`, or `None` when there is none.
    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>>;

    /// Creates a Lease.
    async fn create_lease(&self, lease: &Lease) -> Result<Lease>;

    /// Replaces a Lease, guarded by its resourceVersion.
    async fn update_lease(&self, lease: &Lease) -> Result<Lease>;

    /// Patches `claim`'s status (`persistentvolumeclaims/status`) with an RFC 7386 merge patch,
    /// as the kubelet's `PatchPVCStatus` after a node expansion; a `metadata.resourceVersion`
    /// in the patch is a precondition (a Conflict when the claim changed since).
    async fn patch_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
        patch: &serde_json::Value,
    ) -> Result<PersistentVolumeClaim>;
}

/// [`ClusterClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct KubeClusterClient {
    client: Client,
}

impl std::fmt::Debug for KubeClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClusterClient").finish_non_exhaustive()
    }
}

impl KubeClusterClient {
    /// Sends every call through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn leases(&self, namespace: &str) -> Api<Lease> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

/// The `Binding` kube-scheduler posts for `pod` and `node`.
pub fn binding_for(pod: &Pod, node: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.to_owned()),
            ..ObjectReference::default()
        },
    }
}

#[async_trait]
impl ClusterClient for KubeClusterClient {
    async fn bind(&self, pod: &Pod, node: &str) -> Result<()> {
        let binding = binding_for(pod, node);
        // The response is a Status; its content does not matter beyond success.
        let _: serde_json::Value = self
            .pods(namespace_of(&pod.metadata))
            .create_subresource(
                "binding",
                name_of(&pod.metadata),
                &PostParams::default(),
                &binding,
            )
            .await?;
        Ok(())
    }

    async fn patch_pod_condition(&self, pod: &Pod, condition: &PodCondition) -> Result<()> {
        // Strategic merge: `conditions` merge by `type`, so only this condition changes.
        let patch = json!({ "status": { "conditions": [condition] } });
        self.pods(namespace_of(&pod.metadata))
            .patch_status(
                name_of(&pod.metadata),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await?;
        Ok(())
    }

    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod> {
        self.pods(namespace_of(&pod.metadata))
            .replace_status(name_of(&pod.metadata), &PostParams::default(), pod)
            .await
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<()> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.pods(namespace).delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(err) if err.is_not_found() => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn create_node(&self, node: &Node) -> Result<Node> {
        self.nodes().create(&PostParams::default(), node).await
    }

    async fn get_node(&self, name: &str) -> Result<Option<Node>> {
        self.nodes().get_opt(name).await
    }

    async fn patch_node_status(&self, name: &str, status: &NodeStatus) -> Result<Node> {
        let patch = json!({ "status": status });
        self.nodes()
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
    }

    async fn ensure_namespace(&self, name: &str) -> Result<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        if api.get_opt(name).await?.is_some() {
            return Ok(());
        }
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(err) if err.is_already_exists() => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>> {
        self.leases(namespace).get_opt(name).await
    }

    async fn create_lease(&self, lease: &Lease) -> Result<Lease> {
        self.leases(namespace_of(&lease.metadata))
            .create(&PostParams::default(), lease)
            .await
    }

    async fn update_lease(&self, lease: &Lease) -> Result<Lease> {
        self.leases(namespace_of(&lease.metadata))
            .replace(name_of(&lease.metadata), &PostParams::default(), lease)
            .await
    }

    async fn patch_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
        patch: &serde_json::Value,
    ) -> Result<PersistentVolumeClaim> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), namespace_of(&claim.metadata));
        api.patch_status(
            name_of(&claim.metadata),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use kcm_testing::MetaBuilder;

    use super::*;

    #[test]
    fn binding_carries_the_pods_uid_and_targets_the_node() {
        let pod = kcm_testing::pod("web-0").namespace("ns").uid("u-1").build();
        let b = binding_for(&pod, "kcm-node-1");
        assert_eq!(b.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(b.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(b.target.kind.as_deref(), Some("Node"));
        assert_eq!(b.target.name.as_deref(), Some("kcm-node-1"));
    }
}
