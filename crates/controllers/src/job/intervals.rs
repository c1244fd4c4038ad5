//! Sets of completion indexes as ordered intervals, and their compressed text form (`"1,3-5,7"`), as upstream's `orderedIntervals`.
//!
//! `status.completedIndexes`, `status.failedIndexes` and `successPolicy.rules[].succeededIndexes`
//! are written in this form. Parsing is lenient the way upstream's `parseIndexesFromString`
//! is: a corrupted interval is skipped, parsing stops at the first interval starting at or
//! beyond `completions`, and an interval reaching past it is cut at `completions - 1`.

use std::fmt;

/// Indexes `first..=last`. Intervals built here always have `first <= last`; one parsed from
/// a corrupted string may not, and is then kept as written (upstream does not validate it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// The first index.
    pub first: i32,
    /// The last index, inclusive.
    pub last: i32,
}

impl Interval {
    /// The interval `first..=last`.
    pub const fn new(first: i32, last: i32) -> Self {
        Self { first, last }
    }
}

/// Intervals in increasing order. Those built by [`OrderedIntervals::merge`] neither overlap
/// nor touch (`next.first > prev.last + 1`); parsing merges only intervals that touch exactly,
/// as upstream's does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderedIntervals(Vec<Interval>);

impl OrderedIntervals {
    /// No indexes.
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// The intervals, in order.
    pub fn as_slice(&self) -> &[Interval] {
        &self.0
    }

    /// Whether there are no intervals.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses the compressed form, keeping indexes below `completions`, as upstream's
    /// `parseIndexesFromString`. An empty string is no indexes.
    pub fn parse(indexes: &str, completions: i32) -> Self {
        let mut result: Vec<Interval> = Vec::new();
        if indexes.is_empty() {
            return Self(result);
        }
        let completions = i64::from(completions);
        for interval in indexes.split(',') {
            let mut limits = interval.split('-');
            let Some(first) = limits.next().and_then(go_atoi) else {
                tracing::debug!(interval, "corrupted indexes interval, ignoring");
                continue;
            };
            if first >= completions {
                break;
            }
            let last = match limits.next() {
                None => first,
                Some(text) => match go_atoi(text) {
                    Some(last) => last.min(completions - 1),
                    None => {
                        tracing::debug!(interval, "corrupted indexes interval, ignoring");
                        continue;
                    }
                },
            };
            // Both ends are below `completions`, an i32; `first` is never negative (a sign
            // would have been split off as a `-`), `last` may be only if it was written so.
            let (Ok(first), Ok(last)) = (i32::try_from(first), i32::try_from(last)) else {
                continue;
            };
            match result.last_mut() {
                Some(prev) if i64::from(prev.last) == i64::from(first) - 1 => prev.last = last,
                _ => result.push(Interval::new(first, last)),
            }
        }
        Self(result)
    }

    /// These intervals with `new_indexes` (in increasing order) added, as upstream's
    /// `withOrderedIndexes`.
    pub fn with_ordered_indexes(&self, new_indexes: &[i32]) -> Self {
        let singles: Vec<Interval> = new_indexes.iter().map(|&i| Interval::new(i, i)).collect();
        self.merge(&Self(singles))
    }

    /// The union of both lists, merging overlapping and adjacent intervals, as upstream's
    /// `merge`.
    pub fn merge(&self, other: &Self) -> Self {
        let mut result: Vec<Interval> = Vec::with_capacity(self.0.len() + other.0.len());
        let mut push = |next: Interval| match result.last_mut() {
            Some(prev) if i64::from(next.first) <= i64::from(prev.last) + 1 => {
                prev.last = prev.last.max(next.last);
            }
            _ => result.push(next),
        };
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() && j < other.0.len() {
            if self.0[i].first < other.0[j].first {
                push(self.0[i]);
                i += 1;
            } else {
                push(other.0[j]);
                j += 1;
            }
        }
        self.0[i..]
            .iter()
            .chain(&other.0[j..])
            .for_each(|&v| push(v));
        Self(result)
    }

    /// How many indexes the intervals hold, as upstream's `total`.
    pub fn total(&self) -> i64 {
        self.0
            .iter()
            .map(|v| i64::from(v.last) - i64::from(v.first) + 1)
            .sum()
    }

    /// Whether `index` is in one of the intervals (binary search), as upstream's `has`.
    pub fn has(&self, index: i32) -> bool {
        let at = self.0.partition_point(|v| v.last < index);
        self.0.get(at).is_some_and(|v| v.first <= index)
    }
}

impl From<Vec<Interval>> for OrderedIntervals {
    fn from(intervals: Vec<Interval>) -> Self {
        Self(intervals)
    }
}

/// The compressed form: `first` alone, `first,last` for two indexes, `first-last` for more.
impl fmt::Display for OrderedIntervals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, v) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", v.first)?;
            if v.last > v.first {
                let sep = if v.last == v.first + 1 { ',' } else { '-' };
                write!(f, "{sep}{}", v.last)?;
            }
        }
        Ok(())
    }
}

