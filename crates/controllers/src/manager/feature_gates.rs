//! `--feature-gates`: the Kubernetes feature gates kube-controller-manager v1.36 consults, with
//! their v1.36 defaults and stages, parsed as component-base's `featuregate` package.
//!
//! The flag takes `Name=bool` pairs separated by commas, optionally prefixed with the component
//! (`kube:Name=true`, as kube-controller-manager's component-global registry); it may be given
//! several times, later pairs overriding earlier ones. `AllAlpha=`/`AllBeta=` set every alpha
//! (beta) gate that is not set by name. Gates decide which controllers start: a controller whose
//! required gates are not all enabled is skipped (upstream's `ControllerDescriptor`
//! `requiredFeatureGates`).

use std::collections::BTreeMap;
use std::fmt;

/// A gate's stage (upstream's `featuregate.prerelease`), as `--help` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreRelease {
    /// Off by default, may change or go away.
    Alpha,
    /// Usually on by default.
    Beta,
    /// Generally available: the gate is to be removed.
    Ga,
    /// Deprecated: the gate is to be removed.
    Deprecated,
}

impl fmt::Display for PreRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Alpha => "ALPHA",
            Self::Beta => "BETA",
            Self::Ga => "",
            Self::Deprecated => "DEPRECATED",
        })
    }
}

/// One known gate at v1.36 (upstream's `FeatureSpec` at the binary's version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureSpec {
    /// The gate's name, e.g. `GenericWorkload`.
    pub name: &'static str,
    /// Its value when not set.
    pub default: bool,
    /// Its stage.
    pub pre_release: PreRelease,
    /// Whether it can only be set to its default.
    pub lock_to_default: bool,
}

const fn gate(name: &'static str, default: bool, pre_release: PreRelease) -> FeatureSpec {
    FeatureSpec {
        name,
        default,
        pre_release,
        lock_to_default: false,
    }
}

const fn locked(name: &'static str, default: bool, pre_release: PreRelease) -> FeatureSpec {
    FeatureSpec {
        name,
        default,
        pre_release,
        lock_to_default: true,
    }
}

/// The meta gate enabling every alpha gate not set by name.
pub const ALL_ALPHA: &str = "AllAlpha";
/// The meta gate enabling every beta gate not set by name.
pub const ALL_BETA: &str = "AllBeta";

/// `APIServerIdentity` (with `StorageVersionAPI`, gates the storage version GC).
pub const API_SERVER_IDENTITY: &str = "APIServerIdentity";
/// `ClusterTrustBundle`: the kube-apiserver serving ClusterTrustBundle publisher.
pub const CLUSTER_TRUST_BUNDLE: &str = "ClusterTrustBundle";
/// `DRADeviceTaintRules`: DeviceTaintRules (the device taint eviction controller evicts for
/// them and keeps their status).
pub const DRA_DEVICE_TAINT_RULES: &str = "DRADeviceTaintRules";
/// `DRADeviceTaints`: the device taint eviction controller.
pub const DRA_DEVICE_TAINTS: &str = "DRADeviceTaints";
/// `DRAResourcePoolStatus`: the ResourcePoolStatusRequest controller.
pub const DRA_RESOURCE_POOL_STATUS: &str = "DRAResourcePoolStatus";
/// `DynamicResourceAllocation`: the DRA controllers.
pub const DYNAMIC_RESOURCE_ALLOCATION: &str = "DynamicResourceAllocation";
/// `GenericWorkload`: Workload and PodGroup APIs (the PodGroup protection controller).
pub const GENERIC_WORKLOAD: &str = "GenericWorkload";
/// `PodCertificateRequest`: the PodCertificateRequest cleaner.
pub const POD_CERTIFICATE_REQUEST: &str = "PodCertificateRequest";
/// `SELinuxChangePolicy`: the SELinux warning controller.
pub const SELINUX_CHANGE_POLICY: &str = "SELinuxChangePolicy";
/// `StorageVersionAPI` (with `APIServerIdentity`, gates the storage version GC).
pub const STORAGE_VERSION_API: &str = "StorageVersionAPI";
/// `StorageVersionMigrator`: the storage version migrator controller.
pub const STORAGE_VERSION_MIGRATOR: &str = "StorageVersionMigrator";

use PreRelease::{Alpha, Beta, Deprecated, Ga};

