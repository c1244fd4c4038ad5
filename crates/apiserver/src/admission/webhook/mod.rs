//! Admission webhooks: the `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` plugins, which call the webhooks of the Mutating- and ValidatingWebhookConfigurations over HTTPS with an `AdmissionReview`, as upstream's `admission/plugin/webhook`.
//!
//! Start at [`mutating`] and [`validating`] (the two plugins). A request reaches a webhook
//! when one of its [`rules`] matches, its [`namespace_selector`] and [`object_selector`]
//! select the request, and its match conditions hold ([`dispatch::should_call`]). The
//! configurations come from the registry's watch cache and are compiled into [`hook::Hook`]s
//! once per generation ([`source`]). A call ([`dispatch::call`]) builds the [`review`], finds
//! the webhook (its URL, or a Service endpoint through [`resolver`]), posts it with the
//! [`client`] within `timeoutSeconds`, and checks the answer; [`errors`] has upstream's
//! texts for call errors (decided by `failurePolicy`) and denials.
//!
//! Mutating webhooks take part in upstream's reinvocation ([`crate::admission::reinvocation`]):
//! when one changes the object, the mutating phase runs a second round in which the
//! `reinvocationPolicy: IfNeeded` webhooks called before the change are called again.
//!
//! Not done: `matchPolicy: Equivalent` behaves as `Exact` (kcm serves each resource in one
//! version and has no converter for an equivalent one); audit annotations are dropped.

pub mod client;
pub mod dispatch;
pub mod errors;
pub mod hook;
pub mod mutating;
pub mod namespace_selector;
pub mod object_selector;
pub mod resolver;
pub mod review;
pub mod rules;
pub mod source;
pub mod validating;
pub mod verifier;

pub use mutating::MutatingWebhook;
pub use validating::ValidatingWebhook;
