//! Rows of the control-plane kinds: CertificateSigningRequest, FlowSchema, PriorityLevelConfiguration and APIService.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::{human_duration, since};
use super::fields::{get, list_at, name, opt_int_at, str_at, time_at};

fn age(obj: &Value, now: Timestamp) -> Value {
    json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now))
}

/// The condition of `type_` in `status.conditions`, if any.
fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    list_at(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == type_)
}

/// upstream's `extractCSRStatus`: `Denied` before `Approved` before `Pending`, then
/// `,Failed` and `,Issued`.
fn csr_condition(obj: &Value) -> String {
    let mut status = if condition(obj, "Denied").is_some() {
        "Denied".to_owned()
    } else if condition(obj, "Approved").is_some() {
        "Approved".to_owned()
    } else {
        "Pending".to_owned()
    };
    if condition(obj, "Failed").is_some() {
        status.push_str(",Failed");
    }
    if !str_at(obj, &["status", "certificate"]).is_empty() {
        status.push_str(",Issued");
    }
    status
}

/// upstream's `printCertificateSigningRequest`.
pub(super) fn certificate_signing_request(obj: &Value, now: Timestamp) -> Row {
    let signer = match str_at(obj, &["spec", "signerName"]) {
        "" => "<none>",
        s => s,
    };
    let requested = match opt_int_at(obj, &["spec", "expirationSeconds"]) {
        Some(seconds) => human_duration(i128::from(seconds) * 1_000_000_000),
        None => "<none>".to_owned(),
    };
    Row::new(vec![
        json!(name(obj)),
        age(obj, now),
        json!(signer),
        json!(str_at(obj, &["spec", "username"])),
        json!(requested),
        json!(csr_condition(obj)),
    ])
}

/// upstream's `printFlowSchema`: MISSINGPL is the `Dangling` condition's status, `?`
/// before the configuration controller has set one.
pub(super) fn flow_schema(obj: &Value, now: Timestamp) -> Row {
    let distinguisher = match str_at(obj, &["spec", "distinguisherMethod", "type"]) {
        "" => "<none>",
        t => t,
    };
    let missing = condition(obj, "Dangling")
        .map(|c| str_at(c, &["status"]))
        .unwrap_or("?");
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "priorityLevelConfiguration", "name"])),
        json!(opt_int_at(obj, &["spec", "matchingPrecedence"]).unwrap_or(0)),
        json!(distinguisher),
        age(obj, now),
        json!(missing),
    ])
}

/// upstream's `printPriorityLevelConfiguration`: the limited settings, `<none>` for an
/// exempt level.
pub(super) fn priority_level_configuration(obj: &Value, now: Timestamp) -> Row {
    let none = || json!("<none>");
    let (mut shares, mut queues, mut hand_size, mut queue_length) =
        (none(), none(), none(), none());
    if let Some(limited) = get(obj, &["spec", "limited"]).filter(|l| !l.is_null()) {
        shares = json!(opt_int_at(limited, &["nominalConcurrencyShares"]).unwrap_or(0));
        if let Some(queuing) = get(limited, &["limitResponse", "queuing"]).filter(|q| !q.is_null())
        {
            queues = json!(opt_int_at(queuing, &["queues"]).unwrap_or(0));
            hand_size = json!(opt_int_at(queuing, &["handSize"]).unwrap_or(0));
            queue_length = json!(opt_int_at(queuing, &["queueLengthLimit"]).unwrap_or(0));
        }
    }
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "type"])),
        shares,
        queues,
        hand_size,
        queue_length,
        age(obj, now),
    ])
}

/// kube-aggregator's APIService table: SERVICE is `Local` or `namespace/name`; AVAILABLE is
/// the `Available` condition's status, with its reason when not `True`.
pub(super) fn api_service(obj: &Value, now: Timestamp) -> Row {
    let service = match get(obj, &["spec", "service"]).filter(|s| !s.is_null()) {
        None => "Local".to_owned(),
        Some(s) => format!("{}/{}", str_at(s, &["namespace"]), str_at(s, &["name"])),
    };
    let available = match condition(obj, "Available") {
        None => "Unknown".to_owned(),
        Some(c) => {
            let status = str_at(c, &["status"]);
            let reason = str_at(c, &["reason"]);
            if status == "True" || reason.is_empty() {
                status.to_owned()
            } else {
                format!("{status} ({reason})")
            }
        }
    };
    Row::new(vec![
        json!(name(obj)),
        json!(service),
        json!(available),
        age(obj, now),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    const CREATED: &str = "2024-05-01T11:00:00Z";

    #[test]
    fn csr_rows() {
        let csr = |conditions: Value, certificate: &str| {
            json!({"metadata": {"name": "req", "creationTimestamp": CREATED},
                "spec": {"signerName": "kubernetes.io/kube-apiserver-client", "username": "kubernetes-admin",
                         "expirationSeconds": 86400},
                "status": {"conditions": conditions, "certificate": certificate}})
        };
        let cases = [
            (json!([]), "", "Pending"),
            (
                json!([{"type": "Approved", "status": "True"}]),
                "",
                "Approved",
            ),
            (
                json!([{"type": "Approved", "status": "True"}]),
                "Y2VydA==",
                "Approved,Issued",
            ),
            (
                json!([{"type": "Approved"}, {"type": "Denied"}, {"type": "Failed"}]),
                "",
                "Denied,Failed",
            ),
        ];
        for (conditions, certificate, want) in cases {
            let cells = certificate_signing_request(&csr(conditions, certificate), now()).cells;
            assert_eq!(cells[5], json!(want));
        }
        let cells = certificate_signing_request(&csr(json!([]), ""), now()).cells;
        assert_eq!(
            cells[..5],
            [
                json!("req"),
                json!("60m"),
                json!("kubernetes.io/kube-apiserver-client"),
                json!("kubernetes-admin"),
                json!("24h")
            ]
        );
    }

    #[test]
    fn flowcontrol_rows() {
        let fs = json!({"metadata": {"name": "exempt", "creationTimestamp": CREATED},
            "spec": {"priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1},
            "status": {"conditions": [{"type": "Dangling", "status": "False"}]}});
        assert_eq!(
            flow_schema(&fs, now()).cells,
            [
                json!("exempt"),
                json!("exempt"),
                json!(1),
                json!("<none>"),
                json!("60m"),
                json!("False")
            ]
        );
        let limited = json!({"metadata": {"name": "workload-low", "creationTimestamp": CREATED},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 100,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}});
        assert_eq!(
            priority_level_configuration(&limited, now()).cells,
            [
                json!("workload-low"),
                json!("Limited"),
                json!(100),
                json!(128),
                json!(6),
                json!(50),
                json!("60m")
            ]
        );
        let exempt = json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}});
        assert_eq!(
            priority_level_configuration(&exempt, now()).cells[2],
            json!("<none>")
        );
    }

    #[test]
    fn api_service_rows() {
        let local = json!({"metadata": {"name": "v1.apps", "creationTimestamp": CREATED},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(
            api_service(&local, now()).cells,
            [
                json!("v1.apps"),
                json!("Local"),
                json!("True"),
                json!("60m")
            ]
        );
        let remote = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "ServiceNotFound"}]}});
        let cells = api_service(&remote, now()).cells;
        assert_eq!(
            cells[1..3],
            [
                json!("kube-system/metrics-server"),
                json!("False (ServiceNotFound)")
            ]
        );
        assert_eq!(
            api_service(&json!({"metadata": {"name": "x"}}), now()).cells[2],
            json!("Unknown")
        );
    }
}
