//! batch/v1 jobs and cronjobs over HTTP: generated selectors and labels, defaults, immutable templates, schedules and time zones, orphaning by default.

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{lifecycle, status_of, timed, with_warnings};

fn job(name: &str, extra: Value) -> Job {
    let mut spec = json!({"template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "pi", "image": "perl:5.34", "command": ["perl", "-e", "print 1"]}]}}});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("job")
}

#[tokio::test]
async fn jobs_get_upstreams_defaults_and_a_generated_selector() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Job> = Api::namespaced(server.client(), "default");
        let (created, patched, applied) = lifecycle(
            &api,
            &job("pi", json!({"suspend": true})),
            json!({"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}}),
            json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "pi", "namespace": "default", "labels": {"team": "a"}},
                "spec": {"suspend": false}}),
        )
        .await;
        let uid = created.metadata.uid.clone().expect("uid");
        let spec = created.spec.clone().expect("spec");
        assert_eq!(spec.backoff_limit, Some(6));
        assert_eq!(spec.completions, Some(1));
        assert_eq!(spec.parallelism, Some(1));
        assert_eq!(spec.completion_mode.as_deref(), Some("NonIndexed"));
        assert_eq!(spec.manual_selector, Some(false));
        assert_eq!(spec.pod_replacement_policy.as_deref(), Some("TerminatingOrFailed"));
        assert_eq!(
            serde_json::to_value(&spec.selector).expect("selector"),
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        );
        let labels = spec.template.metadata.expect("template metadata").labels.expect("labels");
        assert_eq!(labels["controller-uid"], uid);
        assert_eq!(labels["batch.kubernetes.io/job-name"], "pi");
        assert_eq!(created.metadata.labels.expect("job labels")["job-name"], "pi");
        assert!(created.status.is_none());
        assert_eq!(
            patched.spec.and_then(|s| s.template.spec).and_then(|s| s.node_selector).expect("node selector")["disk"],
            "ssd",
            "a suspended job that never started may move its pods"
        );
        assert_eq!(applied.spec.and_then(|s| s.suspend), Some(false));

        let (code, _, message) = status_of(
            api.patch(
                "pi",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "pi", "image": "perl:5.36"}]}}}})),
            )
            .await
            .expect_err("the template is immutable"),
        );
        assert_eq!(code, 422);
        assert!(message.contains("spec.template: Invalid value"), "{message}");
        assert!(message.ends_with("field is immutable"), "{message}");

        let status = api
            .patch_status(
                "pi",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"patchedstatus": "true"}},
                    "status": {"active": 1, "startTime": "2024-05-01T00:00:00Z"}})),
            )
            .await
            .expect("status");
        // The annotation goes through /status too: upstream's status strategy resets only
        // the spec.
        assert_eq!(
            status
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("patchedstatus"))
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(status.status.and_then(|s| s.active), Some(1));

        let (code, _, message) = status_of(
            api.create(
                &PostParams::default(),
                &job("bad", json!({"backoffLimitPerIndex": 1, "template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox"}]}}})),
            )
            .await
            .expect_err("invalid"),
        );
        assert_eq!(code, 422);
        assert_eq!(
            message,
            "Job.batch \"bad\" is invalid: [spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode, spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"]"
        );

        // batch/v1 Jobs orphan their pods unless the delete says otherwise (kubectl says
        // Background), and the API says so.
        let (code, kept, warnings) = with_warnings(
            &server.client(),
            "DELETE",
            "/apis/batch/v1/namespaces/default/jobs/pi",
        )
        .await;
        assert_eq!(code, 200, "{kept}");
        assert_eq!(kept["metadata"]["finalizers"], json!(["orphan"]));
        assert_eq!(
            warnings,
            ["299 - \"child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning\""]
        );
        let gone = api
            .create(&PostParams::default(), &job("gone", json!({})))
            .await
            .expect("create");
        assert!(gone.metadata.uid.is_some());
        assert!(
            api.delete("gone", &DeleteParams::background())
                .await
                .expect("delete")
                .is_right(),
            "a background delete removes the job now"
        );
    })
    .await;
}

