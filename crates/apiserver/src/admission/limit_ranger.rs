//! LimitRanger: a namespace's LimitRanges fill a new pod's container requests and limits from their defaults, and refuse pods and claims outside min, max and maxLimitRequestRatio (upstream's `plugin/pkg/admission/limitranger`).

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::LIMIT_RANGER;
use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::pointer::At;
use crate::resources::core::{LIMIT_RANGES, PERSISTENT_VOLUME_CLAIMS};
use crate::resources::pod::PODS;
use crate::resources::quantities::milli_value;

/// The annotation naming what LimitRanger defaulted on a pod.
pub const LIMIT_RANGER_ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The plugin.
#[derive(Debug, Default)]
pub struct LimitRanger;

#[async_trait]
impl Plugin for LimitRanger {
    fn name(&self) -> &'static str {
        LIMIT_RANGER
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    fn mutates(&self) -> bool {
        true
    }

    fn validates(&self) -> bool {
        true
    }

    async fn admit(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !supports(a) || !a.is_main(&PODS) {
            return Ok(());
        }
        let ranges = a.list_once(source, &LIMIT_RANGES, a.namespace).await?;
        if let Some(pod) = a.object.as_mut() {
            for range in ranges.iter() {
                default_pod_resources(range, pod);
            }
        }
        Ok(())
    }

    async fn validate(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !supports(a) {
            return Ok(());
        }
        let ranges = a.list_once(source, &LIMIT_RANGES, a.namespace).await?;
        let Some(obj) = a.object.as_ref() else {
            return Ok(());
        };
        let mut errs = Vec::new();
        for range in ranges.iter() {
            if a.is_main(&PODS) {
                validate_pod(range, obj, &mut errs);
            } else {
                validate_claim(range, obj, &mut errs);
            }
        }
        match aggregate(errs) {
            None => Ok(()),
            Some(why) => Err(a.forbidden(&why)),
        }
    }
}

/// Upstream's `SupportsAttributes`: pods on create, claims on create and update, never a
/// subresource (a pod's containers cannot change, so its updates are skipped).
fn supports(a: &Attributes<'_>) -> bool {
    if !a.subresource.is_empty() {
        return false;
    }
    if a.is_main(&PODS) {
        return a.operation == Operation::Create;
    }
    a.is_main(&PERSISTENT_VOLUME_CLAIMS)
}

/// The `limits` items of `type` in a LimitRange.
fn items<'a>(range: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    range
        .at("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |item| item.get("type").and_then(Value::as_str) == Some(kind))
}

/// A resource list field of an item as `(name, quantity)` pairs, in name order.
fn list<'a>(obj: &'a Value, field: &str) -> Vec<(&'a str, &'a str)> {
    obj.get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|q| (k.as_str(), q)))
        .collect()
}

/// Fills the containers' missing requests and limits from the range's Container defaults and
/// records what was set in [`LIMIT_RANGER_ANNOTATION`] (upstream's
/// `mergePodResourceRequirements`).
fn default_pod_resources(range: &Value, pod: &mut Value) {
    let mut default_requests = Map::new();
    let mut default_limits = Map::new();
    for item in items(range, "Container") {
        for (k, v) in list(item, "defaultRequest") {
            default_requests.insert(k.to_owned(), Value::String(v.to_owned()));
        }
        for (k, v) in list(item, "default") {
            default_limits.insert(k.to_owned(), Value::String(v.to_owned()));
        }
    }
    if default_requests.is_empty() && default_limits.is_empty() {
        return;
    }
    let mut notes = Vec::new();
    for (field, label) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        let Some(containers) = pod
            .get_mut("spec")
            .and_then(|s| s.get_mut(field))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in containers.iter_mut() {
            let name = container
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let Some(c) = container.as_object_mut() else {
                continue;
            };
            let resources = c
                .entry("resources")
                .or_insert_with(|| Value::Object(Map::new()));
            let Some(resources) = resources.as_object_mut() else {
                continue;
            };
            let set_limits = merge_missing(resources, "limits", &default_limits);
            let set_requests = merge_missing(resources, "requests", &default_requests);
            if !set_requests.is_empty() {
                notes.push(format!(
                    "{} request for {label} {name}",
                    set_requests.join(", ")
                ));
            }
            if !set_limits.is_empty() {
                notes.push(format!(
                    "{} limit for {label} {name}",
                    set_limits.join(", ")
                ));
            }
        }
    }
    if notes.is_empty() {
        return;
    }
    let note = format!("LimitRanger plugin set: {}", notes.join("; "));
    if let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(LIMIT_RANGER_ANNOTATION.to_owned(), Value::String(note));
        }
    }
}

