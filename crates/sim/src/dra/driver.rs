//! The simulated DRA driver `gpu.sim.kcm.io`: the DeviceClass and one ResourceSlice per
//! simulated node, as a DRA kubelet plugin publishes its node's devices.
//!
//! Each simulated node gets the slice [`slice_name`] (`<node>-gpu.sim.kcm.io`; upstream's
//! plugins use a generated name) with `spec.nodeName` the node, pool `{name: <node>,
//! generation: 1, resourceSliceCount: 1}` and devices `gpu-0..gpu-<N-1>`, each with the
//! attributes `index` (int), `model` (`sim-gpu`), `uuid` and `driverVersion` and the capacity
//! `memory: 16Gi`. The slice is owned by the Node (controller reference), so the garbage
//! collector deletes it with the node; it is created again when the node comes back or the
//! slice goes.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, Device, DeviceAttribute, DeviceCapacity, DeviceClass, DeviceClassSpec,
    DeviceSelector, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use tokio_util::sync::CancellationToken;

use kcm_machinery::controller::api_status::{ApiStatus, error_message};
use kcm_machinery::informer::{DeletedObject, Lister, ResourceEventHandler, SharedIndexInformer};
use kcm_machinery::workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue};

use super::DRIVER;
use super::client::DraClient;
use crate::storage::{Synced, watch};

/// Devices per simulated node unless configured otherwise.
pub const DEFAULT_DEVICES_PER_NODE: usize = 2;
/// The memory each simulated device reports.
pub const DEVICE_MEMORY: &str = "16Gi";

/// The name of `node`'s slice.
pub fn slice_name(node: &str) -> String {
    format!("{node}-{DRIVER}")
}

/// The DeviceClass `gpu.sim.kcm.io`: every device of the simulated driver.
pub fn device_class() -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(DRIVER.to_owned()),
            ..ObjectMeta::default()
        },
        spec: DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: format!("device.driver == \"{DRIVER}\""),
                }),
            }]),
            ..DeviceClassSpec::default()
        },
    }
}

fn attr_int(n: i64) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(n),
        ..DeviceAttribute::default()
    }
}

fn attr_string(s: String) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(s),
        ..DeviceAttribute::default()
    }
}

/// The slice `node` publishes with `devices` devices, owned by the Node.
pub fn node_resource_slice(node: &Node, devices: usize) -> ResourceSlice {
    let name = node.metadata.name.clone().unwrap_or_default();
    let devices = (0..devices)
        .map(|i| {
            let attributes = BTreeMap::from([
                (
                    "index".to_owned(),
                    attr_int(i64::try_from(i).unwrap_or(i64::MAX)),
                ),
                ("model".to_owned(), attr_string("sim-gpu".to_owned())),
                ("uuid".to_owned(), attr_string(format!("gpu-{name}-{i}"))),
                (
                    "driverVersion".to_owned(),
                    DeviceAttribute {
                        version: Some("1.0.0".to_owned()),
                        ..DeviceAttribute::default()
                    },
                ),
            ]);
            let capacity = BTreeMap::from([(
                "memory".to_owned(),
                DeviceCapacity {
                    value: Quantity(DEVICE_MEMORY.to_owned()),
                    request_policy: None,
                },
            )]);
            Device {
                name: format!("gpu-{i}"),
                attributes: Some(attributes),
                capacity: Some(capacity),
                ..Device::default()
            }
        })
        .collect();
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(slice_name(&name)),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Node".to_owned(),
                name: name.clone(),
                uid: node.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: ResourceSliceSpec {
            driver: DRIVER.to_owned(),
            node_name: Some(name.clone()),
            pool: ResourcePool {
                name,
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(devices),
            ..ResourceSliceSpec::default()
        },
    }
}

struct Shared {
    nodes: Lister<Node>,
    slices: Lister<ResourceSlice>,
    names: HashSet<String>,
    devices: usize,
    queue: RateLimitingQueue<String>,
}

impl Shared {
    fn node_changed(&self, node: &Node) {
        if let Some(name) = node.metadata.name.as_deref()
            && self.names.contains(name)
        {
            self.queue.add(name.to_owned());
        }
    }
}

struct NodeHandler(Arc<Shared>);

