//! The served resources: one declarative [`ResourceDef`] entry per group/version/resource, listed in [`ALL`].
//!
//! # Adding a resource
//!
//! A resource is one `static` entry built from its k8s-openapi type, in its API group's file
//! here (`rbac.rs`, `batch.rs`, ...), plus one line in [`ALL`]. For a resource with no
//! behaviour of its own (most of them):
//!
//! ```
//! # use k8s_openapi::api::rbac::v1::Role;
//! # use kcm_apiserver::registry::resource::ResourceDef;
//! # use kcm_apiserver::strategic_merge::kinds;
//! # use kcm_apiserver::table::printers;
//! /// rbac.authorization.k8s.io/v1 roles.
//! pub static ROLES: ResourceDef = ResourceDef::of::<Role>()
//!     .printer(printers::GENERIC)
//!     .merge_schema(&kinds::METADATA_ONLY);
//! # assert_eq!(ROLES.storage_root(), "/registry/rbac.authorization.k8s.io/roles/");
//! ```
//!
//! [`ResourceDef::of`] reads the group, version, kind, plural (`URL_PATH_SEGMENT`) and scope
//! from the type, serves the eight verbs, stores objects under `/registry/{group}/{plural}/`
//! (`core` for the core group) and decodes bodies as the type (unknown fields dropped, wrong
//! types a 400). The OpenAPI schema and strict field validation come from the type as well.
//! Then say what the type cannot:
//!
//! - `.short_names(&["cm"])`, `.categories(&["all"])`: discovery (upstream's
//!   `ShortNames()` / `Categories()` of the resource's REST storage).
//! - `.subresources(&[Subresource::Status, Subresource::Scale])`: `/status` splits spec
//!   from status (the main resource keeps the stored status, `/status` the stored spec);
//!   `/scale` serves autoscaling/v1 Scale over `spec.replicas`. A subresource of a new kind
//!   (`serviceaccounts/token`) is a new [`Subresource`](crate::registry::subresource::Subresource)
//!   variant and a registry file, as `/binding` and `/eviction` are.
//! - `.fields(&[SelectableField::string("spec.nodeName", "/spec/nodeName")])`: field
//!   selectors beyond `metadata.name` / `metadata.namespace` (upstream's `GetAttrs`).
//! - `.printer(printers::X)`: the `kubectl get` columns, from [`crate::table::printers`]
//!   (upstream's `pkg/printers/internalversion`); a kind upstream has no printer for
//!   (Roles, ClusterRoles) says so with `printers::GENERIC`, upstream's default convertor
//!   (NAME, CREATED AT). Printers read the stored form.
//! - `.merge_schema(&kinds::X)`: the strategic merge patch tags, from
//!   [`crate::strategic_merge::kinds`]; a kind whose only tags are in `ObjectMeta` uses
//!   `kinds::METADATA_ONLY`. A new tagged type gets its `TypeDef` there.
//! - `.verbs(Verbs::READ_ONLY)`: a resource that is not written through the API; discovery,
//!   the OpenAPI paths and the handlers follow.
//! - `.computed(&X)`: a read-only resource whose objects are computed on every read from a
//!   [`ServerView`](crate::registry::computed::ServerView) (the store, the component probes,
//!   the served group versions), never stored: `componentstatuses`
//!   ([`component_status::ComponentStatuses`]).
//! - `.bootstrap(objects)`: objects every cluster starts with, created at start when missing
//!   (the system priority classes, [`priority_class::system_priority_classes`]).
//! - `.deprecated("v1 ComponentStatus is deprecated in v1.19+")`: every answer about the
//!   resource carries that `Warning`, as upstream's deprecated APIs.
//! - The connect subresources (`Subresource::Log`, `Exec`, `Attach`, `PortForward`, `Proxy`)
//!   are listed in discovery as upstream lists them and answer a `400` saying why simulated
//!   nodes cannot serve them (`registry::connect`).
//! - `.transient()`: a create-only resource that is never stored (the review APIs,
//!   `selfsubjectaccessreviews`): its create decodes, runs the strategy's `validate` and
//!   then its `prepare_for_create`, which fills `status`, and answers with the result.
//! - `.stored_as("autoscaling", "horizontalpodautoscalers", conversion)`: a version that is
//!   not the stored one (autoscaling/v1 next to v2, events.k8s.io/v1 next to core/v1 events)
//!   converts to and from the stored version's form with two functions. Every version is
//!   its own entry; list the preferred version first in [`ALL`] (discovery prefers the first
//!   version of a group it meets).
//!
//! Every entry must declare a printer and a merge schema: `every_entry_is_complete` below
//! fails otherwise, and checks that each entry is unique, has an OpenAPI schema and decodes
//! from protobuf.
//!
//! # When a resource needs a strategy file
//!
//! Behaviour beyond the generic rules goes in a [`Strategy`](crate::registry::strategy::Strategy)
//! implementation, in the resource's own file (as upstream's `pkg/registry/<group>/<resource>/strategy.go`),
//! named in the entry with `.strategy(&XStrategy)`:
//!
//! - scheme defaults (`SetDefaults_*`): a `decode` function written with
//!   [`typed_roundtrip`](crate::registry::strategy::typed_roundtrip), named with
//!   `.decode_with(decode)`;
//! - validation (`Validate`, `ValidateUpdate`, `ValidateStatusUpdate`) beyond object metadata;
//! - create/update preparation (`PrepareForCreate`: reset status, start a phase;
//!   `PrepareForUpdate`: bump the generation, keep immutable parts) — a resource with
//!   `/status` whose create drops the status, as most controllers' objects, is
//!   [`policy::PdbStrategy`]'s shape;
//! - a name rule other than a DNS subdomain, graceful deletion, answering a delete with the
//!   object, create-on-update (endpoints and events share [`simple::CreateOnUpdate`]);
//! - orphaning dependents on a delete that names no policy (batch/v1 Jobs, core/v1
//!   ReplicationControllers), refusing to delete some objects (the system priority classes).
//!
//! A version stored as another (autoscaling/v1 HPAs as v2) gets a strategy that validates
//! the converted form, since upstream validates the internal form ([`hpa::HpaStrategy`]).
//!
//! What no strategy can express — work across resources or on the store, such as allocating
//! Service cluster IPs, namespace lifecycle, evictions against PodDisruptionBudgets, the
//! `bindings` collection, the Priority admission plugin — lives in the registry
//! (`registry::service_ip`, `registry::namespace`, `registry::eviction`, `registry::binding`,
//! `registry::priority`), which names the entry it serves (`&service::SERVICES`).

