//! admissionregistration.k8s.io/v1 validatingwebhookconfigurations, mutatingwebhookconfigurations, validatingadmissionpolicies (+status), validatingadmissionpolicybindings, mutatingadmissionpolicies, mutatingadmissionpolicybindings.
//!
//! The objects are defaulted, validated and stored as kube-apiserver stores them; the webhook
//! configurations are called by the admission chain's webhook plugins
//! ([`crate::admission::webhook`]), the policies by [`crate::admission::validating_policy`]
//! and [`crate::admission::mutating_policy`].

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, MutatingWebhookConfiguration,
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, ValidatingWebhookConfiguration,
};

use crate::registry::generation::Generation;
use crate::registry::resource::ResourceDef;
use crate::registry::subresource::Subresource;
use crate::resources::admission_policy::{self, BindingStrategy, PolicyStrategy};
use crate::resources::mutating_admission_policy;
use crate::resources::webhook::{self, WebhookConfigurationStrategy};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// The category `kubectl get api-extensions` lists.
const API_EXTENSIONS: &[&str] = &["api-extensions"];

/// admissionregistration.k8s.io/v1 validatingwebhookconfigurations.
pub static VALIDATING_WEBHOOK_CONFIGURATIONS: ResourceDef =
    ResourceDef::of::<ValidatingWebhookConfiguration>()
        .generation(Generation::Field("webhooks"))
        .categories(API_EXTENSIONS)
        .decode_with(webhook::decode_validating)
        .strategy(&WebhookConfigurationStrategy { mutating: false })
        .printer(printers::WEBHOOK_CONFIGURATION)
        .merge_schema(&kinds::WEBHOOK_CONFIGURATION);

/// admissionregistration.k8s.io/v1 mutatingwebhookconfigurations.
pub static MUTATING_WEBHOOK_CONFIGURATIONS: ResourceDef =
    ResourceDef::of::<MutatingWebhookConfiguration>()
        .generation(Generation::Field("webhooks"))
        .categories(API_EXTENSIONS)
        .decode_with(webhook::decode_mutating)
        .strategy(&WebhookConfigurationStrategy { mutating: true })
        .printer(printers::WEBHOOK_CONFIGURATION)
        .merge_schema(&kinds::WEBHOOK_CONFIGURATION);

/// admissionregistration.k8s.io/v1 validatingadmissionpolicies.
pub static VALIDATING_ADMISSION_POLICIES: ResourceDef =
    ResourceDef::of::<ValidatingAdmissionPolicy>()
        .generation(Generation::Spec)
        .categories(API_EXTENSIONS)
        .subresources(&[Subresource::Status])
        .decode_with(admission_policy::decode_policy)
        .strategy(&PolicyStrategy)
        .printer(printers::VALIDATING_ADMISSION_POLICY)
        .merge_schema(&kinds::METADATA_ONLY);

/// admissionregistration.k8s.io/v1 validatingadmissionpolicybindings.
pub static VALIDATING_ADMISSION_POLICY_BINDINGS: ResourceDef =
    ResourceDef::of::<ValidatingAdmissionPolicyBinding>()
        .generation(Generation::Spec)
        .categories(API_EXTENSIONS)
        .decode_with(admission_policy::decode_binding)
        .strategy(&BindingStrategy)
        .printer(printers::VALIDATING_ADMISSION_POLICY_BINDING)
        .merge_schema(&kinds::METADATA_ONLY);

/// admissionregistration.k8s.io/v1 mutatingadmissionpolicies (v1 has no status).
pub static MUTATING_ADMISSION_POLICIES: ResourceDef = ResourceDef::of::<MutatingAdmissionPolicy>()
    .generation(Generation::Spec)
    .categories(API_EXTENSIONS)
    .decode_with(mutating_admission_policy::decode_policy)
    .strategy(&mutating_admission_policy::PolicyStrategy)
    .printer(printers::MUTATING_ADMISSION_POLICY)
    .merge_schema(&kinds::METADATA_ONLY);

/// admissionregistration.k8s.io/v1 mutatingadmissionpolicybindings.
pub static MUTATING_ADMISSION_POLICY_BINDINGS: ResourceDef =
    ResourceDef::of::<MutatingAdmissionPolicyBinding>()
        .generation(Generation::Spec)
        .categories(API_EXTENSIONS)
        .decode_with(mutating_admission_policy::decode_binding)
        .strategy(&mutating_admission_policy::BindingStrategy)
        .printer(printers::MUTATING_ADMISSION_POLICY_BINDING)
        .merge_schema(&kinds::METADATA_ONLY);