/// The gates kcm knows, sorted by name: those of `pkg/features/kube_features.go` (and the
/// generic API server, component-base and controller-manager gates it registers) that
/// kube-controller-manager's controllers or its machinery consult, at their v1.36 spec.
pub const KNOWN_FEATURES: &[FeatureSpec] = &[
    gate(API_SERVER_IDENTITY, true, Beta),
    gate(ALL_ALPHA, false, Alpha),
    gate(ALL_BETA, false, Beta),
    gate(
        "CloudControllerManagerWatchBasedRoutesReconciliation",
        false,
        Alpha,
    ),
    gate(CLUSTER_TRUST_BUNDLE, false, Beta),
    gate("ComponentFlagz", false, Alpha),
    gate("ComponentStatusz", false, Alpha),
    gate("ContextualLogging", true, Beta),
    gate("CoordinatedLeaderElection", false, Beta),
    gate("DRAAdminAccess", true, Beta),
    gate("DRADeviceTaintRules", false, Beta),
    gate("DRADeviceTaints", true, Beta),
    gate("DRAPrioritizedList", true, Beta),
    gate(DRA_RESOURCE_POOL_STATUS, false, Alpha),
    gate("DeploymentReplicaSetTerminatingReplicas", true, Beta),
    locked("DisableAllocatorDualWrite", true, Ga),
    locked("DynamicResourceAllocation", true, Ga),
    gate(GENERIC_WORKLOAD, false, Alpha),
    gate("HPAConfigurableTolerance", true, Beta),
    gate("HPAScaleToZero", false, Alpha),
    locked("JobManagedBy", true, Ga),
    locked("JobPodReplacementPolicy", true, Ga),
    locked("LogarithmicScaleDown", true, Ga),
    gate("LoggingAlphaOptions", false, Alpha),
    gate("LoggingBetaOptions", true, Beta),
    gate("MaxUnavailableStatefulSet", true, Beta),
    locked("MultiCIDRServiceAllocator", true, Ga),
    gate("MutablePodResourcesForSuspendedJobs", false, Alpha),
    gate("MutableSchedulingDirectivesForSuspendedJobs", false, Alpha),
    locked("OrderedNamespaceDeletion", true, Ga),
    gate(POD_CERTIFICATE_REQUEST, false, Beta),
    gate("PodDeletionCost", true, Beta),
    locked("RecoverVolumeExpansionFailure", true, Ga),
    gate(SELINUX_CHANGE_POLICY, true, Beta),
    gate("SELinuxMount", false, Beta),
    locked("SeparateTaintEvictionController", true, Ga),
    gate("StatefulSetSemanticRevisionComparison", true, Beta),
    gate("StorageNamespaceIndex", true, Deprecated),
    gate(STORAGE_VERSION_API, false, Alpha),
    gate(STORAGE_VERSION_MIGRATOR, false, Beta),
    locked("TopologyAwareHints", true, Ga),
    locked("VolumeAttributesClass", true, Ga),
];

/// The spec of gate `name`, if kcm knows it.
pub fn spec(name: &str) -> Option<&'static FeatureSpec> {
    KNOWN_FEATURES.iter().find(|s| s.name == name)
}

/// A `--feature-gates` value upstream refuses, with upstream's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// `Name` without `=bool`.
    #[error("missing bool value for {0}")]
    MissingValue(String),
    /// A value `strconv.ParseBool` refuses.
    #[error(
        "invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
    )]
    InvalidValue {
        /// The gate.
        name: String,
        /// The value as written.
        value: String,
    },
    /// A gate kcm does not know.
    #[error("unrecognized feature gate: {0}")]
    Unrecognized(String),
    /// A component prefix other than `kube`.
    #[error("component not registered: {0}")]
    UnknownComponent(String),
    /// A locked gate set away from its default.
    #[error("cannot set feature gate {name} to {value}, feature is locked to {locked}")]
    Locked {
        /// The gate.
        name: String,
        /// The value asked for.
        value: bool,
        /// The value it is locked to.
        locked: bool,
    },
}

/// The gates as set by `--feature-gates` (upstream's `featureGate`): explicit settings over
/// `AllAlpha`/`AllBeta` over the defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// Gates set by name (including the meta gates), canonical names.
    set: BTreeMap<&'static str, bool>,
}

impl FeatureGates {
    /// Every gate at its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses the occurrences of `--feature-gates`, in order.
    pub fn parse_all<S: AsRef<str>>(values: &[S]) -> Result<Self, FeatureGateError> {
        let mut gates = Self::new();
        for value in values {
            gates.set(value.as_ref())?;
        }
        Ok(gates)
    }

