//! The desired and actual states of the world: volumes pods need on each node, and volumes attached to each node (upstream `attachdetach/cache`).

use std::collections::{BTreeMap, BTreeSet};

use tokio::time::{Duration, Instant};

/// A volume a node should have attached, with what the attach needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeToAttach {
    /// The unique volume name, `kubernetes.io/csi/<driver>^<handle>`.
    pub volume_name: String,
    /// The CSI driver (the VolumeAttachment's `spec.attacher`).
    pub driver: String,
    /// The CSI volume handle.
    pub volume_handle: String,
    /// The PersistentVolume (the VolumeAttachment's `spec.source.persistentVolumeName`).
    pub pv_name: String,
    /// The node.
    pub node_name: String,
    /// The pods (`namespace/name`) on the node that use it; never empty.
    pub pods: BTreeSet<String>,
    /// Whether the volume may be attached to several nodes at once, as upstream's
    /// `util.IsMultiAttachAllowed` of its spec ([`super::multi_attach::is_multi_attach_allowed`]).
    pub multi_attach_allowed: bool,
    /// Whether the Multi-Attach error was reported for this (volume, node), so it is reported
    /// once, not on every reconciler pass (upstream `MultiAttachErrorReported`); it lasts as
    /// long as the volume stays desired on the node.
    pub multi_attach_error_reported: bool,
}

/// Volumes pods scheduled to controller-managed nodes need, as upstream's `DesiredStateOfWorld`.
///
/// Invariant: every volume listed holds at least one pod; removing a volume's last pod removes it.
#[derive(Debug, Default)]
pub struct DesiredStateOfWorld {
    /// Node name → unique volume name → the volume.
    nodes: BTreeMap<String, BTreeMap<String, VolumeToAttach>>,
}

impl DesiredStateOfWorld {
    /// Records that `pod` on `node` needs the volume (upstream `AddPod`); a volume already
    /// desired on the node keeps its spec and its Multi-Attach report.
    pub fn add_pod(
        &mut self,
        pod: &str,
        node: &str,
        driver: &str,
        handle: &str,
        pv_name: &str,
        multi_attach_allowed: bool,
    ) {
        let volume_name = super::naming::unique_volume_name(driver, handle);
        let volumes = self.nodes.entry(node.to_owned()).or_default();
        let volume = volumes
            .entry(volume_name.clone())
            .or_insert_with(|| VolumeToAttach {
                volume_name,
                driver: driver.to_owned(),
                volume_handle: handle.to_owned(),
                pv_name: pv_name.to_owned(),
                node_name: node.to_owned(),
                pods: BTreeSet::new(),
                multi_attach_allowed,
                multi_attach_error_reported: false,
            });
        volume.pods.insert(pod.to_owned());
    }

    /// Remembers that the Multi-Attach error of the volume on `node` was reported (upstream
    /// `SetMultiAttachError`).
    pub fn set_multi_attach_error(&mut self, volume_name: &str, node: &str) {
        if let Some(v) = self
            .nodes
            .get_mut(node)
            .and_then(|v| v.get_mut(volume_name))
        {
            v.multi_attach_error_reported = true;
        }
    }

    /// The pods (`namespace/name`, sorted) that want `volume_name` on any of `nodes` (upstream
    /// `GetVolumePodsOnNodes`).
    pub fn volume_pods_on_nodes(&self, nodes: &[String], volume_name: &str) -> Vec<String> {
        let pods: BTreeSet<&String> = nodes
            .iter()
            .filter_map(|n| self.volume(volume_name, n))
            .flat_map(|v| v.pods.iter())
            .collect();
        pods.into_iter().cloned().collect()
    }

    /// Forgets `pod` on `node` everywhere; volumes left without pods go (upstream `DeletePod`).
    pub fn delete_pod(&mut self, pod: &str, node: &str) {
        if let Some(volumes) = self.nodes.get_mut(node) {
            volumes.retain(|_, v| {
                v.pods.remove(pod);
                !v.pods.is_empty()
            });
        }
    }

    /// Forgets a node and everything it needed (upstream `DeleteNode`).
    pub fn delete_node(&mut self, node: &str) {
        self.nodes.remove(node);
    }

