//! The descriptors of the controllers kcm implements, one function each, and [`ControllerRegistry::builtin`] registering them.

use std::sync::Arc;

use super::context::ControllerContext;
use super::names::{
    BOOTSTRAP_SIGNER, BOOTSTRAP_SIGNER_CONTROLLER, PERSISTENTVOLUME_BINDER,
    PERSISTENTVOLUME_BINDER_CONTROLLER, TOKEN_CLEANER, TOKEN_CLEANER_CONTROLLER,
};
use super::names::{
    BUILTIN_CONTROLLERS, CLOUD_NODE_LIFECYCLE, CLOUD_NODE_LIFECYCLE_CONTROLLER,
    CLUSTERROLE_AGGREGATION, CLUSTERROLE_AGGREGATION_CONTROLLER, CRONJOB, CRONJOB_CONTROLLER,
    CSR_APPROVING, CSR_APPROVING_CONTROLLER, CSR_CLEANER, CSR_CLEANER_CONTROLLER, CSR_SIGNING,
    CSR_SIGNING_CONTROLLER, DAEMONSET, DAEMONSET_CONTROLLER, DEPLOYMENT, DEPLOYMENT_CONTROLLER,
    DISRUPTION, DISRUPTION_CONTROLLER, ENDPOINTS, ENDPOINTS_CONTROLLER, ENDPOINTSLICE,
    ENDPOINTSLICE_CONTROLLER, ENDPOINTSLICE_MIRRORING, ENDPOINTSLICE_MIRRORING_CONTROLLER,
    EPHEMERAL_VOLUME, EPHEMERAL_VOLUME_CONTROLLER, GARBAGE_COLLECTOR, GARBAGE_COLLECTOR_CONTROLLER,
    HORIZONTAL_POD_AUTOSCALER, HORIZONTAL_POD_AUTOSCALER_CONTROLLER, JOB, JOB_CONTROLLER,
    NAMESPACE, NAMESPACE_CONTROLLER, NODE_IPAM, NODE_IPAM_CONTROLLER, NODE_LIFECYCLE,
    NODE_LIFECYCLE_CONTROLLER, PERSISTENTVOLUME_PROTECTION, PERSISTENTVOLUME_PROTECTION_CONTROLLER,
    PERSISTENTVOLUMECLAIM_PROTECTION, PERSISTENTVOLUMECLAIM_PROTECTION_CONTROLLER,
    POD_GARBAGE_COLLECTOR, POD_GARBAGE_COLLECTOR_CONTROLLER, REPLICASET, REPLICASET_CONTROLLER,
    REPLICATIONCONTROLLER, REPLICATIONCONTROLLER_CONTROLLER, RESOURCE_QUOTA,
    RESOURCE_QUOTA_CONTROLLER, ROOT_CA_CERTIFICATE_PUBLISHER,
    ROOT_CA_CERTIFICATE_PUBLISHER_CONTROLLER, SERVICE_CIDR_CONTROLLER, SERVICE_LB,
    SERVICE_LB_CONTROLLER, SERVICEACCOUNT, SERVICEACCOUNT_CONTROLLER, SERVICEACCOUNT_TOKEN,
    SERVICEACCOUNT_TOKEN_CONTROLLER, STATEFULSET, STATEFULSET_CONTROLLER,
    TAINT_EVICTION_CONTROLLER, TTL, TTL_AFTER_FINISHED, TTL_AFTER_FINISHED_CONTROLLER,
    TTL_CONTROLLER, VALIDATINGADMISSIONPOLICY_STATUS_CONTROLLER,
    VOLUMEATTRIBUTESCLASS_PROTECTION_CONTROLLER,
};
use super::names::{DEVICE_TAINT_EVICTION, DEVICE_TAINT_EVICTION_CONTROLLER};
use super::names::{
    LEGACY_SERVICEACCOUNT_TOKEN_CLEANER, LEGACY_SERVICEACCOUNT_TOKEN_CLEANER_CONTROLLER,
};
use super::names::{NOT_BUILT_CONTROLLERS, PendingController};
use super::names::{PERSISTENTVOLUME_ATTACH_DETACH, PERSISTENTVOLUME_ATTACH_DETACH_CONTROLLER};
use super::names::{PERSISTENTVOLUME_EXPANDER, PERSISTENTVOLUME_EXPANDER_CONTROLLER};
use super::names::{RESOURCE_CLAIM, RESOURCE_CLAIM_CONTROLLER};
use super::registry::{ControllerDescriptor, ControllerRegistry, StartedController};
use crate::bootstrap::{BootstrapSigner, TokenCleaner};
use crate::certificates::approver::{INSTANCE_NAME as APPROVER_INSTANCE, SarApprover};
use crate::certificates::ca_provider::CaProvider;
use crate::certificates::cleaner::CsrCleaner;
use crate::certificates::signer::{SIGNERS, Signer};
use crate::certificates::{ApiCsrClient, CertificateController};
use crate::cloudnodelifecycle::CloudNodeLifecycleController;
use crate::clusterroleaggregation::{
    ClusterRoleAggregationController, WORKERS as AGGREGATION_WORKERS,
};
use crate::cronjob::{CronJobController, CronJobControllerOptions, CronJobMetrics};
use crate::daemon::{DaemonSetsController, DaemonSetsControllerOptions};
use crate::deployment::{DeploymentController, DeploymentControllerOptions};
use crate::devicetainteviction::{DeviceTaintEvictionController, DeviceTaintEvictionOptions};
use crate::disruption::{DisruptionController, DisruptionControllerOptions};
use crate::endpoint::{EndpointController, EndpointControllerOptions};
use crate::endpointslice::{
    EndpointSliceController, EndpointSliceControllerOptions, EndpointSliceMetrics,
};
use crate::endpointslicemirroring::{
    EndpointSliceMirroringController, EndpointSliceMirroringOptions, MirroringMetrics,
};
use crate::garbagecollector::{GarbageCollector, GarbageCollectorOptions};
use crate::job::{JobController, JobControllerOptions, JobMetrics};
use crate::namespace::{NamespaceController, NamespaceControllerOptions};
use crate::nodeipam::{ApiNodeCidrClient, CIDR_UPDATE_WORKERS, RangeAllocator};
use crate::nodelifecycle::zone::EvictionRates;
use crate::nodelifecycle::{
    ApiLifecycleClient, EVENT_COMPONENT, NodeLifecycleController, NodeLifecycleOptions,
};
use crate::podautoscaler::{HorizontalController, HorizontalControllerOptions, ReplicaCalculator};
use crate::podgc::{PodGcController, PodGcControllerOptions, PodGcMetrics};
use crate::replicaset::{
    BURST_REPLICAS, ReplicaSetController, ReplicaSetControllerOptions, ReplicaSetMetrics,
};
use crate::replication::ReplicationManager;
use crate::resourceclaim::{
    ResourceClaimController, ResourceClaimControllerOptions, ResourceClaimMetrics,
    ResourceClaimsCollector,
};
use crate::resourcequota::{ResourceQuotaController, ResourceQuotaControllerOptions};
use crate::rootcacertpublisher::{
    PUBLISHER_WORKERS, Publisher, PublisherMetrics, PublisherOptions,
};
use crate::serviceaccount::tokens::{TokenGenerator, TokensController};
use crate::serviceaccount::{LegacyTokenCleaner, LegacyTokenCleanerOptions};
use crate::serviceaccount::{
    SERVICE_ACCOUNT_WORKERS, ServiceAccountsController, ServiceAccountsControllerOptions,
};
use crate::servicecidrs::{ServiceCidrController, ServiceCidrControllerOptions};
use crate::servicelb::{ServiceLbController, ServiceLbControllerOptions, ServiceLbMetrics};
use crate::statefulset::{StatefulSetController, StatefulSetControllerOptions};
use crate::tainteviction::TaintEvictionController;
use crate::ttl::{TtlController, TtlControllerOptions, WORKERS as TTL_WORKERS};
use crate::ttlafterfinished::{
    TtlAfterFinishedController, TtlAfterFinishedControllerOptions, TtlAfterFinishedMetrics,
};
use crate::validatingadmissionpolicystatus::ValidatingAdmissionPolicyStatusController;
use crate::volume::ephemeral::{
    EphemeralController, EphemeralControllerOptions, EphemeralVolumeMetrics,
};
use crate::volume::pvcprotection::{PvcProtectionController, PvcProtectionControllerOptions};
use crate::volume::pvprotection::{PvProtectionController, PvProtectionControllerOptions};
use crate::volume::vacprotection::{VacProtectionController, VacProtectionControllerOptions};

