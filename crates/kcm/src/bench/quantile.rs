//! Percentiles of a histogram's cumulative buckets, as PromQL's `histogram_quantile`.

/// The `q` quantile (0..=1) of a histogram given as cumulative `(upper bound, count)` buckets
/// sorted by bound, the last being `+Inf`; `None` when it counted nothing.
///
/// As Prometheus' `histogram_quantile`: the bucket holding the rank is found and the value
/// interpolated linearly inside it (from 0 for the first bucket); a rank in the `+Inf` bucket
/// answers the largest finite bound. So the answer is only as fine as the buckets (the work
/// queue's are decades: 1 µs, 10 µs, ... 10 s).
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 || !q.is_finite() {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total;
    let mut lower = (0.0, 0.0);
    for &(bound, count) in buckets {
        if count >= rank {
            if bound.is_infinite() {
                return Some(lower.0);
            }
            let in_bucket = count - lower.1;
            if in_bucket <= 0.0 {
                return Some(bound);
            }
            return Some(lower.0 + (bound - lower.0) * (rank - lower.1) / in_bucket);
        }
        lower = (bound, count);
    }
    Some(lower.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn histogram_quantiles_interpolate_like_promql() {
        // 10 observations: 2 ≤ 0.001, 6 more ≤ 0.01, 2 more ≤ 0.1, none above.
        let b = [
            (0.001, 2.0),
            (0.01, 8.0),
            (0.1, 10.0),
            (f64::INFINITY, 10.0),
        ];
        struct Case {
            name: &'static str,
            q: f64,
            want: f64,
        }
        for case in [
            Case {
                name: "p10 inside the first bucket, from 0",
                q: 0.1,
                want: 0.0005,
            },
            Case {
                name: "p50 inside the second bucket",
                q: 0.5,
                want: 0.001 + 0.009 * 3.0 / 6.0,
            },
            Case {
                name: "p90 inside the third bucket",
                q: 0.9,
                want: 0.01 + 0.09 * 0.5,
            },
            Case {
                name: "p100 is the top of the last filled bucket",
                q: 1.0,
                want: 0.1,
            },
        ] {
            assert!(
                close(histogram_quantile(case.q, &b), case.want),
                "{}: {:?}",
                case.name,
                histogram_quantile(case.q, &b)
            );
        }
    }

    #[test]
    fn histogram_rank_in_inf_bucket_answers_largest_finite_bound() {
        let b = [(1.0, 1.0), (10.0, 2.0), (f64::INFINITY, 10.0)];
        assert!(close(histogram_quantile(0.99, &b), 10.0));
    }

    #[test]
    fn empty_histograms_have_no_quantile() {
        assert_eq!(histogram_quantile(0.5, &[]), None);
        assert_eq!(
            histogram_quantile(0.5, &[(1.0, 0.0), (f64::INFINITY, 0.0)]),
            None
        );
        assert_eq!(histogram_quantile(f64::NAN, &[(f64::INFINITY, 3.0)]), None);
    }
}
