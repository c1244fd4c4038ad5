//! Secrets: [`bootstrap_token_secret`].

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A `bootstrap.kubernetes.io/token` Secret `name` in `kube-system` with `data` (text
/// values), as `kubeadm token create` writes one.
pub fn bootstrap_token_secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("kube-system".to_owned()),
            ..ObjectMeta::default()
        },
        type_: Some("bootstrap.kubernetes.io/token".to_owned()),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Secret::default()
    }
}
