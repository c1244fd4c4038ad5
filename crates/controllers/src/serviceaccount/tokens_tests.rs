//! Unit tests of the token controller: upstream's `TestTokenCreation` table (tokens_controller_test.go), caches seeded directly, events queued as the informer handlers queue them, both queues drained, the fake client's actions compared.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kcm_machinery::controller::api_status;
use kcm_machinery::controller::process_next_work_item;
use kube::api::ObjectMeta;

use super::*;
use crate::serviceaccount::tokens_client::{FakeTokensClient, TokensAction, TokensVerb};

/// Upstream's `testGenerator`: every token is `ABC`.
struct FixedToken;

impl GenerateToken for FixedToken {
    fn generate_token(&self, _claims: &LegacyClaims) -> Result<String, TokenError> {
        Ok("ABC".to_owned())
    }
}

/// The root CA the controller is given (upstream's `RootCA: []byte("CA Data")`).
const ROOT_CA: &[u8] = b"CA Data";

fn refs(names: &[&str]) -> Vec<ObjectReference> {
    names
        .iter()
        .map(|n| ObjectReference {
            name: Some((*n).to_owned()),
            ..ObjectReference::default()
        })
        .collect()
}

/// Upstream's `emptySecretReferences`.
fn empty_refs() -> Vec<ObjectReference> {
    Vec::new()
}

/// Upstream's `missingSecretReferences`.
fn missing_refs() -> Vec<ObjectReference> {
    refs(&["missing-secret-1"])
}

/// Upstream's `regularSecretReferences`.
fn regular_refs() -> Vec<ObjectReference> {
    refs(&["regular-secret-1"])
}

/// Upstream's `tokenSecretReferences`.
fn token_refs() -> Vec<ObjectReference> {
    refs(&["token-secret-1"])
}

/// Upstream's `serviceAccount(refs)`: `default/default`, uid 12345, resourceVersion 1.
fn service_account(secrets: Vec<ObjectReference>) -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some("default".into()),
            namespace: Some("default".into()),
            uid: Some("12345".into()),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        secrets: Some(secrets),
        ..ServiceAccount::default()
    }
}

/// Upstream's `updatedServiceAccount(refs)`: at resourceVersion 2.
fn updated_service_account(secrets: Vec<ObjectReference>) -> ServiceAccount {
    let mut account = service_account(secrets);
    account.metadata.resource_version = Some("2".into());
    account
}

/// Upstream's `opaqueSecret`.
fn opaque_secret() -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("regular-secret-1".into()),
            namespace: Some("default".into()),
            uid: Some("23456".into()),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            "mykey".to_owned(),
            ByteString(b"mydata".to_vec()),
        )])),
        ..Secret::default()
    }
}

