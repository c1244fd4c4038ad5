//! Read-only resources whose objects the server computes on every read instead of storing (upstream's `componentstatuses` REST): the [`Computed`] hook, and get and list over it.
//!
//! An entry names its hook with
//! [`ResourceDef::computed`](crate::registry::resource::ResourceDef::computed), which also
//! makes it read-only (`get`, `list`). Nothing is written, so there is no watch and no
//! `resourceVersion`: a list carries empty list metadata, as upstream's
//! `componentstatuses` list does. Label and field selectors apply as on stored resources.

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, Result};
use crate::object;
use crate::registry::Registry;
use crate::registry::list::ListOptions;
use crate::registry::resource::ResourceDef;

/// Computes the objects of a read-only resource from the server's own state.
pub trait Computed: Send + Sync + 'static {
    /// Every object as of now, each a complete object of the entry's kind (`apiVersion`,
    /// `kind`, `metadata.name`), in the order a list shows them.
    fn objects<'a>(&'a self, registry: &'a Registry) -> BoxFuture<'a, Result<Vec<Value>>>;
}

impl Registry {
    /// `GET .../{name}` of a computed resource.
    pub(crate) async fn get_computed(
        &self,
        def: &ResourceDef,
        computed: &dyn Computed,
        name: &str,
    ) -> Result<Value> {
        computed
            .objects(self)
            .await?
            .into_iter()
            .find(|o| object::name(o) == name)
            .ok_or_else(|| ApiError::not_found(def.group_resource(), name))
    }

    /// `GET` of the collection of a computed resource: every object passing the selectors.
    pub(crate) async fn list_computed(
        &self,
        def: &ResourceDef,
        computed: &dyn Computed,
        opts: &ListOptions,
    ) -> Result<Value> {
        opts.validate()?;
        let items: Vec<Value> = computed
            .objects(self)
            .await?
            .into_iter()
            .filter(|o| opts.matches(o))
            .collect();
        Ok(json!({
            "kind": format!("{}List", def.kind),
            "apiVersion": def.api_version(),
            "metadata": Map::new(),
            "items": items,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::FutureExt;
    use k8s_openapi::api::core::v1::ComponentStatus;
    use kcm_machinery::labels::Selector;

    use super::*;
    use crate::registry::resource::{ResourceDef, Verbs};
    use crate::storage::MemoryStorage;
    use crate::strategic_merge::kinds;
    use crate::table::printers;

    /// Two objects, one labelled.
    struct Two;

    impl Computed for Two {
        fn objects<'a>(&'a self, _: &'a Registry) -> BoxFuture<'a, Result<Vec<Value>>> {
            async {
                Ok(vec![
                    json!({"apiVersion": "v1", "kind": "ComponentStatus",
                        "metadata": {"name": "a", "labels": {"tier": "store"}}}),
                    json!({"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": "b"}}),
                ])
            }
            .boxed()
        }
    }

    static TWO: ResourceDef = ResourceDef::of::<ComponentStatus>()
        .computed(&Two)
        .printer(printers::GENERIC)
        .merge_schema(&kinds::METADATA_ONLY);
    static ALL: &[&ResourceDef] = &[&TWO];

    #[tokio::test]
    async fn get_and_list_read_the_computed_objects_and_write_nothing() {
        let storage = Arc::new(MemoryStorage::new());
        let registry = Registry::with_resources(storage.clone(), ALL);
        assert_eq!(TWO.verbs, Verbs::READ_ONLY);
        assert!(!TWO.is_stored());

        let a = registry.get(&TWO, "", "a").await.expect("get a");
        assert_eq!(a["metadata"]["labels"]["tier"], "store");
        let missing = registry.get(&TWO, "", "c").await.expect_err("c");
        assert_eq!(missing.code, 404);

        let all = registry
            .list(&TWO, None, &ListOptions::default())
            .await
            .expect("list");
        assert_eq!(all["kind"], "ComponentStatusList");
        assert_eq!(all["items"].as_array().map(Vec::len), Some(2));
        assert_eq!(all["metadata"], json!({}));
        let selected = ListOptions {
            label_selector: Some(Selector::parse("tier=store").expect("selector")),
            ..ListOptions::default()
        };
        let store = registry.list(&TWO, None, &selected).await.expect("list");
        assert_eq!(store["items"][0]["metadata"]["name"], "a");
        assert_eq!(store["items"].as_array().map(Vec::len), Some(1));

        use crate::storage::Storage;
        assert_eq!(storage.current_revision().await.expect("revision"), 0);
    }
}