impl ControllerRegistry {
    /// The controllers kcm implements, under the names of [`super::names`]. Adding a
    /// controller is one [`ControllerDescriptor`] here, its names in [`super::names`], plus its
    /// flags in [`ManagerOptions`](super::ManagerOptions).
    pub fn builtin() -> Self {
        let mut registry = Self::new();
        for descriptor in [
            serviceaccount_token_controller(),
            replicaset_controller(),
            replicationcontroller_controller(),
            deployment_controller(),
            daemonset_controller(),
            statefulset_controller(),
            endpoints_controller(),
            endpointslice_controller(),
            endpointslice_mirroring_controller(),
            garbage_collector_controller(),
            namespace_controller(),
            node_ipam_controller(),
            node_lifecycle_controller(),
            root_ca_certificate_publisher_controller(),
            certificatesigningrequest_signing_controller(),
            certificatesigningrequest_approving_controller(),
            certificatesigningrequest_cleaner_controller(),
            bootstrap_signer_controller(),
            token_cleaner_controller(),
            serviceaccount_controller(),
            taint_eviction_controller(),
            job_controller(),
            cronjob_controller(),
            ttl_controller(),
            ttl_after_finished_controller(),
            pod_garbage_collector_controller(),
            horizontal_pod_autoscaler_controller(),
            clusterrole_aggregation_controller(),
            resource_quota_controller(),
            disruption_controller(),
            persistentvolumeclaim_protection_controller(),
            persistentvolume_protection_controller(),
            volumeattributesclass_protection_controller(),
            ephemeral_volume_controller(),
            resource_claim_controller(),
            device_taint_eviction_controller(),
            service_lb_controller(),
            service_cidr_controller(),
            legacy_serviceaccount_token_cleaner_controller(),
            validatingadmissionpolicy_status_controller(),
            cloud_node_lifecycle_controller(),
            persistentvolume_binder_controller(),
            persistentvolume_attach_detach_controller(),
            persistentvolume_expander_controller(),
        ] {
            let descriptor = match BUILTIN_CONTROLLERS
                .iter()
                .find(|names| names.name == descriptor.name())
            {
                Some(names) if !names.service_account.is_empty() => {
                    descriptor.with_service_account(names.service_account)
                }
                _ => descriptor,
            };
            if let Err(err) = registry.register(descriptor) {
                // The list above is fixed at compile time; a clash is a programming error,
                // caught by the unit test below.
                tracing::error!(%err, "built-in controller not registered");
            }
        }
        for pending in NOT_BUILT_CONTROLLERS {
            if let Err(err) = registry.register(not_built_controller(pending)) {
                tracing::error!(%err, "built-in controller not registered");
            }
        }
        registry
    }
}

/// A controller of kube-controller-manager v1.36 kcm does not implement yet: listed and
/// accepted by `--controllers`, gated as upstream's descriptor (so `*` leaves it off while its
/// gate is off), and, when it would start, logged with a warning and skipped. A cloud one is
/// skipped without a cloud first, as upstream's.
pub fn not_built_controller(pending: PendingController) -> ControllerDescriptor {
    let names = pending.names;
    let mut descriptor = ControllerDescriptor::new(names.name, move |ctx: ControllerContext| {
        let name = names.name;
        async move {
            if pending.cloud && ctx.cloud.is_none() {
                tracing::info!(controller = name, "Skipping a cloud provider controller");
                return Ok(None);
            }
            tracing::warn!(
                controller = name,
                "controller is not built yet in kcm; skipping it"
            );
            Ok(None)
        }
    })
    .with_aliases(names.aliases)
    .with_required_feature_gates(pending.required_feature_gates);
    if names.disabled_by_default {
        descriptor = descriptor.disabled_by_default();
    }
    descriptor
}

/// `replicaset-controller` (alias `replicaset`): ReplicaSets and Pods informers,
/// `--concurrent-replicaset-syncs` workers, queue `replicaset`.
pub fn replicaset_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(REPLICASET_CONTROLLER, |ctx: ControllerContext| async move {
        let controller_metrics = Arc::new(ReplicaSetMetrics::new());
        ctx.metrics
            .with_registry(|registry| controller_metrics.register(registry));
        let controller = Arc::new(ReplicaSetController::new_with_options(
            &ctx.factory,
            ctx.client.clone(),
            ctx.recorder(REPLICASET_CONTROLLER),
            ReplicaSetControllerOptions {
                burst_replicas: BURST_REPLICAS,
                metrics: Some(ctx.workqueue_metrics()),
                controller_metrics: Some(controller_metrics),
                ..ReplicaSetControllerOptions::default()
            },
        ));
        let workers = ctx.options.replicaset.concurrent_replicaset_syncs as usize;
        Ok(Some(StartedController::new(
            controller.run(workers, ctx.cancel.clone()),
        )))
    })
    .with_aliases(REPLICASET.aliases)
}

/// `replicationcontroller-controller` (alias `replicationcontroller`): ReplicationControllers
/// and Pods informers, `--concurrent-rc-syncs` workers, queue `replicationmanager`; events
/// from `replication-controller`, as upstream's.
pub fn replicationcontroller_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        REPLICATIONCONTROLLER_CONTROLLER,
        |ctx: ControllerContext| async move {
            let manager = ReplicationManager::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(crate::replication::EVENT_COMPONENT),
                Some(ctx.workqueue_metrics()),
            );
            let workers = ctx.options.replicationcontroller.concurrent_rc_syncs as usize;
            Ok(Some(StartedController::new(
                manager.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(REPLICATIONCONTROLLER.aliases)
}

/// `daemonset-controller` (alias `daemonset`): DaemonSets, ControllerRevisions, Pods and Nodes
/// informers, `--concurrent-daemonset-syncs` workers, queue `daemonset`.
pub fn daemonset_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(DAEMONSET_CONTROLLER, |ctx: ControllerContext| async move {
        let controller = Arc::new(DaemonSetsController::new(
            &ctx.factory,
            ctx.client.clone(),
            ctx.recorder(DAEMONSET_CONTROLLER),
            DaemonSetsControllerOptions {
                metrics: Some(ctx.workqueue_metrics()),
                ..DaemonSetsControllerOptions::default()
            },
        ));
        let workers = ctx.options.daemonset.concurrent_daemonset_syncs as usize;
        Ok(Some(StartedController::new(
            controller.run(workers, ctx.cancel.clone()),
        )))
    })
    .with_aliases(DAEMONSET.aliases)
}

/// `statefulset-controller` (alias `statefulset`): Pods, StatefulSets,
/// PersistentVolumeClaims and ControllerRevisions informers, `--concurrent-statefulset-syncs`
/// workers, queue `statefulset`.
pub fn statefulset_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        STATEFULSET_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(StatefulSetController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(STATEFULSET_CONTROLLER),
                StatefulSetControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                    max_unavailable_stateful_set: ctx
                        .options
                        .feature_gates()
                        .enabled(super::feature_gates::MAX_UNAVAILABLE_STATEFUL_SET),
                },
            ));
            let workers = ctx.options.statefulset.concurrent_statefulset_syncs as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(STATEFULSET.aliases)
}

