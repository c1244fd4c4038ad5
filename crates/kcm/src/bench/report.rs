//! What `kcm bench` measured: the JSON it writes and the table it prints.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::prometheus::{self, Sample};
use super::quantile::histogram_quantile;

/// The whole result, written as JSON.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// What was run.
    pub config: Config,
    /// Whether every pod became available before the timeout.
    pub converged: bool,
    /// Seconds from the first Deployment create to the last pod available; `None` when the
    /// run timed out.
    pub time_to_available_seconds: Option<f64>,
    /// Seconds the Deployment creates took (the bench's own client, unthrottled).
    pub create_seconds: f64,
    /// Pods available at the end.
    pub pods_available: u64,
    /// Pods expected (`deployments × replicas`).
    pub pods_expected: u64,
    /// `pods_expected / time_to_available_seconds`.
    pub pods_per_second: Option<f64>,
    /// The timeline, one sample per interval.
    pub samples: Vec<TimelineSample>,
    /// CPU and memory of this process (embedded: API server, controllers, scheduler, nodes).
    pub process: ProcessReport,
    /// API requests by component, then HTTP method (client-side `rest_client_requests_total`),
    /// and `apiserver` by verb (the server's `apiserver_request_total`).
    pub requests: BTreeMap<String, BTreeMap<String, u64>>,
    /// Work queues that processed anything, busiest first.
    pub workqueues: Vec<QueueReport>,
}

/// The run's parameters.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// `embedded` (an in-process `kcm up`) or `kubeconfig`.
    pub mode: String,
    /// Deployments created.
    pub deployments: u32,
    /// Replicas of each.
    pub replicas: u32,
    /// Simulated nodes (embedded only).
    pub nodes: Option<usize>,
    /// The embedded controllers' `--kube-api-qps` (embedded only).
    pub kube_api_qps: Option<f32>,
    /// The embedded controllers' `--kube-api-burst` (embedded only).
    pub kube_api_burst: Option<u32>,
    /// The simulated pods' ready delay in seconds (embedded only).
    pub pod_ready_delay_seconds: Option<f64>,
}

/// One point of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimelineSample {
    /// Seconds since the first create.
    pub t: f64,
    /// Pods available (the Deployments' `status.availableReplicas`, summed).
    pub available: u64,
    /// Items waiting in every controller work queue, summed (`workqueue_depth`); `None`
    /// when the controllers are not in this process.
    pub queue_depth: Option<u64>,
    /// Resident memory of this process, bytes.
    pub rss_bytes: Option<u64>,
}

/// CPU and memory over the run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ProcessReport {
    /// CPU seconds from the first create to convergence (or timeout).
    pub cpu_seconds: f64,
    /// Resident memory once the cluster was up, before the workload, bytes.
    pub rss_before_bytes: u64,
    /// Resident memory at the end, bytes.
    pub rss_after_bytes: u64,
    /// Peak resident memory of the process's life (`VmHWM`), bytes.
    pub peak_rss_bytes: u64,
}

/// One work queue's totals and latency percentiles (seconds, interpolated inside the
/// queue metrics' decade buckets).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueReport {
    /// The queue's name (`workqueue_*{name}`).
    pub name: String,
    /// Items added (`workqueue_adds_total`).
    pub adds: u64,
    /// Requeues with rate limiting (`workqueue_retries_total`).
    pub retries: u64,
    /// Largest depth seen in the samples.
    pub max_depth: u64,
    /// Time in the queue before a worker took it (`workqueue_queue_duration_seconds`).
    pub wait_p50: Option<f64>,
    /// 90th percentile of the wait.
    pub wait_p90: Option<f64>,
    /// 99th percentile of the wait.
    pub wait_p99: Option<f64>,
    /// Time a worker held it (one sync, `workqueue_work_duration_seconds`).
    pub work_p50: Option<f64>,
    /// 90th percentile of the sync.
    pub work_p90: Option<f64>,
    /// 99th percentile of the sync.
    pub work_p99: Option<f64>,
}

/// Requests by HTTP method from `rest_client_requests_total` samples.
pub fn requests_by_method(samples: &[Sample]) -> BTreeMap<String, u64> {
    prometheus::sum_by(samples, "rest_client_requests_total", "method")
        .into_iter()
        .filter(|(_, n)| *n > 0.0)
        .map(|(method, n)| (method, n as u64))
        .collect()
}

