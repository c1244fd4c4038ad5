//! kube-controller-manager's controller names and the older aliases `--controllers` accepts, as upstream's `cmd/kube-controller-manager/names`.
//!
//! A leaf: the flags ([`super::options`]) list these names in `--controllers`' help, and the
//! descriptors ([`super::builtin`]) register under them, without either depending on the other.

use super::feature_gates as gates;

/// One controller's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerNames {
    /// The canonical name (upstream's `names` constant).
    pub name: &'static str,
    /// Older names `--controllers` also accepts (upstream's `KCMControllerAliases`).
    pub aliases: &'static [&'static str],
    /// Whether `*` leaves the controller off (it runs only when named).
    pub disabled_by_default: bool,
    /// Its service account in `kube-system` under `--use-service-account-credentials`: the
    /// name upstream's start function passes to `ClientBuilder.ClientOrDie`, which is also its
    /// `system:controller:<name>` ClusterRole (the node lifecycle, taint eviction and node IPAM
    /// controllers share `node-controller`). Empty for a controller upstream starts with the
    /// manager's own (root) client whatever the flag says (the service account token
    /// controller, `startServiceAccountTokenController`'s `rootClientBuilder`).
    pub service_account: &'static str,
}

/// kube-controller-manager's name of the ReplicaSet controller.
pub const REPLICASET_CONTROLLER: &str = crate::replicaset::CONTROLLER_NAME;
/// kube-controller-manager's name of the Deployment controller.
pub const DEPLOYMENT_CONTROLLER: &str = crate::deployment::CONTROLLER_NAME;
/// kube-controller-manager's name of the garbage collector.
pub const GARBAGE_COLLECTOR_CONTROLLER: &str = crate::garbagecollector::CONTROLLER_NAME;
/// kube-controller-manager's name of the node lifecycle controller.
pub const NODE_LIFECYCLE_CONTROLLER: &str = crate::nodelifecycle::CONTROLLER_NAME;
/// kube-controller-manager's name of the taint eviction controller.
pub const TAINT_EVICTION_CONTROLLER: &str = crate::tainteviction::CONTROLLER_NAME;
/// kube-controller-manager's name of the namespace controller.
pub const NAMESPACE_CONTROLLER: &str = crate::namespace::CONTROLLER_NAME;
/// kube-controller-manager's name of the DaemonSet controller.
pub const DAEMONSET_CONTROLLER: &str = crate::daemon::CONTROLLER_NAME;
/// kube-controller-manager's name of the StatefulSet controller.
pub const STATEFULSET_CONTROLLER: &str = crate::statefulset::CONTROLLER_NAME;
/// kube-controller-manager's name of the ReplicationController controller.
pub const REPLICATIONCONTROLLER_CONTROLLER: &str = crate::replication::CONTROLLER_NAME;
/// kube-controller-manager's name of the service account controller.
pub const SERVICEACCOUNT_CONTROLLER: &str = crate::serviceaccount::CONTROLLER_NAME;
/// kube-controller-manager's name of the service account token controller.
pub const SERVICEACCOUNT_TOKEN_CONTROLLER: &str =
    crate::serviceaccount::tokens::TOKENS_CONTROLLER_NAME;
