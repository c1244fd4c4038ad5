//! The strategic merge patch metadata of the Kubernetes kinds, from the types' patch tags: the roots a [`ResourceDef`](crate::registry::resource::ResourceDef) names.
//!
//! Each entry mirrors a `patchStrategy`/`patchMergeKey` tag of k8s.io/api (core/v1,
//! apps/v1, batch/v1, policy/v1, meta/v1). Only tagged fields and the fields leading to
//! them are listed; untagged lists (tolerations, node taints, readinessGates, container
//! statuses, ...) are replaced whole, as upstream.

use super::schema::{TypeDef, field, merge_list, merge_list_retain_keys, replace, retain_keys};

const OPAQUE: &TypeDef = &TypeDef::OPAQUE;

/// meta/v1 ObjectMeta: finalizers are a set, owner references merge on `uid`.
static OBJECT_META: TypeDef = TypeDef {
    name: "ObjectMeta",
    fields: &[
        merge_list("finalizers", "", OPAQUE),
        merge_list("ownerReferences", "uid", OPAQUE),
    ],
    values: None,
};

/// core/v1 Container, and EphemeralContainer, which has the same tagged fields.
static CONTAINER: TypeDef = TypeDef {
    name: "Container",
    fields: &[
        merge_list("ports", "containerPort", OPAQUE),
        merge_list("env", "name", OPAQUE),
        merge_list("volumeMounts", "mountPath", OPAQUE),
        merge_list("volumeDevices", "devicePath", OPAQUE),
    ],
    values: None,
};

/// core/v1 PodSpec.
static POD_SPEC: TypeDef = TypeDef {
    name: "PodSpec",
    fields: &[
        merge_list_retain_keys("volumes", "name", OPAQUE),
        merge_list("initContainers", "name", &CONTAINER),
        merge_list("containers", "name", &CONTAINER),
        merge_list("ephemeralContainers", "name", &CONTAINER),
        merge_list("imagePullSecrets", "name", OPAQUE),
        merge_list("hostAliases", "ip", OPAQUE),
        merge_list("topologySpreadConstraints", "topologyKey", OPAQUE),
        merge_list("schedulingGates", "name", OPAQUE),
        merge_list_retain_keys("resourceClaims", "name", OPAQUE),
    ],
    values: None,
};

/// core/v1 PodStatus.
static POD_STATUS: TypeDef = TypeDef {
    name: "PodStatus",
    fields: &[
        merge_list("conditions", "type", OPAQUE),
        merge_list("podIPs", "ip", OPAQUE),
        merge_list("hostIPs", "ip", OPAQUE),
        merge_list_retain_keys("resourceClaimStatuses", "name", OPAQUE),
    ],
    values: None,
};

/// core/v1 PodTemplateSpec.
static POD_TEMPLATE_SPEC: TypeDef = TypeDef {
    name: "PodTemplateSpec",
    fields: &[field("metadata", &OBJECT_META), field("spec", &POD_SPEC)],
    values: None,
};

/// Any status whose only tagged field is `conditions` merged on `type`: Namespace, Service,
/// ReplicaSet, Deployment, DaemonSet, StatefulSet, Job, PodDisruptionBudget,
/// ReplicationController.
static CONDITIONS_STATUS: TypeDef = TypeDef {
    name: "Status",
    fields: &[merge_list("conditions", "type", OPAQUE)],
    values: None,
};

/// A workload spec whose only tagged path is its pod template.
static TEMPLATED_SPEC: TypeDef = TypeDef {
    name: "WorkloadSpec",
    fields: &[field("template", &POD_TEMPLATE_SPEC)],
    values: None,
};

/// apps/v1 DeploymentSpec: `strategy` is tagged `retainKeys`.
static DEPLOYMENT_SPEC: TypeDef = TypeDef {
    name: "DeploymentSpec",
    fields: &[
        field("template", &POD_TEMPLATE_SPEC),
        retain_keys("strategy", OPAQUE),
    ],
    values: None,
};

/// core/v1 Pod.
pub static POD: TypeDef = TypeDef {
    name: "Pod",
    fields: &[
        field("metadata", &OBJECT_META),
        field("spec", &POD_SPEC),
        field("status", &POD_STATUS),
    ],
    values: None,
};

/// core/v1 PodTemplate.
pub static POD_TEMPLATE: TypeDef = TypeDef {
    name: "PodTemplate",
    fields: &[
        field("metadata", &OBJECT_META),
        field("template", &POD_TEMPLATE_SPEC),
    ],
    values: None,
};

/// apps/v1 Deployment.
pub static DEPLOYMENT: TypeDef = TypeDef {
    name: "Deployment",
    fields: &[
        field("metadata", &OBJECT_META),
        field("spec", &DEPLOYMENT_SPEC),
        field("status", &CONDITIONS_STATUS),
    ],
    values: None,
};

