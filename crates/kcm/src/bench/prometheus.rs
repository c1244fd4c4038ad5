//! A reader of the Prometheus text exposition the manager's `/metrics` serves: samples by name and labels.

use std::collections::BTreeMap;

/// One sample line: `name{label="value",...} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The metric name, with its `_bucket`/`_sum`/`_count`/`_total` suffix.
    pub name: String,
    /// The labels, sorted by name.
    pub labels: BTreeMap<String, String>,
    /// The value (`+Inf`, `-Inf` and `NaN` as Prometheus spells them).
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, or `""` when absent (as PromQL treats a missing label).
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map(String::as_str).unwrap_or("")
    }
}

/// Every sample of `text`; comment lines (`# HELP`, `# TYPE`, `# EOF`) and lines that do not
/// parse are skipped, so one odd line never hides the rest.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(inner)?;
        labels = parsed;
        rest = after;
    }
    // An optional timestamp may follow the value.
    let value = parse_value(rest.split_whitespace().next()?)?;
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Parses `k="v",k2="v2"}` and returns the labels and what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_owned();
        let mut chars = s[eq + 1..].char_indices();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        let mut escaped = false;
        let mut end = None;
        for (i, c) in chars {
            match (escaped, c) {
                (true, 'n') => {
                    value.push('\n');
                    escaped = false;
                }
                (true, c) => {
                    value.push(c);
                    escaped = false;
                }
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(eq + 1 + i + 1);
                    break;
                }
                (false, c) => value.push(c),
            }
        }
        labels.insert(key, value);
        s = &s[end?..];
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// The sum of the samples named `name`, grouped by the value of `label`.
pub fn sum_by(samples: &[Sample], name: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == name) {
        *out.entry(s.label(label).to_owned()).or_insert(0.0) += s.value;
    }
    out
}

/// The cumulative buckets `(le, count)` of histogram `name` (without `_bucket`) for the series
/// whose `label` is `value`, sorted by bound.
pub fn buckets(samples: &[Sample], name: &str, label: &str, value: &str) -> Vec<(f64, f64)> {
    let bucket = format!("{name}_bucket");
    let mut out: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.name == bucket && s.label(label) == value)
        .filter_map(|s| parse_value(s.label("le")).map(|le| (le, s.value)))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP workqueue_depth Current depth of workqueue.
# TYPE workqueue_depth gauge
workqueue_depth{name="replicaset"} 3
workqueue_depth{name="deployment"} 2
# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{le="0.001",name="replicaset"} 1
workqueue_queue_duration_seconds_bucket{le="+Inf",name="replicaset"} 4
workqueue_queue_duration_seconds_bucket{le="0.01",name="replicaset"} 3
rest_client_requests_total{code="200",method="GET",host="127.0.0.1:1"} 10
rest_client_requests_total{code="201",method="POST",host="127.0.0.1:1"} 5
rest_client_requests_total{code="409",method="PUT",host="127.0.0.1:1"} 1
rest_client_requests_total{code="200",method="PUT",host="127.0.0.1:1"} 7
odd_label{path="a \"quoted\\ value\",x"} 1.5 1700000000
broken{name="x" 1
up 1
# EOF
"#;

    #[test]
    fn samples_labels_and_sums() {
        let samples = parse(TEXT);
        assert_eq!(samples.len(), 11, "{samples:#?}");
        let depth = sum_by(&samples, "workqueue_depth", "name");
        assert_eq!(depth.get("replicaset"), Some(&3.0));
        assert_eq!(depth.values().sum::<f64>(), 5.0);
        let by_method = sum_by(&samples, "rest_client_requests_total", "method");
        assert_eq!(
            by_method.into_iter().collect::<Vec<_>>(),
            [
                ("GET".to_owned(), 10.0),
                ("POST".to_owned(), 5.0),
                ("PUT".to_owned(), 8.0)
            ]
        );
        let odd = samples
            .iter()
            .find(|s| s.name == "odd_label")
            .expect("escaped label parsed");
        assert_eq!(odd.label("path"), r#"a "quoted\ value",x"#);
        assert_eq!(odd.value, 1.5);
        assert!(
            samples
                .iter()
                .any(|s| s.name == "up" && s.labels.is_empty())
        );
        assert!(!samples.iter().any(|s| s.name == "broken"));
    }

    #[test]
    fn histogram_buckets_sorted_by_bound() {
        let samples = parse(TEXT);
        assert_eq!(
            buckets(
                &samples,
                "workqueue_queue_duration_seconds",
                "name",
                "replicaset"
            ),
            [(0.001, 1.0), (0.01, 3.0), (f64::INFINITY, 4.0)]
        );
        assert!(buckets(&samples, "workqueue_queue_duration_seconds", "name", "x").is_empty());
    }
}