impl ResourceEventHandler<Node> for NodeHandler {
    fn on_add(&self, node: Arc<Node>, _is_in_initial_list: bool) {
        self.0.node_changed(&node);
    }

    fn on_update(&self, old: Arc<Node>, new: Arc<Node>) {
        if old.metadata.uid != new.metadata.uid {
            self.0.node_changed(&new);
        }
    }

    fn on_delete(&self, _obj: DeletedObject<Node>) {}
}

struct SliceHandler(Arc<Shared>);

impl ResourceEventHandler<ResourceSlice> for SliceHandler {
    fn on_add(&self, _slice: Arc<ResourceSlice>, _is_in_initial_list: bool) {}

    fn on_update(&self, _old: Arc<ResourceSlice>, _new: Arc<ResourceSlice>) {}

    fn on_delete(&self, obj: DeletedObject<ResourceSlice>) {
        let slice = obj.object();
        if slice.spec.driver == DRIVER
            && let Some(node) = slice.spec.node_name.as_deref()
            && self.0.names.contains(node)
        {
            self.0.queue.add(node.to_owned());
        }
    }
}

/// The simulated driver of a set of nodes. Cheap to clone; clones are the same driver.
#[derive(Clone)]
pub struct Driver {
    shared: Arc<Shared>,
    client: Arc<dyn DraClient>,
    synced: Vec<Synced>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("devices", &self.shared.devices)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// A driver publishing `devices` devices on each of the nodes `names`, watching the node
    /// and slice informers (started by the caller), writing through `client`.
    pub fn new(
        client: Arc<dyn DraClient>,
        nodes: &SharedIndexInformer<Node>,
        slices: &SharedIndexInformer<ResourceSlice>,
        names: impl IntoIterator<Item = String>,
        devices: usize,
    ) -> Self {
        let mut driver =
            Self::with_listers(client, nodes.lister(), slices.lister(), names, devices);
        driver.synced = vec![
            watch("node", nodes, NodeHandler(driver.shared.clone())),
            watch(
                "resource slice",
                slices,
                SliceHandler(driver.shared.clone()),
            ),
        ];
        driver
    }

