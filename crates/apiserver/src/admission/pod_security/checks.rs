//! The Pod Security Standards checks (`baseline` and `restricted`), each with upstream's reason and detail texts (`staging/src/k8s.io/pod-security-admission/policy/check_*.go`).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::pointer::At;

/// One failed check: the reason and its detail, as upstream's `CheckResult`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// `privileged`, `runAsNonRoot != true`, ...
    pub reason: &'static str,
    /// Which containers or volumes, and what they must (not) set.
    pub detail: String,
}

/// A check: the pod's metadata (when there is one) and spec in, a violation out.
type Check = fn(Option<&Value>, &Value) -> Option<Violation>;

/// The baseline checks in upstream's (ID-sorted) order, with whether the restricted level
/// replaces each by a stricter check (`OverrideCheckIDs`).
const BASELINE: &[(&str, Check, bool)] = &[
    ("appArmorProfile", app_armor_profile, false),
    (
        "capabilities_baseline",
        |_, s| capabilities_baseline(s),
        true,
    ),
    ("hostNamespaces", |_, s| host_namespaces(s), false),
    ("hostPathVolumes", |_, s| host_path_volumes(s), true),
    ("hostPorts", |_, s| host_ports(s), false),
    ("privileged", |_, s| privileged(s), false),
    ("procMount", |_, s| proc_mount(s), false),
    ("seLinuxOptions", |_, s| se_linux_options(s), false),
    ("seccompProfile_baseline", |_, s| seccomp_baseline(s), true),
    ("sysctls", |_, s| sysctls(s), false),
    ("windowsHostProcess", |_, s| windows_host_process(s), false),
];

/// The restricted-only checks in upstream's (ID-sorted) order.
const RESTRICTED: &[(&str, Check)] = &[
    ("allowPrivilegeEscalation", |_, s| {
        allow_privilege_escalation(s)
    }),
    ("capabilities_restricted", |_, s| capabilities_restricted(s)),
    ("restrictedVolumes", |_, s| restricted_volumes(s)),
    ("runAsNonRoot", |_, s| run_as_non_root(s)),
    ("runAsUser", |_, s| run_as_user(s)),
    ("seccompProfile_restricted", |_, s| seccomp_restricted(s)),
];

/// The violations of a pod (its `metadata`, if any, and `spec`) at the `baseline` level, or
/// at `restricted`.
pub fn evaluate(metadata: Option<&Value>, spec: &Value, restricted: bool) -> Vec<Violation> {
    let mut out: Vec<Violation> = BASELINE
        .iter()
        .filter(|(_, _, overridden)| !(restricted && *overridden))
        .filter_map(|(_, check, _)| check(metadata, spec))
        .collect();
    if restricted {
        out.extend(
            RESTRICTED
                .iter()
                .filter_map(|(_, check)| check(metadata, spec)),
        );
    }
    out
}

/// Violations as upstream's `ForbiddenDetail`: `reason (detail), reason (detail)`.
pub fn forbidden_detail(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            if v.detail.is_empty() {
                v.reason.to_owned()
            } else {
                format!("{} ({})", v.reason, v.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every container: init, regular and ephemeral (upstream's `visitContainers`).
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |f| spec.get(f).and_then(Value::as_array).into_iter().flatten())
}

fn name(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or("")
}

fn sc<'a>(c: &'a Value, field: &str) -> Option<&'a Value> {
    c.get("securityContext").and_then(|s| s.get(field))
}

/// `word` or `plural` by count (upstream's `pluralize`).
fn pluralize<'a>(word: &'a str, plural: &'a str, n: usize) -> &'a str {
    if n == 1 { word } else { plural }
}

/// `"a", "b"` (upstream's `joinQuote`: quotes around each item, nothing inside escaped).
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let joined: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", joined.join("\", \""))
}

/// Who sets something `bad`: `pod` when the pod spec does, then the containers that do
/// (`container "a"` / `containers "a", "b"`), as upstream's checks list them.
fn setters(spec: &Value, mut bad: impl FnMut(&Value) -> bool) -> Vec<String> {
    let mut setters = Vec::new();
    if bad(spec) {
        setters.push("pod".to_owned());
    }
    let names: Vec<String> = containers(spec)
        .filter(|c| bad(c))
        .map(|c| name(c).to_owned())
        .collect();
    if !names.is_empty() {
        setters.push(containers_phrase(&names));
    }
    setters
}

