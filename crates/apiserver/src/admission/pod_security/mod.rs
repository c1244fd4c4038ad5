//! PodSecurity: the namespace's `pod-security.kubernetes.io/{enforce,audit,warn}` labels applied to pods (refused at `enforce`, warned at `warn`) and to workload pod templates (warned only), as upstream's `pod-security-admission`.
//!
//! The levels are `privileged` (anything), `baseline` and `restricted`, whose checks live in
//! [`checks`]. Each `-version` label (`latest` or `v1.N`) is parsed once into a [`Version`] and
//! evaluated with upstream's checks of that version: every check carries its versioned
//! variants, the newest variant not newer than the label is used, a check with none is not
//! applied (upstream's `checkRegistry`). As a kube-apiserver of the version kcm serves
//! ([`crate::version::MINOR`], v1.36) knows no newer checks, `latest` and later labels are
//! evaluated at that version: v1.34's `hostProbesAndHostLifecycle` and v1.35's user-namespace
//! revisions (`procMount`, `procMount_restricted`, `runAsNonRoot`, `runAsUser`) apply, v1.36
//! adds none, and a label pinned below a revision keeps the checks it names. Labels resolve as
//! upstream's `PolicyToEvaluate` (see [`Policy::from_labels`]). Not done yet: audit
//! annotations (kcm has no audit log), exemptions (none by default upstream).

pub mod checks;

use async_trait::async_trait;
use serde_json::Value;

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::POD_SECURITY;
use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::object;
use crate::pointer::At;
use crate::resources::namespace::NAMESPACES;
use crate::resources::pod::PODS;

/// The namespace labels of the policy, per mode: the level, then the version (upstream's
/// `EnforceLevelLabel`, `EnforceVersionLabel`, ...).
const ENFORCE_LABELS: (&str, &str) = (
    "pod-security.kubernetes.io/enforce",
    "pod-security.kubernetes.io/enforce-version",
);
const WARN_LABELS: (&str, &str) = (
    "pod-security.kubernetes.io/warn",
    "pod-security.kubernetes.io/warn-version",
);
const AUDIT_LABELS: (&str, &str) = (
    "pod-security.kubernetes.io/audit",
    "pod-security.kubernetes.io/audit-version",
);
/// How many pods of a namespace a label change is checked against (upstream: 3000 pods, 1 s).
const NAMESPACE_POD_LIMIT: usize = 3000;

/// A Pod Security Standards level, ordered from the least strict (upstream's `CompareLevels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// No restriction.
    Privileged,
    /// Known privilege escalations refused.
    Baseline,
    /// Hardening best practices.
    Restricted,
}

impl Level {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A policy version, parsed from a `-version` label (upstream's `api.Version`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Version {
    /// `latest`: the checks of the version the server serves (also what a missing or
    /// unparsable label means).
    #[default]
    Latest,
    /// `v1.N`, by its minor number.
    V1(u32),
}

impl Version {
    /// `latest` or `v1.N` as upstream's `ParseVersion` accepts them (`N` without leading
    /// zeros); a minor too large for `u32` is newer than any check, so it reads as `latest`.
    fn parse(s: &str) -> Option<Self> {
        if s == "latest" {
            return Some(Version::Latest);
        }
        let minor = s.strip_prefix("v1.")?;
        let digits = !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit());
        if !digits || (minor.len() > 1 && minor.starts_with('0')) {
            return None;
        }
        Some(minor.parse().map_or(Version::Latest, Version::V1))
    }

    /// The version whose checks apply on this server: as a kube-apiserver of the served
    /// version ([`crate::version::MINOR`]) knows no newer checks, `latest` and any later label
    /// are evaluated as that version (the label is still what messages name).
    pub fn served(self) -> Version {
        let served = crate::version::MINOR;
        match self {
            Version::V1(minor) if minor < served => self,
            _ => Version::V1(served),
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::V1(minor) => write!(f, "v1.{minor}"),
        }
    }
}

/// A level at a version (`restricted:latest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The version its checks are taken from.
    pub version: Version,
}

impl std::fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

/// A namespace's policy for each mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Violations are refused.
    pub enforce: LevelVersion,
    /// Violations are recorded in the audit log.
    pub audit: LevelVersion,
    /// Violations are returned as warnings.
    pub warn: LevelVersion,
}

