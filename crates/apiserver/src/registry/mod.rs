//! The one generic registry: Kubernetes REST semantics over the revisioned store, parameterised by each resource's declarative [`ResourceDef`] and its [`Strategy`].
//!
//! Every verb lives in its own file as an `impl Registry` block: [`create`], [`update`] (also
//! patch and `/status`), [`delete`] (graceful deletion, finalizers, propagation), [`list`]
//! (selectors, pagination), [`watch`]; subresources in [`scale`], [`binding`], [`eviction`];
//! resources computed on read in [`computed`]; the objects a cluster starts with in
//! [`bootstrap`];
//! namespace lifecycle in [`namespace`]. What varies per resource is read from its
//! [`resource::ResourceDef`] (names, verbs, storage, decode) and the [`strategy::Strategy`]
//! it names (validation, preparation, graceful deletion). Objects are `serde_json::Value`s;
//! each stored value is the object's JSON without `resourceVersion`, which is set from the
//! store's revision on every read.

pub mod admit;
pub mod apiserver_leases;
pub mod apiservices;
pub mod binding;
pub mod bootstrap;
pub mod components;
pub mod computed;
pub mod connect;
pub mod create;
pub mod custom;
pub mod delete;
pub mod event_cache;
pub mod event_ttl;
pub mod eviction;
pub mod field_selector;
pub mod generation;
pub mod kubernetes_service;
pub mod legacy_token_tracking;
pub mod list;
pub mod namespace;
pub mod object_cache;
pub mod options;
pub mod patch;
pub mod pod_log;
pub mod range_allocator;
pub mod rbac_escalation;
pub mod resource;
pub mod rest;
pub mod scale;
pub mod served;
pub mod service_alloc;
pub mod service_ip;
pub mod service_ipaddress;
pub mod store_hooks;
pub mod strategy;
pub mod subresource;
pub mod token_request;
pub mod token_review;
pub mod update;
pub mod usage;
pub mod watch;

use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde_json::Value;

use crate::admission::Chain;
use crate::auth::authenticator::{Authenticator, NoTokens};
use crate::auth::authorizer::{Authorizer, BootstrapPolicy};
use crate::error::{ApiError, Result};
use crate::object;
use crate::openapi::OpenApi;
use crate::resources;
use crate::storage::{KeyValue, Storage};
pub use resource::ResourceDef;
pub use served::{DefRef, Resources};
pub use strategy::Strategy;
pub use subresource::Subresource;

/// How many times a write whose read went stale is retried before answering 409 (as
/// upstream's `GuaranteedUpdate` loop, bounded).
const MAX_WRITE_RETRIES: usize = 16;

/// The registry: every served resource's entry over one shared store.
pub struct Registry {
    /// The revisioned store all resources live in.
    storage: Arc<dyn Storage>,
    /// The built-in entries and the custom resources' entries, in discovery order.
    served: served::ServedSet,
    /// Recent watch events decoded and encoded once for all watchers.
    pub(crate) events: event_cache::EventCache,
    /// The OpenAPI documents of the built-in entries, built on first use.
    builtin_openapi: OnceLock<Arc<OpenApi>>,
    /// The documents of everything served, for the custom set's generation they were built
    /// at; rebuilt (from `builtin_openapi` plus the custom entries) when the set changed.
    openapi: Mutex<Option<(u64, Arc<OpenApi>)>>,
    /// The Service cluster IP and node port bitmaps. Held from a Service's first allocation
    /// until it is stored, so two requests never get the same IP or port.
    service_ips: tokio::sync::Mutex<service_alloc::ServiceAllocators>,
    /// The range Service cluster IPs come from (`--service-cluster-ip-range`).
    service_ip_range: service_ip::ServiceIpRange,
    /// Health probes of the components beside the server, for `componentstatuses`.
    components: components::ComponentProbes,
    /// Authenticates bearer tokens for `tokenreviews`.
    authenticator: Arc<dyn Authenticator>,
    /// Answers the access reviews.
    authorizer: Arc<dyn Authorizer>,
    /// Signs `serviceaccounts/token` tokens; `None` serves no TokenRequests.
    token_issuer: Option<Arc<crate::auth::service_account_token::TokenIssuer>>,
    /// What `metrics.k8s.io` reads usage from (the process embedding the server sets it).
    usage: usage::UsageSlot,
    /// What `pods/log` reads container logs from (the process embedding the server sets it).
    logs: pod_log::LogSlot,
    /// Held while a write charges ResourceQuotas, so charges of concurrent writes never
    /// race one another (only the quota controller's writes can).
    pub(crate) quota_lock: tokio::sync::Mutex<()>,
    /// The admission plugins every write passes through.
    admission: Chain,
    /// What the admission plugins read, kept decoded in memory.
    pub(crate) object_cache: object_cache::ObjectCache,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("resources", &self.served)
            .finish()
    }
}

