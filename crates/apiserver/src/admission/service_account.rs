//! ServiceAccount: a new pod runs as a ServiceAccount that exists (`default` unless named) and gets the projected `kube-api-access-*` token volume mounted in every container (upstream's `plugin/pkg/admission/serviceaccount`).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::SERVICE_ACCOUNT;
use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::pointer::At;
use crate::registry::create::generate;
use crate::resources::core::SERVICEACCOUNTS;
use crate::resources::pod::PODS;

/// The service account a pod naming none runs as.
pub const DEFAULT_SERVICE_ACCOUNT_NAME: &str = "default";
/// Where the token volume is mounted in every container.
pub const DEFAULT_API_TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The prefix of the token volume's name (`kube-api-access-` plus 5 random characters).
pub const SERVICE_ACCOUNT_VOLUME_NAME: &str = "kube-api-access";
/// What a generated token volume name starts with.
const VOLUME_NAME_PREFIX: &str = "kube-api-access-";
/// The projected token's lifetime: upstream's `WarnOnlyBoundTokenExpirationSeconds` (one
/// hour and seven seconds, which marks the token as a legacy-compatible one).
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The configMap the root CA certificate is published in to every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// Upstream's mirror-pod annotation: mirror pods are never given a service account.
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// How often the `default` account is looked up before the pod is refused: the service
/// account controller creates it right after the namespace, so a pod created at once waits
/// for it (upstream tries 10 times, 100-200 ms apart; other names once).
const DEFAULT_ACCOUNT_ATTEMPTS: usize = 10;
/// The wait between two lookups of the `default` account.
const DEFAULT_ACCOUNT_RETRY: Duration = Duration::from_millis(150);

/// The plugin.
#[derive(Debug)]
pub struct ServiceAccount {
    /// Whether token volumes are added (upstream's `MountServiceAccountToken`, on).
    pub mount_service_account_token: bool,
}

impl Default for ServiceAccount {
    fn default() -> Self {
        Self {
            mount_service_account_token: true,
        }
    }
}

#[async_trait]
impl Plugin for ServiceAccount {
    fn name(&self) -> &'static str {
        SERVICE_ACCOUNT
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    fn mutates(&self) -> bool {
        true
    }

    fn validates(&self) -> bool {
        true
    }

    /// Upstream's `Admit`: new pods only (subresources and updates are validated only).
    async fn admit(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if a.operation != Operation::Create || !a.is_main(&PODS) {
            return Ok(());
        }
        let Some(pod) = a.object.as_ref() else {
            return Ok(());
        };
        if is_mirror_pod(pod) {
            return validate_mirror_pod(a);
        }
        let name = match pod.at("/spec/serviceAccountName").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_owned(),
            _ => DEFAULT_SERVICE_ACCOUNT_NAME.to_owned(),
        };
        let Some(account) = service_account(source, a.namespace, &name).await? else {
            return Err(a.forbidden(&format!(
                "error looking up service account {}/{name}: serviceaccount \"{name}\" not found",
                a.namespace
            )));
        };
        let Some(pod) = a.object.as_mut() else {
            return Ok(());
        };
        if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("serviceAccountName".to_owned(), json!(name));
            // The deprecated alias follows the name, as the pod defaults keep them equal.
            spec.insert("serviceAccount".to_owned(), json!(name));
        }
        if self.mount_service_account_token && should_automount(&account, pod) {
            mount_service_account_token(pod);
        }
        let has_pull_secrets = pod
            .at("/spec/imagePullSecrets")
            .and_then(Value::as_array)
            .is_some_and(|s| !s.is_empty());
        if !has_pull_secrets
            && let Some(secrets) = account.get("imagePullSecrets").and_then(Value::as_array)
            && !secrets.is_empty()
        {
            let refs: Vec<Value> = secrets
                .iter()
                .map(|s| json!({"name": s.get("name").cloned().unwrap_or(json!(""))}))
                .collect();
            pod["spec"]["imagePullSecrets"] = Value::Array(refs);
        }
        Ok(())
    }

    /// Upstream's `Validate`: mirror pods reference no accounts or secrets; a pod's service
    /// account cannot change through an update of its ephemeral containers.
    async fn validate(&self, _: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !a.is_resource(&PODS) || a.operation != Operation::Create || !a.subresource.is_empty() {
            return Ok(());
        }
        match a.object.as_ref() {
            Some(pod) if is_mirror_pod(pod) => validate_mirror_pod(a),
            Some(pod)
                if pod
                    .at("/spec/serviceAccountName")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty) =>
            {
                Err(a.forbidden(&format!(
                    "no service account specified for pod {}/{}",
                    a.namespace, a.name
                )))
            }
            _ => Ok(()),
        }
    }
}