    /// Applies one `--feature-gates` value (`A=true,kube:B=false`), as upstream's
    /// `featureGate.Set`: every pair is checked before any is applied.
    pub fn set(&mut self, value: &str) -> Result<(), FeatureGateError> {
        let mut pairs = Vec::new();
        for item in value.split(',') {
            if item.is_empty() {
                continue;
            }
            let (key, val) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item.trim(), None),
            };
            let key = match key.split_once(':') {
                Some(("kube", name)) => name.trim(),
                Some((component, _)) => {
                    return Err(FeatureGateError::UnknownComponent(component.to_owned()));
                }
                None => key,
            };
            let Some(val) = val else {
                return Err(FeatureGateError::MissingValue(key.to_owned()));
            };
            let enabled = parse_go_bool(val).map_err(|_| FeatureGateError::InvalidValue {
                name: key.to_owned(),
                value: val.to_owned(),
            })?;
            let spec = spec(key).ok_or_else(|| FeatureGateError::Unrecognized(key.to_owned()))?;
            if spec.lock_to_default && spec.default != enabled {
                return Err(FeatureGateError::Locked {
                    name: spec.name.to_owned(),
                    value: enabled,
                    locked: spec.default,
                });
            }
            pairs.push((spec, enabled));
        }
        for (spec, enabled) in pairs {
            match spec.pre_release {
                Ga | Deprecated => {
                    let stage = if spec.pre_release == Ga {
                        "GA"
                    } else {
                        "deprecated"
                    };
                    tracing::warn!(
                        "Setting {stage} feature gate {}={enabled}. It will be removed in a future release.",
                        spec.name
                    );
                }
                Alpha | Beta => {}
            }
            self.set.insert(spec.name, enabled);
        }
        Ok(())
    }

    /// Whether gate `name` is on. An unknown gate is off.
    pub fn enabled(&self, name: &str) -> bool {
        let Some(spec) = spec(name) else {
            return false;
        };
        if let Some(&value) = self.set.get(spec.name) {
            return value;
        }
        if spec.lock_to_default || spec.name == ALL_ALPHA || spec.name == ALL_BETA {
            return spec.default;
        }
        // Upstream's `setUnsetAlphaGates`/`setUnsetBetaGates`: gates not set by name follow
        // the meta gate of their stage.
        let meta = match spec.pre_release {
            Alpha => self.set.get(ALL_ALPHA),
            Beta => self.set.get(ALL_BETA),
            Ga | Deprecated => None,
        };
        meta.copied().unwrap_or(spec.default)
    }

    /// The gates of `required` that are off, in order.
    pub fn missing<'a>(&self, required: &[&'a str]) -> Vec<&'a str> {
        required
            .iter()
            .copied()
            .filter(|g| !self.enabled(g))
            .collect()
    }

    /// `Name=bool` for every gate set by name, sorted (upstream's `String`).
    pub fn explicit(&self) -> String {
        let pairs: Vec<String> = self.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        pairs.join(",")
    }
}

/// The `--feature-gates` help: the syntax, then every alpha and beta gate as
/// `kube:Name=true|false (STAGE - default=bool)` (upstream's `KnownFeatures` leaves out GA and
/// deprecated gates).
pub fn feature_gates_help() -> String {
    let mut lines = vec![
        "Comma-separated list of component:key=value pairs that describe feature gates for \
         alpha/experimental features of different components.\nIf the component is not \
         specified, defaults to \"kube\". This flag can be repeatedly invoked. For example: \
         --feature-gates 'kube:featureA=true,featureB=false' --feature-gates \
         'kube:featureC=true'. Options are:"
            .to_owned(),
    ];
    for spec in KNOWN_FEATURES {
        if matches!(spec.pre_release, Ga | Deprecated) {
            continue;
        }
        lines.push(format!(
            "kube:{}=true|false ({} - default={})",
            spec.name, spec.pre_release, spec.default
        ));
    }
    lines.join("\n")
}

/// A clap value parser checking one `--feature-gates` occurrence.
pub fn parse_feature_gates_arg(value: &str) -> Result<String, String> {
    FeatureGates::new()
        .set(value)
        .map(|()| value.to_owned())
        .map_err(|err| err.to_string())
}