impl Registry {
    /// A registry serving every built-in resource over `storage`.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Self::with_resources(storage, resources::ALL)
    }

    /// A registry serving `resources` (unique by group, version and plural) over `storage`.
    pub fn with_resources(
        storage: Arc<dyn Storage>,
        resources: &'static [&'static ResourceDef],
    ) -> Self {
        Self {
            object_cache: object_cache::ObjectCache::new(Arc::clone(&storage), resources),
            storage,
            served: served::ServedSet::new(resources),
            events: event_cache::EventCache::new(event_cache::DEFAULT_EVENT_CACHE_CAPACITY),
            builtin_openapi: OnceLock::new(),
            openapi: Mutex::new(None),
            service_ips: tokio::sync::Mutex::new(service_alloc::ServiceAllocators::new(
                &service_ip::ServiceIpRange::default(),
            )),
            service_ip_range: service_ip::ServiceIpRange::default(),
            components: components::ComponentProbes::default(),
            authenticator: Arc::new(NoTokens),
            authorizer: Arc::new(BootstrapPolicy),
            token_issuer: None,
            usage: usage::UsageSlot::default(),
            logs: pod_log::LogSlot::default(),
            quota_lock: tokio::sync::Mutex::new(()),
            admission: Chain::without_service_accounts(),
        }
    }

    /// Replaces the admission chain (a bare registry runs [`Chain::without_service_accounts`]).
    pub fn with_admission(mut self, chain: Chain) -> Self {
        self.admission = chain;
        self
    }

    /// Allocates Service cluster IPs from `range` instead of `10.96.0.0/12` (before the
    /// registry serves anything).
    pub fn with_service_ip_range(mut self, range: service_ip::ServiceIpRange) -> Self {
        self.service_ips = tokio::sync::Mutex::new(service_alloc::ServiceAllocators::new(&range));
        self.service_ip_range = range;
        self
    }

    /// The range Service cluster IPs come from.
    pub fn service_ip_range(&self) -> &service_ip::ServiceIpRange {
        &self.service_ip_range
    }

    /// The admission chain.
    pub fn admission(&self) -> &Chain {
        &self.admission
    }

    /// What [computed](computed::Computed) resources read of the server.
    pub(crate) fn view(&self) -> computed::ServerView<'_> {
        let mut group_versions: Vec<(String, String)> = Vec::new();
        for def in self.resources().iter() {
            if !group_versions
                .iter()
                .any(|(g, v)| *g == def.group && *v == def.version)
            {
                group_versions.push((def.group.to_string(), def.version.to_string()));
            }
        }
        computed::ServerView {
            storage: self.storage.as_ref(),
            components: &self.components,
            usage: &self.usage,
            group_versions,
        }
    }

    /// The health probes of the components beside the server (the process that starts the
    /// scheduler or the controller manager registers theirs).
    pub fn components(&self) -> &components::ComponentProbes {
        &self.components
    }

    /// Where `metrics.k8s.io` reads pod and node usage (`kcm up` registers the simulator's
    /// usage model).
    pub fn usage(&self) -> &usage::UsageSlot {
        &self.usage
    }

    /// Replaces the authenticator `tokenreviews` consult (none authenticates by default).
    pub fn with_authenticator(mut self, authenticator: Arc<dyn Authenticator>) -> Self {
        self.authenticator = authenticator;
        self
    }

    /// Replaces the authorizer the access reviews consult ([`BootstrapPolicy`] by default).
    pub fn with_authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorizer = authorizer;
        self
    }

    /// Signs service account tokens (`serviceaccounts/token`).
    pub fn with_token_issuer(
        mut self,
        issuer: Arc<crate::auth::service_account_token::TokenIssuer>,
    ) -> Self {
        self.token_issuer = Some(issuer);
        self
    }

    /// The service account token issuer, if any.
    pub fn token_issuer(&self) -> Option<Arc<crate::auth::service_account_token::TokenIssuer>> {
        self.token_issuer.clone()
    }

    /// The authenticator of bearer tokens.
    pub fn authenticator(&self) -> &dyn Authenticator {
        self.authenticator.as_ref()
    }

    /// The authorizer.
    pub fn authorizer(&self) -> &dyn Authorizer {
        self.authorizer.as_ref()
    }

    /// The OpenAPI v3 documents and schemas of the built-in resources (built on first use):
    /// what strict field validation of built-in kinds reads.
    pub fn builtin_openapi(&self) -> &OpenApi {
        self.builtin_openapi
            .get_or_init(|| Arc::new(OpenApi::build(self.served.builtin())))
    }

    /// The OpenAPI v3 documents of every served resource, custom resources included: built
    /// again (from the cached built-in documents) after the custom set changed.
    pub fn openapi(&self) -> Arc<OpenApi> {
        let resources = self.resources();
        let generation = resources.custom().generation;
        if generation == 0 {
            // No custom resource was ever served: the built-in documents are the whole answer.
            self.builtin_openapi();
            if let Some(doc) = self.builtin_openapi.get() {
                return Arc::clone(doc);
            }
        }
        if let Some((g, doc)) = self
            .openapi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            && *g == generation
        {
            return Arc::clone(doc);
        }
        // Built outside the lock: two requests racing after a change both build, one wins.
        let doc = Arc::new(self.builtin_openapi().with_custom(&resources.custom().defs));
        let mut slot = self.openapi.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some((g, newer)) if *g > generation => Arc::clone(newer),
            _ => {
                *slot = Some((generation, Arc::clone(&doc)));
                doc
            }
        }
    }

    /// The store under the registry.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// A snapshot of every served resource, in discovery order (built-ins, then custom
    /// resources).
    pub fn resources(&self) -> Resources {
        self.served.snapshot()
    }

    /// The entry serving `group/version/plural` now.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<DefRef> {
        self.served.lookup(group, version, plural)
    }

    /// Replaces the custom resources' entries (the CRD controller's job) and returns the
    /// custom set's new generation. Requests already routed keep their entry until they end.
    pub fn set_custom_resources(&self, defs: Vec<Arc<ResourceDef>>) -> u64 {
        self.served.replace_custom(defs)
    }

    /// `def` if this registry serves it (for internal reads such as namespaces and
    /// PodDisruptionBudgets).
    pub(crate) fn served(&self, def: &'static ResourceDef) -> Option<&'static ResourceDef> {
        self.served
            .builtin()
            .iter()
            .find(|d| std::ptr::eq(**d, def))
            .copied()
    }

    /// Reads one object (`GET .../{name}`).
    pub async fn get(&self, def: &ResourceDef, namespace: &str, name: &str) -> Result<Value> {
        if let Some(computed) = def.computed_by() {
            return computed
                .objects(&self.view())
                .await?
                .into_iter()
                .find(|o| {
                    object::name(o) == name
                        && (!def.namespaced || object::namespace(o) == namespace)
                })
                .ok_or_else(|| ApiError::not_found(def.group_resource(), name));
        }
        let key = def.storage_key(namespace, name);
        match self.storage.get(&key).await {
            Ok(Some(kv)) => decode_stored(def, &kv),
            Ok(None) => Err(ApiError::not_found(def.group_resource(), name)),
            Err(e) => Err(ApiError::from_storage(e, def.group_resource(), name)),
        }
    }

    /// Reads one object with its stored version, or `None`.
    pub(crate) async fn get_kv(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> Result<Option<(Value, KeyValue)>> {
        let key = def.storage_key(namespace, name);
        match self.storage.get(&key).await {
            Ok(Some(kv)) => Ok(Some((decode_stored(def, &kv)?, kv))),
            Ok(None) => Ok(None),
            Err(e) => Err(ApiError::from_storage(e, def.group_resource(), name)),
        }
    }
}

/// Decodes a stored value into the entry's version, with `resourceVersion` set from the
/// store's mod revision.
pub(crate) fn decode_stored(def: &ResourceDef, kv: &KeyValue) -> Result<Value> {
    let mut obj: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::internal(format!("decoding stored object {}: {e}", kv.key)))?;
    object::set_resource_version(&mut obj, kv.mod_revision);
    Ok(def.from_storage(obj))
}

