#!/usr/bin/env python3
"""Generates schema_gen.rs: the wire layout of the Kubernetes protobuf messages kcm decodes.

The tables come from two crates already in the dependency tree:
  - k8s-pb (prost code generated from Kubernetes' generated.proto files): field tags and
    wire types, message nesting;
  - k8s-openapi: the JSON name of every field (its serde field mapping).
and from the list below of Go pointer fields, whose zero values are meaningful (the proto
encoding always carries value fields, zero or not, so zeros of non-pointer fields are
dropped to produce the JSON Go would produce). Zeros of the scalar fields k8s-openapi
makes required (not `Option`) are kept too: Go writes those fields without `omitempty`.

Warnings on stderr: `fallback` (a protobuf field k8s-openapi does not know, named by
camel-casing) and `no protobuf field` (a k8s-openapi field k8s-pb does not carry, so its
value in a protobuf body cannot be read).

Run from the repository root (the output is final: rustfmt leaves it as it is):
  python3 crates/apiserver/src/protobuf/generate.py > crates/apiserver/src/protobuf/schema_gen.rs
"""
import glob
import os
import re
import sys

REGISTRY = glob.glob(os.path.expanduser("~/.cargo/registry/src/*/"))[0]
PB = os.path.join(REGISTRY, "k8s-pb-0.9.0/src")
OPENAPI = os.path.join(REGISTRY, "k8s-openapi-0.29.0/src/v1_36")