    /// The same over bare listers, without event handlers (tests call [`Driver::sync`]).
    pub fn with_listers(
        client: Arc<dyn DraClient>,
        nodes: Lister<Node>,
        slices: Lister<ResourceSlice>,
        names: impl IntoIterator<Item = String>,
        devices: usize,
    ) -> Self {
        let shared = Arc::new(Shared {
            nodes,
            slices,
            names: names.into_iter().collect(),
            devices,
            queue: RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(200),
                Duration::from_secs(10),
            )),
        });
        Self {
            shared,
            client,
            synced: Vec::new(),
        }
    }

    /// Creates the DeviceClass, then keeps every node's slice in place until `cancel` fires.
    pub async fn run(&self, cancel: CancellationToken) {
        let class = device_class();
        let created = crate::storage::ensure_with_retries("the DeviceClass", &cancel, || {
            let client = self.client.clone();
            let class = class.clone();
            async move { client.ensure_device_class(&class).await }
        })
        .await;
        while created && !self.synced.iter().all(|s| s()) {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        if !created || cancel.is_cancelled() {
            self.shared.queue.shut_down();
            return;
        }
        tracing::info!(
            driver = DRIVER,
            devices = self.shared.devices,
            "simulated DRA driver running"
        );
        for name in &self.shared.names {
            self.shared.queue.add(name.clone());
        }
        let worker = {
            let this = self.clone();
            tokio::spawn(async move { this.worker().await })
        };
        cancel.cancelled().await;
        self.shared.queue.shut_down();
        if let Err(err) = worker.await {
            tracing::error!(%err, "DRA driver worker failed");
        }
    }

    async fn worker(&self) {
        let queue = &self.shared.queue;
        while let Some(name) = queue.get().await {
            match self.sync(&name).await {
                Ok(()) => queue.forget(&name),
                Err(err) => {
                    tracing::warn!(node = name, error = %error_message(&err), "publishing the node's ResourceSlice failed; retrying");
                    queue.add_rate_limited(name.clone());
                }
            }
            queue.done(&name);
        }
    }

    /// Publishes node `name`'s slice unless it is there (or the node is not).
    pub async fn sync(&self, name: &str) -> Result<(), kube::Error> {
        let Some(node) = self.shared.nodes.get_cluster(name) else {
            return Ok(());
        };
        if self.shared.slices.get_cluster(&slice_name(name)).is_some() {
            return Ok(());
        }
        let slice = node_resource_slice(&node, self.shared.devices);
        match self.client.create_resource_slice(&slice).await {
            Ok(_) => {
                tracing::debug!(
                    node = name,
                    devices = self.shared.devices,
                    "published ResourceSlice"
                );
                Ok(())
            }
            Err(err) if err.is_already_exists() => Ok(()),
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dra::cel;
    use crate::dra::client::FakeDra;
    use crate::node::{NodeTemplate, build_node};

    #[test]
    fn slice_has_the_nodes_pool_devices_and_owner() {
        let mut node = build_node(0, &NodeTemplate::default(), jiff::Timestamp::UNIX_EPOCH);
        node.metadata.uid = Some("node-uid".into());
        let slice = node_resource_slice(&node, 2);
        assert_eq!(
            slice.metadata.name.as_deref(),
            Some("kcm-node-0-gpu.sim.kcm.io")
        );
        assert_eq!(slice.spec.driver, DRIVER);
        assert_eq!(slice.spec.node_name.as_deref(), Some("kcm-node-0"));
        assert_eq!(
            slice.spec.pool,
            ResourcePool {
                name: "kcm-node-0".into(),
                generation: 1,
                resource_slice_count: 1
            }
        );
        let devices = slice.spec.devices.clone().unwrap_or_default();
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["gpu-0", "gpu-1"]);
        let owner = &slice.metadata.owner_references.clone().unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Node", "kcm-node-0", "node-uid")
        );
        assert_eq!(owner.controller, Some(true));
        // The class selects exactly the driver's devices.
        let class = device_class();
        let expression = &class.spec.selectors.unwrap_or_default()[0]
            .cel
            .clone()
            .unwrap_or_default()
            .expression;
        assert_eq!(expression, "device.driver == \"gpu.sim.kcm.io\"");
        assert_eq!(cel::selects(expression, DRIVER, &devices[0]), Ok(true));
        assert_eq!(
            cel::selects(expression, "other.example.com", &devices[0]),
            Ok(false)
        );
    }

    #[tokio::test]
    async fn publishes_a_slice_per_simulated_node_once() {
        let nodes = kcm_machinery::informer::Indexer::new();
        let slices = kcm_machinery::informer::Indexer::new();
        for i in 0..3 {
            let mut node = build_node(i, &NodeTemplate::default(), jiff::Timestamp::UNIX_EPOCH);
            node.metadata.uid = Some(format!("uid-{i}"));
            nodes.add(Arc::new(node)).expect("node");
        }
        let dra = Arc::new(FakeDra::new());
        let driver = Driver::with_listers(
            dra.clone(),
            Lister::new(nodes),
            Lister::new(slices.clone()),
            [
                "kcm-node-0".to_owned(),
                "kcm-node-1".to_owned(),
                "kcm-node-9".to_owned(),
            ],
            3,
        );
        for name in ["kcm-node-0", "kcm-node-1", "kcm-node-9"] {
            driver.sync(name).await.expect("sync");
        }
        let created = dra.slices();
        let names: Vec<&str> = created
            .iter()
            .filter_map(|s| s.metadata.name.as_deref())
            .collect();
        // No slice for a node that is not registered.
        assert_eq!(
            names,
            ["kcm-node-0-gpu.sim.kcm.io", "kcm-node-1-gpu.sim.kcm.io"]
        );
        assert!(
            created
                .iter()
                .all(|s| s.spec.devices.as_ref().map(Vec::len) == Some(3))
        );
        // A slice the cache shows is left alone.
        slices.add(Arc::new(created[0].clone())).expect("slice");
        driver.sync("kcm-node-0").await.expect("sync");
        assert_eq!(
            dra.actions(),
            [
                "create-resource-slice kcm-node-0-gpu.sim.kcm.io",
                "create-resource-slice kcm-node-1-gpu.sim.kcm.io"
            ]
        );
        // AlreadyExists (the cache lagging) is success.
        driver
            .sync("kcm-node-1")
            .await
            .expect("already exists is fine");
    }
}
