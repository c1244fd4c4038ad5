//! Rows of the workload kinds: ReplicaSet, Deployment, DaemonSet, StatefulSet, Job,
//! CronJob, ReplicationController, PodTemplate and ControllerRevision.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::{human_duration, since};
use super::fields::{get, int_at, is_deleting, list_at, name, opt_int_at, str_at, time_at};
use super::labels::{format_label_selector, format_labels, selector_string};

fn age(obj: &Value, now: Timestamp) -> Value {
    json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now))
}

/// Container names and images of a pod spec, comma-separated (upstream's
/// `layoutContainerCells`).
fn container_cells(pod_spec: Option<&Value>) -> (Value, Value) {
    let containers = pod_spec.map(|s| list_at(s, &["containers"])).unwrap_or(&[]);
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (json!(names.join(",")), json!(images.join(",")))
}

/// `spec.replicas`, defaulted to 1 as the API server does for these kinds.
fn desired_replicas(obj: &Value) -> i64 {
    opt_int_at(obj, &["spec", "replicas"]).unwrap_or(1)
}

/// upstream's `printReplicaSet`.
pub(super) fn replica_set(obj: &Value, now: Timestamp) -> Row {
    let (names, images) = container_cells(get(obj, &["spec", "template", "spec"]));
    Row::new(vec![
        json!(name(obj)),
        json!(desired_replicas(obj)),
        json!(int_at(obj, &["status", "replicas"])),
        json!(int_at(obj, &["status", "readyReplicas"])),
        age(obj, now),
        names,
        images,
        json!(format_label_selector(get(obj, &["spec", "selector"]))),
    ])
}

/// upstream's `printReplicationController` (its selector is a plain label map).
pub(super) fn replication_controller(obj: &Value, now: Timestamp) -> Row {
    let (names, images) = container_cells(get(obj, &["spec", "template", "spec"]));
    Row::new(vec![
        json!(name(obj)),
        json!(desired_replicas(obj)),
        json!(int_at(obj, &["status", "replicas"])),
        json!(int_at(obj, &["status", "readyReplicas"])),
        age(obj, now),
        names,
        images,
        json!(format_labels(get(obj, &["spec", "selector"]))),
    ])
}

/// upstream's `printDeployment`.
pub(super) fn deployment(obj: &Value, now: Timestamp) -> Row {
    let (names, images) = container_cells(get(obj, &["spec", "template", "spec"]));
    let selector =
        selector_string(get(obj, &["spec", "selector"])).unwrap_or_else(|()| "<invalid>".into());
    Row::new(vec![
        json!(name(obj)),
        json!(format!(
            "{}/{}",
            int_at(obj, &["status", "readyReplicas"]),
            desired_replicas(obj)
        )),
        json!(int_at(obj, &["status", "updatedReplicas"])),
        json!(int_at(obj, &["status", "availableReplicas"])),
        age(obj, now),
        names,
        images,
        json!(selector),
    ])
}

/// upstream's `printDaemonSet`.
pub(super) fn daemon_set(obj: &Value, now: Timestamp) -> Row {
    let (names, images) = container_cells(get(obj, &["spec", "template", "spec"]));
    Row::new(vec![
        json!(name(obj)),
        json!(int_at(obj, &["status", "desiredNumberScheduled"])),
        json!(int_at(obj, &["status", "currentNumberScheduled"])),
        json!(int_at(obj, &["status", "numberReady"])),
        json!(int_at(obj, &["status", "updatedNumberScheduled"])),
        json!(int_at(obj, &["status", "numberAvailable"])),
        json!(format_labels(get(
            obj,
            &["spec", "template", "spec", "nodeSelector"]
        ))),
        age(obj, now),
        names,
        images,
        json!(format_label_selector(get(obj, &["spec", "selector"]))),
    ])
}

/// upstream's `printStatefulSet`.
pub(super) fn stateful_set(obj: &Value, now: Timestamp) -> Row {
    let (names, images) = container_cells(get(obj, &["spec", "template", "spec"]));
    Row::new(vec![
        json!(name(obj)),
        json!(format!(
            "{}/{}",
            int_at(obj, &["status", "readyReplicas"]),
            desired_replicas(obj)
        )),
        age(obj, now),
        names,
        images,
    ])
}