/// Encodes an object (in the entry's version) for the store: stored form, without
/// `resourceVersion`.
pub(crate) fn encode_for_storage(def: &ResourceDef, obj: &Value) -> Result<Bytes> {
    let encoded = match WithoutResourceVersion::of(def, obj) {
        // The common case: stored as served; written straight from the caller's tree.
        Some(view) => serde_json::to_vec(&view),
        None => {
            let mut stored = def.to_storage(obj.clone());
            object::remove_meta(&mut stored, "resourceVersion");
            serde_json::to_vec(&stored)
        }
    };
    encoded
        .map(Bytes::from)
        .map_err(|e| ApiError::internal(format!("encoding object: {e}")))
}

/// An object serialized without `metadata.resourceVersion`, with no copy of its tree: the
/// same bytes as removing the field from a clone and serializing that.
struct WithoutResourceVersion<'a> {
    object: &'a serde_json::Map<String, Value>,
}

impl<'a> WithoutResourceVersion<'a> {
    /// `None` when the entry converts to a stored version or the object has no `metadata`
    /// object (the slow path repairs those as `remove_meta` does).
    fn of(def: &ResourceDef, obj: &'a Value) -> Option<Self> {
        let object = obj.as_object()?;
        (def.stores_as_served() && object.get("metadata").is_some_and(Value::is_object))
            .then_some(WithoutResourceVersion { object })
    }
}

