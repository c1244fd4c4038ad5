//! Unit tests of the volume binding (facts of upstream's `volume_binding_test.go` and
//! `binder_test.go`: the PreFilter messages, the Filter reasons, which volume a claim gets).

use k8s_openapi::api::core::v1::{
    EphemeralVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolumeClaimVolumeSource, PodSpec, Volume, VolumeNodeAffinity,
};
use k8s_openapi::api::core::v1::{TopologySelectorLabelRequirement, TopologySelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_testing::{MetaBuilder, node, pv, pvc};

use super::*;
use crate::storage::client::FakeVolumes;

const WFFC: &str = "wait";
const IMMEDIATE: &str = "immediate";
const LOCAL: &str = "local";

fn class(name: &str, provisioner: &str, mode: &str) -> Arc<StorageClass> {
    Arc::new(StorageClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        provisioner: provisioner.to_owned(),
        volume_binding_mode: Some(mode.to_owned()),
        ..StorageClass::default()
    })
}

struct Fixture {
    binding: VolumeBinding,
    claims: Indexer<PersistentVolumeClaim>,
    volumes: Indexer<PersistentVolume>,
}

fn fixture() -> Fixture {
    let claims = Indexer::new();
    let volumes = Indexer::new();
    let classes = Indexer::new();
    for c in [
        class(WFFC, "sim.kcm.io/hostpath", "WaitForFirstConsumer"),
        class(IMMEDIATE, "sim.kcm.io/hostpath", "Immediate"),
        class(LOCAL, NO_PROVISIONER, "WaitForFirstConsumer"),
    ] {
        classes.add(c).expect("class");
    }
    let binding = VolumeBinding::new(
        claims.clone(),
        volumes.clone(),
        classes,
        Arc::new(FakeVolumes::new()),
    );
    Fixture {
        binding,
        claims,
        volumes,
    }
}

fn claim(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    pvc(name)
        .namespace("ns")
        .uid(format!("uid-{name}"))
        .storage(size)
        .storage_class(class)
        .build()
}

fn bound(name: &str, class: &str, volume: &str) -> PersistentVolumeClaim {
    let mut c = claim(name, class, "1Gi");
    c.spec.get_or_insert_default().volume_name = Some(volume.to_owned());
    c.metadata
        .annotations
        .get_or_insert_default()
        .insert(ANN_BIND_COMPLETED.to_owned(), "yes".to_owned());
    c
}

fn on_node(volume: PersistentVolume, host: &str) -> PersistentVolume {
    let mut volume = volume;
    volume.spec.get_or_insert_default().node_affinity = Some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "kubernetes.io/hostname".to_owned(),
                    operator: "In".to_owned(),
                    values: Some(vec![host.to_owned()]),
                }]),
                match_fields: None,
            }],
        }),
    });
    volume
}

fn local_volume(name: &str, size: &str, host: &str) -> Arc<PersistentVolume> {
    let mut volume = pv(name).capacity(size).phase("Available").build();
    let spec = volume.spec.get_or_insert_default();
    spec.storage_class_name = Some(LOCAL.to_owned());
    spec.access_modes = Some(vec!["ReadWriteOnce".to_owned()]);
    Arc::new(on_node(volume, host))
}

fn host(name: &str) -> Node {
    node(name).label("kubernetes.io/hostname", name).build()
}