/// ReplicaSet, DaemonSet, StatefulSet, Job, ReplicationController.
pub static TEMPLATED_WORKLOAD: TypeDef = TypeDef {
    name: "Workload",
    fields: &[
        field("metadata", &OBJECT_META),
        field("spec", &TEMPLATED_SPEC),
        field("status", &CONDITIONS_STATUS),
    ],
    values: None,
};

/// batch/v1 JobTemplateSpec.
static JOB_TEMPLATE_SPEC: TypeDef = TypeDef {
    name: "JobTemplateSpec",
    fields: &[
        field("metadata", &OBJECT_META),
        field("spec", &TEMPLATED_SPEC),
    ],
    values: None,
};

/// batch/v1 CronJob.
pub static CRON_JOB: TypeDef = TypeDef {
    name: "CronJob",
    fields: &[
        field("metadata", &OBJECT_META),
        field(
            "spec",
            &TypeDef {
                name: "CronJobSpec",
                fields: &[field("jobTemplate", &JOB_TEMPLATE_SPEC)],
                values: None,
            },
        ),
    ],
    values: None,
};

/// core/v1 Node.
pub static NODE: TypeDef = TypeDef {
    name: "Node",
    fields: &[
        field("metadata", &OBJECT_META),
        field(
            "spec",
            &TypeDef {
                name: "NodeSpec",
                fields: &[merge_list("podCIDRs", "", OPAQUE)],
                values: None,
            },
        ),
        field(
            "status",
            &TypeDef {
                name: "NodeStatus",
                fields: &[
                    merge_list("conditions", "type", OPAQUE),
                    merge_list("addresses", "type", OPAQUE),
                ],
                values: None,
            },
        ),
    ],
    values: None,
};

/// core/v1 Service.
pub static SERVICE: TypeDef = TypeDef {
    name: "Service",
    fields: &[
        field("metadata", &OBJECT_META),
        field(
            "spec",
            &TypeDef {
                name: "ServiceSpec",
                fields: &[merge_list("ports", "port", OPAQUE)],
                values: None,
            },
        ),
        field("status", &CONDITIONS_STATUS),
    ],
    values: None,
};

/// Namespace: metadata and status conditions.
pub static NAMESPACE: TypeDef = TypeDef {
    name: "Namespace",
    fields: &[
        field("metadata", &OBJECT_META),
        field("status", &CONDITIONS_STATUS),
    ],
    values: None,
};

/// policy/v1 PodDisruptionBudget.
pub static POD_DISRUPTION_BUDGET: TypeDef = TypeDef {
    name: "PodDisruptionBudget",
    fields: &[
        field("metadata", &OBJECT_META),
        field(
            "spec",
            &TypeDef {
                name: "PodDisruptionBudgetSpec",
                fields: &[replace("selector", OPAQUE)],
                values: None,
            },
        ),
        field("status", &CONDITIONS_STATUS),
    ],
    values: None,
};

/// core/v1 ServiceAccount.
pub static SERVICE_ACCOUNT: TypeDef = TypeDef {
    name: "ServiceAccount",
    fields: &[
        field("metadata", &OBJECT_META),
        merge_list("secrets", "name", OPAQUE),
    ],
    values: None,
};

// ---- Issue 17b: admissionregistration, storage, networking, apiregistration ----

/// admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration and
/// MutatingWebhookConfiguration: webhooks merge on `name`.
pub static WEBHOOK_CONFIGURATION: TypeDef = TypeDef {
    name: "WebhookConfiguration",
    fields: &[
        field("metadata", &OBJECT_META),
        merge_list("webhooks", "name", OPAQUE),
    ],
    values: None,
};

/// storage.k8s.io/v1 CSINode: drivers merge on `name`.
pub static CSI_NODE: TypeDef = TypeDef {
    name: "CSINode",
    fields: &[
        field("metadata", &OBJECT_META),
        field(
            "spec",
            &TypeDef {
                name: "CSINodeSpec",
                fields: &[merge_list("drivers", "name", OPAQUE)],
                values: None,
            },
        ),
    ],
    values: None,
};

/// Kinds whose only tagged fields besides ObjectMeta are `status.conditions` merged on
/// `type`: PersistentVolumeClaim, autoscaling/v2 HorizontalPodAutoscaler,
/// networking.k8s.io/v1 ServiceCIDR, apiregistration.k8s.io/v1 APIService.
pub static STATUS_CONDITIONS: TypeDef = TypeDef {
    name: "ObjectWithConditions",
    fields: &[
        field("metadata", &OBJECT_META),
        field("status", &CONDITIONS_STATUS),
    ],
    values: None,
};

/// Kinds whose only tagged fields are in ObjectMeta: ConfigMap, Secret, Event, Lease,
/// Endpoints, EndpointSlice, ControllerRevision, PersistentVolumeClaim, ...
pub static METADATA_ONLY: TypeDef = TypeDef {
    name: "Object",
    fields: &[field("metadata", &OBJECT_META)],
    values: None,
};