# (apiVersion, kind) -> message the Unknown envelope's raw bytes hold.
# Every entry of resources::ALL needs its root here (resources::tests::every_entry_is_complete
# fails otherwise); the other roots are subresource kinds and kinds served next.
ROOTS = [
    ("v1", "Pod", "api.core.v1.Pod"),
    ("v1", "Namespace", "api.core.v1.Namespace"),
    ("v1", "ConfigMap", "api.core.v1.ConfigMap"),
    ("v1", "Secret", "api.core.v1.Secret"),
    ("v1", "Service", "api.core.v1.Service"),
    ("v1", "ServiceAccount", "api.core.v1.ServiceAccount"),
    ("v1", "Endpoints", "api.core.v1.Endpoints"),
    ("v1", "Node", "api.core.v1.Node"),
    ("v1", "Event", "api.core.v1.Event"),
    ("v1", "ReplicationController", "api.core.v1.ReplicationController"),
    ("v1", "PodTemplate", "api.core.v1.PodTemplate"),
    ("v1", "Binding", "api.core.v1.Binding"),
    ("v1", "PersistentVolumeClaim", "api.core.v1.PersistentVolumeClaim"),
    ("apps/v1", "Deployment", "api.apps.v1.Deployment"),
    ("apps/v1", "ReplicaSet", "api.apps.v1.ReplicaSet"),
    ("apps/v1", "DaemonSet", "api.apps.v1.DaemonSet"),
    ("apps/v1", "StatefulSet", "api.apps.v1.StatefulSet"),
    ("apps/v1", "ControllerRevision", "api.apps.v1.ControllerRevision"),
    ("batch/v1", "Job", "api.batch.v1.Job"),
    ("batch/v1", "CronJob", "api.batch.v1.CronJob"),
    ("policy/v1", "Eviction", "api.policy.v1.Eviction"),
    ("policy/v1", "PodDisruptionBudget", "api.policy.v1.PodDisruptionBudget"),
    ("coordination.k8s.io/v1", "Lease", "api.coordination.v1.Lease"),
    ("autoscaling/v1", "Scale", "api.autoscaling.v1.Scale"),
    ("events.k8s.io/v1", "Event", "api.events.v1.Event"),
    ("discovery.k8s.io/v1", "EndpointSlice", "api.discovery.v1.EndpointSlice"),
    # Issue 17, part a: the core/v1, apps, batch, autoscaling, scheduling and node kinds
    # served next to the ones above (RC, PodTemplate, Binding, PVC, ControllerRevision, Job
    # and CronJob are listed already).
    ("v1", "PersistentVolume", "api.core.v1.PersistentVolume"),
    ("v1", "ResourceQuota", "api.core.v1.ResourceQuota"),
    ("v1", "LimitRange", "api.core.v1.LimitRange"),
    ("v1", "ComponentStatus", "api.core.v1.ComponentStatus"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "api.autoscaling.v2.HorizontalPodAutoscaler"),
    ("autoscaling/v1", "HorizontalPodAutoscaler", "api.autoscaling.v1.HorizontalPodAutoscaler"),
    ("scheduling.k8s.io/v1", "PriorityClass", "api.scheduling.v1.PriorityClass"),
    ("node.k8s.io/v1", "RuntimeClass", "api.node.v1.RuntimeClass"),
    # DeleteOptions is registered in every group version; "*" matches any apiVersion.
    ("*", "DeleteOptions", "apimachinery.pkg.apis.meta.v1.DeleteOptions"),
] + [
    # ---- Issue 17b: RBAC, networking, storage, certificates, admissionregistration,
    # flowcontrol, apiregistration and the review APIs ----
    ("rbac.authorization.k8s.io/v1", "Role", "api.rbac.v1.Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "api.rbac.v1.RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "api.rbac.v1.ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "api.rbac.v1.ClusterRoleBinding"),
    ("networking.k8s.io/v1", "Ingress", "api.networking.v1.Ingress"),
    ("networking.k8s.io/v1", "IngressClass", "api.networking.v1.IngressClass"),
    ("networking.k8s.io/v1", "NetworkPolicy", "api.networking.v1.NetworkPolicy"),
    ("networking.k8s.io/v1", "IPAddress", "api.networking.v1.IPAddress"),
    ("networking.k8s.io/v1", "ServiceCIDR", "api.networking.v1.ServiceCIDR"),
    ("storage.k8s.io/v1", "StorageClass", "api.storage.v1.StorageClass"),
    ("storage.k8s.io/v1", "CSIDriver", "api.storage.v1.CSIDriver"),
    ("storage.k8s.io/v1", "CSINode", "api.storage.v1.CSINode"),
    ("storage.k8s.io/v1", "CSIStorageCapacity", "api.storage.v1.CSIStorageCapacity"),
    ("storage.k8s.io/v1", "VolumeAttachment", "api.storage.v1.VolumeAttachment"),
    ("certificates.k8s.io/v1", "CertificateSigningRequest",
     "api.certificates.v1.CertificateSigningRequest"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration",
     "api.admissionregistration.v1.ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration",
     "api.admissionregistration.v1.MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy",
     "api.admissionregistration.v1.ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding",
     "api.admissionregistration.v1.ValidatingAdmissionPolicyBinding"),
    # k8s-pb 0.9 predates the v1 mutating policies; v1 copied v1beta1's messages tag for
    # tag (and their JSON names), so v1 bodies decode with v1beta1's layout.
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy",
     "api.admissionregistration.v1beta1.MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding",
     "api.admissionregistration.v1beta1.MutatingAdmissionPolicyBinding"),
    # The kinds v1.36 serves by default beyond those (resource.k8s.io since v1.34).
    ("storage.k8s.io/v1", "VolumeAttributesClass", "api.storage.v1.VolumeAttributesClass"),
    ("resource.k8s.io/v1", "DeviceClass", "api.resource.v1.DeviceClass"),
    ("resource.k8s.io/v1", "ResourceClaim", "api.resource.v1.ResourceClaim"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate", "api.resource.v1.ResourceClaimTemplate"),
    ("resource.k8s.io/v1", "ResourceSlice", "api.resource.v1.ResourceSlice"),
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", "api.flowcontrol.v1.FlowSchema"),
    ("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration",
     "api.flowcontrol.v1.PriorityLevelConfiguration"),
    ("apiregistration.k8s.io/v1", "APIService",
     "kube_aggregator.pkg.apis.apiregistration.v1.APIService"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition",
     "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"),
    ("authentication.k8s.io/v1", "SelfSubjectReview", "api.authentication.v1.SelfSubjectReview"),
    ("authentication.k8s.io/v1", "TokenReview", "api.authentication.v1.TokenReview"),
    ("authentication.k8s.io/v1", "TokenRequest", "api.authentication.v1.TokenRequest"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview",
     "api.authorization.v1.SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview",
     "api.authorization.v1.SelfSubjectRulesReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview", "api.authorization.v1.SubjectAccessReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview",
     "api.authorization.v1.LocalSubjectAccessReview"),
]

# Messages with a JSON form of their own.
SPECIAL = {
    "apimachinery.pkg.apis.meta.v1.Time": "Time",
    "apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime",
    "apimachinery.pkg.apis.meta.v1.FieldsV1": "RawJson",
    "apimachinery.pkg.runtime.RawExtension": "RawJson",
    "apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
    "apimachinery.pkg.api.resource.Quantity": "Quantity",
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.Json": "Json",
}

# Messages whose JSON is not an object but built from their fields (Go types with a
# MarshalJSON of their own): the message is in the tables, its fields read by tag.
WRAPPERS = {
    "api.authentication.v1.ExtraValue": "List",
    "api.authorization.v1.ExtraValue": "List",
    "api.certificates.v1.ExtraValue": "List",
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrArray": "PropsOrArray",
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrBool": "PropsOrBool",
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrStringArray":
        "PropsOrStringArray",
}

# JSON names the two crates' Rust names do not pair up (k8s-openapi's `$ref` is `ref_path`).
JSON_NAMES = {
    ("apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps", "ref"): "$ref",
}

# Go pointer fields (scalars) of the messages above: their zero values are kept.
POINTERS = {
    "apimachinery.pkg.apis.meta.v1.ObjectMeta": ["deletionGracePeriodSeconds"],
    "apimachinery.pkg.apis.meta.v1.OwnerReference": ["controller", "blockOwnerDeletion"],
    "apimachinery.pkg.apis.meta.v1.DeleteOptions": [
        "gracePeriodSeconds", "orphanDependents", "propagationPolicy",
        "ignoreStoreReadErrorWithClusterBreakingPotential"],
    "apimachinery.pkg.apis.meta.v1.Preconditions": ["uid", "resourceVersion"],
    "apimachinery.pkg.apis.meta.v1.ListMeta": ["remainingItemCount"],
    "api.core.v1.PodSpec": [
        "terminationGracePeriodSeconds", "activeDeadlineSeconds",
        "automountServiceAccountToken", "shareProcessNamespace", "priority",
        "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "setHostnameAsFQDN",
        "hostUsers", "hostnameOverride"],
    "api.core.v1.SecurityContext": [
        "privileged", "runAsUser", "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem",
        "allowPrivilegeEscalation", "procMount"],
    "api.core.v1.PodSecurityContext": [
        "runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup", "fsGroupChangePolicy",
        "supplementalGroupsPolicy", "seLinuxChangePolicy"],
    "api.core.v1.WindowsSecurityContextOptions": [
        "gmsaCredentialSpecName", "gmsaCredentialSpec", "runAsUserName", "hostProcess"],
    "api.core.v1.SeccompProfile": ["localhostProfile"],
    "api.core.v1.AppArmorProfile": ["localhostProfile"],
    "api.core.v1.Container": ["restartPolicy"],
    "api.core.v1.EphemeralContainerCommon": ["restartPolicy"],
    "api.core.v1.VolumeMount": ["recursiveReadOnly", "mountPropagation"],
    "api.core.v1.Probe": ["terminationGracePeriodSeconds"],
    "api.core.v1.GRPCAction": ["service"],
    "api.core.v1.ConfigMapKeySelector": ["optional"],
    "api.core.v1.SecretKeySelector": ["optional"],
    "api.core.v1.ConfigMapEnvSource": ["optional"],
    "api.core.v1.SecretEnvSource": ["optional"],
    "api.core.v1.ConfigMapVolumeSource": ["defaultMode", "optional"],
    "api.core.v1.SecretVolumeSource": ["defaultMode", "optional"],
    "api.core.v1.KeyToPath": ["mode"],
    "api.core.v1.ProjectedVolumeSource": ["defaultMode"],
    "api.core.v1.DownwardAPIVolumeSource": ["defaultMode"],
    "api.core.v1.DownwardAPIVolumeFile": ["mode"],
    "api.core.v1.ConfigMapProjection": ["optional"],
    "api.core.v1.SecretProjection": ["optional"],
    "api.core.v1.ServiceAccountTokenProjection": ["expirationSeconds"],
    "api.core.v1.CSIVolumeSource": ["readOnly", "fsType"],
    "api.core.v1.HostPathVolumeSource": ["type"],
    "api.core.v1.Toleration": ["tolerationSeconds"],
    "api.core.v1.TopologySpreadConstraint": ["minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy"],
    "api.core.v1.PodDNSConfigOption": ["value"],
    "api.core.v1.ServiceSpec": [
        "allocateLoadBalancerNodePorts", "loadBalancerClass", "ipFamilyPolicy",
        "internalTrafficPolicy", "trafficDistribution"],
    "api.core.v1.ClientIPConfig": ["timeoutSeconds"],
    "api.core.v1.ServicePort": ["appProtocol"],
    "api.core.v1.EndpointPort": ["appProtocol"],
    "api.core.v1.EndpointAddress": ["nodeName"],
    "api.core.v1.LoadBalancerIngress": ["ipMode"],
    "api.core.v1.ConfigMap": ["immutable"],
    "api.core.v1.Secret": ["immutable"],
    "api.core.v1.ServiceAccount": ["automountServiceAccountToken"],
    "api.core.v1.ReplicationControllerSpec": ["replicas"],
    "api.core.v1.ContainerStatus": ["started"],
    "api.core.v1.PersistentVolumeClaimSpec": [
        "storageClassName", "volumeMode", "volumeAttributesClassName"],
    "api.core.v1.PodResourceClaim": ["resourceClaimName", "resourceClaimTemplateName"],
    "api.apps.v1.DeploymentSpec": ["replicas", "revisionHistoryLimit", "progressDeadlineSeconds"],
    "api.apps.v1.ReplicaSetSpec": ["replicas"],
    "api.apps.v1.DaemonSetSpec": ["revisionHistoryLimit"],
    "api.apps.v1.StatefulSetSpec": ["replicas", "revisionHistoryLimit"],
    "api.apps.v1.RollingUpdateStatefulSetStrategy": ["partition"],
    "api.apps.v1.DeploymentStatus": ["collisionCount"],
    "api.apps.v1.DaemonSetStatus": ["collisionCount"],
    "api.apps.v1.StatefulSetStatus": ["collisionCount"],
    "api.batch.v1.JobSpec": [
        "parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
        "backoffLimitPerIndex", "maxFailedIndexes", "ttlSecondsAfterFinished",
        "completionMode", "suspend", "manualSelector", "podReplacementPolicy", "managedBy"],
    "api.batch.v1.CronJobSpec": [
        "timeZone", "startingDeadlineSeconds", "suspend", "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit"],
    "api.batch.v1.JobStatus": ["ready", "terminating", "failedIndexes"],
    "api.batch.v1.PodFailurePolicyOnExitCodesRequirement": ["containerName"],
    "api.policy.v1.PodDisruptionBudgetSpec": ["unhealthyPodEvictionPolicy"],
    "api.coordination.v1.LeaseSpec": [
        "holderIdentity", "leaseDurationSeconds", "leaseTransitions", "strategy",
        "preferredHolder"],
    "api.events.v1.Event": [],
    # Issue 17, part a.
    "api.core.v1.PersistentVolumeSpec": ["volumeMode", "volumeAttributesClassName"],
    "api.core.v1.LocalVolumeSource": ["fsType"],
    "api.core.v1.AzureDiskVolumeSource": ["cachingMode", "fsType", "readOnly", "kind"],
    "api.core.v1.ISCSIPersistentVolumeSource": ["initiatorName"],
    "api.core.v1.FCVolumeSource": ["lun"],
    "api.core.v1.ReplicationControllerStatus": [],
    "api.autoscaling.v1.HorizontalPodAutoscalerSpec": [
        "minReplicas", "targetCPUUtilizationPercentage"],
    "api.autoscaling.v1.HorizontalPodAutoscalerStatus": [
        "observedGeneration", "currentCPUUtilizationPercentage"],
    "api.autoscaling.v2.HorizontalPodAutoscalerSpec": ["minReplicas"],
    "api.autoscaling.v2.HorizontalPodAutoscalerStatus": ["observedGeneration"],
    "api.autoscaling.v2.MetricTarget": ["averageUtilization"],
    "api.autoscaling.v2.MetricValueStatus": ["averageUtilization"],
    "api.autoscaling.v2.HPAScalingRules": ["stabilizationWindowSeconds", "selectPolicy"],
    "api.scheduling.v1.PriorityClass": ["preemptionPolicy"],
    # ---- Issue 17b ----
    "api.networking.v1.IngressSpec": ["ingressClassName"],
    "api.networking.v1.HTTPIngressPath": ["pathType"],
    "api.networking.v1.IngressClassParametersReference": ["apiGroup", "scope", "namespace"],
    "api.networking.v1.NetworkPolicyPort": ["protocol", "endPort"],
    "api.networking.v1.IngressPortStatus": ["error"],
    "api.storage.v1.StorageClass": ["reclaimPolicy", "allowVolumeExpansion", "volumeBindingMode"],
    "api.storage.v1.CSIDriverSpec": [
        "attachRequired", "podInfoOnMount", "storageCapacity", "fsGroupPolicy",
        "requiresRepublish", "seLinuxMount", "nodeAllocatableUpdatePeriodSeconds"],
    "api.storage.v1.TokenRequest": ["expirationSeconds"],
    "api.storage.v1.VolumeNodeResources": ["count"],
    "api.storage.v1.VolumeAttachmentSource": ["persistentVolumeName"],
    "api.storage.v1.VolumeError": ["errorCode"],
    "api.discovery.v1.Endpoint": ["hostname", "nodeName", "zone"],
    "api.discovery.v1.EndpointConditions": ["ready", "serving", "terminating"],
    "api.discovery.v1.EndpointPort": ["name", "protocol", "port", "appProtocol"],
    "api.certificates.v1.CertificateSigningRequestSpec": ["expirationSeconds"],
    "api.admissionregistration.v1.ValidatingWebhook": [
        "failurePolicy", "matchPolicy", "sideEffects", "timeoutSeconds"],
    "api.admissionregistration.v1.MutatingWebhook": [
        "failurePolicy", "matchPolicy", "sideEffects", "timeoutSeconds", "reinvocationPolicy"],
    "api.admissionregistration.v1.WebhookClientConfig": ["url"],
    "api.admissionregistration.v1.ServiceReference": ["path", "port"],
    "api.admissionregistration.v1.Rule": ["scope"],
    "api.admissionregistration.v1.ValidatingAdmissionPolicySpec": ["failurePolicy"],
    "api.admissionregistration.v1.MatchResources": ["matchPolicy"],
    "api.admissionregistration.v1.ParamRef": ["parameterNotFoundAction"],
    "api.admissionregistration.v1.Validation": ["reason"],
    "api.admissionregistration.v1beta1.MutatingAdmissionPolicySpec": ["failurePolicy"],
    "api.admissionregistration.v1beta1.MatchResources": ["matchPolicy"],
    "api.admissionregistration.v1beta1.ParamRef": ["parameterNotFoundAction"],
    "api.resource.v1.ResourceSliceSpec": ["nodeName", "allNodes", "perDeviceNodeSelection"],
    "api.resource.v1.ExactDeviceRequest": ["adminAccess"],
    "api.resource.v1.DeviceSubRequest": [],
    "api.flowcontrol.v1.LimitedPriorityLevelConfiguration": [
        "nominalConcurrencyShares", "lendablePercent", "borrowingLimitPercent"],
    "api.flowcontrol.v1.ExemptPriorityLevelConfiguration": [
        "nominalConcurrencyShares", "lendablePercent"],
    "kube_aggregator.pkg.apis.apiregistration.v1.ServiceReference": ["port"],
    # apiextensions.k8s.io/v1.
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion": [
        "deprecationWarning"],
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceSubresourceScale": [
        "labelSelectorPath"],
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.WebhookClientConfig": ["url"],
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.ServiceReference": ["path", "port"],
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps": [
        "$ref", "maximum", "minimum", "maxLength", "minLength", "maxItems", "minItems",
        "multipleOf", "maxProperties", "minProperties", "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-list-type", "x-kubernetes-map-type"],
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.ValidationRule": [
        "reason", "optionalOldSelf"],
}