fn pod_with(claims: &[&str], ephemeral: &[&str]) -> Pod {
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|c| Volume {
            name: format!("v-{c}"),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: (*c).to_owned(),
                read_only: None,
            }),
            ..Volume::default()
        })
        .collect();
    volumes.extend(ephemeral.iter().map(|v| Volume {
        name: (*v).to_owned(),
        ephemeral: Some(EphemeralVolumeSource::default()),
        ..Volume::default()
    }));
    Pod {
        metadata: ObjectMeta {
            name: Some("p".to_owned()),
            namespace: Some("ns".to_owned()),
            uid: Some("uid-p".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn claims_of(f: &Fixture, pod: &Pod) -> PodVolumeClaims {
    match f.binding.pre_filter(pod) {
        PreFilter::Claims(claims) => claims,
        other => panic!("expected claims, got {other:?}"),
    }
}

fn unresolvable(f: &Fixture, pod: &Pod) -> String {
    match f.binding.pre_filter(pod) {
        PreFilter::Unresolvable(message) => message,
        other => panic!("expected unresolvable, got {other:?}"),
    }
}

#[test]
fn a_pod_without_claims_is_skipped() {
    let f = fixture();
    assert!(matches!(
        f.binding.pre_filter(&pod_with(&[], &[])),
        PreFilter::NoClaims
    ));
    assert!(!uses_claims(&pod_with(&[], &[])));
    assert!(uses_claims(&pod_with(&[], &["scratch"])));
}

#[test]
fn pre_filter_messages_follow_upstream() {
    let f = fixture();
    assert_eq!(
        unresolvable(&f, &pod_with(&["missing"], &[])),
        r#"persistentvolumeclaim "missing" not found"#
    );
    assert_eq!(
        unresolvable(&f, &pod_with(&[], &["scratch"])),
        r#"waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch""#
    );
    f.claims
        .add(Arc::new(claim("p-scratch", WFFC, "1Gi")))
        .expect("claim");
    assert_eq!(
        unresolvable(&f, &pod_with(&[], &["scratch"])),
        "PVC ns/p-scratch was not created for pod ns/p (pod is not owner)"
    );
    f.claims
        .add(Arc::new(claim("now", IMMEDIATE, "1Gi")))
        .expect("claim");
    assert_eq!(
        unresolvable(&f, &pod_with(&["now"], &[])),
        UNBOUND_IMMEDIATE_CLAIMS
    );
    let mut going = claim("going", WFFC, "1Gi");
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    f.claims.add(Arc::new(going)).expect("claim");
    assert_eq!(
        unresolvable(&f, &pod_with(&["going"], &[])),
        r#"persistentvolumeclaim "going" is being deleted"#
    );
    // Pre-bound to a volume but not bound yet: treated as an unbound immediate claim.
    let mut prebound = claim("prebound", WFFC, "1Gi");
    prebound.spec.get_or_insert_default().volume_name = Some("pv-x".to_owned());
    f.claims.add(Arc::new(prebound)).expect("claim");
    assert_eq!(
        unresolvable(&f, &pod_with(&["prebound"], &[])),
        UNBOUND_IMMEDIATE_CLAIMS
    );
}

#[test]
fn a_bound_claims_volume_must_admit_the_node_and_exist() {
    let f = fixture();
    f.claims
        .add(Arc::new(bound("data", WFFC, "pv-a")))
        .expect("claim");
    f.volumes
        .add(Arc::new(on_node(pv("pv-a").capacity("1Gi").build(), "n1")))
        .expect("volume");
    let pod = pod_with(&["data"], &[]);
    let claims = claims_of(&f, &pod);
    let fits = f
        .binding
        .find_pod_volumes(&claims, &host("n1"))
        .expect("fits");
    assert!(fits.all_bound());
    assert_eq!(
        f.binding.find_pod_volumes(&claims, &host("n2")),
        Err(vec![ERR_REASON_NODE_CONFLICT.to_owned()])
    );
    f.volumes.delete(&pv("pv-a").build()).expect("delete");
    assert_eq!(
        f.binding.find_pod_volumes(&claims, &host("n1")),
        Err(vec![ERR_REASON_PV_NOT_EXIST.to_owned()])
    );
}

#[test]
fn a_delayed_claim_gets_the_smallest_matching_volume_on_the_node() {
    let f = fixture();
    f.claims
        .add(Arc::new(claim("data", LOCAL, "1Gi")))
        .expect("claim");
    for volume in [
        local_volume("big-n1", "10Gi", "n1"),
        local_volume("small-n1", "2Gi", "n1"),
        local_volume("tiny-n1", "500Mi", "n1"),
        local_volume("small-n2", "1Gi", "n2"),
    ] {
        f.volumes.add(volume).expect("volume");
    }
    let claims = claims_of(&f, &pod_with(&["data"], &[]));
    let on_n1 = f
        .binding
        .find_pod_volumes(&claims, &host("n1"))
        .expect("n1");
    assert_eq!(on_n1.static_bindings.len(), 1);
    assert_eq!(
        on_n1.static_bindings[0].1.metadata.name.as_deref(),
        Some("small-n1")
    );
    let on_n2 = f
        .binding
        .find_pod_volumes(&claims, &host("n2"))
        .expect("n2");
    assert_eq!(
        on_n2.static_bindings[0].1.metadata.name.as_deref(),
        Some("small-n2")
    );
    // No volume and no provisioner for the class on n3.
    assert_eq!(
        f.binding.find_pod_volumes(&claims, &host("n3")),
        Err(vec![ERR_REASON_BIND_CONFLICT.to_owned()])
    );
}

#[test]
fn two_claims_never_get_the_same_volume_and_assumed_volumes_are_held() {
    let f = fixture();
    for name in ["a", "b"] {
        f.claims
            .add(Arc::new(claim(name, LOCAL, "1Gi")))
            .expect("claim");
    }
    f.volumes
        .add(local_volume("only", "1Gi", "n1"))
        .expect("volume");
    let both = claims_of(&f, &pod_with(&["a", "b"], &[]));
    assert_eq!(
        f.binding.find_pod_volumes(&both, &host("n1")),
        Err(vec![ERR_REASON_BIND_CONFLICT.to_owned()]),
        "one volume cannot serve two claims of the pod"
    );
    let just_a = claims_of(&f, &pod_with(&["a"], &[]));
    let chosen = f.binding.find_pod_volumes(&just_a, &host("n1")).expect("a");
    f.binding.assume(&chosen);
    assert_eq!(f.binding.assumed_count(), 1);
    let just_b = claims_of(&f, &pod_with(&["b"], &[]));
    assert_eq!(
        f.binding.find_pod_volumes(&just_b, &host("n1")),
        Err(vec![ERR_REASON_BIND_CONFLICT.to_owned()]),
        "held for a"
    );
    assert!(
        f.binding.find_pod_volumes(&just_a, &host("n1")).is_ok(),
        "a may still have it"
    );
    f.binding.revert(&chosen);
    assert_eq!(f.binding.assumed_count(), 0);
    assert!(f.binding.find_pod_volumes(&just_b, &host("n1")).is_ok());
}

#[test]
fn a_claim_without_a_volume_is_provisioned_where_the_class_allows() {
    let f = fixture();
    f.claims
        .add(Arc::new(claim("data", WFFC, "1Gi")))
        .expect("claim");
    let claims = claims_of(&f, &pod_with(&["data"], &[]));
    let fits = f
        .binding
        .find_pod_volumes(&claims, &host("n1"))
        .expect("fits");
    assert_eq!(fits.dynamic_provisions.len(), 1);
    assert!(fits.static_bindings.is_empty());

    // allowedTopologies restrict where the class provisions.
    let mut zoned = (*class("zoned", "sim.kcm.io/hostpath", "WaitForFirstConsumer")).clone();
    zoned.allowed_topologies = Some(vec![TopologySelectorTerm {
        match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
            key: "kubernetes.io/hostname".to_owned(),
            values: vec!["n2".to_owned()],
        }]),
    }]);
    f.binding.classes.add(Arc::new(zoned)).expect("class");
    f.claims
        .add(Arc::new(claim("zonal", "zoned", "1Gi")))
        .expect("claim");
    let claims = claims_of(&f, &pod_with(&["zonal"], &[]));
    assert_eq!(
        f.binding.find_pod_volumes(&claims, &host("n1")),
        Err(vec![ERR_REASON_BIND_CONFLICT.to_owned()])
    );
    assert!(f.binding.find_pod_volumes(&claims, &host("n2")).is_ok());
}

