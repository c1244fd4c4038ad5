//! The flags of `kcm run`, named, grouped and defaulted as kube-controller-manager's.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use kcm_machinery::leaderelection::LeaderElectionConfig;

use super::duration::GoDuration;
use super::error::{Error, Result};
use super::feature_gates::FeatureGates;
use super::names::{builtin_names, not_built_names};

/// Default `--secure-port` of kube-controller-manager.
pub const DEFAULT_SECURE_PORT: u16 = 10257;
/// The only `--leader-elect-resource-lock` kube-controller-manager still accepts.
pub const RESOURCE_LOCK_LEASES: &str = "leases";

/// Every flag of the controller manager. Controllers read their own group through
/// [`ControllerContext::options`](super::ControllerContext::options); a new controller adds
/// one group (or one field) here.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct ManagerOptions {
    /// `--controllers`, client connection, resync and leader election.
    #[command(flatten)]
    pub generic: GenericFlags,
    /// Leader election (shown with the generic flags, as kube-controller-manager does).
    #[command(flatten)]
    pub leader_election: LeaderElectionFlags,
    /// The HTTPS endpoint serving health checks and metrics.
    #[command(flatten)]
    pub secure_serving: SecureServingFlags,
    /// Who may read the endpoint: delegated authentication and authorization.
    #[command(flatten)]
    pub delegated_auth: DelegatedAuthFlags,
    /// The DaemonSet controller.
    #[command(flatten)]
    pub daemonset: DaemonSetControllerFlags,
    /// Flags shared with the cloud controller manager (pod CIDR allocation).
    #[command(flatten)]
    pub kube_cloud_shared: KubeCloudSharedFlags,
    /// The Deployment controller.
    #[command(flatten)]
    pub deployment: DeploymentControllerFlags,
    /// The endpoints controller.
    #[command(flatten)]
    pub endpoint: EndpointControllerFlags,
    /// The EndpointSlice controller.
    #[command(flatten)]
    pub endpointslice: EndpointSliceControllerFlags,
    /// The EndpointSlice mirroring controller.
    #[command(flatten)]
    pub endpointslice_mirroring: EndpointSliceMirroringControllerFlags,
    /// The ephemeral volume controller.
    #[command(flatten)]
    pub ephemeral_volume: EphemeralVolumeControllerFlags,
    /// The ResourceClaim controller.
    #[command(flatten)]
    pub resource_claim: ResourceClaimControllerFlags,
    /// The device taint eviction controller.
    #[command(flatten)]
    pub device_taint_eviction: DeviceTaintEvictionControllerFlags,
    /// The PersistentVolume binder controller.
    #[command(flatten)]
    pub persistentvolume_binder: PersistentVolumeBinderControllerFlags,
    /// The attach/detach controller.
    #[command(flatten)]
    pub attach_detach: AttachDetachControllerFlags,
    /// The garbage collector.
    #[command(flatten)]
    pub garbage_collector: GarbageCollectorControllerFlags,
    /// The namespace controller.
    #[command(flatten)]
    pub namespace: NamespaceControllerFlags,
    /// The ReplicaSet controller.
    #[command(flatten)]
    pub replicaset: ReplicaSetControllerFlags,
    /// The ReplicationController controller.
    #[command(flatten)]
    pub replicationcontroller: ReplicationControllerFlags,
    /// The service-lb controller.
    #[command(flatten)]
    pub service: ServiceControllerFlags,
    /// The ValidatingAdmissionPolicy status controller.
    #[command(flatten)]
    pub validating_admission_policy_status: ValidatingAdmissionPolicyStatusControllerFlags,
    /// The StatefulSet controller.
    #[command(flatten)]
    pub statefulset: StatefulSetControllerFlags,
    /// The node lifecycle controller.
    #[command(flatten)]
    pub node_lifecycle: NodeLifecycleControllerFlags,
    /// The Job controller.
    #[command(flatten)]
    pub job: JobControllerFlags,
    /// The CronJob controller.
    #[command(flatten)]
    pub cronjob: CronJobControllerFlags,
    /// The TTL-after-finished controller.
    #[command(flatten)]
    pub ttl_after_finished: TtlAfterFinishedControllerFlags,
    /// The pod garbage collector.
    #[command(flatten)]
    pub podgc: PodGcControllerFlags,
    /// The ResourceQuota controller.
    #[command(flatten)]
    pub resource_quota: ResourceQuotaControllerFlags,
    /// The HorizontalPodAutoscaler controller.
    #[command(flatten)]
    pub hpa: HpaControllerFlags,
    /// The node IPAM controller.
    #[command(flatten)]
    pub node_ipam: NodeIpamControllerFlags,
    /// The service account (token) controller's flags the root CA publisher reads.
    #[command(flatten)]
    pub sa_controller: SaControllerFlags,
    /// The legacy service account token cleaner.
    #[command(flatten)]
    pub legacy_sa_token_cleaner: LegacySaTokenCleanerFlags,

    #[command(flatten)]
    pub csr_signing: CsrSigningControllerFlags,
    /// Where the API server is.
    #[command(flatten)]
    pub misc: MiscFlags,
}

/// The generic flags of every controller manager.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Generic flags")]
pub struct GenericFlags {
    /// The controllers to run, in order of precedence: the first entry naming a controller
    /// decides. See [`controllers_help`].
    #[arg(
        long,
        value_name = "strings",
        value_delimiter = ',',
        allow_hyphen_values = true,
        default_value = "*",
        help = controllers_help()
    )]
    pub controllers: Vec<String>,

    /// `--feature-gates`, each occurrence as given (checked when parsed); see
    /// [`ManagerOptions::feature_gates`].
    #[arg(
        long,
        value_name = "colonSeparatedMultimapStringString",
        action = clap::ArgAction::Append,
        value_parser = super::feature_gates::parse_feature_gates_arg,
        help = super::feature_gates::feature_gates_help()
    )]
    pub feature_gates: Vec<String>,

    /// Burst of the client-side rate limiter on requests to the API server.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = kcm_machinery::client::DEFAULT_KUBE_API_BURST,
        help = "Burst to use while talking with the Kubernetes API server."
    )]
    pub kube_api_burst: u32,

    /// Accepted for compatibility with kube-controller-manager; requests are always JSON.
    #[arg(
        long,
        value_name = "string",
        default_value = "application/json",
        help = "Content type of requests sent to the API server. kcm always sends JSON; other \
                values are accepted for compatibility and ignored."
    )]
    pub kube_api_content_type: String,

    /// Sustained requests per second of the client-side rate limiter (0: client-go's 5,
    /// negative: unlimited).
    #[arg(
        long,
        value_name = "float32",
        default_value_t = kcm_machinery::client::DEFAULT_KUBE_API_QPS,
        allow_negative_numbers = true,
        help = "QPS to use while talking with the Kubernetes API server."
    )]
    pub kube_api_qps: f32,

    /// Informers resync between this and twice this.
    #[arg(
        long,
        value_name = "duration",
        default_value = "12h0m0s",
        help = "The resync period in reflectors will be random between MinResyncPeriod and \
                2*MinResyncPeriod."
    )]
    pub min_resync_period: GoDuration,
}

/// Leader election flags, as component-base's `BindLeaderElectionFlags`.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Generic flags")]
pub struct LeaderElectionFlags {
    /// Compete for the lease and run controllers only while holding it.
    #[arg(
        long = "leader-elect",
        value_name = "bool",
        default_value = "true",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool,
        help = "Start a leader election client and gain leadership before running the \
                controllers. Enable this when running replicated components for high \
                availability."
    )]
    pub leader_elect: bool,

    /// How long standbys wait after the last observed renewal before taking over.
    #[arg(
        long = "leader-elect-lease-duration",
        value_name = "duration",
        default_value = "15s",
        help = "The duration that non-leader candidates will wait after observing a leadership \
                renewal until attempting to acquire leadership of a led but unrenewed leader \
                slot. This is effectively the maximum duration that a leader can be stopped \
                before it is replaced by another candidate. This is only applicable if leader \
                election is enabled."
    )]
    pub lease_duration: GoDuration,

    /// How long the leader keeps retrying a renewal before it stops leading.
    #[arg(
        long = "leader-elect-renew-deadline",
        value_name = "duration",
        default_value = "10s",
        help = "The interval between attempts by the acting leader to renew a leadership slot \
                before it stops leading. This must be less than the lease duration. This is \
                only applicable if leader election is enabled."
    )]
    pub renew_deadline: GoDuration,

    /// The kind of object holding the lock; only `leases`.
    #[arg(
        long = "leader-elect-resource-lock",
        value_name = "string",
        default_value = RESOURCE_LOCK_LEASES,
        help = "The type of resource object that is used for locking during leader election. \
                Supported options are 'leases'."
    )]
    pub resource_lock: String,

    /// Name of the Lease.
    #[arg(
        long = "leader-elect-resource-name",
        value_name = "string",
        default_value = "kube-controller-manager",
        help = "The name of resource object that is used for locking during leader election."
    )]
    pub resource_name: String,

    /// Namespace of the Lease.
    #[arg(
        long = "leader-elect-resource-namespace",
        value_name = "string",
        default_value = "kube-system",
        help = "The namespace of resource object that is used for locking during leader \
                election."
    )]
    pub resource_namespace: String,

    /// Time between attempts to acquire or renew.
    #[arg(
        long = "leader-elect-retry-period",
        value_name = "duration",
        default_value = "2s",
        help = "The duration the clients should wait between attempting acquisition and renewal \
                of a leadership. This is only applicable if leader election is enabled."
    )]
    pub retry_period: GoDuration,
}

