//! The `AdmissionReview` sent to a webhook and the checks of the one it answers, as upstream's `request/admissionreview.go` (`CreateV1AdmissionReview`, `VerifyAdmissionResponse`).

use base64::Engine;
use serde_json::{Value, json};

use crate::admission::attributes::Attributes;

/// The `AdmissionReview` versions kcm speaks, in the order a webhook's
/// `admissionReviewVersions` is searched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// `admission.k8s.io/v1`: the response's uid and apiVersion are checked.
    V1,
    /// `admission.k8s.io/v1beta1`: the same shape, checked loosely (as upstream).
    V1beta1,
}

impl Version {
    /// The first version of `versions` kcm speaks (upstream's `CreateAdmissionObjects`).
    pub fn choose(versions: &[String]) -> Option<Self> {
        versions.iter().find_map(|v| match v.as_str() {
            "v1" => Some(Version::V1),
            "v1beta1" => Some(Version::V1beta1),
            _ => None,
        })
    }

    /// The review's `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            Version::V1 => "admission.k8s.io/v1",
            Version::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// The webhook's answer, checked.
#[derive(Debug, Default, PartialEq)]
pub struct Response {
    /// `response.allowed`.
    pub allowed: bool,
    /// `response.result`: the Status explaining a denial.
    pub status: Option<Value>,
    /// `response.patch`, decoded (mutating webhooks only; always a JSON patch).
    pub patch: Option<Vec<u8>>,
    /// `response.warnings`.
    pub warnings: Vec<String>,
}

/// The review body sent: `request` (from [`Attributes::admission_request`]) with the objects
/// added.
pub fn body(version: Version, mut request: Value, a: &Attributes<'_>) -> Vec<u8> {
    if let Some(obj) = a.object.as_ref() {
        request["object"] = obj.clone();
    }
    if let Some(old) = a.old_object {
        request["oldObject"] = old.clone();
    }
    let review = json!({
        "apiVersion": version.api_version(),
        "kind": "AdmissionReview",
        "request": request,
    });
    // Serializing a `Value` cannot fail.
    serde_json::to_vec(&review).unwrap_or_default()
}

/// Decodes and checks a webhook's answer (upstream's `VerifyAdmissionResponse`); the error is
/// the reason the response is invalid.
pub fn verify(
    body: &[u8],
    uid: &str,
    version: Version,
    mutating: bool,
) -> Result<Response, String> {
    let review: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let patch_text = response.get("patch").and_then(Value::as_str).unwrap_or("");
    let patch_type = response.get("patchType").filter(|t| !t.is_null());
    if version == Version::V1 {
        let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or("");
        if got_uid != uid {
            return Err(format!("expected response.uid={uid:?}, got {got_uid:?}"));
        }
        let api_version = review
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = review.get("kind").and_then(Value::as_str).unwrap_or("");
        if api_version != Version::V1.api_version() || kind != "AdmissionReview" {
            let got = match api_version.split_once('/') {
                Some((group, v)) => format!("{group}/{v}, Kind={kind}"),
                None => format!("/{api_version}, Kind={kind}"),
            };
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}"
            ));
        }
        if mutating {
            if !patch_text.is_empty() && patch_type.is_none() {
                return Err("webhook returned response.patch but not response.patchType".to_owned());
            }
            if patch_text.is_empty() && patch_type.is_some() {
                return Err("webhook returned response.patchType but not response.patch".to_owned());
            }
            if let Some(t) = patch_type {
                let t = t.as_str().unwrap_or("");
                if t != "JSONPatch" {
                    return Err(format!(
                        "webhook returned invalid response.patchType of {t:?}"
                    ));
                }
            }
        } else {
            if !patch_text.is_empty() {
                return Err("validating webhook may not return response.patch".to_owned());
            }
            if patch_type.is_some() {
                return Err("validating webhook may not return response.patchType".to_owned());
            }
        }
    }
    let patch = if mutating && !patch_text.is_empty() {
        Some(
            base64::engine::general_purpose::STANDARD
                .decode(patch_text)
                .map_err(|e| format!("response.patch is not base64: {e}"))?,
        )
    } else {
        None
    };
    Ok(Response {
        allowed: response
            .get("allowed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        status: response.get("status").filter(|s| s.is_object()).cloned(),
        patch,
        warnings: response
            .get("warnings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::attributes::Operation;
    use crate::auth::user::UserInfo;
    use crate::resources::pod::PODS;

    #[test]
    fn the_request_carries_upstreams_fields() {
        let user = UserInfo::admin();
        let old = json!({"metadata": {"name": "p"}, "spec": {"old": true}});
        let a = Attributes::new(
            Operation::Update,
            &PODS,
            "ns",
            "p",
            Some(json!({"metadata": {"name": "p"}})),
            &user,
        )
        .with_subresource("status")
        .with_old_object(Some(&old))
        .with_dry_run(true);
        let req = a.admission_request("u-1");
        assert_eq!(req["uid"], "u-1");
        assert_eq!(
            req["kind"],
            json!({"group": "", "version": "v1", "kind": "Pod"})
        );
        assert_eq!(
            req["resource"],
            json!({"group": "", "version": "v1", "resource": "pods"})
        );
        assert_eq!(req["subResource"], "status");
        assert_eq!(req["requestSubResource"], "status");
        assert_eq!(req["operation"], "UPDATE");
        assert_eq!(req["userInfo"]["username"], "kubernetes-admin");
        assert_eq!(req["dryRun"], true);
        assert_eq!(req["options"]["kind"], "UpdateOptions");
        assert_eq!(req["options"]["dryRun"], json!(["All"]));
        let review: Value = serde_json::from_slice(&body(Version::V1, req, &a)).expect("json");
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
        assert_eq!(review["request"]["oldObject"]["spec"]["old"], true);
        assert_eq!(review["request"]["object"]["metadata"]["name"], "p");
    }

    #[test]
    fn versions_are_chosen_in_the_webhooks_order() {
        let v = |list: &[&str]| {
            Version::choose(&list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
        };
        assert_eq!(v(&["v2", "v1beta1", "v1"]), Some(Version::V1beta1));
        assert_eq!(v(&["v1"]), Some(Version::V1));
        assert_eq!(v(&["v2"]), None);
    }

    /// As upstream's `TestVerifyAdmissionResponse` table.
    #[test]
    fn responses_are_checked_as_upstream() {
        struct Case {
            name: &'static str,
            body: Value,
            version: Version,
            mutating: bool,
            want: Result<(), &'static str>,
        }
        let ok = |extra: Value| {
            let mut r = json!({"uid": "u", "allowed": true});
            if let (Some(r), Some(extra)) = (r.as_object_mut(), extra.as_object()) {
                r.extend(extra.clone());
            }
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r})
        };
        let cases = [
            Case {
                name: "allowed",
                body: ok(json!({})),
                version: Version::V1,
                mutating: false,
                want: Ok(()),
            },
            Case {
                name: "absent response",
                body: json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
                version: Version::V1,
                mutating: false,
                want: Err("webhook response was absent"),
            },
            Case {
                name: "wrong uid",
                body: ok(json!({"uid": "other"})),
                version: Version::V1,
                mutating: false,
                want: Err("expected response.uid=\"u\", got \"other\""),
            },
            Case {
                name: "wrong apiVersion",
                body: json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                    "response": {"uid": "u", "allowed": true}}),
                version: Version::V1,
                mutating: false,
                want: Err(
                    "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview",
                ),
            },
            Case {
                name: "a validating webhook may not patch",
                body: ok(json!({"patch": "W10=", "patchType": "JSONPatch"})),
                version: Version::V1,
                mutating: false,
                want: Err("validating webhook may not return response.patch"),
            },
            Case {
                name: "a patch needs its type",
                body: ok(json!({"patch": "W10="})),
                version: Version::V1,
                mutating: true,
                want: Err("webhook returned response.patch but not response.patchType"),
            },
            Case {
                name: "a type needs its patch",
                body: ok(json!({"patchType": "JSONPatch"})),
                version: Version::V1,
                mutating: true,
                want: Err("webhook returned response.patchType but not response.patch"),
            },
            Case {
                name: "only JSON patches",
                body: ok(json!({"patch": "W10=", "patchType": "MergePatch"})),
                version: Version::V1,
                mutating: true,
                want: Err("webhook returned invalid response.patchType of \"MergePatch\""),
            },
            Case {
                name: "v1beta1 is checked loosely",
                body: json!({"response": {"uid": "whatever", "allowed": true, "patch": "W10="}}),
                version: Version::V1beta1,
                mutating: true,
                want: Ok(()),
            },
            Case {
                name: "not JSON at all",
                body: json!("nope"),
                version: Version::V1,
                mutating: false,
                want: Err("webhook response was absent"),
            },
        ];
        for case in cases {
            let body = serde_json::to_vec(&case.body).expect("json");
            let got = verify(&body, "u", case.version, case.mutating).map(|_| ());
            assert_eq!(got, case.want.map_err(str::to_owned), "{}", case.name);
        }
        assert!(verify(b"{not json", "u", Version::V1, false).is_err());
    }

    #[test]
    fn a_patch_and_warnings_are_returned() {
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u", "allowed": true, "patchType": "JSONPatch",
                "patch": base64::engine::general_purpose::STANDARD.encode("[]"),
                "warnings": ["careful"]}});
        let got = verify(
            &serde_json::to_vec(&body).expect("json"),
            "u",
            Version::V1,
            true,
        )
        .expect("valid");
        assert_eq!(got.patch.as_deref(), Some(&b"[]"[..]));
        assert_eq!(got.warnings, ["careful"]);
        assert!(got.allowed);
    }
}
