//! Unit tests of the legacy token cleaner: upstream's `TestLegacyServiceAccountTokenCleanUp` table on a fixed clock, caches seeded directly, the fake client's actions counted.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, EnvFromSource, EnvVar, EnvVarSource, LocalObjectReference,
    ObjectReference, PodSpec, ProjectedVolumeSource, SecretEnvSource, SecretKeySelector,
    SecretProjection, SecretVolumeSource, Volume, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::informer::store::Indexer;
use kube::api::ObjectMeta;

use super::*;
use crate::serviceaccount::legacy_token_cleaner_client::{
    CleanerAction, FakeLegacyTokenCleanerClient,
};

/// The fixed "now" of every case.
fn now() -> Timestamp {
    "2023-06-15T10:00:00Z".parse().expect("timestamp")
}

/// Midnight UTC of `day`.
fn midnight(day: &str) -> Timestamp {
    parse_date(day)
        .expect("date")
        .to_zoned(TimeZone::UTC)
        .expect("zoned")
        .timestamp()
}

/// The clean-up period that makes `start` the first preserved day (upstream's
/// `configuredLegacyTokenCleanUpPeriod`: now minus `start`).
fn period_since(start: &str) -> Duration {
    Duration::try_from(now().duration_since(midnight(start))).expect("positive")
}

/// The tracking ConfigMap, with `since` unless it is empty (upstream's `configuredConfigMap`).
fn config_map(since: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(TRACKING_CONFIG_MAP_NAME.into()),
            namespace: Some(SYSTEM_NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        data: (!since.is_empty())
            .then(|| BTreeMap::from([(TRACKING_CONFIG_MAP_DATA_KEY.to_owned(), since.to_owned())])),
        ..ConfigMap::default()
    }
}