/// Whether the pod is a mirror pod (a static pod the kubelet mirrors).
fn is_mirror_pod(pod: &Value) -> bool {
    pod.at("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
}

/// A mirror pod may not run as a service account or mount secrets, service account tokens or
/// configMaps.
fn validate_mirror_pod(a: &Attributes<'_>) -> Result<()> {
    let Some(pod) = a.object.as_ref() else {
        return Ok(());
    };
    if pod
        .at("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty())
    {
        return Err(a.forbidden("a mirror pod may not reference service accounts"));
    }
    for volume in pod
        .at("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if volume.get("secret").is_some() {
            return Err(a.forbidden("a mirror pod may not reference secrets"));
        }
        if volume.get("projected").is_some() {
            return Err(a.forbidden("a mirror pod may not use projected volumes"));
        }
    }
    Ok(())
}

/// The named account, looked up again a few times for `default` (see
/// [`DEFAULT_ACCOUNT_ATTEMPTS`]), as upstream's `getServiceAccount`.
async fn service_account(
    source: &dyn ObjectSource,
    namespace: &str,
    name: &str,
) -> Result<Option<Arc<Value>>> {
    let attempts = if name == DEFAULT_SERVICE_ACCOUNT_NAME {
        DEFAULT_ACCOUNT_ATTEMPTS
    } else {
        1
    };
    for attempt in 0..attempts {
        if attempt > 0 {
            tokio::time::sleep(DEFAULT_ACCOUNT_RETRY).await;
        }
        if let Some(account) = source.get(&SERVICEACCOUNTS, namespace, name).await? {
            return Ok(Some(account));
        }
    }
    Ok(None)
}

/// The pod's `automountServiceAccountToken` wins, then the account's; true otherwise.
fn should_automount(account: &Value, pod: &Value) -> bool {
    pod.at("/spec/automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            account
                .get("automountServiceAccountToken")
                .and_then(Value::as_bool)
        })
        .unwrap_or(true)
}

/// Mounts the token volume read-only at [`DEFAULT_API_TOKEN_MOUNT_PATH`] in every init
/// container and container not mounting something there already, and adds the volume when
/// one of them needs it (upstream's `mountServiceAccountToken`).
fn mount_service_account_token(pod: &mut Value) {
    let existing = pod
        .at("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .find(|n| {
            n.strip_prefix(SERVICE_ACCOUNT_VOLUME_NAME)
                .is_some_and(|rest| rest.starts_with('-'))
        })
        .map(str::to_owned);
    let has_volume = existing.is_some();
    let volume_name = existing.unwrap_or_else(|| generate(VOLUME_NAME_PREFIX));
    let mount = json!({
        "name": volume_name,
        "readOnly": true,
        "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH,
    });
    let mut needs_volume = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod
            .get_mut("spec")
            .and_then(|s| s.get_mut(list))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in containers.iter_mut() {
            let mounted = container
                .get("volumeMounts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|m| {
                    m.get("mountPath").and_then(Value::as_str) == Some(DEFAULT_API_TOKEN_MOUNT_PATH)
                });
            if mounted {
                continue;
            }
            let Some(c) = container.as_object_mut() else {
                continue;
            };
            match c.entry("volumeMounts").or_insert_with(|| json!([])) {
                Value::Array(mounts) => mounts.push(mount.clone()),
                other => *other = json!([mount.clone()]),
            }
            needs_volume = true;
        }
    }
    if has_volume || !needs_volume {
        return;
    }
    let volume = token_volume(&volume_name);
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        match spec.entry("volumes").or_insert_with(|| json!([])) {
            Value::Array(volumes) => volumes.push(volume),
            other => *other = json!([volume]),
        }
    }
}

/// The projected token volume: a bound token, the root CA and the namespace (upstream's
/// `TokenVolumeSource`, default mode 0644 set explicitly).
pub fn token_volume(name: &str) -> Value {
    // Built once: cloning the finished value is cheaper than building it key by key for
    // every pod.
    static PROJECTED: LazyLock<Value> = LazyLock::new(projected_token_source);
    let mut volume = Map::new();
    volume.insert("name".to_owned(), Value::String(name.to_owned()));
    volume.insert("projected".to_owned(), PROJECTED.clone());
    Value::Object(volume)
}

