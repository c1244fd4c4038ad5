//! `--feature-gates`: every feature gate kube-controller-manager v1.36 accepts, with its v1.36
//! default, stage and lock, parsed as component-base's `featuregate` package.
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
/// `MaxUnavailableStatefulSet`: StatefulSet rolling updates honour `maxUnavailable`.
pub const MAX_UNAVAILABLE_STATEFUL_SET: &str = "MaxUnavailableStatefulSet";
/// `PodCertificateRequest`: the PodCertificateRequest cleaner.
pub const POD_CERTIFICATE_REQUEST: &str = "PodCertificateRequest";
/// `SELinuxChangePolicy`: the SELinux warning controller.
pub const SELINUX_CHANGE_POLICY: &str = "SELinuxChangePolicy";
/// `StorageVersionAPI` (with `APIServerIdentity`, gates the storage version GC).
pub const STORAGE_VERSION_API: &str = "StorageVersionAPI";
/// `StorageVersionMigrator`: the storage version migrator controller.
pub const STORAGE_VERSION_MIGRATOR: &str = "StorageVersionMigrator";

use PreRelease::{Alpha, Beta, Deprecated, Ga};

/// Every gate kube-controller-manager v1.36 registers, sorted by name (byte order, as upstream's
/// `KnownFeatures` sorts its help lines): `pkg/features/kube_features.go`'s
/// `defaultVersionedKubernetesFeatureGates` together with the generic API server's, the
/// apiextensions server's, component-base's (logging, metrics, zpages), client-go's and
/// controller-manager's gates that it references, each at the spec in effect at 1.36 (the last
/// entry of its versioned ladder whose version is at most 1.36). Gates removed before 1.36 are
/// not here, so setting one fails as upstream does ("unrecognized feature gate").
pub const KNOWN_FEATURES: &[FeatureSpec] = &[
    gate("APIResponseCompression", true, Beta),
    gate(API_SERVER_IDENTITY, true, Beta),
    locked("APIServerTracing", true, Ga),
    gate("APIServingWithRoutine", false, Alpha),
    locked("AggregatedDiscoveryRemoveBetaType", true, Deprecated),
    gate(ALL_ALPHA, false, Alpha),
    gate(ALL_BETA, false, Beta),
    gate("AllowDNSOnlyNodeCSR", false, Deprecated),
    gate(
        "AllowInsecureKubeletCertificateSigningRequests",
        false,
        Deprecated,
    ),
    locked(
        "AllowOverwriteTerminationGracePeriodSeconds",
        false,
        Deprecated,
    ),
    gate("AllowParsingUserUIDFromCertAuth", true, Beta),
    gate("AllowUnsafeMalformedObjectDeletion", false, Alpha),
    locked("AnonymousAuthConfigurableEndpoints", true, Ga),
    locked("AnyVolumeDataSource", true, Ga),
    gate("AtomicFIFO", true, Beta),
    locked("AuthorizeNodeWithSelectors", true, Ga),
    gate("AuthorizePodWebsocketUpgradeCreatePermission", true, Beta),
    locked("AuthorizeWithSelectors", true, Ga),
    locked("BtreeWatchCache", true, Ga),
    gate("CBORServingAndStorage", false, Alpha),
    gate("CPUManagerPolicyAlphaOptions", false, Alpha),
    gate("CPUManagerPolicyBetaOptions", true, Beta),
    locked("CPUManagerPolicyOptions", true, Ga),
    gate("CRDObservedGenerationTracking", true, Beta),
    locked("CRDValidationRatcheting", true, Ga),
    gate("CRIListStreaming", false, Alpha),
    locked("CSIMigrationPortworx", true, Ga),
    gate("CSIServiceAccountTokenSecrets", true, Ga),
    gate("CSIVolumeHealth", false, Alpha),
    gate("ChangeContainerStatusOnKubeletRestart", false, Deprecated),
    gate("ClearingNominatedNodeNameAfterBinding", true, Beta),
    gate("ClientsAllowCARotation", true, Beta),
    gate("ClientsAllowCBOR", false, Alpha),
    gate("ClientsAllowTLSCacheGC", true, Beta),
    gate("ClientsPreferCBOR", false, Alpha),
    gate(
        "CloudControllerManagerWatchBasedRoutesReconciliation",
        false,
        Alpha,
    ),
    gate("CloudControllerManagerWebhook", false, Alpha),
    gate(CLUSTER_TRUST_BUNDLE, false, Beta),
    gate("ClusterTrustBundleProjection", false, Beta),
    gate("ComponentFlagz", true, Beta),
    gate("ComponentStatusz", true, Beta),
    gate("ConcurrentWatchObjectDecode", false, Beta),
    locked("ConsistentListFromCache", true, Ga),
    gate("ConstrainedImpersonation", true, Beta),
    gate("ContainerCheckpoint", true, Beta),
    gate("ContainerRestartRules", true, Beta),
    gate("ContainerStopSignals", false, Alpha),
    gate("ContextualLogging", true, Beta),
    gate(
        "ControllerManagerReleaseLeaderElectionLockOnExit",
        false,
        Alpha,
    ),
    gate("CoordinatedLeaderElection", false, Beta),
    gate("CrossNamespaceVolumeDataSource", false, Alpha),
    gate("CustomCPUCFSQuotaPeriod", true, Ga),
    locked("CustomResourceFieldSelectors", true, Ga),
    locked("DRAAdminAccess", true, Ga),
    gate("DRAConsumableCapacity", true, Beta),
    gate("DRADeviceBindingConditions", true, Beta),
    gate(DRA_DEVICE_TAINT_RULES, false, Beta),
    gate(DRA_DEVICE_TAINTS, true, Beta),
    gate("DRAExtendedResource", true, Beta),
    gate("DRAListTypeAttributes", false, Alpha),
    gate("DRANodeAllocatableResources", false, Alpha),
    gate("DRAPartitionableDevices", true, Beta),
    gate("DRAPrioritizedList", true, Ga),
    gate("DRAResourceClaimDeviceStatus", true, Beta),
    gate("DRAResourceClaimGranularStatusAuthorization", true, Beta),
    gate(DRA_RESOURCE_POOL_STATUS, false, Alpha),
    gate("DRASchedulerFilterTimeout", true, Beta),
    gate("DRAWorkloadResourceClaims", false, Alpha),
    locked("DeclarativeValidation", true, Ga),
    gate("DeclarativeValidationBeta", true, Beta),
    gate("DeclarativeValidationTakeover", false, Deprecated),
    gate("DeploymentReplicaSetTerminatingReplicas", true, Beta),
    gate("DetectCacheInconsistency", true, Beta),
    locked("DisableAllocatorDualWrite", true, Ga),
    gate("DisableCPUQuotaWithExclusiveCPUs", true, Deprecated),
    gate("DisableNodeKubeProxyVersion", true, Deprecated),
    locked("DynamicResourceAllocation", true, Ga),
    gate("EnvFiles", true, Beta),
    gate("EventedPLEG", false, Alpha),
    locked("ExecProbeTimeout", true, Ga),
    gate("ExtendWebSocketsToKubelet", true, Beta),
    gate("ExternalServiceAccountTokenSigner", true, Ga),
    gate("GangScheduling", false, Alpha),
    gate(GENERIC_WORKLOAD, false, Alpha),
    gate("GitRepoVolumeDriver", false, Deprecated),
    gate("GracefulNodeShutdown", true, Beta),
    gate("GracefulNodeShutdownBasedOnPodPriority", true, Beta),
    gate("HPAConfigurableTolerance", true, Beta),
    gate("HPAScaleToZero", false, Alpha),
    locked("HonorPVReclaimPolicy", true, Ga),
    gate("HostnameOverride", true, Beta),
    locked("ImageMaximumGCAge", true, Ga),
    gate("ImageVolume", true, Ga),
    gate("ImageVolumeWithDigest", false, Alpha),
    locked("InOrderInformers", true, Ga),
    gate("InOrderInformersBatchProcess", true, Beta),
    gate("InPlacePodLevelResourcesVerticalScaling", true, Beta),
    locked("InPlacePodVerticalScaling", true, Ga),
    gate(
        "InPlacePodVerticalScalingAllocatedStatus",
        false,
        Deprecated,
    ),
    gate("InPlacePodVerticalScalingExclusiveCPUs", false, Alpha),
    gate("InPlacePodVerticalScalingExclusiveMemory", false, Alpha),
    gate("InPlacePodVerticalScalingInitContainers", true, Beta),
    gate("InformerResourceVersion", true, Ga),
    locked("JobBackoffLimitPerIndex", true, Ga),
    locked("JobManagedBy", true, Ga),
    locked("JobPodReplacementPolicy", true, Ga),
    locked("JobSuccessPolicy", true, Ga),
    gate("KMSv1", false, Deprecated),
    locked("KubeletCgroupDriverFromCRI", true, Ga),
    gate("KubeletCrashLoopBackOffMax", true, Beta),
    gate("KubeletEnsureSecretPulledImages", true, Beta),
    locked("KubeletFineGrainedAuthz", true, Ga),
    gate("KubeletInUserNamespace", false, Alpha),
    locked("KubeletPSI", true, Ga),
    gate("KubeletPodResourcesDynamicResources", true, Ga),
    gate("KubeletPodResourcesGet", true, Ga),
    gate("KubeletPodResourcesListUseActivePods", true, Deprecated),
    gate("KubeletRegistrationGetOnExistsOnly", false, Deprecated),
    gate("KubeletSeparateDiskGC", true, Beta),
    gate(
        "KubeletServiceAccountTokenForCredentialProviders",
        true,
        Beta,
    ),
    locked("KubeletTracing", true, Ga),
    gate("ListFromCacheSnapshot", true, Beta),
    gate(
        "LocalStorageCapacityIsolationFSQuotaMonitoring",
        false,
        Beta,
    ),
    locked("LogarithmicScaleDown", true, Ga),
    gate("LoggingAlphaOptions", false, Alpha),
    gate("LoggingBetaOptions", true, Beta),
    gate("ManifestBasedAdmissionControlConfig", false, Alpha),
    locked("MatchLabelKeysInPodAffinity", true, Ga),
    gate("MatchLabelKeysInPodTopologySpread", true, Beta),
    gate("MatchLabelKeysInPodTopologySpreadSelectorMerge", true, Beta),
    gate(MAX_UNAVAILABLE_STATEFUL_SET, false, Beta),
    gate("MemoryQoS", false, Alpha),
    locked("MultiCIDRServiceAllocator", true, Ga),
    gate("MutableCSINodeAllocatableCount", true, Ga),
    gate("MutablePVNodeAffinity", false, Alpha),
    gate("MutablePodResourcesForSuspendedJobs", true, Beta),
    gate("MutableSchedulingDirectivesForSuspendedJobs", true, Beta),
    gate("MutatingAdmissionPolicy", true, Ga),
    locked("NFTablesProxyMode", true, Ga),
    gate("NativeHistograms", false, Alpha),
    gate("NodeDeclaredFeatures", true, Beta),
    locked("NodeInclusionPolicyInPodTopologySpread", true, Ga),
    gate("NodeLogQuery", true, Ga),
    locked("NodeSwap", true, Ga),
    gate("NominatedNodeNameForExpectation", true, Beta),
    gate("OpenAPIEnums", true, Beta),
    gate("OpportunisticBatching", true, Beta),
    locked("OrderedNamespaceDeletion", true, Ga),
    gate("PLEGOnDemandRelist", true, Beta),
    gate("PersistentVolumeClaimUnusedSinceTime", false, Alpha),
    gate("PodAndContainerStatsFromCRI", false, Alpha),
    gate(POD_CERTIFICATE_REQUEST, false, Beta),
    gate("PodDeletionCost", true, Beta),
    gate("PodLevelResourceManagers", false, Alpha),
    gate("PodLevelResources", true, Beta),
    locked("PodLifecycleSleepAction", true, Ga),
    locked("PodLifecycleSleepActionAllowZero", true, Ga),
    gate("PodLogsQuerySplitStreams", false, Alpha),
    locked("PodObservedGenerationTracking", true, Ga),
    gate("PodReadyToStartContainersCondition", true, Beta),
    locked("PodSchedulingReadiness", true, Ga),
    gate("PodTopologyLabelsAdmission", true, Beta),
    gate("PodsAPI", false, Alpha),
    gate("PortForwardWebsockets", true, Beta),
    locked("PreferSameTrafficDistribution", true, Ga),
    gate("PreventStaticPodAPIReferences", true, Beta),
    gate("ProcMountType", true, Ga),
    gate("QOSReserved", false, Alpha),
    locked("RecoverVolumeExpansionFailure", true, Ga),
    locked("RecursiveReadOnlyMounts", true, Ga),
    gate("ReduceDefaultCrashLoopBackOffDecay", false, Alpha),
    locked("RelaxedDNSSearchValidation", true, Ga),
    locked("RelaxedEnvironmentVariableValidation", true, Ga),
    gate("RelaxedServiceNameValidation", true, Beta),
    gate("ReloadKubeletClientCAFile", true, Beta),
    gate("ReloadKubeletServerCertificateFile", true, Beta),
    gate("RemoteRequestHeaderUID", true, Beta),
    locked("ResilientWatchCacheInitialization", true, Ga),
    gate("ResourceHealthStatus", true, Beta),
    gate("ResourceHealthStatusMessage", true, Beta),
    gate("RestartAllContainersOnContainerExits", true, Beta),
    locked("RetryGenerateName", true, Ga),
    gate("RotateKubeletServerCertificate", true, Beta),
    gate("RuntimeClassInImageCriApi", false, Alpha),
    gate(SELINUX_CHANGE_POLICY, true, Ga),
    gate("SELinuxMount", false, Beta),
    gate("SELinuxMountReadWriteOncePod", true, Ga),
    gate("SchedulerAsyncAPICalls", false, Beta),
    gate("SchedulerAsyncPreemption", true, Beta),
    gate("SchedulerPopFromBackoffQ", true, Beta),
    locked("SchedulerQueueingHints", true, Ga),
    gate("SeparateCacheWatchRPC", false, Deprecated),
    locked("SeparateTaintEvictionController", true, Ga),
    gate("ServiceAccountNodeAudienceRestriction", true, Beta),
    locked("ServiceAccountTokenJTI", true, Ga),
    locked("ServiceAccountTokenNodeBinding", true, Ga),
    locked("ServiceAccountTokenNodeBindingValidation", true, Ga),
    locked("ServiceAccountTokenPodNodeInfo", true, Ga),
    gate("ShardedListAndWatch", false, Alpha),
    locked("SidecarContainers", true, Ga),
    gate("SizeBasedListCostEstimate", true, Beta),
    gate("StaleControllerConsistencyDaemonSet", true, Beta),
    gate("StaleControllerConsistencyJob", true, Beta),
    gate("StaleControllerConsistencyReplicaSet", true, Beta),
    gate("StaleControllerConsistencyStatefulSet", true, Beta),
    gate("StatefulSetSemanticRevisionComparison", true, Beta),
    gate("StorageCapacityScoring", false, Alpha),
    gate("StorageNamespaceIndex", true, Deprecated),
    gate(STORAGE_VERSION_API, false, Alpha),
    gate("StorageVersionHash", true, Beta),
    gate(STORAGE_VERSION_MIGRATOR, false, Beta),
    locked("StreamingCollectionEncodingToJSON", true, Ga),
    locked("StreamingCollectionEncodingToProtobuf", true, Ga),
    gate("StrictIPCIDRValidation", true, Beta),
    locked("StructuredAuthenticationConfiguration", true, Ga),
    gate(
        "StructuredAuthenticationConfigurationEgressSelector",
        true,
        Beta,
    ),
    gate(
        "StructuredAuthenticationConfigurationJWKSMetrics",
        true,
        Beta,
    ),
    locked("StructuredAuthorizationConfiguration", true, Ga),
    locked("SupplementalGroupsPolicy", true, Ga),
    locked("SystemdWatchdog", true, Ga),
    gate("TaintTolerationComparisonOperators", false, Alpha),
    gate("TokenRequestServiceAccountUIDValidation", true, Beta),
    locked("TopologyAwareHints", true, Ga),
    gate("TopologyAwareWorkloadScheduling", false, Alpha),
    gate("TopologyManagerPolicyAlphaOptions", false, Alpha),
    gate("TopologyManagerPolicyBetaOptions", true, Beta),
    gate("TopologyManagerPolicyOptions", true, Ga),
    gate("TranslateStreamCloseWebsocketRequests", true, Beta),
    gate("UnauthenticatedHTTP2DOSMitigation", true, Beta),
    gate("UnknownVersionInteroperabilityProxy", true, Beta),
    gate("UnlockWhileProcessingFIFO", true, Beta),
    gate("UserNamespacesHostNetworkSupport", false, Alpha),
    locked("UserNamespacesSupport", true, Ga),
    locked("VolumeAttributesClass", true, Ga),
    gate("VolumeLimitScaling", false, Alpha),
    gate("WatchCacheInitializationPostStartHook", true, Beta),
    locked("WatchFromStorageWithoutResourceVersion", false, Deprecated),
    gate("WatchList", true, Beta),
    gate("WatchListClient", true, Beta),
    locked("WinDSR", true, Ga),
    locked("WinOverlay", true, Ga),
    gate("WindowsCPUAndMemoryAffinity", false, Alpha),
    gate("WindowsGracefulNodeShutdown", true, Beta),
    gate("WindowsHostNetwork", false, Deprecated),
    gate("WorkloadAwarePreemption", false, Alpha),
    gate("WorkloadWithJob", false, Alpha),
];

