//! The webhooks of every Mutating- or ValidatingWebhookConfiguration, read through the registry's watch cache and compiled once per configuration generation (keyed by name and resourceVersion), sorted by configuration name as upstream's configuration managers.

use std::sync::{Arc, Mutex};

use crate::admission::source::ObjectSource;
use crate::admission::webhook::hook::{Hook, compile_configuration};
use crate::error::Result;
use crate::object;
use crate::registry::resource::ResourceDef;

/// The compiled webhooks, in dispatch order (configurations by name, webhooks in order).
pub type Hooks = Arc<Vec<Arc<Hook>>>;

/// The compiled webhooks of one configuration kind.
#[derive(Debug)]
pub struct HookSource {
    /// The configuration resource read.
    def: &'static ResourceDef,
    /// The last compiled generation: `(name, resourceVersion)` of every configuration, in
    /// name order, and the webhooks compiled from exactly those. The lock is only held to
    /// compare or swap, never across a read or a call.
    cache: Mutex<Option<(Vec<(String, String)>, Hooks)>>,
}

impl HookSource {
    /// A source of `def`'s configurations (mutating or validating).
    pub fn new(def: &'static ResourceDef) -> Self {
        Self {
            def,
            cache: Mutex::new(None),
        }
    }

    /// The webhooks configured now: the cached compilation when no configuration changed,
    /// else a fresh one (which replaces it).
    pub async fn hooks(&self, source: &dyn ObjectSource) -> Result<Hooks> {
        if !source.serves(self.def) {
            return Ok(Arc::default());
        }
        let mut configs = source.list(self.def, "").await?;
        configs.sort_by(|a, b| object::name(a).cmp(object::name(b)));
        let key: Vec<(String, String)> = configs
            .iter()
            .map(|c| {
                (
                    object::name(c).to_owned(),
                    object::resource_version(c).to_owned(),
                )
            })
            .collect();
        if let Some((cached_key, hooks)) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            && *cached_key == key
        {
            return Ok(Arc::clone(hooks));
        }
        // Compiled without the lock: two requests racing after a change both compile, and
        // the last one stores its (identical) result.
        let hooks: Hooks = Arc::new(
            configs
                .iter()
                .flat_map(|c| compile_configuration(c))
                .collect(),
        );
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some((key, Arc::clone(&hooks)));
        Ok(hooks)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::testing::Objects;
    use crate::resources::admissionregistration::VALIDATING_WEBHOOK_CONFIGURATIONS;

    fn names(hooks: &[Arc<Hook>]) -> Vec<&str> {
        hooks.iter().map(|h| h.name.as_str()).collect()
    }

    fn config(name: &str, rv: &str, hooks: &[&str]) -> Value {
        let webhooks: Vec<Value> = hooks
            .iter()
            .map(|h| {
                json!({"name": h, "clientConfig": {"url": "https://127.0.0.1/"},
                "sideEffects": "None", "admissionReviewVersions": ["v1"]})
            })
            .collect();
        json!({"metadata": {"name": name, "resourceVersion": rv}, "webhooks": webhooks})
    }

    #[tokio::test]
    async fn configurations_are_sorted_and_compiled_once_per_generation() {
        let source = HookSource::new(&VALIDATING_WEBHOOK_CONFIGURATIONS);
        let objects = Objects::new(vec![
            (
                &VALIDATING_WEBHOOK_CONFIGURATIONS,
                config("b", "5", &["b1"]),
            ),
            (
                &VALIDATING_WEBHOOK_CONFIGURATIONS,
                config("a", "7", &["a1", "a2"]),
            ),
        ]);
        let first = source.hooks(&objects).await.expect("hooks");
        assert_eq!(names(&first), ["a1", "a2", "b1"]);
        let again = source.hooks(&objects).await.expect("hooks");
        assert!(
            Arc::ptr_eq(&first, &again),
            "same generation, same compilation"
        );

        let changed = Objects::new(vec![
            (
                &VALIDATING_WEBHOOK_CONFIGURATIONS,
                config("b", "9", &["b2"]),
            ),
            (
                &VALIDATING_WEBHOOK_CONFIGURATIONS,
                config("a", "7", &["a1", "a2"]),
            ),
        ]);
        let next = source.hooks(&changed).await.expect("hooks");
        assert!(!Arc::ptr_eq(&first, &next));
        assert_eq!(names(&next), ["a1", "a2", "b2"]);
        assert!(
            source
                .hooks(&Objects::default())
                .await
                .expect("none")
                .is_empty()
        );
    }
}
