//! The Pod Security Standards checks (`baseline` and `restricted`) with their revisions by policy version, as upstream's `DefaultChecks`, each with upstream's reason and detail texts (`staging/src/k8s.io/pod-security-admission/policy/check_*.go`).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Level, LevelVersion, Version};
use crate::pointer::At;

/// One failed check: the reason and its detail, as upstream's `CheckResult`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// `privileged`, `runAsNonRoot != true`, ...
    pub reason: &'static str,
    /// Which containers or volumes, and what they must (not) set.
    pub detail: String,
}

/// A check's verdict function: the pod's metadata (when there is one) and spec in, a
/// violation out.
type CheckFn = fn(Option<&Value>, &Value) -> Option<Violation>;

/// One revision of a check (upstream's `VersionedCheck`).
struct Variant {
    /// The first `v1.N` policy version this revision applies to (`MinimumVersion`'s minor).
    since: u32,
    /// The check itself.
    check: CheckFn,
    /// Baseline check IDs this (restricted) revision replaces at the versions it applies to
    /// (`OverrideCheckIDs`).
    overrides: &'static [&'static str],
}

/// A check with its revisions (upstream's `Check`).
struct Check {
    /// Upstream's check ID.
    id: &'static str,
    /// `Baseline` (also run at restricted unless overridden) or `Restricted`.
    level: Level,
    /// Revisions by strictly increasing `since` (at least one).
    variants: &'static [Variant],
}

impl Check {
    /// The revision applied at `version`: the newest not newer than it, the newest of all at
    /// `latest` (and so at any version past the newest known); `None` when the check did not
    /// exist yet.
    fn at(&self, version: Version) -> Option<&Variant> {
        match version {
            Version::Latest => self.variants.last(),
            Version::V1(minor) => self.variants.iter().rev().find(|v| v.since <= minor),
        }
    }
}

/// A revision with no overrides.
const fn since(since: u32, check: CheckFn) -> Variant {
    Variant {
        since,
        check,
        overrides: &[],
    }
}

/// Upstream's `DefaultChecks()`: the baseline checks by ID, then the restricted ones by ID, the
/// order `checkRegistry` evaluates (and so reports) them in.
const CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        variants: &[since(0, app_armor_profile)],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        variants: &[since(0, |_, s| capabilities_baseline(s))],
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        variants: &[since(0, |_, s| host_namespaces(s))],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        variants: &[since(0, |_, s| host_path_volumes(s))],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        variants: &[since(0, |_, s| host_ports(s))],
    },
    Check {
        id: "hostProbesAndHostLifecycle",
        level: Level::Baseline,
        variants: &[since(34, |_, s| host_probes_and_lifecycle(s))],
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        variants: &[since(0, |_, s| privileged(s))],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        variants: &[
            since(0, |_, s| proc_mount(s)),
            // Pods in a user namespace may unmask /proc from 1.35.
            since(35, |_, s| unless_user_namespace(s, proc_mount)),
        ],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        variants: &[
            since(0, |_, s| se_linux_options(s, 0)),
            since(31, |_, s| se_linux_options(s, 31)),
        ],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        variants: &[
            since(0, seccomp_baseline_annotations),
            since(19, |_, s| seccomp_baseline(s)),
        ],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        variants: &[
            since(0, |_, s| sysctls(s, 0)),
            since(27, |_, s| sysctls(s, 27)),
            since(29, |_, s| sysctls(s, 29)),
            since(32, |_, s| sysctls(s, 32)),
        ],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        variants: &[since(0, |_, s| windows_host_process(s))],
    },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        variants: &[
            since(8, |_, s| allow_privilege_escalation(s)),
            since(25, |_, s| unless_windows(s, allow_privilege_escalation)),
        ],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        variants: &[
            Variant {
                since: 22,
                check: |_, s| capabilities_restricted(s),
                overrides: &["capabilities_baseline"],
            },
            Variant {
                since: 25,
                check: |_, s| unless_windows(s, capabilities_restricted),
                overrides: &["capabilities_baseline"],
            },
        ],
    },
    Check {
        id: "procMount_restricted",
        level: Level::Restricted,
        // Keeps 1.0's unconditional check where baseline's relaxes for user namespaces.
        variants: &[Variant {
            since: 35,
            check: |_, s| proc_mount(s),
            overrides: &["procMount"],
        }],
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        variants: &[Variant {
            since: 0,
            check: |_, s| restricted_volumes(s),
            overrides: &["hostPathVolumes"],
        }],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        variants: &[
            since(0, |_, s| run_as_non_root(s)),
            since(35, |_, s| unless_user_namespace(s, run_as_non_root)),
        ],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        variants: &[
            since(23, |_, s| run_as_user(s)),
            since(35, |_, s| unless_user_namespace(s, run_as_user)),
        ],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        variants: &[
            Variant {
                since: 19,
                check: |_, s| seccomp_restricted(s),
                overrides: &["seccompProfile_baseline"],
            },
            Variant {
                since: 25,
                check: |_, s| unless_windows(s, seccomp_restricted),
                overrides: &["seccompProfile_baseline"],
            },
        ],
    },
];

/// Whether a restricted check applied at `version` replaces the baseline check `id`.
fn overridden(id: &str, version: Version) -> bool {
    CHECKS
        .iter()
        .filter(|c| c.level == Level::Restricted)
        .filter_map(|c| c.at(version))
        .any(|v| v.overrides.contains(&id))
}

/// The violations of a pod (its `metadata`, if any, and `spec`) at a level and version, as
/// upstream's `checkRegistry.EvaluatePod`: the baseline checks applying at the version (at
/// restricted, those not overridden), then at restricted the restricted ones. The table is
/// walked in place, so choosing the checks allocates nothing.
pub fn evaluate(lv: LevelVersion, metadata: Option<&Value>, spec: &Value) -> Vec<Violation> {
    let restricted = match lv.level {
        Level::Privileged => return Vec::new(),
        Level::Baseline => false,
        Level::Restricted => true,
    };
    CHECKS
        .iter()
        .filter(|c| restricted || c.level == Level::Baseline)
        .filter_map(|c| Some((c, c.at(lv.version)?)))
        .filter(|(c, _)| {
            !(restricted && c.level == Level::Baseline && overridden(c.id, lv.version))
        })
        .filter_map(|(_, v)| (v.check)(metadata, spec))
        .collect()
}

/// A pod declaring `spec.os.name: windows` passes; others are checked by `check` (the 1.25
/// revisions of the checks whose fields Windows pods cannot set).
fn unless_windows(spec: &Value, check: fn(&Value) -> Option<Violation>) -> Option<Violation> {
    if spec.at("/os/name").and_then(Value::as_str) == Some("windows") {
        return None;
    }
    check(spec)
}