fn containers_phrase(names: &[String]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// The deprecated per-container AppArmor annotation's key prefix.
const APP_ARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// Whether an AppArmor annotation's value is allowed at baseline: empty, `runtime/default`
/// or `localhost/*`.
fn allowed_app_armor_annotation(value: &str) -> bool {
    value.is_empty() || value == "runtime/default" || value.starts_with("localhost/")
}

/// Whether `securityContext.appArmorProfile` is missing or of an allowed type
/// (`RuntimeDefault`, `Localhost`); the bad type otherwise.
fn bad_app_armor_type(holder: &Value) -> Option<&str> {
    let profile = holder.get("securityContext")?.get("appArmorProfile")?;
    if profile.is_null() {
        return None;
    }
    let kind = profile.get("type").and_then(Value::as_str).unwrap_or("");
    (!matches!(kind, "RuntimeDefault" | "Localhost")).then_some(kind)
}

/// Upstream's `appArmorProfile` check: no `Unconfined` (or other) profile type on the pod or
/// a container, no AppArmor annotation naming anything but the runtime default or a local
/// profile.
fn app_armor_profile(metadata: Option<&Value>, spec: &Value) -> Option<Violation> {
    let mut types = BTreeSet::new();
    let mut setters = setters(spec, |holder| {
        bad_app_armor_type(holder)
            .map(|kind| types.insert(kind.to_owned()))
            .is_some()
    });
    let mut annotations: Vec<String> = metadata
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let v = v.as_str().unwrap_or("");
            (k.starts_with(APP_ARMOR_ANNOTATION_PREFIX) && !allowed_app_armor_annotation(v))
                .then(|| format!("{k}={v:?}"))
        })
        .collect();
    annotations.sort();
    let mut values: Vec<String> = types.into_iter().collect();
    if !annotations.is_empty() {
        setters.push(pluralize("annotation", "annotations", annotations.len()).to_owned());
        values.extend(annotations);
    }
    (!setters.is_empty()).then(|| Violation {
        reason: pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        detail: format!(
            "{} must not set AppArmor profile type to {}",
            setters.join(" and "),
            join_quote(&values)
        ),
    })
}

/// Upstream's `seLinuxOptions` check: SELinux types only `container_t`, `container_init_t`,
/// `container_kvm_t` (or unset); no user or role. (As upstream, the user and role parts of the
/// detail are written only when a bad type was also set.)
fn se_linux_options(spec: &Value) -> Option<Violation> {
    const ALLOWED_TYPES: [&str; 4] = ["", "container_t", "container_init_t", "container_kvm_t"];
    let mut types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |holder: &Value| -> bool {
        let Some(options) = holder
            .get("securityContext")
            .and_then(|s| s.get("seLinuxOptions"))
            .filter(|o| !o.is_null())
        else {
            return true;
        };
        let field = |f: &str| options.get(f).and_then(Value::as_str).unwrap_or("");
        let mut ok = true;
        if !ALLOWED_TYPES.contains(&field("type")) {
            ok = false;
            types.insert(field("type").to_owned());
        }
        if !field("user").is_empty() {
            ok = false;
            set_user = true;
        }
        if !field("role").is_empty() {
            ok = false;
            set_role = true;
        }
        ok
    };
    let setters = setters(spec, |holder| !valid(holder));
    if setters.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !types.is_empty() {
        let types: Vec<String> = types.into_iter().collect();
        data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
        if set_user {
            data.push("user may not be set".to_owned());
        }
        if set_role {
            data.push("role may not be set".to_owned());
        }
    }
    Some(Violation {
        reason: "seLinuxOptions",
        detail: format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.join(" and "),
            data.join("; ")
        ),
    })
}

/// Upstream's `windowsHostProcess` check: neither the pod nor a container sets
/// `securityContext.windowsOptions.hostProcess=true`.
fn windows_host_process(spec: &Value) -> Option<Violation> {
    let host_process = |holder: &Value| {
        holder.at("/securityContext/windowsOptions/hostProcess") == Some(&Value::Bool(true))
    };
    let setters = setters(spec, host_process);
    (!setters.is_empty()).then(|| Violation {
        reason: "hostProcess",
        detail: format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
        ),
    })
}