/// Upstream's `serviceAccountTokenSecret`: `token-secret-1`, uid 23456, resourceVersion 1,
/// naming account `default` (uid 12345), with token `ABC`, `ca.crt` and `namespace`.
fn token_secret() -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("token-secret-1".into()),
            namespace: Some("default".into()),
            uid: Some("23456".into()),
            resource_version: Some("1".into()),
            annotations: Some(BTreeMap::from([
                (SERVICE_ACCOUNT_NAME_KEY.to_owned(), "default".to_owned()),
                (SERVICE_ACCOUNT_UID_KEY.to_owned(), "12345".to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some(SERVICE_ACCOUNT_TOKEN_TYPE.into()),
        data: Some(BTreeMap::from([
            (TOKEN_KEY.to_owned(), ByteString(b"ABC".to_vec())),
            (CA_CERT_KEY.to_owned(), ByteString(ROOT_CA.to_vec())),
            (NAMESPACE_KEY.to_owned(), ByteString(b"default".to_vec())),
        ])),
        ..Secret::default()
    }
}

/// Upstream's `serviceAccountTokenSecretWithout{Token,CA,Namespace}Data`.
fn token_secret_without(key: &str) -> Secret {
    let mut secret = token_secret();
    secret.data.as_mut().expect("data").remove(key);
    secret
}

/// Upstream's `serviceAccountTokenSecretWith{CA,Namespace}Data`.
fn token_secret_with(key: &str, value: &[u8]) -> Secret {
    let mut secret = token_secret();
    secret
        .data
        .as_mut()
        .expect("data")
        .insert(key.to_owned(), ByteString(value.to_vec()));
    secret
}

fn get_account() -> TokensAction {
    TokensAction::GetServiceAccount {
        namespace: "default".into(),
        name: "default".into(),
    }
}

fn get_secret() -> TokensAction {
    TokensAction::GetSecret {
        namespace: "default".into(),
        name: "token-secret-1".into(),
    }
}

/// Upstream's `NewDeleteActionWithOptions(..., NewPreconditionDeleteOptions("23456"))`.
fn delete_secret() -> TokensAction {
    TokensAction::DeleteSecret {
        namespace: "default".into(),
        name: "token-secret-1".into(),
        uid: Some("23456".into()),
    }
}

/// One row of upstream's table.
#[derive(Default)]
struct Case {
    name: &'static str,
    /// Upstream's `ClientObjects`: what the API server holds.
    client_accounts: Vec<ServiceAccount>,
    client_secrets: Vec<Secret>,
    /// Upstream's `ExistingServiceAccount` / `ExistingSecrets`: cached before the event.
    existing_account: Option<ServiceAccount>,
    existing_secrets: Vec<Secret>,
    /// The one event of the case.
    added_account: Option<ServiceAccount>,
    updated_account: Option<ServiceAccount>,
    deleted_account: Option<ServiceAccount>,
    added_secret: Option<Secret>,
    updated_secret: Option<Secret>,
    deleted_secret: Option<Secret>,
    expected: Vec<TokensAction>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "new serviceaccount with no secrets",
            client_accounts: vec![service_account(empty_refs())],
            added_account: Some(service_account(empty_refs())),
            ..Case::default()
        },
        Case {
            name: "new serviceaccount with missing secrets",
            client_accounts: vec![service_account(missing_refs())],
            added_account: Some(service_account(missing_refs())),
            ..Case::default()
        },
        Case {
            // Upstream also records the Secret in its local mutation cache; kcm has none,
            // and the expectation (nothing to do) is the same.
            name: "new serviceaccount with missing secrets and a local secret in the cache",
            client_accounts: vec![service_account(missing_refs())],
            added_account: Some(service_account(token_refs())),
            ..Case::default()
        },
        Case {
            name: "new serviceaccount with non-token secrets",
            client_accounts: vec![service_account(regular_refs())],
            client_secrets: vec![opaque_secret()],
            added_account: Some(service_account(regular_refs())),
            ..Case::default()
        },
        Case {
            name: "new serviceaccount with token secrets",
            client_accounts: vec![service_account(token_refs())],
            client_secrets: vec![token_secret()],
            existing_secrets: vec![token_secret()],
            added_account: Some(service_account(token_refs())),
            ..Case::default()
        },
        Case {
            name: "updated serviceaccount with no secrets",
            client_accounts: vec![service_account(empty_refs())],
            updated_account: Some(service_account(empty_refs())),
            ..Case::default()
        },
        Case {
            name: "updated serviceaccount with missing secrets",
            client_accounts: vec![service_account(missing_refs())],
            updated_account: Some(service_account(missing_refs())),
            ..Case::default()
        },
        Case {
            name: "updated serviceaccount with non-token secrets",
            client_accounts: vec![service_account(regular_refs())],
            client_secrets: vec![opaque_secret()],
            updated_account: Some(service_account(regular_refs())),
            ..Case::default()
        },
        Case {
            name: "updated serviceaccount with token secrets",
            existing_secrets: vec![token_secret()],
            updated_account: Some(service_account(token_refs())),
            ..Case::default()
        },
        Case {
            name: "updated serviceaccount with no secrets with resource conflict",
            client_accounts: vec![updated_service_account(empty_refs())],
            updated_account: Some(service_account(empty_refs())),
            ..Case::default()
        },
        Case {
            name: "deleted serviceaccount with no secrets",
            deleted_account: Some(service_account(empty_refs())),
            ..Case::default()
        },
        Case {
            name: "deleted serviceaccount with missing secrets",
            deleted_account: Some(service_account(missing_refs())),
            ..Case::default()
        },
        Case {
            name: "deleted serviceaccount with non-token secrets",
            client_secrets: vec![opaque_secret()],
            deleted_account: Some(service_account(regular_refs())),
            ..Case::default()
        },
        Case {
            name: "deleted serviceaccount with token secrets",
            client_secrets: vec![token_secret()],
            existing_secrets: vec![token_secret()],
            deleted_account: Some(service_account(token_refs())),
            expected: vec![delete_secret()],
            ..Case::default()
        },
        Case {
            name: "added secret without serviceaccount",
            client_secrets: vec![token_secret()],
            added_secret: Some(token_secret()),
            expected: vec![get_account(), delete_secret()],
            ..Case::default()
        },
        Case {
            name: "added secret with serviceaccount",
            existing_account: Some(service_account(token_refs())),
            added_secret: Some(token_secret()),
            ..Case::default()
        },
        Case {
            name: "added token secret without token data",
            client_secrets: vec![token_secret_without(TOKEN_KEY)],
            existing_account: Some(service_account(token_refs())),
            added_secret: Some(token_secret_without(TOKEN_KEY)),
            expected: vec![get_secret(), TokensAction::UpdateSecret(token_secret())],
            ..Case::default()
        },
        Case {
            name: "added token secret without ca data",
            client_secrets: vec![token_secret_without(CA_CERT_KEY)],
            existing_account: Some(service_account(token_refs())),
            added_secret: Some(token_secret_without(CA_CERT_KEY)),
            expected: vec![get_secret(), TokensAction::UpdateSecret(token_secret())],
            ..Case::default()
        },
        Case {
            name: "added token secret with mismatched ca data",
            client_secrets: vec![token_secret_with(CA_CERT_KEY, b"mismatched")],
            existing_account: Some(service_account(token_refs())),
            added_secret: Some(token_secret_with(CA_CERT_KEY, b"mismatched")),
            expected: vec![get_secret(), TokensAction::UpdateSecret(token_secret())],
            ..Case::default()
        },
        Case {
            name: "added token secret without namespace data",
            client_secrets: vec![token_secret_without(NAMESPACE_KEY)],
            existing_account: Some(service_account(token_refs())),
            added_secret: Some(token_secret_without(NAMESPACE_KEY)),
            expected: vec![get_secret(), TokensAction::UpdateSecret(token_secret())],
            ..Case::default()
        },
        Case {
            // No update: the custom namespace is kept.
            name: "added token secret with custom namespace data",
            client_secrets: vec![token_secret_with(NAMESPACE_KEY, b"custom")],
            existing_account: Some(service_account(token_refs())),
            added_secret: Some(token_secret_with(NAMESPACE_KEY, b"custom")),
            ..Case::default()
        },
        Case {
            name: "updated secret without serviceaccount",
            client_secrets: vec![token_secret()],
            updated_secret: Some(token_secret()),
            expected: vec![get_account(), delete_secret()],
            ..Case::default()
        },
        Case {
            name: "updated secret with serviceaccount",
            existing_account: Some(service_account(token_refs())),
            updated_secret: Some(token_secret()),
            ..Case::default()
        },
        Case {
            name: "updated token secret without token data",
            client_secrets: vec![token_secret_without(TOKEN_KEY)],
            existing_account: Some(service_account(token_refs())),
            updated_secret: Some(token_secret_without(TOKEN_KEY)),
            expected: vec![get_secret(), TokensAction::UpdateSecret(token_secret())],
            ..Case::default()
        },
        Case {
            name: "updated token secret without ca data",
            client_secrets: vec![token_secret_without(CA_CERT_KEY)],
            existing_account: Some(service_account(token_refs())),
            updated_secret: Some(token_secret_without(CA_CERT_KEY)),
            expected: vec![get_secret(), TokensAction::UpdateSecret(token_secret())],
            ..Case::default()
        },
        Case {
            name: "updated token secret with mismatched ca data",
            client_secrets: vec![token_secret_with(CA_CERT_KEY, b"mismatched")],
            existing_account: Some(service_account(token_refs())),
            updated_secret: Some(token_secret_with(CA_CERT_KEY, b"mismatched")),
            expected: vec![get_secret(), TokensAction::UpdateSecret(token_secret())],
            ..Case::default()
        },
        Case {
            name: "updated token secret without namespace data",
            client_secrets: vec![token_secret_without(NAMESPACE_KEY)],
            existing_account: Some(service_account(token_refs())),
            updated_secret: Some(token_secret_without(NAMESPACE_KEY)),
            expected: vec![get_secret(), TokensAction::UpdateSecret(token_secret())],
            ..Case::default()
        },
        Case {
            name: "updated token secret with custom namespace data",
            client_secrets: vec![token_secret_with(NAMESPACE_KEY, b"custom")],
            existing_account: Some(service_account(token_refs())),
            updated_secret: Some(token_secret_with(NAMESPACE_KEY, b"custom")),
            ..Case::default()
        },
        Case {
            name: "deleted secret without serviceaccount",
            deleted_secret: Some(token_secret()),
            ..Case::default()
        },
        Case {
            name: "deleted secret with serviceaccount with reference",
            client_accounts: vec![service_account(token_refs())],
            existing_account: Some(service_account(token_refs())),
            deleted_secret: Some(token_secret()),
            expected: vec![
                get_account(),
                TokensAction::UpdateServiceAccount(service_account(empty_refs())),
            ],
            ..Case::default()
        },
        Case {
            name: "deleted secret with serviceaccount without reference",
            existing_account: Some(service_account(empty_refs())),
            deleted_secret: Some(token_secret()),
            expected: vec![get_account()],
            ..Case::default()
        },
        // kcm's own rows, pinning upstream behaviour the table leaves implicit.
        Case {
            name: "added token secret without a uid annotation needs no update",
            existing_account: Some(service_account(token_refs())),
            added_secret: Some({
                let mut s = token_secret();
                s.metadata
                    .annotations
                    .as_mut()
                    .expect("annotations")
                    .remove(SERVICE_ACCOUNT_UID_KEY);
                s
            }),
            ..Case::default()
        },
        Case {
            name: "a live secret newer than the cache is left to its update event",
            client_secrets: vec![{
                let mut s = token_secret_without(TOKEN_KEY);
                s.metadata.resource_version = Some("2".into());
                s
            }],
            existing_account: Some(service_account(token_refs())),
            added_secret: Some(token_secret_without(TOKEN_KEY)),
            expected: vec![get_secret()],
            ..Case::default()
        },
        Case {
            name: "added secret naming another uid of its serviceaccount",
            client_accounts: vec![service_account(token_refs())],
            client_secrets: vec![token_secret()],
            existing_account: Some({
                let mut a = service_account(token_refs());
                a.metadata.uid = Some("67890".into());
                a
            }),
            added_secret: Some(token_secret()),
            // The cache holds another account of that name; the API's is the Secret's.
            expected: vec![get_account()],
            ..Case::default()
        },
        Case {
            name: "an opaque secret is not queued",
            added_secret: Some(opaque_secret()),
            ..Case::default()
        },
    ]
}