# Fields Go embeds (`json:",inline"`): their members are members of the parent in JSON.
INLINE = {
    ("api.core.v1.Volume", "volume_source"),
    ("api.core.v1.EphemeralContainer", "ephemeral_container_common"),
    ("api.core.v1.Probe", "handler"),
    # Issue 17b.
    ("api.networking.v1.IngressRule", "ingress_rule_value"),
    ("api.admissionregistration.v1.RuleWithOperations", "rule"),
    ("api.admissionregistration.v1.NamedRuleWithOperations", "rule_with_operations"),
    ("api.admissionregistration.v1beta1.NamedRuleWithOperations", "rule_with_operations"),
    ("api.core.v1.PersistentVolumeSpec", "persistent_volume_source"),
    ("api.resource.v1.DeviceClassConfiguration", "device_configuration"),
    ("api.resource.v1.DeviceClaimConfiguration", "device_configuration"),
    ("api.resource.v1.DeviceAllocationConfiguration", "device_configuration"),
}

# Messages that exist only inlined: their JSON names are those of the embedding type.
EMBEDDED_IN = {
    "VolumeSource": "Volume",
    "EphemeralContainerCommon": "EphemeralContainer",
    "ProbeHandler": "Probe",
    # Issue 17b.
    "IngressRuleValue": "IngressRule",
    "Rule": "RuleWithOperations",
    "PersistentVolumeSource": "PersistentVolumeSpec",
    "DeviceConfiguration": "DeviceClassConfiguration",
}