#[tokio::test]
async fn cron_jobs_default_and_validate_schedules_and_time_zones() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<CronJob> = Api::namespaced(server.client(), "default");
        let cron = |name: &str, schedule: &str, zone: Option<&str>| -> CronJob {
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"schedule": schedule, "timeZone": zone, "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}
            }))
            .expect("cronjob")
        };
        let (created, patched, _) = lifecycle(
            &api,
            &cron("nightly", "0 3 * * *", Some("Europe/Paris")),
            json!({"spec": {"suspend": true}}),
            json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "nightly", "namespace": "default"},
                "spec": {"schedule": "30 3 * * *"}}),
        )
        .await;
        let spec = created.spec;
        assert_eq!(spec.concurrency_policy.as_deref(), Some("Allow"));
        assert_eq!(spec.suspend, Some(false));
        assert_eq!(spec.successful_jobs_history_limit, Some(3));
        assert_eq!(spec.failed_jobs_history_limit, Some(1));
        assert_eq!(patched.spec.suspend, Some(true));

        // A /status write keeps the metadata it carries, as upstream's status strategy
        // (only the spec is reset).
        let status = api
            .patch_status(
                "nightly",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"patchedstatus": "true"}},
                    "spec": {"suspend": false},
                    "status": {"lastScheduleTime": "2024-05-01T03:00:00Z"}})),
            )
            .await
            .expect("status patch");
        assert_eq!(
            status
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("patchedstatus"))
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(status.spec.suspend, Some(true), "the spec is not the status's");
        assert!(status.status.and_then(|s| s.last_schedule_time).is_some());

        for (name, schedule, zone, want) in [
            (
                "fields",
                "* * *",
                None,
                "spec.schedule: Invalid value: \"* * *\": expected exactly 5 fields, found 3: [* * *]",
            ),
            (
                "zone",
                "@daily",
                Some("Mars/Olympus"),
                "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus",
            ),
            (
                "tz",
                "CRON_TZ=UTC 0 0 * * *",
                None,
                "spec.schedule: Invalid value: \"CRON_TZ=UTC 0 0 * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ),
        ] {
            let (code, _, message) = status_of(
                api.create(&PostParams::default(), &cron(name, schedule, zone))
                    .await
                    .expect_err(name),
            );
            assert_eq!(code, 422, "{name}");
            assert_eq!(message, format!("CronJob.batch \"{name}\" is invalid: {want}"), "{name}");
        }
    })
    .await;
}

/// As upstream's `jobStatusStrategy` (the e2e "should apply changes to a job status"): a
/// `/status` patch keeps the spec but applies its metadata, and a `/status` update of what
/// was read keeps the rest.
#[tokio::test]
async fn job_status_writes_apply_their_metadata_but_not_the_spec() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Job> = Api::namespaced(server.client(), "default");
        api.create(&PostParams::default(), &job("pi", json!({"suspend": true})))
            .await
            .expect("create");
        let condition = json!({"type": "Custom", "status": "True",
            "lastTransitionTime": "2026-01-01T00:00:00Z"});
        let patched = api
            .patch_status(
                "pi",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {"patchedstatus": "true"},
                    "labels": {"team": "a"}}, "spec": {"parallelism": 5},
                    "status": {"conditions": [condition]}}),
                ),
            )
            .await
            .expect("patch status");
        let annotations = patched.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get("patchedstatus").map(String::as_str),
            Some("true")
        );
        let labels = patched.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(labels.get("job-name").map(String::as_str), Some("pi"));
        assert_eq!(patched.spec.as_ref().and_then(|s| s.parallelism), Some(1));
        let conditions = patched.status.as_ref().and_then(|s| s.conditions.clone());
        assert_eq!(
            conditions.map(|c| c[0].type_.clone()).as_deref(),
            Some("Custom")
        );

        let mut read = api.get("pi").await.expect("get");
        read.metadata.annotations = None;
        let updated = api
            .replace_status("pi", &PostParams::default(), &read)
            .await
            .expect("update status");
        assert_eq!(
            updated.metadata.annotations, None,
            "the update's metadata is taken"
        );
        assert_eq!(updated.metadata.uid, patched.metadata.uid);
        assert_eq!(updated.metadata.generation, patched.metadata.generation);
    })
    .await;
}