/// kube-controller-manager's name of the Job controller.
pub const JOB_CONTROLLER: &str = crate::job::CONTROLLER_NAME;
/// kube-controller-manager's name of the CronJob controller.
pub const CRONJOB_CONTROLLER: &str = crate::cronjob::CONTROLLER_NAME;
/// kube-controller-manager's name of the ClusterRole aggregation controller.
pub const CLUSTERROLE_AGGREGATION_CONTROLLER: &str = crate::clusterroleaggregation::CONTROLLER_NAME;
/// kube-controller-manager's name of the CSR signing controller.
pub const CSR_SIGNING_CONTROLLER: &str = crate::certificates::signer::CONTROLLER_NAME;
/// kube-controller-manager's name of the CSR approving controller.
pub const CSR_APPROVING_CONTROLLER: &str = crate::certificates::approver::CONTROLLER_NAME;
/// kube-controller-manager's name of the CSR cleaner.
pub const CSR_CLEANER_CONTROLLER: &str = crate::certificates::cleaner::CONTROLLER_NAME;
/// kube-controller-manager's name of the TTL controller.
pub const TTL_CONTROLLER: &str = crate::ttl::CONTROLLER_NAME;
/// kube-controller-manager's name of the TTL-after-finished controller.
pub const TTL_AFTER_FINISHED_CONTROLLER: &str = crate::ttlafterfinished::CONTROLLER_NAME;
/// kube-controller-manager's name of the HorizontalPodAutoscaler controller.
pub const HORIZONTAL_POD_AUTOSCALER_CONTROLLER: &str = crate::podautoscaler::CONTROLLER_NAME;
/// kube-controller-manager's name of the disruption controller.
pub const DISRUPTION_CONTROLLER: &str = crate::disruption::CONTROLLER_NAME;
/// kube-controller-manager's name of the ResourceQuota controller.
pub const RESOURCE_QUOTA_CONTROLLER: &str = crate::resourcequota::CONTROLLER_NAME;
/// kube-controller-manager's name of the pod garbage collector.
pub const POD_GARBAGE_COLLECTOR_CONTROLLER: &str = crate::podgc::CONTROLLER_NAME;

/// kube-controller-manager's name of the endpoints controller.
pub const ENDPOINTS_CONTROLLER: &str = crate::endpoint::CONTROLLER_NAME;
/// kube-controller-manager's name of the EndpointSlice controller.
pub const ENDPOINTSLICE_CONTROLLER: &str = crate::endpointslice::CONTROLLER_NAME;
/// kube-controller-manager's name of the EndpointSlice mirroring controller.
pub const ENDPOINTSLICE_MIRRORING_CONTROLLER: &str = crate::endpointslicemirroring::CONTROLLER_NAME;
/// kube-controller-manager's name of the node IPAM controller.
pub const NODE_IPAM_CONTROLLER: &str = crate::nodeipam::CONTROLLER_NAME;
/// kube-controller-manager's name of the PersistentVolumeClaim protection controller.
pub const PERSISTENTVOLUMECLAIM_PROTECTION_CONTROLLER: &str =
    crate::volume::pvcprotection::CONTROLLER_NAME;
/// kube-controller-manager's name of the PersistentVolume protection controller.
pub const PERSISTENTVOLUME_PROTECTION_CONTROLLER: &str =
    crate::volume::pvprotection::CONTROLLER_NAME;
/// kube-controller-manager's name of the VolumeAttributesClass protection controller.
pub const VOLUMEATTRIBUTESCLASS_PROTECTION_CONTROLLER: &str =
    crate::volume::vacprotection::CONTROLLER_NAME;
/// kube-controller-manager's name of the PersistentVolume binder controller.
pub const PERSISTENTVOLUME_BINDER_CONTROLLER: &str =
    crate::volume::persistentvolume::CONTROLLER_NAME;
/// kube-controller-manager's name of the attach/detach controller.
pub const PERSISTENTVOLUME_ATTACH_DETACH_CONTROLLER: &str =
    crate::volume::attachdetach::CONTROLLER_NAME;
/// kube-controller-manager's name of the volume expand controller.
pub const PERSISTENTVOLUME_EXPANDER_CONTROLLER: &str = crate::volume::expand::CONTROLLER_NAME;
/// kube-controller-manager's name of the ephemeral volume controller.
pub const EPHEMERAL_VOLUME_CONTROLLER: &str = crate::volume::ephemeral::CONTROLLER_NAME;
/// kube-controller-manager's name of the ResourceClaim controller.
pub const RESOURCE_CLAIM_CONTROLLER: &str = crate::resourceclaim::CONTROLLER_NAME;
/// kube-controller-manager's name of the device taint eviction controller.
pub const DEVICE_TAINT_EVICTION_CONTROLLER: &str = crate::devicetainteviction::CONTROLLER_NAME;
/// kube-controller-manager's name of the root CA certificate publisher.
pub const ROOT_CA_CERTIFICATE_PUBLISHER_CONTROLLER: &str =
    crate::rootcacertpublisher::CONTROLLER_NAME;

