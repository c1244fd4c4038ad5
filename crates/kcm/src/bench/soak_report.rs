//! What a soak records: one [`SoakSample`] per sampling window, the [`SoakSummary`] against
//! issue 44's bounds, the JSON document and the SVG plot over time (RSS, database and WAL size,
//! write p99).

use plotters::prelude::*;
use serde::Serialize;

use super::heap::HeapStats;

/// Latencies of one window, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Latencies {
    /// How many were measured.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest.
    pub max: f64,
}

impl Latencies {
    /// The figures of `values` (seconds, any order); zero when empty. Percentiles are the
    /// nearest rank, as a latency SLO reads them.
    pub fn of(values: &mut [f64]) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            let i = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
            values[i - 1]
        };
        Self {
            count: values.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: values[values.len() - 1],
        }
    }
}

/// One sampling window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SoakSample {
    /// Seconds since the soak started, at the window's end.
    pub t: f64,
    /// Resident memory of the measured process, bytes (embedded runs).
    pub rss_bytes: Option<u64>,
    /// Its CPU seconds so far.
    pub cpu_seconds: Option<f64>,
    /// The database file, bytes (SQLite).
    pub db_bytes: Option<u64>,
    /// The write-ahead log, bytes (SQLite).
    pub wal_bytes: Option<u64>,
    /// Objects the soak keeps alive in its namespace and the cluster at the window's end.
    pub live_objects: Option<u64>,
    /// Rows the store holds (every kept revision), when the store tells.
    pub stored_rows: Option<u64>,
    /// Keys the store holds now (every object of the cluster), when the store tells.
    pub live_keys: Option<u64>,
    /// Bytes of every kept version's value: the live data plus the retained revisions, the
    /// size the database file is bounded against.
    pub stored_value_bytes: Option<u64>,
    /// Bytes of the database in use (etcd's `dbSizeInUse`; SQLite's pages less free ones).
    pub db_in_use_bytes: Option<u64>,
    /// Whether the store compacted during the window.
    pub compacted: bool,
    /// The soak's own writes in the window.
    pub writes: Latencies,
    /// Writes that failed in the window.
    pub failed: u64,
    /// Writes not sent in the window because too many were outstanding (the cluster fell
    /// behind the rate).
    pub skipped: u64,
    /// Writes that failed because the server was being killed and restarted (not
    /// acknowledged, so not lost): counted apart from `failed`.
    pub interrupted: u64,
    /// From a write's acknowledgement to its watch event, seconds.
    pub watch_lag: Latencies,
    /// Acknowledged ConfigMap writes the long-lived watch never delivered within a minute.
    pub missed_events: u64,
    /// Sockets the measured process holds open.
    pub sockets: Option<u64>,
    /// The allocator's figures, when the measured process is this one (embedded runs).
    pub heap: Option<HeapStats>,
}

/// The bounds of issue 44 read off the samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SoakSummary {
    /// Seconds of soak.
    pub seconds: f64,
    /// The soak's writes, all windows.
    pub writes: u64,
    /// Failed writes, all windows.
    pub failed: u64,
    /// Writes not sent, all windows.
    pub skipped: u64,
    /// RSS at the first sample after the warm-up, bytes.
    pub rss_after_warmup_bytes: Option<u64>,
    /// The largest RSS after the warm-up relative to the first one (0.05 = 5 % more).
    pub rss_drift: Option<f64>,
    /// The allocator's `allocated` at the first sample after the warm-up, bytes (embedded
    /// runs).
    pub heap_after_warmup_bytes: Option<u64>,
    /// Its largest value after the warm-up relative to that first one: the part of the RSS
    /// drift that is data the program holds.
    pub heap_drift: Option<f64>,
    /// The largest database file seen, bytes.
    pub db_max_bytes: Option<u64>,
    /// The largest WAL seen, bytes.
    pub wal_max_bytes: Option<u64>,
    /// The worst window's write p99, seconds.
    pub write_p99_max: f64,
    /// The worst write p99 among windows with a compaction, seconds.
    pub write_p99_max_compacting: Option<f64>,
    /// The slowest write, seconds.
    pub write_max: f64,
    /// The worst window's watch lag p99, seconds.
    pub watch_lag_p99_max: f64,
    /// Acknowledged writes the watch never delivered, all windows.
    pub missed_events: u64,
    /// Writes cut off by a kill, all windows.
    pub interrupted: u64,
    /// The largest ratio of the database (file, or etcd's `dbSize`) to the values it keeps
    /// (issue 44: at most 3).
    pub db_over_stored_max: Option<f64>,
    /// Kills and restarts of the server.
    pub restarts: usize,
    /// Acknowledged writes not found after a restart, all restarts.
    pub lost_writes: u64,
    /// The longest restart, from the kill to the API answering again, seconds.
    pub restart_max_seconds: Option<f64>,
}