/// The HTTPS endpoint, as the apiserver library's `SecureServingOptions`.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Secure serving flags")]
pub struct SecureServingFlags {
    /// Address to listen on.
    #[arg(
        long,
        value_name = "ip",
        default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        help = "The IP address on which to listen for the --secure-port port. The associated \
                interface(s) must be reachable by the rest of the cluster, and by CLI/web \
                clients. If an unspecified address (0.0.0.0 or ::), all interfaces will be used."
    )]
    pub bind_address: IpAddr,

    /// Port to listen on; 0 disables the endpoint.
    #[arg(
        long,
        value_name = "int",
        default_value_t = DEFAULT_SECURE_PORT,
        help = "The port on which to serve HTTPS for /healthz, /livez, /readyz and /metrics. If \
                0, don't serve HTTPS at all."
    )]
    pub secure_port: u16,

    /// Serving certificate (PEM, chain after the leaf).
    #[arg(
        long,
        value_name = "string",
        requires = "tls_private_key_file",
        help = "File containing the default x509 Certificate for HTTPS. (CA cert, if any, \
                concatenated after server cert). If HTTPS serving is enabled, and \
                --tls-cert-file and --tls-private-key-file are not provided, a self-signed \
                certificate and key are generated in memory for the public address."
    )]
    pub tls_cert_file: Option<PathBuf>,

    /// Serving key (PEM).
    #[arg(
        long,
        value_name = "string",
        requires = "tls_cert_file",
        help = "File containing the default x509 private key matching --tls-cert-file."
    )]
    pub tls_private_key_file: Option<PathBuf>,
}

/// Delegated authentication and authorization of the HTTPS endpoint, as the apiserver
/// library's `DelegatingAuthenticationOptions` and `DelegatingAuthorizationOptions`.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Authentication flags")]
pub struct DelegatedAuthFlags {
    /// Where to send TokenReviews.
    #[arg(
        long,
        value_name = "string",
        help = "kubeconfig file pointing at the 'core' kubernetes server with enough rights to \
                create tokenreviews.authentication.k8s.io. This is optional. If empty, all token \
                requests are considered to be anonymous and no client CA is looked up in the \
                cluster."
    )]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// How long TokenReview answers are reused.
    #[arg(
        long,
        value_name = "duration",
        default_value = "10s",
        help = "The duration to cache responses from the webhook token authenticator."
    )]
    pub authentication_token_webhook_cache_ttl: GoDuration,

    /// Where to send SubjectAccessReviews.
    #[arg(
        long,
        value_name = "string",
        help_heading = "Authorization flags",
        help = "kubeconfig file pointing at the 'core' kubernetes server with enough rights to \
                create subjectaccessreviews.authorization.k8s.io. This is optional. If empty, all \
                requests not skipped by authorization are forbidden."
    )]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// Paths served to anyone.
    #[arg(
        long,
        value_name = "strings",
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        help_heading = "Authorization flags",
        help = "A list of HTTP paths to skip during authorization, i.e. these are authorized \
                without contacting the 'core' kubernetes server."
    )]
    pub authorization_always_allow_paths: Vec<String>,

    /// How long allowing SubjectAccessReview answers are reused.
    #[arg(
        long,
        value_name = "duration",
        default_value = "10s",
        help_heading = "Authorization flags",
        help = "The duration to cache 'authorized' responses from the webhook authorizer."
    )]
    pub authorization_webhook_cache_authorized_ttl: GoDuration,

    /// How long denying SubjectAccessReview answers are reused.
    #[arg(
        long,
        value_name = "duration",
        default_value = "10s",
        help_heading = "Authorization flags",
        help = "The duration to cache 'unauthorized' responses from the webhook authorizer."
    )]
    pub authorization_webhook_cache_unauthorized_ttl: GoDuration,
}

/// The Deployment controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Deployment controller flags")]
pub struct DeploymentControllerFlags {
    /// Deployment workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 5,
        help = "The number of deployment objects that are allowed to sync concurrently. Larger \
                number = more responsive deployments, but more CPU (and network) load."
    )]
    pub concurrent_deployment_syncs: u32,
}

/// Flags kube-controller-manager shares with the cloud controller manager (its
/// `KubeCloudShared` group, shown with the generic flags).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Generic flags")]
pub struct KubeCloudSharedFlags {
    /// Allocate pod CIDRs to Nodes (runs the node IPAM controller).
    #[arg(
        long = "allocate-node-cidrs",
        value_name = "bool",
        default_value = "false",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool,
        help = "Should CIDRs for Pods be allocated and set on the cloud provider."
    )]
    pub allocate_node_cidrs: bool,

    /// The cluster's pod CIDR(s).
    #[arg(
        long,
        value_name = "string",
        default_value = "",
        help = "CIDR Range for Pods in cluster. Only used when --allocate-node-cidrs=true; if \
                false, this option will be ignored."
    )]
    pub cluster_cidr: String,

    /// Which allocator hands out pod CIDRs.
    #[arg(
        long,
        value_name = "string",
        default_value = crate::nodeipam::config::RANGE_ALLOCATOR,
        help = "Type of CIDR allocator to use"
    )]
    pub cidr_allocator_type: String,

    /// Each controller talks to the API server as its own service account in `kube-system`
    /// (upstream's `DynamicControllerClientBuilder`); informers keep the manager's credentials.
    #[arg(
        long = "use-service-account-credentials",
        value_name = "bool",
        default_value = "false",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool,
        help = "If true, use individual service account credentials for each controller."
    )]
    pub use_service_account_credentials: bool,

    /// The cloud provider. kube-controller-manager v1.36 has no in-tree one: empty or
    /// `external` both mean none here, and the cloud controllers are skipped.
    #[arg(
        long,
        value_name = "string",
        default_value = "",
        help = "The provider for cloud services. Empty string for no provider."
    )]
    pub cloud_provider: String,

    /// The cluster's name, passed to the cloud (load balancer names).
    #[arg(
        long,
        value_name = "string",
        default_value = "kubernetes",
        help = "The instance prefix for the cluster."
    )]
    pub cluster_name: String,
}

/// The service-lb controller's flags (upstream's `ServiceControllerOptions`).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Service controller flags")]
pub struct ServiceControllerFlags {
    /// Service workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 1,
        help = "The number of services that are allowed to sync concurrently. Larger number = \
                more responsive service management, but more CPU (and network) load"
    )]
    pub concurrent_service_syncs: u32,
}

/// The ValidatingAdmissionPolicy status controller's flags (upstream's
/// `ValidatingAdmissionPolicyStatusControllerOptions`).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "ValidatingAdmissionPolicyStatusController flags")]
pub struct ValidatingAdmissionPolicyStatusControllerFlags {
    /// Policy status workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::validatingadmissionpolicystatus::DEFAULT_WORKERS as u32,
        help = "The number of ValidatingAdmissionPolicyStatusController workers that are allowed \
                to sync concurrently."
    )]
    pub concurrent_validating_admission_policy_status_syncs: u32,
}

/// The endpoints controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Endpoint controller flags")]
pub struct EndpointControllerFlags {
    /// Endpoints workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::endpoint::DEFAULT_CONCURRENT_ENDPOINT_SYNCS,
        help = "The number of endpoint syncing operations that will be done concurrently. Larger \
                number = faster endpoint updating, but more CPU (and network) load"
    )]
    pub concurrent_endpoint_syncs: u32,

    /// Delay of pod-triggered syncs.
    #[arg(
        long,
        value_name = "duration",
        default_value = "0s",
        help = "The length of endpoint updates batching period. Processing of pod changes will be \
                delayed by this duration to join them with potential upcoming updates and reduce \
                the overall number of endpoints updates. Larger number = higher endpoint \
                programming latency, but lower number of endpoints revision generated"
    )]
    pub endpoint_updates_batch_period: GoDuration,
}

/// The EndpointSlice controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Endpointslice controller flags")]
pub struct EndpointSliceControllerFlags {
    /// EndpointSlice workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::endpointslice::DEFAULT_CONCURRENT_SERVICE_ENDPOINT_SYNCS,
        help = "The number of service endpoint syncing operations that will be done \
                concurrently. Larger number = faster endpoint slice updating, but more CPU (and \
                network) load. Defaults to 5."
    )]
    pub concurrent_service_endpoint_syncs: u32,

    /// Endpoints per slice.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::endpointslice::DEFAULT_MAX_ENDPOINTS_PER_SLICE,
        value_parser = clap::value_parser!(u32).range(1..=1000),
        help = "The maximum number of endpoints that will be added to an EndpointSlice. More \
                endpoints per slice will result in less endpoint slices, but larger resources. \
                Defaults to 100."
    )]
    pub max_endpoints_per_slice: u32,

    /// Delay of pod-triggered syncs.
    #[arg(
        long,
        value_name = "duration",
        default_value = "0s",
        help = "The length of endpoint slice updates batching period. Processing of pod changes \
                will be delayed by this duration to join them with potential upcoming updates and \
                reduce the overall number of endpoints updates. Larger number = higher endpoint \
                programming latency, but lower number of endpoints revision generated"
    )]
    pub endpointslice_updates_batch_period: GoDuration,
}