/// `deployment-controller` (alias `deployment`): Deployments, ReplicaSets and Pods informers,
/// `--concurrent-deployment-syncs` workers, queue `deployment`.
pub fn deployment_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(DEPLOYMENT_CONTROLLER, |ctx: ControllerContext| async move {
        let controller = Arc::new(DeploymentController::new_with_options(
            &ctx.factory,
            ctx.client.clone(),
            ctx.recorder(DEPLOYMENT_CONTROLLER),
            DeploymentControllerOptions {
                metrics: Some(ctx.workqueue_metrics()),
            },
        ));
        let workers = ctx.options.deployment.concurrent_deployment_syncs as usize;
        Ok(Some(StartedController::new(
            controller.run(workers, ctx.cancel.clone()),
        )))
    })
    .with_aliases(DEPLOYMENT.aliases)
}

/// `endpoints-controller` (alias `endpoint`): Pods, Services and Endpoints informers,
/// `--concurrent-endpoint-syncs` workers, queue `endpoint`; events from `endpoint-controller`.
pub fn endpoints_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(ENDPOINTS_CONTROLLER, |ctx: ControllerContext| async move {
        let flags = &ctx.options.endpoint;
        let controller = Arc::new(EndpointController::new(
            &ctx.factory,
            ctx.client.clone(),
            ctx.recorder(crate::endpoint::EVENT_COMPONENT),
            EndpointControllerOptions {
                endpoint_updates_batch_period: flags.endpoint_updates_batch_period.get(),
                metrics: Some(ctx.workqueue_metrics()),
            },
        ));
        let workers = flags.concurrent_endpoint_syncs as usize;
        Ok(Some(StartedController::new(
            controller.run(workers, ctx.cancel.clone()),
        )))
    })
    .with_aliases(ENDPOINTS.aliases)
}

/// `endpointslice-controller` (alias `endpointslice`): Pods, Services, Nodes and
/// EndpointSlices informers, `--concurrent-service-endpoint-syncs` workers,
/// `--max-endpoints-per-slice`, queue `endpoint_slice`; events from
/// `endpoint-slice-controller`.
pub fn endpointslice_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        ENDPOINTSLICE_CONTROLLER,
        |ctx: ControllerContext| async move {
            let flags = &ctx.options.endpointslice;
            let controller_metrics = Arc::new(EndpointSliceMetrics::new());
            ctx.metrics
                .with_registry(|registry| controller_metrics.register(registry));
            let controller = Arc::new(EndpointSliceController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(crate::endpointslice::EVENT_COMPONENT),
                EndpointSliceControllerOptions {
                    max_endpoints_per_slice: flags.max_endpoints_per_slice as usize,
                    endpoint_updates_batch_period: flags.endpointslice_updates_batch_period.get(),
                    metrics: Some(ctx.workqueue_metrics()),
                    controller_metrics: Some(controller_metrics),
                },
            ));
            let workers = flags.concurrent_service_endpoint_syncs as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(ENDPOINTSLICE.aliases)
}

/// `endpointslice-mirroring-controller` (alias `endpointslicemirroring`): Endpoints, Services
/// and EndpointSlices informers, `--mirroring-*` flags, queue `endpoint_slice_mirroring`.
pub fn endpointslice_mirroring_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        ENDPOINTSLICE_MIRRORING_CONTROLLER,
        |ctx: ControllerContext| async move {
            let flags = &ctx.options.endpointslice_mirroring;
            let controller_metrics = Arc::new(MirroringMetrics::new());
            ctx.metrics
                .with_registry(|registry| controller_metrics.register(registry));
            let controller = Arc::new(EndpointSliceMirroringController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(crate::endpointslicemirroring::EVENT_COMPONENT),
                EndpointSliceMirroringOptions {
                    max_endpoints_per_subset: flags.mirroring_max_endpoints_per_subset as usize,
                    endpoint_updates_batch_period: flags
                        .mirroring_endpointslice_updates_batch_period
                        .get(),
                    metrics: Some(ctx.workqueue_metrics()),
                    controller_metrics: Some(controller_metrics),
                },
            ));
            let workers = flags.mirroring_concurrent_service_endpoint_syncs as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(ENDPOINTSLICE_MIRRORING.aliases)
}

/// `node-ipam-controller` (alias `nodeipam`): only with `--allocate-node-cidrs`; the
/// `--cluster-cidr` and mask flags are validated as upstream's `startNodeIpamController`, the
/// Nodes are listed (their CIDRs occupied) before the Node informer starts; 30 workers, queue
/// `cidrallocator_node`, events from `cidrAllocator`.
pub fn node_ipam_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(NODE_IPAM_CONTROLLER, |ctx: ControllerContext| async move {
        if !ctx.options.kube_cloud_shared.allocate_node_cidrs {
            return Ok(None);
        }
        let config = ctx.options.node_ipam_flags().config()?;
        let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(ctx.client.clone());
        let existing = api.list(&kube::api::ListParams::default()).await?.items;
        let allocator = Arc::new(RangeAllocator::new(
            &ctx.factory.nodes(),
            Arc::new(ApiNodeCidrClient::new(ctx.client.clone())),
            ctx.recorder(crate::nodeipam::EVENT_COMPONENT),
            &config,
            &existing,
            Some(ctx.workqueue_metrics()),
        )?);
        Ok(Some(StartedController::new(
            allocator.run(CIDR_UPDATE_WORKERS, ctx.cancel.clone()),
        )))
    })
    .with_aliases(NODE_IPAM.aliases)
}

