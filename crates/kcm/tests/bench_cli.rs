//! `kcm bench` as a process on a tiny embedded cluster: it converges, writes valid JSON and an
//! SVG, and removes its temporary data dir; `--soak --kill-every` kills its child cluster and
//! finds every acknowledged write after the restart.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KCM: &str = env!("CARGO_BIN_EXE_kcm");
/// Generous for a debug build on a shared machine; the run itself takes a few seconds.
const DEADLINE: Duration = Duration::from_secs(120);

/// Runs `kcm <args>` with `TMPDIR` set, fails the test if it takes longer than `deadline`;
/// returns its stdout and stderr.
fn run_kcm(args: &[&str], tmp: &std::path::Path, deadline: Duration) -> (String, String) {
    let mut child = Command::new(KCM)
        .args(args)
        .env("TMPDIR", tmp)
        .env_remove("KCM_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kcm");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            panic!("kcm {args:?} did not finish in {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        status.success(),
        "{status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// The bench removes its temporary data dirs.
fn assert_nothing_left(tmp: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(tmp)
        .expect("read TMPDIR")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "temporary data left behind: {left:?}");
}

#[test]
fn a_soak_killed_twice_loses_no_acknowledged_write_and_reads_the_childs_store() {
    let out = tempfile::tempdir().expect("tempdir");
    let tmp = tempfile::tempdir().expect("tempdir for TMPDIR");
    let (json, svg) = (out.path().join("soak.json"), out.path().join("soak.svg"));
    let (json_arg, svg_arg) = (json.display().to_string(), svg.display().to_string());
    let (stdout, stderr) = run_kcm(
        &[
            "bench",
            "--soak",
            "36s",
            "--kill-every",
            "12s",
            "--write-rate",
            "10",
            "--sample-every",
            "4s",
            "--nodes",
            "1",
            "--pod-ready-delay",
            "100ms",
            "--json",
            &json_arg,
            "--svg",
            &svg_arg,
        ],
        tmp.path(),
        Duration::from_secs(240),
    );
    assert!(stdout.contains("kills"), "summary table: {stdout}");
    // Requests cut off by a kill are the soak's to count, not one kube_client error each.
    assert!(
        !stderr.contains("kube_client"),
        "client errors logged: {stderr}"
    );

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written"))
            .expect("valid JSON");
    assert_eq!(report["config"]["mode"], "child", "{report:#}");
    let summary = &report["summary"];
    assert_eq!(summary["restarts"], 2, "{summary:#}");
    assert_eq!(summary["lost_writes"], 0, "{summary:#}");
    assert_eq!(summary["missed_events"], 0, "{summary:#}");
    assert!(
        report["restarts"]
            .as_array()
            .is_some_and(|r| r.iter().all(|r| r["checked"].as_u64() > Some(0))),
        "each restart checked the soak's objects: {report:#}"
    );
    // The child's SQLite file is read for the store's figures, as in-process soaks read
    // their store.
    let samples = report["samples"].as_array().expect("samples");
    assert!(
        samples
            .iter()
            .any(|s| s["live_keys"].as_u64().is_some_and(|n| n > 0)
                && s["stored_value_bytes"].as_u64().is_some_and(|n| n > 0)),
        "no sample read the store: {samples:#?}"
    );
    assert!(
        summary["db_over_stored_max"]
            .as_f64()
            .is_some_and(|r| r > 0.0),
        "{summary:#}"
    );
    assert_nothing_left(tmp.path());
}

#[test]
fn bench_of_two_deployments_converges_and_writes_json_and_svg() {
    let out = tempfile::tempdir().expect("tempdir");
    let tmp = tempfile::tempdir().expect("tempdir for TMPDIR");
    let (json, svg) = (out.path().join("bench.json"), out.path().join("bench.svg"));
    let (json_arg, svg_arg) = (json.display().to_string(), svg.display().to_string());
    let (stdout, stderr) = run_kcm(
        &[
            "bench",
            "--deployments",
            "2",
            "--replicas",
            "2",
            "--nodes",
            "2",
            "--pod-ready-delay",
            "100ms",
            "--timeout",
            "90s",
            "--json",
            &json_arg,
            "--svg",
            &svg_arg,
        ],
        tmp.path(),
        DEADLINE,
    );
    assert!(stdout.contains("4 / 4"), "{stdout}");
    assert!(stderr.contains("pods available"), "progress line: {stderr}");

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written"))
            .expect("valid JSON");
    assert_eq!(report["converged"], true, "{report:#}");
    assert_eq!(report["pods_available"], 4);
    assert_eq!(report["config"]["mode"], "embedded");
    assert!(
        report["time_to_available_seconds"]
            .as_f64()
            .is_some_and(|t| t > 0.0)
    );
    let samples = report["samples"].as_array().expect("samples");
    assert_eq!(
        samples.last().map(|s| &s["available"]),
        Some(&serde_json::json!(4))
    );
    assert!(
        report["process"]["peak_rss_bytes"]
            .as_u64()
            .is_some_and(|b| b > 0)
    );
    let controllers = &report["requests"]["controllers"];
    assert!(
        controllers["POST"].as_u64().is_some_and(|n| n >= 4),
        "pod creates: {controllers}"
    );
    assert!(
        report["requests"]["nodes"]["GET"]
            .as_u64()
            .is_some_and(|n| n > 0)
    );
    let queues: Vec<&str> = report["workqueues"]
        .as_array()
        .expect("workqueues")
        .iter()
        .filter_map(|q| q["name"].as_str())
        .collect();
    for want in ["deployment", "replicaset"] {
        assert!(queues.contains(&want), "{want} in {queues:?}");
    }

    let svg = std::fs::read_to_string(&svg).expect("svg written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("pods available"));

    assert_nothing_left(tmp.path());
}
