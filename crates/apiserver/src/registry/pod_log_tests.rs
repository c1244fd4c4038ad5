//! `pods/log`: the options as upstream validates them, the selection and rendering of lines, and a follow that ends when the pod is deleted.

use std::sync::Mutex;

use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::registry::options::WriteOptions;
use crate::storage::MemoryStorage;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_767_225_600 + secs).expect("time")
}

fn lines(n: i64) -> Vec<(Timestamp, String)> {
    (0..n).map(|i| (t(i), format!("line {i}"))).collect()
}

#[test]
fn options_are_validated_as_upstream() {
    let parse = |q: &[(&str, &str)]| {
        PodLogOptions::from_query(|name| q.iter().find(|(k, _)| *k == name).map(|(_, v)| *v))
    };
    let opts = parse(&[
        ("container", "app"),
        ("follow", "true"),
        ("tailLines", "5"),
        ("limitBytes", "10"),
    ])
    .expect("parses");
    assert_eq!(opts.container.as_deref(), Some("app"));
    assert!(opts.follow && !opts.previous);
    assert_eq!((opts.tail_lines, opts.limit_bytes), (Some(5), Some(10)));
    assert!(opts.validate().is_empty());
    assert!(parse(&[("tailLines", "x")]).is_err());
    assert!(parse(&[("follow", "maybe")]).is_err());

    let cases = [
        (
            &[("tailLines", "-1")][..],
            "tailLines: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            &[("limitBytes", "0")][..],
            "limitBytes: Invalid value: 0: must be greater than 0",
        ),
        (
            &[("sinceSeconds", "0")][..],
            "sinceSeconds: Invalid value: 0: must be greater than 0",
        ),
        (
            &[("sinceSeconds", "5"), ("sinceTime", "2026-01-01T00:00:00Z")][..],
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ),
    ];
    for (query, want) in cases {
        let errs = parse(query).expect("parses").validate();
        assert_eq!(errs.len(), 1, "{query:?}");
        assert!(errs[0].to_string().contains(want), "{query:?}: {}", errs[0]);
    }
}

#[test]
fn lines_are_selected_and_rendered() {
    let log = lines(5);
    let now = t(10);
    let all = PodLogOptions::default();
    assert_eq!(
        render(&log, &all, now).concat(),
        "line 0\nline 1\nline 2\nline 3\nline 4\n"
    );
    let tail = PodLogOptions {
        tail_lines: Some(2),
        ..all.clone()
    };
    assert_eq!(render(&log, &tail, now), ["line 3\n", "line 4\n"]);
    let since = PodLogOptions {
        since_seconds: Some(7),
        ..all.clone()
    };
    assert_eq!(render(&log, &since, now), ["line 3\n", "line 4\n"]);
    let since_time = PodLogOptions {
        since_time: Some(t(4)),
        timestamps: true,
        ..all.clone()
    };
    assert_eq!(
        render(&log, &since_time, now),
        ["2026-01-01T00:00:04Z line 4\n"]
    );
    let mut left = Some(8);
    assert_eq!(
        limited("line 0\nline 1\n".into(), &mut left),
        Some(Bytes::from("line 0\nl"))
    );
    assert_eq!(limited("more".into(), &mut left), None);
}

#[test]
fn the_container_defaults_as_upstream() {
    let one = json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "app"}]}});
    assert_eq!(container_name(&one, None).expect("only"), "app");
    let two = json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
    assert_eq!(
        container_name(&two, None).expect_err("ambiguous").message,
        "a container name must be specified for pod web, choose one of: [a b]"
    );
    let mut annotated = two.clone();
    annotated["metadata"]["annotations"] = json!({"kubectl.kubernetes.io/default-container": "b"});
    assert_eq!(container_name(&annotated, None).expect("default"), "b");
    assert_eq!(container_name(&two, Some("a")).expect("named"), "a");
}

/// A line per second since a fixed start, read from the tokio clock.
struct Ticking {
    start: tokio::time::Instant,
    reads: Mutex<usize>,
}

impl LogSource for Ticking {
    fn log(
        &self,
        pod: &Value,
        container: &str,
        _previous: bool,
        _now: Timestamp,
    ) -> std::result::Result<SourceLog, String> {
        *self.reads.lock().expect("reads") += 1;
        if container != "app" {
            return Err(format!(
                "container {container} is not valid for pod {}",
                crate::object::name(pod)
            ));
        }
        let n = i64::try_from(self.start.elapsed().as_secs()).unwrap_or(0);
        Ok(SourceLog {
            lines: lines(n + 1),
            terminated: false,
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_follow_streams_new_lines_and_ends_when_the_pod_is_deleted() {
    let registry = Arc::new(Registry::new(Arc::new(MemoryStorage::new())));
    let opts = WriteOptions::default();
    registry
        .create(
            &crate::resources::namespace::NAMESPACES,
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
            &opts,
        )
        .await
        .expect("namespace");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "x"}]}});
    registry
        .create(&PODS, "default", pod, &opts)
        .await
        .expect("pod");

    let shutdown = CancellationToken::new();
    let refused = registry
        .pod_log("default", "web", PodLogOptions::default(), shutdown.clone())
        .await
        .expect_err("no source registered yet");
    assert_eq!(refused.code, 400);

    registry.logs().set(Arc::new(Ticking {
        start: tokio::time::Instant::now(),
        reads: Mutex::new(0),
    }));
    let bad = registry
        .pod_log(
            "default",
            "web",
            PodLogOptions {
                container: Some("nope".into()),
                ..PodLogOptions::default()
            },
            shutdown.clone(),
        )
        .await
        .expect_err("no such container");
    assert_eq!(
        (bad.code, bad.message.as_str()),
        (400, "container nope is not valid for pod web")
    );

    let answer = registry
        .pod_log(
            "default",
            "web",
            PodLogOptions {
                follow: true,
                ..PodLogOptions::default()
            },
            shutdown.clone(),
        )
        .await
        .expect("log");
    assert_eq!(answer.first, Bytes::from("line 0\n"));
    let mut follow = answer.follow.expect("following");
    tokio::time::advance(Duration::from_millis(1100)).await;
    assert_eq!(follow.next().await, Some(Bytes::from("line 1\n")));

    let now_delete = crate::registry::delete::DeleteOptions {
        grace_period_seconds: Some(0),
        ..crate::registry::delete::DeleteOptions::default()
    };
    registry
        .delete(&PODS, "default", "web", &now_delete)
        .await
        .expect("delete");
    assert_eq!(follow.next().await, None, "the follow ends with the pod");
}