/// `root-ca-certificate-publisher-controller` (alias `root-ca-cert-publisher`): ConfigMaps
/// and Namespaces informers, one worker, queue `root_ca_cert_publisher`; publishes
/// `--root-ca-file`, else the CA the client configuration trusts.
pub fn root_ca_certificate_publisher_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        ROOT_CA_CERTIFICATE_PUBLISHER_CONTROLLER,
        |ctx: ControllerContext| async move {
            let root_ca = match &ctx.options.sa_controller.root_ca_file {
                Some(path) => crate::rootcacertpublisher::ca::read_ca_file(path)?,
                None => ctx.client_ca.as_deref().cloned().unwrap_or_default(),
            };
            let metrics = Arc::new(PublisherMetrics::new());
            ctx.metrics
                .with_registry(|registry| metrics.register(registry));
            let publisher = Arc::new(Publisher::new(
                &ctx.factory,
                ctx.client.clone(),
                &root_ca,
                PublisherOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                    publisher_metrics: Some(metrics),
                },
            ));
            Ok(Some(StartedController::new(
                publisher.run(PUBLISHER_WORKERS, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(ROOT_CA_CERTIFICATE_PUBLISHER.aliases)
}

/// `certificatesigningrequest-signing-controller` (alias `csrsigning`): only when signing files
/// are given, as upstream's `startCertificateSigningRequestSigningController` — either
/// `--cluster-signing-{cert,key}-file` for every signer or the per-signer pairs (a signer
/// without a pair is skipped); one certificate controller per signer, 5 workers each, on the
/// CSR informer, certificates at most `--cluster-signing-duration` long.
pub fn certificatesigningrequest_signing_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        CSR_SIGNING_CONTROLLER,
        |ctx: ControllerContext| async move {
            let flags = &ctx.options.csr_signing;
            let missing_single = flags.cluster_signing_cert_file.is_none()
                || flags.cluster_signing_key_file.is_none();
            let specific = flags.any_specific_files_set();
            if missing_single && !specific {
                tracing::info!(
                    "Skipping CSR signer controller because no csr cert/key was specified"
                );
                return Ok(None);
            }
            if !missing_single && specific {
                return Err(
                    "cannot specify default and per controller certs at the same time".into(),
                );
            }
            let informer = ctx
                .factory
                .informer_for::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>();
            let client = Arc::new(ApiCsrClient::new(ctx.client.clone()));
            let ttl = flags.cluster_signing_duration.get();
            let mut runs = Vec::new();
            for (signer, (cert, key)) in flags.signer_files() {
                let instance = SIGNERS
                    .iter()
                    .find(|(name, _)| *name == signer)
                    .map_or(signer, |(_, instance)| *instance);
                if cert.is_none() && key.is_none() {
                    tracing::info!(
                        controller = signer,
                        "Skipping CSR signer controller because specific files were specified for \
                     other signers and not this one"
                    );
                    continue;
                }
                let ca =
                    CaProvider::from_files(&cert.unwrap_or_default(), &key.unwrap_or_default())
                        .map_err(|err| {
                            format!("failed to start {signer} certificate controller: {err}")
                        })?;
                let handler = Arc::new(Signer::new(signer, Arc::new(ca), client.clone(), ttl));
                let controller = Arc::new(CertificateController::new(
                    instance,
                    &informer,
                    handler,
                    Some(ctx.workqueue_metrics()),
                ));
                runs.push(controller.run(crate::certificates::signer::WORKERS, ctx.cancel.clone()));
            }
            Ok(Some(StartedController::new(async move {
                futures::future::join_all(runs).await;
            })))
        },
    )
    .with_aliases(CSR_SIGNING.aliases)
}

/// `certificatesigningrequest-approving-controller` (alias `csrapproving`): the CSR informer,
/// 5 workers; approves kubelet client CSRs after a SubjectAccessReview.
pub fn certificatesigningrequest_approving_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        CSR_APPROVING_CONTROLLER,
        |ctx: ControllerContext| async move {
            let informer = ctx
                .factory
                .informer_for::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>();
            let approver = Arc::new(SarApprover::new(Arc::new(ApiCsrClient::new(
                ctx.client.clone(),
            ))));
            let controller = Arc::new(CertificateController::new(
                APPROVER_INSTANCE,
                &informer,
                approver,
                Some(ctx.workqueue_metrics()),
            ));
            Ok(Some(StartedController::new(controller.run(
                crate::certificates::approver::WORKERS,
                ctx.cancel.clone(),
            ))))
        },
    )
    .with_aliases(CSR_APPROVING.aliases)
}