/// The work queues of `samples` that added anything, busiest first; `max_depth` by name.
pub fn queues(samples: &[Sample], max_depth: &BTreeMap<String, u64>) -> Vec<QueueReport> {
    let adds = prometheus::sum_by(samples, "workqueue_adds_total", "name");
    let retries = prometheus::sum_by(samples, "workqueue_retries_total", "name");
    let mut out: Vec<QueueReport> = adds
        .into_iter()
        .filter(|(_, n)| *n > 0.0)
        .map(|(name, n)| {
            let wait =
                prometheus::buckets(samples, "workqueue_queue_duration_seconds", "name", &name);
            let work =
                prometheus::buckets(samples, "workqueue_work_duration_seconds", "name", &name);
            QueueReport {
                adds: n as u64,
                retries: retries.get(&name).copied().unwrap_or(0.0) as u64,
                max_depth: max_depth.get(&name).copied().unwrap_or(0),
                wait_p50: histogram_quantile(0.5, &wait),
                wait_p90: histogram_quantile(0.9, &wait),
                wait_p99: histogram_quantile(0.99, &wait),
                work_p50: histogram_quantile(0.5, &work),
                work_p90: histogram_quantile(0.9, &work),
                work_p99: histogram_quantile(0.99, &work),
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| b.adds.cmp(&a.adds).then_with(|| a.name.cmp(&b.name)));
    out
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn duration(seconds: Option<f64>) -> String {
    match seconds {
        None => "-".to_owned(),
        Some(s) if s < 1e-3 => format!("{:.0}µs", s * 1e6),
        Some(s) if s < 1.0 => format!("{:.1}ms", s * 1e3),
        Some(s) => format!("{s:.2}s"),
    }
}

impl Report {
    /// The human-readable summary `kcm bench` prints.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let c = &self.config;
        let _ = writeln!(
            out,
            "kcm bench: {} Deployments x {} replicas{} ({})",
            c.deployments,
            c.replicas,
            c.nodes
                .map(|n| format!(" on {n} simulated nodes"))
                .unwrap_or_default(),
            c.mode
        );
        let time = match self.time_to_available_seconds {
            Some(t) => format!("{t:.2} s"),
            None => "did not converge".to_owned(),
        };
        let rows = [
            (
                "pods available",
                format!("{} / {}", self.pods_available, self.pods_expected),
            ),
            ("time to all available", time),
            (
                "pods per second",
                self.pods_per_second
                    .map(|r| format!("{r:.0}"))
                    .unwrap_or_else(|| "-".to_owned()),
            ),
            (
                "creating the Deployments",
                format!("{:.2} s", self.create_seconds),
            ),
            (
                "CPU (this process)",
                format!("{:.2} s", self.process.cpu_seconds),
            ),
            (
                "resident memory before / after",
                format!(
                    "{:.0} MiB / {:.0} MiB",
                    mib(self.process.rss_before_bytes),
                    mib(self.process.rss_after_bytes)
                ),
            ),
            (
                "peak resident memory",
                format!("{:.0} MiB", mib(self.process.peak_rss_bytes)),
            ),
        ];
        for (name, value) in rows {
            let _ = writeln!(out, "  {name:<32} {value}");
        }
        if !self.requests.is_empty() {
            let _ = writeln!(out, "\n  API requests (client side)");
            for (component, methods) in &self.requests {
                let total: u64 = methods.values().sum();
                let detail: Vec<String> = methods.iter().map(|(m, n)| format!("{m} {n}")).collect();
                let _ = writeln!(out, "  {component:<12} {total:>8}  {}", detail.join(", "));
            }
        }
        if !self.workqueues.is_empty() {
            let _ = writeln!(
                out,
                "\n  {:<34} {:>7} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9}",
                "work queue",
                "adds",
                "retries",
                "depth",
                "wait p50",
                "wait p99",
                "sync p50",
                "sync p99"
            );
            for q in &self.workqueues {
                let _ = writeln!(
                    out,
                    "  {:<34} {:>7} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9}",
                    q.name,
                    q.adds,
                    q.retries,
                    q.max_depth,
                    duration(q.wait_p50),
                    duration(q.wait_p99),
                    duration(q.work_p50),
                    duration(q.work_p99)
                );
            }
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const METRICS: &str = r#"workqueue_adds_total{name="replicaset"} 30
workqueue_adds_total{name="deployment"} 10
workqueue_adds_total{name="idle"} 0
workqueue_retries_total{name="replicaset"} 2
workqueue_queue_duration_seconds_bucket{le="0.001",name="replicaset"} 10
workqueue_queue_duration_seconds_bucket{le="0.01",name="replicaset"} 30
workqueue_queue_duration_seconds_bucket{le="+Inf",name="replicaset"} 30
workqueue_work_duration_seconds_bucket{le="0.01",name="replicaset"} 30
workqueue_work_duration_seconds_bucket{le="+Inf",name="replicaset"} 30
rest_client_requests_total{code="201",method="POST",host="h"} 12
rest_client_requests_total{code="409",method="PUT",host="h"} 0
"#;

    pub(crate) fn sample_report() -> Report {
        let samples = prometheus::parse(METRICS);
        Report {
            config: Config {
                mode: "embedded".to_owned(),
                deployments: 2,
                replicas: 3,
                nodes: Some(2),
                kube_api_qps: Some(1000.0),
                kube_api_burst: Some(2000),
                pod_ready_delay_seconds: Some(1.0),
            },
            converged: true,
            time_to_available_seconds: Some(2.0),
            create_seconds: 0.01,
            pods_available: 6,
            pods_expected: 6,
            pods_per_second: Some(3.0),
            samples: vec![
                TimelineSample {
                    t: 0.0,
                    available: 0,
                    queue_depth: Some(4),
                    rss_bytes: Some(1 << 20),
                },
                TimelineSample {
                    t: 2.0,
                    available: 6,
                    queue_depth: Some(0),
                    rss_bytes: Some(2 << 20),
                },
            ],
            process: ProcessReport {
                cpu_seconds: 1.5,
                rss_before_bytes: 50 << 20,
                rss_after_bytes: 60 << 20,
                peak_rss_bytes: 70 << 20,
            },
            requests: BTreeMap::from([("controllers".to_owned(), requests_by_method(&samples))]),
            workqueues: queues(&samples, &BTreeMap::from([("replicaset".to_owned(), 7)])),
        }
    }

    #[test]
    fn queues_with_work_busiest_first_with_percentiles() {
        let report = sample_report();
        let names: Vec<&str> = report.workqueues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["replicaset", "deployment"]);
        let rs = &report.workqueues[0];
        assert_eq!((rs.adds, rs.retries, rs.max_depth), (30, 2, 7));
        let p50 = rs.wait_p50.expect("wait p50");
        assert!((p50 - 0.00325).abs() < 1e-9, "{p50}");
        let p99 = rs.work_p99.expect("work p99");
        assert!((p99 - 0.0099).abs() < 1e-9, "{p99}");
        assert_eq!(report.workqueues[1].wait_p50, None, "no histogram samples");
    }

    #[test]
    fn json_shape() {
        let json = serde_json::to_value(sample_report()).expect("serializes");
        assert_eq!(json["config"]["deployments"], 2);
        assert_eq!(json["converged"], true);
        assert_eq!(json["time_to_available_seconds"], 2.0);
        assert_eq!(json["samples"][1]["available"], 6);
        assert_eq!(json["samples"][0]["queue_depth"], 4);
        assert_eq!(json["process"]["peak_rss_bytes"], 70 << 20);
        assert_eq!(
            json["requests"]["controllers"],
            serde_json::json!({"POST": 12}),
            "methods without requests are left out"
        );
        assert_eq!(json["workqueues"][0]["name"], "replicaset");
        assert!(json["workqueues"][0]["wait_p99"].is_f64());
    }

    #[test]
    fn table_names_the_figures() {
        let table = sample_report().table();
        for want in [
            "2 Deployments x 3 replicas on 2 simulated nodes (embedded)",
            "6 / 6",
            "2.00 s",
            "peak resident memory             70 MiB",
            "controllers        12  POST 12",
            "replicaset",
        ] {
            assert!(table.contains(want), "{want:?} missing from\n{table}");
        }
    }
}