    /// Whether `node` should have `volume_name` attached (upstream `VolumeExists`).
    pub fn volume_exists(&self, volume_name: &str, node: &str) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|v| v.contains_key(volume_name))
    }

    /// Every volume to attach, by node then volume name (upstream `GetVolumesToAttach`).
    pub fn volumes_to_attach(&self) -> impl Iterator<Item = &VolumeToAttach> {
        self.nodes.values().flat_map(|v| v.values())
    }

    /// The volume `node` should have attached under `volume_name`, with its pods.
    pub fn volume(&self, volume_name: &str, node: &str) -> Option<&VolumeToAttach> {
        self.nodes.get(node).and_then(|v| v.get(volume_name))
    }

    /// Every (pod, node) pair holding a volume, each once (upstream `GetPodToAdd`).
    pub fn pods(&self) -> std::collections::BTreeSet<(String, String)> {
        self.volumes_to_attach()
            .flat_map(|v| v.pods.iter().map(|p| (p.clone(), v.node_name.clone())))
            .collect()
    }
}

/// A volume attached to a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachedVolume {
    /// The unique volume name.
    pub volume_name: String,
    /// The CSI driver.
    pub driver: String,
    /// The CSI volume handle.
    pub volume_handle: String,
    /// The node.
    pub node_name: String,
    /// When detach was first wanted, cleared when the volume is wanted again.
    pub detach_requested_at: Option<Instant>,
    /// Whether the node's `status.volumesAttached` should list it; false once a detach begins.
    pub report_as_attached: bool,
    /// The PersistentVolume, empty while the spec is unknown (a volume found only in the node's
    /// `status.volumesAttached`, upstream's nil `VolumeSpec`).
    pub pv_name: String,
    /// As [`VolumeToAttach::multi_attach_allowed`]; true while the spec is unknown, as
    /// upstream's `IsMultiAttachAllowed(nil)`.
    pub multi_attach_allowed: bool,
}

/// Volumes attached to nodes, as upstream's `ActualStateOfWorld`.
#[derive(Debug, Default)]
pub struct ActualStateOfWorld {
    /// (node, unique volume name) → the attachment.
    attached: BTreeMap<(String, String), AttachedVolume>,
}

impl ActualStateOfWorld {
    /// Records a completed attach (upstream `MarkVolumeAsAttached`).
    pub fn mark_attached(&mut self, volume: &VolumeToAttach) {
        let key = (volume.node_name.clone(), volume.volume_name.clone());
        self.attached.entry(key).or_insert_with(|| AttachedVolume {
            volume_name: volume.volume_name.clone(),
            driver: volume.driver.clone(),
            volume_handle: volume.volume_handle.clone(),
            node_name: volume.node_name.clone(),
            detach_requested_at: None,
            report_as_attached: true,
            pv_name: volume.pv_name.clone(),
            multi_attach_allowed: volume.pv_name.is_empty() || volume.multi_attach_allowed,
        });
    }

    /// Gives an attached volume found without a spec the desired state's spec, as upstream's
    /// `populateDesiredStateOfWorld` marking the volumes pods use attached again.
    pub fn update_spec(&mut self, volume: &VolumeToAttach) {
        if let Some(v) = self
            .attached
            .get_mut(&(volume.node_name.clone(), volume.volume_name.clone()))
            && v.pv_name.is_empty()
        {
            v.pv_name = volume.pv_name.clone();
            v.multi_attach_allowed = volume.multi_attach_allowed;
        }
    }

    /// The nodes `volume_name` is attached to, sorted (upstream `GetNodesForAttachedVolume`).
    pub fn nodes_for_attached_volume(&self, volume_name: &str) -> Vec<String> {
        self.attached
            .values()
            .filter(|v| v.volume_name == volume_name)
            .map(|v| v.node_name.clone())
            .collect()
    }

    /// Stops listing the volume in the node's status before detaching it (upstream
    /// `RemoveVolumeFromReportAsAttached`).
    pub fn remove_from_report(&mut self, volume_name: &str, node: &str) {
        if let Some(v) = self
            .attached
            .get_mut(&(node.to_owned(), volume_name.to_owned()))
        {
            v.report_as_attached = false;
        }
    }