/// A pod in a user namespace (`spec.hostUsers: false`) passes; others are checked by `check`
/// (upstream's `relaxPolicyForUserNamespacePod`, unconditional from 1.35).
fn unless_user_namespace(
    spec: &Value,
    check: fn(&Value) -> Option<Violation>,
) -> Option<Violation> {
    if spec.get("hostUsers").and_then(Value::as_bool) == Some(false) {
        return None;
    }
    check(spec)
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

/// SELinux types a baseline pod may set, with the policy version each became allowed at.
const ALLOWED_SELINUX_TYPES: &[(&str, u32)] = &[
    ("", 0),
    ("container_t", 0),
    ("container_init_t", 0),
    ("container_kvm_t", 0),
    ("container_engine_t", 31),
];

/// Upstream's `seLinuxOptions` check at policy `v1.{minor}`: SELinux types only
/// [`ALLOWED_SELINUX_TYPES`] (or unset); no user or role. (As upstream, the user and role parts
/// of the detail are written only when a bad type was also set.)
fn se_linux_options(spec: &Value, minor: u32) -> Option<Violation> {
    let allowed = |t: &str| {
        ALLOWED_SELINUX_TYPES
            .iter()
            .any(|(name, since)| *name == t && *since <= minor)
    };
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
        if !allowed(field("type")) {
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

/// The hosts a probe or lifecycle handler names (`httpGet.host`, `tcpSocket.host`).
fn handler_hosts(handler: Option<&Value>) -> impl Iterator<Item = &str> {
    ["httpGet", "tcpSocket"]
        .into_iter()
        .filter_map(move |kind| {
            handler?
                .get(kind)?
                .get("host")?
                .as_str()
                .filter(|h| !h.is_empty())
        })
}

/// Upstream's `hostProbesAndHostLifecycle` check (from 1.34): no probe or lifecycle handler
/// names a host. (Unlike most checks, upstream lists the containers sorted.)
fn host_probes_and_lifecycle(spec: &Value) -> Option<Violation> {
    let mut bad = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for c in containers(spec) {
        let lifecycle = c.get("lifecycle");
        let handlers = [
            c.get("livenessProbe"),
            c.get("readinessProbe"),
            c.get("startupProbe"),
            lifecycle.and_then(|l| l.get("postStart")),
            lifecycle.and_then(|l| l.get("preStop")),
        ];
        for host in handlers.into_iter().flat_map(handler_hosts) {
            bad.insert(name(c).to_owned());
            hosts.insert(host.to_owned());
        }
    }
    let bad: Vec<String> = bad.into_iter().collect();
    let hosts: Vec<String> = hosts.into_iter().collect();
    (!bad.is_empty()).then(|| Violation {
        reason: "probe or lifecycle host",
        detail: format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                hosts.len()
            ),
            join_quote(&hosts)
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

/// The deprecated pod-wide seccomp annotation.
const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
/// The deprecated per-container seccomp annotation's key prefix.
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// Whether a seccomp annotation's value is allowed at baseline: the runtime's default or a
/// local profile.
fn allowed_seccomp_annotation(value: &str) -> bool {
    matches!(value, "runtime/default" | "docker/default") || value.starts_with("localhost/")
}

/// Upstream's `seccompProfile_baseline` before policy 1.19, when seccomp was set by
/// annotations: neither the pod's nor a container's annotation names an unconfined profile.
fn seccomp_baseline_annotations(metadata: Option<&Value>, spec: &Value) -> Option<Violation> {
    let annotations = metadata.and_then(|m| m.get("annotations"))?;
    let mut forbidden = BTreeSet::new();
    let mut check = |key: &str| {
        if let Some(value) = annotations.get(key).and_then(Value::as_str)
            && !allowed_seccomp_annotation(value)
        {
            forbidden.insert(format!("{key}={value:?}"));
        }
    };
    check(SECCOMP_POD_ANNOTATION);
    for c in containers(spec) {
        check(&format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", name(c)));
    }
    let forbidden: Vec<String> = forbidden.into_iter().collect();
    (!forbidden.is_empty()).then(|| Violation {
        reason: "seccompProfile",
        detail: format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", forbidden.len()),
            forbidden.join(", ")
        ),
    })
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

/// Sysctls a baseline pod may set, with the policy version each became allowed at
/// (upstream's `sysctlsAllowedV1Dot0`, `...V1Dot27`, `...V1Dot29`, `...V1Dot32`).
const ALLOWED_SYSCTLS: &[(&str, u32)] = &[
    ("kernel.shm_rmid_forced", 0),
    ("net.ipv4.ip_local_port_range", 0),
    ("net.ipv4.ip_unprivileged_port_start", 0),
    ("net.ipv4.tcp_syncookies", 0),
    ("net.ipv4.ping_group_range", 0),
    ("net.ipv4.ip_local_reserved_ports", 27),
    ("net.ipv4.tcp_keepalive_time", 29),
    ("net.ipv4.tcp_fin_timeout", 29),
    ("net.ipv4.tcp_keepalive_intvl", 29),
    ("net.ipv4.tcp_keepalive_probes", 29),
    ("net.ipv4.tcp_rmem", 32),
    ("net.ipv4.tcp_wmem", 32),
];

/// Upstream's `sysctls` check at policy `v1.{minor}`.
fn sysctls(spec: &Value, minor: u32) -> Option<Violation> {
    let allowed = |name: &str| {
        ALLOWED_SYSCTLS
            .iter()
            .any(|(n, since)| *n == name && *since <= minor)
    };
    let bad: Vec<&str> = spec
        .at("/securityContext/sysctls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .filter(|n| !allowed(n))
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

/// Upstream's `runAsNonRoot` check: the pod or every container sets `runAsNonRoot=true`. As
/// upstream, an explicit `false` (pod or containers) is reported alone; the containers left
/// uncovered by the pod are named only when nothing sets `false`.
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
    let detail = if !setters.is_empty() {
        format!(
            "{} must not set securityContext.runAsNonRoot=false",
            setters.join(" and ")
        )
    } else if !implicit.is_empty() {
        format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            containers_phrase(&implicit)
        )
    } else {
        return None;
    };
    Some(Violation {
        reason: "runAsNonRoot != true",
        detail,
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

    fn lv(level: Level, version: Version) -> LevelVersion {
        LevelVersion { level, version }
    }

    #[test]
    fn a_privileged_pod_fails_restricted_with_upstreams_texts_in_order() {
        let spec = json!({"containers": [{"name": "c", "image": "nginx",
            "securityContext": {"privileged": true}}]});
        assert_eq!(
            forbidden_detail(&evaluate(
                lv(Level::Restricted, Version::Latest),
                None,
                &spec
            )),
            "privileged (container \"c\" must not set securityContext.privileged=true), \
             allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
             unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
        assert_eq!(
            forbidden_detail(&evaluate(lv(Level::Baseline, Version::Latest), None, &spec)),
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
                forbidden_detail(&evaluate(
                    lv(Level::Baseline, Version::Latest),
                    Some(&metadata),
                    &spec
                )),
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
            level: Level,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "a compliant restricted pod",
                spec: json!({"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": false,
                        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}],
                    "volumes": [{"name": "t", "projected": {"sources": []}}]}),
                level: Level::Restricted,
                want: "",
            },
            Case {
                name: "host namespaces",
                spec: json!({"hostNetwork": true, "hostIPC": true, "containers": [{"name": "c"}]}),
                level: Level::Baseline,
                want: "host namespaces (hostNetwork=true, hostIPC=true)",
            },
            Case {
                name: "host ports and hostPath",
                spec: json!({"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}, {"containerPort": 443, "hostPort": 443}]}],
                    "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
                level: Level::Baseline,
                want: "hostPath volumes (volume \"root\"), hostPort (container \"a\" uses hostPorts 80, 443)",
            },
            Case {
                name: "non-default capabilities of two containers",
                spec: json!({"containers": [
                    {"name": "a", "securityContext": {"capabilities": {"add": ["SYS_TIME", "CHOWN"]}}},
                    {"name": "b", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]}),
                level: Level::Baseline,
                want: "non-default capabilities (containers \"a\", \"b\" must not include \"NET_ADMIN\", \"SYS_TIME\" in securityContext.capabilities.add)",
            },
            Case {
                name: "sysctls, procMount and unconfined seccomp",
                spec: json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}], "seccompProfile": {"type": "Unconfined"}},
                    "containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]}),
                level: Level::Baseline,
                want: "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\"), \
                       seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\"), \
                       forbidden sysctls (kernel.msgmax)",
            },
            Case {
                name: "restricted volumes, root user and explicit runAsNonRoot=false",
                spec: json!({"securityContext": {"runAsNonRoot": false, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
                    "volumes": [{"name": "data", "nfs": {"server": "s", "path": "/"}}]}),
                level: Level::Restricted,
                // An explicit false is reported alone, not the container it leaves uncovered.
                want: "restricted volume types (volume \"data\" uses restricted volume type \"nfs\"), \
                       runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false), \
                       runAsUser=0 (pod must not set runAsUser=0)",
            },
        ];
        for case in cases {
            assert_eq!(
                forbidden_detail(&evaluate(lv(case.level, Version::Latest), None, &case.spec)),
                case.want.split_whitespace().collect::<Vec<_>>().join(" "),
                "{}",
                case.name
            );
        }
    }
    /// As upstream's `validateChecks`: unique IDs, baseline checks sorted by ID before the
    /// restricted ones sorted by ID, strictly increasing revisions, overrides only from
    /// restricted checks onto baseline ones.
    #[test]
    fn the_check_table_is_valid_and_in_upstreams_order() {
        let ids = |level| {
            CHECKS
                .iter()
                .filter(move |c| c.level == level)
                .map(|c| c.id)
        };
        let baseline: Vec<&str> = ids(Level::Baseline).collect();
        let restricted: Vec<&str> = ids(Level::Restricted).collect();
        assert!(baseline.is_sorted(), "{baseline:?}");
        assert!(restricted.is_sorted(), "{restricted:?}");
        assert_eq!(baseline.len() + restricted.len(), CHECKS.len());
        let order: Vec<&str> = CHECKS.iter().map(|c| c.id).collect();
        assert_eq!(order, [baseline, restricted.clone()].concat());
        for check in CHECKS {
            assert!(!check.variants.is_empty(), "{}", check.id);
            assert!(
                check.variants.windows(2).all(|w| w[0].since < w[1].since),
                "{}",
                check.id
            );
            for variant in check.variants {
                for target in variant.overrides {
                    assert_eq!(check.level, Level::Restricted, "{}", check.id);
                    assert!(
                        CHECKS
                            .iter()
                            .any(|c| c.id == *target && c.level == Level::Baseline),
                        "{} overrides {target}",
                        check.id
                    );
                }
            }
        }
    }

    /// A pod spec passing every restricted check but what `container` (the securityContext of
    /// its one container "c") and `extra` (pod-level fields) change.
    fn restricted_pod(container: Value, extra: Value) -> Value {
        let mut spec = json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "nginx", "securityContext": container}],
        });
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                spec.insert(k.clone(), v.clone());
            }
        }
        spec
    }

    /// Upstream's `checkRegistry` at pinned versions: each check's revision at the version, no
    /// check before it exists, restricted overrides only where the overriding revision applies.
    #[test]
    fn each_version_is_evaluated_with_its_own_checks() {
        struct Case {
            name: &'static str,
            level: Level,
            versions: &'static [Version],
            metadata: Value,
            spec: Value,
            want: &'static str,
        }
        use Level::{Baseline, Restricted};
        use Version::{Latest, V1};
        let compliant =
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
        let no_drop = json!({"allowPrivilegeEscalation": false});
        let net_raw = json!({"allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"], "add": ["NET_RAW"]}});
        let sysctl = |name: &str| {
            json!({"securityContext": {"sysctls": [{"name": name, "value": "1"}]},
            "containers": [{"name": "c"}]})
        };
        let cases = [
            Case {
                name: "a restricted pod is allowed from v1.0 to latest",
                level: Restricted,
                versions: &[V1(0), V1(22), V1(35), Latest],
                metadata: json!({}),
                spec: restricted_pod(compliant.clone(), json!({})),
                want: "",
            },
            Case {
                name: "capabilities_restricted does not exist before v1.22",
                level: Restricted,
                versions: &[V1(8), V1(21)],
                metadata: json!({}),
                spec: restricted_pod(no_drop.clone(), json!({})),
                want: "",
            },
            Case {
                name: "capabilities_restricted requires drop ALL from v1.22",
                level: Restricted,
                versions: &[V1(22), V1(30), Latest],
                metadata: json!({}),
                spec: restricted_pod(no_drop.clone(), json!({})),
                want: "unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"])",
            },
            Case {
                name: "runAsUser=0 passes before v1.23",
                level: Restricted,
                versions: &[V1(22)],
                metadata: json!({}),
                spec: restricted_pod(
                    compliant.clone(),
                    json!({"securityContext":
                    {"runAsNonRoot": true, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}}),
                ),
                want: "",
            },
            Case {
                name: "runAsUser=0 is refused from v1.23",
                level: Restricted,
                versions: &[V1(23), Latest],
                metadata: json!({}),
                spec: restricted_pod(
                    compliant.clone(),
                    json!({"securityContext":
                    {"runAsNonRoot": true, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}}),
                ),
                want: "runAsUser=0 (pod must not set runAsUser=0)",
            },
            Case {
                name: "ip_local_reserved_ports is forbidden before v1.27",
                level: Baseline,
                versions: &[V1(0), V1(26)],
                metadata: json!({}),
                spec: sysctl("net.ipv4.ip_local_reserved_ports"),
                want: "forbidden sysctls (net.ipv4.ip_local_reserved_ports)",
            },
            Case {
                name: "ip_local_reserved_ports is safe from v1.27",
                level: Baseline,
                versions: &[V1(27), V1(31), Latest],
                metadata: json!({}),
                spec: sysctl("net.ipv4.ip_local_reserved_ports"),
                want: "",
            },
            Case {
                name: "tcp_keepalive_time is forbidden before v1.29",
                level: Baseline,
                versions: &[V1(28)],
                metadata: json!({}),
                spec: sysctl("net.ipv4.tcp_keepalive_time"),
                want: "forbidden sysctls (net.ipv4.tcp_keepalive_time)",
            },
            Case {
                name: "tcp_rmem is forbidden before v1.32",
                level: Restricted,
                versions: &[V1(29), V1(31)],
                metadata: json!({}),
                spec: restricted_pod(
                    compliant.clone(),
                    json!({"securityContext": {"runAsNonRoot": true,
                    "seccompProfile": {"type": "RuntimeDefault"},
                    "sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "1"}]}}),
                ),
                want: "forbidden sysctls (net.ipv4.tcp_rmem)",
            },
            Case {
                name: "tcp_rmem is safe from v1.32",
                level: Baseline,
                versions: &[V1(32), Latest],
                metadata: json!({}),
                spec: sysctl("net.ipv4.tcp_rmem"),
                want: "",
            },
            Case {
                name: "an Unconfined seccompProfile field passes baseline before v1.19",
                level: Baseline,
                versions: &[V1(0), V1(18)],
                metadata: json!({}),
                spec: json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}},
                    "containers": [{"name": "c"}]}),
                want: "",
            },
            Case {
                name: "an Unconfined seccompProfile field fails baseline from v1.19",
                level: Baseline,
                versions: &[V1(19), Latest],
                metadata: json!({}),
                spec: json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}},
                    "containers": [{"name": "c"}]}),
                want: "seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")",
            },
            Case {
                name: "before v1.19 the seccomp annotations are checked",
                level: Baseline,
                versions: &[V1(18)],
                metadata: json!({"annotations": {
                    "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
                    "container.seccomp.security.alpha.kubernetes.io/c": "runtime/default",
                    "container.seccomp.security.alpha.kubernetes.io/d": "unconfined",
                    "container.seccomp.security.alpha.kubernetes.io/e": "localhost/p"}}),
                spec: json!({"containers": [{"name": "c"}, {"name": "d"}, {"name": "e"}]}),
                want: "seccompProfile (forbidden annotations \
                       container.seccomp.security.alpha.kubernetes.io/d=\"unconfined\", \
                       seccomp.security.alpha.kubernetes.io/pod=\"unconfined\")",
            },
            Case {
                name: "the seccomp annotations are not checked from v1.19",
                level: Baseline,
                versions: &[V1(19), Latest],
                metadata: json!({"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}),
                spec: json!({"containers": [{"name": "c"}]}),
                want: "",
            },
            Case {
                name: "capabilities_baseline reports NET_RAW before capabilities_restricted exists",
                level: Restricted,
                versions: &[V1(21)],
                metadata: json!({}),
                spec: restricted_pod(net_raw.clone(), json!({})),
                want: "non-default capabilities (container \"c\" must not include \"NET_RAW\" in securityContext.capabilities.add)",
            },
            Case {
                name: "capabilities_restricted overrides capabilities_baseline from v1.22",
                level: Restricted,
                versions: &[V1(22), V1(25), Latest],
                metadata: json!({}),
                spec: restricted_pod(net_raw.clone(), json!({})),
                want: "unrestricted capabilities (container \"c\" must not include \"NET_RAW\" in securityContext.capabilities.add)",
            },
            Case {
                name: "baseline keeps capabilities_baseline at every version",
                level: Baseline,
                versions: &[V1(21), V1(22), Latest],
                metadata: json!({}),
                spec: restricted_pod(net_raw, json!({})),
                want: "non-default capabilities (container \"c\" must not include \"NET_RAW\" in securityContext.capabilities.add)",
            },
            Case {
                name: "restricted before v1.8 has only restrictedVolumes and runAsNonRoot of its own",
                level: Restricted,
                versions: &[V1(0), V1(7)],
                metadata: json!({}),
                spec: json!({"containers": [{"name": "c"}]}),
                want: "runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true)",
            },
            Case {
                name: "container_engine_t is forbidden before v1.31",
                level: Baseline,
                versions: &[V1(30)],
                metadata: json!({}),
                spec: json!({"containers": [{"name": "c", "securityContext":
                    {"seLinuxOptions": {"type": "container_engine_t"}}}]}),
                want: "seLinuxOptions (container \"c\" set forbidden securityContext.seLinuxOptions: type \"container_engine_t\")",
            },
            Case {
                name: "container_engine_t is allowed from v1.31",
                level: Baseline,
                versions: &[V1(31), Latest],
                metadata: json!({}),
                spec: json!({"containers": [{"name": "c", "securityContext":
                    {"seLinuxOptions": {"type": "container_engine_t"}}}]}),
                want: "",
            },
            Case {
                name: "probe and lifecycle hosts pass before v1.34",
                level: Baseline,
                versions: &[V1(33)],
                metadata: json!({}),
                spec: json!({"containers": [{"name": "c",
                    "livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}}}]}),
                want: "",
            },
            Case {
                name: "probe and lifecycle hosts are refused from v1.34",
                level: Baseline,
                versions: &[V1(34), Latest],
                metadata: json!({}),
                spec: json!({"initContainers": [{"name": "z",
                        "lifecycle": {"preStop": {"tcpSocket": {"host": "b", "port": 1}}}}],
                    "containers": [{"name": "a",
                        "readinessProbe": {"tcpSocket": {"host": "a", "port": 1}},
                        "startupProbe": {"httpGet": {"host": "", "port": 1}},
                        "lifecycle": {"postStart": {"httpGet": {"host": "b", "port": 1}}}}]}),
                want: "probe or lifecycle host (containers \"a\", \"z\" use probe or lifecycle hosts \"a\", \"b\")",
            },
            Case {
                name: "an unmasked /proc fails baseline before v1.35 even in a user namespace",
                level: Baseline,
                versions: &[V1(34)],
                metadata: json!({}),
                spec: json!({"hostUsers": false, "containers": [{"name": "c",
                    "securityContext": {"procMount": "Unmasked"}}]}),
                want: "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")",
            },
            Case {
                name: "an unmasked /proc passes baseline in a user namespace from v1.35",
                level: Baseline,
                versions: &[V1(35), Latest],
                metadata: json!({}),
                spec: json!({"hostUsers": false, "containers": [{"name": "c",
                    "securityContext": {"procMount": "Unmasked"}}]}),
                want: "",
            },
            Case {
                name: "procMount_restricted replaces procMount from v1.35 (one entry)",
                level: Restricted,
                versions: &[V1(34), V1(35), Latest],
                metadata: json!({}),
                spec: restricted_pod(
                    json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "procMount": "Unmasked"}),
                    json!({"hostUsers": false}),
                ),
                want: "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")",
            },
            Case {
                name: "runAsNonRoot and runAsUser are not required in a user namespace from v1.35",
                level: Restricted,
                versions: &[V1(35), Latest],
                metadata: json!({}),
                spec: restricted_pod(
                    compliant.clone(),
                    json!({"hostUsers": false,
                    "securityContext": {"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}}),
                ),
                want: "",
            },
            Case {
                name: "runAsNonRoot and runAsUser apply in a user namespace before v1.35",
                level: Restricted,
                versions: &[V1(34)],
                metadata: json!({}),
                spec: restricted_pod(
                    compliant,
                    json!({"hostUsers": false,
                    "securityContext": {"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}}),
                ),
                want: "runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
                       runAsUser=0 (pod must not set runAsUser=0)",
            },
            Case {
                name: "a Windows pod needs allowPrivilegeEscalation, capabilities and seccomp before v1.25",
                level: Restricted,
                versions: &[V1(24)],
                metadata: json!({}),
                spec: json!({"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": true},
                    "containers": [{"name": "c"}]}),
                want: "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
                       unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
                       seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")",
            },
            Case {
                name: "a Windows pod is exempt from those from v1.25",
                level: Restricted,
                versions: &[V1(25), Latest],
                metadata: json!({}),
                spec: json!({"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": true},
                    "containers": [{"name": "c"}]}),
                want: "",
            },
        ];
        for case in cases {
            for &version in case.versions {
                assert_eq!(
                    forbidden_detail(&evaluate(
                        lv(case.level, version),
                        Some(&case.metadata),
                        &case.spec
                    )),
                    case.want.split_whitespace().collect::<Vec<_>>().join(" "),
                    "{} at {version}",
                    case.name
                );
            }
        }
    }

    /// A version newer than any check's newest revision is evaluated as `latest` (upstream caps
    /// it at the registry's `maxVersion`).
    #[test]
    fn a_version_past_the_newest_known_is_latest() {
        let specs = [
            json!({"containers": [{"name": "c", "securityContext": {"privileged": true}}]}),
            restricted_pod(json!({"allowPrivilegeEscalation": false}), json!({})),
            restricted_pod(
                json!({"capabilities": {"add": ["NET_RAW"]}, "procMount": "Unmasked"}),
                json!({"hostUsers": false, "os": {"name": "windows"}}),
            ),
            json!({"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_wmem"}, {"name": "kernel.msgmax"}],
                "seLinuxOptions": {"type": "container_engine_t"}},
                "containers": [{"name": "c", "livenessProbe": {"httpGet": {"host": "h"}}}]}),
        ];
        for spec in &specs {
            for level in [Level::Baseline, Level::Restricted] {
                assert_eq!(
                    evaluate(lv(level, Version::V1(99)), None, spec),
                    evaluate(lv(level, Version::Latest), None, spec),
                    "{spec} at {level:?}"
                );
            }
        }
        assert!(
            !evaluate(lv(Level::Restricted, Version::V1(99)), None, &specs[1]).is_empty(),
            "v1.99 applies capabilities_restricted"
        );
    }

    /// The revision of check `id` applied at policy `v1.{minor}`, run on `spec` (upstream's
    /// tests call these revisions directly, e.g. `runAsNonRoot1_35`).
    fn run_check(id: &str, minor: u32, spec: &Value) -> Option<Violation> {
        let check = CHECKS.iter().find(|c| c.id == id).expect("known check");
        let variant = check
            .at(Version::V1(minor))
            .expect("a revision at the version");
        (variant.check)(None, spec)
    }

    /// One of upstream's per-check test cases: the pod spec, then the reason and detail it
    /// fails with (`None`: allowed).
    type CheckCase = (&'static str, Value, Option<(&'static str, &'static str)>);

    fn assert_check_cases(id: &str, minor: u32, cases: Vec<CheckCase>) {
        for (name, spec, want) in cases {
            let got = run_check(id, minor, &spec);
            let got = got.as_ref().map(|v| (v.reason, v.detail.as_str()));
            assert_eq!(got, want, "{id} at v1.{minor}: {name}");
        }
    }

    /// A container named `name` with `fields` (probes, lifecycle, securityContext) merged in.
    fn container(name: &str, fields: Value) -> Value {
        let mut c = json!({"name": name});
        if let (Some(c), Some(fields)) = (c.as_object_mut(), fields.as_object()) {
            c.extend(fields.clone());
        }
        c
    }

    /// Upstream's `TestHostProbesAndHostLifecycle` (`hostProbesAndHostLifecycleV1Dot34`): any
    /// non-empty `host` of a probe or lifecycle handler, loopback included; containers and
    /// hosts listed sorted.
    #[test]
    fn host_probes_and_lifecycle_as_upstreams_tests() {
        let reason = "probe or lifecycle host";
        let one = |name: &str, fields: Value| json!({"containers": [container(name, fields)]});
        let cases: Vec<CheckCase> = vec![
            (
                "valid pod with unset hosts",
                one(
                    "a",
                    json!({"livenessProbe": {"httpGet": {}}, "readinessProbe": {"tcpSocket": {}},
                    "lifecycle": {"postStart": {"httpGet": {}}}}),
                ),
                None,
            ),
            (
                "invalid pod with local host IP as probe host",
                one(
                    "a",
                    json!({"livenessProbe": {"httpGet": {"host": "127.0.0.1"}},
                    "readinessProbe": {"tcpSocket": {"host": "::1"}},
                    "startupProbe": {"httpGet": {"host": "localhost"}}}),
                ),
                Some((
                    reason,
                    r#"container "a" uses probe or lifecycle hosts "127.0.0.1", "::1", "localhost""#,
                )),
            ),
            (
                "invalid httpget host in liveness probe",
                one(
                    "a",
                    json!({"livenessProbe": {"httpGet": {"host": "invalid.host"}}}),
                ),
                Some((
                    reason,
                    r#"container "a" uses probe or lifecycle host "invalid.host""#,
                )),
            ),
            (
                "invalid tcpsocket host in readiness probe",
                one(
                    "b",
                    json!({"readinessProbe": {"tcpSocket": {"host": "invalid.host"}}}),
                ),
                Some((
                    reason,
                    r#"container "b" uses probe or lifecycle host "invalid.host""#,
                )),
            ),
            (
                "invalid httpget host in startup probe",
                one(
                    "c",
                    json!({"startupProbe": {"httpGet": {"host": "invalid.host"}}}),
                ),
                Some((
                    reason,
                    r#"container "c" uses probe or lifecycle host "invalid.host""#,
                )),
            ),
            (
                "invalid poststart tcpsocket host",
                one(
                    "d",
                    json!({"lifecycle": {"postStart": {"tcpSocket": {"host": "invalid.host"}}}}),
                ),
                Some((
                    reason,
                    r#"container "d" uses probe or lifecycle host "invalid.host""#,
                )),
            ),
            (
                "invalid prestop httpget host",
                one(
                    "e",
                    json!({"lifecycle": {"preStop": {"httpGet": {"host": "another.invalid.host"}}}}),
                ),
                Some((
                    reason,
                    r#"container "e" uses probe or lifecycle host "another.invalid.host""#,
                )),
            ),
            (
                "multiple containers with multiple invalid hosts",
                json!({"containers": [
                    container("valid", json!({})),
                    container("invalid1", json!({"livenessProbe": {"httpGet": {"host": "a.com"}}})),
                    container("invalid2", json!({
                        "lifecycle": {"preStop": {"tcpSocket": {"host": "b.com"}}},
                        "startupProbe": {"httpGet": {"host": "a.com"}}})),
                ]}),
                Some((
                    reason,
                    r#"containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com""#,
                )),
            ),
            (
                "invalid ipv4 host in probe",
                one(
                    "a",
                    json!({"livenessProbe": {"httpGet": {"host": "8.8.8.8"}}}),
                ),
                Some((
                    reason,
                    r#"container "a" uses probe or lifecycle host "8.8.8.8""#,
                )),
            ),
            (
                "invalid ipv6 host in probe",
                one(
                    "a",
                    json!({"livenessProbe": {"tcpSocket": {"host": "2001:4860:4860::8888"}}}),
                ),
                Some((
                    reason,
                    r#"container "a" uses probe or lifecycle host "2001:4860:4860::8888""#,
                )),
            ),
            (
                "invalid host in initcontainer",
                json!({"initContainers": [container("init",
                    json!({"livenessProbe": {"httpGet": {"host": "invalid.init.host"}}}))]}),
                Some((
                    reason,
                    r#"container "init" uses probe or lifecycle host "invalid.init.host""#,
                )),
            ),
        ];
        assert_check_cases("hostProbesAndHostLifecycle", 34, cases);
    }

    /// Five containers: unset context, empty context, `Default`, `Unmasked`, `other` (upstream's
    /// `TestProcMount*` pod), in or out of a user namespace.
    fn proc_mount_pod(host_users: bool) -> Value {
        json!({"hostUsers": host_users, "containers": [
            container("a", json!({})),
            container("b", json!({"securityContext": {}})),
            container("c", json!({"securityContext": {"procMount": "Default"}})),
            container("d", json!({"securityContext": {"procMount": "Unmasked"}})),
            container("e", json!({"securityContext": {"procMount": "other"}})),
        ]})
    }

    /// Upstream's `TestProcMountBaseline` (`procMount1_35baseline`) and
    /// `TestProcMountRestricted` (`procMount_1_0` under `procMount_restricted`, with and
    /// without a user namespace); before v1.35 baseline's `procMount` is `procMount_1_0` too.
    #[test]
    fn proc_mount_as_upstreams_tests() {
        let refused = Some((
            "procMount",
            r#"containers "d", "e" must not set securityContext.procMount to "Unmasked", "other""#,
        ));
        assert_check_cases(
            "procMount",
            35,
            vec![
                ("procMount", proc_mount_pod(true), refused),
                ("procMount with userns", proc_mount_pod(false), None),
            ],
        );
        for minor in [0, 34] {
            assert_check_cases(
                "procMount",
                minor,
                vec![
                    ("procMount", proc_mount_pod(true), refused),
                    ("procMount with userns", proc_mount_pod(false), refused),
                ],
            );
        }
        assert_check_cases(
            "procMount_restricted",
            35,
            vec![
                ("procMount", proc_mount_pod(true), refused),
                ("procMount with userns", proc_mount_pod(false), refused),
            ],
        );
    }

    /// Upstream's `TestRunAsNonRoot` (`runAsNonRoot1_35`): an explicit `false` is reported
    /// alone; a user-namespace pod is allowed, which it is not before v1.35.
    #[test]
    fn run_as_non_root_as_upstreams_tests() {
        let reason = "runAsNonRoot != true";
        let sc = |v: bool| json!({"securityContext": {"runAsNonRoot": v}});
        let cases = |host_users_false: Option<(&'static str, &'static str)>| -> Vec<CheckCase> {
            vec![
                (
                    "no explicit runAsNonRoot",
                    json!({"containers": [container("a", json!({}))]}),
                    Some((
                        reason,
                        r#"pod or container "a" must set securityContext.runAsNonRoot=true"#,
                    )),
                ),
                (
                    "pod runAsNonRoot=false",
                    json!({"securityContext": {"runAsNonRoot": false},
                        "containers": [container("a", json!({}))]}),
                    Some((
                        reason,
                        "pod must not set securityContext.runAsNonRoot=false",
                    )),
                ),
                (
                    "containers runAsNonRoot=false",
                    json!({"securityContext": {"runAsNonRoot": true}, "containers": [
                        container("a", json!({})),
                        container("b", json!({"securityContext": {}})),
                        container("c", sc(false)),
                        container("d", sc(false)),
                        container("e", sc(true)),
                        container("f", sc(true)),
                    ]}),
                    Some((
                        reason,
                        r#"containers "c", "d" must not set securityContext.runAsNonRoot=false"#,
                    )),
                ),
                (
                    "pod nil, container fallthrough",
                    json!({"containers": [
                        container("a", json!({})),
                        container("b", json!({"securityContext": {}})),
                        container("d", sc(true)),
                        container("e", sc(true)),
                    ]}),
                    Some((
                        reason,
                        r#"pod or containers "a", "b" must set securityContext.runAsNonRoot=true"#,
                    )),
                ),
                (
                    "host users false allowed",
                    json!({"hostUsers": false}),
                    None,
                ),
                (
                    "host users false with a container that sets nothing",
                    json!({"hostUsers": false, "containers": [container("a", json!({}))]}),
                    host_users_false,
                ),
            ]
        };
        assert_check_cases("runAsNonRoot", 35, cases(None));
        assert_check_cases(
            "runAsNonRoot",
            34,
            cases(Some((
                reason,
                r#"pod or container "a" must set securityContext.runAsNonRoot=true"#,
            ))),
        );
    }

    /// Upstream's `TestRunAsUser` (`runAsUser1_35`): a user-namespace pod may run as root from
    /// v1.35 (not before); `hostUsers: true` changes nothing.
    #[test]
    fn run_as_user_as_upstreams_tests() {
        let uid = |v: i64| json!({"securityContext": {"runAsUser": v}});
        let root_pod = Some(("runAsUser=0", "pod must not set runAsUser=0"));
        let cases = |user_namespace_root: Option<(&'static str, &'static str)>| -> Vec<CheckCase> {
            vec![
                (
                    "pod runAsUser=0",
                    json!({"securityContext": {"runAsUser": 0}, "containers": [container("a", json!({}))]}),
                    root_pod,
                ),
                (
                    "pod runAsUser=non-zero",
                    json!({"securityContext": {"runAsUser": 1000}, "containers": [container("a", json!({}))]}),
                    None,
                ),
                (
                    "pod runAsUser=nil",
                    json!({"securityContext": {}, "containers": [container("a", json!({}))]}),
                    None,
                ),
                (
                    "containers runAsUser=0",
                    json!({"securityContext": {"runAsUser": 1000}, "containers": [
                        container("a", json!({})),
                        container("b", json!({"securityContext": {}})),
                        container("c", uid(0)),
                        container("d", uid(0)),
                        container("e", uid(1)),
                        container("f", uid(1)),
                    ]}),
                    Some((
                        "runAsUser=0",
                        r#"containers "c", "d" must not set runAsUser=0"#,
                    )),
                ),
                (
                    "containers runAsUser=non-zero",
                    json!({"containers": [container("c", uid(1)), container("d", uid(2)),
                        container("e", uid(3)), container("f", uid(4))]}),
                    None,
                ),
                (
                    "user namespace without containers",
                    json!({"hostUsers": false}),
                    None,
                ),
                (
                    "user namespace, pod runAsUser=0",
                    json!({"hostUsers": false, "securityContext": {"runAsUser": 0},
                        "containers": [container("a", json!({}))]}),
                    user_namespace_root,
                ),
                (
                    "host users, pod runAsUser=0",
                    json!({"hostUsers": true, "securityContext": {"runAsUser": 0},
                        "containers": [container("a", json!({}))]}),
                    root_pod,
                ),
            ]
        };
        assert_check_cases("runAsUser", 35, cases(None));
        assert_check_cases("runAsUser", 23, cases(root_pod));
        assert_check_cases("runAsUser", 34, cases(root_pod));
    }

    /// Upstream's minimal valid pod spec at a level (`test/fixtures.go`): one container and
    /// one init container, each with a security context, and at restricted what it requires.
    fn fixture_base(level: Level) -> Value {
        let (pod_sc, container_sc) = match level {
            Level::Restricted => (
                json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}),
                json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}),
            ),
            _ => (json!({}), json!({})),
        };
        json!({"securityContext": pod_sc,
            "initContainers": [{"name": "initcontainer1", "image": "k8s.gcr.io/pause", "securityContext": container_sc}],
            "containers": [{"name": "container1", "image": "k8s.gcr.io/pause", "securityContext": container_sc}]})
    }

    /// `spec` with `value` at the JSON Pointer `at` (its parent must exist); `Null` removes it.
    fn tweak(mut spec: Value, at: &str, value: Value) -> Value {
        let (parent, key) = at.rsplit_once('/').expect("a pointer");
        let object = spec
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .expect("the parent exists");
        if value.is_null() {
            object.remove(key);
        } else {
            object.insert(key.to_owned(), value);
        }
        spec
    }

    /// `spec` with each `(pointer, value)` of `edits` applied.
    fn tweaks(spec: Value, edits: &[(&str, Value)]) -> Value {
        edits
            .iter()
            .fold(spec, |spec, (at, value)| tweak(spec, at, value.clone()))
    }

    /// Upstream's fixtures (`pod-security-admission/test/fixtures_*.go`) of the checks revised
    /// in v1.34 and v1.35, evaluated through the whole registry: each pod passes at the
    /// versions listed first and fails, with the fixture's substring, at those listed second.
    /// v1.36 adds no revision, so it is v1.35's policy.
    #[test]
    fn upstream_fixtures_of_the_v1_34_and_v1_35_revisions() {
        use Level::{Baseline, Restricted};
        use Version::{Latest, V1};
        const BEFORE_34: &[Version] = &[V1(0), V1(23), V1(33)];
        const FROM_34: &[Version] = &[V1(34), V1(35), V1(36), Latest];
        const BEFORE_35: &[Version] = &[V1(0), V1(23), V1(34)];
        const FROM_35: &[Version] = &[V1(35), V1(36), Latest];
        const ALL: &[Version] = &[V1(0), V1(23), V1(34), V1(35), V1(36), Latest];
        struct Fixture {
            name: String,
            level: Level,
            spec: Value,
            passes: Vec<Version>,
            fails: Vec<Version>,
            substring: &'static str,
        }
        let fixture =
            |name: &str, level, spec, passes: &[Version], fails: &[Version], substring| Fixture {
                name: name.to_owned(),
                level,
                spec,
                passes: passes.to_vec(),
                fails: fails.to_vec(),
                substring,
            };
        let probe = |level, at: &str, handler: Value| tweak(fixture_base(level), at, handler);
        // The procMount of the container and of the init container (`Null`: unset), and
        // `hostUsers`.
        let proc_mounts = |level, container: &str, init: &str, host_users: bool| {
            let kind = |k: &str| if k.is_empty() { Value::Null } else { json!(k) };
            tweaks(
                fixture_base(level),
                &[
                    ("/containers/0/securityContext/procMount", kind(container)),
                    ("/initContainers/0/securityContext/procMount", kind(init)),
                    ("/hostUsers", json!(host_users)),
                ],
            )
        };
        let mut fixtures = Vec::new();
        for level in [Baseline, Restricted] {
            // fixtures_hostProbesAndHostLifecycle.go (baseline, so restricted too).
            let probe_passes = [
                ("no probes", fixture_base(level)),
                (
                    "liveness httpGet without a host",
                    probe(
                        level,
                        "/containers/0/livenessProbe",
                        json!({"httpGet": {"port": 8080}}),
                    ),
                ),
                (
                    "readiness tcpSocket without a host",
                    probe(
                        level,
                        "/containers/0/readinessProbe",
                        json!({"tcpSocket": {"port": 8080}}),
                    ),
                ),
            ];
            for (name, spec) in probe_passes {
                fixtures.push(fixture(name, level, spec, ALL, &[], ""));
            }
            let probe_fails = [
                (
                    "liveness httpGet bad.host",
                    probe(
                        level,
                        "/containers/0/livenessProbe",
                        json!({"httpGet": {"host": "bad.host", "port": 8080}}),
                    ),
                ),
                (
                    "sidecar readiness tcpSocket 8.8.8.8",
                    tweaks(
                        fixture_base(level),
                        &[
                            ("/initContainers/0/restartPolicy", json!("Always")),
                            (
                                "/initContainers/0/readinessProbe",
                                json!({"tcpSocket": {"host": "8.8.8.8", "port": 8080}}),
                            ),
                        ],
                    ),
                ),
                (
                    "postStart httpGet bad.host",
                    probe(
                        level,
                        "/containers/0/lifecycle",
                        json!({"postStart": {"httpGet": {"host": "bad.host", "port": 8080}}}),
                    ),
                ),
                (
                    "liveness httpGet 127.0.0.1",
                    probe(
                        level,
                        "/containers/0/livenessProbe",
                        json!({"httpGet": {"host": "127.0.0.1", "port": 8080}}),
                    ),
                ),
                (
                    "readiness tcpSocket ::1",
                    probe(
                        level,
                        "/containers/0/readinessProbe",
                        json!({"tcpSocket": {"host": "::1", "port": 8080}}),
                    ),
                ),
            ];
            for (name, spec) in probe_fails {
                fixtures.push(fixture(
                    name,
                    level,
                    spec,
                    BEFORE_34,
                    FROM_34,
                    "probe or lifecycle host",
                ));
            }
            // fixtures_procMount.go: Default passes everywhere; in a user namespace an
            // unmasked /proc fails procMount 1.0 and procMount_restricted 1.35 but passes
            // baseline's procMount 1.35; outside one it fails everywhere.
            fixtures.push(fixture(
                "procMount Default in a user namespace",
                level,
                proc_mounts(level, "Default", "Default", false),
                ALL,
                &[],
                "",
            ));
            let in_user_namespace = match level {
                Baseline => (FROM_35, BEFORE_35),
                _ => (&[][..], ALL),
            };
            for (name, container, init, host_users, (passes, fails)) in [
                (
                    "container unmasks /proc in a user namespace",
                    "Unmasked",
                    "",
                    false,
                    in_user_namespace,
                ),
                (
                    "init container unmasks /proc in a user namespace",
                    "",
                    "Unmasked",
                    false,
                    in_user_namespace,
                ),
                (
                    "container unmasks /proc with host users",
                    "Unmasked",
                    "",
                    true,
                    (&[][..], ALL),
                ),
                (
                    "init container unmasks /proc with host users",
                    "",
                    "Unmasked",
                    true,
                    (&[][..], ALL),
                ),
            ] {
                let spec = proc_mounts(level, container, init, host_users);
                fixtures.push(fixture(name, level, spec, passes, fails, "procMount"));
            }
        }
        fixtures.push(fixture(
            "both unmask /proc in a user namespace (baseline only)",
            Baseline,
            proc_mounts(Baseline, "Unmasked", "Unmasked", false),
            FROM_35,
            BEFORE_35,
            "procMount",
        ));
        // fixtures_runAsNonRoot.go and fixtures_runAsUser.go (restricted); the pods that fail
        // them pass in a user namespace from v1.35.
        let restricted = || fixture_base(Restricted);
        let run_as_non_root_fails = [
            (
                "runAsNonRoot unset everywhere",
                tweak(restricted(), "/securityContext/runAsNonRoot", Value::Null),
            ),
            (
                "runAsNonRoot=false on the pod",
                tweak(restricted(), "/securityContext/runAsNonRoot", json!(false)),
            ),
            (
                "runAsNonRoot=false on the container",
                tweak(
                    restricted(),
                    "/containers/0/securityContext/runAsNonRoot",
                    json!(false),
                ),
            ),
            (
                "runAsNonRoot=false on the init container",
                tweak(
                    restricted(),
                    "/initContainers/0/securityContext/runAsNonRoot",
                    json!(false),
                ),
            ),
        ];
        let run_as_user_fails = [
            (
                "runAsUser=0 on the pod",
                tweak(restricted(), "/securityContext/runAsUser", json!(0)),
            ),
            (
                "runAsUser=0 on the container",
                tweak(
                    restricted(),
                    "/containers/0/securityContext/runAsUser",
                    json!(0),
                ),
            ),
            (
                "runAsUser=0 on the init container",
                tweak(
                    restricted(),
                    "/initContainers/0/securityContext/runAsUser",
                    json!(0),
                ),
            ),
        ];
        // runAsUser exists from v1.23 (runAsNonRoot from v1.0).
        for (fails, substring, since) in [
            (run_as_non_root_fails.to_vec(), "runAsNonRoot != true", 0),
            (run_as_user_fails.to_vec(), "runAsUser=0", 23),
        ] {
            let versions: Vec<Version> = ALL
                .iter()
                .copied()
                .filter(|v| !matches!(v, V1(m) if *m < since))
                .collect();
            for (name, spec) in fails {
                fixtures.push(fixture(
                    name,
                    Restricted,
                    spec.clone(),
                    &[],
                    &versions,
                    substring,
                ));
                let (before, from): (Vec<Version>, Vec<Version>) =
                    versions.iter().partition(|v| matches!(v, V1(m) if *m < 35));
                fixtures.push(Fixture {
                    name: format!("{name} in a user namespace"),
                    level: Restricted,
                    spec: tweak(spec, "/hostUsers", json!(false)),
                    passes: from,
                    fails: before,
                    substring,
                });
            }
        }
        for (name, spec) in [
            (
                "runAsNonRoot=true on the pod",
                tweaks(
                    restricted(),
                    &[
                        ("/containers/0/securityContext/runAsNonRoot", Value::Null),
                        (
                            "/initContainers/0/securityContext/runAsNonRoot",
                            Value::Null,
                        ),
                    ],
                ),
            ),
            (
                "runAsNonRoot=true on every container",
                tweaks(
                    restricted(),
                    &[
                        ("/securityContext/runAsNonRoot", Value::Null),
                        ("/containers/0/securityContext/runAsNonRoot", json!(true)),
                        (
                            "/initContainers/0/securityContext/runAsNonRoot",
                            json!(true),
                        ),
                    ],
                ),
            ),
            (
                "runAsUser=1000 everywhere",
                tweaks(
                    restricted(),
                    &[
                        ("/securityContext/runAsUser", json!(1000)),
                        ("/containers/0/securityContext/runAsUser", json!(1000)),
                        ("/initContainers/0/securityContext/runAsUser", json!(1000)),
                    ],
                ),
            ),
        ] {
            fixtures.push(fixture(name, Restricted, spec, ALL, &[], ""));
        }
        for f in &fixtures {
            for &version in &f.passes {
                let got = forbidden_detail(&evaluate(lv(f.level, version), None, &f.spec));
                assert_eq!(got, "", "{} passes {:?} at {version}", f.name, f.level);
            }
            for &version in &f.fails {
                let got = forbidden_detail(&evaluate(lv(f.level, version), None, &f.spec));
                assert!(
                    got.contains(f.substring),
                    "{} fails {:?} at {version} with {:?}: {got:?}",
                    f.name,
                    f.level,
                    f.substring
                );
            }
        }
    }
}