/// `certificatesigningrequest-cleaner-controller` (alias `csrcleaner`): the CSR informer, one
/// pass an hour deleting old CSRs.
pub fn certificatesigningrequest_cleaner_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        CSR_CLEANER_CONTROLLER,
        |ctx: ControllerContext| async move {
            let informer = ctx
                .factory
                .informer_for::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>();
            let cleaner = Arc::new(CsrCleaner::new(
                &informer,
                Arc::new(ApiCsrClient::new(ctx.client.clone())),
            ));
            Ok(Some(StartedController::new(
                cleaner.run(ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(CSR_CLEANER.aliases)
}

/// `garbage-collector-controller` (alias `garbagecollector`): typed informers from the shared
/// factory plus metadata-only informers for every other deletable resource found by
/// discovery; `--concurrent-gc-syncs` workers on each of its two queues.
pub fn garbage_collector_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        GARBAGE_COLLECTOR_CONTROLLER,
        |ctx: ControllerContext| async move {
            let options = GarbageCollectorOptions {
                metrics: Some(ctx.workqueue_metrics()),
                ..Default::default()
            };
            ctx.metrics.register(
                "garbagecollector_controller_resources_sync_error",
                "Number of garbage collector resources sync errors",
                options.resources_sync_error.clone(),
            );
            let collector = Arc::new(GarbageCollector::new(
                ctx.client.clone(),
                &ctx.factory,
                ctx.recorder(GARBAGE_COLLECTOR_CONTROLLER),
                options,
            ));
            let workers = ctx.options.garbage_collector.concurrent_gc_syncs as usize;
            Ok(Some(StartedController::new(
                collector.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(GARBAGE_COLLECTOR.aliases)
}

/// `node-lifecycle-controller` (alias `nodelifecycle`): Node, Pod, Lease and DaemonSet
/// informers, the `--node-*` and eviction-rate flags; events from `node-controller`.
pub fn node_lifecycle_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        NODE_LIFECYCLE_CONTROLLER,
        |ctx: ControllerContext| async move {
            let flags = &ctx.options.node_lifecycle;
            let options = NodeLifecycleOptions {
                node_monitor_period: flags.node_monitor_period.get(),
                node_startup_grace_period: flags.node_startup_grace_period.get(),
                node_monitor_grace_period: flags.node_monitor_grace_period.get(),
                rates: EvictionRates {
                    eviction_qps: flags.node_eviction_rate,
                    secondary_eviction_qps: flags.secondary_node_eviction_rate,
                    large_cluster_threshold: flags.large_cluster_size_threshold,
                    unhealthy_zone_threshold: flags.unhealthy_zone_threshold,
                },
                queue_metrics: Some(ctx.workqueue_metrics()),
            };
            let controller = NodeLifecycleController::new(
                &ctx.factory,
                Arc::new(ApiLifecycleClient::new(ctx.client.clone())),
                ctx.recorder(EVENT_COMPONENT),
                options,
            );
            ctx.metrics
                .with_registry(|registry| controller.metrics().register(registry));
            Ok(Some(StartedController::new(
                controller.run(ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(NODE_LIFECYCLE.aliases)
}

/// `taint-eviction-controller`: deletes pods not tolerating their node's NoExecute taints.
pub fn taint_eviction_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        TAINT_EVICTION_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = TaintEvictionController::new(
                &ctx.factory,
                Arc::new(ApiLifecycleClient::new(ctx.client.clone())),
                ctx.recorder(TAINT_EVICTION_CONTROLLER),
                Some(ctx.workqueue_metrics()),
            );
            ctx.metrics
                .with_registry(|registry| controller.metrics().register(registry));
            Ok(Some(StartedController::new(
                controller.run(ctx.cancel.clone()),
            )))
        },
    )
}

/// `namespace-controller` (alias `namespace`): the Namespaces informer (handler resync
/// `--namespace-sync-period`), `--concurrent-namespace-syncs` workers, queue `namespace`;
/// discovery, list and delete of every namespaced resource.
pub fn namespace_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(NAMESPACE_CONTROLLER, |ctx: ControllerContext| async move {
        let flags = &ctx.options.namespace;
        let controller = Arc::new(NamespaceController::new(
            &ctx.factory,
            ctx.client.clone(),
            NamespaceControllerOptions {
                resync_period: flags.namespace_sync_period.get(),
                metrics: Some(ctx.workqueue_metrics()),
            },
        ));
        let workers = flags.concurrent_namespace_syncs as usize;
        Ok(Some(StartedController::new(
            controller.run(workers, ctx.cancel.clone()),
        )))
    })
    .with_aliases(NAMESPACE.aliases)
}

/// `serviceaccount-controller` (alias `serviceaccount`): the ServiceAccounts and Namespaces
/// informers, one worker (upstream has no flag), queue `serviceaccount`; creates the `default`
/// ServiceAccount in every active namespace.
pub fn serviceaccount_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        SERVICEACCOUNT_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(ServiceAccountsController::new(
                &ctx.factory,
                ctx.client.clone(),
                ServiceAccountsControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                    ..ServiceAccountsControllerOptions::default()
                },
            ));
            Ok(Some(StartedController::new(
                controller.run(SERVICE_ACCOUNT_WORKERS, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(SERVICEACCOUNT.aliases)
}

/// `serviceaccount-token-controller` (alias `serviceaccount-token`): registered first so it
/// starts before the others, as upstream's `startServiceAccountTokenController`, with the
/// manager's own client; skipped without `--service-account-private-key-file`. The Secrets and
/// ServiceAccounts informers, `--concurrent-serviceaccount-token-syncs` workers on each of the
/// queues `serviceaccount_tokens_service` and `serviceaccount_tokens_secret`; `ca.crt` is
/// `--root-ca-file`, else the CA the client configuration trusts.
pub fn serviceaccount_token_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        SERVICEACCOUNT_TOKEN_CONTROLLER,
        |ctx: ControllerContext| async move {
            let flags = &ctx.options.sa_controller;
            let Some(key_file) = &flags.service_account_private_key_file else {
                tracing::info!(
                    controller = SERVICEACCOUNT_TOKEN_CONTROLLER,
                    "Controller is disabled because there is no private key"
                );
                return Ok(None);
            };
            let generator = TokenGenerator::from_file(key_file)?;
            let root_ca = match &flags.root_ca_file {
                Some(path) => crate::rootcacertpublisher::ca::read_ca_file(path)?,
                None => ctx.client_ca.as_deref().cloned().unwrap_or_default(),
            };
            let controller = Arc::new(TokensController::new(
                &ctx.factory,
                ctx.client.clone(),
                generator,
                root_ca,
                Some(ctx.workqueue_metrics()),
            ));
            let workers = flags.concurrent_serviceaccount_token_syncs.max(1);
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(SERVICEACCOUNT_TOKEN.aliases)
}

/// `job-controller` (alias `job`): the Jobs and Pods informers, `--concurrent-job-syncs`
/// workers on queue `job` plus one on `job_orphan_pod`; events from `job-controller`.
pub fn job_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(JOB_CONTROLLER, |ctx: ControllerContext| async move {
        let controller_metrics = Arc::new(JobMetrics::new());
        ctx.metrics
            .with_registry(|registry| controller_metrics.register(registry));
        let controller = Arc::new(JobController::new(
            &ctx.factory,
            ctx.client.clone(),
            ctx.recorder(JOB_CONTROLLER),
            JobControllerOptions {
                metrics: Some(ctx.workqueue_metrics()),
                controller_metrics: Some(controller_metrics),
            },
        ));
        let workers = ctx.options.job.concurrent_job_syncs as usize;
        Ok(Some(StartedController::new(
            controller.run(workers, ctx.cancel.clone()),
        )))
    })
    .with_aliases(JOB.aliases)
}

/// `cronjob-controller` (alias `cronjob`): the Jobs and CronJobs informers,
/// `--concurrent-cron-job-syncs` workers on queue `cronjob`; schedules without a zone run in
/// the process's local time zone, as kube-controller-manager's `time.Local`.
pub fn cronjob_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(CRONJOB_CONTROLLER, |ctx: ControllerContext| async move {
        let controller_metrics = Arc::new(CronJobMetrics::new());
        ctx.metrics
            .with_registry(|registry| controller_metrics.register(registry));
        let controller = Arc::new(CronJobController::new(
            &ctx.factory,
            ctx.client.clone(),
            ctx.recorder(CRONJOB_CONTROLLER),
            CronJobControllerOptions {
                local: jiff::tz::TimeZone::system(),
                metrics: Some(ctx.workqueue_metrics()),
                controller_metrics: Some(controller_metrics),
            },
        ));
        let workers = ctx.options.cronjob.concurrent_cron_job_syncs as usize;
        Ok(Some(StartedController::new(
            controller.run(workers, ctx.cancel.clone()),
        )))
    })
    .with_aliases(CRONJOB.aliases)
}

/// `ttl-controller` (alias `ttl`): the Nodes informer, 5 workers (upstream's constant) on
/// queue `ttlcontroller`; keeps `node.alpha.kubernetes.io/ttl` on every Node.
pub fn ttl_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(TTL_CONTROLLER, |ctx: ControllerContext| async move {
        let controller = Arc::new(TtlController::new(
            &ctx.factory,
            ctx.client.clone(),
            TtlControllerOptions {
                metrics: Some(ctx.workqueue_metrics()),
            },
        ));
        Ok(Some(StartedController::new(
            controller.run(TTL_WORKERS, ctx.cancel.clone()),
        )))
    })
    .with_aliases(TTL.aliases)
}

/// `ttl-after-finished-controller` (alias `ttl-after-finished`): the Jobs informer,
/// `--concurrent-ttl-after-finished-syncs` workers on queue `ttl_jobs_to_delete`.
pub fn ttl_after_finished_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        TTL_AFTER_FINISHED_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller_metrics = Arc::new(TtlAfterFinishedMetrics::new());
            ctx.metrics
                .with_registry(|registry| controller_metrics.register(registry));
            let controller = Arc::new(TtlAfterFinishedController::new(
                &ctx.factory,
                ctx.client.clone(),
                TtlAfterFinishedControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                    controller_metrics: Some(controller_metrics),
                },
            ));
            let workers = ctx
                .options
                .ttl_after_finished
                .concurrent_ttl_after_finished_syncs as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(TTL_AFTER_FINISHED.aliases)
}

/// `disruption-controller` (alias `disruption`): the PodDisruptionBudget, Pods,
/// ReplicationControllers, ReplicaSets, Deployments and StatefulSets informers, upstream's one
/// worker on queue `disruption`.
pub fn disruption_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(DISRUPTION_CONTROLLER, |ctx: ControllerContext| async move {
        let controller = Arc::new(DisruptionController::new(
            &ctx.factory,
            ctx.client.clone(),
            ctx.recorder("controllermanager"),
            DisruptionControllerOptions {
                metrics: Some(ctx.workqueue_metrics()),
            },
        ));
        Ok(Some(StartedController::new(
            controller.run(ctx.cancel.clone()),
        )))
    })
    .with_aliases(DISRUPTION.aliases)
}

/// `resourcequota-controller` (alias `resourcequota`): the ResourceQuota, Pods, Services and
/// PersistentVolumeClaims informers, `--concurrent-resource-quota-syncs` workers on each of
/// its two queues, every quota recalculated each `--resource-quota-sync-period`.
pub fn resource_quota_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        RESOURCE_QUOTA_CONTROLLER,
        |ctx: ControllerContext| async move {
            let flags = &ctx.options.resource_quota;
            let controller = Arc::new(ResourceQuotaController::new(
                &ctx.factory,
                ctx.client.clone(),
                ResourceQuotaControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                    resync_period: flags.resource_quota_sync_period.get(),
                },
            ));
            let workers = flags.concurrent_resource_quota_syncs as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(RESOURCE_QUOTA.aliases)
}

/// `horizontal-pod-autoscaler-controller` (alias `horizontalpodautoscaling`): the HPA and
/// Pods informers, the resource metrics API and the targets' `scale` subresources,
/// `--concurrent-horizontal-pod-autoscaler-syncs` workers on queue `horizontalpodautoscaler`.
pub fn horizontal_pod_autoscaler_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        HORIZONTAL_POD_AUTOSCALER_CONTROLLER,
        |ctx: ControllerContext| async move {
            let flags = &ctx.options.hpa;
            let controller = Arc::new(HorizontalController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder("horizontal-pod-autoscaler"),
                HorizontalControllerOptions {
                    sync_period: flags.horizontal_pod_autoscaler_sync_period.get(),
                    downscale_stabilization: flags
                        .horizontal_pod_autoscaler_downscale_stabilization
                        .get(),
                    calculator: ReplicaCalculator {
                        tolerance: flags.horizontal_pod_autoscaler_tolerance,
                        cpu_initialization_period: flags
                            .horizontal_pod_autoscaler_cpu_initialization_period
                            .get(),
                        delay_of_initial_readiness_status: flags
                            .horizontal_pod_autoscaler_initial_readiness_delay
                            .get(),
                    },
                    metrics: Some(ctx.workqueue_metrics()),
                },
            ));
            let workers = flags.concurrent_horizontal_pod_autoscaler_syncs as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(HORIZONTAL_POD_AUTOSCALER.aliases)
}

/// `clusterrole-aggregation-controller` (alias `clusterrole-aggregation`): the ClusterRoles
/// informer, 5 workers (upstream's constant) on queue `ClusterRoleAggregator`.
pub fn clusterrole_aggregation_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        CLUSTERROLE_AGGREGATION_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(ClusterRoleAggregationController::new(
                &ctx.factory,
                ctx.client.clone(),
                Some(ctx.workqueue_metrics()),
            ));
            Ok(Some(StartedController::new(
                controller.run(AGGREGATION_WORKERS, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(CLUSTERROLE_AGGREGATION.aliases)
}

/// `pod-garbage-collector-controller` (alias `podgc`): the Pods and Nodes informers, a pass
/// every 20 s, `--terminated-pod-gc-threshold`.
pub fn pod_garbage_collector_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        POD_GARBAGE_COLLECTOR_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller_metrics = Arc::new(PodGcMetrics::new());
            ctx.metrics
                .with_registry(|registry| controller_metrics.register(registry));
            let controller = Arc::new(PodGcController::new(
                &ctx.factory,
                ctx.client.clone(),
                PodGcControllerOptions {
                    terminated_pod_threshold: ctx.options.podgc.terminated_pod_gc_threshold,
                    metrics: Some(ctx.workqueue_metrics()),
                    controller_metrics: Some(controller_metrics),
                    ..PodGcControllerOptions::default()
                },
            ));
            Ok(Some(StartedController::new(
                controller.run(ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(POD_GARBAGE_COLLECTOR.aliases)
}

/// `persistentvolumeclaim-protection-controller` (alias `pvc-protection`): the
/// PersistentVolumeClaims and Pods informers, one main worker and one namespace worker (upstream's
/// constant) on queue `pvcprotection`.
pub fn persistentvolumeclaim_protection_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        PERSISTENTVOLUMECLAIM_PROTECTION_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(PvcProtectionController::new(
                &ctx.factory,
                ctx.client.clone(),
                PvcProtectionControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                },
            ));
            Ok(Some(StartedController::new(controller.run(
                crate::volume::pvcprotection::WORKERS,
                ctx.cancel.clone(),
            ))))
        },
    )
    .with_aliases(PERSISTENTVOLUMECLAIM_PROTECTION.aliases)
}

/// `persistentvolume-protection-controller` (alias `pv-protection`): the PersistentVolumes
/// informer, one worker (upstream's constant) on queue `pvprotection`.
pub fn persistentvolume_protection_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        PERSISTENTVOLUME_PROTECTION_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(PvProtectionController::new(
                &ctx.factory,
                ctx.client.clone(),
                PvProtectionControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                },
            ));
            Ok(Some(StartedController::new(controller.run(
                crate::volume::pvprotection::WORKERS,
                ctx.cancel.clone(),
            ))))
        },
    )
    .with_aliases(PERSISTENTVOLUME_PROTECTION.aliases)
}

