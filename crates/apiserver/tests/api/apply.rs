//! Server-side apply over HTTP: create, re-apply dropping fields, conflicts, force, update tracking.

use kcm_apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::common::{raw, timed};

const PATH: &str = "/api/v1/namespaces/default/configmaps/cfg";
const APPLY: &str = "application/apply-patch+yaml";

fn config(data: &str, labels: &str) -> Vec<u8> {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  labels: {labels}\ndata: {data}\n"
    )
    .into_bytes()
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").to_owned(),
                        e["operation"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn apply_creates_merges_conflicts_and_forces() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let (code, created) = raw(
            &client,
            "PATCH",
            &format!("{PATH}?fieldManager=alice"),
            APPLY,
            config("{a: '1', b: '2'}", "{x: z}"),
        )
        .await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(created["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(managers(&created), [("alice".to_owned(), "Apply".to_owned())]);
        assert_eq!(
            created["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:x": {}}}})
        );

        // Re-applying without b removes it; a merge patch by someone else is recorded.
        let (code, reapplied) = raw(
            &client,
            "PATCH",
            &format!("{PATH}?fieldManager=alice"),
            APPLY,
            config("{a: '1'}", "{x: z}"),
        )
        .await;
        assert_eq!(code, 200, "{reapplied}");
        assert_eq!(reapplied["data"], json!({"a": "1"}));
        let (code, patched) = raw(
            &client,
            "PATCH",
            &format!("{PATH}?fieldManager=bob"),
            "application/merge-patch+json",
            br#"{"data": {"a": "changed", "c": "3"}}"#.to_vec(),
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(
            managers(&patched),
            [
                ("alice".to_owned(), "Apply".to_owned()),
                ("bob".to_owned(), "Update".to_owned())
            ]
        );

        // alice setting a back conflicts with bob, who owns it now.
        let (code, status) = raw(
            &client,
            "PATCH",
            &format!("{PATH}?fieldManager=alice"),
            APPLY,
            config("{a: '1'}", "{x: z}"),
        )
        .await;
        assert_eq!(code, 409, "{status}");
        assert_eq!(
            status["message"],
            r#"Apply failed with 1 conflict: conflict with "bob" using v1: .data.a"#
        );
        assert_eq!(status["details"]["causes"][0]["reason"], "FieldManagerConflict");
        assert_eq!(status["details"]["causes"][0]["field"], ".data.a");

        let (code, forced) = raw(
            &client,
            "PATCH",
            &format!("{PATH}?fieldManager=alice&force=true"),
            APPLY,
            config("{a: '1'}", "{x: z}"),
        )
        .await;
        assert_eq!(code, 200, "{forced}");
        // c stays: bob owns it.
        assert_eq!(forced["data"], json!({"a": "1", "c": "3"}));

        let (code, status) = raw(
            &client,
            "PATCH",
            &format!("{PATH}?fieldManager=alice"),
            APPLY,
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\nspec: {}\n".to_vec(),
        )
        .await;
        assert_eq!(code, 500);
        assert_eq!(
            status["message"],
            "failed to create typed patch object (default/cfg; v1, Kind=ConfigMap): .spec: field not declared in schema"
        );
        let (code, status) = raw(
            &client,
            "PATCH",
            &format!("{PATH}?fieldManager=alice"),
            APPLY,
            b"apiVersion: apps/v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n".to_vec(),
        )
        .await;
        assert_eq!(code, 400, "{status}");
    })
    .await;
}

#[tokio::test]
async fn first_apply_to_an_untracked_object_conflicts_with_before_first_apply() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let (code, _) = raw(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            br#"{"metadata": {"name": "cfg"}, "data": {"a": "0"}}"#.to_vec(),
        )
        .await;
        assert_eq!(code, 201);
        let (code, status) = raw(
            &client,
            "PATCH",
            &format!("{PATH}?fieldManager=alice"),
            APPLY,
            config("{a: '1'}", "{}"),
        )
        .await;
        assert_eq!(code, 409, "{status}");
        assert_eq!(
            status["message"],
            r#"Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a"#
        );
        // Agreeing with the live value shares ownership instead.
        let (code, obj) = raw(
            &client,
            "PATCH",
            &format!("{PATH}?fieldManager=alice"),
            APPLY,
            config("{a: '0', b: '1'}", "{}"),
        )
        .await;
        assert_eq!(code, 200, "{obj}");
        assert_eq!(obj["data"], json!({"a": "0", "b": "1"}));
    })
    .await;
}
