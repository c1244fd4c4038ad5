//! core/v1 pods: defaults, Pending status on create, the update rules, graceful deletion.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ContainerPort, Pod, PodSpec, Sysctl, Volume, VolumeMount};
use serde_json::{Value, json};

use crate::pointer::At;
use crate::registry::generation::Generation;
use crate::registry::resource::{ResourceDef, SelectableField};
use crate::registry::strategy::{MetadataReset, Strategy, typed, typed_roundtrip_checked};
use crate::registry::subresource::Subresource;
use crate::resources::container_resources::validate_resource_requirements;
use crate::resources::net;
use crate::resources::pod_defaults::default_pod_spec;
use crate::resources::quantities;
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::{FieldError, NameRule};

/// The pods resource.
pub static PODS: ResourceDef = ResourceDef::of::<Pod>()
    .generation(Generation::Spec)
    .short_names(&["po"])
    .categories(&["all"])
    .subresources(&[
        Subresource::Attach,
        Subresource::Binding,
        Subresource::Eviction,
        Subresource::Exec,
        Subresource::Log,
        Subresource::PortForward,
        Subresource::Proxy,
        Subresource::Status,
    ])
    .fields(&[
        SelectableField::string("spec.nodeName", "/spec/nodeName"),
        SelectableField::string("spec.restartPolicy", "/spec/restartPolicy"),
        SelectableField::string("spec.schedulerName", "/spec/schedulerName"),
        SelectableField::string("spec.serviceAccountName", "/spec/serviceAccountName"),
        SelectableField::boolean("spec.hostNetwork", "/spec/hostNetwork"),
        SelectableField::string("status.phase", "/status/phase"),
        SelectableField::string("status.podIP", "/status/podIP"),
        SelectableField::string("status.nominatedNodeName", "/status/nominatedNodeName"),
    ])
    .decode_with(decode)
    .strategy(&PodStrategy)
    .printer(printers::POD)
    .merge_schema(&kinds::POD);

/// Seconds the DefaultTolerationSeconds admission plugin tolerates not-ready and unreachable
/// nodes for (`--default-not-ready-toleration-seconds`, `--default-unreachable-toleration-seconds`).
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The node taint key for a not-ready node.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The node taint key for an unreachable node.
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// The pod strategy (upstream's `podStrategy`).
#[derive(Debug, Default)]
pub struct PodStrategy;

/// Decodes a pod: quantities canonicalized, the pod spec defaults applied.
pub fn decode(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<Pod, quantities::Error>(obj, |pod| {
        if let Some(spec) = pod.spec.as_mut() {
            quantities::canonicalize_pod_spec(spec, "spec")?;
            default_pod_spec(spec);
        }
        Ok(())
    })
}

impl Strategy for PodStrategy {
    /// Simulated nodes run no containers: nothing can answer `log`, `exec`, `attach`,
    /// `portforward` or `proxy`.
    fn connect_refusal(&self, obj: &Value, sub: Subresource) -> Option<String> {
        let name = crate::object::name(obj);
        let missing = match sub {
            Subresource::Log => "there are no container logs to read",
            Subresource::Exec => "there is no container to exec into",
            Subresource::Attach => "there is no container to attach to",
            Subresource::PortForward => "there is no container port to forward to",
            _ => "there is no container to proxy to",
        };
        Some(match obj.at("/spec/nodeName").and_then(Value::as_str) {
            Some(node) if !node.is_empty() => {
                format!("pod {name:?} runs on the simulated node {node:?}: {missing}")
            }
            _ => format!("pod {name:?} is not scheduled to a node yet: {missing}"),
        })
    }

