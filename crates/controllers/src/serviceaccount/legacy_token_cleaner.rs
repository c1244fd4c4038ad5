//! The legacy service account token cleaner: labels auto-generated token Secrets unused for a clean-up period `kubernetes.io/legacy-token-invalid-since`, and deletes them once invalid for another period (upstream `legacy_serviceaccount_token_cleaner.go`).
//!
//! Every sync interval (a day) a pass, as upstream's `evaluateSATokens`, reads the API
//! server's tracking ConfigMap (`kube-system/kube-apiserver-legacy-service-account-token-tracking`,
//! key `since`: the day the API server began labelling tokens with their last use) and does
//! nothing until a whole clean-up period has passed since the day after it. Then every
//! `kubernetes.io/service-account-token` Secret of the cache is considered; it is left alone when
//! created within the period, being deleted, used within the period (its
//! `kubernetes.io/legacy-token-last-used` date, when it has one; a malformed one leaves it
//! alone too), not listed in its ServiceAccount's `secrets` (the account, by the Secret's name and
//! uid annotations, missing: it cannot be told auto-generated), or referenced by a pod of its
//! namespace. Otherwise, without a well-formed invalid-since date it gets today's (a merge patch
//! carrying the Secret's uid, so it lands on this very Secret); with one older than the period it
//! is deleted, on the condition that its resourceVersion has not moved.
//!
//! Dates are UTC days, `YYYY-MM-DD`, compared as strings as upstream does.

use std::collections::{BTreeSet, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::workers::panic_message;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, Lister, SharedIndexInformer, SharedInformerFactory,
    wait_for_synced,
};
use kcm_machinery::labels::Selector;
use serde_json::json;
use tokio_util::sync::CancellationToken;

pub use kcm_machinery::controller::clock::Clock;

use super::legacy_token_cleaner_client::{ApiLegacyTokenCleanerClient, LegacyTokenCleanerClient};
use super::tokens::{
    SERVICE_ACCOUNT_NAME_KEY, SERVICE_ACCOUNT_TOKEN_TYPE, SERVICE_ACCOUNT_UID_KEY,
};

/// kube-controller-manager's name of this controller.
pub const LEGACY_TOKEN_CLEANER_CONTROLLER_NAME: &str =
    "legacy-serviceaccount-token-cleaner-controller";
/// The older name `--controllers` also accepts.
pub const LEGACY_TOKEN_CLEANER_CONTROLLER_ALIAS: &str = "legacy-service-account-token-cleaner";
/// How often a pass runs (upstream's `DefaultCleanerSyncInterval`).
pub const DEFAULT_CLEANER_SYNC_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// `--legacy-service-account-token-clean-up-period`'s default: a year (8760h).
pub const DEFAULT_CLEAN_UP_PERIOD: Duration = Duration::from_secs(365 * 24 * 3600);
/// The label the API server sets to the day a legacy token was last used.
pub const LAST_USED_LABEL_KEY: &str = "kubernetes.io/legacy-token-last-used";
/// The label this controller sets to the day it found a token unused; the API server then
/// refuses the token.
pub const INVALID_SINCE_LABEL_KEY: &str = "kubernetes.io/legacy-token-invalid-since";
/// The API server's ConfigMap (in `kube-system`) saying since when it tracks token use
/// (upstream's `legacytokentracking.ConfigMapName`).
pub const TRACKING_CONFIG_MAP_NAME: &str = "kube-apiserver-legacy-service-account-token-tracking";
/// Its data key holding the first tracked day (`legacytokentracking.ConfigMapDataKey`).
pub const TRACKING_CONFIG_MAP_DATA_KEY: &str = "since";
/// The namespace of the tracking ConfigMap.
pub const SYSTEM_NAMESPACE: &str = "kube-system";

/// Tuning of a [`LegacyTokenCleaner`] (upstream's `LegacySATokenCleanerOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyTokenCleanerOptions {
    /// How long a token may go unused before it is marked invalid, and then stay invalid
    /// before it is deleted (`--legacy-service-account-token-clean-up-period`).
    pub clean_up_period: Duration,
    /// How often a pass runs.
    pub sync_interval: Duration,
}