/// Sets each of `defaults` missing from `resources[field]`; returns the names set, sorted.
fn merge_missing(
    resources: &mut Map<String, Value>,
    field: &str,
    defaults: &Map<String, Value>,
) -> Vec<String> {
    if defaults.is_empty() {
        return Vec::new();
    }
    let target = resources
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(target) = target.as_object_mut() else {
        return Vec::new();
    };
    let mut set = Vec::new();
    for (k, v) in defaults {
        if !target.contains_key(k) {
            target.insert(k.clone(), v.clone());
            set.push(k.clone());
        }
    }
    set.sort();
    set
}

/// A pod's containers (and init containers) against the range's Container items, and its
/// total against the Pod items (upstream's `PodValidateLimitFunc`).
fn validate_pod(range: &Value, pod: &Value, errs: &mut Vec<String>) {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .into_iter()
        .flat_map(|f| {
            pod.at(&format!("/spec/{f}"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .collect();
    for item in items(range, "Container") {
        for container in &containers {
            let resources = container.get("resources").unwrap_or(&Value::Null);
            let requests = quantities(resources.get("requests"));
            let limits = quantities(resources.get("limits"));
            check_item(item, "Container", &requests, &limits, errs);
        }
    }
    for item in items(range, "Pod") {
        let requests = pod_total(pod, "requests");
        let limits = pod_total(pod, "limits");
        check_item(item, "Pod", &requests, &limits, errs);
    }
}

/// A claim's requested storage against the range's PersistentVolumeClaim items (upstream's
/// `PersistentVolumeClaimValidateLimitFunc`: limits are not user input for claims).
fn validate_claim(range: &Value, claim: &Value, errs: &mut Vec<String>) {
    let requests = quantities(claim.at("/spec/resources/requests"));
    for item in items(range, "PersistentVolumeClaim") {
        for (name, enforced) in list(item, "min") {
            if let Some(e) = min_constraint("PersistentVolumeClaim", name, enforced, &requests, &[])
            {
                errs.push(e);
            }
        }
        for (name, enforced) in list(item, "max") {
            if let Some(e) =
                max_request_constraint("PersistentVolumeClaim", name, enforced, &requests)
            {
                errs.push(e);
            }
        }
    }
}

/// A resource list as `(name, original text, milli value)`.
type Amounts = Vec<(String, String, i128)>;

fn quantities(list: Option<&Value>) -> Amounts {
    list.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let text = v.as_str()?;
            Some((k.clone(), text.to_owned(), milli_value(text)?))
        })
        .collect()
}

fn find<'a>(amounts: &'a Amounts, name: &str) -> Option<&'a (String, String, i128)> {
    amounts.iter().find(|(k, _, _)| k == name)
}

/// A pod's effective requests or limits: the larger of the containers' sum and the largest
/// init container, per resource (upstream's `resourcehelper.PodRequests`/`PodLimits`, without
/// sidecar containers and overhead).
fn pod_total(pod: &Value, field: &str) -> Amounts {
    let of = |list: &str| -> Vec<Amounts> {
        pod.at(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| quantities(c.at(&format!("/resources/{field}"))))
            .collect()
    };
    let mut totals: Vec<(String, i128)> = Vec::new();
    for amounts in of("containers") {
        for (name, _, milli) in amounts {
            match totals.iter_mut().find(|(n, _)| *n == name) {
                Some((_, total)) => *total += milli,
                None => totals.push((name, milli)),
            }
        }
    }
    for amounts in of("initContainers") {
        for (name, _, milli) in amounts {
            match totals.iter_mut().find(|(n, _)| *n == name) {
                Some((_, total)) => *total = (*total).max(milli),
                None => totals.push((name, milli)),
            }
        }
    }
    totals
        .into_iter()
        .map(|(name, milli)| (name, format_milli(milli), milli))
        .collect()
}

/// A milli value as a canonical quantity (`1500m`, `2`).
fn format_milli(milli: i128) -> String {
    let raw = if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    };
    kcm_machinery::quantity::canonicalize(&raw).unwrap_or(raw)
}