impl Policy {
    /// The policy of a namespace's labels (upstream's `PolicyToEvaluate` over its default
    /// configuration, `privileged:latest` for every mode): an unparsable enforce level is
    /// `restricted` (fail closed), an unparsable warn or audit level `privileged` (fail open), an
    /// unparsable version `latest`; and a namespace that sets only a stricter enforce level
    /// warns at it too (at the enforce version, unless a warn version is set).
    pub fn from_labels(labels: Option<&Value>) -> Self {
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        // Each mode's level and version label as set (`None` when absent).
        let set = |(level, version): (&str, &str)| (label(level), label(version));
        let resolve = |(level, version): (Option<&str>, Option<&str>), invalid| LevelVersion {
            level: level.map_or(Level::Privileged, |l| Level::parse(l).unwrap_or(invalid)),
            version: version.map_or(Version::Latest, |v| Version::parse(v).unwrap_or_default()),
        };
        let (enforce_set, warn_set) = (set(ENFORCE_LABELS), set(WARN_LABELS));
        let enforce = resolve(enforce_set, Level::Restricted);
        let mut warn = resolve(warn_set, Level::Privileged);
        if warn_set.0.is_none() && enforce_set.0.is_some() && enforce.level > warn.level {
            warn.level = enforce.level;
            if warn_set.1.is_none() {
                warn.version = enforce.version;
            }
        }
        Self {
            audit: resolve(set(AUDIT_LABELS), Level::Privileged),
            warn,
            enforce,
        }
    }
}

/// The violations of a pod spec at `lv` as upstream's `ForbiddenDetail`, `None` when allowed.
/// The checks are those of the version the server serves at most ([`Version::served`]).
fn evaluate(lv: &LevelVersion, metadata: Option<&Value>, spec: &Value) -> Option<String> {
    let served = LevelVersion {
        version: lv.version.served(),
        ..*lv
    };
    let violations = checks::evaluate(served, metadata, spec);
    (!violations.is_empty()).then(|| checks::forbidden_detail(&violations))
}

/// Where a pod's spec and metadata are.
const POD_POINTERS: (&str, &str) = ("/spec", "/metadata");

/// Where the pod template's spec and metadata of a workload resource are, by `group/plural`.
fn template_pointers(group: &str, plural: &str) -> Option<(&'static str, &'static str)> {
    match (group, plural) {
        ("", "podtemplates") => Some(("/template/spec", "/template/metadata")),
        ("", "replicationcontrollers")
        | ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => Some(("/spec/template/spec", "/spec/template/metadata")),
        ("batch", "cronjobs") => Some((
            "/spec/jobTemplate/spec/template/spec",
            "/spec/jobTemplate/spec/template/metadata",
        )),
        _ => None,
    }
}

/// The plugin.
#[derive(Debug, Default)]
pub struct PodSecurity;

#[async_trait]
impl Plugin for PodSecurity {
    fn name(&self) -> &'static str {
        POD_SECURITY
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    fn validates(&self) -> bool {
        true
    }

    async fn validate(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if a.is_main(&NAMESPACES) {
            return self.validate_namespace(source, a).await;
        }
        let is_pod = a.is_resource(&PODS)
            && (a.subresource.is_empty() || a.subresource == "ephemeralcontainers");
        let template = template_pointers(&a.resource.group, &a.resource.plural)
            .filter(|_| a.subresource.is_empty());
        if !is_pod && template.is_none() {
            return Ok(());
        }
        let Some(obj) = a.object.as_ref() else {
            return Ok(());
        };
        let (spec_pointer, metadata_pointer) = template.unwrap_or(POD_POINTERS);
        // Updates that leave the pod spec alone (labels, finalizers, status) are not
        // re-evaluated, as upstream ignores metadata-only updates.
        if a.operation == Operation::Update
            && a.old_object.and_then(|o| o.at(spec_pointer)) == obj.at(spec_pointer)
        {
            return Ok(());
        }
        if obj.at(spec_pointer).is_none() {
            return Ok(());
        }
        let Some(namespace) = a.namespace_object(source).await? else {
            return Ok(());
        };
        let policy = Policy::from_labels(namespace.at("/metadata/labels"));
        // Evaluated on the borrowed spec; the warning is added once the borrow ends.
        let spec = a.object.as_ref().and_then(|o| o.at(spec_pointer));
        let Some(spec) = spec else {
            return Ok(());
        };
        let metadata = a.object.as_ref().and_then(|o| o.at(metadata_pointer));
        if is_pod && let Some(detail) = evaluate(&policy.enforce, metadata, spec) {
            return Err(a.forbidden(&format!(
                "violates PodSecurity \"{}\": {detail}",
                policy.enforce
            )));
        }
        if let Some(detail) = evaluate(&policy.warn, metadata, spec) {
            a.add_warning(format!(
                "would violate PodSecurity \"{}\": {detail}",
                policy.warn
            ));
        }
        Ok(())
    }
}