    /// Lists the volume in the node's status again after a detach failed (upstream
    /// `AddVolumeToReportAsAttached`).
    pub fn add_to_report(&mut self, volume_name: &str, node: &str) {
        if let Some(v) = self
            .attached
            .get_mut(&(node.to_owned(), volume_name.to_owned()))
        {
            v.report_as_attached = true;
        }
    }

    /// Records a completed detach (upstream `MarkVolumeAsDetached`).
    pub fn mark_detached(&mut self, volume_name: &str, node: &str) {
        self.attached
            .remove(&(node.to_owned(), volume_name.to_owned()));
    }

    /// Whether the volume is attached to the node (upstream `IsVolumeAttachedToNode`).
    pub fn is_attached(&self, volume_name: &str, node: &str) -> bool {
        self.attached
            .contains_key(&(node.to_owned(), volume_name.to_owned()))
    }

    /// Every attached volume.
    pub fn attached_volumes(&self) -> impl Iterator<Item = &AttachedVolume> {
        self.attached.values()
    }

    /// The volumes `node` reports in `status.volumesAttached`: attached and not on their way out.
    pub fn volumes_to_report(&self, node: &str) -> Vec<String> {
        self.attached
            .values()
            .filter(|v| v.node_name == node && v.report_as_attached)
            .map(|v| v.volume_name.clone())
            .collect()
    }

    /// Records the first time detach was wanted and returns how long ago that was (upstream
    /// `SetDetachRequestTime`); zero for a volume not attached.
    pub fn set_detach_request_time(
        &mut self,
        volume_name: &str,
        node: &str,
        now: Instant,
    ) -> Duration {
        match self
            .attached
            .get_mut(&(node.to_owned(), volume_name.to_owned()))
        {
            Some(v) => now.saturating_duration_since(*v.detach_requested_at.get_or_insert(now)),
            None => Duration::ZERO,
        }
    }

    /// Clears the detach request of a volume wanted again (upstream `ResetDetachRequestTime`).
    pub fn reset_detach_request_time(&mut self, volume_name: &str, node: &str) {
        if let Some(v) = self
            .attached
            .get_mut(&(node.to_owned(), volume_name.to_owned()))
        {
            v.detach_requested_at = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_stays_desired_until_its_last_pod_goes() {
        let mut dsw = DesiredStateOfWorld::default();
        dsw.add_pod("ns/a", "n1", "d", "h", "pv", true);
        dsw.add_pod("ns/b", "n1", "d", "h", "pv", true);
        let name = crate::volume::attachdetach::naming::unique_volume_name("d", "h");
        assert_eq!(dsw.volumes_to_attach().count(), 1);
        dsw.delete_pod("ns/a", "n1");
        assert!(dsw.volume_exists(&name, "n1"));
        dsw.delete_pod("ns/b", "n1");
        assert!(!dsw.volume_exists(&name, "n1"));
        assert!(!dsw.volume_exists(&name, "n2"));
    }

    #[test]
    fn detach_request_time_is_kept_from_the_first_request_until_reset() {
        let mut dsw = DesiredStateOfWorld::default();
        dsw.add_pod("ns/a", "n1", "d", "h", "pv", true);
        let v = dsw.volumes_to_attach().next().cloned().expect("desired");
        let mut asw = ActualStateOfWorld::default();
        asw.mark_attached(&v);
        assert_eq!(asw.volumes_to_report("n1"), vec![v.volume_name.clone()]);
        let t0 = Instant::now();
        assert_eq!(
            asw.set_detach_request_time(&v.volume_name, "n1", t0),
            Duration::ZERO
        );
        let later = t0 + Duration::from_secs(30);
        assert_eq!(
            asw.set_detach_request_time(&v.volume_name, "n1", later),
            Duration::from_secs(30)
        );
        assert_eq!(
            asw.volumes_to_report("n1").len(),
            1,
            "still listed until detach begins"
        );
        asw.remove_from_report(&v.volume_name, "n1");
        assert!(asw.volumes_to_report("n1").is_empty());
        asw.reset_detach_request_time(&v.volume_name, "n1");
        assert_eq!(
            asw.set_detach_request_time(&v.volume_name, "n1", later),
            Duration::ZERO
        );
    }
}
