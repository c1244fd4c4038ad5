//! What a resource's storage does around the generic store's writes, registered by the resource (upstream's `genericregistry.Store` hooks `BeginCreate`, `AfterCreate`, `BeginUpdate`, `AfterDelete`, and the resources whose REST replaces `Create` or `Delete`).
//!
//! The generic create, update and delete never name a resource. A resource that allocates
//! (Services: cluster IPs and node ports), answers a create without storing (Bindings,
//! TokenReviews) or deletes in two steps (Namespaces) declares its [`StoreHooks`] with
//! [`ResourceDef::hooks`](crate::registry::resource::ResourceDef::hooks), in its own file.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::Result;
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;

/// Work a write began that waits for the store's answer (upstream's `FinishFunc`): the
/// allocation lock a Service's create or update holds until it is stored.
#[async_trait]
pub trait PendingWrite: Send {
    /// The write was stored.
    async fn commit(self: Box<Self>, registry: &Registry);
    /// The write was certainly not stored (refused, a lost race, a dry run): what it took
    /// goes back. Dropping it instead, when the outcome is unknown (a backend error), leaves
    /// the repair to the resource.
    async fn abort(self: Box<Self>, registry: &Registry);
}

/// A [`PendingWrite`] borrowing the registry.
pub type Pending<'r> = Box<dyn PendingWrite + 'r>;