pub mod apps;
pub mod autoscaling;
pub mod batch;
pub mod component_status;
pub mod container_resources;
pub mod core;
pub mod cronjob;
pub mod event;
pub mod hpa;
pub mod hpa_conversion;
pub mod job;
pub mod limit_range;
pub mod metrics;
pub mod namespace;
pub mod node;
pub mod persistent_volume;
pub mod persistent_volume_claim;
pub mod pod;
pub mod pod_defaults;
pub mod policy;
pub mod priority_class;
pub mod quantities;
pub mod replication_controller;
pub mod resource;
pub mod resource_claim;
pub mod resource_quota;
pub mod resource_slice;
pub mod scheduling;
pub mod service;
pub mod simple;

// Issue 17b: RBAC, networking, storage, discovery, certificates, admissionregistration,
// flowcontrol, apiregistration and the review APIs.
pub mod admission_policy;
pub mod admissionregistration;
pub mod apiextensions;
pub mod apiregistration;
pub mod authentication;
pub mod authorization;
pub mod certificates;
pub mod csi;
pub mod csr;
pub mod discovery;
pub mod endpoint_slice;
pub mod flowcontrol;
pub mod flowcontrol_bootstrap;
pub mod go_values;
pub mod ingress;
pub mod ingress_class;
pub mod label_selector;
pub mod mutating_admission_policy;
pub mod net;
pub mod network_policy;
pub mod networking;
pub mod rbac;
pub mod review;
pub mod role;
pub mod role_binding;
pub mod service_cidr;
pub mod storage;
pub mod storage_class;
pub mod volume_attachment;
pub mod volume_attributes_class;
pub mod webhook;
pub mod zero_times;

use crate::registry::resource::ResourceDef;