fn controller(
    client: &Arc<FakeTokensClient>,
) -> (TokensController, Indexer<Secret>, Indexer<ServiceAccount>) {
    let (secrets, accounts) = (Indexer::new(), Indexer::new());
    let controller = TokensController::with_caches(
        secrets.clone(),
        accounts.clone(),
        client.clone(),
        Arc::new(FixedToken),
        ROOT_CA.to_vec(),
        None,
    );
    (controller, secrets, accounts)
}

/// Works both queues until they are empty, as upstream's test loop (one item of each at a
/// time); keys requeued with a delay come back once paused time passes it.
async fn drain(controller: &TokensController) {
    loop {
        let mut worked = false;
        if !controller.account_queue().is_empty() {
            process_next_work_item(
                TOKENS_CONTROLLER_NAME,
                controller.account_queue(),
                &ACCOUNT_ERROR_POLICY,
                |key| async move { controller.sync_service_account(&key).await },
            )
            .await;
            worked = true;
        }
        if !controller.secret_queue().is_empty() {
            process_next_work_item(
                TOKENS_CONTROLLER_NAME,
                controller.secret_queue(),
                &SECRET_ERROR_POLICY,
                |key| async move { controller.sync_secret(&key).await },
            )
            .await;
            worked = true;
        }
        if !worked {
            return;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn token_creation() {
    for case in cases() {
        let mut fake = FakeTokensClient::new();
        for account in case.client_accounts {
            fake = fake.with_service_account(account);
        }
        for secret in case.client_secrets {
            fake = fake.with_secret(secret);
        }
        let client = Arc::new(fake);
        let (controller, secrets, accounts) = controller(&client);
        if let Some(account) = case.existing_account {
            accounts.add(Arc::new(account)).expect("cache");
        }
        for secret in case.existing_secrets {
            secrets.add(Arc::new(secret)).expect("cache");
        }

        if let Some(account) = case.added_account.or(case.updated_account) {
            accounts.add(Arc::new(account.clone())).expect("cache");
            controller.queue_service_account_sync(&account);
        }
        if let Some(account) = case.deleted_account {
            accounts.delete(&account).expect("cache");
            controller.queue_service_account_sync(&account);
        }
        if let Some(secret) = case.added_secret.or(case.updated_secret) {
            secrets.add(Arc::new(secret.clone())).expect("cache");
            controller.queue_secret_sync(&secret);
        }
        if let Some(secret) = case.deleted_secret {
            secrets.delete(&secret).expect("cache");
            controller.queue_secret_sync(&secret);
        }

        drain(&controller).await;

        assert!(controller.account_queue().is_empty(), "{}", case.name);
        assert!(controller.secret_queue().is_empty(), "{}", case.name);
        assert_eq!(client.actions(), case.expected, "{}", case.name);
    }
}

/// A failed delete other than NotFound or Conflict is retried, rate-limited (upstream's
/// `deleteToken` "retry for any other error").
#[tokio::test(start_paused = true)]
async fn a_failed_token_delete_is_retried() {
    let client = Arc::new(FakeTokensClient::new().with_secret(token_secret()));
    client.fail(
        TokensVerb::DeleteSecret,
        1,
        api_status::internal_error("etcd is down"),
    );
    let (controller, secrets, _) = controller(&client);
    secrets.add(Arc::new(token_secret())).expect("cache");
    controller.queue_secret_sync(&token_secret());

    drain(&controller).await;
    assert_eq!(client.actions(), [get_account(), delete_secret()]);
    assert_eq!(
        controller
            .secret_queue()
            .num_requeues(&SecretQueueKey::of(&token_secret())),
        1
    );

    // The rate limiter's first delay (5ms) passes.
    tokio::time::sleep(Duration::from_millis(10)).await;
    drain(&controller).await;
    assert_eq!(
        client.actions(),
        [
            get_account(),
            delete_secret(),
            get_account(),
            delete_secret()
        ]
    );
    assert!(
        client.secret("default", "token-secret-1").is_none(),
        "deleted"
    );
    assert_eq!(
        controller
            .secret_queue()
            .num_requeues(&SecretQueueKey::of(&token_secret())),
        0
    );
}

/// A conflicting token update is not retried: the Secret's own update event brings it back.
#[tokio::test(start_paused = true)]
async fn a_conflicting_token_update_is_not_retried() {
    let client = Arc::new(FakeTokensClient::new().with_secret(token_secret_without(TOKEN_KEY)));
    client.fail(
        TokensVerb::UpdateSecret,
        1,
        api_status::conflict("secrets", "token-secret-1", "the object has been modified"),
    );
    let (controller, secrets, accounts) = controller(&client);
    accounts
        .add(Arc::new(service_account(token_refs())))
        .expect("cache");
    secrets
        .add(Arc::new(token_secret_without(TOKEN_KEY)))
        .expect("cache");
    controller.queue_secret_sync(&token_secret_without(TOKEN_KEY));

    drain(&controller).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    drain(&controller).await;
    assert_eq!(
        client.actions(),
        [get_secret(), TokensAction::UpdateSecret(token_secret())]
    );
}

/// Removing a deleted Secret's reference retries a conflict at once along
/// `RemoveTokenBackoff`, on a freshly read account.
#[tokio::test(start_paused = true)]
async fn a_reference_removal_retries_conflicts() {
    let client =
        Arc::new(FakeTokensClient::new().with_service_account(service_account(token_refs())));
    client.fail(
        TokensVerb::UpdateServiceAccount,
        2,
        api_status::conflict("serviceaccounts", "default", "the object has been modified"),
    );
    let (controller, _, accounts) = controller(&client);
    accounts
        .add(Arc::new(service_account(token_refs())))
        .expect("cache");
    controller.queue_secret_sync(&token_secret());

    drain(&controller).await;
    let update = TokensAction::UpdateServiceAccount(service_account(empty_refs()));
    assert_eq!(
        client.actions(),
        [
            get_account(),
            update.clone(),
            get_account(),
            update.clone(),
            get_account(),
            update
        ]
    );
    assert_eq!(
        client
            .service_account("default", "default")
            .and_then(|a| a.secrets),
        Some(Vec::new())
    );
}

/// A deleted account's tokens are found in the cache by name and uid: a token Secret naming
/// another uid of that name is kept.
#[tokio::test(start_paused = true)]
async fn a_deleted_accounts_tokens_match_its_uid() {
    let mut other = token_secret();
    other.metadata.name = Some("token-secret-2".into());
    other.metadata.uid = Some("34567".into());
    other
        .metadata
        .annotations
        .as_mut()
        .expect("annotations")
        .insert(SERVICE_ACCOUNT_UID_KEY.to_owned(), "67890".to_owned());
    let client = Arc::new(
        FakeTokensClient::new()
            .with_secret(token_secret())
            .with_secret(other.clone()),
    );
    let (controller, secrets, _) = controller(&client);
    secrets.add(Arc::new(token_secret())).expect("cache");
    secrets.add(Arc::new(other)).expect("cache");
    controller.queue_service_account_sync(&service_account(token_refs()));

    drain(&controller).await;
    assert_eq!(client.actions(), [delete_secret()]);
    assert!(client.secret("default", "token-secret-2").is_some(), "kept");
}