/// `replicaset-controller`, alias `replicaset`.
pub const REPLICASET: ControllerNames = ControllerNames {
    name: REPLICASET_CONTROLLER,
    aliases: &["replicaset"],
    disabled_by_default: false,
    service_account: "replicaset-controller",
};
/// `deployment-controller`, alias `deployment`.
pub const DEPLOYMENT: ControllerNames = ControllerNames {
    name: DEPLOYMENT_CONTROLLER,
    aliases: &["deployment"],
    disabled_by_default: false,
    service_account: "deployment-controller",
};
/// `garbage-collector-controller`, alias `garbagecollector`.
pub const GARBAGE_COLLECTOR: ControllerNames = ControllerNames {
    name: GARBAGE_COLLECTOR_CONTROLLER,
    aliases: &[crate::garbagecollector::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "generic-garbage-collector",
};
/// `node-lifecycle-controller`, alias `nodelifecycle`.
pub const NODE_LIFECYCLE: ControllerNames = ControllerNames {
    name: NODE_LIFECYCLE_CONTROLLER,
    aliases: &["nodelifecycle"],
    disabled_by_default: false,
    service_account: "node-controller",
};
/// `taint-eviction-controller` (no alias: it is newer than the aliases).
pub const TAINT_EVICTION: ControllerNames = ControllerNames {
    name: TAINT_EVICTION_CONTROLLER,
    aliases: &[],
    disabled_by_default: false,
    service_account: "node-controller",
};
/// `namespace-controller`, alias `namespace`.
pub const NAMESPACE: ControllerNames = ControllerNames {
    name: NAMESPACE_CONTROLLER,
    aliases: &[crate::namespace::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "namespace-controller",
};
/// `daemonset-controller`, alias `daemonset`.
pub const DAEMONSET: ControllerNames = ControllerNames {
    name: DAEMONSET_CONTROLLER,
    aliases: &["daemonset"],
    disabled_by_default: false,
    service_account: "daemon-set-controller",
};
/// `statefulset-controller`, alias `statefulset`.
pub const STATEFULSET: ControllerNames = ControllerNames {
    name: STATEFULSET_CONTROLLER,
    aliases: &["statefulset"],
    disabled_by_default: false,
    service_account: "statefulset-controller",
};
/// `replicationcontroller-controller`, alias `replicationcontroller`.
pub const REPLICATIONCONTROLLER: ControllerNames = ControllerNames {
    name: REPLICATIONCONTROLLER_CONTROLLER,
    aliases: &["replicationcontroller"],
    disabled_by_default: false,
    service_account: "replication-controller",
};
/// `serviceaccount-controller`, alias `serviceaccount`.
pub const SERVICEACCOUNT: ControllerNames = ControllerNames {
    name: SERVICEACCOUNT_CONTROLLER,
    aliases: &[crate::serviceaccount::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "service-account-controller",
};
/// `serviceaccount-token-controller`, alias `serviceaccount-token`: runs with the manager's
/// own credentials, as upstream's (it signs the tokens the other accounts' clients use).
pub const SERVICEACCOUNT_TOKEN: ControllerNames = ControllerNames {
    name: SERVICEACCOUNT_TOKEN_CONTROLLER,
    aliases: &[crate::serviceaccount::tokens::TOKENS_CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "",
};

/// `job-controller`, alias `job`.
pub const JOB: ControllerNames = ControllerNames {
    name: JOB_CONTROLLER,
    aliases: &["job"],
    disabled_by_default: false,
    service_account: "job-controller",
};
/// `cronjob-controller`, alias `cronjob`.
pub const CRONJOB: ControllerNames = ControllerNames {
    name: CRONJOB_CONTROLLER,
    aliases: &["cronjob"],
    disabled_by_default: false,
    service_account: "cronjob-controller",
};
/// `certificatesigningrequest-signing-controller`, alias `csrsigning` (it starts only when
/// signing files are given).
pub const CSR_SIGNING: ControllerNames = ControllerNames {
    name: CSR_SIGNING_CONTROLLER,
    aliases: &[crate::certificates::signer::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "certificate-controller",
};
/// `certificatesigningrequest-approving-controller`, alias `csrapproving`.
pub const CSR_APPROVING: ControllerNames = ControllerNames {
    name: CSR_APPROVING_CONTROLLER,
    aliases: &[crate::certificates::approver::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "certificate-controller",
};
/// `certificatesigningrequest-cleaner-controller`, alias `csrcleaner`.
pub const CSR_CLEANER: ControllerNames = ControllerNames {
    name: CSR_CLEANER_CONTROLLER,
    aliases: &[crate::certificates::cleaner::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "certificate-controller",
};
/// `ttl-controller`, alias `ttl`.
pub const TTL: ControllerNames = ControllerNames {
    name: TTL_CONTROLLER,
    aliases: &[crate::ttl::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "ttl-controller",
};
/// `ttl-after-finished-controller`, alias `ttl-after-finished`.
pub const TTL_AFTER_FINISHED: ControllerNames = ControllerNames {
    name: TTL_AFTER_FINISHED_CONTROLLER,
    aliases: &[crate::ttlafterfinished::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "ttl-after-finished-controller",
};
/// `disruption-controller`, alias `disruption`.
pub const DISRUPTION: ControllerNames = ControllerNames {
    name: DISRUPTION_CONTROLLER,
    aliases: &[crate::disruption::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "disruption-controller",
};
/// `resourcequota-controller`, alias `resourcequota`.
pub const RESOURCE_QUOTA: ControllerNames = ControllerNames {
    name: RESOURCE_QUOTA_CONTROLLER,
    aliases: &[crate::resourcequota::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "resourcequota-controller",
};
/// `pod-garbage-collector-controller`, alias `podgc`.
pub const POD_GARBAGE_COLLECTOR: ControllerNames = ControllerNames {
    name: POD_GARBAGE_COLLECTOR_CONTROLLER,
    aliases: &[crate::podgc::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "pod-garbage-collector",
};
/// `endpoints-controller`, alias `endpoint`.
pub const ENDPOINTS: ControllerNames = ControllerNames {
    name: ENDPOINTS_CONTROLLER,
    aliases: &[crate::endpoint::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "endpoint-controller",
};
/// `endpointslice-controller`, alias `endpointslice`.
pub const ENDPOINTSLICE: ControllerNames = ControllerNames {
    name: ENDPOINTSLICE_CONTROLLER,
    aliases: &[crate::endpointslice::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "endpointslice-controller",
};
/// `endpointslice-mirroring-controller`, alias `endpointslicemirroring`.
pub const ENDPOINTSLICE_MIRRORING: ControllerNames = ControllerNames {
    name: ENDPOINTSLICE_MIRRORING_CONTROLLER,
    aliases: &[crate::endpointslicemirroring::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "endpointslicemirroring-controller",
};
/// `node-ipam-controller`, alias `nodeipam` (on by default, as upstream; it only starts with
/// `--allocate-node-cidrs`).
pub const NODE_IPAM: ControllerNames = ControllerNames {
    name: NODE_IPAM_CONTROLLER,
    aliases: &[crate::nodeipam::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "node-controller",
};
/// `root-ca-certificate-publisher-controller`, alias `root-ca-cert-publisher`.
pub const ROOT_CA_CERTIFICATE_PUBLISHER: ControllerNames = ControllerNames {
    name: ROOT_CA_CERTIFICATE_PUBLISHER_CONTROLLER,
    aliases: &[crate::rootcacertpublisher::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "root-ca-cert-publisher",
};

/// `horizontal-pod-autoscaler-controller`, alias `horizontalpodautoscaling`.
pub const HORIZONTAL_POD_AUTOSCALER: ControllerNames = ControllerNames {
    name: HORIZONTAL_POD_AUTOSCALER_CONTROLLER,
    aliases: &[crate::podautoscaler::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "horizontal-pod-autoscaler",
};

/// `clusterrole-aggregation-controller`, alias `clusterrole-aggregation`.
pub const CLUSTERROLE_AGGREGATION: ControllerNames = ControllerNames {
    name: CLUSTERROLE_AGGREGATION_CONTROLLER,
    aliases: &[crate::clusterroleaggregation::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "clusterrole-aggregation-controller",
};

/// `persistentvolumeclaim-protection-controller`, alias `pvc-protection`.
pub const PERSISTENTVOLUMECLAIM_PROTECTION: ControllerNames = ControllerNames {
    name: PERSISTENTVOLUMECLAIM_PROTECTION_CONTROLLER,
    aliases: &[crate::volume::pvcprotection::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "pvc-protection-controller",
};

/// `persistentvolume-protection-controller`, alias `pv-protection`.
pub const PERSISTENTVOLUME_PROTECTION: ControllerNames = ControllerNames {
    name: PERSISTENTVOLUME_PROTECTION_CONTROLLER,
    aliases: &[crate::volume::pvprotection::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "pv-protection-controller",
};

/// `volumeattributesclass-protection-controller` (no alias: it is newer than the aliases). On
/// by default: its feature gate, `VolumeAttributesClass`, is GA since v1.34.
pub const VOLUMEATTRIBUTESCLASS_PROTECTION: ControllerNames = ControllerNames {
    name: VOLUMEATTRIBUTESCLASS_PROTECTION_CONTROLLER,
    aliases: &[],
    disabled_by_default: false,
    service_account: "volumeattributesclass-protection-controller",
};

/// `persistentvolume-binder-controller`, alias `persistentvolume-binder`.
pub const PERSISTENTVOLUME_BINDER: ControllerNames = ControllerNames {
    name: PERSISTENTVOLUME_BINDER_CONTROLLER,
    aliases: &[crate::volume::persistentvolume::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "persistent-volume-binder",
};

/// `persistentvolume-attach-detach-controller`, alias `attachdetach`.
pub const PERSISTENTVOLUME_ATTACH_DETACH: ControllerNames = ControllerNames {
    name: PERSISTENTVOLUME_ATTACH_DETACH_CONTROLLER,
    aliases: &[crate::volume::attachdetach::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "attachdetach-controller",
};

/// `persistentvolume-expander-controller`, alias `persistentvolume-expander`.
pub const PERSISTENTVOLUME_EXPANDER: ControllerNames = ControllerNames {
    name: PERSISTENTVOLUME_EXPANDER_CONTROLLER,
    aliases: &[crate::volume::expand::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "expand-controller",
};

/// `ephemeral-volume-controller`, alias `ephemeral-volume`.
pub const EPHEMERAL_VOLUME: ControllerNames = ControllerNames {
    name: EPHEMERAL_VOLUME_CONTROLLER,
    aliases: &[crate::volume::ephemeral::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "ephemeral-volume-controller",
};

/// `resourceclaim-controller`, alias `resource-claim-controller`: on by default, as its gate,
/// `DynamicResourceAllocation`, is GA since v1.34.
pub const RESOURCE_CLAIM: ControllerNames = ControllerNames {
    name: RESOURCE_CLAIM_CONTROLLER,
    aliases: &[crate::resourceclaim::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "resource-claim-controller",
};

/// `device-taint-eviction-controller` (no alias: newer than the aliases): on by default, as
/// its gates, `DynamicResourceAllocation` (GA) and `DRADeviceTaints` (beta since v1.36), are.
pub const DEVICE_TAINT_EVICTION: ControllerNames = ControllerNames {
    name: DEVICE_TAINT_EVICTION_CONTROLLER,
    aliases: &[],
    disabled_by_default: false,
    service_account: "device-taint-eviction-controller",
};

/// kube-controller-manager's name of the service-lb controller.
pub const SERVICE_LB_CONTROLLER: &str = crate::servicelb::CONTROLLER_NAME;

/// `service-lb-controller`, alias `service`: a cloud controller, on by default and skipped
/// without a cloud, as upstream's (`isCloudProviderController`).
pub const SERVICE_LB: ControllerNames = ControllerNames {
    name: SERVICE_LB_CONTROLLER,
    aliases: &[crate::servicelb::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "service-controller",
};

/// kube-controller-manager's name of the ServiceCIDR controller.
pub const SERVICE_CIDR_CONTROLLER: &str = crate::servicecidrs::CONTROLLER_NAME;

/// `service-cidr-controller` (no alias: newer than the aliases), on by default since its gate,
/// `MultiCIDRServiceAllocator`, went GA.
pub const SERVICE_CIDR: ControllerNames = ControllerNames {
    name: SERVICE_CIDR_CONTROLLER,
    aliases: &[],
    disabled_by_default: false,
    service_account: "service-cidrs-controller",
};

/// kube-controller-manager's name of the cloud node lifecycle controller.
pub const CLOUD_NODE_LIFECYCLE_CONTROLLER: &str = crate::cloudnodelifecycle::CONTROLLER_NAME;

/// `cloud-node-lifecycle-controller`, alias `cloud-node-lifecycle`: a cloud controller (skipped
/// without a cloud), acting with the node controller's role, as upstream.
pub const CLOUD_NODE_LIFECYCLE: ControllerNames = ControllerNames {
    name: CLOUD_NODE_LIFECYCLE_CONTROLLER,
    aliases: &[crate::cloudnodelifecycle::CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "node-controller",
};

/// kube-controller-manager's name of the ValidatingAdmissionPolicy status controller.
pub const VALIDATINGADMISSIONPOLICY_STATUS_CONTROLLER: &str =
    crate::validatingadmissionpolicystatus::CONTROLLER_NAME;

/// `validatingadmissionpolicy-status-controller` (no alias: newer than the aliases), on by
/// default since ValidatingAdmissionPolicy went GA.
pub const VALIDATINGADMISSIONPOLICY_STATUS: ControllerNames = ControllerNames {
    name: VALIDATINGADMISSIONPOLICY_STATUS_CONTROLLER,
    aliases: &[],
    disabled_by_default: false,
    service_account: "validatingadmissionpolicy-status-controller",
};

/// kube-controller-manager's name of the bootstrap signer.
pub const BOOTSTRAP_SIGNER_CONTROLLER: &str = crate::bootstrap::SIGNER_CONTROLLER_NAME;
/// kube-controller-manager's name of the bootstrap token cleaner.
pub const TOKEN_CLEANER_CONTROLLER: &str = crate::bootstrap::CLEANER_CONTROLLER_NAME;

/// `bootstrap-signer-controller`, alias `bootstrapsigner`: disabled by default, as upstream.
pub const BOOTSTRAP_SIGNER: ControllerNames = ControllerNames {
    name: BOOTSTRAP_SIGNER_CONTROLLER,
    aliases: &[crate::bootstrap::SIGNER_CONTROLLER_ALIAS],
    disabled_by_default: true,
    service_account: "bootstrap-signer",
};
/// `token-cleaner-controller`, alias `tokencleaner`: disabled by default, as upstream.
pub const TOKEN_CLEANER: ControllerNames = ControllerNames {
    name: TOKEN_CLEANER_CONTROLLER,
    aliases: &[crate::bootstrap::CLEANER_CONTROLLER_ALIAS],
    disabled_by_default: true,
    service_account: "token-cleaner",
};

/// kube-controller-manager's name of the legacy service account token cleaner.
pub const LEGACY_SERVICEACCOUNT_TOKEN_CLEANER_CONTROLLER: &str =
    crate::serviceaccount::legacy_token_cleaner::LEGACY_TOKEN_CLEANER_CONTROLLER_NAME;

/// `legacy-serviceaccount-token-cleaner-controller`, alias
/// `legacy-service-account-token-cleaner`: on by default since its gate,
/// `LegacyServiceAccountTokenCleanUp`, went GA.
pub const LEGACY_SERVICEACCOUNT_TOKEN_CLEANER: ControllerNames = ControllerNames {
    name: LEGACY_SERVICEACCOUNT_TOKEN_CLEANER_CONTROLLER,
    aliases: &[crate::serviceaccount::legacy_token_cleaner::LEGACY_TOKEN_CLEANER_CONTROLLER_ALIAS],
    disabled_by_default: false,
    service_account: "legacy-service-account-token-cleaner",
};

/// Every controller kcm implements; [`super::builtin`] registers exactly these (a unit test
/// there checks it).
pub const BUILTIN_CONTROLLERS: [ControllerNames; 44] = [
    SERVICEACCOUNT_TOKEN,
    REPLICASET,
    REPLICATIONCONTROLLER,
    DEPLOYMENT,
    DAEMONSET,
    STATEFULSET,
    ENDPOINTS,
    ENDPOINTSLICE,
    ENDPOINTSLICE_MIRRORING,
    GARBAGE_COLLECTOR,
    NAMESPACE,
    NODE_IPAM,
    NODE_LIFECYCLE,
    ROOT_CA_CERTIFICATE_PUBLISHER,
    CSR_SIGNING,
    CSR_APPROVING,
    CSR_CLEANER,
    BOOTSTRAP_SIGNER,
    TOKEN_CLEANER,
    SERVICEACCOUNT,
    TAINT_EVICTION,
    JOB,
    CRONJOB,
    TTL,
    TTL_AFTER_FINISHED,
    POD_GARBAGE_COLLECTOR,
    HORIZONTAL_POD_AUTOSCALER,
    CLUSTERROLE_AGGREGATION,
    RESOURCE_QUOTA,
    DISRUPTION,
    PERSISTENTVOLUMECLAIM_PROTECTION,
    PERSISTENTVOLUME_PROTECTION,
    VOLUMEATTRIBUTESCLASS_PROTECTION,
    EPHEMERAL_VOLUME,
    RESOURCE_CLAIM,
    DEVICE_TAINT_EVICTION,
    SERVICE_LB,
    SERVICE_CIDR,
    CLOUD_NODE_LIFECYCLE,
    PERSISTENTVOLUME_BINDER,
    PERSISTENTVOLUME_ATTACH_DETACH,
    PERSISTENTVOLUME_EXPANDER,
    LEGACY_SERVICEACCOUNT_TOKEN_CLEANER,
    VALIDATINGADMISSIONPOLICY_STATUS,
];

/// A kube-controller-manager v1.36 controller kcm lists, accepts in `--controllers` and
/// skips with a warning: it is not built yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingController {
    /// Its names, as upstream's descriptor.
    pub names: ControllerNames,
    /// The feature gates upstream's descriptor requires (`requiredFeatureGates`).
    pub required_feature_gates: &'static [&'static str],
    /// Whether it is a cloud controller, skipped without a cloud (`isCloudProviderController`).
    pub cloud: bool,
}

/// Upstream's controllers that kcm does not implement yet, sorted by name. Most sit behind
/// gates that are off by default in v1.36, so `*` does not start them upstream either.
pub const NOT_BUILT_CONTROLLERS: [PendingController; 8] = [
    PendingController {
        names: ControllerNames {
            name: "kube-apiserver-serving-clustertrustbundle-publisher-controller",
            aliases: &[],
            disabled_by_default: false,
            service_account: "kube-apiserver-serving-clustertrustbundle-publisher",
        },
        required_feature_gates: &[gates::CLUSTER_TRUST_BUNDLE],
        cloud: false,
    },
    PendingController {
        names: ControllerNames {
            name: "node-route-controller",
            aliases: &["route"],
            disabled_by_default: false,
            service_account: "route-controller",
        },
        required_feature_gates: &[],
        cloud: true,
    },
    PendingController {
        names: ControllerNames {
            name: "podcertificaterequest-cleaner-controller",
            aliases: &[],
            disabled_by_default: false,
            service_account: "podcertificaterequestcleaner",
        },
        required_feature_gates: &[gates::POD_CERTIFICATE_REQUEST],
        cloud: false,
    },
    PendingController {
        names: ControllerNames {
            name: "podgroup-protection-controller",
            aliases: &[],
            disabled_by_default: false,
            service_account: "podgroup-protection-controller",
        },
        required_feature_gates: &[gates::GENERIC_WORKLOAD],
        cloud: false,
    },
    PendingController {
        names: ControllerNames {
            name: "resourcepoolstatusrequest-controller",
            aliases: &[],
            disabled_by_default: false,
            service_account: "resourcepoolstatusrequest-controller",
        },
        required_feature_gates: &[gates::DRA_RESOURCE_POOL_STATUS],
        cloud: false,
    },
    // Disabled by default upstream too; it needs the volume plugins' SELinux support
    // (`selinux_warning_controller_selinux_volume_conflict` and `SELinuxLabelConflict`
    // events), which kcm does not have.
    PendingController {
        names: ControllerNames {
            name: "selinux-warning-controller",
            aliases: &[],
            disabled_by_default: true,
            service_account: "selinux-warning-controller",
        },
        required_feature_gates: &[gates::SELINUX_CHANGE_POLICY],
        cloud: false,
    },
    PendingController {
        names: ControllerNames {
            name: "storage-version-migrator-controller",
            aliases: &[],
            disabled_by_default: false,
            service_account: "storage-version-migrator-controller",
        },
        required_feature_gates: &[gates::STORAGE_VERSION_MIGRATOR],
        cloud: false,
    },
    PendingController {
        names: ControllerNames {
            name: "storageversion-garbage-collector-controller",
            aliases: &["storage-version-gc"],
            disabled_by_default: false,
            service_account: "storage-version-garbage-collector",
        },
        required_feature_gates: &[gates::API_SERVER_IDENTITY, gates::STORAGE_VERSION_API],
        cloud: false,
    },
];

/// The canonical names of [`NOT_BUILT_CONTROLLERS`], sorted.
pub fn not_built_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = NOT_BUILT_CONTROLLERS.iter().map(|c| c.names.name).collect();
    names.sort_unstable();
    names
}

/// The canonical names of [`BUILTIN_CONTROLLERS`] and [`NOT_BUILT_CONTROLLERS`], sorted, and
/// those `*` leaves off (upstream's `KnownControllers` and `ControllersDisabledByDefault`: every
/// descriptor, whatever its feature gates).
pub fn builtin_names() -> (Vec<&'static str>, Vec<&'static str>) {
    let every = || {
        BUILTIN_CONTROLLERS
            .iter()
            .chain(NOT_BUILT_CONTROLLERS.iter().map(|c| &c.names))
    };
    let mut all: Vec<&str> = every().map(|c| c.name).collect();
    all.sort_unstable();
    let mut off: Vec<&str> = every()
        .filter(|c| c.disabled_by_default)
        .map(|c| c.name)
        .collect();
    off.sort_unstable();
    (all, off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kube_controller_managers() {
        let (all, off) = builtin_names();
        assert_eq!(
            all,
            [
                "bootstrap-signer-controller",
                "certificatesigningrequest-approving-controller",
                "certificatesigningrequest-cleaner-controller",
                "certificatesigningrequest-signing-controller",
                "cloud-node-lifecycle-controller",
                "clusterrole-aggregation-controller",
                "cronjob-controller",
                "daemonset-controller",
                "deployment-controller",
                "device-taint-eviction-controller",
                "disruption-controller",
                "endpoints-controller",
                "endpointslice-controller",
                "endpointslice-mirroring-controller",
                "ephemeral-volume-controller",
                "garbage-collector-controller",
                "horizontal-pod-autoscaler-controller",
                "job-controller",
                "kube-apiserver-serving-clustertrustbundle-publisher-controller",
                "legacy-serviceaccount-token-cleaner-controller",
                "namespace-controller",
                "node-ipam-controller",
                "node-lifecycle-controller",
                "node-route-controller",
                "persistentvolume-attach-detach-controller",
                "persistentvolume-binder-controller",
                "persistentvolume-expander-controller",
                "persistentvolume-protection-controller",
                "persistentvolumeclaim-protection-controller",
                "pod-garbage-collector-controller",
                "podcertificaterequest-cleaner-controller",
                "podgroup-protection-controller",
                "replicaset-controller",
                "replicationcontroller-controller",
                "resourceclaim-controller",
                "resourcepoolstatusrequest-controller",
                "resourcequota-controller",
                "root-ca-certificate-publisher-controller",
                "selinux-warning-controller",
                "service-cidr-controller",
                "service-lb-controller",
                "serviceaccount-controller",
                "serviceaccount-token-controller",
                "statefulset-controller",
                "storage-version-migrator-controller",
                "storageversion-garbage-collector-controller",
                "taint-eviction-controller",
                "token-cleaner-controller",
                "ttl-after-finished-controller",
                "ttl-controller",
                "validatingadmissionpolicy-status-controller",
                "volumeattributesclass-protection-controller",
            ]
        );
        assert_eq!(
            off,
            [
                "bootstrap-signer-controller",
                "selinux-warning-controller",
                "token-cleaner-controller"
            ]
        );
        assert_eq!(
            not_built_names(),
            NOT_BUILT_CONTROLLERS.map(|c| c.names.name),
            "kept sorted"
        );
    }
}