def key(name):
    """Rust field and struct names as both crates may spell them (pod_cid_rs, pod_cidrs)."""
    return name.replace("_", "").lower()


def snake(name):
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def camel(snake_name):
    parts = snake_name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def parse_pb():
    """{full message name: [(tag, rust field, attr, type text)]}"""
    messages = {}
    for path in glob.glob(os.path.join(PB, "**/mod.rs"), recursive=True):
        module = os.path.relpath(os.path.dirname(path), PB).split(os.sep)
        lines = open(path).read().split("\n")
        i = 0
        while i < len(lines):
            m = re.match(r"pub struct (\w+) \{(\})?", lines[i])
            if not m:
                i += 1
                continue
            name = ".".join(module + [m.group(1)])
            if m.group(2):
                messages[name] = (module, [])
                i += 1
                continue
            fields = []
            i += 1
            attr = None
            while not lines[i].startswith("}"):
                line = lines[i].strip()
                if line.startswith("#[prost("):
                    attr = line[len("#[prost("):-2]
                    i += 1
                    continue
                fm = re.match(r"pub (r#)?(\w+):(.*)", line)
                if fm and attr is not None:
                    text = fm.group(3)
                    depth = text.count("<") - text.count(">")
                    while depth > 0 or not text.rstrip().endswith(","):
                        i += 1
                        text += lines[i].strip()
                        depth = text.count("<") - text.count(">")
                    tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
                    fields.append((tag, fm.group(2), attr, text))
                    attr = None
                i += 1
            messages[name] = (module, fields)
            i += 1
    return messages


