//! core/v1 persistentvolumes and persistentvolumeclaims over HTTP: defaults, the Pending phase, /status, the claim's update rules, upstream's 422s.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{lifecycle, status_of, timed};

fn pv(name: &str) -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": "manual", "hostPath": {"path": "/mnt/data"}}
    }))
    .expect("pv")
}

fn pvc(name: &str, size: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "manual",
            "resources": {"requests": {"storage": size}}}
    }))
    .expect("pvc")
}

#[tokio::test]
async fn persistent_volumes_default_start_pending_and_keep_their_source() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<PersistentVolume> = Api::all(server.client());
        let (created, patched, applied) = lifecycle(
            &api,
            &pv("pv-1"),
            json!({"metadata": {"labels": {"tier": "gold"}}}),
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
                "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "manual", "hostPath": {"path": "/mnt/data"},
                    "mountOptions": ["ro"]}}),
        )
        .await;
        let spec = created.spec.clone().expect("spec");
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
        assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
        let status = created.status.clone().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert!(status.last_phase_transition_time.is_some());
        assert_eq!(patched.metadata.labels.expect("labels")["tier"], "gold");
        assert_eq!(
            applied.spec.and_then(|s| s.mount_options),
            Some(vec!["ro".to_owned()])
        );

        let bound = api
            .patch_status(
                "pv-1",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Bound"}})),
            )
            .await
            .expect("status");
        assert_eq!(bound.status.and_then(|s| s.phase).as_deref(), Some("Bound"));

        let err = api
            .patch(
                "pv-1",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"hostPath": {"path": "/elsewhere"}}})),
            )
            .await
            .expect_err("source is immutable");
        let (code, reason, message) = status_of(err);
        assert_eq!((code, reason.as_str()), (422, "Invalid"));
        assert!(
            message.contains("spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"),
            "{message}"
        );

        let mut sourceless = pv("pv-2");
        if let Some(spec) = sourceless.spec.as_mut() {
            spec.host_path = None;
        }
        let (code, _, message) = status_of(
            api.create(&PostParams::default(), &sourceless)
                .await
                .expect_err("no source"),
        );
        assert_eq!(code, 422);
        assert_eq!(
            message,
            "PersistentVolume \"pv-2\" is invalid: spec: Required value: must specify a volume type"
        );
    })
    .await;
}

#[tokio::test]
async fn claims_are_immutable_except_a_bound_claims_growing_request_of_an_expandable_class() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<PersistentVolumeClaim> = Api::namespaced(server.client(), "default");
        let (created, _, _) = lifecycle(
            &api,
            &pvc("data", "1Gi"),
            json!({"metadata": {"annotations": {"team": "a"}}}),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": "default", "labels": {"app": "db"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "manual",
                    "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await;
        assert_eq!(
            created.status.and_then(|s| s.phase).as_deref(),
            Some("Pending")
        );
        assert_eq!(
            created.spec.and_then(|s| s.volume_mode).as_deref(),
            Some("Filesystem")
        );

        let grow = Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}}}));
        let (code, _, message) = status_of(
            api.patch("data", &PatchParams::default(), &grow)
                .await
                .expect_err("unbound claims do not resize"),
        );
        assert_eq!(code, 422);
        assert!(
            message.contains("spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"),
            "{message}"
        );

        api.patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"volumeName": "pv-1"}})),
        )
        .await
        .expect("binding sets volumeName once");
        api.patch_status(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "1Gi"}}})),
        )
        .await
        .expect("bound");
        let (code, _, message) = status_of(
            api.patch("data", &PatchParams::default(), &grow)
                .await
                .expect_err("its class does not exist"),
        );
        assert_eq!(code, 403);
        assert_eq!(
            message,
            "persistentvolumeclaims \"data\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
        );
        let classes: Api<StorageClass> = Api::all(server.client());
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "manual"}, "provisioner": "example.com/manual",
            "allowVolumeExpansion": true}))
        .expect("class");
        classes
            .create(&PostParams::default(), &class)
            .await
            .expect("expandable class");
        let grown = api
            .patch("data", &PatchParams::default(), &grow)
            .await
            .expect("a bound claim of an expandable class grows");
        assert_eq!(
            grown.spec.and_then(|s| s.resources).and_then(|r| r.requests).expect("requests")["storage"].0,
            "5Gi"
        );
        let (code, _, message) = status_of(
            api.patch(
                "data",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "512Mi"}}}})),
            )
            .await
            .expect_err("not below its capacity"),
        );
        assert_eq!(code, 422);
        assert!(
            message.contains("spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"),
            "{message}"
        );

        let (code, _, message) = status_of(
            api.create(&PostParams::default(), &pvc("empty", "0"))
                .await
                .expect_err("zero size"),
        );
        assert_eq!(code, 422);
        assert!(message.contains("spec.resources[storage]: Invalid value: \"0\": must be greater than zero"), "{message}");
    })
    .await;
}

/// StorageObjectInUseProtection is on by default, as in kube-apiserver: new claims and volumes
/// carry their protection finalizer, so a deleted one stays `Terminating` until the protection
/// controllers (none runs beside a test server) let it go.
#[tokio::test]
async fn claims_and_volumes_get_their_protection_finalizers_by_default() {
    timed(async {
        let server = TestServer::start().await;
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(server.client(), "default");
        let volumes: Api<PersistentVolume> = Api::all(server.client());
        let claim = claims
            .create(&PostParams::default(), &pvc("data", "1Gi"))
            .await
            .expect("create claim");
        assert_eq!(
            claim.metadata.finalizers,
            Some(vec!["kubernetes.io/pvc-protection".to_owned()])
        );
        let volume = volumes
            .create(&PostParams::default(), &pv("pv-data"))
            .await
            .expect("create volume");
        assert_eq!(
            volume.metadata.finalizers,
            Some(vec!["kubernetes.io/pv-protection".to_owned()])
        );
        claims
            .delete("data", &Default::default())
            .await
            .expect("delete claim");
        let terminating = claims.get("data").await.expect("still there");
        assert!(terminating.metadata.deletion_timestamp.is_some());
    })
    .await;
}