impl serde::Serialize for WithoutResourceVersion<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        /// A map without one key.
        struct Without<'a>(&'a serde_json::Map<String, Value>, &'static str);
        impl serde::Serialize for Without<'_> {
            fn serialize<S: serde::Serializer>(
                &self,
                serializer: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                let len = self.0.len() - usize::from(self.0.contains_key(self.1));
                let mut map = serializer.serialize_map(Some(len))?;
                for (k, v) in self.0.iter().filter(|(k, _)| *k != self.1) {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(self.object.len()))?;
        for (k, v) in self.object {
            match v {
                Value::Object(meta) if k == "metadata" => {
                    map.serialize_entry(k, &Without(meta, "resourceVersion"))?;
                }
                _ => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

/// Parses a `resourceVersion` string (`""` → `None`); anything else but a non-negative
/// integer is a 400.
pub fn parse_resource_version(rv: &str) -> Result<Option<i64>> {
    if rv.is_empty() {
        return Ok(None);
    }
    match rv.parse::<i64>() {
        Ok(n) if n >= 0 => Ok(Some(n)),
        _ => Err(ApiError::bad_request(format!(
            "invalid resource version: {rv:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copy-free encoding writes exactly what removing the field from a clone writes.
    #[test]
    fn storage_encoding_drops_the_resource_version_without_a_copy() {
        use serde_json::json;
        let pods = &crate::resources::pod::PODS;
        assert!(pods.stores_as_served());
        for obj in [
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "a", "namespace": "d", "resourceVersion": "12", "uid": "u"},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
            json!({"kind": "Pod", "metadata": {"name": "a"}}),
            json!({"metadata": {"resourceVersion": "1"}}),
            json!({"metadata": 5}),
            json!({"spec": {}}),
        ] {
            let mut expected = obj.clone();
            object::remove_meta(&mut expected, "resourceVersion");
            let bytes = encode_for_storage(pods, &obj).expect("encodes");
            assert_eq!(
                &bytes[..],
                serde_json::to_vec(&expected).expect("json"),
                "{obj}"
            );
        }
    }

    #[test]
    fn resource_version_parsing() {
        assert_eq!(parse_resource_version("").expect("ok"), None);
        assert_eq!(parse_resource_version("42").expect("ok"), Some(42));
        assert_eq!(parse_resource_version("x").map_err(|e| e.code), Err(400));
        assert_eq!(parse_resource_version("-1").map_err(|e| e.code), Err(400));
    }
}