#[cfg(test)]
mod tests {
    use super::super::schema::{Schema, Strategy};
    use super::*;

    /// Follows `path` (field names; list fields step into their element type) and returns
    /// the metadata of the last field.
    fn lookup(schema: Schema, path: &[&str]) -> (Strategy, &'static str) {
        let mut ty = schema.root();
        let mut meta = ty.field(path[0]);
        for name in path {
            meta = ty.field(name);
            ty = meta.ty;
        }
        (meta.strategy, meta.merge_key)
    }

    #[test]
    fn table_matches_upstream_tags() {
        struct Case {
            name: &'static str,
            schema: Schema,
            path: &'static [&'static str],
            want: (Strategy, &'static str),
        }
        let merge = |key| (Strategy::Merge, key);
        let default = (Strategy::Default, "");
        let cases = [
            Case {
                name: "pod containers by name",
                schema: Schema::new(&POD),
                path: &["spec", "containers"],
                want: merge("name"),
            },
            Case {
                name: "container ports by containerPort",
                schema: Schema::new(&POD),
                path: &["spec", "containers", "ports"],
                want: merge("containerPort"),
            },
            Case {
                name: "init container env by name",
                schema: Schema::new(&POD),
                path: &["spec", "initContainers", "env"],
                want: merge("name"),
            },
            Case {
                name: "volume mounts by mountPath",
                schema: Schema::new(&POD),
                path: &["spec", "ephemeralContainers", "volumeMounts"],
                want: merge("mountPath"),
            },
            Case {
                name: "volume devices by devicePath",
                schema: Schema::new(&POD),
                path: &["spec", "containers", "volumeDevices"],
                want: merge("devicePath"),
            },
            Case {
                name: "tolerations replaced",
                schema: Schema::new(&POD),
                path: &["spec", "tolerations"],
                want: default,
            },
            Case {
                name: "pod conditions by type",
                schema: Schema::new(&POD),
                path: &["status", "conditions"],
                want: merge("type"),
            },
            Case {
                name: "finalizers as a set",
                schema: Schema::new(&METADATA_ONLY),
                path: &["metadata", "finalizers"],
                want: merge(""),
            },
            Case {
                name: "owner references by uid",
                schema: Schema::new(&TEMPLATED_WORKLOAD),
                path: &["metadata", "ownerReferences"],
                want: merge("uid"),
            },
            Case {
                name: "deployment template containers",
                schema: Schema::new(&DEPLOYMENT),
                path: &["spec", "template", "spec", "containers"],
                want: merge("name"),
            },
            Case {
                name: "template metadata finalizers",
                schema: Schema::new(&TEMPLATED_WORKLOAD),
                path: &["spec", "template", "metadata", "finalizers"],
                want: merge(""),
            },
            Case {
                name: "job template volumes",
                schema: Schema::new(&TEMPLATED_WORKLOAD),
                path: &["spec", "template", "spec", "volumes"],
                want: merge("name"),
            },
            Case {
                name: "cronjob job template containers",
                schema: Schema::new(&CRON_JOB),
                path: &[
                    "spec",
                    "jobTemplate",
                    "spec",
                    "template",
                    "spec",
                    "containers",
                ],
                want: merge("name"),
            },
            Case {
                name: "node addresses by type",
                schema: Schema::new(&NODE),
                path: &["status", "addresses"],
                want: merge("type"),
            },
            Case {
                name: "node taints replaced, as upstream (no patch tag)",
                schema: Schema::new(&NODE),
                path: &["spec", "taints"],
                want: default,
            },
            Case {
                name: "service ports by port",
                schema: Schema::new(&SERVICE),
                path: &["spec", "ports"],
                want: merge("port"),
            },
            Case {
                name: "pdb selector replaced",
                schema: Schema::new(&POD_DISRUPTION_BUDGET),
                path: &["spec", "selector"],
                want: (Strategy::Replace, ""),
            },
            Case {
                name: "daemonset conditions by type",
                schema: Schema::new(&TEMPLATED_WORKLOAD),
                path: &["status", "conditions"],
                want: merge("type"),
            },
            Case {
                name: "lease fields default",
                schema: Schema::new(&METADATA_ONLY),
                path: &["spec", "holderIdentity"],
                want: default,
            },
            Case {
                name: "claim conditions by type",
                schema: Schema::new(&STATUS_CONDITIONS),
                path: &["status", "conditions"],
                want: merge("type"),
            },
            Case {
                name: "hpa metrics replaced (atomic)",
                schema: Schema::new(&STATUS_CONDITIONS),
                path: &["spec", "metrics"],
                want: default,
            },
            Case {
                name: "unknown kind replaces lists",
                schema: Schema::unknown(),
                path: &["metadata", "finalizers"],
                want: default,
            },
        ];
        for case in cases {
            assert_eq!(lookup(case.schema, case.path), case.want, "{}", case.name);
        }
    }
}