/// The EndpointSlice mirroring controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Endpointslicemirroring controller flags")]
pub struct EndpointSliceMirroringControllerFlags {
    /// Mirroring workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::endpointslicemirroring::DEFAULT_MIRRORING_CONCURRENT_SERVICE_ENDPOINT_SYNCS,
        help = "The number of service endpoint syncing operations that will be done \
                concurrently by the endpointslice-mirroring-controller. Larger number = faster \
                endpoint slice updating, but more CPU (and network) load. Defaults to 5."
    )]
    pub mirroring_concurrent_service_endpoint_syncs: u32,

    /// Addresses mirrored per subset.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::endpointslicemirroring::DEFAULT_MIRRORING_MAX_ENDPOINTS_PER_SUBSET,
        value_parser = clap::value_parser!(u32).range(1..=1000),
        help = "The maximum number of endpoints that will be added to an EndpointSlice by the \
                endpointslice-mirroring-controller. More endpoints per slice will result in less \
                endpoint slices, but larger resources. Defaults to 100."
    )]
    pub mirroring_max_endpoints_per_subset: u32,

    /// Delay of slice-triggered syncs.
    #[arg(
        long,
        value_name = "duration",
        default_value = "0s",
        help = "The length of EndpointSlice updates batching period for \
                endpointslice-mirroring-controller. Processing of EndpointSlice changes will be \
                delayed by this duration to join them with potential upcoming updates and reduce \
                the overall number of EndpointSlice updates. Larger number = higher endpoint \
                programming latency, but lower number of endpoints revision generated"
    )]
    pub mirroring_endpointslice_updates_batch_period: GoDuration,
}

/// The node IPAM controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Nodeipam controller flags")]
pub struct NodeIpamControllerFlags {
    /// Node block size (0: 24 for IPv4, 64 for IPv6).
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 0,
        help = "Mask size for node cidr in cluster. Default is 24 for IPv4 and 64 for IPv6."
    )]
    pub node_cidr_mask_size: i32,

    /// IPv4 node block size in a dual-stack cluster.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 0,
        help = "Mask size for IPv4 node cidr in dual-stack cluster. Default is 24."
    )]
    pub node_cidr_mask_size_ipv4: i32,

    /// IPv6 node block size in a dual-stack cluster.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 0,
        help = "Mask size for IPv6 node cidr in dual-stack cluster. Default is 64."
    )]
    pub node_cidr_mask_size_ipv6: i32,

    /// The Service range, never handed out to Nodes.
    #[arg(
        long,
        value_name = "string",
        default_value = "",
        help = "CIDR Range for Services in cluster. Only used when --allocate-node-cidrs=true; \
                if false, this option will be ignored."
    )]
    pub service_cluster_ip_range: String,
}

/// The service account controller's flags (the root CA publisher reads `--root-ca-file`).
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Serviceaccount controller flags")]
pub struct SaControllerFlags {
    /// The CA bundle published as `kube-root-ca.crt`.
    #[arg(
        long,
        value_name = "string",
        help = "If set, this root certificate authority will be included in service account's \
                token secret. This must be a valid PEM-encoded CA bundle."
    )]
    pub root_ca_file: Option<PathBuf>,
    /// The key the service account token controller signs legacy tokens with; without it
    /// the controller does not run.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded private RSA or ECDSA key used to sign service \
                account tokens."
    )]
    pub service_account_private_key_file: Option<PathBuf>,
    /// The token controller's workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 5,
        help = "The number of service account token objects that are allowed to sync \
                concurrently. Larger number = more responsive token generation, but more CPU \
                (and network) load"
    )]
    pub concurrent_serviceaccount_token_syncs: usize,
}

/// The legacy service account token cleaner's flags (upstream's
/// `LegacySATokenCleanerOptions`).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Legacy-service-account-token-cleaner controller flags")]
pub struct LegacySaTokenCleanerFlags {
    /// How long a legacy token may go unused before it is marked invalid, and then stay
    /// invalid before it is deleted.
    #[arg(
        long,
        value_name = "duration",
        default_value = "8760h0m0s",
        help = "The period of time since the last usage of an legacy service account token \
                before it can be deleted."
    )]
    pub legacy_service_account_token_clean_up_period: GoDuration,
}

/// The CSR signing controller's flags (upstream's `CSRSigningControllerOptions`): one CA for
/// every signer, or one per signer, never both.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Csrsigning controller flags")]
pub struct CsrSigningControllerFlags {
    /// The CA certificate every signer uses.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded X509 CA certificate used to issue \
                cluster-scoped certificates.  If specified, no more specific --cluster-signing-* \
                flag may be specified."
    )]
    pub cluster_signing_cert_file: Option<PathBuf>,
    /// Its key.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded RSA or ECDSA private key used to sign \
                cluster-scoped certificates.  If specified, no more specific --cluster-signing-* \
                flag may be specified."
    )]
    pub cluster_signing_key_file: Option<PathBuf>,
    /// The `kubernetes.io/kubelet-serving` CA certificate.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded X509 CA certificate used to issue certificates \
                for the kubernetes.io/kubelet-serving signer.  If specified, \
                --cluster-signing-{cert,key}-file must not be set."
    )]
    pub cluster_signing_kubelet_serving_cert_file: Option<PathBuf>,
    /// Its key.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded RSA or ECDSA private key used to sign \
                certificates for the kubernetes.io/kubelet-serving signer.  If specified, \
                --cluster-signing-{cert,key}-file must not be set."
    )]
    pub cluster_signing_kubelet_serving_key_file: Option<PathBuf>,
    /// The `kubernetes.io/kube-apiserver-client-kubelet` CA certificate.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded X509 CA certificate used to issue certificates \
                for the kubernetes.io/kube-apiserver-client-kubelet signer.  If specified, \
                --cluster-signing-{cert,key}-file must not be set."
    )]
    pub cluster_signing_kubelet_client_cert_file: Option<PathBuf>,
    /// Its key.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded RSA or ECDSA private key used to sign \
                certificates for the kubernetes.io/kube-apiserver-client-kubelet signer.  If \
                specified, --cluster-signing-{cert,key}-file must not be set."
    )]
    pub cluster_signing_kubelet_client_key_file: Option<PathBuf>,
    /// The `kubernetes.io/kube-apiserver-client` CA certificate.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded X509 CA certificate used to issue certificates \
                for the kubernetes.io/kube-apiserver-client signer.  If specified, \
                --cluster-signing-{cert,key}-file must not be set."
    )]
    pub cluster_signing_kube_apiserver_client_cert_file: Option<PathBuf>,
    /// Its key.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded RSA or ECDSA private key used to sign \
                certificates for the kubernetes.io/kube-apiserver-client signer.  If specified, \
                --cluster-signing-{cert,key}-file must not be set."
    )]
    pub cluster_signing_kube_apiserver_client_key_file: Option<PathBuf>,
    /// The `kubernetes.io/legacy-unknown` CA certificate.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded X509 CA certificate used to issue certificates \
                for the kubernetes.io/legacy-unknown signer.  If specified, \
                --cluster-signing-{cert,key}-file must not be set."
    )]
    pub cluster_signing_legacy_unknown_cert_file: Option<PathBuf>,
    /// Its key.
    #[arg(
        long,
        value_name = "string",
        help = "Filename containing a PEM-encoded RSA or ECDSA private key used to sign \
                certificates for the kubernetes.io/legacy-unknown signer.  If specified, \
                --cluster-signing-{cert,key}-file must not be set."
    )]
    pub cluster_signing_legacy_unknown_key_file: Option<PathBuf>,
    /// The longest certificate the signers issue.
    #[arg(
        long,
        value_name = "duration",
        default_value = "8760h0m0s",
        help = "The max length of duration signed certificates will be given.  Individual CSRs \
                may request shorter certs by setting spec.expirationSeconds."
    )]
    pub cluster_signing_duration: GoDuration,
}

/// The CA files of one signer: a certificate and a key.
pub type SigningFiles = (Option<PathBuf>, Option<PathBuf>);

impl CsrSigningControllerFlags {
    /// The per-signer files, in the order of
    /// [`crate::certificates::signer::SIGNERS`], with each signer's flag prefix.
    fn specific(&self) -> [(&'static str, &'static str, SigningFiles); 4] {
        [
            (
                crate::certificates::request::KUBELET_SERVING_SIGNER,
                "cluster-signing-kubelet-serving",
                (
                    self.cluster_signing_kubelet_serving_cert_file.clone(),
                    self.cluster_signing_kubelet_serving_key_file.clone(),
                ),
            ),
            (
                crate::certificates::request::KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
                "cluster-signing-kube-apiserver-client",
                (
                    self.cluster_signing_kubelet_client_cert_file.clone(),
                    self.cluster_signing_kubelet_client_key_file.clone(),
                ),
            ),
            (
                crate::certificates::request::KUBE_APISERVER_CLIENT_SIGNER,
                "cluster-signing-kube-apiserver",
                (
                    self.cluster_signing_kube_apiserver_client_cert_file.clone(),
                    self.cluster_signing_kube_apiserver_client_key_file.clone(),
                ),
            ),
            (
                crate::certificates::request::LEGACY_UNKNOWN_SIGNER,
                "cluster-signing-legacy-unknown",
                (
                    self.cluster_signing_legacy_unknown_cert_file.clone(),
                    self.cluster_signing_legacy_unknown_key_file.clone(),
                ),
            ),
        ]
    }

    /// Whether any per-signer file is given (upstream's `anySpecificFilesSet`).
    pub fn any_specific_files_set(&self) -> bool {
        self.specific()
            .iter()
            .any(|(_, _, (cert, key))| cert.is_some() || key.is_some())
    }

    /// Each signer's files: the per-signer ones when any is given, else
    /// `--cluster-signing-{cert,key}-file` for all (upstream's `get*SignerFiles`).
    pub fn signer_files(&self) -> Vec<(&'static str, SigningFiles)> {
        let specific = self.any_specific_files_set();
        self.specific()
            .into_iter()
            .map(|(signer, _, files)| {
                let files = if specific {
                    files
                } else {
                    (
                        self.cluster_signing_cert_file.clone(),
                        self.cluster_signing_key_file.clone(),
                    )
                };
                (signer, files)
            })
            .collect()
    }