/// Every served resource, in discovery order.
pub static ALL: &[&ResourceDef] = &[
    &namespace::NAMESPACES,
    &pod::PODS,
    &core::NODES,
    &event::CORE_EVENTS,
    &core::CONFIGMAPS,
    &core::SECRETS,
    &service::SERVICES,
    &core::SERVICEACCOUNTS,
    &core::ENDPOINTS,
    // core/v1 (issue 17, part a).
    &core::BINDINGS,
    &core::COMPONENT_STATUSES,
    &core::LIMIT_RANGES,
    &core::PERSISTENT_VOLUME_CLAIMS,
    &core::PERSISTENT_VOLUMES,
    &core::POD_TEMPLATES,
    &core::REPLICATION_CONTROLLERS,
    &core::RESOURCE_QUOTAS,
    &apps::DEPLOYMENTS,
    &apps::REPLICASETS,
    &apps::STATEFULSETS,
    &apps::DAEMONSETS,
    &apps::CONTROLLER_REVISIONS,
    // autoscaling: v2 first, the preferred version.
    &autoscaling::HPAS_V2,
    &autoscaling::HPAS_V1,
    &batch::JOBS,
    &batch::CRONJOBS,
    &policy::LEASES,
    &event::EVENTS_V1,
    &policy::PDBS,
    &scheduling::PRIORITY_CLASSES,
    &node::RUNTIME_CLASSES,
    // Issue 17b.
    &rbac::ROLES,
    &rbac::ROLE_BINDINGS,
    &rbac::CLUSTER_ROLES,
    &rbac::CLUSTER_ROLE_BINDINGS,
    &networking::INGRESSES,
    &networking::INGRESS_CLASSES,
    &networking::NETWORK_POLICIES,
    &networking::IP_ADDRESSES,
    &networking::SERVICE_CIDRS,
    &storage::STORAGE_CLASSES,
    &storage::CSI_DRIVERS,
    &storage::CSI_NODES,
    &storage::CSI_STORAGE_CAPACITIES,
    &storage::VOLUME_ATTACHMENTS,
    &storage::VOLUME_ATTRIBUTES_CLASSES,
    &discovery::ENDPOINT_SLICES,
    &certificates::CERTIFICATE_SIGNING_REQUESTS,
    &admissionregistration::VALIDATING_WEBHOOK_CONFIGURATIONS,
    &admissionregistration::MUTATING_WEBHOOK_CONFIGURATIONS,
    &admissionregistration::VALIDATING_ADMISSION_POLICIES,
    &admissionregistration::VALIDATING_ADMISSION_POLICY_BINDINGS,
    &admissionregistration::MUTATING_ADMISSION_POLICIES,
    &admissionregistration::MUTATING_ADMISSION_POLICY_BINDINGS,
    // resource.k8s.io/v1 (Dynamic Resource Allocation, v1.34).
    &resource::DEVICE_CLASSES,
    &resource::RESOURCE_CLAIMS,
    &resource::RESOURCE_CLAIM_TEMPLATES,
    &resource::RESOURCE_SLICES,
    &flowcontrol::FLOW_SCHEMAS,
    &flowcontrol::PRIORITY_LEVEL_CONFIGURATIONS,
    &apiregistration::API_SERVICES,
    // Issue 18: custom resources.
    &apiextensions::CUSTOM_RESOURCE_DEFINITIONS,
    &authentication::SELF_SUBJECT_REVIEWS,
    &authentication::TOKEN_REVIEWS,
    &authorization::SELF_SUBJECT_ACCESS_REVIEWS,
    &authorization::SELF_SUBJECT_RULES_REVIEWS,
    &authorization::SUBJECT_ACCESS_REVIEWS,
    &authorization::LOCAL_SUBJECT_ACCESS_REVIEWS,
    &metrics::NODE_METRICS,
    &metrics::POD_METRICS,
];

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::openapi::schemas::Components;

    #[test]
    fn every_entry_is_complete() {
        let created = "2024-05-01T11:00:00Z";
        for (i, def) in ALL.iter().enumerate() {
            let gvr = (&*def.group, &*def.version, &*def.plural);
            assert!(
                ALL[i + 1..]
                    .iter()
                    .all(|other| (&*other.group, &*other.version, &*other.plural) != gvr),
                "{gvr:?} is registered twice"
            );
            assert!(
                def.declares_printer(),
                "{gvr:?}: no printer (name printers::GENERIC for NAME and CREATED AT)"
            );
            let obj = json!({"metadata": {"name": "x", "creationTimestamp": created}});
            let table = crate::table::table_for(
                def.table_printer(),
                std::slice::from_ref(&obj),
                crate::table::IncludeObject::None,
                jiff::Timestamp::UNIX_EPOCH,
            );
            assert_eq!(
                table["rows"][0]["cells"].as_array().map(Vec::len),
                Some(def.table_printer().columns().len()),
                "{gvr:?}: the printer fills every column"
            );
            assert!(
                def.declares_merge_schema(),
                "{gvr:?}: no strategic merge schema (kinds::METADATA_ONLY when only ObjectMeta is tagged)"
            );
            assert_eq!(
                def.openapi.map(|k| (k.group, k.version, k.kind)),
                Some((&*def.group, &*def.version, &*def.kind)),
                "{gvr:?}: the OpenAPI kind is the entry's"
            );
            let mut components = Components::new();
            let component = components.add_kind(&def.openapi.expect("typed"));
            assert!(
                components.finish()[&component]["properties"]["metadata"].is_object(),
                "{gvr:?}: no OpenAPI schema {component}"
            );
            // Computed resources are never written, so no body of theirs is ever decoded.
            assert!(
                def.computed_by().is_some()
                    || crate::protobuf::decodes(&def.api_version(), &def.kind),
                "{gvr:?}: no protobuf root (add it to protobuf/generate.py and regenerate)"
            );
        }
    }

    #[test]
    fn entries_decode_as_their_type() {
        for def in ALL {
            let obj = json!({"apiVersion": def.api_version(), "kind": def.kind,
                "metadata": {"name": "x"}, "bogus": 1});
            let decoded = def
                .decode(obj)
                .unwrap_or_else(|e| panic!("{}: {e}", def.plural));
            assert_eq!(decoded["metadata"]["name"], "x", "{}", def.plural);
            assert_eq!(decoded.get("bogus"), None::<&Value>, "{}", def.plural);
        }
    }
}