impl Default for LegacyTokenCleanerOptions {
    fn default() -> Self {
        Self {
            clean_up_period: DEFAULT_CLEAN_UP_PERIOD,
            sync_interval: DEFAULT_CLEANER_SYNC_INTERVAL,
        }
    }
}

/// Why a cleaner could not be built (upstream's `NewLegacySATokenCleaner` errors).
#[derive(Debug, thiserror::Error)]
pub enum CleanerError {
    /// The clean-up period is zero.
    #[error("invalid CleanUpPeriod: {0:?}")]
    CleanUpPeriod(Duration),
    /// The sync interval is zero.
    #[error("invalid SyncInterval: {0:?}")]
    SyncInterval(Duration),
}

/// Why a pass stopped before looking at any Secret.
#[derive(Debug, thiserror::Error)]
enum TrackedSinceError {
    /// The ConfigMap could not be read.
    #[error("{0}")]
    Get(#[source] kube::Error),
    /// It lacks the `since` key.
    #[error("configMap does not have since label")]
    Missing,
    /// Its `since` is not a `YYYY-MM-DD` day.
    #[error("error parsing trackedSince time: cannot parse {0:?} as a YYYY-MM-DD date")]
    Parse(String),
}

/// Marks unused auto-generated legacy tokens invalid and later deletes them, as upstream's
/// `LegacySATokenCleaner`.
pub struct LegacyTokenCleaner {
    /// The ConfigMap GET, the Secret patch and delete. Test seam:
    /// [`super::FakeLegacyTokenCleanerClient`].
    client: Arc<dyn LegacyTokenCleanerClient>,
    /// Wall-clock time (test seam).
    clock: Clock,
    /// The ServiceAccount cache (read only).
    accounts: Lister<ServiceAccount>,
    /// The Secret cache (read only).
    secrets: Lister<Secret>,
    /// The Pod cache (read only).
    pods: Lister<Pod>,
    /// Whether the three informers have synced (empty for bare caches).
    caches_synced: Vec<InformerSynced>,
    /// See [`LegacyTokenCleanerOptions::sync_interval`]; never zero.
    sync_interval: Duration,
    /// See [`LegacyTokenCleanerOptions::clean_up_period`]; never zero.
    minimum_since_last_used: Duration,
}

impl std::fmt::Debug for LegacyTokenCleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacyTokenCleaner")
            .field("sync_interval", &self.sync_interval)
            .field("minimum_since_last_used", &self.minimum_since_last_used)
            .finish_non_exhaustive()
    }
}