    /// Upstream's `Validate`: each signer's cert and key come together, and the single pair
    /// excludes the per-signer ones.
    pub fn validate(&self) -> std::result::Result<(), String> {
        for (_, prefix, (cert, key)) in self.specific() {
            match (cert.is_some(), key.is_some()) {
                (false, true) => {
                    return Err(format!("{prefix:?}: cannot specify key without cert"));
                }
                (true, false) => {
                    return Err(format!("{prefix:?}: cannot specify cert without key"));
                }
                _ => {}
            }
        }
        let single =
            self.cluster_signing_cert_file.is_some() || self.cluster_signing_key_file.is_some();
        if single && self.any_specific_files_set() {
            return Err(
                "cannot specify --cluster-signing-{cert,key}-file and other \
                        --cluster-signing-*-file flags at the same time"
                    .to_owned(),
            );
        }
        Ok(())
    }
}

impl ManagerOptions {
    /// The node IPAM flags as the allocator's configuration input.
    pub fn node_ipam_flags(&self) -> crate::nodeipam::NodeIpamFlags {
        crate::nodeipam::NodeIpamFlags {
            cluster_cidr: self.kube_cloud_shared.cluster_cidr.clone(),
            cidr_allocator_type: self.kube_cloud_shared.cidr_allocator_type.clone(),
            node_cidr_mask_size: self.node_ipam.node_cidr_mask_size,
            node_cidr_mask_size_ipv4: self.node_ipam.node_cidr_mask_size_ipv4,
            node_cidr_mask_size_ipv6: self.node_ipam.node_cidr_mask_size_ipv6,
            service_cluster_ip_range: self.node_ipam.service_cluster_ip_range.clone(),
        }
    }
}

/// The garbage collector's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Garbage collector controller flags")]
pub struct GarbageCollectorControllerFlags {
    /// Garbage collector workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 20,
        help = "The number of garbage collector workers that are allowed to sync concurrently."
    )]
    pub concurrent_gc_syncs: u32,
}

/// The namespace controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Namespace controller flags")]
pub struct NamespaceControllerFlags {
    /// Namespace workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::namespace::DEFAULT_CONCURRENT_NAMESPACE_SYNCS,
        help = "The number of namespace objects that are allowed to sync concurrently. Larger \
                number = more responsive namespace termination, but more CPU (and network) load"
    )]
    pub concurrent_namespace_syncs: u32,

    /// Resync period of the namespace handler.
    #[arg(
        long,
        value_name = "duration",
        default_value = "5m0s",
        help = "The period for syncing namespace life-cycle updates"
    )]
    pub namespace_sync_period: GoDuration,
}

/// The ReplicaSet controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "ReplicaSet controller flags")]
pub struct ReplicaSetControllerFlags {
    /// ReplicaSet workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 5,
        help = "The number of replica sets that are allowed to sync concurrently. Larger number \
                = more responsive replica management, but more CPU (and network) load."
    )]
    pub concurrent_replicaset_syncs: u32,
}

/// The DaemonSet controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "DaemonSet controller flags")]
pub struct DaemonSetControllerFlags {
    /// DaemonSet workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 2,
        help = "The number of daemonset objects that are allowed to sync concurrently. Larger \
                number = more responsive daemonsets, but more CPU (and network) load"
    )]
    pub concurrent_daemonset_syncs: u32,
}

/// The ReplicationController controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "ReplicationController flags")]
pub struct ReplicationControllerFlags {
    /// ReplicationController workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 5,
        help = "The number of replication controllers that are allowed to sync concurrently. \
                Larger number = more responsive replica management, but more CPU (and network) \
                load"
    )]
    pub concurrent_rc_syncs: u32,
}

/// The StatefulSet controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "StatefulSet controller flags")]
pub struct StatefulSetControllerFlags {
    /// StatefulSet workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 5,
        help = "The number of statefulset objects that are allowed to sync concurrently. Larger \
                number = more responsive statefulsets, but more CPU (and network) load"
    )]
    pub concurrent_statefulset_syncs: u32,
}

/// The node lifecycle controller's flags (kube-controller-manager 1.33 defaults).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Nodelifecycle controller flags")]
pub struct NodeLifecycleControllerFlags {
    /// Period of the node health pass.
    #[arg(
        long,
        value_name = "duration",
        default_value = "5s",
        help = "The period for syncing NodeStatus in cloud-node-lifecycle-controller."
    )]
    pub node_monitor_period: GoDuration,

    /// Silence after which a node is marked Unknown.
    #[arg(
        long,
        value_name = "duration",
        default_value = "50s",
        help = "Amount of time which we allow running Node to be unresponsive before marking it \
                unhealthy. Must be N times more than kubelet's nodeStatusUpdateFrequency, where N \
                means number of retries allowed for kubelet to post node status."
    )]
    pub node_monitor_grace_period: GoDuration,

    /// Silence allowed to a node that never posted its status.
    #[arg(
        long,
        value_name = "duration",
        default_value = "1m0s",
        help = "Amount of time which we allow starting Node to be unresponsive before marking it \
                unhealthy."
    )]
    pub node_startup_grace_period: GoDuration,

    /// Nodes tainted per second in a healthy zone.
    #[arg(
        long,
        value_name = "float32",
        default_value_t = 0.1,
        help = "Number of nodes per second on which pods are deleted in case of node failure when \
                a zone is healthy (see --unhealthy-zone-threshold for definition of \
                healthy/unhealthy). Zone refers to entire cluster in non-multizone clusters."
    )]
    pub node_eviction_rate: f32,

    /// Nodes tainted per second in an unhealthy zone of a large cluster.
    #[arg(
        long,
        value_name = "float32",
        default_value_t = 0.01,
        help = "Number of nodes per second on which pods are deleted in case of node failure when \
                a zone is unhealthy (see --unhealthy-zone-threshold for definition of \
                healthy/unhealthy). Zone refers to entire cluster in non-multizone clusters. \
                This value is implicitly overridden to 0 if the cluster size is smaller than \
                --large-cluster-size-threshold."
    )]
    pub secondary_node_eviction_rate: f32,

    /// Zones up to this size stop evicting when unhealthy.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = 50,
        help = "Number of nodes from which node-lifecycle-controller treats the cluster as large \
                for the eviction logic purposes. --secondary-node-eviction-rate is implicitly \
                overridden to 0 for clusters this size or smaller."
    )]
    pub large_cluster_size_threshold: i32,

    /// Unhealthy fraction from which a zone is partially disrupted.
    #[arg(
        long,
        value_name = "float32",
        default_value_t = 0.55,
        help = "Fraction of Nodes in a zone which needs to be not Ready (minimum 3) for zone to be \
                treated as unhealthy."
    )]
    pub unhealthy_zone_threshold: f32,
}

/// The Job controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Job controller flags")]
pub struct JobControllerFlags {
    /// Job workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::job::DEFAULT_CONCURRENT_JOB_SYNCS,
        help = "The number of job objects that are allowed to sync concurrently. Larger number = \
                more responsive jobs, but more CPU (and network) load"
    )]
    pub concurrent_job_syncs: u32,
}

/// The CronJob controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Cronjob controller flags")]
pub struct CronJobControllerFlags {
    /// CronJob workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::cronjob::DEFAULT_CONCURRENT_CRON_JOB_SYNCS,
        help = "The number of cron job objects that are allowed to sync concurrently. Larger \
                number = more responsive jobs, but more CPU (and network) load"
    )]
    pub concurrent_cron_job_syncs: u32,
}

/// The ephemeral volume controller's flags (upstream's `EphemeralVolumeControllerOptions`).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Ephemeralvolume controller flags")]
pub struct EphemeralVolumeControllerFlags {
    /// Ephemeral volume workers.
    #[arg(
        long = "concurrent-ephemeralvolume-syncs",
        value_name = "int32",
        default_value_t = crate::volume::ephemeral::DEFAULT_CONCURRENT_EPHEMERAL_VOLUME_SYNCS,
        help = "The number of ephemeral volume syncing operations that will be done \
                concurrently. Larger number = faster ephemeral volume updating, but more CPU \
                (and network) load"
    )]
    pub concurrent_ephemeral_volume_syncs: u32,
}

/// The ResourceClaim controller's flags (upstream's `ResourceClaimControllerOptions`, v1.36).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Resourceclaim controller flags")]
pub struct ResourceClaimControllerFlags {
    /// ResourceClaim workers.
    #[arg(
        long = "concurrent-resourceclaim-syncs",
        value_name = "int32",
        default_value_t = crate::resourceclaim::DEFAULT_CONCURRENT_RESOURCE_CLAIM_SYNCS,
        help = "The number of ResourceClaim objects that are allowed to sync concurrently. \
                Larger number = more responsive ResourceClaim handling, but more CPU (and \
                network) load"
    )]
    pub concurrent_resource_claim_syncs: u32,
}

/// The device taint eviction controller's flags (upstream's
/// `DeviceTaintEvictionControllerOptions`, v1.36).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Device taint eviction controller flags")]
pub struct DeviceTaintEvictionControllerFlags {
    /// Workers deleting pods and updating DeviceTaintRule status.
    #[arg(
        long = "concurrent-device-taint-eviction-syncs",
        value_name = "int32",
        default_value_t = crate::devicetainteviction::DEFAULT_CONCURRENT_SYNCS,
        help = "The number of operations (evicting pods, updating DeviceTaintRule status) \
                allowed to run concurrently. Greater number = more responsive, but more CPU \
                (and network) load"
    )]
    pub concurrent_device_taint_eviction_syncs: u32,
}

