//! The ResourceSlices of each pool, by driver and pool name, and the NoExecute taints of their devices (upstream's `pool` in `device_taint_eviction.go`).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{Device, DeviceTaint, ResourceSlice};

use super::tolerations::EFFECT_NO_EXECUTE;

/// A pool's identity: its driver and name (upstream's `poolID`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolId {
    /// `spec.driver`.
    pub driver: String,
    /// `spec.pool.name`.
    pub pool: String,
}

impl PoolId {
    /// The pool `slice` belongs to.
    pub fn of(slice: &ResourceSlice) -> Self {
        Self {
            driver: slice.spec.driver.clone(),
            pool: slice.spec.pool.name.clone(),
        }
    }
}

/// The slices of one pool. Only those of the newest generation count: older ones are being
/// replaced by their driver.
#[derive(Clone, Debug, Default)]
pub struct Pool {
    /// Slices by name.
    slices: HashMap<String, Arc<ResourceSlice>>,
    /// The highest `spec.pool.generation` among `slices` (`i64::MIN` when empty).
    max_generation: i64,
}

fn generation(slice: &ResourceSlice) -> i64 {
    slice.spec.pool.generation
}

fn devices(slice: &ResourceSlice) -> &[Device] {
    slice.spec.devices.as_deref().unwrap_or_default()
}

/// The taints of `device`.
pub fn device_taints(device: &Device) -> &[DeviceTaint] {
    device.taints.as_deref().unwrap_or_default()
}

impl Pool {
    /// Whether the pool has no slice left.
    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
    }

    /// The pool's slices (any generation).
    pub fn slices(&self) -> impl Iterator<Item = &Arc<ResourceSlice>> {
        self.slices.values()
    }

    /// The slices of the newest generation.
    pub fn current_slices(&self) -> impl Iterator<Item = &Arc<ResourceSlice>> {
        self.slices
            .values()
            .filter(move |s| generation(s) == self.max_generation)
    }

    /// Adds (or replaces by name) one slice (upstream's `addSlice`); adding can only raise the
    /// newest generation.
    pub fn add_slice(&mut self, slice: Arc<ResourceSlice>) {
        if self.slices.is_empty() {
            self.max_generation = i64::MIN;
        }
        let name = slice.metadata.name.clone().unwrap_or_default();
        self.max_generation = self.max_generation.max(generation(&slice));
        self.slices.insert(name, slice);
    }

    /// Removes one slice by name (upstream's `removeSlice`); the newest generation may drop
    /// to that of another slice.
    pub fn remove_slice(&mut self, slice: &ResourceSlice) {
        let name = slice.metadata.name.as_deref().unwrap_or_default();
        self.slices.remove(name);
        if generation(slice) == self.max_generation {
            self.max_generation = self
                .slices
                .values()
                .map(|s| generation(s))
                .max()
                .unwrap_or(i64::MIN);
        }
    }

    /// Every NoExecute taint of the current slices' devices as `(device name, taint)`, sorted by
    /// device name (upstream's `getTaintedDevices`).
    pub fn tainted_devices(&self) -> Vec<(String, DeviceTaint)> {
        let mut tainted: Vec<(String, DeviceTaint)> = self
            .current_slices()
            .flat_map(|slice| devices(slice).iter())
            .flat_map(|device| {
                device_taints(device)
                    .iter()
                    .filter(|t| t.effect == EFFECT_NO_EXECUTE)
                    .map(|t| (device.name.clone(), t.clone()))
            })
            .collect();
        // Stable: a device's taints keep their order.
        tainted.sort_by(|a, b| a.0.cmp(&b.0));
        tainted
    }

    /// The current slice publishing device `name`, and the device (upstream's `getDevice`).
    pub fn device(&self, name: &str) -> Option<(&Arc<ResourceSlice>, &Device)> {
        self.current_slices().find_map(|slice| {
            devices(slice)
                .iter()
                .find(|d| d.name == name)
                .map(|device| (slice, device))
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::resource::v1::{ResourcePool, ResourceSliceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn slice(name: &str, generation: i64, devices: &[(&str, &[&str])]) -> Arc<ResourceSlice> {
        Arc::new(ResourceSlice {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: ResourceSliceSpec {
                driver: "some-driver".to_owned(),
                pool: ResourcePool {
                    name: "worker".to_owned(),
                    generation,
                    resource_slice_count: 1,
                },
                devices: Some(
                    devices
                        .iter()
                        .map(|(name, effects)| Device {
                            name: (*name).to_owned(),
                            taints: Some(
                                effects
                                    .iter()
                                    .map(|effect| DeviceTaint {
                                        key: "example.com/taint".to_owned(),
                                        effect: (*effect).to_owned(),
                                        ..DeviceTaint::default()
                                    })
                                    .collect(),
                            ),
                            ..Device::default()
                        })
                        .collect(),
                ),
                ..ResourceSliceSpec::default()
            },
        })
    }

    #[test]
    fn only_the_newest_generation_counts() {
        let mut pool = Pool::default();
        let old = slice("old", 1, &[("a", &["NoExecute"])]);
        let new = slice("new", 2, &[("b", &["NoSchedule", "NoExecute"]), ("c", &[])]);
        pool.add_slice(Arc::clone(&old));
        assert_eq!(pool.tainted_devices().len(), 1);
        pool.add_slice(Arc::clone(&new));
        let tainted = pool.tainted_devices();
        assert_eq!(
            tainted.len(),
            1,
            "NoSchedule and the old slice do not count"
        );
        assert_eq!(tainted[0].0, "b");
        assert!(pool.device("a").is_none(), "outdated slices are ignored");
        assert!(pool.device("c").is_some());
        pool.remove_slice(&new);
        assert_eq!(pool.tainted_devices()[0].0, "a", "back to generation 1");
        pool.remove_slice(&old);
        assert!(pool.is_empty());
    }
}
