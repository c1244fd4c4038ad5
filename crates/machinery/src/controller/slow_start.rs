//! Slow start: run an operation `count` times in doubling batches, stopping at the first failing batch.
//!
//! When a controller must create 500 pods and every creation will fail the same way (a quota,
//! an admission webhook), slow start sends 1 + 2 + 4 requests instead of 500, as upstream's
//! `slowStartBatch` in `pkg/controller/replicaset`.

use futures::future::join_all;

/// The size of the first batch, as upstream's `SlowStartInitialBatchSize`.
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// Calls `f` `count` times in batches of `initial_batch_size`, then twice that, and so on (the
/// last batch takes what remains). The calls of one batch run concurrently; the next batch
/// starts when all of them are done. Stops after the first batch in which any call failed.
///
/// Returns how many calls succeeded and the first error (in call order) of the failing batch,
/// as upstream's `slowStartBatch`. A zero `count` or `initial_batch_size` makes no call.
pub async fn slow_start_batch<F, Fut, E>(
    count: usize,
    initial_batch_size: usize,
    mut f: F,
) -> (usize, Option<E>)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut remaining = count;
    let mut successes = 0;
    let mut batch_size = remaining.min(initial_batch_size);
    while batch_size > 0 {
        let results = join_all((0..batch_size).map(|_| f())).await;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(()) => successes += 1,
                Err(e) => {
                    if first_error.is_none() {
                        first_error = Some(e);
                    }
                }
            }
        }
        if first_error.is_some() {
            return (successes, first_error);
        }
        remaining -= batch_size;
        batch_size = batch_size.saturating_mul(2).min(remaining);
    }
    (successes, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, PartialEq)]
    struct FakeError;

    /// Upstream `TestSlowStartBatch`: calls beyond `call_limit` fail.
    #[tokio::test]
    async fn slow_start_batch_table() {
        struct Case {
            name: &'static str,
            count: usize,
            call_limit: usize,
            want_successes: usize,
            want_error: bool,
            want_calls: usize,
        }
        let cases = [
            Case {
                // batch 1: 1 failure.
                name: "callLimit = 0 (all fail)",
                count: 10,
                call_limit: 0,
                want_successes: 0,
                want_error: true,
                want_calls: 1,
            },
            Case {
                // batches of 1, 2, 4 and the remaining 3 all succeed.
                name: "callLimit = count (all succeed)",
                count: 10,
                call_limit: 10,
                want_successes: 10,
                want_error: false,
                want_calls: 10,
            },
            Case {
                // 1 + 2 succeed; batch 3 (4 calls): 2 succeed, 2 fail; batch 4 never runs.
                name: "callLimit < count (some succeed)",
                count: 10,
                call_limit: 5,
                want_successes: 5,
                want_error: true,
                want_calls: 7,
            },
            Case {
                // Error on the 4th call: batch 3 (calls 4-7) fails entirely.
                name: "error on the 4th call",
                count: 10,
                call_limit: 3,
                want_successes: 3,
                want_error: true,
                want_calls: 7,
            },
            Case {
                name: "count 0 makes no call",
                count: 0,
                call_limit: 0,
                want_successes: 0,
                want_error: false,
                want_calls: 0,
            },
        ];
        for case in cases {
            let calls = Arc::new(AtomicUsize::new(0));
            let (successes, err) =
                slow_start_batch(case.count, SLOW_START_INITIAL_BATCH_SIZE, || {
                    let calls = Arc::clone(&calls);
                    async move {
                        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                        if n > case.call_limit {
                            Err(FakeError)
                        } else {
                            Ok(())
                        }
                    }
                })
                .await;
            assert_eq!(successes, case.want_successes, "{}", case.name);
            assert_eq!(err.is_some(), case.want_error, "{}", case.name);
            assert_eq!(
                calls.load(Ordering::SeqCst),
                case.want_calls,
                "{}",
                case.name
            );
        }
    }

    #[tokio::test]
    async fn batches_double_and_run_concurrently() {
        // Record the batch sizes by counting calls in flight when each batch is awaited.
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peaks = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (successes, err) = slow_start_batch::<_, _, FakeError>(12, 1, || {
            let in_flight = Arc::clone(&in_flight);
            let peaks = Arc::clone(&peaks);
            in_flight.fetch_add(1, Ordering::SeqCst);
            async move {
                // Every call of the batch has been started before any one of them runs.
                peaks
                    .lock()
                    .expect("lock")
                    .push(in_flight.load(Ordering::SeqCst));
                tokio::task::yield_now().await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .await;
        assert_eq!((successes, err), (12, None));
        let peaks = peaks.lock().expect("lock").clone();
        let mut sizes = Vec::new();
        let mut i = 0;
        while i < peaks.len() {
            sizes.push(peaks[i]);
            i += peaks[i];
        }
        assert_eq!(sizes, vec![1, 2, 4, 5]);
    }

    #[tokio::test]
    async fn initial_batch_size_larger_than_count() {
        let calls = AtomicUsize::new(0);
        let (successes, err) = slow_start_batch::<_, _, FakeError>(3, 8, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        })
        .await;
        assert_eq!((successes, err), (3, None));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }
}