/// One item's min, max and maxLimitRequestRatio against requests and limits.
fn check_item(
    item: &Value,
    kind: &str,
    requests: &Amounts,
    limits: &Amounts,
    errs: &mut Vec<String>,
) {
    for (name, enforced) in list(item, "min") {
        errs.extend(min_constraint(kind, name, enforced, requests, limits));
    }
    for (name, enforced) in list(item, "max") {
        errs.extend(max_constraint(kind, name, enforced, requests, limits));
    }
    for (name, enforced) in list(item, "maxLimitRequestRatio") {
        errs.extend(ratio_constraint(kind, name, enforced, requests, limits));
    }
}

/// Upstream's `minConstraint`.
fn min_constraint(
    kind: &str,
    name: &str,
    enforced: &str,
    requests: &Amounts,
    limits: &[(String, String, i128)],
) -> Option<String> {
    let bound = milli_value(enforced)?;
    let Some((_, req, req_milli)) = find(requests, name) else {
        return Some(format!(
            "minimum {name} usage per {kind} is {enforced}.  No request is specified"
        ));
    };
    if *req_milli < bound {
        return Some(format!(
            "minimum {name} usage per {kind} is {enforced}, but request is {req}"
        ));
    }
    if let Some((_, lim, lim_milli)) = limits.iter().find(|(k, _, _)| k == name)
        && *lim_milli < bound
    {
        return Some(format!(
            "minimum {name} usage per {kind} is {enforced}, but limit is {lim}"
        ));
    }
    None
}

/// Upstream's `maxConstraint`.
fn max_constraint(
    kind: &str,
    name: &str,
    enforced: &str,
    requests: &Amounts,
    limits: &Amounts,
) -> Option<String> {
    let bound = milli_value(enforced)?;
    let Some((_, lim, lim_milli)) = find(limits, name) else {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}.  No limit is specified"
        ));
    };
    if *lim_milli > bound {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}, but limit is {lim}"
        ));
    }
    if let Some((_, req, req_milli)) = find(requests, name)
        && *req_milli > bound
    {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}, but request is {req}"
        ));
    }
    None
}

/// Upstream's `maxRequestConstraint` (claims: only the request is user input).
fn max_request_constraint(
    kind: &str,
    name: &str,
    enforced: &str,
    requests: &Amounts,
) -> Option<String> {
    let bound = milli_value(enforced)?;
    let Some((_, req, req_milli)) = find(requests, name) else {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}.  No request is specified"
        ));
    };
    (*req_milli > bound)
        .then(|| format!("maximum {name} usage per {kind} is {enforced}, but request is {req}"))
}

/// Upstream's `limitRequestRatioConstraint`; the ratio printed as Go's `%f`.
fn ratio_constraint(
    kind: &str,
    name: &str,
    enforced: &str,
    requests: &Amounts,
    limits: &Amounts,
) -> Option<String> {
    let bound = milli_value(enforced)?;
    let req = find(requests, name).map(|(_, _, m)| *m).filter(|m| *m != 0);
    let Some(req) = req else {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"
        ));
    };
    let lim = find(limits, name).map(|(_, _, m)| *m).filter(|m| *m != 0);
    let Some(lim) = lim else {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"
        ));
    };
    // Integer arithmetic decides (ratio in thousandths against the bound in thousandths);
    // the float is only printed, as upstream compares milli values.
    let ratio = lim as f64 / req as f64;
    (lim * 1000 > bound * req).then(|| {
        format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {ratio:.6}"
        )
    })
}