/// One kill and restart of the server (`--kill-every`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Restart {
    /// Seconds since the soak started, at the kill.
    pub t: f64,
    /// From the kill to the API answering again, seconds.
    pub seconds: f64,
    /// Objects whose last acknowledged write was looked for.
    pub checked: u64,
    /// Of those, objects older than their last acknowledged write (or gone).
    pub lost_writes: u64,
}

impl SoakSummary {
    /// Reads the summary off `samples`; RSS drift counts from the first sample at or after
    /// `warmup` seconds.
    pub fn of(samples: &[SoakSample], restarts: &[Restart], warmup: f64) -> Self {
        let after: Vec<&SoakSample> = samples.iter().filter(|s| s.t >= warmup).collect();
        // The first value after the warm-up, and the largest after it relative to the first.
        let drift = |value: fn(&SoakSample) -> Option<u64>| {
            let first = after.iter().find_map(|s| value(s));
            let max = after.iter().filter_map(|s| value(s)).max();
            let drift = first
                .zip(max)
                .filter(|(first, _)| *first > 0)
                .map(|(first, max)| max as f64 / first as f64 - 1.0);
            (first, drift)
        };
        let (rss_first, rss_drift) = drift(|s| s.rss_bytes);
        let (heap_first, heap_drift) = drift(|s| s.heap.map(|h| h.allocated));
        let compacting: Vec<f64> = samples
            .iter()
            .filter(|s| s.compacted)
            .map(|s| s.writes.p99)
            .collect();
        Self {
            seconds: samples.last().map_or(0.0, |s| s.t),
            writes: samples.iter().map(|s| s.writes.count as u64).sum(),
            failed: samples.iter().map(|s| s.failed).sum(),
            skipped: samples.iter().map(|s| s.skipped).sum(),
            rss_after_warmup_bytes: rss_first,
            rss_drift,
            heap_after_warmup_bytes: heap_first,
            heap_drift,
            db_max_bytes: samples.iter().filter_map(|s| s.db_bytes).max(),
            wal_max_bytes: samples.iter().filter_map(|s| s.wal_bytes).max(),
            write_p99_max: samples.iter().map(|s| s.writes.p99).fold(0.0, f64::max),
            write_p99_max_compacting: (!compacting.is_empty())
                .then(|| compacting.iter().copied().fold(0.0, f64::max)),
            write_max: samples.iter().map(|s| s.writes.max).fold(0.0, f64::max),
            watch_lag_p99_max: samples.iter().map(|s| s.watch_lag.p99).fold(0.0, f64::max),
            missed_events: samples.iter().map(|s| s.missed_events).sum(),
            interrupted: samples.iter().map(|s| s.interrupted).sum(),
            db_over_stored_max: samples
                .iter()
                .filter_map(|s| s.db_bytes.zip(s.stored_value_bytes))
                .filter(|(_, stored)| *stored > 0)
                .map(|(db, stored)| db as f64 / stored as f64)
                .reduce(f64::max),
            restarts: restarts.len(),
            lost_writes: restarts.iter().map(|r| r.lost_writes).sum(),
            restart_max_seconds: restarts.iter().map(|r| r.seconds).reduce(f64::max),
        }
    }