def resolve(module, type_text):
    """The full name of the message a field's Rust type refers to."""
    inner = re.sub(r"\s+", "", type_text).rstrip(",").replace(",>", ">")
    for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<",
                    "::prost::alloc::boxed::Box<"):
        if inner.startswith(wrapper):
            inner = inner[len(wrapper):-1]
    if "BTreeMap<" in inner:
        inner = inner.split("BTreeMap<", 1)[1][:-1]
        inner = inner.split(",", 1)[1].strip()
    parts = inner.split("::")
    mod = list(module)
    while parts and parts[0] == "super":
        mod.pop()
        parts.pop(0)
    return ".".join(mod + parts)


def openapi_names():
    """{(module dir, struct): ({rust field: json name}, {json names of required scalars})}"""
    out = {}
    for path in glob.glob(os.path.join(OPENAPI, "**/*.rs"), recursive=True):
        text = open(path).read()
        m = re.search(r"pub struct (\w+) \{(.*?)\n\}", text, re.S)
        if not m:
            continue
        module = tuple(os.path.relpath(os.path.dirname(path), OPENAPI).split(os.sep))
        pairs = dict(
            (key(rust.rstrip("_")), json)
            for json, rust in re.findall(r'"([\w$-]+)" => Field::Key_(\w+),', text)
        )
        required = set(
            pairs.get(key(rust.rstrip("_")))
            for rust, ty in re.findall(r"^    pub (\w+): ([\w:]+),$", m.group(2), re.M)
            if ty in ("bool", "i32", "i64", "f64", "std::string::String")
        )
        out[(module, key(m.group(1)))] = (pairs, required)
    return out