fn privileged(spec: &Value) -> Option<Violation> {
    let bad: Vec<String> = containers(spec)
        .filter(|c| sc(c, "privileged").and_then(Value::as_bool) == Some(true))
        .map(|c| name(c).to_owned())
        .collect();
    (!bad.is_empty()).then(|| Violation {
        reason: "privileged",
        detail: format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&bad)
        ),
    })
}

fn host_namespaces(spec: &Value) -> Option<Violation> {
    let set: Vec<&str> = [
        ("hostNetwork", "hostNetwork=true"),
        ("hostPID", "hostPID=true"),
        ("hostIPC", "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(field, _)| spec.get(field).and_then(Value::as_bool) == Some(true))
    .map(|(_, text)| text)
    .collect();
    (!set.is_empty()).then(|| Violation {
        reason: "host namespaces",
        detail: set.join(", "),
    })
}

fn volumes(spec: &Value) -> impl Iterator<Item = &Value> {
    spec.get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn host_path_volumes(spec: &Value) -> Option<Violation> {
    let bad: Vec<String> = volumes(spec)
        .filter(|v| v.get("hostPath").is_some())
        .map(|v| name(v).to_owned())
        .collect();
    (!bad.is_empty()).then(|| Violation {
        reason: "hostPath volumes",
        detail: format!(
            "{} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad)
        ),
    })
}

fn host_ports(spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut ports = Vec::new();
    for c in containers(spec) {
        let mut uses = false;
        for p in c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(port) = p.get("hostPort").and_then(Value::as_i64)
                && port != 0
            {
                uses = true;
                ports.push(port.to_string());
            }
        }
        if uses {
            bad.push(name(c).to_owned());
        }
    }
    (!bad.is_empty()).then(|| Violation {
        reason: "hostPort",
        detail: format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    })
}

/// Capabilities a baseline container may add.
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn added_capabilities(c: &Value) -> impl Iterator<Item = &str> {
    sc(c, "capabilities")
        .and_then(|caps| caps.get("add"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The containers adding capabilities outside `allowed`, and those capabilities (sorted).
fn forbidden_adds(spec: &Value, allowed: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut bad = Vec::new();
    let mut caps = BTreeSet::new();
    for c in containers(spec) {
        let mut found = false;
        for cap in added_capabilities(c) {
            if !allowed.contains(&cap) {
                found = true;
                caps.insert(cap.to_owned());
            }
        }
        if found {
            bad.push(name(c).to_owned());
        }
    }
    (bad, caps.into_iter().collect())
}

fn capabilities_baseline(spec: &Value) -> Option<Violation> {
    let (bad, caps) = forbidden_adds(spec, BASELINE_CAPABILITIES);
    (!bad.is_empty()).then(|| Violation {
        reason: "non-default capabilities",
        detail: format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad),
            join_quote(&caps)
        ),
    })
}

fn proc_mount(spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut kinds = BTreeSet::new();
    for c in containers(spec) {
        if let Some(kind) = sc(c, "procMount").and_then(Value::as_str)
            && kind != "Default"
        {
            bad.push(name(c).to_owned());
            kinds.insert(kind.to_owned());
        }
    }
    let kinds: Vec<String> = kinds.into_iter().collect();
    (!bad.is_empty()).then(|| Violation {
        reason: "procMount",
        detail: format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&bad),
            join_quote(&kinds)
        ),
    })
}

fn seccomp_type(context: Option<&Value>) -> Option<&str> {
    context
        .and_then(|s| s.get("seccompProfile"))
        .and_then(|p| p.get("type"))
        .and_then(Value::as_str)
}

fn seccomp_baseline(spec: &Value) -> Option<Violation> {
    let mut details = Vec::new();
    if seccomp_type(spec.get("securityContext")) == Some("Unconfined") {
        details.push(
            "pod must not set securityContext.seccompProfile.type to \"Unconfined\"".to_owned(),
        );
    }
    let bad: Vec<String> = containers(spec)
        .filter(|c| seccomp_type(c.get("securityContext")) == Some("Unconfined"))
        .map(|c| name(c).to_owned())
        .collect();
    if !bad.is_empty() {
        details.push(format!(
            "{} must not set securityContext.seccompProfile.type to \"Unconfined\"",
            containers_phrase(&bad)
        ));
    }
    (!details.is_empty()).then(|| Violation {
        reason: "seccompProfile",
        detail: details.join("; "),
    })
}

/// Sysctls a baseline pod may set (the latest version's list).
const ALLOWED_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

fn sysctls(spec: &Value) -> Option<Violation> {
    let bad: Vec<&str> = spec
        .at("/securityContext/sysctls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .filter(|n| !ALLOWED_SYSCTLS.contains(n))
        .collect();
    (!bad.is_empty()).then(|| Violation {
        reason: "forbidden sysctls",
        detail: bad.join(", "),
    })
}

fn allow_privilege_escalation(spec: &Value) -> Option<Violation> {
    let bad: Vec<String> = containers(spec)
        .filter(|c| sc(c, "allowPrivilegeEscalation").and_then(Value::as_bool) != Some(false))
        .map(|c| name(c).to_owned())
        .collect();
    (!bad.is_empty()).then(|| Violation {
        reason: "allowPrivilegeEscalation != false",
        detail: format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad)
        ),
    })
}