    /// The summary as lines for the terminal.
    pub fn table(&self) -> String {
        let mib = |b: Option<u64>| {
            b.map_or("-".to_owned(), |b| {
                format!("{:.1} MiB", b as f64 / 1048576.0)
            })
        };
        let mut out = String::new();
        out.push_str(&format!(
            "  soak                 {:.0} s, {} writes, {} failed, {} not sent\n",
            self.seconds, self.writes, self.failed, self.skipped
        ));
        out.push_str(&format!(
            "  RSS after warm-up    {}  (drift {})\n",
            mib(self.rss_after_warmup_bytes),
            self.rss_drift
                .map_or("-".to_owned(), |d| format!("{:+.1} %", d * 100.0))
        ));
        if self.heap_after_warmup_bytes.is_some() {
            out.push_str(&format!(
                "  heap after warm-up   {}  (drift {})\n",
                mib(self.heap_after_warmup_bytes),
                self.heap_drift
                    .map_or("-".to_owned(), |d| format!("{:+.1} %", d * 100.0))
            ));
        }
        out.push_str(&format!(
            "  database max         {}  (WAL max {})\n",
            mib(self.db_max_bytes),
            mib(self.wal_max_bytes)
        ));
        out.push_str(&format!(
            "  write p99 max        {:.1} ms  (compacting {}, slowest {:.1} ms)\n",
            self.write_p99_max * 1e3,
            self.write_p99_max_compacting
                .map_or("-".to_owned(), |p| format!("{:.1} ms", p * 1e3)),
            self.write_max * 1e3
        ));
        out.push_str(&format!(
            "  database / kept data {}\n",
            self.db_over_stored_max
                .map_or("-".to_owned(), |r| format!("{r:.2}x max"))
        ));
        out.push_str(&format!(
            "  watch lag p99 max    {:.1} ms  ({} acknowledged writes never seen)\n",
            self.watch_lag_p99_max * 1e3,
            self.missed_events
        ));
        if self.restarts > 0 {
            out.push_str(&format!(
                "  kills                {} (longest restart {}), {} acknowledged writes lost, {} writes cut off\n",
                self.restarts,
                self.restart_max_seconds
                    .map_or("-".to_owned(), |s| format!("{s:.1} s")),
                self.lost_writes,
                self.interrupted
            ));
        }
        out
    }
}

/// The soak's configuration as recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SoakConfig {
    /// `embedded` or `kubeconfig`.
    pub mode: String,
    /// Seconds asked for.
    pub duration_seconds: f64,
    /// The soak's own writes per second.
    pub writes_per_second: f64,
    /// Seconds per sample.
    pub sample_seconds: f64,
    /// The store's compaction interval, seconds (embedded).
    pub compaction_interval_seconds: Option<f64>,
    /// Simulated nodes (embedded).
    pub nodes: Option<usize>,
    /// `sqlite` or `etcd` (embedded).
    pub storage: Option<String>,
    /// Seconds between kills of the server (`--kill-every`).
    pub kill_every_seconds: Option<f64>,
    /// How long the cluster keeps events, seconds (embedded; `--event-ttl`).
    pub event_ttl_seconds: Option<f64>,
}

/// The JSON document of a soak.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SoakReport {
    /// What ran.
    pub config: SoakConfig,
    /// The bounds read off the samples.
    pub summary: SoakSummary,
    /// Every window.
    pub samples: Vec<SoakSample>,
    /// Every kill and restart.
    pub restarts: Vec<Restart>,
}

/// Width and height of the SVG, pixels.
const SIZE: (u32, u32) = (960, 900);

/// Renders RSS, database and WAL size, and write p99 over time.
pub fn svg(report: &SoakReport) -> anyhow::Result<String> {
    let mut out = String::new();
    draw(report, &mut out).map_err(|e| anyhow::anyhow!("drawing the plot: {e}"))?;
    Ok(out)
}

type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>, RGBColor);