    /// `podStatusStrategy.PrepareForUpdate`: `/status` may not touch the owner references
    /// (old kubelets corrupted them) nor the deletion timestamp.
    fn status_metadata_reset(&self) -> MetadataReset {
        MetadataReset::Fields(&["deletionTimestamp", "ownerReferences"])
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        let qos = obj
            .get("spec")
            .and_then(typed::<PodSpec>)
            .map(|s| qos_class(&s))
            .unwrap_or("BestEffort");
        obj["status"] = json!({"phase": "Pending", "qosClass": qos});
        let spec = &mut obj["spec"];
        if spec.is_object() {
            let sa = spec
                .get("serviceAccountName")
                .and_then(Value::as_str)
                .unwrap_or("default")
                .to_owned();
            spec["serviceAccountName"] = Value::String(sa.clone());
            spec["serviceAccount"] = Value::String(sa);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match obj.get("spec").and_then(typed::<PodSpec>) {
            Some(spec) => validate_pod_spec(&spec, "spec", &mut errs),
            None => errs.push(FieldError::required("spec", "")),
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if !spec_update_allowed(new.get("spec"), old.get("spec")) {
            errs.push(FieldError::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            ));
        }
        errs
    }

    fn graceful_delete_period(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        Some(pod_grace_period(obj, requested))
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// The grace period a pod delete gets, as upstream's `podStrategy.CheckGracefulDelete`: the
/// requested one, else `terminationGracePeriodSeconds`; 0 for unscheduled or terminated pods;
/// negative becomes 1.
pub fn pod_grace_period(obj: &Value, requested: Option<i64>) -> i64 {
    let mut period = requested.unwrap_or_else(|| {
        obj.at("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    });
    let node = obj
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        period = 0;
    }
    let phase = obj
        .at("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    if phase == "Failed" || phase == "Succeeded" {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    period
}

/// The pod's QoS class (upstream's `qos.GetPodQOS`, simplified to cpu and memory).
fn qos_class(spec: &PodSpec) -> &'static str {
    let containers: Vec<_> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .collect();
    let mut any_set = false;
    let mut guaranteed = true;
    for c in &containers {
        let res = c.resources.clone().unwrap_or_default();
        let requests = res.requests.unwrap_or_default();
        let limits = res.limits.unwrap_or_default();
        for name in ["cpu", "memory"] {
            let req = requests.get(name);
            let lim = limits.get(name);
            if req.is_some() || lim.is_some() {
                any_set = true;
            }
            match (req, lim) {
                (Some(r), Some(l)) if r == l => {}
                (None, Some(_)) => {}
                _ => guaranteed = false,
            }
        }
    }
    if !any_set {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Validates a pod spec at `path` (`ValidatePodSpec`, the parts controllers depend on).
pub fn validate_pod_spec(spec: &PodSpec, path: &str, errs: &mut Vec<FieldError>) {
    let volumes = validate_volume_names(
        spec.volumes.as_deref().unwrap_or(&[]),
        &format!("{path}.volumes"),
        errs,
    );
    if spec.containers.is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut names = BTreeSet::new();
    for (list, field) in [
        (spec.containers.as_slice(), "containers"),
        (
            spec.init_containers.as_deref().unwrap_or(&[]),
            "initContainers",
        ),
    ] {
        for (i, c) in list.iter().enumerate() {
            let cpath = format!("{path}.{field}[{i}]");
            if c.name.is_empty() {
                errs.push(FieldError::required(format!("{cpath}.name"), ""));
            } else {
                for msg in NameRule::Label.check(&c.name) {
                    errs.push(FieldError::invalid(
                        format!("{cpath}.name"),
                        c.name.as_str(),
                        msg,
                    ));
                }
                if !names.insert(c.name.clone()) {
                    errs.push(FieldError::duplicate(
                        format!("{cpath}.name"),
                        c.name.as_str(),
                    ));
                }
            }
            if c.image.as_deref().unwrap_or("").trim().is_empty() {
                errs.push(FieldError::required(format!("{cpath}.image"), ""));
            }
            validate_container_ports(
                c.ports.as_deref().unwrap_or(&[]),
                &format!("{cpath}.ports"),
                errs,
            );
            validate_volume_mounts(
                c.volume_mounts.as_deref().unwrap_or(&[]),
                &volumes,
                &format!("{cpath}.volumeMounts"),
                errs,
            );
            if let Some(resources) = &c.resources {
                validate_resource_requirements(resources, &format!("{cpath}.resources"), errs);
            }
        }
    }
    if let Some(policy) = spec.restart_policy.as_deref()
        && !["Always", "OnFailure", "Never"].contains(&policy)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            policy,
            &["Always", "OnFailure", "Never"],
        ));
    }
    if let Some(grace) = spec.termination_grace_period_seconds
        && grace < 0
    {
        errs.push(FieldError::invalid(
            format!("{path}.terminationGracePeriodSeconds"),
            grace,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(sc) = &spec.security_context {
        validate_sysctls(
            sc.sysctls.as_deref().unwrap_or(&[]),
            &format!("{path}.securityContext.sysctls"),
            errs,
        );
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let tpath = format!("{path}.tolerations[{i}]");
        let op = t.operator.as_deref().unwrap_or("Equal");
        if op != "Equal" && op != "Exists" {
            errs.push(FieldError::not_supported(
                format!("{tpath}.operator"),
                op,
                &["Equal", "Exists"],
            ));
        }
        if op == "Exists" && !t.value.as_deref().unwrap_or("").is_empty() {
            errs.push(FieldError::invalid(
                format!("{tpath}.operator"),
                op,
                "value must be empty when `operator` is 'Exists'",
            ));
        }
        if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
            errs.push(FieldError::invalid(
                format!("{tpath}.effect"),
                t.effect.clone().unwrap_or_default(),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
    }
}

/// The longest sysctl name (upstream's `SysctlMaxLength`).
const SYSCTL_MAX_LENGTH: usize = 253;

/// Upstream's `validateSysctls`: each name required, a sysctl name (`IsValidSysctlName`:
/// segments of `[a-z0-9]([-_a-z0-9]*[a-z0-9])?` joined by `.` or `/`, at most 253
/// characters), and unique.
fn validate_sysctls(sysctls: &[Sysctl], path: &str, errs: &mut Vec<FieldError>) {
    let mut names = BTreeSet::new();
    for (i, s) in sysctls.iter().enumerate() {
        let npath = format!("{path}[{i}].name");
        if s.name.is_empty() {
            errs.push(FieldError::required(npath, ""));
        } else if !is_valid_sysctl_name(&s.name) {
            errs.push(FieldError::invalid(
                npath,
                s.name.as_str(),
                format!(
                    "must have at most {SYSCTL_MAX_LENGTH} characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
                ),
            ));
        } else if names.contains(s.name.as_str()) {
            errs.push(FieldError::duplicate(npath, s.name.as_str()));
        }
        names.insert(s.name.as_str());
    }
}

fn is_valid_sysctl_name(name: &str) -> bool {
    let segment = |seg: &str| {
        let b = seg.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                alnum(first)
                    && alnum(last)
                    && b.iter().all(|c| alnum(c) || matches!(c, b'-' | b'_'))
            }
            _ => false,
        }
    };
    name.len() <= SYSCTL_MAX_LENGTH && name.split(['.', '/']).all(segment)
}

/// The protocols a container port may use (upstream's `supportedPortProtocols`).
const PORT_PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// Checks the volumes' names (`ValidateVolumes`: required, an RFC 1123 label, unique) and
/// returns those a mount may refer to: a volume with an error is not one, as upstream.
fn validate_volume_names<'a>(
    volumes: &'a [Volume],
    path: &str,
    errs: &mut Vec<FieldError>,
) -> BTreeSet<&'a str> {
    let mut names = BTreeSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let field = format!("{path}[{i}].name");
        let before = errs.len();
        if volume.name.is_empty() {
            errs.push(FieldError::required(&field, ""));
        } else {
            for msg in NameRule::Label.check(&volume.name) {
                errs.push(FieldError::invalid(&field, volume.name.as_str(), msg));
            }
        }
        if names.contains(volume.name.as_str()) {
            errs.push(FieldError::duplicate(&field, volume.name.as_str()));
        }
        if errs.len() == before {
            names.insert(volume.name.as_str());
        }
    }
    names
}

/// `validateContainerPorts`: names valid and unique, ports in range, a known protocol.
fn validate_container_ports(ports: &[ContainerPort], path: &str, errs: &mut Vec<FieldError>) {
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let ppath = format!("{path}[{i}]");
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = net::port_name_errors(name);
            if !msgs.is_empty() {
                for msg in msgs {
                    errs.push(FieldError::invalid(format!("{ppath}.name"), name, msg));
                }
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(format!("{ppath}.name"), name));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(format!("{ppath}.containerPort"), ""));
        }
        // `IsValidPortNum` for the container port (when set) and a host port other than 0.
        let numbers = [
            ("containerPort", port.container_port),
            ("hostPort", port.host_port.unwrap_or(0)),
        ];
        for (field, number) in numbers.into_iter().filter(|(_, n)| *n != 0) {
            for msg in net::port_num_errors(i64::from(number)) {
                errs.push(FieldError::invalid(format!("{ppath}.{field}"), number, msg));
            }
        }
        match port.protocol.as_deref() {
            None | Some("") => errs.push(FieldError::required(format!("{ppath}.protocol"), "")),
            Some(protocol) if !PORT_PROTOCOLS.contains(&protocol) => errs.push(
                FieldError::not_supported(format!("{ppath}.protocol"), protocol, &PORT_PROTOCOLS),
            ),
            Some(_) => {}
        }
    }
}

/// `validateVolumeMounts`: each mount names a pod volume and a unique, non-empty path.
fn validate_volume_mounts(
    mounts: &[VolumeMount],
    volumes: &BTreeSet<&str>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let mut points = BTreeSet::new();
    for (i, mount) in mounts.iter().enumerate() {
        let mpath = format!("{path}[{i}]");
        if mount.name.is_empty() {
            errs.push(FieldError::required(format!("{mpath}.name"), ""));
        }
        if !volumes.contains(mount.name.as_str()) {
            errs.push(FieldError::not_found(
                format!("{mpath}.name"),
                mount.name.as_str(),
            ));
        }
        if mount.mount_path.is_empty() {
            errs.push(FieldError::required(format!("{mpath}.mountPath"), ""));
        }
        if !points.insert(mount.mount_path.as_str()) {
            errs.push(FieldError::invalid(
                format!("{mpath}.mountPath"),
                mount.mount_path.as_str(),
                "must be unique",
            ));
        }
    }
}

/// Whether a pod spec update only touches what upstream lets change: container images,
/// `activeDeadlineSeconds`, added tolerations, removed scheduling gates.
fn spec_update_allowed(new: Option<&Value>, old: Option<&Value>) -> bool {
    let (Some(new), Some(old)) = (new, old) else {
        return new == old;
    };
    let mut masked = old.clone();
    for field in ["containers", "initContainers"] {
        if let (Some(Value::Array(m)), Some(Value::Array(n))) =
            (masked.get_mut(field), new.get(field))
        {
            if m.len() != n.len() {
                return false;
            }
            for (mc, nc) in m.iter_mut().zip(n) {
                if let Some(image) = nc.get("image") {
                    mc["image"] = image.clone();
                }
            }
        }
    }
    for field in ["activeDeadlineSeconds", "schedulingGates"] {
        match new.get(field) {
            Some(v) => masked[field] = v.clone(),
            None => {
                if let Some(m) = masked.as_object_mut() {
                    m.remove(field);
                }
            }
        }
    }
    // Tolerations may only be added to.
    let old_tol = old
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let new_tol = new
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !old_tol.iter().all(|t| new_tol.contains(t)) {
        return false;
    }
    if let Some(m) = masked.as_object_mut() {
        match new.get("tolerations") {
            Some(t) => {
                m.insert("tolerations".to_owned(), t.clone());
            }
            None => {
                m.remove("tolerations");
            }
        }
    }
    &masked == new
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_errors(spec: Value) -> Vec<String> {
        let spec: PodSpec = serde_json::from_value(spec).expect("typed");
        let mut errs = Vec::new();
        validate_pod_spec(&spec, "spec", &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn sysctl_names_are_validated_as_upstream() {
        // The e2e "should reject invalid sysctls" pod: only the two malformed names fail.
        let errs = spec_errors(json!({
            "containers": [{"name": "c", "image": "i"}],
            "securityContext": {"sysctls": [
                {"name": "foo-", "value": "bar"},
                {"name": "kernel.shmmax", "value": "100000000"},
                {"name": "safe-and-unsafe", "value": "100000000"},
                {"name": "bar..", "value": "42"},
                {"name": "net/ipv4/ip_forward", "value": "1"},
                {"name": "kernel.shmmax", "value": "1"},
                {"name": "", "value": "1"},
            ]},
        }));
        let regex = r"([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?";
        assert_eq!(
            errs,
            vec![
                format!(
                    "spec.securityContext.sysctls[0].name: Invalid value: \"foo-\": must have at most 253 characters and match regex {regex}"
                ),
                format!(
                    "spec.securityContext.sysctls[3].name: Invalid value: \"bar..\": must have at most 253 characters and match regex {regex}"
                ),
                "spec.securityContext.sysctls[5].name: Duplicate value: \"kernel.shmmax\""
                    .to_owned(),
                "spec.securityContext.sysctls[6].name: Required value".to_owned(),
            ]
        );
    }

    #[test]
    fn ports_volumes_and_mounts_are_validated_as_upstream() {
        let container = |extra: Value| {
            let mut c = json!({"name": "c", "image": "nginx"});
            if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
                c.extend(extra.clone());
            }
            c
        };
        let cases: [(Value, Vec<&str>); 7] = [
            (
                json!({"volumes": [{"name": "data", "emptyDir": {}}],
                    "containers": [container(json!({
                        "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}))]}),
                vec![],
            ),
            (
                json!({"containers": [container(json!({
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}))]}),
                vec!["spec.containers[0].volumeMounts[0].name: Not found: \"data\""],
            ),
            (
                json!({"volumes": [{"name": "data", "emptyDir": {}}],
                    "containers": [container(json!({"volumeMounts": [
                        {"name": "data", "mountPath": "/d"}, {"name": "data", "mountPath": "/d"}]}))]}),
                vec![
                    "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/d\": must be unique",
                ],
            ),
            (
                json!({"volumes": [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}],
                    "containers": [container(json!({}))]}),
                vec!["spec.volumes[1].name: Duplicate value: \"a\""],
            ),
            (
                json!({"containers": [container(json!({"ports": [
                    {"containerPort": 70000, "protocol": "TCP"},
                    {"containerPort": 80, "protocol": "HTTP"}]}))]}),
                vec![
                    "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                    "spec.containers[0].ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                ],
            ),
            (
                json!({"containers": [container(json!({"ports": [
                    {"name": "web", "containerPort": 80, "protocol": "TCP"},
                    {"name": "web", "containerPort": 81, "protocol": "TCP"}]}))]}),
                vec!["spec.containers[0].ports[1].name: Duplicate value: \"web\""],
            ),
            (
                json!({"containers": [container(json!({"ports": [
                    {"name": "web_port", "containerPort": 80, "protocol": "TCP"}]}))]}),
                vec![
                    "spec.containers[0].ports[0].name: Invalid value: \"web_port\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                ],
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(spec_errors(spec.clone()), want, "{spec}");
        }
    }

    #[test]
    fn grace_period_rules() {
        let cases = [
            (
                "requested wins",
                json!({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30}}),
                Some(5),
                5,
            ),
            (
                "spec default",
                json!({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30}}),
                None,
                30,
            ),
            (
                "unscheduled is immediate",
                json!({"spec": {"terminationGracePeriodSeconds": 30}}),
                Some(10),
                0,
            ),
            (
                "terminal is immediate",
                json!({"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}}),
                Some(10),
                0,
            ),
            (
                "negative becomes one",
                json!({"spec": {"nodeName": "n"}}),
                Some(-3),
                1,
            ),
        ];
        for (name, obj, requested, want) in cases {
            assert_eq!(pod_grace_period(&obj, requested), want, "case {name}");
        }
    }

    #[test]
    fn spec_update_rules() {
        let old = json!({"containers": [{"name": "c", "image": "a"}], "nodeName": "", "tolerations": [{"key": "k"}]});
        let image = json!({"containers": [{"name": "c", "image": "b"}], "nodeName": "", "tolerations": [{"key": "k"}]});
        let node = json!({"containers": [{"name": "c", "image": "a"}], "nodeName": "x", "tolerations": [{"key": "k"}]});
        let more_tol = json!({"containers": [{"name": "c", "image": "a"}], "nodeName": "", "tolerations": [{"key": "k"}, {"key": "j"}]});
        let less_tol = json!({"containers": [{"name": "c", "image": "a"}], "nodeName": ""});
        assert!(spec_update_allowed(Some(&image), Some(&old)));
        assert!(!spec_update_allowed(Some(&node), Some(&old)));
        assert!(spec_update_allowed(Some(&more_tol), Some(&old)));
        assert!(!spec_update_allowed(Some(&less_tol), Some(&old)));
    }

    #[test]
    fn qos_classes() {
        let spec = |res: Value| -> PodSpec {
            serde_json::from_value(json!({"containers": [{"name": "c", "resources": res}]}))
                .expect("spec")
        };
        assert_eq!(qos_class(&spec(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&spec(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
    }
}