impl PodSecurity {
    /// A namespace whose enforce level or version changes: the pods already there are checked
    /// against the new level and each violation is returned as a warning (upstream's
    /// `ValidateNamespace` and `EvaluatePodsInNamespace`).
    async fn validate_namespace(
        &self,
        source: &dyn ObjectSource,
        a: &mut Attributes<'_>,
    ) -> Result<()> {
        if a.operation != Operation::Update || !a.subresource.is_empty() {
            return Ok(());
        }
        let Some(new) = a.object.as_ref() else {
            return Ok(());
        };
        let new_policy = Policy::from_labels(new.at("/metadata/labels"));
        let old_policy = Policy::from_labels(a.old_object.and_then(|o| o.at("/metadata/labels")));
        if new_policy.enforce == old_policy.enforce || new_policy.enforce.level == Level::Privileged
        {
            return Ok(());
        }
        let name = object::name(new).to_owned();
        let pods = source.list(&PODS, &name).await?;
        // Pods sharing one violation are reported together, in first-seen order.
        let mut grouped: Vec<(String, String, usize)> = Vec::new();
        for pod in pods.iter().take(NAMESPACE_POD_LIMIT) {
            let Some(detail) = pod
                .get("spec")
                .and_then(|s| evaluate(&new_policy.enforce, pod.get("metadata"), s))
            else {
                continue;
            };
            match grouped.iter_mut().find(|(d, _, _)| *d == detail) {
                Some((_, _, count)) => *count += 1,
                None => grouped.push((detail, object::name(pod).to_owned(), 1)),
            }
        }
        if grouped.is_empty() {
            return Ok(());
        }
        a.add_warning(format!(
            "existing pods in namespace \"{name}\" violate the new PodSecurity enforce level \"{}\"",
            new_policy.enforce
        ));
        for (detail, first, count) in grouped {
            a.add_warning(if count == 1 {
                format!("{first}: {detail}")
            } else {
                format!("{first} (and {} other pods): {detail}", count - 1)
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;
    use crate::resources::apps::DEPLOYMENTS;

    fn namespace(labels: Value) -> Value {
        json!({"metadata": {"name": "ns", "labels": labels}})
    }

    const PRIVILEGED_SPEC: &str = r#"{"containers": [{"name": "c", "image": "nginx", "securityContext": {"privileged": true}}]}"#;

    fn privileged_spec() -> Value {
        serde_json::from_str(PRIVILEGED_SPEC).unwrap_or_default()
    }

    #[test]
    fn labels_give_the_policy_with_upstreams_defaults() {
        let policy = |labels: Value| {
            let p = Policy::from_labels(Some(&labels));
            [p.enforce, p.warn, p.audit].map(|lv| lv.to_string())
        };
        let p = Policy::from_labels(None);
        assert_eq!(p.enforce.to_string(), "privileged:latest");
        assert_eq!(p.warn.to_string(), "privileged:latest");
        // Only a stricter enforce level: warn follows it (version too), audit does not.
        assert_eq!(
            policy(json!({
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/enforce-version": "v1.30",
            })),
            ["baseline:v1.30", "baseline:v1.30", "privileged:latest"]
        );
        // An explicit warn level (or version) is kept.
        assert_eq!(
            policy(json!({
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/warn": "baseline",
            })),
            ["restricted:latest", "baseline:latest", "privileged:latest"]
        );
        assert_eq!(
            policy(json!({
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/enforce-version": "v1.30",
                "pod-security.kubernetes.io/warn-version": "v1.25",
            })),
            ["baseline:v1.30", "baseline:v1.25", "privileged:latest"]
        );
        // Unparsable: enforce fails closed, warn and audit open, versions are latest.
        assert_eq!(
            policy(json!({
                "pod-security.kubernetes.io/enforce": "strict",
                "pod-security.kubernetes.io/enforce-version": "nonsense",
                "pod-security.kubernetes.io/warn": "loud",
                "pod-security.kubernetes.io/audit": "restricted",
                "pod-security.kubernetes.io/audit-version": "v1.x",
            })),
            [
                "restricted:latest",
                "privileged:latest",
                "restricted:latest"
            ]
        );
    }

    #[test]
    fn version_labels_parse_as_upstreams_parse_version() {
        let cases = [
            ("latest", Some(Version::Latest)),
            ("v1.0", Some(Version::V1(0))),
            ("v1.22", Some(Version::V1(22))),
            ("v1.99", Some(Version::V1(99))),
            // Newer than anything: evaluated as the newest checks.
            ("v1.99999999999", Some(Version::Latest)),
            ("v1.01", None),
            ("v1.", None),
            ("v1.2x", None),
            ("v2.0", None),
            ("1.22", None),
            ("Latest", None),
            ("", None),
        ];
        for (label, want) in cases {
            assert_eq!(Version::parse(label), want, "{label:?}");
            if let Some(Version::V1(_)) = want {
                assert_eq!(want.map(|v| v.to_string()).as_deref(), Some(label));
            }
        }
    }

    async fn create(
        def: &'static crate::registry::ResourceDef,
        labels: Value,
        obj: Value,
    ) -> (Result<()>, Vec<String>) {
        let source = Objects::new(vec![(&NAMESPACES, namespace(labels))]);
        let user = UserInfo::admin();
        let mut a = Attributes::new(Operation::Create, def, "ns", "p", Some(obj), &user);
        let result = PodSecurity.validate(&source, &mut a).await;
        (result, a.take_warnings())
    }

    #[tokio::test]
    async fn enforce_refuses_pods_and_warn_warns() {
        let pod = json!({"metadata": {"name": "p"}, "spec": privileged_spec()});
        let (result, _) = create(
            &PODS,
            json!({"pod-security.kubernetes.io/enforce": "restricted"}),
            pod.clone(),
        )
        .await;
        let err = result.expect_err("restricted refuses");
        assert_eq!(err.code, 403);
        assert!(
            err.message.starts_with(
                "pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": privileged (container \"c\" must not set securityContext.privileged=true), allowPrivilegeEscalation != false"
            ),
            "{}",
            err.message
        );

        let (result, warnings) = create(
            &PODS,
            json!({"pod-security.kubernetes.io/warn": "baseline"}),
            pod.clone(),
        )
        .await;
        result.expect("warn only");
        assert_eq!(
            warnings,
            [
                "would violate PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"
            ]
        );

        let (result, warnings) = create(&PODS, json!({}), pod).await;
        result.expect("privileged by default");
        assert!(warnings.is_empty());
    }

    /// The served version's checks apply at `latest` and later labels: a probe naming a host
    /// (refused by baseline from v1.34) is refused there with upstream's message, the label
    /// named as set, and passes a namespace pinned to v1.33.
    #[tokio::test]
    async fn latest_and_later_versions_are_the_served_versions_checks() {
        assert_eq!(Version::Latest.served(), Version::V1(crate::version::MINOR));
        assert_eq!(Version::V1(99).served(), Version::V1(crate::version::MINOR));
        assert_eq!(Version::V1(22).served(), Version::V1(22));
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
            "image": "nginx", "readinessProbe": {"httpGet": {"host": "1.2.3.4", "port": 80}}}]}});
        let labels = |version: &str| {
            json!({"pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/enforce-version": version})
        };
        for version in ["latest", "v1.34", "v1.36", "v1.99"] {
            let (result, _) = create(&PODS, labels(version), pod.clone()).await;
            let err = result.expect_err("a probe host is refused from v1.34");
            assert_eq!(err.code, 403);
            assert_eq!(
                err.message,
                format!(
                    "pods \"p\" is forbidden: violates PodSecurity \"baseline:{version}\": probe or lifecycle host (container \"c\" uses probe or lifecycle host \"1.2.3.4\")"
                )
            );
        }
        for version in ["v1.33", "v1.0"] {
            let (result, warnings) = create(&PODS, labels(version), pod.clone()).await;
            result.expect("no probe host check before v1.34");
            assert!(warnings.is_empty(), "{warnings:?}");
        }
    }