/// The `projected` source of [`token_volume`].
fn projected_token_source() -> Value {
    json!({
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_EXPIRATION_SECONDS}},
                {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;

    fn accounts() -> Objects {
        Objects::new(vec![
            (
                &SERVICEACCOUNTS,
                json!({"metadata": {"name": "default", "namespace": "ns"},
                    "imagePullSecrets": [{"name": "registry"}]}),
            ),
            (
                &SERVICEACCOUNTS,
                json!({"metadata": {"name": "quiet", "namespace": "ns"},
                    "automountServiceAccountToken": false}),
            ),
        ])
    }

    async fn admit(pod: Value) -> Result<Value> {
        let user = UserInfo::admin();
        let mut a = Attributes::new(Operation::Create, &PODS, "ns", "p", Some(pod), &user);
        ServiceAccount::default().admit(&accounts(), &mut a).await?;
        ServiceAccount::default()
            .validate(&accounts(), &mut a)
            .await?;
        Ok(a.object.unwrap_or_default())
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_gets_the_default_account_and_its_token_volume_everywhere() {
        let pod = admit(json!({"spec": {
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "own", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]}],
        }}))
        .await
        .expect("admitted");
        assert_eq!(pod["spec"]["serviceAccountName"], "default");
        assert_eq!(
            pod["spec"]["imagePullSecrets"],
            json!([{"name": "registry"}])
        );
        let volumes = pod["spec"]["volumes"].as_array().expect("volumes");
        assert_eq!(volumes.len(), 1);
        let name = volumes[0]["name"].as_str().expect("name");
        assert!(
            name.starts_with("kube-api-access-") && name.len() == 21,
            "{name}"
        );
        let sources = &volumes[0]["projected"]["sources"];
        assert_eq!(sources[0]["serviceAccountToken"]["expirationSeconds"], 3607);
        assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
        assert_eq!(sources[1]["configMap"]["items"][0]["key"], "ca.crt");
        assert_eq!(
            sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
            "metadata.namespace"
        );
        assert_eq!(volumes[0]["projected"]["defaultMode"], 420);
        let mount =
            json!({"name": name, "readOnly": true, "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH});
        assert_eq!(
            pod["spec"]["initContainers"][0]["volumeMounts"],
            json!([mount])
        );
        assert_eq!(pod["spec"]["containers"][0]["volumeMounts"], json!([mount]));
        assert_eq!(
            pod["spec"]["containers"][1]["volumeMounts"]
                .as_array()
                .map(Vec::len),
            Some(1),
            "an existing mount at the path wins"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn automount_false_is_honoured_from_pod_or_account() {
        struct Case {
            name: &'static str,
            spec: Value,
            want_volume: bool,
        }
        let cases = [
            Case {
                name: "pod says false",
                spec: json!({"automountServiceAccountToken": false, "containers": [{"name": "c"}]}),
                want_volume: false,
            },
            Case {
                name: "account says false",
                spec: json!({"serviceAccountName": "quiet", "containers": [{"name": "c"}]}),
                want_volume: false,
            },
            Case {
                name: "pod overrides the account",
                spec: json!({"serviceAccountName": "quiet", "automountServiceAccountToken": true, "containers": [{"name": "c"}]}),
                want_volume: true,
            },
        ];
        for case in cases {
            let pod = admit(json!({"spec": case.spec})).await.expect(case.name);
            assert_eq!(
                pod["spec"].get("volumes").is_some(),
                case.want_volume,
                "{}",
                case.name
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_account_is_refused_with_upstreams_message() {
        let err =
            admit(json!({"spec": {"serviceAccountName": "ghost", "containers": [{"name": "c"}]}}))
                .await
                .expect_err("missing");
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: error looking up service account ns/ghost: serviceaccount \"ghost\" not found"
        );
        let user = UserInfo::admin();
        let mut a = Attributes::new(
            Operation::Create,
            &PODS,
            "empty",
            "p",
            Some(json!({"spec": {"containers": [{"name": "c"}]}})),
            &user,
        );
        let err = ServiceAccount::default()
            .admit(&accounts(), &mut a)
            .await
            .expect_err("no default account after the retries");
        assert!(
            err.message
                .ends_with("serviceaccount \"default\" not found")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn mirror_pods_get_nothing_and_may_not_name_accounts() {
        let mirror = json!({"metadata": {"annotations": {MIRROR_POD_ANNOTATION: "x"}},
            "spec": {"containers": [{"name": "c"}]}});
        let err = admit(json!({"metadata": mirror["metadata"].clone(),
            "spec": {"serviceAccountName": "default", "containers": [{"name": "c"}]}}))
        .await
        .expect_err("mirror with account");
        assert!(
            err.message
                .ends_with("a mirror pod may not reference service accounts")
        );
        let user = UserInfo::admin();
        let mut a = Attributes::new(
            Operation::Create,
            &PODS,
            "ns",
            "p",
            Some(mirror.clone()),
            &user,
        );
        ServiceAccount::default()
            .admit(&accounts(), &mut a)
            .await
            .expect("a plain mirror pod");
        assert_eq!(a.object, Some(mirror));
    }
}