/// The attach/detach controller's flags (upstream's `AttachDetachControllerOptions`).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Attachdetach controller flags")]
pub struct AttachDetachControllerFlags {
    /// Never re-check attached volumes against their VolumeAttachments.
    #[arg(
        long = "disable-attach-detach-reconcile-sync",
        value_name = "bool",
        default_value = "false",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool,
        help = "Disable volume attach detach reconciler sync. Disabling this may cause volumes to be mismatched with pods. Use wisely."
    )]
    pub disable_attach_detach_reconcile_sync: bool,
    /// How often attached volumes are re-checked; at least one second (checked when the
    /// controller starts, as upstream).
    #[arg(
        long = "attach-detach-reconcile-sync-period",
        value_name = "duration",
        default_value = "1m0s",
        help = "The reconciler sync wait time between volume attach detach. This duration must be larger than one second, and increasing this value from the default may allow for volumes to be mismatched with pods."
    )]
    pub attach_detach_reconcile_sync_period: GoDuration,
}

/// The PersistentVolume binder controller's flags (upstream's
/// `PersistentVolumeBinderControllerOptions`). kcm has no recycler pods, in-tree provisioners
/// or volume plugins: the recycler, hostPath provisioner, flex and volume-host flags are
/// accepted for compatibility and change nothing.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Persistentvolume-binder controller flags")]
pub struct PersistentVolumeBinderControllerFlags {
    /// How often every claim and volume is synced.
    #[arg(
        long,
        value_name = "duration",
        default_value = "15s",
        help = "The period for syncing persistent volumes and persistent volume claims"
    )]
    pub pvclaimbinder_sync_period: GoDuration,
    /// The NFS recycler pod template (accepted, unused).
    #[arg(
        long = "pv-recycler-pod-template-filepath-nfs",
        value_name = "string",
        help = "The file path to a pod definition used as a template for NFS persistent volume recycling"
    )]
    pub pv_recycler_pod_template_filepath_nfs: Option<String>,
    /// The NFS recycler pod's minimum deadline (accepted, unused).
    #[arg(
        long = "pv-recycler-minimum-timeout-nfs",
        value_name = "int32",
        default_value_t = 300,
        help = "The minimum ActiveDeadlineSeconds to use for an NFS Recycler pod"
    )]
    pub pv_recycler_minimum_timeout_nfs: i32,
    /// The NFS recycler pod's deadline per Gi (accepted, unused).
    #[arg(
        long = "pv-recycler-increment-timeout-nfs",
        value_name = "int32",
        default_value_t = 30,
        help = "the increment of time added per Gi to ActiveDeadlineSeconds for an NFS scrubber pod"
    )]
    pub pv_recycler_increment_timeout_nfs: i32,
    /// The hostPath recycler pod template (accepted, unused).
    #[arg(
        long = "pv-recycler-pod-template-filepath-hostpath",
        value_name = "string",
        help = "The file path to a pod definition used as a template for HostPath persistent volume recycling. This is for development and testing only and will not work in a multi-node cluster."
    )]
    pub pv_recycler_pod_template_filepath_hostpath: Option<String>,
    /// The hostPath recycler pod's minimum deadline (accepted, unused).
    #[arg(
        long = "pv-recycler-minimum-timeout-hostpath",
        value_name = "int32",
        default_value_t = 60,
        help = "The minimum ActiveDeadlineSeconds to use for a HostPath Recycler pod.  This is for development and testing only and will not work in a multi-node cluster."
    )]
    pub pv_recycler_minimum_timeout_hostpath: i32,
    /// The hostPath recycler pod's deadline per Gi (accepted, unused).
    #[arg(
        long = "pv-recycler-timeout-increment-hostpath",
        value_name = "int32",
        default_value_t = 30,
        help = "the increment of time added per Gi to ActiveDeadlineSeconds for a HostPath scrubber pod.  This is for development and testing only and will not work in a multi-node cluster."
    )]
    pub pv_recycler_timeout_increment_hostpath: i32,
    /// The in-tree hostPath provisioner (deprecated upstream; accepted, not modelled).
    #[arg(
        long = "enable-hostpath-provisioner",
        value_name = "bool",
        default_value = "false",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool,
        help = "Enable HostPath PV provisioning when running without a cloud provider. This allows testing and development of provisioning features.  HostPath provisioning is not supported in any way, won't work in a multi-node cluster, and should not be used for anything other than testing or development."
    )]
    pub enable_hostpath_provisioner: bool,
    /// Whether claims of a class are provisioned.
    #[arg(
        long = "enable-dynamic-provisioning",
        value_name = "bool",
        default_value = "true",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool,
        help = "Enable dynamic provisioning for environments that support it."
    )]
    pub enable_dynamic_provisioning: bool,
    /// The flex volume plugin directory (accepted, unused).
    #[arg(
        long = "flex-volume-plugin-dir",
        value_name = "string",
        help = "Full path of the directory in which the flex volume plugin should search for additional third party volume plugins."
    )]
    pub flex_volume_plugin_dir: Option<String>,
    /// CIDRs volume plugins avoid (deprecated no-op upstream).
    #[arg(
        long = "volume-host-cidr-denylist",
        value_name = "strings",
        value_delimiter = ',',
        help = "A comma-separated list of CIDR ranges to avoid from volume plugins."
    )]
    pub volume_host_cidr_denylist: Vec<String>,
    /// Whether volume plugins may reach loopback (deprecated no-op upstream).
    #[arg(
        long = "volume-host-allow-local-loopback",
        value_name = "bool",
        default_value = "true",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool,
        help = "If false, deny local loopback IPs in addition to any CIDR ranges in --volume-host-cidr-denylist"
    )]
    pub volume_host_allow_local_loopback: bool,
}

/// The TTL-after-finished controller's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Ttl-after-finished controller flags")]
pub struct TtlAfterFinishedControllerFlags {
    /// TTL-after-finished workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::ttlafterfinished::DEFAULT_CONCURRENT_TTL_AFTER_FINISHED_SYNCS,
        help = "The number of ttl-after-finished-controller workers that are allowed to sync \
                concurrently."
    )]
    pub concurrent_ttl_after_finished_syncs: u32,
}

/// The ResourceQuota controller's flags (upstream's `ResourceQuotaControllerOptions`).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Resourcequota controller flags")]
pub struct ResourceQuotaControllerFlags {
    /// ResourceQuota workers (per queue).
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::resourcequota::DEFAULT_CONCURRENT_RESOURCE_QUOTA_SYNCS,
        help = "The number of resource quotas that are allowed to sync concurrently. Larger \
                number = more responsive quota management, but more CPU (and network) load"
    )]
    pub concurrent_resource_quota_syncs: u32,
    /// How often every quota is recalculated.
    #[arg(
        long,
        value_name = "duration",
        default_value = "5m0s",
        help = "The period for syncing quota usage status in the system"
    )]
    pub resource_quota_sync_period: GoDuration,
}

/// The HorizontalPodAutoscaler controller's flags (upstream's `HPAControllerOptions`; the
/// deprecated no-op upscale/downscale delays are left out).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Horizontalpodautoscaling controller flags")]
pub struct HpaControllerFlags {
    /// HPA workers.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::podautoscaler::DEFAULT_CONCURRENT_HORIZONTAL_POD_AUTOSCALER_SYNCS,
        help = "The number of horizontal pod autoscaler objects that are allowed to sync \
                concurrently. Larger number = more responsive horizontal pod autoscaler objects \
                processing, but more CPU (and network) load."
    )]
    pub concurrent_horizontal_pod_autoscaler_syncs: u32,
    /// How often each HPA is reconciled.
    #[arg(
        long,
        value_name = "duration",
        default_value = "15s",
        help = "The period for syncing the number of pods in horizontal pod autoscaler."
    )]
    pub horizontal_pod_autoscaler_sync_period: GoDuration,
    /// The scale-down stabilization window.
    #[arg(
        long,
        value_name = "duration",
        default_value = "5m0s",
        help = "The period for which autoscaler will look backwards and not scale down below \
                any recommendation it made during that period."
    )]
    pub horizontal_pod_autoscaler_downscale_stabilization: GoDuration,
    /// The tolerance of the usage ratio.
    #[arg(
        long,
        value_name = "float",
        default_value_t = crate::podautoscaler::replica_calculator::DEFAULT_TOLERANCE,
        help = "The minimum change (from 1.0) in the desired-to-actual metrics ratio for the \
                horizontal pod autoscaler to consider scaling."
    )]
    pub horizontal_pod_autoscaler_tolerance: f64,
    /// How long after a pod's start its CPU samples may be skipped.
    #[arg(
        long,
        value_name = "duration",
        default_value = "5m0s",
        help = "The period after pod start when CPU samples might be skipped."
    )]
    pub horizontal_pod_autoscaler_cpu_initialization_period: GoDuration,
    /// How long after a pod's start readiness changes count as initial readiness.
    #[arg(
        long,
        value_name = "duration",
        default_value = "30s",
        help = "The period after pod start during which readiness changes will be treated as \
                initial readiness."
    )]
    pub horizontal_pod_autoscaler_initial_readiness_delay: GoDuration,
}

/// The pod garbage collector's flags.
#[derive(Args, Clone, Debug, PartialEq)]
#[command(next_help_heading = "Podgc controller flags")]
pub struct PodGcControllerFlags {
    /// Terminated pods kept before the oldest are deleted.
    #[arg(
        long,
        value_name = "int32",
        default_value_t = crate::podgc::DEFAULT_TERMINATED_POD_GC_THRESHOLD,
        allow_negative_numbers = true,
        help = "Number of terminated pods that can exist before the terminated pod garbage \
                collector starts deleting terminated pods. If <= 0, the terminated pod garbage \
                collector is disabled."
    )]
    pub terminated_pod_gc_threshold: i32,
}