#[test]
fn a_claim_whose_node_is_selected_fits_that_node_only() {
    let f = fixture();
    let mut selected = claim("data", WFFC, "1Gi");
    selected
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(ANN_SELECTED_NODE.to_owned(), "n2".to_owned());
    f.claims.add(Arc::new(selected)).expect("claim");
    let claims = claims_of(&f, &pod_with(&["data"], &[]));
    assert_eq!(
        f.binding.find_pod_volumes(&claims, &host("n1")),
        Err(vec![ERR_REASON_BIND_CONFLICT.to_owned()])
    );
    let fits = f
        .binding
        .find_pod_volumes(&claims, &host("n2"))
        .expect("n2");
    assert_eq!(fits.dynamic_provisions.len(), 1);
}

#[test]
fn binding_a_volume_sets_the_claim_ref_and_bound_by_controller() {
    let c = claim("data", LOCAL, "1Gi");
    let volume = local_volume("pv-1", "1Gi", "n1");
    let written = bind_volume_to_claim(&volume, &c).expect("dirty");
    let claim_ref = written
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .expect("claimRef");
    assert_eq!(claim_ref.kind.as_deref(), Some("PersistentVolumeClaim"));
    assert_eq!(claim_ref.api_version.as_deref(), Some("v1"));
    assert_eq!(claim_ref.namespace.as_deref(), Some("ns"));
    assert_eq!(claim_ref.name.as_deref(), Some("data"));
    assert_eq!(claim_ref.uid.as_deref(), Some("uid-data"));
    assert_eq!(
        written
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_BOUND_BY_CONTROLLER))
            .map(String::as_str),
        Some("yes")
    );
    assert_eq!(bind_volume_to_claim(&written, &c), None, "already bound");
}