/// `volumeattributesclass-protection-controller`: the PersistentVolumeClaims, PersistentVolumes
/// and VolumeAttributesClasses informers, one worker (upstream's constant) on queue
/// `vacprotection`.
pub fn volumeattributesclass_protection_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        VOLUMEATTRIBUTESCLASS_PROTECTION_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(VacProtectionController::new(
                &ctx.factory,
                ctx.client.clone(),
                VacProtectionControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                },
            ));
            Ok(Some(StartedController::new(controller.run(
                crate::volume::vacprotection::WORKERS,
                ctx.cancel.clone(),
            ))))
        },
    )
}

/// `ephemeral-volume-controller` (alias `ephemeral-volume`): the Pods and PersistentVolumeClaims
/// informers, `--concurrent-ephemeralvolume-syncs` workers on queue `ephemeral_volume`; events
/// from `ephemeral_volume`.
pub fn ephemeral_volume_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        EPHEMERAL_VOLUME_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller_metrics = Arc::new(EphemeralVolumeMetrics::new());
            ctx.metrics
                .with_registry(|registry| controller_metrics.register(registry));
            let controller = Arc::new(EphemeralController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(crate::volume::ephemeral::EVENT_COMPONENT),
                EphemeralControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                    controller_metrics: Some(controller_metrics),
                },
            ));
            let workers = ctx
                .options
                .ephemeral_volume
                .concurrent_ephemeral_volume_syncs as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(EPHEMERAL_VOLUME.aliases)
}

/// `resourceclaim-controller` (alias `resource-claim-controller`): the Pods, ResourceClaims
/// and ResourceClaimTemplates informers, `--concurrent-resourceclaim-syncs` workers on queue
/// `resource_claim`, events from `resource_claim`; registers
/// `resourceclaim_controller_creates_total` and `resourceclaim_controller_resource_claims`.
pub fn resource_claim_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        RESOURCE_CLAIM_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller_metrics = Arc::new(ResourceClaimMetrics::new());
            let controller = Arc::new(ResourceClaimController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(crate::resourceclaim::EVENT_COMPONENT),
                ResourceClaimControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                    controller_metrics: Some(Arc::clone(&controller_metrics)),
                    features: crate::resourceclaim::Features::default(),
                },
            ));
            let claims = controller.claim_cache().clone();
            ctx.metrics.with_registry(|registry| {
                controller_metrics.register(registry);
                registry.register_collector(Box::new(ResourceClaimsCollector::new(claims)));
            });
            let workers = ctx.options.resource_claim.concurrent_resource_claim_syncs as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(RESOURCE_CLAIM.aliases)
}