fn draw(report: &SoakReport, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let s = &report.samples;
    let t_max = s.iter().map(|x| x.t).fold(1.0_f64, f64::max);
    let mib = |b: u64| b as f64 / 1048576.0;
    let panels: [Series<'_>; 4] = [
        (
            "RSS",
            "MiB",
            s.iter()
                .filter_map(|x| x.rss_bytes.map(|b| (x.t, mib(b))))
                .collect(),
            BLUE,
        ),
        (
            "database file",
            "MiB",
            s.iter()
                .filter_map(|x| x.db_bytes.map(|b| (x.t, mib(b))))
                .collect(),
            GREEN,
        ),
        (
            "WAL",
            "MiB",
            s.iter()
                .filter_map(|x| x.wal_bytes.map(|b| (x.t, mib(b))))
                .collect(),
            MAGENTA,
        ),
        (
            "write p99",
            "ms",
            s.iter().map(|x| (x.t, x.writes.p99 * 1e3)).collect(),
            RED,
        ),
    ];
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let c = &report.config;
    let title = format!(
        "kcm bench --soak: {:.0} s at {} writes/s",
        c.duration_seconds, c.writes_per_second
    );
    let (head, body) = root.split_vertically(32);
    head.titled(&title, ("sans-serif", 20))?;
    let areas = body.split_evenly((4, 1));
    for (area, (name, unit, points, color)) in areas.iter().zip(panels) {
        let y_max = points.iter().map(|p| p.1).fold(1.0_f64, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(format!("{name} ({unit})"))
            .draw()?;
        chart.draw_series(LineSeries::new(points, color.stroke_width(2)))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, rss: u64, p99: f64, compacted: bool) -> SoakSample {
        SoakSample {
            t,
            rss_bytes: Some(rss),
            db_bytes: Some(rss / 2),
            wal_bytes: Some(rss / 4),
            compacted,
            writes: Latencies {
                count: 10,
                p50: p99 / 2.0,
                p99,
                max: p99 * 2.0,
            },
            failed: u64::from(compacted),
            // The program's heap is half of RSS, except during the warm-up.
            heap: (t >= 600.0).then_some(HeapStats {
                allocated: rss / 2,
                ..HeapStats::default()
            }),
            ..SoakSample::default()
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut values: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let l = Latencies::of(&mut values);
        assert_eq!((l.count, l.p50, l.p99, l.max), (100, 50.0, 99.0, 100.0));
        let mut one = [0.25];
        assert_eq!(Latencies::of(&mut one).p99, 0.25);
        assert_eq!(Latencies::of(&mut []), Latencies::default());
    }

    #[test]
    fn summary_reads_drift_after_warmup_and_compaction_windows() {
        let samples = [
            sample(300.0, 400, 0.010, false), // warm-up: ignored for drift
            sample(600.0, 100, 0.020, true),
            sample(900.0, 108, 0.005, false),
            sample(1200.0, 104, 0.007, true),
        ];
        let s = SoakSummary::of(&samples, &[], 600.0);
        assert_eq!(s.rss_after_warmup_bytes, Some(100));
        assert!((s.rss_drift.expect("drift") - 0.08).abs() < 1e-9);
        assert_eq!(s.heap_after_warmup_bytes, Some(50));
        assert!((s.heap_drift.expect("heap drift") - 0.08).abs() < 1e-9);
        assert!(
            s.table()
                .contains("heap after warm-up   0.0 MiB  (drift +8.0 %)")
        );
        assert_eq!(s.db_max_bytes, Some(200));
        assert_eq!(s.wal_max_bytes, Some(100));
        assert_eq!(s.write_p99_max, 0.020);
        assert_eq!(s.write_p99_max_compacting, Some(0.020));
        assert_eq!(s.write_max, 0.040);
        assert_eq!((s.writes, s.failed), (40, 2));
        assert_eq!(s.seconds, 1200.0);
        let table = s.table();
        assert!(table.contains("drift +8.0 %"), "{table}");
    }

    #[test]
    fn summary_bounds_the_file_by_the_kept_data_and_sums_restarts() {
        let mut a = sample(10.0, 100, 0.01, false);
        a.db_bytes = Some(3000);
        a.stored_value_bytes = Some(1000);
        a.missed_events = 2;
        let mut b = sample(20.0, 100, 0.01, true);
        b.db_bytes = Some(2000);
        b.stored_value_bytes = Some(1000);
        b.interrupted = 7;
        let mut c = sample(30.0, 100, 0.01, false);
        c.stored_value_bytes = Some(0); // an empty store divides nothing
        let restarts = [
            Restart {
                t: 12.0,
                seconds: 4.5,
                checked: 40,
                lost_writes: 0,
            },
            Restart {
                t: 24.0,
                seconds: 6.0,
                checked: 40,
                lost_writes: 1,
            },
        ];
        let s = SoakSummary::of(&[a, b, c], &restarts, 0.0);
        assert_eq!(s.db_over_stored_max, Some(3.0));
        assert_eq!((s.missed_events, s.interrupted), (2, 7));
        assert_eq!((s.restarts, s.lost_writes), (2, 1));
        assert_eq!(s.restart_max_seconds, Some(6.0));
        let table = s.table();
        assert!(table.contains("3.00x max"), "{table}");
        assert!(
            table.contains("kills                2 (longest restart 6.0 s)"),
            "{table}"
        );
        assert!(table.contains("1 acknowledged writes lost"), "{table}");
        let none = SoakSummary::of(&[], &[], 0.0);
        assert_eq!(
            (none.db_over_stored_max, none.restart_max_seconds),
            (None, None)
        );
        assert!(!none.table().contains("kills"));
    }

    #[test]
    fn plot_has_four_panels() {
        let report = SoakReport {
            config: SoakConfig {
                duration_seconds: 60.0,
                writes_per_second: 50.0,
                ..SoakConfig::default()
            },
            summary: SoakSummary::default(),
            restarts: Vec::new(),
            samples: vec![
                sample(10.0, 1 << 20, 0.01, false),
                sample(20.0, 2 << 20, 0.02, true),
            ],
        };
        let svg = svg(&report).expect("svg");
        for label in [
            "RSS (MiB)",
            "database file (MiB)",
            "WAL (MiB)",
            "write p99 (ms)",
        ] {
            assert!(svg.contains(label), "{label} missing");
        }
    }
}