/// Where the API server is.
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Misc flags")]
pub struct MiscFlags {
    /// Kubeconfig file; without it (and without `--master`) the in-cluster config is used.
    #[arg(
        long,
        value_name = "string",
        help = "Path to kubeconfig file with authorization and master location information (the \
                master location can be overridden by the master flag). Without --kubeconfig \
                and --master, the in-cluster service account configuration is used."
    )]
    pub kubeconfig: Option<PathBuf>,

    /// API server URL, overriding the kubeconfig's.
    #[arg(
        long,
        value_name = "string",
        help = "The address of the Kubernetes API server (overrides any value in kubeconfig)."
    )]
    pub master: Option<String>,
}

/// The `--controllers` help, listing the registered controllers as kube-controller-manager does,
/// then those kcm accepts but does not build yet.
pub fn controllers_help() -> String {
    let (all, off) = builtin_names();
    format!(
        "A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' \
         enables the controller named 'foo', '-foo' disables the controller named 'foo'.\n\
         All controllers: {}\nDisabled-by-default controllers: {}\n\
         Not built yet in kcm (accepted; skipped with a warning): {}",
        all.join(", "),
        off.join(", "),
        not_built_names().join(", ")
    )
}

/// Parses a boolean as Go's `strconv.ParseBool` (what pflag accepts for `--flag=value`);
/// defined beside the gates, which parse their values the same way.
pub use super::feature_gates::parse_go_bool;

impl ManagerOptions {
    /// The gates `--feature-gates` sets (every occurrence, in order), as checked by
    /// [`Self::validate`]; every gate at its default if they do not parse.
    pub fn feature_gates(&self) -> FeatureGates {
        FeatureGates::parse_all(&self.generic.feature_gates).unwrap_or_default()
    }

    /// Checks the options, as kube-controller-manager's `Validate`: the resource lock must be
    /// `leases`, and the leader election timings must satisfy client-go's rules. (That every
    /// `--controllers` entry names a known controller or alias is checked against the
    /// registry: [`ControllerRegistry::select`](super::ControllerRegistry::select).)
    pub fn validate(&self) -> Result<()> {
        FeatureGates::parse_all(&self.generic.feature_gates)
            .map_err(|err| Error::InvalidOption(format!("--feature-gates: {err}")))?;
        let le = &self.leader_election;
        if le.leader_elect {
            if le.resource_lock != RESOURCE_LOCK_LEASES {
                return Err(Error::InvalidOption(format!(
                    "--leader-elect-resource-lock: resourceLock value must be \"leases\", got {:?}",
                    le.resource_lock
                )));
            }
            if le.resource_name.is_empty() || le.resource_namespace.is_empty() {
                return Err(Error::InvalidOption(
                    "--leader-elect-resource-name and --leader-elect-resource-namespace must not \
                     be empty"
                        .to_owned(),
                ));
            }
            self.leader_election_config("validation")
                .validate()
                .map_err(|e| Error::InvalidOption(format!("leader election: {e}")))?;
        }
        self.csr_signing.validate().map_err(Error::InvalidOption)?;
        if self.resource_claim.concurrent_resource_claim_syncs == 0 {
            return Err(Error::InvalidOption(
                "concurrent-resourceclaim-syncs must be greater than 0".to_owned(),
            ));
        }
        Ok(())
    }

    /// The leader election configuration for `identity` (lease released on graceful shutdown).
    pub fn leader_election_config(&self, identity: &str) -> LeaderElectionConfig {
        let le = &self.leader_election;
        let mut config = LeaderElectionConfig::new(
            le.resource_namespace.clone(),
            le.resource_name.clone(),
            identity,
        );
        config.lease_duration = le.lease_duration.get();
        config.renew_deadline = le.renew_deadline.get();
        config.retry_period = le.retry_period.get();
        config.release_on_cancel = true;
        config
    }

    /// The informers' resync period: `--min-resync-period` × `factor`, where `factor` is drawn
    /// from [1, 2) so that managers do not relist in lock-step (kube-controller-manager's
    /// `ResyncPeriod`).
    pub fn resync_period(&self, factor: f64) -> Duration {
        let factor = if factor.is_finite() {
            factor.clamp(1.0, 2.0)
        } else {
            1.0
        };
        self.generic.min_resync_period.get().mul_f64(factor)
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    /// A command with just the manager's flags, as `kcm run` flattens them (repeated flags
    /// override earlier ones, as pflag).
    #[derive(Parser, Debug)]
    #[command(name = "kcm-run", args_override_self = true)]
    struct Cli {
        #[command(flatten)]
        options: ManagerOptions,
    }

    fn parse(args: &[&str]) -> std::result::Result<ManagerOptions, clap::Error> {
        let argv = std::iter::once("kcm-run").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|cli| cli.options)
    }

    #[test]
    fn csr_signing_files_come_in_pairs_and_the_single_pair_excludes_the_others() {
        let o = parse(&[]).expect("defaults");
        assert_eq!(
            o.csr_signing.cluster_signing_duration.get(),
            Duration::from_secs(8760 * 3600)
        );
        assert!(o.validate().is_ok());
        let single = parse(&[
            "--cluster-signing-cert-file=c",
            "--cluster-signing-key-file=k",
        ])
        .expect("parses");
        assert!(single.validate().is_ok());
        assert!(
            single
                .csr_signing
                .signer_files()
                .iter()
                .all(|(_, files)| *files == (Some(PathBuf::from("c")), Some(PathBuf::from("k"))))
        );
        let cases = [
            (
                &["--cluster-signing-kubelet-serving-key-file=k"][..],
                "\"cluster-signing-kubelet-serving\": cannot specify key without cert",
            ),
            (
                &["--cluster-signing-kube-apiserver-client-cert-file=c"][..],
                "\"cluster-signing-kube-apiserver\": cannot specify cert without key",
            ),
            (
                &[
                    "--cluster-signing-cert-file=c",
                    "--cluster-signing-legacy-unknown-cert-file=c",
                    "--cluster-signing-legacy-unknown-key-file=k",
                ][..],
                "cannot specify --cluster-signing-{cert,key}-file and other \
                 --cluster-signing-*-file flags at the same time",
            ),
        ];
        for (args, want) in cases {
            let o = parse(args).expect("parses");
            let err = o.validate().expect_err(want).to_string();
            assert!(err.contains(want), "{err}");
        }
        let one = parse(&[
            "--cluster-signing-kube-apiserver-client-cert-file=c",
            "--cluster-signing-kube-apiserver-client-key-file=k",
        ])
        .expect("parses");
        let files = one.csr_signing.signer_files();
        let with_files: Vec<_> = files
            .iter()
            .filter(|(_, (c, k))| c.is_some() && k.is_some())
            .map(|(s, _)| *s)
            .collect();
        assert_eq!(with_files, ["kubernetes.io/kube-apiserver-client"]);
    }

