//! The `MutatingAdmissionWebhook` plugin: matching mutating webhooks called one after another in the mutating phase, in configuration order, each seeing the previous ones' patches; a JSON patch answered is applied and the object defaulted again, as upstream's `mutatingDispatcher`.

use async_trait::async_trait;
use serde_json::Value;

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::match_conditions::FailurePolicy;
use crate::admission::source::ObjectSource;
use crate::admission::webhook::dispatch::{self, add_warnings, new_uid};
use crate::admission::webhook::errors::{self, Error};
use crate::admission::webhook::hook::Hook;
use crate::admission::webhook::review::Response;
use crate::admission::webhook::rules;
use crate::admission::webhook::source::HookSource;
use crate::error::{ApiError, Result};
use crate::resources::admissionregistration::MUTATING_WEBHOOK_CONFIGURATIONS;

/// The plugin's upstream name.
pub const NAME: &str = "MutatingAdmissionWebhook";

/// Calls the MutatingWebhookConfigurations' webhooks.
#[derive(Debug)]
pub struct MutatingWebhook {
    /// The configured webhooks, compiled once per configuration generation.
    hooks: HookSource,
}

impl Default for MutatingWebhook {
    fn default() -> Self {
        Self {
            hooks: HookSource::new(&MUTATING_WEBHOOK_CONFIGURATIONS),
        }
    }
}

#[async_trait]
impl Plugin for MutatingWebhook {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, _: Operation) -> bool {
        true
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn admit(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if rules::is_exempt(a) {
            return Ok(());
        }
        let hooks = self.hooks.hooks(source).await?;
        if hooks.is_empty() {
            return Ok(());
        }
        if a.reinvocation.is_reinvoke()
            && a.reinvocation
                .webhooks
                .output_changed_since_last(a.object.as_ref())
        {
            // In-tree plugins changed the object in the second round: every IfNeeded webhook
            // called so far sees it again.
            a.reinvocation
                .webhooks
                .require_reinvoking_previously_invoked();
        }
        let result = dispatch_all(&hooks, source, a).await;
        let output = a.object.take();
        a.reinvocation.webhooks.set_last_output(output.as_ref());
        a.object = output;
        result
    }
}

/// Calls each matching webhook in order (in the second round, only those to reinvoke).
async fn dispatch_all(
    hooks: &[std::sync::Arc<Hook>],
    source: &dyn ObjectSource,
    a: &mut Attributes<'_>,
) -> Result<()> {
    for hook in hooks {
        let uid = new_uid();
        let request = a.admission_request(&uid);
        if !dispatch::should_call(hook, a, source, &request).await? {
            continue;
        }
        // A webhook is never called for the first time in the second round.
        if a.reinvocation.is_reinvoke() && !a.reinvocation.webhooks.should_reinvoke(&hook.uid) {
            continue;
        }
        let result = dispatch::call(hook, a, source, request, &uid, true).await;
        let outcome = match result {
            Ok(response) => apply(hook, a, response),
            Err(e @ Error::Calling { .. }) if hook.failure_policy == FailurePolicy::Ignore => {
                tracing::warn!(webhook = %hook.name, error = %e, "Failed calling webhook, failing open");
                Ok(false)
            }
            Err(e) => {
                tracing::warn!(webhook = %hook.name, error = %e, "mutating webhook refused the request");
                Err(e.into_api_error())
            }
        };
        if let Ok(true) = outcome {
            // The object changed: the IfNeeded webhooks before this one are now outdated.
            a.reinvocation
                .webhooks
                .require_reinvoking_previously_invoked();
            a.reinvocation.set_should_reinvoke();
        }
        if hook.reinvoke_if_needed {
            a.reinvocation.webhooks.add_reinvocable(&hook.uid);
        }
        outcome?;
    }
    Ok(())
}

/// Applies one webhook's answer to the request: its warnings, its denial, or its patch;
/// whether the object changed.
fn apply(hook: &Hook, a: &mut Attributes<'_>, response: Response) -> Result<bool> {
    add_warnings(a, response.warnings);
    if !response.allowed {
        return Err(errors::denied(
            &hook.name,
            a.resource.group_resource(),
            a.name,
            response.status.as_ref(),
        )
        .into_api_error());
    }
    let Some(patch) = response.patch else {
        return Ok(false);
    };
    let patch: json_patch::Patch = serde_json::from_slice(&patch).map_err(|e| {
        Error::calling(
            &hook.name,
            format!("received undecodable patch in webhook response: {e}"),
        )
        .into_api_error()
    })?;
    if patch.0.is_empty() {
        return Ok(false);
    }
    let Some(object) = a.object.as_ref() else {
        return Err(ApiError::internal(format!(
            "admission webhook \"{}\" attempted to modify the object, which is not supported for this operation",
            hook.name
        )));
    };
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch).map_err(ApiError::internal)?;
    // The patched object must still be the same kind (upstream decodes it into the
    // request's type), and gets the scheme's defaults again.
    let kind_of = |o: &Value| (o.get("apiVersion").cloned(), o.get("kind").cloned());
    if kind_of(&patched) != kind_of(object) {
        return Err(ApiError::internal(format!(
            "admission webhook \"{}\" changed the object's apiVersion or kind",
            hook.name
        )));
    }
    let patched = a.resource.decode(patched).map_err(ApiError::internal)?;
    let changed = a.object.as_ref() != Some(&patched);
    if changed {
        a.mark_patched();
    }
    a.object = Some(patched);
    Ok(changed)
}
