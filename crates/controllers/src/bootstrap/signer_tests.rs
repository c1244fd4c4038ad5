use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcm_machinery::controller::clock::fixed_clock;
use kcm_machinery::informer::store::Indexer;

use super::*;
use crate::bootstrap::FakeBootstrapClient;
use crate::bootstrap::token::detached_signature;

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";

fn cluster_info(signatures: &[(&str, &str)]) -> ConfigMap {
    let mut data = BTreeMap::from([("kubeconfig".to_owned(), KUBECONFIG.to_owned())]);
    for (id, sig) in signatures {
        data.insert(format!("jws-kubeconfig-{id}"), (*sig).to_owned());
    }
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("cluster-info".to_owned()),
            namespace: Some("kube-public".to_owned()),
            resource_version: Some("7".to_owned()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    }
}

fn token(id: &str, secret: &str, signing: bool) -> Secret {
    let mut data = vec![("token-id", id), ("token-secret", secret)];
    if signing {
        data.push(("usage-bootstrap-signing", "true"));
    }
    kcm_testing::bootstrap_token_secret(&format!("bootstrap-token-{id}"), &data)
}

fn signer(
    config_maps: Vec<ConfigMap>,
    secrets: Vec<Secret>,
) -> (BootstrapSigner, Arc<FakeBootstrapClient>) {
    let cms = Indexer::default();
    for cm in config_maps {
        cms.add(Arc::new(cm)).expect("add");
    }
    let ss = Indexer::default();
    for s in secrets {
        ss.add(Arc::new(s)).expect("add");
    }
    let client = Arc::new(FakeBootstrapClient::new());
    let now: Timestamp = "2026-06-01T00:00:00Z".parse().expect("now");
    let signer = BootstrapSigner::with_cache(cms, ss, client.clone(), fixed_clock(now), None);
    (signer, client)
}

const KEY: &str = "kube-public/cluster-info";

#[tokio::test]
async fn no_config_map_or_no_tokens_means_no_update() {
    // Upstream's TestNoConfigMap, and a ConfigMap with no token to sign it.
    let (no_config_map, client) =
        signer(Vec::new(), vec![token("abcdef", "0123456789abcdef", true)]);
    no_config_map.sync(KEY).await.expect("sync");
    assert!(client.updates().is_empty());
    let (no_tokens, client) = signer(vec![cluster_info(&[])], Vec::new());
    no_tokens.sync(KEY).await.expect("sync");
    assert!(client.updates().is_empty());
}

#[tokio::test]
async fn a_signing_token_adds_its_signature() {
    // Upstream's TestSimpleSign.
    let (signer, client) = signer(
        vec![cluster_info(&[])],
        vec![
            token("abcdef", "0123456789abcdef", true),
            token("zzzzzz", "0123456789abcdef", false),
        ],
    );
    signer.sync(KEY).await.expect("sync");
    let updates = client.updates();
    assert_eq!(updates.len(), 1);
    let data = updates[0].data.as_ref().expect("data");
    assert_eq!(
        data.get("jws-kubeconfig-abcdef"),
        Some(&detached_signature(
            KUBECONFIG,
            "abcdef",
            "0123456789abcdef"
        ))
    );
    assert!(!data.contains_key("jws-kubeconfig-zzzzzz"));
    assert_eq!(data.get("kubeconfig").map(String::as_str), Some(KUBECONFIG));
    assert_eq!(updates[0].metadata.resource_version.as_deref(), Some("7"));
}

#[tokio::test]
async fn a_current_signature_is_left_and_a_stale_one_is_replaced_or_removed() {
    // Upstream's TestNoSignNeeded, TestUpdateSignature and TestRemoveSignature.
    let good = detached_signature(KUBECONFIG, "abcdef", "0123456789abcdef");
    let (signer, client) = signer(
        vec![cluster_info(&[("abcdef", &good)])],
        vec![token("abcdef", "0123456789abcdef", true)],
    );
    signer.sync(KEY).await.expect("sync");
    assert!(client.updates().is_empty(), "nothing to change");

    let (signer, client) = signer_with(&[("abcdef", "old-signature")], true);
    signer.sync(KEY).await.expect("sync");
    let data = client.updates()[0].data.clone().expect("data");
    assert_eq!(data.get("jws-kubeconfig-abcdef"), Some(&good));

    let (signer, client) = signer_with(&[("abcdef", &good)], false);
    signer.sync(KEY).await.expect("sync");
    let data = client.updates()[0].data.clone().expect("data");
    assert!(!data.contains_key("jws-kubeconfig-abcdef"));
}

fn signer_with(
    signatures: &[(&str, &str)],
    signing: bool,
) -> (BootstrapSigner, Arc<FakeBootstrapClient>) {
    signer(
        vec![cluster_info(signatures)],
        vec![token("abcdef", "0123456789abcdef", signing)],
    )
}

#[tokio::test]
async fn cluster_info_and_token_changes_enqueue_the_one_key() {
    let (signer, _client) = signer(Vec::new(), Vec::new());
    let handlers = signer.event_handlers().clone();
    ResourceEventHandler::<ConfigMap>::on_add(&handlers, Arc::new(cluster_info(&[])), true);
    ResourceEventHandler::<Secret>::on_add(&handlers, Arc::new(token("abcdef", "x", true)), true);
    let mut other = cluster_info(&[]);
    other.metadata.name = Some("other".to_owned());
    ResourceEventHandler::<ConfigMap>::on_add(&handlers, Arc::new(other), true);
    assert_eq!(signer.queue().len(), 1);
}