/// `device-taint-eviction-controller`, gated by `DynamicResourceAllocation` and
/// `DRADeviceTaints` as upstream's descriptor: the Pods, ResourceClaims, ResourceSlices and
/// DeviceClasses informers (DeviceTaintRules too with `DRADeviceTaintRules`),
/// `--concurrent-device-taint-eviction-syncs` workers on queue
/// `device-taint-eviction-controller`, events from `device-taint-eviction-controller`;
/// registers `device_taint_eviction_controller_pod_deletions_total` and
/// `device_taint_eviction_controller_pod_deletion_duration_seconds`.
pub fn device_taint_eviction_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        DEVICE_TAINT_EVICTION_CONTROLLER,
        |ctx: ControllerContext| async move {
            let rules_enabled = ctx
                .options
                .feature_gates()
                .enabled(super::feature_gates::DRA_DEVICE_TAINT_RULES);
            let controller = DeviceTaintEvictionController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(crate::devicetainteviction::CONTROLLER_NAME),
                DeviceTaintEvictionOptions {
                    queue_metrics: Some(ctx.workqueue_metrics()),
                    rules_enabled,
                },
            );
            let metrics = controller.metrics().clone();
            ctx.metrics
                .with_registry(|registry| metrics.register(registry));
            let workers = ctx
                .options
                .device_taint_eviction
                .concurrent_device_taint_eviction_syncs as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(DEVICE_TAINT_EVICTION.aliases)
    .with_required_feature_gates(&[
        super::feature_gates::DYNAMIC_RESOURCE_ALLOCATION,
        super::feature_gates::DRA_DEVICE_TAINTS,
    ])
}

/// `service-lb-controller` (alias `service`): the Services and Nodes informers,
/// `--concurrent-service-syncs` workers on queue `service`, events from `service-controller`.
/// Skipped without a cloud or when the cloud has no load balancers, as upstream.
pub fn service_lb_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(SERVICE_LB_CONTROLLER, |ctx: ControllerContext| async move {
        let Some(cloud) = ctx.cloud.clone() else {
            tracing::info!("no cloud provider: services of type LoadBalancer get no load balancer");
            return Ok(None);
        };
        let Some(balancer) = cloud.load_balancer() else {
            tracing::error!(
                provider = cloud.provider_name(),
                "Failed to start service controller: the cloud provider does not support external load balancers"
            );
            return Ok(None);
        };
        let controller_metrics = Arc::new(ServiceLbMetrics::new());
        ctx.metrics
            .with_registry(|registry| controller_metrics.register(registry));
        let controller = Arc::new(ServiceLbController::new(
            &ctx.factory,
            ctx.client.clone(),
            balancer,
            ctx.recorder(crate::servicelb::EVENT_COMPONENT),
            ServiceLbControllerOptions {
                cluster_name: ctx.options.kube_cloud_shared.cluster_name.clone(),
                metrics: Some(ctx.workqueue_metrics()),
                controller_metrics: Some(controller_metrics),
            },
        ));
        let workers = ctx.options.service.concurrent_service_syncs.max(1) as usize;
        Ok(Some(StartedController::new(
            controller.run(workers, ctx.cancel.clone()),
        )))
    })
    .with_aliases(SERVICE_LB.aliases)
}

/// `service-cidr-controller`: the ServiceCIDRs and IPAddresses informers, 5 workers
/// (upstream's constant) on queue `ipaddresses`, events from `service-cidr-controller`.
pub fn service_cidr_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        SERVICE_CIDR_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(ServiceCidrController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(SERVICE_CIDR_CONTROLLER),
                ServiceCidrControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                },
            ));
            Ok(Some(StartedController::new(
                controller.run(crate::servicecidrs::WORKERS, ctx.cancel.clone()),
            )))
        },
    )
}