    #[test]
    fn defaults_are_kube_controller_managers() {
        let o = parse(&[]).expect("defaults parse");
        assert_eq!(o.generic.controllers, vec!["*"]);
        assert_eq!(o.hpa.concurrent_horizontal_pod_autoscaler_syncs, 5);
        assert_eq!(
            o.hpa.horizontal_pod_autoscaler_sync_period.get(),
            Duration::from_secs(15)
        );
        assert_eq!(
            o.hpa
                .horizontal_pod_autoscaler_downscale_stabilization
                .get(),
            Duration::from_secs(300)
        );
        assert_eq!(o.hpa.horizontal_pod_autoscaler_tolerance, 0.1);
        assert_eq!(
            o.hpa
                .horizontal_pod_autoscaler_cpu_initialization_period
                .get(),
            Duration::from_secs(300)
        );
        assert_eq!(
            o.hpa
                .horizontal_pod_autoscaler_initial_readiness_delay
                .get(),
            Duration::from_secs(30)
        );
        assert_eq!(o.generic.kube_api_qps, 20.0);
        assert_eq!(o.generic.kube_api_burst, 30);
        assert_eq!(
            o.generic.min_resync_period.get(),
            Duration::from_secs(12 * 3600)
        );
        assert!(o.leader_election.leader_elect);
        assert_eq!(
            o.leader_election.lease_duration.get(),
            Duration::from_secs(15)
        );
        assert_eq!(
            o.leader_election.renew_deadline.get(),
            Duration::from_secs(10)
        );
        assert_eq!(o.leader_election.retry_period.get(), Duration::from_secs(2));
        assert_eq!(o.leader_election.resource_lock, "leases");
        assert_eq!(o.leader_election.resource_namespace, "kube-system");
        assert_eq!(o.leader_election.resource_name, "kube-controller-manager");
        assert_eq!(o.secure_serving.bind_address.to_string(), "0.0.0.0");
        assert_eq!(o.secure_serving.secure_port, 10257);
        assert_eq!(o.secure_serving.tls_cert_file, None);
        assert_eq!(o.replicaset.concurrent_replicaset_syncs, 5);
        assert_eq!(o.daemonset.concurrent_daemonset_syncs, 2);
        assert_eq!(o.statefulset.concurrent_statefulset_syncs, 5);
        assert_eq!(o.replicationcontroller.concurrent_rc_syncs, 5);
        assert_eq!(o.deployment.concurrent_deployment_syncs, 5);
        assert_eq!(o.garbage_collector.concurrent_gc_syncs, 20);
        assert_eq!(o.namespace.concurrent_namespace_syncs, 10);
        assert_eq!(
            o.namespace.namespace_sync_period.get(),
            crate::namespace::DEFAULT_NAMESPACE_SYNC_PERIOD
        );
        assert_eq!(
            o.node_lifecycle.node_monitor_grace_period.get(),
            Duration::from_secs(50)
        );
        assert_eq!(
            o.node_lifecycle.node_startup_grace_period.get(),
            Duration::from_secs(60)
        );
        assert_eq!(
            o.node_lifecycle.node_monitor_period.get(),
            Duration::from_secs(5)
        );
        assert_eq!(o.node_lifecycle.node_eviction_rate, 0.1);
        assert_eq!(o.node_lifecycle.secondary_node_eviction_rate, 0.01);
        assert_eq!(o.node_lifecycle.large_cluster_size_threshold, 50);
        assert_eq!(o.node_lifecycle.unhealthy_zone_threshold, 0.55);
        assert_eq!(o.job.concurrent_job_syncs, 5);
        assert_eq!(o.cronjob.concurrent_cron_job_syncs, 5);
        assert_eq!(o.ttl_after_finished.concurrent_ttl_after_finished_syncs, 5);
        assert_eq!(o.ephemeral_volume.concurrent_ephemeral_volume_syncs, 5);
        assert_eq!(o.resource_claim.concurrent_resource_claim_syncs, 50);
        assert_eq!(
            o.device_taint_eviction
                .concurrent_device_taint_eviction_syncs,
            8
        );
        assert_eq!(o.service.concurrent_service_syncs, 1);
        assert_eq!(
            o.validating_admission_policy_status
                .concurrent_validating_admission_policy_status_syncs,
            5
        );
        assert_eq!(o.kube_cloud_shared.cloud_provider, "");
        assert_eq!(o.kube_cloud_shared.cluster_name, "kubernetes");
        assert_eq!(
            o.persistentvolume_binder.pvclaimbinder_sync_period.get(),
            Duration::from_secs(15)
        );
        assert!(o.persistentvolume_binder.enable_dynamic_provisioning);
        assert!(!o.persistentvolume_binder.enable_hostpath_provisioner);
        assert_eq!(
            o.attach_detach.attach_detach_reconcile_sync_period.get(),
            crate::volume::attachdetach::reconciler::DEFAULT_RECONCILE_SYNC_PERIOD
        );
        assert!(!o.attach_detach.disable_attach_detach_reconcile_sync);
        assert_eq!(o.podgc.terminated_pod_gc_threshold, 12500);
        assert_eq!(o.resource_quota.concurrent_resource_quota_syncs, 5);
        assert_eq!(
            o.resource_quota.resource_quota_sync_period.get(),
            crate::resourcequota::DEFAULT_RESOURCE_QUOTA_SYNC_PERIOD
        );
        assert_eq!(o.endpoint.concurrent_endpoint_syncs, 5);
        assert_eq!(
            o.endpoint.endpoint_updates_batch_period.get(),
            Duration::ZERO
        );
        assert_eq!(o.endpointslice.concurrent_service_endpoint_syncs, 5);
        assert_eq!(o.endpointslice.max_endpoints_per_slice, 100);
        assert_eq!(
            o.endpointslice.endpointslice_updates_batch_period.get(),
            Duration::ZERO
        );
        assert_eq!(
            o.endpointslice_mirroring
                .mirroring_concurrent_service_endpoint_syncs,
            5
        );
        assert_eq!(
            o.endpointslice_mirroring.mirroring_max_endpoints_per_subset,
            1000
        );
        assert!(!o.kube_cloud_shared.allocate_node_cidrs);
        assert_eq!(o.kube_cloud_shared.cluster_cidr, "");
        assert_eq!(o.kube_cloud_shared.cidr_allocator_type, "RangeAllocator");
        assert!(!o.kube_cloud_shared.use_service_account_credentials);
        assert_eq!(
            o.node_ipam.node_cidr_mask_size, 0,
            "unset: 24 for IPv4, 64 for IPv6"
        );
        assert_eq!(o.node_ipam.service_cluster_ip_range, "");
        assert_eq!(o.sa_controller.root_ca_file, None);
        assert_eq!(o.misc, MiscFlags::default());
        o.validate().expect("defaults are valid");
    }