fn capabilities_restricted(spec: &Value) -> Option<Violation> {
    let missing_drop_all: Vec<String> = containers(spec)
        .filter(|c| {
            !sc(c, "capabilities")
                .and_then(|caps| caps.get("drop"))
                .and_then(Value::as_array)
                .is_some_and(|d| d.iter().any(|x| x.as_str() == Some("ALL")))
        })
        .map(|c| name(c).to_owned())
        .collect();
    let (adding, caps) = forbidden_adds(spec, &["NET_BIND_SERVICE"]);
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&caps)
        ));
    }
    (!details.is_empty()).then(|| Violation {
        reason: "unrestricted capabilities",
        detail: details.join("; "),
    })
}

/// Volume sources a restricted pod may use.
const ALLOWED_VOLUME_TYPES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

fn restricted_volumes(spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut kinds = BTreeSet::new();
    for v in volumes(spec) {
        let Some(fields) = v.as_object() else {
            continue;
        };
        let sources: Vec<&str> = fields
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "name")
            .collect();
        let forbidden: Vec<&str> = sources
            .iter()
            .copied()
            .filter(|k| !ALLOWED_VOLUME_TYPES.contains(k))
            .collect();
        if !forbidden.is_empty() {
            bad.push(name(v).to_owned());
            kinds.extend(forbidden.into_iter().map(str::to_owned));
        } else if sources.is_empty() {
            bad.push(name(v).to_owned());
            kinds.insert("unknown".to_owned());
        }
    }
    let kinds: Vec<String> = kinds.into_iter().collect();
    (!bad.is_empty()).then(|| Violation {
        reason: "restricted volume types",
        detail: format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                kinds.len()
            ),
            join_quote(&kinds)
        ),
    })
}

fn run_as_non_root(spec: &Value) -> Option<Violation> {
    let pod_context = spec.get("securityContext");
    let pod_value = pod_context
        .and_then(|s| s.get("runAsNonRoot"))
        .and_then(Value::as_bool);
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match sc(c, "runAsNonRoot").and_then(Value::as_bool) {
            Some(false) => explicit.push(name(c).to_owned()),
            Some(true) => {}
            // Not set on the container and no pod-level runAsNonRoot=true covers it.
            None if pod_value != Some(true) => implicit.push(name(c).to_owned()),
            None => {}
        }
    }
    let mut setters = Vec::new();
    if pod_value == Some(false) {
        setters.push("pod".to_owned());
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    let mut details = Vec::new();
    if !setters.is_empty() {
        details.push(format!(
            "{} must not set securityContext.runAsNonRoot=false",
            setters.join(" and ")
        ));
    }
    if !implicit.is_empty() {
        details.push(format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            containers_phrase(&implicit)
        ));
    }
    (!details.is_empty()).then(|| Violation {
        reason: "runAsNonRoot != true",
        detail: details.join("; "),
    })
}

