//! The bench's workload: a namespace of Deployments, created at once, watched until every pod is available.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kcm_machinery::informer::{Lister, SharedInformerFactory};
use kcm_machinery::labels::Selector;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use tokio_util::sync::CancellationToken;

/// The label every object the bench creates carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kcm-bench");
/// The image of the bench's pods (simulated nodes never pull it).
const IMAGE: &str = "registry.k8s.io/pause:3.10";
/// Deployment creates in flight at once.
const CREATE_CONCURRENCY: usize = 16;

/// The name of Deployment `i`.
pub fn deployment_name(i: u32) -> String {
    format!("bench-{i:04}")
}

/// Deployment `i` of the workload: `replicas` pause pods with no resource requests, so that
/// the node count limits only through the nodes' pod capacity.
pub fn deployment(namespace: &str, i: u32, replicas: u32) -> anyhow::Result<Deployment> {
    let name = deployment_name(i);
    let (key, value) = MANAGED_BY;
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {key: value}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, key: value}},
                "spec": {"containers": [{"name": "pause", "image": IMAGE}]}
            }
        }
    }))
    .context("building the bench Deployment")
}

/// Creates namespace `name` labelled as the bench's.
pub async fn create_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let (key, value) = MANAGED_BY;
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {key: value}}
    }))
    .context("building the bench namespace")?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(())
}

/// Deletes namespace `name` (the namespace controller deletes what is in it).
pub async fn delete_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting namespace {name}"))?;
    Ok(())
}

/// Creates `deployments` Deployments of `replicas` in `namespace`, a few at a time.
pub async fn create_deployments(
    client: &kube::Client,
    namespace: &str,
    deployments: u32,
    replicas: u32,
) -> anyhow::Result<()> {
    let api = Api::<Deployment>::namespaced(client.clone(), namespace);
    futures::stream::iter(0..deployments)
        .map(|i| {
            let api = api.clone();
            async move {
                let d = deployment(namespace, i, replicas)?;
                api.create(&PostParams::default(), &d)
                    .await
                    .with_context(|| {
                        format!("creating Deployment {namespace}/{}", deployment_name(i))
                    })
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await
}

/// Watches the bench namespace's Deployments through an informer (a few hundred objects; the
/// pods themselves are never cached here, so the bench adds little to the memory it measures).
pub struct Observer {
    factory: SharedInformerFactory,
    /// Stops the informer; a child of the bench's token.
    stop: CancellationToken,
    lister: Lister<Deployment>,
    namespace: String,
}

impl Observer {
    /// Starts the informer; it stops with `cancel` or [`Self::shutdown`].
    pub async fn start(
        client: kube::Client,
        namespace: &str,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Self> {
        let factory = SharedInformerFactory::with_namespace(client, Duration::ZERO, namespace);
        let lister = factory.deployments().lister();
        let stop = cancel.child_token();
        factory.start(&stop);
        if !factory.wait_for_cache_sync(&stop).await {
            stop.cancel();
            factory.shutdown().await;
            anyhow::bail!("the bench's Deployment informer did not sync");
        }
        Ok(Self {
            factory,
            stop,
            lister,
            namespace: namespace.to_owned(),
        })
    }

    /// Pods available now: the Deployments' `status.availableReplicas`, summed.
    pub fn available(&self) -> u64 {
        available(&self.lister.list(&self.namespace, &Selector::everything()))
    }

    /// Stops the informer and waits for its task.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.factory.shutdown().await;
    }
}

/// The sum of `status.availableReplicas` of `deployments` (negative values count as 0).
pub fn available(deployments: &[Arc<Deployment>]) -> u64 {
    deployments
        .iter()
        .filter_map(|d| d.status.as_ref()?.available_replicas)
        .map(|n| u64::try_from(n).unwrap_or(0))
        .sum()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DeploymentStatus;

    use super::*;

    #[test]
    fn deployment_selects_its_own_pods() {
        let d = deployment("ns", 7, 25).expect("deployment");
        assert_eq!(d.metadata.name.as_deref(), Some("bench-0007"));
        assert_eq!(d.metadata.namespace.as_deref(), Some("ns"));
        let spec = d.spec.expect("spec");
        assert_eq!(spec.replicas, Some(25));
        let selector = spec.selector.match_labels.expect("matchLabels");
        let labels = spec
            .template
            .metadata
            .and_then(|m| m.labels)
            .expect("template labels");
        for (k, v) in &selector {
            assert_eq!(labels.get(k), Some(v), "template matches its selector");
        }
        assert_eq!(
            labels.get(MANAGED_BY.0).map(String::as_str),
            Some(MANAGED_BY.1)
        );
        let containers = spec.template.spec.expect("pod spec").containers;
        assert_eq!(containers.len(), 1);
        assert!(containers[0].resources.is_none(), "no requests");
    }

    #[test]
    fn available_sums_status() {
        let with = |n: Option<i32>| {
            Arc::new(Deployment {
                status: Some(DeploymentStatus {
                    available_replicas: n,
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let deployments = [
            with(Some(3)),
            with(None),
            with(Some(-1)),
            Arc::new(Deployment::default()),
            with(Some(4)),
        ];
        assert_eq!(available(&deployments), 7);
    }
}