/// `bootstrap-signer-controller` (alias `bootstrapsigner`, disabled by default): the
/// ConfigMaps and Secrets informers, one worker on queue `bootstrap_signer_queue`; signs
/// `kube-public/cluster-info` with the bootstrap tokens.
pub fn bootstrap_signer_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        BOOTSTRAP_SIGNER_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(BootstrapSigner::new(
                &ctx.factory,
                ctx.client.clone(),
                Some(ctx.workqueue_metrics()),
            ));
            Ok(Some(StartedController::new(
                controller.run(ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(BOOTSTRAP_SIGNER.aliases)
    .disabled_by_default()
}

/// `token-cleaner-controller` (alias `tokencleaner`, disabled by default): the Secrets
/// informer, one worker on queue `token_cleaner`; deletes expired bootstrap tokens.
pub fn token_cleaner_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        TOKEN_CLEANER_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(TokenCleaner::new(
                &ctx.factory,
                ctx.client.clone(),
                Some(ctx.workqueue_metrics()),
            ));
            Ok(Some(StartedController::new(
                controller.run(ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(TOKEN_CLEANER.aliases)
    .disabled_by_default()
}

/// `legacy-serviceaccount-token-cleaner-controller` (alias
/// `legacy-service-account-token-cleaner`): the ServiceAccounts, Secrets and Pods informers, a
/// pass a day (upstream's `DefaultCleanerSyncInterval`) marking auto-generated legacy tokens
/// unused for `--legacy-service-account-token-clean-up-period` invalid and deleting those
/// invalid for as long again.
pub fn legacy_serviceaccount_token_cleaner_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        LEGACY_SERVICEACCOUNT_TOKEN_CLEANER_CONTROLLER,
        |ctx: ControllerContext| async move {
            let clean_up_period = ctx
                .options
                .legacy_sa_token_cleaner
                .legacy_service_account_token_clean_up_period
                .get();
            let controller = LegacyTokenCleaner::new(
                &ctx.factory,
                ctx.client.clone(),
                LegacyTokenCleanerOptions {
                    clean_up_period,
                    ..LegacyTokenCleanerOptions::default()
                },
            )
            .map_err(|e| format!("failed to init the legacy service account token cleaner: {e}"))?;
            Ok(Some(StartedController::new(
                Arc::new(controller).run(ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(LEGACY_SERVICEACCOUNT_TOKEN_CLEANER.aliases)
}

/// `validatingadmissionpolicy-status-controller`: the ValidatingAdmissionPolicies informer,
/// `--concurrent-validating-admission-policy-status-syncs` workers on queue
/// `validatingadmissionpolicy-status`; schemas from discovery and `/openapi/v3`.
pub fn validatingadmissionpolicy_status_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        VALIDATINGADMISSIONPOLICY_STATUS_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(ValidatingAdmissionPolicyStatusController::new(
                &ctx.factory,
                ctx.client.clone(),
                Some(ctx.workqueue_metrics()),
            ));
            let workers = ctx
                .options
                .validating_admission_policy_status
                .concurrent_validating_admission_policy_status_syncs
                .max(1) as usize;
            Ok(Some(StartedController::new(
                controller.run(workers, ctx.cancel.clone()),
            )))
        },
    )
}

/// `cloud-node-lifecycle-controller` (alias `cloud-node-lifecycle`): the Nodes informer, a
/// pass every `--node-monitor-period`. Skipped without a cloud, or when the cloud reports no
/// machines, as upstream.
pub fn cloud_node_lifecycle_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        CLOUD_NODE_LIFECYCLE_CONTROLLER,
        |ctx: ControllerContext| async move {
            let Some(cloud) = ctx.cloud.clone() else {
                return Ok(None);
            };
            let Some(instances) = cloud.instances() else {
                tracing::error!(
                    provider = cloud.provider_name(),
                    "failed to start cloud node lifecycle controller: cloud provider does not support instances"
                );
                return Ok(None);
            };
            let controller = Arc::new(CloudNodeLifecycleController::new(
                &ctx.factory,
                ctx.client.clone(),
                instances,
                ctx.recorder(crate::cloudnodelifecycle::EVENT_COMPONENT),
                ctx.options.node_lifecycle.node_monitor_period.0,
            ));
            Ok(Some(StartedController::new(
                controller.run(ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(CLOUD_NODE_LIFECYCLE.aliases)
}

/// `persistentvolume-binder-controller` (alias `persistentvolume-binder`): the
/// PersistentVolumes, PersistentVolumeClaims, StorageClasses and Pods informers, one worker per
/// queue (`claims`, `volumes`, upstream's constant), a resync every
/// `--pvclaimbinder-sync-period`; events from `persistentvolume-controller`.
pub fn persistentvolume_binder_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        PERSISTENTVOLUME_BINDER_CONTROLLER,
        |ctx: ControllerContext| async move {
            let flags = &ctx.options.persistentvolume_binder;
            let controller_metrics =
                Arc::new(crate::volume::persistentvolume::metrics::PvMetrics::new());
            let controller = Arc::new(
                crate::volume::persistentvolume::PersistentVolumeController::new(
                    &ctx.factory,
                    ctx.client.clone(),
                    ctx.recorder(crate::volume::persistentvolume::EVENT_COMPONENT),
                    crate::volume::persistentvolume::PersistentVolumeControllerOptions {
                        resync_period: flags.pvclaimbinder_sync_period.0,
                        enable_dynamic_provisioning: flags.enable_dynamic_provisioning,
                        metrics: Some(ctx.workqueue_metrics()),
                        controller_metrics: Some(Arc::clone(&controller_metrics)),
                    },
                ),
            );
            ctx.metrics.with_registry(|registry| {
                controller_metrics.register(registry);
                controller.register_state_metrics(registry);
            });
            Ok(Some(StartedController::new(
                controller.run(ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(PERSISTENTVOLUME_BINDER.aliases)
}

/// `persistentvolume-attach-detach-controller` (alias `attachdetach`): the Pods, Nodes,
/// PersistentVolumeClaims, PersistentVolumes, VolumeAttachments and CSIDrivers informers, the
/// reconciler every 100 ms, attached volumes re-checked every
/// `--attach-detach-reconcile-sync-period` unless `--disable-attach-detach-reconcile-sync`;
/// events from `attachdetach-controller`.
pub fn persistentvolume_attach_detach_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        PERSISTENTVOLUME_ATTACH_DETACH_CONTROLLER,
        |ctx: ControllerContext| async move {
            let flags = &ctx.options.attach_detach;
            let period = flags.attach_detach_reconcile_sync_period.0;
            crate::volume::attachdetach::reconciler::validate_reconcile_sync_period(period)?;
            let controller_metrics =
                Arc::new(crate::volume::attachdetach::metrics::AttachDetachMetrics::new());
            let controller = Arc::new(crate::volume::attachdetach::AttachDetachController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(crate::volume::attachdetach::EVENT_COMPONENT),
                crate::volume::attachdetach::AttachDetachControllerOptions {
                    reconcile_sync_period: flags.attach_detach_reconcile_sync_period.0,
                    disable_reconcile_sync: flags.disable_attach_detach_reconcile_sync,
                    metrics: Some(ctx.workqueue_metrics()),
                    controller_metrics: Some(Arc::clone(&controller_metrics)),
                },
            ));
            ctx.metrics.with_registry(|registry| {
                controller_metrics.register(registry);
                controller.register_state_metrics(registry);
            });
            Ok(Some(StartedController::new(
                controller.run(ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(PERSISTENTVOLUME_ATTACH_DETACH.aliases)
}

/// `persistentvolume-expander-controller` (alias `persistentvolume-expander`): the
/// PersistentVolumeClaims informer, upstream's ten workers; events from `volume_expand`.
pub fn persistentvolume_expander_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(
        PERSISTENTVOLUME_EXPANDER_CONTROLLER,
        |ctx: ControllerContext| async move {
            let controller = Arc::new(crate::volume::expand::ExpandController::new(
                &ctx.factory,
                ctx.client.clone(),
                ctx.recorder(crate::volume::expand::EVENT_COMPONENT),
                crate::volume::expand::ExpandControllerOptions {
                    metrics: Some(ctx.workqueue_metrics()),
                },
            ));
            Ok(Some(StartedController::new(
                controller.run(crate::volume::expand::WORKERS, ctx.cancel.clone()),
            )))
        },
    )
    .with_aliases(PERSISTENTVOLUME_EXPANDER.aliases)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The registry holds exactly the controllers of [`super::super::names`], with their
    /// aliases and defaults, so `--controllers`' help and validation agree.
    #[test]
    fn builtin_registers_exactly_the_names() {
        let registry = ControllerRegistry::builtin();
        let registered: BTreeSet<String> = registry.known_names();
        let named: BTreeSet<String> = BUILTIN_CONTROLLERS
            .iter()
            .chain(NOT_BUILT_CONTROLLERS.iter().map(|c| &c.names))
            .map(|c| c.name.to_owned())
            .collect();
        assert_eq!(registered, named);
        for pending in NOT_BUILT_CONTROLLERS {
            let descriptor = registry.get(pending.names.name).expect("registered");
            assert_eq!(descriptor.aliases(), pending.names.aliases);
            assert_eq!(
                descriptor.is_disabled_by_default(),
                pending.names.disabled_by_default
            );
            assert_eq!(
                descriptor.required_feature_gates(),
                pending.required_feature_gates
            );
            assert_eq!(descriptor.service_account(), None, "it makes no client");
        }
        for names in BUILTIN_CONTROLLERS {
            let descriptor = registry.get(names.name).expect("registered");
            assert_eq!(descriptor.aliases(), names.aliases, "{}", names.name);
            assert_eq!(
                descriptor.is_disabled_by_default(),
                names.disabled_by_default,
                "{}",
                names.name
            );
            assert_eq!(
                descriptor.service_account(),
                Some(names.service_account).filter(|sa| !sa.is_empty()),
                "{}",
                names.name
            );
        }
        registry
            .select(&["*"])
            .expect("the default selection is valid for the built-in controllers");
    }

    /// Under `--use-service-account-credentials` each controller acts as its service account;
    /// the API server's bootstrap policy must hold a `system:controller:<account>` role for it.
    #[test]
    fn every_service_account_has_its_bootstrap_controller_role() {
        use kcm_apiserver::auth::controller_policy::{
            CONTROLLER_ROLE_PREFIX, controller_namespaced_roles, controller_roles,
        };
        let roles: BTreeSet<String> = controller_roles()
            .iter()
            .chain(&controller_namespaced_roles())
            .filter_map(|r| r["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        for names in BUILTIN_CONTROLLERS
            .iter()
            .filter(|n| !n.service_account.is_empty())
        {
            let role = format!("{CONTROLLER_ROLE_PREFIX}{}", names.service_account);
            assert!(roles.contains(&role), "{}: no {role}", names.name);
        }
    }
}