impl LegacyTokenCleaner {
    /// The cleaner kube-controller-manager runs, over the factory's ServiceAccount, Secret
    /// and Pod informers, as upstream's `NewLegacySATokenCleaner`.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: LegacyTokenCleanerOptions,
    ) -> Result<Self, CleanerError> {
        Self::with_informers(
            &factory.informer_for::<ServiceAccount>(),
            &factory.informer_for::<Secret>(),
            &factory.pods(),
            Arc::new(ApiLegacyTokenCleanerClient::new(client)),
            options,
        )
    }

    /// A cleaner over the given informers, waiting for them in [`Self::run`] (it registers no
    /// handlers: each pass reads the caches).
    pub fn with_informers(
        accounts: &SharedIndexInformer<ServiceAccount>,
        secrets: &SharedIndexInformer<Secret>,
        pods: &SharedIndexInformer<Pod>,
        client: Arc<dyn LegacyTokenCleanerClient>,
        options: LegacyTokenCleanerOptions,
    ) -> Result<Self, CleanerError> {
        let mut cleaner = Self::with_caches(
            Lister::new(accounts.indexer().clone()),
            Lister::new(secrets.indexer().clone()),
            Lister::new(pods.indexer().clone()),
            client,
            options,
        )?;
        cleaner.caches_synced = InformerRegistrar::new(LEGACY_TOKEN_CLEANER_CONTROLLER_NAME)
            .wait_for(accounts)
            .wait_for(secrets)
            .wait_for(pods)
            .finish();
        Ok(cleaner)
    }

    /// A cleaner over bare caches (unit tests fill them and call [`Self::evaluate_tokens`]).
    pub fn with_caches(
        accounts: Lister<ServiceAccount>,
        secrets: Lister<Secret>,
        pods: Lister<Pod>,
        client: Arc<dyn LegacyTokenCleanerClient>,
        options: LegacyTokenCleanerOptions,
    ) -> Result<Self, CleanerError> {
        if options.clean_up_period.is_zero() {
            return Err(CleanerError::CleanUpPeriod(options.clean_up_period));
        }
        if options.sync_interval.is_zero() {
            return Err(CleanerError::SyncInterval(options.sync_interval));
        }
        Ok(Self {
            client,
            clock: Arc::new(Timestamp::now),
            accounts,
            secrets,
            pods,
            caches_synced: Vec::new(),
            sync_interval: options.sync_interval,
            minimum_since_last_used: options.clean_up_period,
        })
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Waits for the caches, then runs [`Self::evaluate_tokens`] every sync interval until
    /// `cancel` fires, as upstream's `Run` (`wait.UntilWithContext`: the first pass at once,
    /// the interval counted from the end of a pass). A pass that panics is logged and the
    /// next one runs as usual.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let controller = LEGACY_TOKEN_CLEANER_CONTROLLER_NAME;
        tracing::info!(controller, "Starting controller");
        if wait_for_synced(controller, &cancel, &self.caches_synced).await {
            loop {
                if let Err(panic) = AssertUnwindSafe(self.evaluate_tokens())
                    .catch_unwind()
                    .await
                {
                    let panic = panic_message(&*panic);
                    tracing::error!(controller, %panic, "Legacy token clean-up pass panicked");
                }
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(self.sync_interval) => {}
                }
            }
        }
        tracing::info!(controller, "Shutting down controller");
    }

    /// One pass over the cached token Secrets, as upstream's `evaluateSATokens`.
    pub async fn evaluate_tokens(&self) {
        let now = (self.clock)();
        let tracked_since = match self.latest_possible_tracked_since().await {
            Ok(t) => t,
            Err(err) => {
                tracing::error!(error = %err, "Getting lastest possible tracked_since time");
                return;
            }
        };
        let period =
            SignedDuration::try_from(self.minimum_since_last_used).unwrap_or(SignedDuration::MAX);
        let tracked_long_enough = tracked_since
            .checked_add(period)
            .is_ok_and(|enough| now >= enough);
        if !tracked_long_enough {
            return;
        }
        let preserve_created_on_or_after = now.checked_sub(period).unwrap_or(Timestamp::MIN);
        let preserve_used_on_or_after = format_date(preserve_created_on_or_after);

        let mut used_secret_names: HashMap<String, BTreeSet<String>> = HashMap::new();
        for secret in self.secrets.list_all(&Selector::everything()) {
            if secret.type_.as_deref() != Some(SERVICE_ACCOUNT_TOKEN_TYPE) {
                continue;
            }
            let created = secret
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(Timestamp::MIN, |t| t.0);
            if created >= preserve_created_on_or_after {
                continue;
            }
            if secret.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let ns = secret.metadata.namespace.as_deref().unwrap_or_default();
            let name = secret.metadata.name.as_deref().unwrap_or_default();
            // Without the label the token has not been used since tracking began.
            let last_used = label(&secret, LAST_USED_LABEL_KEY);
            if let Some(last_used) = last_used {
                if parse_date(last_used).is_none() {
                    tracing::error!(
                        secret = %format!("{ns}/{name}"),
                        last_used,
                        "Parsing lastUsed time: not a YYYY-MM-DD date"
                    );
                    continue;
                }
                if last_used >= preserve_used_on_or_after.as_str() {
                    continue;
                }
            }
            let Some(account) = self.service_account(&secret) else {
                continue;
            };
            if !has_secret_reference(&account, name) {
                // Not listed by its account: it cannot be told auto-generated.
                continue;
            }
            let mounted = used_secret_names
                .entry(ns.to_owned())
                .or_insert_with(|| self.mounted_secret_names(ns));
            if mounted.contains(name) {
                continue;
            }

            let invalid_since =
                label(&secret, INVALID_SINCE_LABEL_KEY).filter(|since| parse_date(since).is_some());
            let Some(invalid_since) = invalid_since else {
                let invalid_since = format_date(now);
                tracing::info!(
                    invalid_since,
                    secret = %format!("{ns}/{name}"),
                    "Mark the auto-generated service account token as invalid"
                );
                let patch = invalid_since_patch(&secret, &invalid_since);
                if let Err(err) = self.client.patch_secret(ns, name, &patch).await {
                    tracing::error!(
                        error = %err,
                        secret = %format!("{ns}/{name}"),
                        "Failed to label legacy service account token secret with invalid since date"
                    );
                }
                continue;
            };
            if invalid_since >= preserve_used_on_or_after.as_str() {
                continue;
            }
            tracing::info!(
                secret = %format!("{ns}/{name}"),
                creation_time = %created,
                last_used = last_used.unwrap_or_default(),
                invalid_since,
                "Delete auto-generated service account token"
            );
            let resource_version = secret
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default();
            match self.client.delete_secret(ns, name, resource_version).await {
                Ok(()) => {}
                Err(err) if err.is_conflict() || err.is_not_found() => {}
                Err(err) => tracing::error!(
                    error = %err,
                    secret = %format!("{ns}/{name}"),
                    serviceaccount = account.metadata.name.as_deref().unwrap_or_default(),
                    "Deleting legacy service account token"
                ),
            }
        }
    }

    /// The names of the Secrets the pods of `namespace` reference, as upstream's
    /// `getMountedSecretNames`.
    fn mounted_secret_names(&self, namespace: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for pod in self.pods.list(namespace, &Selector::everything()) {
            visit_pod_secret_names(&pod, |name| {
                names.insert(name.to_owned());
            });
        }
        names
    }

    /// The account the Secret's annotations name, from the cache; `None` when it names none,
    /// the account is missing, or the Secret records another uid (upstream's
    /// `getServiceAccount`).
    fn service_account(&self, secret: &Secret) -> Option<Arc<ServiceAccount>> {
        let name = annotation(secret, SERVICE_ACCOUNT_NAME_KEY).filter(|n| !n.is_empty())?;
        let uid = annotation(secret, SERVICE_ACCOUNT_UID_KEY).unwrap_or_default();
        let ns = secret.metadata.namespace.as_deref().unwrap_or_default();
        let account = self.accounts.get(ns, name)?;
        (uid.is_empty() || account.metadata.uid.as_deref() == Some(uid)).then_some(account)
    }

    /// Midnight (UTC) of the day after the tracking ConfigMap's `since`: the earliest time
    /// every token's use can have been recorded (upstream's `latestPossibleTrackedSinceTime`).
    async fn latest_possible_tracked_since(&self) -> Result<Timestamp, TrackedSinceError> {
        let config_map = self
            .client
            .get_config_map(SYSTEM_NAMESPACE, TRACKING_CONFIG_MAP_NAME)
            .await
            .map_err(TrackedSinceError::Get)?;
        let since = config_map
            .data
            .as_ref()
            .and_then(|d| d.get(TRACKING_CONFIG_MAP_DATA_KEY))
            .ok_or(TrackedSinceError::Missing)?;
        parse_date(since)
            .and_then(|day| day.tomorrow().ok())
            .and_then(|day| day.to_zoned(TimeZone::UTC).ok())
            .map(|zoned| zoned.timestamp())
            .ok_or_else(|| TrackedSinceError::Parse(since.clone()))
    }
}

