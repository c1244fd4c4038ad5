//! The `ValidatingAdmissionWebhook` plugin: every matching validating webhook called in parallel in the validating phase; any denial (or a call error under `failurePolicy: Fail`) refuses the request, as upstream's `validatingDispatcher`.

use async_trait::async_trait;
use futures::future::join_all;

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::match_conditions::FailurePolicy;
use crate::admission::source::ObjectSource;
use crate::admission::webhook::dispatch::{self, add_warnings, new_uid};
use crate::admission::webhook::errors::{self, Error};
use crate::admission::webhook::rules;
use crate::admission::webhook::source::HookSource;
use crate::error::Result;
use crate::resources::admissionregistration::VALIDATING_WEBHOOK_CONFIGURATIONS;

/// The plugin's upstream name.
pub const NAME: &str = "ValidatingAdmissionWebhook";

/// Calls the ValidatingWebhookConfigurations' webhooks.
#[derive(Debug)]
pub struct ValidatingWebhook {
    /// The configured webhooks, compiled once per configuration generation.
    hooks: HookSource,
}

impl Default for ValidatingWebhook {
    fn default() -> Self {
        Self {
            hooks: HookSource::new(&VALIDATING_WEBHOOK_CONFIGURATIONS),
        }
    }
}

#[async_trait]
impl Plugin for ValidatingWebhook {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, _: Operation) -> bool {
        true
    }

    fn validates(&self) -> bool {
        true
    }

    async fn validate(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if rules::is_exempt(a) {
            return Ok(());
        }
        let hooks = self.hooks.hooks(source).await?;
        if hooks.is_empty() {
            return Ok(());
        }
        // Which webhooks to call is decided in order; the first error refuses at once.
        let mut relevant = Vec::new();
        for hook in hooks.iter() {
            let uid = new_uid();
            let request = a.admission_request(&uid);
            if dispatch::should_call(hook, a, source, &request).await? {
                relevant.push((hook, request, uid));
            }
        }
        if relevant.is_empty() {
            return Ok(());
        }
        let view: &Attributes<'_> = a;
        let calls = relevant.into_iter().map(|(hook, request, uid)| async move {
            let result = dispatch::call(hook, view, source, request, &uid, false).await;
            (hook, result)
        });
        let results = join_all(calls).await;
        let mut first_error = None;
        let mut warnings = Vec::new();
        for (hook, result) in results {
            let error = match result {
                Ok(response) => {
                    warnings.extend(response.warnings);
                    if response.allowed {
                        continue;
                    }
                    errors::denied(
                        &hook.name,
                        a.resource.group_resource(),
                        a.name,
                        response.status.as_ref(),
                    )
                }
                Err(e @ Error::Calling { .. }) if hook.failure_policy == FailurePolicy::Ignore => {
                    tracing::warn!(webhook = %hook.name, error = %e, "Failed calling webhook, failing open");
                    continue;
                }
                Err(e) => e,
            };
            if let Error::Calling { .. } = &error {
                tracing::warn!(webhook = %hook.name, error = %error, "Failed calling webhook, failing closed");
            } else {
                tracing::info!(webhook = %hook.name, error = %error, "rejected by webhook");
            }
            first_error.get_or_insert(error);
        }
        add_warnings(a, warnings);
        match first_error {
            Some(e) => Err(e.into_api_error()),
            None => Ok(()),
        }
    }
}