/// Whether the job has a condition of `ty`; the first one found decides.
fn job_condition(obj: &Value, ty: &str) -> bool {
    list_at(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == ty)
        .is_some_and(|c| str_at(c, &["status"]) == "True")
}

/// upstream's `printJob`.
pub(super) fn job(obj: &Value, now: Timestamp) -> Row {
    let succeeded = int_at(obj, &["status", "succeeded"]);
    let completions = match opt_int_at(obj, &["spec", "completions"]) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match opt_int_at(obj, &["spec", "parallelism"]).unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = time_at(obj, &["status", "startTime"]);
    let completion = time_at(obj, &["status", "completionTime"]);
    let duration = match (start, completion) {
        (None, _) => String::new(),
        (Some(start), None) => since(Some(start), now),
        (Some(start), Some(end)) => human_duration(end.as_nanosecond() - start.as_nanosecond()),
    };
    let status = if job_condition(obj, "Complete") {
        "Complete"
    } else if job_condition(obj, "Failed") {
        "Failed"
    } else if is_deleting(obj) {
        "Terminating"
    } else if job_condition(obj, "Suspended") {
        "Suspended"
    } else if job_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = container_cells(get(obj, &["spec", "template", "spec"]));
    Row::new(vec![
        json!(name(obj)),
        json!(status),
        json!(completions),
        json!(duration),
        age(obj, now),
        names,
        images,
        json!(format_label_selector(get(obj, &["spec", "selector"]))),
    ])
}

/// upstream's `printCronJob`.
pub(super) fn cron_job(obj: &Value, now: Timestamp) -> Row {
    let last_schedule = match time_at(obj, &["status", "lastScheduleTime"]) {
        Some(t) => since(Some(t), now),
        None => "<none>".to_owned(),
    };
    let time_zone = get(obj, &["spec", "timeZone"])
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let suspend = match get(obj, &["spec", "suspend"]).and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let job_spec = get(obj, &["spec", "jobTemplate", "spec"]);
    let (names, images) = container_cells(job_spec.and_then(|s| get(s, &["template", "spec"])));
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "schedule"])),
        json!(time_zone),
        json!(suspend),
        json!(list_at(obj, &["status", "active"]).len()),
        json!(last_schedule),
        age(obj, now),
        names,
        images,
        json!(format_label_selector(
            job_spec.and_then(|s| s.get("selector"))
        )),
    ])
}

/// upstream's `printPodTemplate`.
pub(super) fn pod_template(obj: &Value, _now: Timestamp) -> Row {
    let (names, images) = container_cells(get(obj, &["template", "spec"]));
    Row::new(vec![
        json!(name(obj)),
        names,
        images,
        json!(format_labels(get(obj, &["template", "metadata", "labels"]))),
    ])
}