/// Parses a boolean as Go's `strconv.ParseBool` (what pflag accepts for `--flag=value`).
pub fn parse_go_bool(value: &str) -> std::result::Result<bool, String> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(format!("invalid boolean {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_features_are_sorted_and_unique() {
        let names: Vec<&str> = KNOWN_FEATURES.iter().map(|s| s.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable_by_key(|n| n.to_owned());
        sorted.dedup();
        assert_eq!(names.len(), sorted.len(), "duplicates");
        // Upstream sorts help lines by name; kcm keeps the table in that order.
        let mut by_name = names.clone();
        by_name.sort_unstable();
        assert_eq!(names, by_name);
    }

    #[test]
    fn defaults_are_v1_36s() {
        let gates = FeatureGates::new();
        for (name, want) in [
            (GENERIC_WORKLOAD, false),
            (CLUSTER_TRUST_BUNDLE, false),
            (POD_CERTIFICATE_REQUEST, false),
            (SELINUX_CHANGE_POLICY, true),
            (STORAGE_VERSION_MIGRATOR, false),
            (STORAGE_VERSION_API, false),
            (API_SERVER_IDENTITY, true),
            ("DynamicResourceAllocation", true),
            ("Frobnicate", false),
        ] {
            assert_eq!(gates.enabled(name), want, "{name}");
        }
    }

    /// Ports `TestFeatureGateFlag`'s cases (component-base/featuregate/feature_gate_test.go)
    /// onto kcm's gate set: alpha `GenericWorkload`, beta-off `ClusterTrustBundle`, beta-on
    /// `SELinuxChangePolicy`.
    #[test]
    fn flag_follows_component_base() {
        struct Case {
            arg: &'static str,
            want: Result<[bool; 3], &'static str>,
        }
        let cases = [
            Case {
                arg: "",
                want: Ok([false, false, true]),
            },
            Case {
                arg: "fooBarBaz=true",
                want: Err("unrecognized feature gate: fooBarBaz"),
            },
            Case {
                arg: "AllAlpha=false",
                want: Ok([false, false, true]),
            },
            Case {
                arg: "AllAlpha=true",
                want: Ok([true, false, true]),
            },
            Case {
                arg: "AllAlpha=banana",
                want: Err(
                    "invalid value of AllAlpha=banana, err: strconv.ParseBool: parsing \
                     \"banana\": invalid syntax",
                ),
            },
            Case {
                arg: "AllAlpha=false,GenericWorkload=true",
                want: Ok([true, false, true]),
            },
            Case {
                arg: "GenericWorkload=true,AllAlpha=false",
                want: Ok([true, false, true]),
            },
            Case {
                arg: "AllAlpha=true,GenericWorkload=false",
                want: Ok([false, false, true]),
            },
            Case {
                arg: "AllBeta=true",
                want: Ok([false, true, true]),
            },
            Case {
                arg: "AllBeta=false",
                want: Ok([false, false, false]),
            },
            Case {
                arg: "AllBeta=false,SELinuxChangePolicy=true",
                want: Ok([false, false, true]),
            },
            Case {
                arg: "kube:GenericWorkload=true, kube:ClusterTrustBundle=T",
                want: Ok([true, true, true]),
            },
            Case {
                arg: "GenericWorkload",
                want: Err("missing bool value for GenericWorkload"),
            },
            Case {
                arg: "wardle:featureA=true",
                want: Err("component not registered: wardle"),
            },
            Case {
                arg: "DynamicResourceAllocation=false",
                want: Err(
                    "cannot set feature gate DynamicResourceAllocation to false, feature is \
                     locked to true",
                ),
            },
            Case {
                arg: "DynamicResourceAllocation=true",
                want: Ok([false, false, true]),
            },
        ];
        for case in cases {
            let got = FeatureGates::parse_all(&[case.arg]).map(|g| {
                [
                    g.enabled(GENERIC_WORKLOAD),
                    g.enabled(CLUSTER_TRUST_BUNDLE),
                    g.enabled(SELINUX_CHANGE_POLICY),
                ]
            });
            match (&got, &case.want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{}", case.arg),
                (Err(err), Err(want)) => assert_eq!(err.to_string(), *want, "{}", case.arg),
                _ => panic!("{}: got {got:?}, want {:?}", case.arg, case.want),
            }
        }
    }

    #[test]
    fn a_refused_pair_applies_nothing_and_later_occurrences_override() {
        let mut gates = FeatureGates::new();
        assert!(gates.set("GenericWorkload=true,nope=true").is_err());
        assert!(!gates.enabled(GENERIC_WORKLOAD));

        let gates = FeatureGates::parse_all(&["GenericWorkload=true", "GenericWorkload=false"])
            .expect("valid");
        assert!(!gates.enabled(GENERIC_WORKLOAD));
        assert_eq!(gates.explicit(), "GenericWorkload=false");
        assert_eq!(
            gates.missing(&[GENERIC_WORKLOAD, SELINUX_CHANGE_POLICY]),
            [GENERIC_WORKLOAD]
        );
    }

    #[test]
    fn help_lists_alpha_and_beta_gates_only() {
        let help = feature_gates_help();
        assert!(help.contains("kube:GenericWorkload=true|false (ALPHA - default=false)"));
        assert!(help.contains("kube:SELinuxChangePolicy=true|false (BETA - default=true)"));
        assert!(help.contains("kube:AllAlpha=true|false (ALPHA - default=false)"));
        assert!(!help.contains("DynamicResourceAllocation"));
        assert!(!help.contains("StorageNamespaceIndex"));
    }
}
