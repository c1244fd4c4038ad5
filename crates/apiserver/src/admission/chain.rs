//! The admission chain: the enabled plugins in order, every mutating phase run before any validating phase (upstream's `chainAdmissionHandler`).

use std::sync::Arc;

use crate::admission::attributes::Attributes;
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::{AdmissionConfig, Error, RESOURCE_QUOTA, SERVICE_ACCOUNT};
use crate::admission::source::ObjectSource;
use crate::error::Result;

/// The configured plugins, in run order. Cheap to share: the server holds one.
#[derive(Clone, Debug)]
pub struct Chain {
    /// Every plugin, in upstream's order; each phase skips plugins without it.
    plugins: Vec<Arc<dyn Plugin>>,
    /// Whether the registry charges ResourceQuotas (the `ResourceQuota` plugin).
    resource_quota: bool,
}

impl Default for Chain {
    /// No plugins; ResourceQuota on.
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl Chain {
    /// A chain of `plugins`, run in the order given.
    /// (ResourceQuota on, as by default).
    pub fn new(plugins: Vec<Arc<dyn Plugin>>) -> Self {
        Self {
            plugins,
            resource_quota: true,
        }
    }

    /// The chain `config` enables.
    pub fn from_config(config: &AdmissionConfig) -> Result<Self, Error> {
        Ok(Self {
            plugins: config.plugins()?,
            resource_quota: config.enabled_names().contains(&RESOURCE_QUOTA),
        })
    }

    /// Whether writes are checked against and charged to ResourceQuotas.
    pub fn resource_quota(&self) -> bool {
        self.resource_quota
    }

    /// The default chain without ServiceAccount: what a bare registry (no service account
    /// controller beside it to create `default` accounts) runs, as upstream's integration
    /// test servers run with `--disable-admission-plugins=ServiceAccount`.
    pub fn without_service_accounts() -> Self {
        let config = AdmissionConfig::default().disabling(&[SERVICE_ACCOUNT]);
        // The default configuration names only known plugins; it cannot fail.
        Self::from_config(&config).unwrap_or_default()
    }

    /// The plugins' names, in run order.
    pub fn names(&self) -> Vec<&'static str> {
        self.plugins.iter().map(|p| p.name()).collect()
    }

    /// Whether a plugin called `name` is in the chain.
    pub fn contains(&self, name: &str) -> bool {
        self.plugins.iter().any(|p| p.name() == name)
    }

    /// The mutating phase: each mutating plugin handling the operation, in order; the first
    /// refusal ends the request. When a webhook or a mutating policy changed the object,
    /// every mutating plugin runs once more (upstream's `reinvoker`: in-tree plugins are
    /// idempotent, and webhooks and policies are only applied again under
    /// `reinvocationPolicy: IfNeeded`).
    pub async fn admit(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        self.admit_round(source, a).await?;
        if a.reinvocation.should_reinvoke() && !a.reinvocation.is_reinvoke() {
            a.reinvocation.set_is_reinvoke();
            self.admit_round(source, a).await?;
        }
        Ok(())
    }

    /// One round of the mutating phase.
    async fn admit_round(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        for plugin in &self.plugins {
            if plugin.mutates() && plugin.handles(a.operation) {
                plugin.admit(source, a).await?;
            }
        }
        Ok(())
    }

    /// The validating phase: each validating plugin handling the operation, in order.
    pub async fn validate(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        for plugin in &self.plugins {
            if plugin.validates() && plugin.handles(a.operation) {
                plugin.validate(source, a).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::attributes::Operation;
    use crate::auth::user::UserInfo;
    use crate::error::ApiError;
    use crate::registry::resource::ResourceDef;
    use crate::resources::pod::PODS;

    /// Records the phases it ran in a shared log; refuses when told to.
    #[derive(Debug)]
    struct Recorder {
        name: &'static str,
        mutates: bool,
        validates: bool,
        refuse: bool,
        log: Arc<Mutex<Vec<String>>>,
    }

    #[async_trait]
    impl Plugin for Recorder {
        fn name(&self) -> &'static str {
            self.name
        }
        fn handles(&self, operation: Operation) -> bool {
            operation == Operation::Create
        }
        fn mutates(&self) -> bool {
            self.mutates
        }
        fn validates(&self) -> bool {
            self.validates
        }
        async fn admit(&self, _: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
            self.log
                .lock()
                .expect("log")
                .push(format!("admit {}", self.name));
            if let Some(obj) = a.object.as_mut() {
                obj["touched"] = json!(self.name);
            }
            Ok(())
        }
        async fn validate(&self, _: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
            self.log
                .lock()
                .expect("log")
                .push(format!("validate {}", self.name));
            a.add_warning(format!("seen by {}", self.name));
            if self.refuse {
                return Err(a.forbidden("refused"));
            }
            Ok(())
        }
    }

    struct Nothing;

    #[async_trait]
    impl ObjectSource for Nothing {
        async fn get(&self, _: &ResourceDef, _: &str, _: &str) -> Result<Option<Arc<Value>>> {
            Ok(None)
        }
        async fn list(&self, _: &ResourceDef, _: &str) -> Result<Vec<Arc<Value>>> {
            Ok(Vec::new())
        }
        fn serves(&self, _: &ResourceDef) -> bool {
            true
        }
    }

    #[tokio::test]
    async fn mutating_phases_run_before_validating_ones_in_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let plugin = |name, mutates, validates, refuse| -> Arc<dyn Plugin> {
            Arc::new(Recorder {
                name,
                mutates,
                validates,
                refuse,
                log: Arc::clone(&log),
            })
        };
        let chain = Chain::new(vec![
            plugin("a", true, true, false),
            plugin("b", false, true, true),
            plugin("c", true, true, false),
        ]);
        let user = UserInfo::admin();
        let mut a = Attributes::new(Operation::Create, &PODS, "ns", "p", Some(json!({})), &user);
        chain.admit(&Nothing, &mut a).await.expect("admit");
        assert_eq!(
            a.object.as_ref().map(|o| o["touched"].clone()),
            Some(json!("c"))
        );
        let err: ApiError = chain
            .validate(&Nothing, &mut a)
            .await
            .expect_err("b refuses");
        assert_eq!(err.code, 403);
        assert_eq!(
            *log.lock().expect("log"),
            ["admit a", "admit c", "validate a", "validate b"]
        );
        assert_eq!(a.warnings(), ["seen by a", "seen by b"]);

        let mut delete = Attributes::new(Operation::Delete, &PODS, "ns", "p", None, &user);
        chain
            .validate(&Nothing, &mut delete)
            .await
            .expect("not handled");
        assert_eq!(log.lock().expect("log").len(), 4);
    }
}
