//! Unit tests of the cleaner: upstream's `cleaner_test.go` cases, with a fixed clock.

use k8s_openapi::ByteString;

use super::*;
use crate::certificates::client::{CsrAction, FakeCsrClient};
use crate::certificates::testing::{condition, csr, csr_pem, with_conditions};

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

fn ago(minutes: i64) -> Timestamp {
    now() - SignedDuration::from_mins(minutes)
}

/// A self-signed certificate valid until the start of `year`.
fn cert_until(year: i32) -> ByteString {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(vec!["x".to_owned()]).expect("params");
    params.not_before = rcgen::date_time_ymd(2000, 1, 1);
    params.not_after = rcgen::date_time_ymd(year, 1, 1);
    ByteString(params.self_signed(&key).expect("cert").pem().into_bytes())
}

/// A CSR created `created_minutes_ago`, with `conditions` and `certificate`.
fn request(
    created_minutes_ago: i64,
    conditions: Vec<k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition>,
    certificate: Option<ByteString>,
) -> CertificateSigningRequest {
    let mut csr = csr(
        "csr-1",
        "kubernetes.io/kube-apiserver-client",
        &["client auth"],
        "alice",
        &csr_pem("alice", &[], &[]),
    );
    csr.metadata.creation_timestamp = Some(Time(ago(created_minutes_ago)));
    let mut csr = with_conditions(csr, conditions);
    if let Some(certificate) = certificate {
        csr.status.get_or_insert_default().certificate = Some(certificate);
    }
    if csr
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.as_deref() == Some(&[]))
    {
        csr.status = None;
    }
    csr
}

#[tokio::test]
async fn old_csrs_are_deleted_by_upstreams_criteria() {
    let issued = || Some(cert_until(2030));
    let cases = [
        (
            "approved and issued 5 minutes ago",
            request(
                90,
                vec![condition("Approved", "True", Some(ago(5)))],
                issued(),
            ),
            false,
        ),
        (
            "approved 90 minutes ago but not issued",
            request(90, vec![condition("Approved", "True", Some(ago(90)))], None),
            false,
        ),
        (
            "approved and issued 90 minutes ago",
            request(
                90,
                vec![condition("Approved", "True", Some(ago(90)))],
                issued(),
            ),
            true,
        ),
        (
            "denied 5 minutes ago",
            request(90, vec![condition("Denied", "True", Some(ago(5)))], None),
            false,
        ),
        (
            "denied 90 minutes ago",
            request(90, vec![condition("Denied", "True", Some(ago(90)))], None),
            true,
        ),
        (
            "failed 90 minutes ago",
            request(90, vec![condition("Failed", "True", Some(ago(90)))], None),
            true,
        ),
        (
            "failed 5 minutes ago",
            request(90, vec![condition("Failed", "True", Some(ago(5)))], None),
            false,
        ),
        ("pending for 5 minutes", request(5, vec![], None), false),
        ("pending for 25 hours", request(25 * 60, vec![], None), true),
        (
            "approved with no update time",
            request(90, vec![condition("Approved", "True", None)], issued()),
            false,
        ),
        (
            "approved 5 minutes ago, certificate expired",
            request(
                90,
                vec![condition("Approved", "True", Some(ago(5)))],
                Some(cert_until(2020)),
            ),
            true,
        ),
        (
            "approved 5 minutes ago, certificate unparsable",
            request(
                90,
                vec![condition("Approved", "True", Some(ago(5)))],
                Some(ByteString(b"junk".to_vec())),
            ),
            false,
        ),
    ];
    for (name, csr, deleted) in cases {
        let client = Arc::new(FakeCsrClient::new());
        let cleaner =
            CsrCleaner::with_cache(Indexer::new(), client.clone()).with_clock(Arc::new(now));
        cleaner.handle(&csr).await.expect(name);
        let want = if deleted {
            vec![CsrAction::Delete("csr-1".to_owned())]
        } else {
            vec![]
        };
        assert_eq!(client.actions(), want, "{name}");
    }
}

#[tokio::test]
async fn a_pass_checks_every_cached_csr_and_survives_a_failed_delete() {
    let csrs = Indexer::new();
    let mut old = request(25 * 60, vec![], None);
    old.metadata.name = Some("old".to_owned());
    let mut fresh = request(5, vec![], None);
    fresh.metadata.name = Some("fresh".to_owned());
    csrs.add(Arc::new(old)).expect("add");
    csrs.add(Arc::new(fresh)).expect("add");
    let client = Arc::new(FakeCsrClient::new());
    let cleaner = CsrCleaner::with_cache(csrs, client.clone()).with_clock(Arc::new(now));
    cleaner.clean_all().await;
    assert_eq!(client.actions(), [CsrAction::Delete("old".to_owned())]);
    client.set_error(Some(kcm_machinery::controller::api_status::internal_error(
        "boom",
    )));
    cleaner.clean_all().await;
    assert_eq!(
        client.actions().len(),
        2,
        "the delete is tried again next pass"
    );
}

/// The cleaner passes once at start and then once per polling interval (paused time).
#[tokio::test(start_paused = true)]
async fn the_cleaner_checks_every_hour() {
    let csrs = Indexer::new();
    csrs.add(Arc::new(request(25 * 60, vec![], None)))
        .expect("add");
    let client = Arc::new(FakeCsrClient::new());
    let cleaner = Arc::new(CsrCleaner::with_cache(csrs, client.clone()).with_clock(Arc::new(now)));
    let cancel = CancellationToken::new();
    let task = tokio::spawn(cleaner.run(cancel.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(client.actions().len(), 1, "a pass at start");
    tokio::time::sleep(POLLING_INTERVAL - Duration::from_secs(2)).await;
    assert_eq!(client.actions().len(), 1, "none before the hour");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(client.actions().len(), 2, "one on the hour");
    cancel.cancel();
    task.await.expect("stops");
}