/// upstream's `printControllerRevision`: the controller as `kind.group/name`.
pub(super) fn controller_revision(obj: &Value, now: Timestamp) -> Row {
    let controller = list_at(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map_or_else(
            || "<none>".to_owned(),
            |r| {
                let group = str_at(r, &["apiVersion"])
                    .rsplit_once('/')
                    .map_or("", |(g, _)| g);
                let kind = str_at(r, &["kind"]);
                let group_kind = if group.is_empty() {
                    kind.to_owned()
                } else {
                    format!("{kind}.{group}")
                };
                format!("{}/{}", group_kind.to_lowercase(), str_at(r, &["name"]))
            },
        );
    Row::new(vec![
        json!(name(obj)),
        json!(controller),
        json!(int_at(obj, &["revision"])),
        age(obj, now),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    fn texts(row: Row) -> Vec<String> {
        row.cells
            .iter()
            .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
            .collect()
    }

    fn template() -> Value {
        json!({"spec": {"containers": [
            {"name": "nginx", "image": "nginx:1.27"},
            {"name": "log", "image": "busybox"}
        ]}})
    }

    #[test]
    fn replica_set_row() {
        let rs = json!({
            "metadata": {"name": "web-5d8f", "creationTimestamp": "2024-05-01T09:00:00Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d8f"}},
                     "template": template()},
            "status": {"replicas": 3, "readyReplicas": 2}
        });
        assert_eq!(
            texts(replica_set(&rs, now())),
            [
                "web-5d8f",
                "3",
                "3",
                "2",
                "3h",
                "nginx,log",
                "nginx:1.27,busybox",
                "app=web,pod-template-hash=5d8f"
            ]
        );
    }

    #[test]
    fn deployment_row() {
        let d = json!({
            "metadata": {"name": "web", "creationTimestamp": "2024-04-29T10:00:00Z"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template()},
            "status": {"readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
        });
        assert_eq!(
            texts(deployment(&d, now())),
            [
                "web",
                "1/1",
                "1",
                "1",
                "2d2h",
                "nginx,log",
                "nginx:1.27,busybox",
                "app=web"
            ]
        );
    }

    #[test]
    fn daemon_set_and_stateful_set_rows() {
        let ds = json!({
            "metadata": {"name": "agent", "creationTimestamp": "2024-05-01T11:59:50Z"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": []}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                       "updatedNumberScheduled": 3, "numberAvailable": 2}
        });
        assert_eq!(
            texts(daemon_set(&ds, now())),
            [
                "agent",
                "3",
                "3",
                "2",
                "3",
                "2",
                "kubernetes.io/os=linux",
                "10s",
                "",
                "",
                "app=agent"
            ]
        );
        let sts = json!({
            "metadata": {"name": "db", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "spec": {"replicas": 3, "template": template()},
            "status": {"readyReplicas": 1}
        });
        assert_eq!(
            texts(stateful_set(&sts, now())),
            ["db", "1/3", "60m", "nginx,log", "nginx:1.27,busybox"]
        );
    }

    #[test]
    fn job_rows() {
        struct Case {
            name: &'static str,
            job: Value,
            want: [&'static str; 3],
        }
        let cases = [
            Case {
                name: "complete",
                job: json!({"spec": {"completions": 1}, "status": {"succeeded": 1,
                    "startTime": "2024-05-01T11:00:00Z", "completionTime": "2024-05-01T11:00:42Z",
                    "conditions": [{"type": "Complete", "status": "True"}]}}),
                want: ["Complete", "1/1", "42s"],
            },
            Case {
                name: "running in parallel",
                job: json!({"spec": {"parallelism": 3}, "status": {"startTime": "2024-05-01T11:57:00Z"}}),
                want: ["Running", "0/1 of 3", "3m"],
            },
            Case {
                name: "not started",
                job: json!({"spec": {}, "status": {}}),
                want: ["Running", "0/1", ""],
            },
            Case {
                name: "suspended",
                job: json!({"spec": {"completions": 2}, "status": {"conditions": [{"type": "Suspended", "status": "True"}]}}),
                want: ["Suspended", "0/2", ""],
            },
        ];
        for case in cases {
            let got = texts(job(&case.job, now()));
            assert_eq!(&got[1..4], case.want, "{}", case.name);
        }
    }

    #[test]
    fn cron_job_and_controller_revision_rows() {
        let cj = json!({
            "metadata": {"name": "nightly", "creationTimestamp": "2024-05-01T00:00:00Z"},
            "spec": {"schedule": "0 0 * * *", "suspend": false,
                     "jobTemplate": {"spec": {"template": template()}}},
            "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": "2024-05-01T00:00:00Z"}
        });
        assert_eq!(
            texts(cron_job(&cj, now()))[..7],
            ["nightly", "0 0 * * *", "<none>", "False", "1", "12h", "12h"]
        );
        let cr = json!({
            "metadata": {"name": "agent-6b9", "creationTimestamp": "2024-05-01T11:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": true}]},
            "revision": 2
        });
        assert_eq!(
            texts(controller_revision(&cr, now())),
            ["agent-6b9", "daemonset.apps/agent", "2", "60m"]
        );
    }
}