/// The spec of gate `name`, if kcm knows it (names are case-sensitive, as upstream's).
pub fn spec(name: &str) -> Option<&'static FeatureSpec> {
    KNOWN_FEATURES
        .binary_search_by(|s| s.name.cmp(name))
        .ok()
        .map(|i| &KNOWN_FEATURES[i])
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
         --feature-gates 'wardle:featureA=true,wardle:featureB=false' --feature-gates \
         'kube:featureC=true'Options are:"
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
    /// `APIServerIdentity`.
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
                arg: "AllBeta=false,APIServerIdentity=true",
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
                    g.enabled(API_SERVER_IDENTITY),
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
            gates.missing(&[GENERIC_WORKLOAD, API_SERVER_IDENTITY]),
            [GENERIC_WORKLOAD]
        );
    }

    #[test]
    fn help_lists_alpha_and_beta_gates_only() {
        let help = feature_gates_help();
        assert!(help.contains("kube:GenericWorkload=true|false (ALPHA - default=false)"));
        assert!(help.contains("kube:APIServerIdentity=true|false (BETA - default=true)"));
        assert!(help.contains("kube:DRADeviceTaints=true|false (BETA - default=true)"));
        assert!(help.contains("kube:WatchListClient=true|false (BETA - default=true)"));
        assert!(help.contains("kube:AllAlpha=true|false (ALPHA - default=false)"));
        assert!(!help.contains("DynamicResourceAllocation"));
        assert!(!help.contains("StorageNamespaceIndex"));
        assert!(!help.contains("SELinuxChangePolicy"), "GA at 1.36");
        // v1.36's help lists 150 alpha and beta gates (AllAlpha and AllBeta among them), after
        // the two lines of syntax.
        let listed = help.lines().filter(|l| l.starts_with("kube:")).count();
        assert_eq!(listed, 150);
        assert_eq!(help.lines().count(), 152);
    }

    /// Gates kcm never consults are still accepted, with their v1.36 spec: kube's own, the
    /// generic API server's, client-go's, component-base's and controller-manager's.
    #[test]
    fn every_v1_36_gate_parses_with_its_default() {
        let gates = FeatureGates::new();
        for (name, default, pre_release, lock_to_default) in [
            ("InPlacePodVerticalScaling", true, Ga, true),
            ("SidecarContainers", true, Ga, true),
            ("DRAAdminAccess", true, Ga, true),
            ("DRAPrioritizedList", true, Ga, false),
            ("DRADeviceTaints", true, Beta, false),
            ("DRADeviceTaintRules", false, Beta, false),
            ("MaxUnavailableStatefulSet", false, Beta, false),
            ("PodsAPI", false, Alpha, false),
            // generic API server
            ("APIResponseCompression", true, Beta, false),
            ("WatchList", true, Beta, false),
            ("KMSv1", false, Deprecated, false),
            (
                "WatchFromStorageWithoutResourceVersion",
                false,
                Deprecated,
                true,
            ),
            // client-go
            ("WatchListClient", true, Beta, false),
            ("ClientsAllowCBOR", false, Alpha, false),
            ("InOrderInformers", true, Ga, true),
            // component-base: logging, metrics, zpages
            ("ContextualLogging", true, Beta, false),
            ("LoggingAlphaOptions", false, Alpha, false),
            ("NativeHistograms", false, Alpha, false),
            ("ComponentFlagz", true, Beta, false),
            // controller-manager
            (
                "ControllerManagerReleaseLeaderElectionLockOnExit",
                false,
                Alpha,
                false,
            ),
            ("CloudControllerManagerWebhook", false, Alpha, false),
        ] {
            let got = spec(name).unwrap_or_else(|| panic!("{name} is known"));
            assert_eq!(
                (got.default, got.pre_release, got.lock_to_default),
                (default, pre_release, lock_to_default),
                "{name}"
            );
            assert_eq!(gates.enabled(name), default, "{name}");
        }

        let gates = FeatureGates::parse_all(&[
            "WatchListClient=false,NativeHistograms=true",
            "kube:ContextualLogging=false,InPlacePodVerticalScaling=true",
        ])
        .expect("valid");
        assert!(!gates.enabled("WatchListClient"));
        assert!(gates.enabled("NativeHistograms"));
        assert!(!gates.enabled("ContextualLogging"));
        assert!(gates.enabled("InPlacePodVerticalScaling"));
        // AllBeta reaches gates kcm never consults, not GA ones.
        let gates = FeatureGates::parse_all(&["AllBeta=false"]).expect("valid");
        assert!(!gates.enabled("WatchListClient"));
        assert!(gates.enabled("SidecarContainers"));
    }

    /// A gate locked to its default refuses the other value with upstream's message, whatever
    /// its stage; gates removed before 1.36 are unknown.
    #[test]
    fn locked_and_removed_gates_are_refused() {
        for (arg, want) in [
            (
                "InPlacePodVerticalScaling=false",
                "cannot set feature gate InPlacePodVerticalScaling to false, feature is locked \
                 to true",
            ),
            (
                "kube:SidecarContainers=false",
                "cannot set feature gate SidecarContainers to false, feature is locked to true",
            ),
            (
                "WatchFromStorageWithoutResourceVersion=true",
                "cannot set feature gate WatchFromStorageWithoutResourceVersion to true, \
                 feature is locked to false",
            ),
            (
                "ServiceTrafficDistribution=true",
                "unrecognized feature gate: ServiceTrafficDistribution",
            ),
            (
                "ComponentSLIs=true",
                "unrecognized feature gate: ComponentSLIs",
            ),
            (
                "watchlistclient=true",
                "unrecognized feature gate: watchlistclient",
            ),
        ] {
            let err = FeatureGates::parse_all(&[arg]).expect_err(arg);
            assert_eq!(err.to_string(), want, "{arg}");
        }
        // A locked gate set to its own value is fine.
        let gates = FeatureGates::parse_all(&["SidecarContainers=true"]).expect("valid");
        assert!(gates.enabled("SidecarContainers"));
    }
}