/// Go's `strconv.Atoi`: an optional sign then decimal digits, fitting an `int64`.
pub(crate) fn go_atoi(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ivs(v: &[(i32, i32)]) -> OrderedIntervals {
        OrderedIntervals(v.iter().map(|&(a, b)| Interval::new(a, b)).collect())
    }

    #[test]
    fn parse_keeps_indexes_below_completions_and_skips_corruption() {
        struct Case {
            name: &'static str,
            text: &'static str,
            completions: i32,
            want: OrderedIntervals,
        }
        let cases = [
            Case {
                name: "empty",
                text: "",
                completions: 10,
                want: ivs(&[]),
            },
            Case {
                name: "single",
                text: "3",
                completions: 10,
                want: ivs(&[(3, 3)]),
            },
            Case {
                name: "singles and ranges",
                text: "0,4,5,10-12",
                completions: 13,
                want: ivs(&[(0, 0), (4, 5), (10, 12)]),
            },
            Case {
                name: "adjacent merged",
                text: "3,4,6",
                completions: 9,
                want: ivs(&[(3, 4), (6, 6)]),
            },
            Case {
                name: "prev interval out of range",
                text: "0-5,8-10",
                completions: 8,
                want: ivs(&[(0, 5)]),
            },
            Case {
                name: "prev interval partially out of range",
                text: "0-5,8-10",
                completions: 10,
                want: ivs(&[(0, 5), (8, 9)]),
            },
            Case {
                name: "corrupted interval",
                text: "0,1-foo,bar",
                completions: 4,
                want: ivs(&[(0, 0)]),
            },
            Case {
                name: "invalid form",
                text: "invalid-form",
                completions: 10,
                want: ivs(&[]),
            },
            Case {
                name: "sign accepted as Go's Atoi does",
                text: "+2",
                completions: 10,
                want: ivs(&[(2, 2)]),
            },
            Case {
                name: "huge first stops parsing",
                text: "1,99999999999,3",
                completions: 10,
                want: ivs(&[(1, 1)]),
            },
        ];
        for c in cases {
            assert_eq!(
                OrderedIntervals::parse(c.text, c.completions),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn format_uses_comma_for_pairs_and_dash_for_runs() {
        struct Case {
            name: &'static str,
            intervals: OrderedIntervals,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "empty",
                intervals: ivs(&[]),
                want: "",
            },
            Case {
                name: "single",
                intervals: ivs(&[(1, 1)]),
                want: "1",
            },
            Case {
                name: "pair",
                intervals: ivs(&[(1, 2)]),
                want: "1,2",
            },
            Case {
                name: "run",
                intervals: ivs(&[(1, 3)]),
                want: "1-3",
            },
            Case {
                name: "mixed",
                intervals: ivs(&[(0, 0), (2, 2), (4, 5), (7, 8), (10, 12)]),
                want: "0,2,4,5,7,8,10-12",
            },
        ];
        for c in cases {
            assert_eq!(c.intervals.to_string(), c.want, "{}", c.name);
            // What is written parses back to the same intervals (pairs re-merge).
            assert_eq!(
                OrderedIntervals::parse(c.want, 100),
                c.intervals,
                "{} round trip",
                c.name
            );
        }
    }

    #[test]
    fn with_ordered_indexes_merges() {
        struct Case {
            name: &'static str,
            prev: OrderedIntervals,
            new: Vec<i32>,
            want: OrderedIntervals,
        }
        let cases = [
            Case {
                name: "one index",
                prev: ivs(&[]),
                new: vec![1],
                want: ivs(&[(1, 1)]),
            },
            Case {
                name: "prev and new separate",
                prev: ivs(&[(0, 0), (4, 5), (10, 12)]),
                new: vec![2, 7, 8],
                want: ivs(&[(0, 0), (2, 2), (4, 5), (7, 8), (10, 12)]),
            },
            Case {
                name: "prev between new",
                prev: ivs(&[(3, 4), (6, 6)]),
                new: vec![2, 7, 8],
                want: ivs(&[(2, 4), (6, 8)]),
            },
            Case {
                name: "new between prev",
                prev: ivs(&[(2, 2), (7, 8)]),
                new: vec![3, 4, 6],
                want: ivs(&[(2, 4), (6, 8)]),
            },
            Case {
                name: "new within prev",
                prev: ivs(&[(2, 7)]),
                new: vec![0, 3, 5, 9],
                want: ivs(&[(0, 0), (2, 7), (9, 9)]),
            },
        ];
        for c in cases {
            assert_eq!(c.prev.with_ordered_indexes(&c.new), c.want, "{}", c.name);
        }
    }

    #[test]
    fn merge_unions_interval_lists() {
        let a = ivs(&[(0, 2), (10, 12)]);
        let b = ivs(&[(1, 5), (7, 8), (13, 13)]);
        assert_eq!(a.merge(&b), ivs(&[(0, 5), (7, 8), (10, 13)]));
        assert_eq!(b.merge(&a), ivs(&[(0, 5), (7, 8), (10, 13)]));
        assert_eq!(a.merge(&ivs(&[])), a);
        assert_eq!(a.total(), 6);
    }

    #[test]
    fn has_finds_indexes() {
        struct Case {
            name: &'static str,
            intervals: OrderedIntervals,
            index: i32,
            want: bool,
        }
        let cases = [
            Case {
                name: "empty",
                intervals: ivs(&[]),
                index: 4,
                want: false,
            },
            Case {
                name: "before all",
                intervals: ivs(&[(2, 4), (5, 7)]),
                index: 1,
                want: false,
            },
            Case {
                name: "after all",
                intervals: ivs(&[(2, 4), (6, 8)]),
                index: 9,
                want: false,
            },
            Case {
                name: "in between",
                intervals: ivs(&[(2, 4), (6, 8)]),
                index: 5,
                want: false,
            },
            Case {
                name: "in first",
                intervals: ivs(&[(2, 4), (6, 8)]),
                index: 2,
                want: true,
            },
            Case {
                name: "in second",
                intervals: ivs(&[(2, 4), (6, 8)]),
                index: 8,
                want: true,
            },
        ];
        for c in cases {
            assert_eq!(c.intervals.has(c.index), c.want, "{}", c.name);
        }
    }
}