/// The merge patch setting the invalid-since label, with the Secret's identity (upstream
/// marshals `applyv1.Secret(name, ns).WithUID(uid).WithLabels(...)`; the uid makes the API
/// server refuse the patch if the name now holds another Secret).
pub fn invalid_since_patch(secret: &Secret, invalid_since: &str) -> serde_json::Value {
    json!({
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": {
            "name": secret.metadata.name,
            "namespace": secret.metadata.namespace,
            "uid": secret.metadata.uid,
            "labels": {INVALID_SINCE_LABEL_KEY: invalid_since},
        },
    })
}

/// Calls `visit` with the name of every Secret `pod`'s spec references, as upstream's
/// `podutil.VisitPodSecretNames`: image pull secrets; the `envFrom` secret refs and
/// `secretKeyRef` env values of init, regular and ephemeral containers; and the secret of each
/// volume (secret, projected secret sources, and the secret refs of the Azure File, CephFS,
/// Cinder, FlexVolume, RBD, ScaleIO, iSCSI, StorageOS and CSI sources). References through a
/// claim to a volume are not followed; empty names are skipped.
pub fn visit_pod_secret_names(pod: &Pod, mut visit: impl FnMut(&str)) {
    let mut visit = |name: &str| {
        if !name.is_empty() {
            visit(name);
        }
    };
    let Some(spec) = &pod.spec else { return };
    for reference in spec.image_pull_secrets.iter().flatten() {
        visit(&reference.name);
    }
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| (c.env_from.as_deref(), c.env.as_deref()));
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| (c.env_from.as_deref(), c.env.as_deref()));
    for (env_from, env) in containers.chain(ephemeral) {
        for source in env_from.into_iter().flatten() {
            if let Some(secret) = &source.secret_ref {
                visit(&secret.name);
            }
        }
        for var in env.into_iter().flatten() {
            if let Some(secret) = var
                .value_from
                .as_ref()
                .and_then(|v| v.secret_key_ref.as_ref())
            {
                visit(&secret.name);
            }
        }
    }
    for volume in spec.volumes.iter().flatten() {
        if let Some(azure) = &volume.azure_file {
            visit(&azure.secret_name);
        } else if let Some(cephfs) = &volume.cephfs {
            if let Some(r) = &cephfs.secret_ref {
                visit(&r.name);
            }
        } else if let Some(cinder) = &volume.cinder {
            if let Some(r) = &cinder.secret_ref {
                visit(&r.name);
            }
        } else if let Some(flex) = &volume.flex_volume {
            if let Some(r) = &flex.secret_ref {
                visit(&r.name);
            }
        } else if let Some(projected) = &volume.projected {
            for source in projected.sources.iter().flatten() {
                if let Some(secret) = &source.secret {
                    visit(&secret.name);
                }
            }
        } else if let Some(rbd) = &volume.rbd {
            if let Some(r) = &rbd.secret_ref {
                visit(&r.name);
            }
        } else if let Some(secret) = &volume.secret {
            visit(secret.secret_name.as_deref().unwrap_or_default());
        } else if let Some(scaleio) = &volume.scale_io {
            visit(&scaleio.secret_ref.name);
        } else if let Some(iscsi) = &volume.iscsi {
            if let Some(r) = &iscsi.secret_ref {
                visit(&r.name);
            }
        } else if let Some(storageos) = &volume.storageos {
            if let Some(r) = &storageos.secret_ref {
                visit(&r.name);
            }
        } else if let Some(csi) = &volume.csi
            && let Some(r) = &csi.node_publish_secret_ref
        {
            visit(&r.name);
        }
    }
}

/// Whether `account.secrets` lists `secret_name` (upstream's `hasSecretReference`).
fn has_secret_reference(account: &ServiceAccount, secret_name: &str) -> bool {
    account
        .secrets
        .iter()
        .flatten()
        .any(|s| s.name.as_deref() == Some(secret_name))
}

fn label<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn annotation<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// `at`'s UTC day as `YYYY-MM-DD` (Go's `Format("2006-01-02")`).
pub fn format_date(at: Timestamp) -> String {
    at.strftime("%Y-%m-%d").to_string()
}

/// A `YYYY-MM-DD` day as Go's `time.Parse("2006-01-02", s)` reads it: exactly four year
/// digits, two month digits and two day digits, a real date, nothing after.
pub fn parse_date(s: &str) -> Option<Date> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    if !(digits(0..4) && digits(5..7) && digits(8..10)) {
        return None;
    }
    let year: i16 = s[0..4].parse().ok()?;
    let month: i8 = s[5..7].parse().ok()?;
    let day: i8 = s[8..10].parse().ok()?;
    Date::new(year, month, day).ok()
}

#[cfg(test)]
#[path = "legacy_token_cleaner_tests.rs"]
mod tests;
