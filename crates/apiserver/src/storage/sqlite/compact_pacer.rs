//! How many revisions one compaction transaction takes, so it holds the write lock briefly.

use std::time::Duration;

use super::super::Revision;

/// Sizes compaction batches by how long the last one held the write lock: kine deletes a
/// fixed 1,000 revisions per transaction (`compactBatchSize`), which on a large or slow
/// database can hold writers off for seconds (k3s#13720). Here a batch that took longer than
/// the budget shrinks the next one in proportion, and a batch well under it doubles the next,
/// never past `max` (kine's 1,000) nor below `min`.
#[derive(Clone, Debug)]
pub(super) struct CompactPacer {
    /// The size of the next batch; always within `[min, max]`.
    batch: Revision,
    min: Revision,
    max: Revision,
    /// How long one batch may hold the write lock.
    budget: Duration,
}

impl CompactPacer {
    pub(super) fn new(min: Revision, max: Revision, budget: Duration) -> Self {
        let min = min.max(1);
        let max = max.max(min);
        CompactPacer {
            batch: max,
            min,
            max,
            budget,
        }
    }

    /// How many revisions the next batch compacts.
    pub(super) fn next(&self) -> Revision {
        self.batch
    }

    /// Records that a batch of `size` revisions held the write lock for `took`.
    pub(super) fn record(&mut self, size: Revision, took: Duration) {
        let budget = self.budget.as_nanos().max(1);
        let took_ns = took.as_nanos();
        self.batch = if took_ns > budget {
            // Scale to what would have fit in the budget.
            let fit = i128::from(size.max(1)) * i128::try_from(budget).unwrap_or(i128::MAX)
                / i128::try_from(took_ns).unwrap_or(i128::MAX);
            Revision::try_from(fit).unwrap_or(self.min)
        } else if took_ns < budget / 2 && size >= self.batch {
            self.batch.saturating_mul(2)
        } else {
            self.batch
        }
        .clamp(self.min, self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_follow_the_time_budget_within_bounds() {
        struct Case {
            name: &'static str,
            /// (size of the batch run, how long it took) in order.
            runs: Vec<(Revision, u64)>,
            want: Revision,
        }
        let ms = Duration::from_millis;
        let cases = [
            Case {
                name: "starts at the maximum",
                runs: vec![],
                want: 1000,
            },
            Case {
                name: "a batch four times over budget quarters the next",
                runs: vec![(1000, 200)],
                want: 250,
            },
            Case {
                name: "never below the minimum",
                runs: vec![(1000, 100_000)],
                want: 10,
            },
            Case {
                name: "a fast batch doubles the next",
                runs: vec![(1000, 200), (250, 10)],
                want: 500,
            },
            Case {
                name: "never above the maximum",
                runs: vec![(1000, 1), (1000, 1)],
                want: 1000,
            },
            Case {
                name: "a short final batch that was fast does not grow the next",
                runs: vec![(1000, 200), (3, 1)],
                want: 250,
            },
            Case {
                name: "within budget keeps the size",
                runs: vec![(1000, 200), (250, 40)],
                want: 250,
            },
        ];
        for case in cases {
            let mut pacer = CompactPacer::new(10, 1000, ms(50));
            for (size, took) in case.runs {
                pacer.record(size, ms(took));
            }
            assert_eq!(pacer.next(), case.want, "{}", case.name);
        }
    }
}