def main():
    pb = parse_pb()
    names = openapi_names()
    order = []
    seen = set()
    queue = [root for _, _, root in ROOTS]
    while queue:
        name = queue.pop(0)
        if name in seen or name in SPECIAL:
            continue
        seen.add(name)
        order.append(name)
        module, fields = pb[name]
        for tag, field, attr, text in fields:
            if attr.startswith("message") or "message" in attr.split(",")[1:2] or 'message"' in attr:
                queue.append(resolve(module, text))
    index = {name: i for i, name in enumerate(order)}

    def kind(module, attr, text):
        scalar = attr.split(",")[0].strip()
        if scalar.startswith("btree_map"):
            value = re.search(r'"string, (\w+)"', attr).group(1)
            if value == "message":
                return "Kind::Map(&%s)" % kind(module, "message", text)
            return "Kind::Map(&%s)" % {"string": "Kind::String", "bytes": "Kind::Bytes"}[value]
        if scalar == "message":
            target = resolve(module, text)
            if target in SPECIAL:
                return "Kind::" + SPECIAL[target]
            if target in WRAPPERS:
                return "Kind::Wrapped(%d, Wrapper::%s)" % (index[target], WRAPPERS[target])
            return "Kind::Message(%d)" % index[target]
        return {
            "string": "Kind::String",
            "bool": "Kind::Bool",
            "int32": "Kind::Int32",
            "int64": "Kind::Int64",
            "double": "Kind::Double",
            'bytes = "vec"': "Kind::Bytes",
        }[scalar]

    print("//! Generated by generate.py from k8s-pb 0.9 (field tags) and k8s-openapi 0.29, v1_36")
    print("//! (JSON names): the wire layout of the messages kcm decodes. Do not edit.")
    print()
    print("use super::schema::{Field, Kind, Message, Wrapper};")
    print()
    print("#[rustfmt::skip]")
    print("pub(super) static MESSAGES: [Message; %d] = [" % len(order))
    for name in order:
        module, fields = pb[name]
        struct = name.split(".")[-1]
        struct = EMBEDDED_IN.get(struct, struct)
        json_names, required = names.get((tuple(module), key(struct)), ({}, set()))
        pointers = set(POINTERS.get(name, [])) | required
        pb_json = set()
        print("    Message {")
        print('        name: "k8s.io.%s",' % name)
        print("        fields: &[")
        for tag, field, attr, text in sorted(fields):
            json = JSON_NAMES.get((name, field)) or json_names.get(key(field))
            if (name, field) in INLINE or field == "local_object_reference":
                json = ""
            elif name in WRAPPERS:
                json = camel(field)
            elif json is None:
                json = camel(field)
                print("fallback: %s.%s -> %s" % (name, field, json), file=sys.stderr)
            pb_json.add(json)
            is_repeated = "repeated" in attr
            print(
                '            Field { tag: %d, json: "%s", kind: %s, repeated: %s, keep_zero: %s },'
                % (tag, json, kind(module, attr, text), "true" if is_repeated else "false",
                   "true" if json in pointers else "false")
            )
        print("        ],")
        print("    },")
        # Inlined members and the messages that are inlined share JSON names: skip both.
        if struct == name.split(".")[-1] and not any(
                f[1] == "local_object_reference" or (name, f[1]) in INLINE for f in fields):
            for json in sorted(set(json_names.values()) - pb_json - {"apiVersion", "kind"}):
                print("no protobuf field: %s.%s" % (name, json), file=sys.stderr)
    print("];")
    print()
    print("/// (apiVersion, kind, message): what an envelope's `raw` holds; `*` is any apiVersion.")
    print("#[rustfmt::skip]")
    print("pub(super) static ROOTS: &[(&str, &str, u16)] = &[")
    for api_version, kind_name, root in ROOTS:
        print('    ("%s", "%s", %d),' % (api_version, kind_name, index[root]))
    print("];")
    def json_of(m, field):
        struct = EMBEDDED_IN.get(m.split(".")[-1], m.split(".")[-1])
        return (JSON_NAMES.get((m, field))
                or names.get((tuple(pb[m][0]), key(struct)), ({}, set()))[0].get(key(field))
                or camel(field))
    missing = [(m, f) for m, fs in POINTERS.items() if m in index
               for f in fs if f not in [json_of(m, x[1]) for x in pb[m][1]]]
    if missing:
        print("unknown pointer fields: %s" % missing, file=sys.stderr)
        sys.exit(1)


main()