#[tokio::test(start_paused = true)]
async fn the_binding_cycle_writes_and_waits_for_the_pv_controller() {
    let f = fixture();
    let client = Arc::new(FakeVolumes::new());
    let binding = VolumeBinding::new(
        f.claims.clone(),
        f.volumes.clone(),
        f.binding.classes.clone(),
        client.clone(),
    )
    .with_timing(Duration::from_secs(5), Duration::from_secs(1));
    let c = Arc::new(claim("data", LOCAL, "1Gi"));
    f.claims.add(c.clone()).expect("claim");
    let volume = local_volume("pv-1", "1Gi", "n1");
    f.volumes.add(volume.clone()).expect("volume");
    let plan = PodVolumes {
        static_bindings: vec![(c.clone(), volume.clone())],
        dynamic_provisions: Vec::new(),
    };
    // Nobody completes the binding: the cycle gives up at the timeout.
    let err = binding
        .bind_pod_volumes("n1", &plan)
        .await
        .expect_err("times out");
    assert!(err.contains("timed out waiting for the condition"), "{err}");
    assert!(
        client.actions().iter().any(|a| a == "update-volume pv-1"),
        "{:?}",
        client.actions()
    );

    // The PV controller's work: the volume's claimRef and the claim's binding.
    f.volumes
        .update(Arc::new(bind_volume_to_claim(&volume, &c).expect("dirty")))
        .expect("volume");
    f.claims
        .update(Arc::new(bound("data", LOCAL, "pv-1")))
        .expect("claim");
    binding.bind_pod_volumes("n1", &plan).await.expect("bound");

    // A claim recreated meanwhile fails the cycle.
    f.claims
        .update(Arc::new(pvc("data").namespace("ns").uid("other").build()))
        .expect("claim");
    let err = binding
        .bind_pod_volumes("n1", &plan)
        .await
        .expect_err("recreated");
    assert!(err.contains("was recreated"), "{err}");
}