fn run_as_user(spec: &Value) -> Option<Violation> {
    let setters = setters(spec, |holder| {
        sc(holder, "runAsUser").and_then(Value::as_i64) == Some(0)
    });
    (!setters.is_empty()).then(|| Violation {
        reason: "runAsUser=0",
        detail: format!("{} must not set runAsUser=0", setters.join(" and ")),
    })
}

fn seccomp_restricted(spec: &Value) -> Option<Violation> {
    let allowed = |t: Option<&str>| matches!(t, Some("RuntimeDefault" | "Localhost"));
    let pod_type = seccomp_type(spec.get("securityContext"));
    let mut setters = Vec::new();
    let mut bad_types = BTreeSet::new();
    if let Some(t) = pod_type
        && !allowed(Some(t))
    {
        setters.push("pod".to_owned());
        bad_types.insert(t.to_owned());
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match seccomp_type(c.get("securityContext")) {
            Some(t) if !allowed(Some(t)) => {
                explicit.push(name(c).to_owned());
                bad_types.insert(t.to_owned());
            }
            Some(_) => {}
            None if !allowed(pod_type) => implicit.push(name(c).to_owned()),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    let mut details = Vec::new();
    if !setters.is_empty() {
        let bad_types: Vec<String> = bad_types.into_iter().collect();
        details.push(format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters.join(" and "),
            join_quote(&bad_types)
        ));
    }
    if !implicit.is_empty() {
        details.push(format!(
            "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            containers_phrase(&implicit)
        ));
    }
    (!details.is_empty()).then(|| Violation {
        reason: "seccompProfile",
        detail: details.join("; "),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_privileged_pod_fails_restricted_with_upstreams_texts_in_order() {
        let spec = json!({"containers": [{"name": "c", "image": "nginx",
            "securityContext": {"privileged": true}}]});
        assert_eq!(
            forbidden_detail(&evaluate(None, &spec, true)),
            "privileged (container \"c\" must not set securityContext.privileged=true), \
             allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
             unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
        assert_eq!(
            forbidden_detail(&evaluate(None, &spec, false)),
            "privileged (container \"c\" must not set securityContext.privileged=true)"
        );
    }

    /// Upstream's `TestCheckAppArmor_*`, `TestCheckSELinuxOptions`-style and
    /// `windowsHostProcess` cases, with their expected reasons and details.
    #[test]
    fn app_armor_se_linux_and_host_process_checks_as_upstream() {
        let prefix = APP_ARMOR_ANNOTATION_PREFIX;
        let cases: Vec<(&str, Value, Value, &str)> = vec![
            (
                "allowed profiles and annotations",
                json!({"annotations": {format!("{prefix}a"): "runtime/default",
                    format!("{prefix}b"): "localhost/x", format!("{prefix}c"): "", "env": "prod"}}),
                json!({"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "foo", "securityContext":
                        {"appArmorProfile": {"type": "Localhost", "localhostProfile": "p"}}}]}),
                "",
            ),
            (
                "unconfined pod",
                json!({}),
                json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
                "forbidden AppArmor profile (pod must not set AppArmor profile type to \"Unconfined\")",
            ),
            (
                "unconfined init container",
                json!({}),
                json!({"containers": [{"name": "foo"}], "initContainers": [{"name": "bar",
                    "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]}),
                "forbidden AppArmor profile (container \"bar\" must not set AppArmor profile type to \"Unconfined\")",
            ),
            (
                "annotations",
                json!({"annotations": {format!("{prefix}"): "bogus", format!("{prefix}a"): "",
                    format!("{prefix}b"): "runtime/default", format!("{prefix}c"): "localhost/",
                    format!("{prefix}d"): "localhost/foo", format!("{prefix}e"): "unconfined",
                    format!("{prefix}f"): "unknown"}}),
                json!({}),
                "forbidden AppArmor profiles (annotations must not set AppArmor profile type to \
                 \"container.apparmor.security.beta.kubernetes.io/=\"bogus\"\", \
                 \"container.apparmor.security.beta.kubernetes.io/e=\"unconfined\"\", \
                 \"container.apparmor.security.beta.kubernetes.io/f=\"unknown\"\")",
            ),
            (
                "allowed SELinux types",
                json!({}),
                json!({"securityContext": {"seLinuxOptions": {"type": "container_t", "level": "s0"}},
                    "containers": [{"name": "a", "securityContext":
                        {"seLinuxOptions": {"type": "container_kvm_t"}}}]}),
                "",
            ),
            (
                "bad SELinux types, user and role",
                json!({}),
                json!({"securityContext": {"seLinuxOptions": {"type": "bar", "user": "u"}},
                    "containers": [{"name": "a", "securityContext":
                        {"seLinuxOptions": {"type": "foo", "role": "r"}}},
                        {"name": "b", "securityContext": {"seLinuxOptions": {"type": "container_t"}}}]}),
                "seLinuxOptions (pod and container \"a\" set forbidden securityContext.seLinuxOptions: \
                 types \"bar\", \"foo\"; user may not be set; role may not be set)",
            ),
            (
                // Upstream writes the user and role parts only beside a bad type.
                "SELinux user alone",
                json!({}),
                json!({"securityContext": {"seLinuxOptions": {"user": "u"}}}),
                "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: )",
            ),
            (
                "hostProcess",
                json!({}),
                json!({"securityContext": {"windowsOptions": {"hostProcess": true}},
                    "containers": [{"name": "a", "securityContext": {"windowsOptions": {"hostProcess": true}}},
                        {"name": "b", "securityContext": {"windowsOptions": {"hostProcess": false}}},
                        {"name": "c", "securityContext": {"windowsOptions": {"hostProcess": true}}}]}),
                "hostProcess (pod and containers \"a\", \"c\" must not set securityContext.windowsOptions.hostProcess=true)",
            ),
        ];
        for (name, metadata, spec, want) in cases {
            assert_eq!(
                forbidden_detail(&evaluate(Some(&metadata), &spec, false)),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn each_check_names_what_breaks_it() {
        struct Case {
            name: &'static str,
            spec: Value,
            restricted: bool,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "a compliant restricted pod",
                spec: json!({"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": false,
                        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}],
                    "volumes": [{"name": "t", "projected": {"sources": []}}]}),
                restricted: true,
                want: "",
            },
            Case {
                name: "host namespaces",
                spec: json!({"hostNetwork": true, "hostIPC": true, "containers": [{"name": "c"}]}),
                restricted: false,
                want: "host namespaces (hostNetwork=true, hostIPC=true)",
            },
            Case {
                name: "host ports and hostPath",
                spec: json!({"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}, {"containerPort": 443, "hostPort": 443}]}],
                    "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
                restricted: false,
                want: "hostPath volumes (volume \"root\"), hostPort (container \"a\" uses hostPorts 80, 443)",
            },
            Case {
                name: "non-default capabilities of two containers",
                spec: json!({"containers": [
                    {"name": "a", "securityContext": {"capabilities": {"add": ["SYS_TIME", "CHOWN"]}}},
                    {"name": "b", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]}),
                restricted: false,
                want: "non-default capabilities (containers \"a\", \"b\" must not include \"NET_ADMIN\", \"SYS_TIME\" in securityContext.capabilities.add)",
            },
            Case {
                name: "sysctls, procMount and unconfined seccomp",
                spec: json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}], "seccompProfile": {"type": "Unconfined"}},
                    "containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]}),
                restricted: false,
                want: "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\"), \
                       seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\"), \
                       forbidden sysctls (kernel.msgmax)",
            },
            Case {
                name: "restricted volumes, root user and explicit runAsNonRoot=false",
                spec: json!({"securityContext": {"runAsNonRoot": false, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
                    "volumes": [{"name": "data", "nfs": {"server": "s", "path": "/"}}]}),
                restricted: true,
                want: "restricted volume types (volume \"data\" uses restricted volume type \"nfs\"), \
                       runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false; \
                       pod or container \"c\" must set securityContext.runAsNonRoot=true), \
                       runAsUser=0 (pod must not set runAsUser=0)",
            },
        ];
        for case in cases {
            assert_eq!(
                forbidden_detail(&evaluate(None, &case.spec, case.restricted)),
                case.want.split_whitespace().collect::<Vec<_>>().join(" "),
                "{}",
                case.name
            );
        }
    }
}
