//! `kcm bench` as a process on a tiny embedded cluster: it converges, writes valid JSON and an
//! SVG, and removes its temporary data dir.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KCM: &str = env!("CARGO_BIN_EXE_kcm");
/// Generous for a debug build on a shared machine; the run itself takes a few seconds.
const DEADLINE: Duration = Duration::from_secs(120);

#[test]
fn bench_of_two_deployments_converges_and_writes_json_and_svg() {
    let out = tempfile::tempdir().expect("tempdir");
    let tmp = tempfile::tempdir().expect("tempdir for TMPDIR");
    let (json, svg) = (out.path().join("bench.json"), out.path().join("bench.svg"));
    let mut child = Command::new(KCM)
        .args([
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
        ])
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kcm bench");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("kcm bench did not finish in {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        status.success(),
        "{status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
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

    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("read TMPDIR")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "temporary data left behind: {left:?}");
}