    /// v1.35's user-namespace revisions through the plugin: a `hostUsers: false` pod that
    /// unmasks /proc and runs as root passes `baseline` from v1.35 and is refused before; at
    /// `restricted` only the unmasked /proc is refused from v1.35 (`procMount_restricted`).
    #[tokio::test]
    async fn a_user_namespace_pod_is_judged_by_its_namespaces_version() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"hostUsers": false,
            "securityContext": {"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "nginx", "securityContext": {
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                "procMount": "Unmasked"}}]}});
        let labels = |level: &str, version: &str| {
            json!({"pod-security.kubernetes.io/enforce": level,
                "pod-security.kubernetes.io/enforce-version": version})
        };
        let unmasked =
            "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")";
        for version in ["v1.35", "latest"] {
            let (result, warnings) = create(&PODS, labels("baseline", version), pod.clone()).await;
            result.expect("baseline lets a user namespace unmask /proc");
            assert!(warnings.is_empty(), "{warnings:?}");
            let (result, _) = create(&PODS, labels("restricted", version), pod.clone()).await;
            let err = result.expect_err("restricted refuses an unmasked /proc");
            assert_eq!(
                err.message,
                format!(
                    "pods \"p\" is forbidden: violates PodSecurity \"restricted:{version}\": {unmasked}"
                )
            );
        }
        let (result, _) = create(&PODS, labels("baseline", "v1.34"), pod.clone()).await;
        let err = result.expect_err("baseline:v1.34 refuses an unmasked /proc");
        assert_eq!(
            err.message,
            format!("pods \"p\" is forbidden: violates PodSecurity \"baseline:v1.34\": {unmasked}")
        );
        let (result, _) = create(&PODS, labels("restricted", "v1.34"), pod).await;
        let err = result.expect_err("restricted:v1.34 also requires a non-root user");
        assert_eq!(
            err.message,
            format!(
                "pods \"p\" is forbidden: violates PodSecurity \"restricted:v1.34\": {unmasked}, \
                 runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
                 runAsUser=0 (pod must not set runAsUser=0)"
            )
        );
    }

    /// The plugin evaluates the namespace's pinned version: a container that keeps its
    /// capabilities passes `restricted:v1.21` (no capabilities_restricted yet) and is refused
    /// from `v1.22`, the message naming the version.
    #[tokio::test]
    async fn enforce_version_pins_the_checks() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "nginx",
                "securityContext": {"allowPrivilegeEscalation": false}}]}});
        let labels = |version: &str| {
            json!({"pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": version})
        };
        let (result, warnings) = create(&PODS, labels("v1.21"), pod.clone()).await;
        result.expect("restricted:v1.21 has no capabilities_restricted");
        assert!(warnings.is_empty(), "{warnings:?}");
        for version in ["v1.22", "latest"] {
            let (result, _) = create(&PODS, labels(version), pod.clone()).await;
            let err = result.expect_err("refused");
            assert_eq!(err.code, 403);
            assert_eq!(
                err.message,
                format!(
                    "pods \"p\" is forbidden: violates PodSecurity \"restricted:{version}\": unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"])"
                )
            );
        }
    }

    #[tokio::test]
    async fn workload_templates_are_warned_about_never_refused() {
        let deployment =
            json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": privileged_spec()}}});
        let (result, warnings) = create(
            &DEPLOYMENTS,
            json!({"pod-security.kubernetes.io/enforce": "baseline"}),
            deployment,
        )
        .await;
        result.expect("workloads are not refused");
        assert_eq!(
            warnings,
            [
                "would violate PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"
            ]
        );
    }

    #[tokio::test]
    async fn a_stricter_namespace_label_warns_about_existing_pods() {
        let pod = |name: &str| json!({"metadata": {"name": name, "namespace": "ns"}, "spec": privileged_spec()});
        let source = Objects::new(vec![(&PODS, pod("a")), (&PODS, pod("b"))]);
        let user = UserInfo::admin();
        let old = namespace(json!({}));
        let mut a = Attributes::new(
            Operation::Update,
            &NAMESPACES,
            "",
            "ns",
            Some(namespace(
                json!({"pod-security.kubernetes.io/enforce": "baseline"}),
            )),
            &user,
        )
        .with_old_object(Some(&old))
        .with_dry_run(true);
        PodSecurity
            .validate(&source, &mut a)
            .await
            .expect("allowed");
        assert_eq!(
            a.take_warnings(),
            [
                "existing pods in namespace \"ns\" violate the new PodSecurity enforce level \"baseline:latest\"",
                "a (and 1 other pods): privileged (container \"c\" must not set securityContext.privileged=true)",
            ]
        );
    }
}