/// A resource's hooks around the generic writes. Every method defaults to doing nothing.
#[async_trait]
pub trait StoreHooks: Send + Sync + 'static {
    /// Answers a create in place of the generic store (upstream's own `REST.Create`:
    /// `bindings`, `tokenreviews`), after the kind and namespace checks and field validation;
    /// `None` lets the generic create run.
    async fn create(
        &self,
        _registry: &Registry,
        _def: &ResourceDef,
        _namespace: &str,
        _obj: &Value,
        _dry_run: bool,
    ) -> Option<Result<Value>> {
        None
    }

    /// Before a create is stored, after admission (`BeginCreate`): may change the object;
    /// the pending work is committed once it is stored and aborted when it is not.
    async fn begin_create<'r>(
        &self,
        _registry: &'r Registry,
        _obj: &mut Value,
    ) -> Result<Option<Pending<'r>>> {
        Ok(None)
    }

    /// After a create was stored (`AfterCreate`), not for a dry run.
    async fn after_create(&self, _registry: &Registry, _obj: &Value) {}

    /// Before an update of the main resource is stored, after admission (`BeginUpdate`);
    /// as [`Self::begin_create`].
    async fn begin_update<'r>(
        &self,
        _registry: &'r Registry,
        _new: &mut Value,
        _old: &Value,
    ) -> Result<Option<Pending<'r>>> {
        Ok(None)
    }

    /// After an update of any target was stored, not for a dry run: `old` as stored before,
    /// `new` as stored after, or `None` when the update removed the object (the last
    /// finalizer of a deleting object went). `began`: whether [`Self::begin_update`] ran.
    async fn after_update(
        &self,
        _registry: &Registry,
        _old: &Value,
        _new: Option<&Value>,
        _began: bool,
    ) {
    }

    /// Whether a delete begins with [`Self::begin_delete`], admitted before it.
    fn begins_delete(&self) -> bool {
        false
    }

    /// The first step of a two-step delete (upstream's namespace `REST.Delete`): `Some` is the
    /// object now pending deletion, the answer; `None` lets the generic delete remove it.
    async fn begin_delete(
        &self,
        _registry: &Registry,
        _def: &ResourceDef,
        _name: &str,
        _dry_run: bool,
    ) -> Result<Option<Value>> {
        Ok(None)
    }

    /// After a delete removed the object from the store (`AfterDelete`).
    async fn after_delete(&self, _registry: &Registry, _obj: &Value) {}
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;
    use crate::registry::delete::{DeleteOptions, DeleteOutcome};
    use crate::registry::options::WriteOptions;
    use crate::registry::update::Target;
    use crate::storage::memory::MemoryStorage;

    /// What the hooks were called with, in order.
    static CALLS: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn calls() -> Vec<String> {
        std::mem::take(&mut *CALLS.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn record(call: String) {
        CALLS.lock().unwrap_or_else(|e| e.into_inner()).push(call);
    }

    /// Labels every object it begins, and records every call.
    struct Recorder;

    struct Txn(String);

    #[async_trait]
    impl PendingWrite for Txn {
        async fn commit(self: Box<Self>, _registry: &Registry) {
            record(format!("commit {}", self.0));
        }

        async fn abort(self: Box<Self>, _registry: &Registry) {
            record(format!("abort {}", self.0));
        }
    }

    fn name(obj: &Value) -> String {
        crate::object::name(obj).to_owned()
    }

    #[async_trait]
    impl StoreHooks for Recorder {
        async fn begin_create<'r>(
            &self,
            _registry: &'r Registry,
            obj: &mut Value,
        ) -> Result<Option<Pending<'r>>> {
            obj["metadata"]["labels"] = json!({"began": "create"});
            record(format!("begin_create {}", name(obj)));
            Ok(Some(Box::new(Txn(name(obj)))))
        }

        async fn after_create(&self, _registry: &Registry, obj: &Value) {
            record(format!("after_create {}", name(obj)));
        }

        async fn begin_update<'r>(
            &self,
            _registry: &'r Registry,
            new: &mut Value,
            _old: &Value,
        ) -> Result<Option<Pending<'r>>> {
            new["metadata"]["labels"] = json!({"began": "update"});
            record(format!("begin_update {}", name(new)));
            Ok(Some(Box::new(Txn(name(new)))))
        }

        async fn after_update(
            &self,
            _registry: &Registry,
            old: &Value,
            new: Option<&Value>,
            began: bool,
        ) {
            let now = new.map_or("removed".to_owned(), |n| n["data"]["k"].to_string());
            record(format!("after_update {} {now} began={began}", name(old)));
        }

        async fn after_delete(&self, _registry: &Registry, obj: &Value) {
            record(format!("after_delete {}", name(obj)));
        }
    }

    static HOOKED: ResourceDef = ResourceDef::of::<ConfigMap>().hooks(&Recorder);

    fn cm(name: &str, value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": {"k": value}})
    }

    /// The generic create, update and delete call a resource's hooks around the store: what
    /// was begun is committed once stored and aborted on a dry run or a refused write; the
    /// after-hooks see what was stored; an update that removes the object says so.
    #[tokio::test]
    async fn generic_writes_call_the_resources_hooks() {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        registry
            .ensure_default_namespaces()
            .await
            .expect("namespaces");
        let opts = WriteOptions::default();

        let created = registry
            .create(&HOOKED, "default", cm("a", "1"), &opts)
            .await
            .expect("create");
        assert_eq!(created.object["metadata"]["labels"]["began"], "create");
        assert_eq!(
            calls(),
            ["begin_create a", "commit a", "after_create a"],
            "stored: committed, then after_create"
        );

        registry
            .create(
                &HOOKED,
                "default",
                cm("b", "1"),
                &WriteOptions::dry_run(true),
            )
            .await
            .expect("dry-run create");
        assert_eq!(calls(), ["begin_create b", "abort b"], "a dry run aborts");

        let refused = registry
            .create(&HOOKED, "default", cm("a", "2"), &opts)
            .await
            .expect_err("exists");
        assert_eq!(refused.code, 409);
        assert_eq!(
            calls(),
            ["begin_create a", "abort a"],
            "a refused create aborts"
        );

        registry
            .update(&HOOKED, "default", "a", cm("a", "2"), Target::Main, &opts)
            .await
            .expect("update");
        assert_eq!(
            calls(),
            [
                "begin_update a",
                "commit a",
                "after_update a \"2\" began=true"
            ]
        );

        // A status-less resource's main update that clears the last finalizer of a deleting
        // object removes it: the after-hook is told so.
        let mut held = cm("c", "1");
        held["metadata"]["finalizers"] = json!(["example.com/hold"]);
        registry
            .create(&HOOKED, "default", held, &opts)
            .await
            .expect("create c");
        calls();
        let pending = registry
            .delete(&HOOKED, "default", "c", &DeleteOptions::default())
            .await
            .expect("delete c");
        let DeleteOutcome::Pending(mut deleting) = pending else {
            panic!("a finalizer keeps it: {pending:?}");
        };
        assert!(calls().is_empty(), "nothing left the store yet");
        deleting["metadata"]["finalizers"] = json!([]);
        registry
            .update(&HOOKED, "default", "c", deleting, Target::Main, &opts)
            .await
            .expect("clear finalizers");
        assert_eq!(
            calls(),
            [
                "begin_update c",
                "commit c",
                "after_update c removed began=true"
            ]
        );

        let deleted = registry
            .delete(&HOOKED, "default", "a", &DeleteOptions::default())
            .await
            .expect("delete a");
        assert!(matches!(deleted, DeleteOutcome::Deleted(_)));
        assert_eq!(calls(), ["after_delete a"]);
    }
}
