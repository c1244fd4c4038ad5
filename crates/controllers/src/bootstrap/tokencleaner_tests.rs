use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kcm_machinery::controller::clock::fixed_clock;
use kcm_machinery::informer::store::Indexer;
use kube::core::Status;

use super::*;
use crate::bootstrap::FakeBootstrapClient;
use crate::bootstrap::token::EXPIRATION_KEY;

const NOW: &str = "2026-06-01T12:00:00Z";

fn token(name: &str, expiration: Option<&str>) -> Secret {
    let mut data = vec![("token-id", "abcdef")];
    if let Some(expiration) = expiration {
        data.push((EXPIRATION_KEY, expiration));
    }
    let mut secret = kcm_testing::bootstrap_token_secret(name, &data);
    secret.metadata.uid = Some(format!("uid-{name}"));
    secret
}

fn cleaner(secrets: Vec<Secret>) -> (TokenCleaner, Arc<FakeBootstrapClient>) {
    let cache = Indexer::default();
    for secret in secrets {
        cache.add(Arc::new(secret)).expect("add");
    }
    let client = Arc::new(FakeBootstrapClient::new());
    let now: Timestamp = NOW.parse().expect("now");
    let cleaner = TokenCleaner::with_cache(cache, client.clone(), fixed_clock(now), None);
    (cleaner, client)
}

#[tokio::test]
async fn an_expired_token_is_deleted_with_its_uid_as_precondition() {
    // Upstream's TestCleanerExpired.
    let (cleaner, client) = cleaner(vec![token(
        "bootstrap-token-abcdef",
        Some("2026-06-01T11:00:00Z"),
    )]);
    cleaner
        .sync("kube-system/bootstrap-token-abcdef")
        .await
        .expect("sync");
    assert_eq!(
        client.deletes(),
        [(
            "kube-system".to_owned(),
            "bootstrap-token-abcdef".to_owned(),
            Some("uid-bootstrap-token-abcdef".to_owned())
        )]
    );
}

#[tokio::test]
async fn an_unparseable_expiration_counts_as_expired() {
    let (cleaner, client) = cleaner(vec![token("bootstrap-token-abcdef", Some("soon"))]);
    cleaner
        .sync("kube-system/bootstrap-token-abcdef")
        .await
        .expect("sync");
    assert_eq!(client.deletes().len(), 1);
}

#[tokio::test]
async fn tokens_without_or_before_their_expiration_are_kept() {
    // Upstream's TestCleanerNoExpiration and TestCleanerNotExpired.
    let (cleaner, client) = cleaner(vec![
        token("bootstrap-token-aaaaaa", None),
        token("bootstrap-token-bbbbbb", Some("2026-06-01T13:00:00Z")),
    ]);
    cleaner
        .sync("kube-system/bootstrap-token-aaaaaa")
        .await
        .expect("sync");
    cleaner
        .sync("kube-system/bootstrap-token-bbbbbb")
        .await
        .expect("sync");
    cleaner.sync("kube-system/gone").await.expect("sync");
    assert!(client.deletes().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_token_expiring_later_is_requeued_for_then() {
    // Upstream's TestCleanerExpiredAt: requeued for when it expires.
    let (cleaner, _client) = cleaner(vec![token(
        "bootstrap-token-bbbbbb",
        Some("2026-06-01T12:00:30Z"),
    )]);
    cleaner
        .sync("kube-system/bootstrap-token-bbbbbb")
        .await
        .expect("sync");
    assert_eq!(cleaner.queue().len(), 0);
    tokio::time::advance(Duration::from_secs(29)).await;
    tokio::task::yield_now().await;
    assert_eq!(cleaner.queue().len(), 0);
    tokio::time::advance(Duration::from_secs(2)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(cleaner.queue().len(), 1);
}

#[tokio::test]
async fn a_failed_delete_is_not_an_error() {
    let (cleaner, client) = cleaner(vec![token(
        "bootstrap-token-abcdef",
        Some("2020-01-01T00:00:00Z"),
    )]);
    client.fail_with(Status::failure("boom", "InternalError").with_code(500));
    cleaner
        .sync("kube-system/bootstrap-token-abcdef")
        .await
        .expect("logged, not retried");
}

#[tokio::test]
async fn only_bootstrap_tokens_in_kube_system_are_enqueued() {
    let (cleaner, _client) = cleaner(Vec::new());
    let handlers = cleaner.event_handlers().clone();
    handlers.on_add(Arc::new(token("bootstrap-token-abcdef", None)), true);
    let mut elsewhere = token("bootstrap-token-abcdef", None);
    elsewhere.metadata.namespace = Some("default".to_owned());
    handlers.on_add(Arc::new(elsewhere), true);
    let mut opaque = token("bootstrap-token-zzzzzz", None);
    opaque.type_ = Some("Opaque".to_owned());
    handlers.on_update(Arc::new(opaque.clone()), Arc::new(opaque));
    assert_eq!(cleaner.queue().len(), 1);
}