    #[test]
    fn flags_parse_as_pflag_does() {
        struct Case {
            name: &'static str,
            args: &'static [&'static str],
            check: fn(&ManagerOptions) -> bool,
        }
        let cases = [
            Case {
                name: "controllers list with equals",
                args: &["--controllers=*,-replicaset,-deployment"],
                check: |o| o.generic.controllers == ["*", "-replicaset", "-deployment"],
            },
            Case {
                name: "controllers repeated appends",
                args: &["--controllers", "*", "--controllers", "-replicaset"],
                check: |o| o.generic.controllers == ["*", "-replicaset"],
            },
            Case {
                name: "a repeated flag overrides, as pflag",
                args: &[
                    "--kube-api-qps=1",
                    "--kube-api-qps=2",
                    "--leader-elect=false",
                    "--leader-elect",
                ],
                check: |o| o.generic.kube_api_qps == 2.0 && o.leader_election.leader_elect,
            },
            Case {
                name: "go durations",
                args: &[
                    "--leader-elect-lease-duration=1m30s",
                    "--leader-elect-renew-deadline",
                    "45s",
                    "--leader-elect-retry-period=500ms",
                    "--min-resync-period=1h",
                ],
                check: |o| {
                    o.leader_election.lease_duration.get() == Duration::from_secs(90)
                        && o.leader_election.renew_deadline.get() == Duration::from_secs(45)
                        && o.leader_election.retry_period.get() == Duration::from_millis(500)
                        && o.generic.min_resync_period.get() == Duration::from_secs(3600)
                },
            },
            Case {
                name: "bare boolean flag",
                args: &["--leader-elect"],
                check: |o| o.leader_election.leader_elect,
            },
            Case {
                name: "boolean false with equals",
                args: &["--leader-elect=false"],
                check: |o| !o.leader_election.leader_elect,
            },
            Case {
                name: "go boolean spellings",
                args: &["--leader-elect=F"],
                check: |o| !o.leader_election.leader_elect,
            },
            Case {
                name: "client connection",
                args: &["--kube-api-qps", "5", "--kube-api-burst=7"],
                check: |o| o.generic.kube_api_qps == 5.0 && o.generic.kube_api_burst == 7,
            },
            Case {
                name: "negative qps disables limiting",
                args: &["--kube-api-qps=-1"],
                check: |o| o.generic.kube_api_qps == -1.0,
            },
            Case {
                name: "serving",
                args: &[
                    "--bind-address=127.0.0.1",
                    "--secure-port=0",
                    "--tls-cert-file=/c.pem",
                    "--tls-private-key-file=/k.pem",
                ],
                check: |o| {
                    o.secure_serving.bind_address.to_string() == "127.0.0.1"
                        && o.secure_serving.secure_port == 0
                        && o.secure_serving.tls_cert_file == Some(PathBuf::from("/c.pem"))
                },
            },
            Case {
                name: "per-controller workers",
                args: &[
                    "--concurrent-replicaset-syncs=2",
                    "--concurrent-deployment-syncs=3",
                    "--concurrent-gc-syncs=4",
                ],
                check: |o| {
                    o.replicaset.concurrent_replicaset_syncs == 2
                        && o.deployment.concurrent_deployment_syncs == 3
                        && o.garbage_collector.concurrent_gc_syncs == 4
                },
            },
            Case {
                name: "ephemeral volume controller",
                args: &["--concurrent-ephemeralvolume-syncs=7"],
                check: |o| o.ephemeral_volume.concurrent_ephemeral_volume_syncs == 7,
            },
            Case {
                name: "resourceclaim controller",
                args: &["--concurrent-resourceclaim-syncs=25"],
                check: |o| o.resource_claim.concurrent_resource_claim_syncs == 25,
            },
            Case {
                name: "device taint eviction controller",
                args: &["--concurrent-device-taint-eviction-syncs=25"],
                check: |o| {
                    o.device_taint_eviction
                        .concurrent_device_taint_eviction_syncs
                        == 25
                },
            },
            Case {
                name: "persistentvolume binder controller",
                args: &[
                    "--pvclaimbinder-sync-period=30s",
                    "--enable-dynamic-provisioning=false",
                    "--enable-hostpath-provisioner",
                    "--pv-recycler-minimum-timeout-nfs=10",
                    "--volume-host-cidr-denylist=10.0.0.0/8,127.0.0.0/8",
                ],
                check: |o| {
                    let f = &o.persistentvolume_binder;
                    f.pvclaimbinder_sync_period.get() == Duration::from_secs(30)
                        && !f.enable_dynamic_provisioning
                        && f.enable_hostpath_provisioner
                        && f.pv_recycler_minimum_timeout_nfs == 10
                        && f.volume_host_cidr_denylist.len() == 2
                },
            },
            Case {
                name: "attach detach controller",
                args: &[
                    "--attach-detach-reconcile-sync-period=2m",
                    "--disable-attach-detach-reconcile-sync",
                ],
                check: |o| {
                    let f = &o.attach_detach;
                    f.attach_detach_reconcile_sync_period.get() == Duration::from_secs(120)
                        && f.disable_attach_detach_reconcile_sync
                },
            },
            Case {
                name: "namespace controller",
                args: &[
                    "--concurrent-namespace-syncs=3",
                    "--namespace-sync-period=1m30s",
                ],
                check: |o| {
                    o.namespace.concurrent_namespace_syncs == 3
                        && o.namespace.namespace_sync_period.get() == Duration::from_secs(90)
                },
            },
            Case {
                name: "endpoint controllers",
                args: &[
                    "--concurrent-endpoint-syncs=2",
                    "--endpoint-updates-batch-period=500ms",
                    "--concurrent-service-endpoint-syncs=3",
                    "--max-endpoints-per-slice=50",
                    "--mirroring-concurrent-service-endpoint-syncs=4",
                    "--mirroring-max-endpoints-per-subset=10",
                ],
                check: |o| {
                    o.endpoint.concurrent_endpoint_syncs == 2
                        && o.endpoint.endpoint_updates_batch_period.get()
                            == Duration::from_millis(500)
                        && o.endpointslice.concurrent_service_endpoint_syncs == 3
                        && o.endpointslice.max_endpoints_per_slice == 50
                        && o.endpointslice_mirroring
                            .mirroring_concurrent_service_endpoint_syncs
                            == 4
                        && o.endpointslice_mirroring.mirroring_max_endpoints_per_subset == 10
                },
            },
            Case {
                name: "node ipam",
                args: &[
                    "--allocate-node-cidrs=true",
                    "--cluster-cidr=10.244.0.0/16",
                    "--node-cidr-mask-size=24",
                    "--service-cluster-ip-range=10.96.0.0/12",
                    "--root-ca-file=/ca.crt",
                ],
                check: |o| {
                    o.kube_cloud_shared.allocate_node_cidrs
                        && o.node_ipam_flags()
                            .config()
                            .is_ok_and(|c| c.node_mask_sizes == [24])
                        && o.sa_controller.root_ca_file == Some(PathBuf::from("/ca.crt"))
                },
            },
            Case {
                name: "kubeconfig and master",
                args: &["--kubeconfig=/kc", "--master=https://10.0.0.1:6443"],
                check: |o| {
                    o.misc.kubeconfig == Some(PathBuf::from("/kc"))
                        && o.misc.master.as_deref() == Some("https://10.0.0.1:6443")
                },
            },
            Case {
                name: "content type accepted",
                args: &["--kube-api-content-type=application/vnd.kubernetes.protobuf"],
                check: |o| o.generic.kube_api_content_type == "application/vnd.kubernetes.protobuf",
            },
        ];
        for case in cases {
            let o = parse(case.args).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            assert!((case.check)(&o), "{}: {o:?}", case.name);
        }
    }

    #[test]
    fn malformed_flags_are_rejected() {
        let cases: [(&str, &[&str]); 7] = [
            (
                "no slices of zero endpoints",
                &["--max-endpoints-per-slice=0"],
            ),
            (
                "duration without unit",
                &["--leader-elect-lease-duration=15"],
            ),
            ("negative duration", &["--min-resync-period=-1h"]),
            ("not a boolean", &["--leader-elect=maybe"]),
            ("boolean needs equals", &["--leader-elect", "false"]),
            ("cert without key", &["--tls-cert-file=/c.pem"]),
            ("port out of range", &["--secure-port=70000"]),
        ];
        for (name, args) in cases {
            assert!(parse(args).is_err(), "{name} should fail");
        }
    }

    #[test]
    fn validation_matches_kube_controller_manager() {
        let lock = parse(&["--leader-elect-resource-lock=endpoints"]).expect("parse");
        assert!(
            lock.validate()
                .expect_err("lock")
                .to_string()
                .contains("resourceLock value must be \"leases\"")
        );
        // Without leader election the lock is irrelevant, as upstream.
        let no_le = parse(&[
            "--leader-elect=false",
            "--leader-elect-resource-lock=endpoints",
        ])
        .expect("parse");
        no_le.validate().expect("valid without leader election");

        let timings = parse(&[
            "--leader-elect-lease-duration=10s",
            "--leader-elect-renew-deadline=10s",
        ])
        .expect("parse");
        assert!(
            timings
                .validate()
                .expect_err("timings")
                .to_string()
                .contains("leaseDuration must be greater than renewDeadline")
        );

        // Upstream's `ResourceClaimControllerOptions.Validate`.
        let claims = parse(&["--concurrent-resourceclaim-syncs=0"]).expect("parse");
        assert!(
            claims
                .validate()
                .expect_err("zero workers")
                .to_string()
                .contains("concurrent-resourceclaim-syncs must be greater than 0")
        );
    }

    #[test]
    fn leader_election_config_carries_the_flags() {
        let o = parse(&[
            "--leader-elect-resource-namespace=ops",
            "--leader-elect-resource-name=kcm",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=1s",
        ])
        .expect("parse");
        let config = o.leader_election_config("me_1");
        assert_eq!(config.namespace, "ops");
        assert_eq!(config.name, "kcm");
        assert_eq!(config.identity, "me_1");
        assert_eq!(config.lease_duration, Duration::from_secs(4));
        assert_eq!(config.renew_deadline, Duration::from_secs(3));
        assert_eq!(config.retry_period, Duration::from_secs(1));
        assert!(config.release_on_cancel);
    }

    #[test]
    fn resync_period_is_between_min_and_twice_min() {
        let o = parse(&["--min-resync-period=1h"]).expect("parse");
        assert_eq!(o.resync_period(1.0), Duration::from_secs(3600));
        assert_eq!(o.resync_period(1.5), Duration::from_secs(5400));
        assert_eq!(o.resync_period(7.0), Duration::from_secs(7200));
        assert_eq!(o.resync_period(f64::NAN), Duration::from_secs(3600));
    }

    #[test]
    fn help_is_grouped_with_defaults() {
        let help = Cli::command().render_long_help().to_string();
        let headings = [
            "Generic flags:",
            "Secure serving flags:",
            "DaemonSet controller flags:",
            "Deployment controller flags:",
            "Garbage collector controller flags:",
            "Namespace controller flags:",
            "ReplicaSet controller flags:",
            "ReplicationController flags:",
            "Service controller flags:",
            "StatefulSet controller flags:",
            "Misc flags:",
        ];
        let mut last = 0;
        for heading in headings {
            let at = help
                .find(heading)
                .unwrap_or_else(|| panic!("missing {heading} in\n{help}"));
            assert!(at >= last, "{heading} out of order in\n{help}");
            last = at;
        }
        for needle in [
            "--leader-elect-lease-duration <duration>",
            "[default: 15s]",
            "[default: 12h0m0s]",
            "[default: kube-system]",
            "[default: 10257]",
            "[default: 0.0.0.0]",
            "All controllers: ",
            "Disabled-by-default controllers: ",
            "All controllers: bootstrap-signer-controller, certificatesigningrequest-approving-controller, certificatesigningrequest-cleaner-controller, certificatesigningrequest-signing-controller, cloud-node-lifecycle-controller, clusterrole-aggregation-controller, cronjob-controller, daemonset-controller, deployment-controller, device-taint-eviction-controller, disruption-controller, endpoints-controller, endpointslice-controller, endpointslice-mirroring-controller, ephemeral-volume-controller, garbage-collector-controller, horizontal-pod-autoscaler-controller, job-controller, kube-apiserver-serving-clustertrustbundle-publisher-controller, legacy-serviceaccount-token-cleaner-controller, namespace-controller, node-ipam-controller, node-lifecycle-controller, node-route-controller, persistentvolume-attach-detach-controller, persistentvolume-binder-controller, persistentvolume-expander-controller, persistentvolume-protection-controller, persistentvolumeclaim-protection-controller, pod-garbage-collector-controller, podcertificaterequest-cleaner-controller, podgroup-protection-controller, replicaset-controller, replicationcontroller-controller, resourceclaim-controller, resourcepoolstatusrequest-controller, resourcequota-controller, root-ca-certificate-publisher-controller, selinux-warning-controller, service-cidr-controller, service-lb-controller, serviceaccount-controller, serviceaccount-token-controller, statefulset-controller, storage-version-migrator-controller, storageversion-garbage-collector-controller, taint-eviction-controller, token-cleaner-controller, ttl-after-finished-controller, ttl-controller, validatingadmissionpolicy-status-controller, volumeattributesclass-protection-controller",
            "Disabled-by-default controllers: bootstrap-signer-controller, selinux-warning-controller, token-cleaner-controller",
            "Not built yet in kcm (accepted; skipped with a warning): kube-apiserver-serving-clustertrustbundle-publisher-controller, node-route-controller, podcertificaterequest-cleaner-controller, podgroup-protection-controller, resourcepoolstatusrequest-controller, selinux-warning-controller, storage-version-migrator-controller, storageversion-garbage-collector-controller",
            "--feature-gates <colonSeparatedMultimapStringString>",
            "kube:GenericWorkload=true|false (ALPHA - default=false)",
            "--concurrent-validating-admission-policy-status-syncs <int32>",
            "--concurrent-service-syncs <int32>",
            "--cloud-provider <string>",
            "--cluster-name <string>",
            "--concurrent-job-syncs <int32>",
            "--concurrent-cron-job-syncs <int32>",
            "--concurrent-ttl-after-finished-syncs <int32>",
            "--concurrent-ephemeralvolume-syncs <int32>",
            "--concurrent-resourceclaim-syncs <int32>",
            "--concurrent-device-taint-eviction-syncs <int32>",
            "--concurrent-resource-quota-syncs <int32>",
            "--resource-quota-sync-period <duration>",
            "--terminated-pod-gc-threshold <int32>",
            "[default: 12500]",
            "--concurrent-daemonset-syncs <int32>",
            "--concurrent-statefulset-syncs <int32>",
            "--concurrent-rc-syncs <int32>",
            "--namespace-sync-period <duration>",
            "[default: 5m0s]",
            "--cluster-signing-kube-apiserver-client-cert-file <string>",
            "--cluster-signing-duration <duration>",
            "[default: 8760h0m0s]",
        ] {
            assert!(help.contains(needle), "missing {needle} in\n{help}");
        }
        // Leader election flags sit in the generic group, before secure serving.
        let le = help.find("--leader-elect-retry-period").expect("flag");
        assert!(le < help.find("Secure serving flags:").expect("heading"));
    }
}