/// Errors joined as upstream's `utilerrors.NewAggregate` prints them: duplicates dropped, one
/// alone as is, several in brackets separated by `, `.
fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut seen = BTreeSet::new();
    let unique: Vec<String> = errs
        .into_iter()
        .filter(|e| seen.insert(e.clone()))
        .collect();
    match unique.len() {
        0 => None,
        1 => unique.into_iter().next(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;

    fn range(limits: Value) -> Value {
        json!({"metadata": {"name": "limits", "namespace": "ns"}, "spec": {"limits": limits}})
    }

    async fn run(
        def: &'static crate::registry::ResourceDef,
        ranges: Vec<Value>,
        obj: Value,
    ) -> Result<Value> {
        let source = Objects::new(ranges.into_iter().map(|r| (&LIMIT_RANGES, r)).collect());
        let user = UserInfo::admin();
        let mut a = Attributes::new(Operation::Create, def, "ns", "p", Some(obj), &user);
        LimitRanger.admit(&source, &mut a).await?;
        LimitRanger.validate(&source, &mut a).await?;
        Ok(a.object.unwrap_or_default())
    }

    #[tokio::test]
    async fn container_defaults_fill_missing_requests_and_limits() {
        let ranges = vec![range(json!([{"type": "Container",
            "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]))];
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "200m"}, "limits": {"cpu": "300m"}}}],
            "initContainers": [{"name": "i"}]}});
        let got = run(&PODS, ranges, pod).await.expect("admitted");
        assert_eq!(
            got["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}})
        );
        assert_eq!(
            got["spec"]["containers"][1]["resources"],
            json!({"limits": {"cpu": "300m", "memory": "256Mi"}, "requests": {"cpu": "200m", "memory": "128Mi"}})
        );
        assert_eq!(
            got["spec"]["initContainers"][0]["resources"]["requests"]["cpu"],
            "100m"
        );
        assert_eq!(
            got["metadata"]["annotations"][LIMIT_RANGER_ANNOTATION],
            "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; memory request for container b; memory limit for container b; cpu, memory request for init container i; cpu, memory limit for init container i"
        );
    }

    #[tokio::test]
    async fn bounds_are_enforced_with_upstreams_messages() {
        struct Case {
            name: &'static str,
            limits: Value,
            resources: Value,
            want: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "within bounds",
                limits: json!([{"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1"}}]),
                resources: json!({"requests": {"cpu": "200m"}, "limits": {"cpu": "500m"}}),
                want: None,
            },
            Case {
                name: "below min",
                limits: json!([{"type": "Container", "min": {"cpu": "100m"}}]),
                resources: json!({"requests": {"cpu": "50m"}}),
                want: Some(
                    "pods \"p\" is forbidden: minimum cpu usage per Container is 100m, but request is 50m",
                ),
            },
            Case {
                name: "no request under a min",
                limits: json!([{"type": "Container", "min": {"memory": "1Mi"}}]),
                resources: json!({}),
                want: Some(
                    "pods \"p\" is forbidden: minimum memory usage per Container is 1Mi.  No request is specified",
                ),
            },
            Case {
                name: "over max, twice",
                limits: json!([{"type": "Container", "max": {"cpu": "1", "memory": "1Gi"}}]),
                resources: json!({"requests": {"cpu": "2"}, "limits": {"cpu": "2", "memory": "2Gi"}}),
                want: Some(
                    "pods \"p\" is forbidden: [maximum cpu usage per Container is 1, but limit is 2, maximum memory usage per Container is 1Gi, but limit is 2Gi]",
                ),
            },
            Case {
                name: "no limit under a max",
                limits: json!([{"type": "Container", "max": {"cpu": "1"}}]),
                resources: json!({"requests": {"cpu": "100m"}}),
                want: Some(
                    "pods \"p\" is forbidden: maximum cpu usage per Container is 1.  No limit is specified",
                ),
            },
            Case {
                name: "ratio too high",
                limits: json!([{"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}]),
                resources: json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "300m"}}),
                want: Some(
                    "pods \"p\" is forbidden: cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000",
                ),
            },
            Case {
                name: "pod total over max",
                limits: json!([{"type": "Pod", "max": {"cpu": "1"}}]),
                resources: json!({"requests": {"cpu": "600m"}, "limits": {"cpu": "600m"}}),
                want: Some(
                    "pods \"p\" is forbidden: maximum cpu usage per Pod is 1, but limit is 1200m",
                ),
            },
        ];
        for case in cases {
            let pod = json!({"spec": {"containers": [
                {"name": "a", "resources": case.resources.clone()},
                {"name": "b", "resources": case.resources}]}});
            let got = run(&PODS, vec![range(case.limits)], pod).await;
            assert_eq!(
                got.err().map(|e| e.message).as_deref(),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[tokio::test]
    async fn claims_are_bounded_by_their_request() {
        let ranges = || {
            vec![range(
                json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}]),
            )]
        };
        let claim = |size: &str| json!({"spec": {"resources": {"requests": {"storage": size}}}});
        run(&PERSISTENT_VOLUME_CLAIMS, ranges(), claim("5Gi"))
            .await
            .expect("fits");
        let err = run(&PERSISTENT_VOLUME_CLAIMS, ranges(), claim("20Gi"))
            .await
            .expect_err("too big");
        assert_eq!(
            err.message,
            "persistentvolumeclaims \"p\" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"
        );
        let err = run(&PERSISTENT_VOLUME_CLAIMS, ranges(), claim("500Mi"))
            .await
            .expect_err("too small");
        assert!(err.message.ends_with(
            "minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"
        ));
    }
}
