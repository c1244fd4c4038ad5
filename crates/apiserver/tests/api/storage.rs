//! storage.k8s.io/v1 over HTTP: StorageClass defaults and immutable fields, CSIDriver defaults, VolumeAttachment status, CSINode and CSIStorageCapacity lifecycles.

use kcm_apiserver::testing::TestServer;
use serde_json::json;

use crate::common::{raw, timed};
use crate::lifecycle::{self, Lifecycle};

const STORAGE: &str = "/apis/storage.k8s.io/v1";

fn body(v: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&v).expect("json")
}

#[tokio::test]
async fn storage_classes_default_and_freeze_their_provisioner() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{STORAGE}/storageclasses"),
                object: json!({"metadata": {"name": "fast"}, "provisioner": "ebs.csi.aws.com", "parameters": {"type": "gp3"}}),
                patch: json!({"allowVolumeExpansion": true}),
                apply: json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                    "metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                    "provisioner": "ebs.csi.aws.com", "parameters": {"type": "gp3"}}),
            },
        )
        .await;
        assert_eq!(out.created["reclaimPolicy"], "Delete");
        assert_eq!(out.created["volumeBindingMode"], "Immediate");
        assert_eq!(out.patched["allowVolumeExpansion"], true);

        let classes = format!("{STORAGE}/storageclasses");
        let (code, _) = raw(&client, "POST", &classes, "application/json",
            body(json!({"metadata": {"name": "slow"}, "provisioner": "a.example.com"}))).await;
        assert_eq!(code, 201);
        let (code, status) = raw(&client, "PATCH", &format!("{classes}/slow"), "application/merge-patch+json",
            body(json!({"provisioner": "b.example.com", "parameters": {"x": "y"}}))).await;
        assert_eq!(code, 422);
        assert_eq!(
            status["message"],
            "StorageClass.storage.k8s.io \"slow\" is invalid: [parameters: Forbidden: updates to parameters are forbidden., provisioner: Forbidden: updates to provisioner are forbidden.]"
        );
    })
    .await;
}

#[tokio::test]
async fn csi_objects_and_volume_attachments() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let driver = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{STORAGE}/csidrivers"),
                object: json!({"metadata": {"name": "hostpath.csi.k8s.io"}, "spec": {"podInfoOnMount": true}}),
                patch: json!({"spec": {"storageCapacity": true}}),
                apply: json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                    "metadata": {"name": "hostpath.csi.k8s.io"}, "spec": {"podInfoOnMount": true, "attachRequired": true}}),
            },
        )
        .await;
        assert_eq!(
            driver.created["spec"],
            json!({"attachRequired": true, "podInfoOnMount": true, "storageCapacity": false,
                "fsGroupPolicy": "ReadWriteOnceWithFSType", "volumeLifecycleModes": ["Persistent"],
                "requiresRepublish": false, "seLinuxMount": false})
        );
        lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{STORAGE}/csinodes"),
                object: json!({"metadata": {"name": "node-1"}, "spec": {"drivers": [{"name": "a.csi.example.com", "nodeID": "n1"}]}}),
                patch: json!({"spec": {"drivers": [{"name": "b.csi.example.com", "nodeID": "n1"}]}}),
                apply: json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-1"},
                    "spec": {"drivers": [{"name": "a.csi.example.com", "nodeID": "n1"}]}}),
            },
        )
        .await;
        let capacity = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{STORAGE}/namespaces/default/csistoragecapacities"),
                object: json!({"metadata": {"name": "cap"}, "storageClassName": "fast", "capacity": "1.5Gi"}),
                patch: json!({"capacity": "2Gi"}),
                apply: json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                    "metadata": {"name": "cap"}, "storageClassName": "fast", "maximumVolumeSize": "1Gi"}),
            },
        )
        .await;
        assert_eq!(capacity.created["capacity"], "1536Mi", "canonical quantity");

        let attachments = format!("{STORAGE}/volumeattachments");
        let va = json!({"metadata": {"name": "csi-1"}, "spec": {"attacher": "a.csi.example.com", "nodeName": "node-1",
            "source": {"persistentVolumeName": "pv-1"}}, "status": {"attached": true}});
        let (code, created) = raw(&client, "POST", &attachments, "application/json", body(va)).await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(created["status"], json!({"attached": false}));
        let (code, attached) = raw(&client, "PATCH", &format!("{attachments}/csi-1/status"), "application/merge-patch+json",
            body(json!({"status": {"attached": true}}))).await;
        assert_eq!(code, 200, "{attached}");
        assert_eq!(attached["status"]["attached"], true);
        let (code, status) = raw(&client, "PATCH", &format!("{attachments}/csi-1"), "application/merge-patch+json",
            body(json!({"spec": {"nodeName": "node-2"}}))).await;
        assert_eq!(code, 422, "{status}");
    })
    .await;
}

/// VolumeAttributesClasses (GA in v1.34): a driver and parameters, both frozen, and a delete
/// answered with the object.
#[tokio::test]
async fn volume_attributes_classes_freeze_their_driver_and_parameters() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let class = json!({"metadata": {"name": "gold"}, "driverName": "ebs.csi.aws.com",
            "parameters": {"iops": "3000"}});
        lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{STORAGE}/volumeattributesclasses"),
                object: class.clone(),
                patch: json!({"metadata": {"labels": {"tier": "gold"}}}),
                apply: json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
                    "metadata": {"name": "gold"}, "driverName": "ebs.csi.aws.com",
                    "parameters": {"iops": "3000"}}),
            },
        )
        .await;
        let classes = format!("{STORAGE}/volumeattributesclasses");
        let (code, status) = raw(&client, "POST", &classes, "application/json",
            body(json!({"metadata": {"name": "empty"}, "driverName": "ebs.csi.aws.com"}))).await;
        assert_eq!(code, 422, "{status}");
        assert_eq!(
            status["message"],
            "VolumeAttributesClass.storage.k8s.io \"empty\" is invalid: parameters: Required value: must contain at least one key/value pair"
        );
        let (code, _) = raw(&client, "POST", &classes, "application/json", body(class)).await;
        assert_eq!(code, 201);
        let (code, status) = raw(&client, "PATCH", &format!("{classes}/gold"), "application/merge-patch+json",
            body(json!({"parameters": {"iops": "6000"}}))).await;
        assert_eq!(code, 422, "{status}");
        assert_eq!(
            status["message"],
            "VolumeAttributesClass.storage.k8s.io \"gold\" is invalid: parameters: Forbidden: updates to parameters are forbidden."
        );
        let (code, deleted) = raw(&client, "DELETE", &format!("{classes}/gold"), "application/json", Vec::new()).await;
        assert_eq!((code, &deleted["kind"]), (200, &json!("VolumeAttributesClass")), "{deleted}");
    })
    .await;
}
