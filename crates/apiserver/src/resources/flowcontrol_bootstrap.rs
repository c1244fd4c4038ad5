//! The API Priority and Fairness objects kube-apiserver creates at start: the mandatory `exempt` and `catch-all` levels and schemas and the suggested ones (upstream's `apis/flowcontrol/bootstrap/default.go`, v1).

use serde_json::{Value, json};

/// The annotation that lets the apiserver keep a bootstrap object's spec up to date.
const AUTO_UPDATE: &str = "apf.kubernetes.io/autoupdate-spec";

fn metadata(name: &str) -> Value {
    json!({"name": name, "annotations": {AUTO_UPDATE: "true"}})
}

fn limited(name: &str, shares: i32, lendable: i32, queuing: Option<(i32, i32, i32)>) -> Value {
    let limit_response = match queuing {
        Some((queues, hand_size, queue_length_limit)) => json!({"type": "Queue",
            "queuing": {"queues": queues, "handSize": hand_size, "queueLengthLimit": queue_length_limit}}),
        None => json!({"type": "Reject"}),
    };
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": metadata(name),
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "limitResponse": limit_response,
        }},
    })
}

/// The mandatory and suggested PriorityLevelConfigurations, in upstream's order.
pub fn priority_levels() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": metadata("exempt"),
            "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}},
        }),
        limited("catch-all", 5, 0, None),
        limited("system", 30, 33, Some((64, 6, 50))),
        limited("node-high", 40, 25, Some((64, 6, 50))),
        limited("leader-election", 10, 0, Some((16, 4, 50))),
        limited("workload-high", 40, 50, Some((128, 6, 50))),
        limited("workload-low", 100, 90, Some((128, 6, 50))),
        limited("global-default", 20, 50, Some((128, 6, 50))),
    ]
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "user": {"name": name}})
}

fn kube_system_sa(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": "kube-system"}})
}

fn resource_rule(
    verbs: &[&str],
    groups: &[&str],
    resources: &[&str],
    cluster_scope: bool,
) -> Value {
    let mut rule =
        json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "namespaces": ["*"]});
    if cluster_scope {
        rule["clusterScope"] = json!(true);
    }
    rule
}

/// Every verb on every resource and path.
fn everything(subjects: Vec<Value>) -> Value {
    json!({
        "subjects": subjects,
        "resourceRules": [resource_rule(&["*"], &["*"], &["*"], true)],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    })
}

fn flow_schema(
    name: &str,
    level: &str,
    precedence: i32,
    distinguisher: Option<&str>,
    rules: Value,
) -> Value {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": [rules],
    });
    if let Some(method) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": metadata(name),
        "spec": spec,
    })
}

/// The mandatory and suggested FlowSchemas, by matching precedence.
pub fn flow_schemas() -> Vec<Value> {
    let everyone = || {
        vec![
            group("system:unauthenticated"),
            group("system:authenticated"),
        ]
    };
    let leader_election = |resources: &[&str], group: &str| {
        resource_rule(&["get", "create", "update"], &[group], resources, false)
    };
    vec![
        flow_schema(
            "exempt",
            "exempt",
            1,
            None,
            everything(vec![group("system:masters")]),
        ),
        flow_schema(
            "probes",
            "exempt",
            2,
            None,
            json!({"subjects": everyone(),
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}),
        ),
        flow_schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            json!({"subjects": [user("system:kube-controller-manager"), user("system:kube-scheduler"), kube_system_sa("*")],
                "resourceRules": [leader_election(&["leases"], "coordination.k8s.io")]}),
        ),
        flow_schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some("ByUser"),
            json!({"subjects": [user("system:kube-controller-manager"), kube_system_sa("endpoint-controller"),
                    kube_system_sa("endpointslicemirroring-controller")],
                "resourceRules": [leader_election(&["endpoints"], "")]}),
        ),
        flow_schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some("ByUser"),
            json!({"subjects": [kube_system_sa("*")],
                "resourceRules": [leader_election(&["endpoints", "configmaps"], ""),
                    leader_election(&["leases"], "coordination.k8s.io")]}),
        ),
        flow_schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            json!({"subjects": [group("system:nodes")],
                "resourceRules": [resource_rule(&["*"], &[""], &["nodes", "nodes/status"], true),
                    resource_rule(&["*"], &["coordination.k8s.io"], &["leases"], false)]}),
        ),
        flow_schema(
            "system-nodes",
            "system",
            500,
            Some("ByUser"),
            everything(vec![group("system:nodes")]),
        ),
        flow_schema(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(vec![user("system:kube-controller-manager")]),
        ),
        flow_schema(
            "kube-scheduler",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(vec![user("system:kube-scheduler")]),
        ),
        flow_schema(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            everything(vec![kube_system_sa("*")]),
        ),
        flow_schema(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            everything(vec![group("system:serviceaccounts")]),
        ),
        flow_schema(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            everything(everyone()),
        ),
        flow_schema(
            "catch-all",
            "catch-all",
            10000,
            Some("ByUser"),
            everything(everyone()),
        ),
    ]
}

/// The field manager upstream's APF configuration producer writes with.
pub const APF_FIELD_MANAGER: &str = "api-priority-and-fairness-config-producer-v1";

/// The bootstrap FlowSchemas with the `Dangling: False` status the configuration controller
/// would give them (every one names a bootstrap priority level).
pub fn flow_schemas_with_status() -> Vec<Value> {
    let now = crate::object::now_rfc3339();
    flow_schemas()
        .into_iter()
        .map(|mut fs| {
            let level = fs["spec"]["priorityLevelConfiguration"]["name"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            fs["status"] = found_status(&level, &now);
            fs
        })
        .collect()
}

/// The status the configuration controller gives a FlowSchema whose priority level exists.
pub fn found_status(level: &str, now: &str) -> Value {
    json!({"conditions": [{
        "type": "Dangling",
        "status": "False",
        "lastTransitionTime": now,
        "reason": "Found",
        "message": format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists"),
    }]})
}
