//! The names the CSI attacher gives a volume and its VolumeAttachment (upstream `pkg/volume/csi`).

use ring::digest::{SHA256, digest};

/// The CSI plugin's name, the prefix of every unique CSI volume name.
pub const CSI_PLUGIN_NAME: &str = "kubernetes.io/csi";

/// The VolumeAttachment for `volume_handle` of `driver` on `node`: `csi-` and the hex SHA-256 of
/// the three concatenated, as upstream's `getAttachmentName`.
pub fn attachment_name(volume_handle: &str, driver: &str, node: &str) -> String {
    let sum = digest(&SHA256, format!("{volume_handle}{driver}{node}").as_bytes());
    let mut name = String::with_capacity(4 + 64);
    name.push_str("csi-");
    for byte in sum.as_ref() {
        name.push_str(&format!("{byte:02x}"));
    }
    name
}

/// The unique name of a CSI volume, `kubernetes.io/csi/<driver>^<volumeHandle>`, as it appears in
/// `node.status.volumesAttached` and `volumesInUse` (upstream `GetUniqueVolumeNameFromSpec`).
pub fn unique_volume_name(driver: &str, volume_handle: &str) -> String {
    format!("{CSI_PLUGIN_NAME}/{driver}^{volume_handle}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_name_is_csi_and_the_sha256_of_handle_driver_and_node() {
        // `printf %s vol-1csi.example.comnode-a | sha256sum`
        let name = attachment_name("vol-1", "csi.example.com", "node-a");
        assert_eq!(
            name,
            "csi-664f93e6befe920d56b73708bbb3eb1888cad5fb3e7203b1b501f466d0bea90f"
        );
        assert_eq!(
            attachment_name("", "", ""),
            "csi-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_ne!(name, attachment_name("vol-1", "csi.example.com", "node-b"));
    }

    #[test]
    fn unique_volume_name_joins_driver_and_handle_with_a_caret() {
        assert_eq!(
            unique_volume_name("hostpath.csi.k8s.io", "pvc-1"),
            "kubernetes.io/csi/hostpath.csi.k8s.io^pvc-1"
        );
    }
}