/// Upstream's `configuredServiceAccountTokenSecret`: `token-secret-1` of `default`, uid 23456,
/// resourceVersion 1, created at midnight of `created`; empty strings leave a label or the
/// deletion timestamp out.
fn token_secret(
    last_used: &str,
    invalid_since: &str,
    created: &str,
    account: &str,
    account_uid: &str,
    deleted: bool,
) -> Secret {
    let mut labels = BTreeMap::new();
    if !last_used.is_empty() {
        labels.insert(LAST_USED_LABEL_KEY.to_owned(), last_used.to_owned());
    }
    if !invalid_since.is_empty() {
        labels.insert(INVALID_SINCE_LABEL_KEY.to_owned(), invalid_since.to_owned());
    }
    Secret {
        metadata: ObjectMeta {
            name: Some("token-secret-1".into()),
            namespace: Some("default".into()),
            uid: Some("23456".into()),
            resource_version: Some("1".into()),
            labels: Some(labels),
            creation_timestamp: Some(Time(midnight(created))),
            deletion_timestamp: deleted.then(|| Time(now())),
            annotations: Some(BTreeMap::from([
                (SERVICE_ACCOUNT_NAME_KEY.to_owned(), account.to_owned()),
                (SERVICE_ACCOUNT_UID_KEY.to_owned(), account_uid.to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some(SERVICE_ACCOUNT_TOKEN_TYPE.into()),
        data: Some(BTreeMap::from([
            ("token".to_owned(), ByteString(b"ABC".to_vec())),
            ("ca.crt".to_owned(), ByteString(b"CA Data".to_vec())),
            ("namespace".to_owned(), ByteString(b"default".to_vec())),
        ])),
        ..Secret::default()
    }
}

/// Upstream's `opaqueSecret`.
fn opaque_secret() -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("regular-secret-1".into()),
            namespace: Some("default".into()),
            uid: Some("23456".into()),
            resource_version: Some("1".into()),
            annotations: Some(BTreeMap::from([
                (SERVICE_ACCOUNT_NAME_KEY.to_owned(), "default".to_owned()),
                (SERVICE_ACCOUNT_UID_KEY.to_owned(), "12345".to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            "mysecretkey".to_owned(),
            ByteString(b"mysecretvalue".to_vec()),
        )])),
        ..Secret::default()
    }
}

/// Upstream's `serviceAccount(refs)`: `default/default`, uid 12345.
fn account(secrets: &[&str]) -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some("default".into()),
            namespace: Some("default".into()),
            uid: Some("12345".into()),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        secrets: Some(
            secrets
                .iter()
                .map(|name| ObjectReference {
                    name: Some((*name).to_owned()),
                    ..ObjectReference::default()
                })
                .collect(),
        ),
        ..ServiceAccount::default()
    }
}

/// Upstream's `configuredPod`: `default/pod-1`, mounting `token-secret-1` or nothing.
fn pod_mounting(mounts: bool) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("pod-1".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: mounts.then(|| PodSpec {
            volumes: Some(vec![Volume {
                name: "foo".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some("token-secret-1".into()),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn get_config_map() -> CleanerAction {
    CleanerAction::GetConfigMap {
        namespace: SYSTEM_NAMESPACE.into(),
        name: TRACKING_CONFIG_MAP_NAME.into(),
    }
}

fn patch_invalid_since_today() -> CleanerAction {
    CleanerAction::PatchSecret {
        namespace: "default".into(),
        name: "token-secret-1".into(),
        patch: json!({
            "kind": "Secret",
            "apiVersion": "v1",
            "metadata": {
                "name": "token-secret-1",
                "namespace": "default",
                "uid": "23456",
                "labels": {INVALID_SINCE_LABEL_KEY: "2023-06-15"},
            },
        }),
    }
}

fn delete_at_version_1() -> CleanerAction {
    CleanerAction::DeleteSecret {
        namespace: "default".into(),
        name: "token-secret-1".into(),
        resource_version: "1".into(),
    }
}

struct Case {
    name: &'static str,
    secret: Secret,
    account: Option<ServiceAccount>,
    pod: Pod,
    config_map: Option<ConfigMap>,
    period_start: &'static str,
    expected: Vec<CleanerAction>,
}

#[allow(clippy::too_many_lines)] // upstream's table, case by case
fn cases() -> Vec<Case> {
    let referenced = || Some(account(&["token-secret-1"]));
    let case = |name, secret, account, pod, since: Option<&str>, start, expected| Case {
        name,
        secret,
        account,
        pod,
        config_map: since.map(config_map),
        period_start: start,
        expected,
    };
    vec![
        case(
            "configmap does not exist",
            token_secret("2022-12-27", "", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            None,
            "2022-12-28",
            vec![get_config_map()],
        ),
        case(
            "configmap exists, but the configmap does not have tracked-since label",
            token_secret("2022-12-27", "", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some(""),
            "2022-12-28",
            vec![get_config_map()],
        ),
        case(
            "configmap exists, the time period since 'tracked-since' is smaller than the CleanUpPeriod",
            token_secret("2022-12-27", "", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-29"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "configmap exists, the 'tracked-since' cannot be parsed",
            token_secret("2022-12-27", "", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-27-1"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "secret is not SecretTypeServiceAccountToken type",
            opaque_secret(),
            referenced(),
            pod_mounting(false),
            Some("2022-12-28"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "secret is not referenced by serviceaccount",
            token_secret("2022-12-27", "", "2022-12-27", "default", "12345", false),
            Some(account(&[])),
            pod_mounting(false),
            Some("2022-12-27"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "auto-generated secret has a late creation time",
            token_secret("2022-12-27", "", "2022-12-30", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-27"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "auto-generated secret has a deletion time",
            token_secret("2022-12-27", "", "2022-12-27", "default", "12345", true),
            referenced(),
            pod_mounting(false),
            Some("2022-12-27"),
            "2022-12-30",
            vec![get_config_map()],
        ),
        case(
            "auto-generated secret has a late last-used time",
            token_secret("2022-12-30", "", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-27"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "auto-generated secret has a last-used label, but it can not be parsed",
            token_secret("2022-12-27-1", "", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-27"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "secret-referenced service account does not exist",
            token_secret("2022-12-27", "", "2022-12-27", "default", "12345", false),
            None,
            pod_mounting(false),
            Some("2022-12-27"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "secret-referenced service account uid does not match",
            token_secret("2022-12-27", "", "2022-12-27", "default", "123456", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-27"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "secret-referenced service account name is empty",
            token_secret("2022-12-27", "", "2022-12-27", "", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-27"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "auto-generated secret does not have 'last-used' label, has not been marked as invalid",
            token_secret("", "", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-28"),
            "2022-12-30",
            vec![get_config_map(), patch_invalid_since_today()],
        ),
        case(
            "auto-generated secret does not have 'last-used' label, has been marked as invalid, invalid_since label can not be parsed",
            token_secret("", "2022-12-29-1", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-28"),
            "2022-12-30",
            vec![get_config_map(), patch_invalid_since_today()],
        ),
        case(
            "auto-generated secret does not have 'last-used' label, has been marked as invalid, time period since invalid is less than CleanUpPeriod",
            token_secret("", "2023-01-01", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-28"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "auto-generated secret does not have 'last-used' label, has been marked as invalid, time period since invalid is larger than CleanUpPeriod",
            token_secret("", "2022-12-29", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-28"),
            "2023-01-01",
            vec![get_config_map(), delete_at_version_1()],
        ),
        case(
            "auto-generated secret is mounted by the pod",
            token_secret("2022-12-27", "", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(true),
            Some("2022-12-28"),
            "2022-12-29",
            vec![get_config_map()],
        ),
        case(
            "auto-generated secret has 'last-used' label, the time period since last-used is larger than CleanUpPeriod, secret has not been marked as invalid",
            token_secret("2022-12-27", "", "2022-12-27", "default", "12345", false),
            referenced(),
            pod_mounting(false),
            Some("2022-12-28"),
            "2022-12-30",
            vec![get_config_map(), patch_invalid_since_today()],
        ),
        case(
            "auto-generated secret has 'last-used' label, the time period since last-used is larger than CleanUpPeriod, secret has been marked as invalid, time peroid since invalid is less than CleanUpPeriod",
            token_secret(
                "2022-12-27",
                "2023-05-01",
                "2022-12-27",
                "default",
                "12345",
                false,
            ),
            referenced(),
            pod_mounting(false),
            Some("2022-12-28"),
            "2022-12-30",
            vec![get_config_map()],
        ),
        case(
            "auto-generated secret has 'last-used' label, the time period since last-used is larger than CleanUpPeriod, secret has been marked as invalid, time peroid since invalid is larger than CleanUpPeriod",
            token_secret(
                "2022-12-27",
                "2023-01-05",
                "2022-12-27",
                "default",
                "12345",
                false,
            ),
            referenced(),
            pod_mounting(false),
            Some("2022-12-28"),
            "2023-05-01",
            vec![get_config_map(), delete_at_version_1()],
        ),
    ]
}

#[tokio::test]
async fn legacy_service_account_token_clean_up() {
    for case in cases() {
        let client = Arc::new(match case.config_map {
            Some(cm) => FakeLegacyTokenCleanerClient::with_config_map(cm),
            None => FakeLegacyTokenCleanerClient::new(),
        });
        let (accounts, secrets, pods) = (Indexer::new(), Indexer::new(), Indexer::new());
        if let Some(account) = case.account {
            accounts.add(Arc::new(account)).expect("account");
        }
        pods.add(Arc::new(case.pod)).expect("pod");
        secrets.add(Arc::new(case.secret)).expect("secret");
        let cleaner = LegacyTokenCleaner::with_caches(
            Lister::new(accounts),
            Lister::new(secrets),
            Lister::new(pods),
            client.clone(),
            LegacyTokenCleanerOptions {
                clean_up_period: period_since(case.period_start),
                sync_interval: Duration::from_secs(30),
            },
        )
        .expect("valid options")
        .with_clock(Arc::new(now));

        cleaner.evaluate_tokens().await;

        assert_eq!(client.actions(), case.expected, "{}", case.name);
    }
}

#[test]
fn a_zero_period_or_interval_is_refused() {
    let build = |clean_up_period, sync_interval| {
        LegacyTokenCleaner::with_caches(
            Lister::new(Indexer::new()),
            Lister::new(Indexer::new()),
            Lister::new(Indexer::new()),
            Arc::new(FakeLegacyTokenCleanerClient::new()),
            LegacyTokenCleanerOptions {
                clean_up_period,
                sync_interval,
            },
        )
    };
    let second = Duration::from_secs(1);
    assert_eq!(
        build(Duration::ZERO, second)
            .expect_err("zero period")
            .to_string(),
        "invalid CleanUpPeriod: 0ns"
    );
    assert!(matches!(
        build(second, Duration::ZERO),
        Err(CleanerError::SyncInterval(_))
    ));
    assert!(build(second, second).is_ok());
}

#[test]
fn dates_parse_as_gos_2006_01_02_layout() {
    assert_eq!(
        parse_date("2022-12-27"),
        Some(jiff::civil::date(2022, 12, 27))
    );
    for bad in [
        "2022-12-27-1",
        "2022-12-7",
        "22-12-27",
        "2022/12/27",
        "2022-13-01",
        "2023-02-29",
        "",
        "２０２２-12-27",
    ] {
        assert_eq!(parse_date(bad), None, "{bad:?}");
    }
    assert_eq!(format_date(now()), "2023-06-15");
}

#[test]
fn every_secret_reference_of_a_pod_is_visited() {
    let env_secret = |name: &str| EnvVar {
        name: "E".into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: name.into(),
                key: "k".into(),
                ..SecretKeySelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    let pod = Pod {
        spec: Some(PodSpec {
            image_pull_secrets: Some(vec![LocalObjectReference {
                name: "pull".into(),
            }]),
            init_containers: Some(vec![Container {
                name: "init".into(),
                env: Some(vec![env_secret("init-env")]),
                ..Container::default()
            }]),
            containers: vec![Container {
                name: "main".into(),
                env_from: Some(vec![EnvFromSource {
                    secret_ref: Some(SecretEnvSource {
                        name: "main-env-from".into(),
                        ..SecretEnvSource::default()
                    }),
                    ..EnvFromSource::default()
                }]),
                env: Some(vec![env_secret("main-env"), env_secret("")]),
                ..Container::default()
            }],
            volumes: Some(vec![
                Volume {
                    name: "s".into(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some("volume".into()),
                        ..SecretVolumeSource::default()
                    }),
                    ..Volume::default()
                },
                Volume {
                    name: "p".into(),
                    projected: Some(ProjectedVolumeSource {
                        sources: Some(vec![VolumeProjection {
                            secret: Some(SecretProjection {
                                name: "projected".into(),
                                ..SecretProjection::default()
                            }),
                            ..VolumeProjection::default()
                        }]),
                        ..ProjectedVolumeSource::default()
                    }),
                    ..Volume::default()
                },
            ]),
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    let mut seen = Vec::new();
    visit_pod_secret_names(&pod, |name| seen.push(name.to_owned()));
    assert_eq!(
        seen,
        [
            "pull",
            "init-env",
            "main-env-from",
            "main-env",
            "volume",
            "projected"
        ]
    );
}
