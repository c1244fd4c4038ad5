//! The declarative resource entry, [`ResourceDef`]: everything the server knows about one served resource — names, scope, verbs, storage, behaviour, printer, patch and OpenAPI schemas — in one value.
//!
//! An entry starts from the k8s-openapi type ([`ResourceDef::of`] reads group, version,
//! kind, plural and scope from it, and decodes request bodies as it) and adds what the type
//! cannot say, with `const` builder methods, so that an entry is a `static`:
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcm_apiserver::registry::resource::ResourceDef;
//! use kcm_apiserver::strategic_merge::kinds;
//! use kcm_apiserver::table::printers;
//!
//! static CONFIGMAPS: ResourceDef = ResourceDef::of::<ConfigMap>()
//!     .short_names(&["cm"])
//!     .printer(printers::CONFIG_MAP)
//!     .merge_schema(&kinds::METADATA_ONLY);
//! assert_eq!(CONFIGMAPS.storage_key("default", "a"), "/registry/core/configmaps/default/a");
//! ```
//!
//! Every consumer reads the entry: the registry (storage keys, conversion, the strategy's
//! hooks), discovery (names, verbs, subresources), the OpenAPI documents
//! ([`ResourceDef::openapi`]), `kubectl get` tables ([`ResourceDef::table_printer`]) and
//! strategic merge patches ([`ResourceDef::patch_schema`]). Nothing matches on kind or plural strings.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::schemars::JsonSchema;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::auth::bootstrap_reconcile::Reconcile;
use crate::error::{ApiError, GroupKind, GroupResource};
use crate::object;
use crate::openapi::schemas::TypedKind;
use crate::pointer::At;
use crate::registry::computed::Computed;
use crate::registry::custom::CustomBehaviour;
use crate::registry::generation::Generation;
use crate::registry::strategy::{DefaultStrategy, Strategy, StrategyRef, decode_as};
use crate::registry::subresource::Subresource;
use crate::strategic_merge::{Schema, TypeDef};
use crate::table::{IncludeObject, Printer};
use crate::validation::FieldError;
use jiff::Timestamp;

/// Whether a k8s-openapi resource scope is namespaced, so that [`ResourceDef::of`] can read
/// the scope from the type.
pub trait KindScope {
    /// `true` for namespaced kinds.
    const NAMESPACED: bool;
}

impl KindScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl KindScope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// A set of the verbs of a resource's main paths (collection and object), as discovery lists
/// them. Subresources have their own ([`Subresource::verbs`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Verbs(u8);

impl Verbs {
    /// The names, in discovery's (alphabetical) order; bit `i` of the set is `NAMES[i]`.
    const NAMES: [&'static str; 8] = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    /// `POST` to the collection.
    pub const CREATE: Verbs = Verbs(1 << 0);
    /// `DELETE` of one object.
    pub const DELETE: Verbs = Verbs(1 << 1);
    /// `DELETE` of the collection.
    pub const DELETE_COLLECTION: Verbs = Verbs(1 << 2);
    /// `GET` of one object.
    pub const GET: Verbs = Verbs(1 << 3);
    /// `GET` of the collection.
    pub const LIST: Verbs = Verbs(1 << 4);
    /// `PATCH` of one object.
    pub const PATCH: Verbs = Verbs(1 << 5);
    /// `PUT` of one object.
    pub const UPDATE: Verbs = Verbs(1 << 6);
    /// `GET` of the collection with `watch`.
    pub const WATCH: Verbs = Verbs(1 << 7);
    /// No verb: what subresource operations require of their parent.
    pub const NONE: Verbs = Verbs(0);
    /// All eight: what a stored resource serves.
    pub const ALL: Verbs = Verbs(u8::MAX);
    /// `get` and `list`: a read-only resource whose objects the server computes
    /// (upstream's `componentstatuses`).
    pub const READ_ONLY: Verbs = Verbs::GET.with(Verbs::LIST);

    /// The union of two sets.
    pub const fn with(self, other: Verbs) -> Verbs {
        Verbs(self.0 | other.0)
    }

    /// The set without the verbs of `other`.
    pub const fn without(self, other: Verbs) -> Verbs {
        Verbs(self.0 & !other.0)
    }

    /// Whether every verb of `other` is in the set.
    pub const fn contains(self, other: Verbs) -> bool {
        self.0 & other.0 == other.0
    }

    /// The verbs' names, in discovery order.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, name)| *name)
            .collect()
    }
}

impl std::fmt::Debug for Verbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// Converts objects between a served version and the stored form, for versions that share
/// a storage resource with the stored one.
#[derive(Clone, Copy)]
pub struct Conversion {
    /// From the served version to the stored form.
    pub to_storage: fn(Value) -> Value,
    /// From the stored form to the served version.
    pub from_storage: fn(Value) -> Value,
}

impl std::fmt::Debug for Conversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Conversion")
    }
}

/// Where a resource's objects live.
#[derive(Clone, Copy, Debug)]
pub enum Storage {
    /// Stored under `/registry/{group}/{resource}/` (`core` for the core group). Versions
    /// of one kind share one storage resource (core/v1 and events.k8s.io/v1 events): the
    /// version whose form is stored has no conversion, every other one converts.
    Stored {
        /// The storage group, e.g. `core` or `apps`.
        group: &'static str,
        /// The storage resource, e.g. `events`.
        resource: &'static str,
        /// How this version maps to the stored form; `None` when it is the stored form.
        conversion: Option<Conversion>,
    },
    /// Never stored: only `create` is served, and it answers with the object the strategy
    /// completed (upstream's review APIs, such as `selfsubjectaccessreviews`).
    Transient,
    /// Never stored: `get` and `list` answer with objects computed on each read (upstream's
    /// `componentstatuses`).
    Computed(&'static dyn Computed),
    /// A custom resource: stored under `/registry/{group}/{plural}/` of its own names, every
    /// served version in the CRD's storage version's form (`conversion.strategy: None`
    /// rewrites `apiVersion` only), through the entry's [`CustomBehaviour`].
    Custom,
}

impl std::fmt::Debug for dyn Computed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Computed")
    }
}

/// A field usable in a `fieldSelector`, read from the object at a JSON pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelectableField {
    /// The selector's field name, e.g. `spec.nodeName`.
    pub name: &'static str,
    /// Where the value lives, e.g. `/spec/nodeName`.
    pub pointer: &'static str,
    /// The value when the field is absent (`""`, or `"false"` for booleans).
    pub default: &'static str,
    /// Where to read instead when the field is absent or empty (`""`: nowhere); a core/v1
    /// Event's `source` falls back to its `reportingController`, as upstream's field set.
    pub fallback: &'static str,
}

impl SelectableField {
    /// A string field whose absence reads as `""`.
    pub const fn string(name: &'static str, pointer: &'static str) -> Self {
        Self {
            name,
            pointer,
            default: "",
            fallback: "",
        }
    }

    /// A string field read from `fallback` when it is absent or empty.
    pub const fn string_or(
        name: &'static str,
        pointer: &'static str,
        fallback: &'static str,
    ) -> Self {
        Self {
            name,
            pointer,
            default: "",
            fallback,
        }
    }

    /// A boolean field whose absence reads as `"false"`.
    pub const fn boolean(name: &'static str, pointer: &'static str) -> Self {
        Self {
            name,
            pointer,
            default: "false",
            fallback: "",
        }
    }

    /// The field's value in `obj`, rendered as upstream's field sets do.
    pub fn value(&self, obj: &Value) -> String {
        let primary = obj.at(self.pointer);
        let unset = matches!(primary, None | Some(Value::Null))
            || primary.and_then(Value::as_str) == Some("");
        let found = if unset && !self.fallback.is_empty() {
            obj.at(self.fallback)
        } else {
            primary
        };
        match found {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => self.default.to_owned(),
        }
    }
}

/// A list of names (short names, categories): borrowed from a `static` entry, or owned by
/// an entry built at run time from a CustomResourceDefinition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Names {
    /// A built-in entry's names.
    Static(&'static [&'static str]),
    /// A custom resource's names.
    Owned(Vec<String>),
}

impl Names {
    /// The names, in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        let (borrowed, owned) = match self {
            Names::Static(s) => (*s, &[][..]),
            Names::Owned(v) => (&[][..], v.as_slice()),
        };
        borrowed
            .iter()
            .copied()
            .chain(owned.iter().map(String::as_str))
    }

    /// Whether there is no name.
    pub fn is_empty(&self) -> bool {
        match self {
            Names::Static(s) => s.is_empty(),
            Names::Owned(v) => v.is_empty(),
        }
    }

    /// Whether `name` is one of the names.
    pub fn contains(&self, name: &str) -> bool {
        self.iter().any(|n| n == name)
    }
}

impl Serialize for Names {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// The names of one served version of a custom resource, from its CRD.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CustomNames {
    /// `spec.group`.
    pub group: String,
    /// The served version's name.
    pub version: String,
    /// `status.acceptedNames.kind`.
    pub kind: String,
    /// `status.acceptedNames.plural`.
    pub plural: String,
    /// `spec.scope == Namespaced`.
    pub namespaced: bool,
    /// `status.acceptedNames.shortNames`.
    pub short_names: Vec<String>,
    /// `status.acceptedNames.categories`.
    pub categories: Vec<String>,
    /// The version's `deprecationWarning` (or upstream's default one) when it is deprecated.
    pub deprecation: Option<String>,
}

/// Replaces a field of an entry in a `const` builder. A `const fn` cannot run destructors, so
/// the replaced value is forgotten instead of dropped: builders only ever replace what
/// [`ResourceDef::of`] set, which borrows `'static` data and owns nothing, so nothing leaks.
/// (Entries built at run time, [`ResourceDef::custom`], never go through the builders.)
const fn replace_field<T>(slot: &mut T, value: T) {
    std::mem::forget(std::mem::replace(slot, value));
}

/// What a resource's bootstrap objects may depend on: the server's configuration.
#[derive(Clone, Copy, Debug)]
pub struct BootstrapContext<'a> {
    /// `--service-cluster-ip-range` (the default ServiceCIDR holds it).
    pub service_ip_range: &'a crate::registry::service_ip::ServiceIpRange,
}

/// The storage a resource's writes go through: the generic store alone, or the generic store
/// with one of the registry's hooks around it ([`crate::registry::store_hooks`], upstream's
/// resources with a REST of their own). A resource names the behaviour it needs; the registry
/// holds how it is done, so `resources/` never depends on the registry's internals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rest {
    /// The generic create, update and delete.
    Generic,
    /// Cluster IPs and node ports allocated under a lock held until the write is stored, given
    /// back on removal, with IPAddress objects kept in step (Services).
    IpAndPortAllocation,
    /// A create binds the pod the object names, and is not stored (Bindings).
    BindPod,
    /// A create is answered by the server's token authenticator, not stored (TokenReviews).
    ReviewToken,
    /// The first delete marks the object Terminating; a delete once its `spec.finalizers` are
    /// gone removes it (Namespaces).
    DeleteAfterFinalize,
}

/// One served resource (one group/version/plural), declared once. Build it with
/// [`ResourceDef::of`] and the `const` builder methods; see the [module docs](self). Custom
/// resources' entries are built at run time ([`ResourceDef::custom`]) and own their names.
pub struct ResourceDef {
    /// API group; empty for core.
    pub group: Cow<'static, str>,
    /// API version, e.g. `v1`.
    pub version: Cow<'static, str>,
    /// Kind, e.g. `Pod`.
    pub kind: Cow<'static, str>,
    /// Plural resource name (the URL segment), e.g. `pods`.
    pub plural: Cow<'static, str>,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// kubectl short names, e.g. `po`.
    pub short_names: Names,
    /// Discovery categories, e.g. `all`.
    pub categories: Names,
    /// The verbs of the main paths; subresources have their own.
    pub verbs: Verbs,
    /// Subresources served under `/{name}/`.
    pub subresources: &'static [Subresource],
    /// Fields usable in `fieldSelector` beyond `metadata.name` and `metadata.namespace`.
    pub fields: &'static [SelectableField],
    /// Where objects live (and how this version converts to the stored form).
    pub storage: Storage,
    /// Decodes a request body as the typed resource and applies the scheme defaults; see
    /// [`ResourceDef::decode`].
    decode: fn(Value) -> Result<Value, String>,
    /// The behaviour the registry asks for (validation, create/update preparation,
    /// graceful deletion, ...).
    pub strategy: StrategyRef,
    /// What the resource's storage does around the generic writes (allocations, a create
    /// answered without storing, a two-step delete); [`Rest::Generic`] for most.
    pub rest: Rest,
    /// Whether objects have a `metadata.generation` and what bumps it (none by default).
    pub generation: Generation,
    /// The `kubectl get` printer; `None` until declared (see [`ResourceDef::table_printer`]).
    printer: Option<Printer>,
    /// The strategic merge patch metadata; `None` until declared (see
    /// [`ResourceDef::patch_schema`]).
    merge_schema: Option<Schema>,
    /// The typed kind behind the OpenAPI schema and strict field validation; `None` for a
    /// custom resource, whose schema its [`CustomBehaviour`] holds.
    pub openapi: Option<TypedKind>,
    /// The objects every cluster starts with, created at start when missing (upstream's
    /// post-start hooks, such as the system priority classes).
    /// A bootstrap object's `status` is written through `/status` after its create (a create
    /// drops it, as upstream's strategies do).
    pub bootstrap_objects: fn(&BootstrapContext<'_>) -> Vec<Value>,
    /// The field manager the bootstrap objects are written as (upstream's producer, e.g.
    /// `api-priority-and-fairness-config-producer-v1`).
    pub bootstrap_field_manager: &'static str,
    /// How a bootstrap object that exists already is brought up to date; `None` leaves it as
    /// it is (upstream reconciles only the RBAC bootstrap policy, adding what is missing).
    pub bootstrap_reconcile: Option<fn(&Value, &Value) -> Reconcile>,
    /// The `Warning` every answer about this resource carries, for a deprecated API
    /// (upstream's deprecated-API warning, e.g. `v1 ComponentStatus is deprecated in v1.19+`).
    pub deprecation: Option<Cow<'static, str>>,
    /// What a custom resource does differently (schema-driven decode and defaults, printer
    /// columns, OpenAPI schema, scale paths); `None` for built-ins.
    pub custom: Option<Arc<dyn CustomBehaviour>>,
}

impl std::fmt::Debug for ResourceDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceDef")
            .field("group", &self.group)
            .field("version", &self.version)
            .field("plural", &self.plural)
            .finish_non_exhaustive()
    }
}

/// The storage group of an API group: `core` for the core group, as upstream's etcd keys.
const fn storage_group(group: &str) -> &str {
    if group.is_empty() { "core" } else { group }
}

impl ResourceDef {
    /// The entry of `K`: group, version, kind, plural and scope from the type, all eight
    /// verbs, stored under its own `{group}/{plural}`, decoded as `K` with no defaults, the
    /// default strategy, no subresources, short names, categories or selectable fields.
    pub const fn of<K>() -> Self
    where
        K: Resource + JsonSchema + Serialize + DeserializeOwned + 'static,
        K::Scope: KindScope,
    {
        Self {
            group: Cow::Borrowed(K::GROUP),
            version: Cow::Borrowed(K::VERSION),
            kind: Cow::Borrowed(K::KIND),
            plural: Cow::Borrowed(K::URL_PATH_SEGMENT),
            namespaced: <K::Scope as KindScope>::NAMESPACED,
            short_names: Names::Static(&[]),
            categories: Names::Static(&[]),
            verbs: Verbs::ALL,
            subresources: &[],
            fields: &[],
            storage: Storage::Stored {
                group: storage_group(K::GROUP),
                resource: K::URL_PATH_SEGMENT,
                conversion: None,
            },
            decode: decode_as::<K>,
            strategy: StrategyRef::Static(&DefaultStrategy),
            rest: Rest::Generic,
            generation: Generation::None,
            printer: None,
            merge_schema: None,
            openapi: Some(TypedKind::of::<K>()),
            bootstrap_objects: |_| Vec::new(),
            bootstrap_field_manager: "kube-apiserver",
            bootstrap_reconcile: None,
            deprecation: None,
            custom: None,
        }
    }

    /// The entry of one served version of a custom resource, built at run time from its
    /// CRD: stored under the CRD's group and plural, all eight verbs, no printer or strategic
    /// merge schema of its own (its `behaviour` prints it; strategic merge patches are
    /// refused with 415, as upstream), decoded, defaulted and documented by `behaviour`.
    pub fn custom(
        names: CustomNames,
        subresources: &'static [Subresource],
        strategy: Arc<dyn Strategy>,
        behaviour: Arc<dyn CustomBehaviour>,
    ) -> Self {
        Self {
            group: Cow::Owned(names.group),
            version: Cow::Owned(names.version),
            kind: Cow::Owned(names.kind),
            plural: Cow::Owned(names.plural),
            namespaced: names.namespaced,
            short_names: Names::Owned(names.short_names),
            categories: Names::Owned(names.categories),
            verbs: Verbs::ALL,
            subresources,
            fields: &[],
            storage: Storage::Custom,
            decode: |obj| Ok(obj),
            strategy: StrategyRef::Shared(strategy),
            rest: Rest::Generic,
            // Upstream's custom resource strategy: 1 on create; its `PrepareForUpdate` bumps
            // on any change outside metadata (see the custom kind's strategy).
            generation: Generation::Spec,
            printer: None,
            merge_schema: None,
            openapi: None,
            bootstrap_objects: |_| Vec::new(),
            bootstrap_field_manager: "kube-apiserver",
            bootstrap_reconcile: None,
            deprecation: names.deprecation.map(Cow::Owned),
            custom: Some(behaviour),
        }
    }

    /// Sets the kubectl short names.
    pub const fn short_names(mut self, names: &'static [&'static str]) -> Self {
        replace_field(&mut self.short_names, Names::Static(names));
        self
    }

    /// Sets the discovery categories (`all`).
    pub const fn categories(mut self, categories: &'static [&'static str]) -> Self {
        replace_field(&mut self.categories, Names::Static(categories));
        self
    }

    /// Sets the verbs of the main paths ([`Verbs::READ_ONLY`] for a computed resource).
    pub const fn verbs(mut self, verbs: Verbs) -> Self {
        self.verbs = verbs;
        self
    }

    /// Sets the served subresources.
    pub const fn subresources(mut self, subresources: &'static [Subresource]) -> Self {
        self.subresources = subresources;
        self
    }

    /// Sets the selectable fields beyond `metadata.name` and `metadata.namespace`.
    pub const fn fields(mut self, fields: &'static [SelectableField]) -> Self {
        self.fields = fields;
        self
    }

    /// Declares how objects keep `metadata.generation` (see [`Generation`]).
    pub const fn generation(mut self, generation: Generation) -> Self {
        self.generation = generation;
        self
    }

    /// Replaces the plain typed decode with one that also applies the scheme defaults
    /// (`SetDefaults_*`), written with [`typed_roundtrip`](crate::registry::strategy::typed_roundtrip).
    pub const fn decode_with(mut self, decode: fn(Value) -> Result<Value, String>) -> Self {
        self.decode = decode;
        self
    }

    /// Sets the strategy (behaviour beyond the generic rules).
    pub const fn strategy(mut self, strategy: &'static dyn Strategy) -> Self {
        replace_field(&mut self.strategy, StrategyRef::Static(strategy));
        self
    }

    /// Sets the `kubectl get` printer ([`printers::GENERIC`](crate::table::printers::GENERIC)
    /// for NAME and CREATED AT only, as upstream's default table convertor).
    pub const fn printer(mut self, printer: Printer) -> Self {
        self.printer = Some(printer);
        self
    }

    /// Sets the root of the strategic merge patch metadata (the kind's `patchStrategy` /
    /// `patchMergeKey` tags, from [`strategic_merge::kinds`](crate::strategic_merge::kinds)).
    pub const fn merge_schema(mut self, root: &'static TypeDef) -> Self {
        self.merge_schema = Some(Schema::new(root));
        self
    }

    /// Stores objects under another version's storage resource, converting with
    /// `conversion` (events.k8s.io/v1 events are stored as core/v1 events).
    pub const fn stored_as(
        mut self,
        group: &'static str,
        resource: &'static str,
        conversion: Conversion,
    ) -> Self {
        self.storage = Storage::Stored {
            group,
            resource,
            conversion: Some(conversion),
        };
        self
    }

    /// Never stores objects: the resource serves `create` only (a review API).
    pub const fn transient(mut self) -> Self {
        self.storage = Storage::Transient;
        self.verbs = Verbs::CREATE;
        self
    }

    /// Computes objects on every read instead of storing them: the resource serves `get` and
    /// `list` only (upstream's read-only `componentstatuses`).
    pub const fn computed(mut self, computed: &'static dyn Computed) -> Self {
        self.storage = Storage::Computed(computed);
        self.verbs = Verbs::READ_ONLY;
        self
    }

    /// Names the objects created at start when missing (see
    /// [`ResourceDef::bootstrap_objects`]).
    pub const fn bootstrap(mut self, objects: fn(&BootstrapContext<'_>) -> Vec<Value>) -> Self {
        self.bootstrap_objects = objects;
        self
    }

    /// Checks `apiVersion` and `kind` of a request body against the resource (both optional).
    pub fn check_kind(&self, body: Value) -> Result<Value, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {})",
                self.kind
            )));
        }
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
        if !kind.is_empty() && kind != self.kind {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): kind {kind:?} does not match",
                self.kind
            )));
        }
        let api_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if !api_version.is_empty() && api_version != self.api_version() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                self.api_version()
            )));
        }
        Ok(body)
    }

    /// Names the storage the resource's writes go through (see [`Rest`]).
    pub const fn rest(mut self, rest: Rest) -> Self {
        self.rest = rest;
        self
    }

    /// Brings a bootstrap object that exists already up to date with `reconcile(existing,
    /// expected)` at every start (see [`ResourceDef::bootstrap_reconcile`]).
    pub const fn reconcile_bootstrap(mut self, reconcile: fn(&Value, &Value) -> Reconcile) -> Self {
        self.bootstrap_reconcile = Some(reconcile);
        self
    }

    /// As [`Self::bootstrap`], written as the field manager `manager`.
    pub const fn bootstrap_as(
        mut self,
        manager: &'static str,
        objects: fn(&BootstrapContext<'_>) -> Vec<Value>,
    ) -> Self {
        self.bootstrap_objects = objects;
        self.bootstrap_field_manager = manager;
        self
    }

    /// Marks the resource deprecated: every answer carries `warning` (as upstream warns
    /// about deprecated APIs).
    pub const fn deprecated(mut self, warning: &'static str) -> Self {
        replace_field(&mut self.deprecation, Some(Cow::Borrowed(warning)));
        self
    }

    /// The hook computing the objects of a [computed](Self::computed) resource.
    pub fn computed_by(&self) -> Option<&'static dyn Computed> {
        match self.storage {
            Storage::Computed(c) => Some(c),
            _ => None,
        }
    }

    /// `apiVersion` of objects, e.g. `apps/v1` or `v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The singular name, e.g. `pod`: the lower-cased kind, as upstream's discovery; a
    /// custom resource's is its CRD's `names.singular`.
    pub fn singular(&self) -> String {
        match &self.custom {
            Some(custom) => custom.singular().to_owned(),
            None => self.kind.to_ascii_lowercase(),
        }
    }

    /// The group/resource used in error messages.
    pub fn group_resource(&self) -> GroupResource<'_> {
        GroupResource {
            group: &self.group,
            resource: &self.plural,
        }
    }

    /// The group/kind used in `Invalid` errors.
    pub fn group_kind(&self) -> GroupKind<'_> {
        GroupKind {
            group: &self.group,
            kind: &self.kind,
        }
    }

    /// Whether this is a custom resource, served from a CustomResourceDefinition.
    pub fn is_custom(&self) -> bool {
        self.custom.is_some()
    }

    /// Identifies the entry among those served now and before: two entries alive at once
    /// never share it, and a custom resource's entry rebuilt from a changed CRD gets a new
    /// one (the event cache keys decoded objects by it).
    pub fn id(&self) -> usize {
        match &self.custom {
            Some(custom) => custom.id(),
            None => std::ptr::from_ref::<ResourceDef>(self) as usize,
        }
    }

    /// Whether the main paths serve `verb`.
    pub fn serves(&self, verb: Verbs) -> bool {
        self.verbs.contains(verb)
    }

    /// Whether the resource serves a subresource.
    pub fn has_subresource(&self, sub: Subresource) -> bool {
        self.subresources.contains(&sub)
    }

    /// Whether `.status` is a separate subresource (the main resource keeps the stored status
    /// and `/status` keeps the stored spec).
    pub fn has_status(&self) -> bool {
        self.has_subresource(Subresource::Status)
    }

    /// The selectable field named `name`, including the generic metadata ones.
    pub fn field(&self, name: &str) -> Option<SelectableField> {
        const GENERIC: [SelectableField; 2] = [
            SelectableField::string("metadata.name", "/metadata/name"),
            SelectableField::string("metadata.namespace", "/metadata/namespace"),
        ];
        GENERIC
            .iter()
            .chain(self.fields.iter())
            .find(|f| f.name == name)
            .copied()
    }

    /// Whether answers can be rendered as a `meta.k8s.io` Table: not for a
    /// [`Storage::Transient`] resource, whose upstream REST storage (a review API, bindings)
    /// has no `TableConvertor`.
    pub fn serves_tables(&self) -> bool {
        !matches!(self.storage, Storage::Transient)
    }

    /// Whether objects are stored (not a [`Storage::Transient`] or [`Storage::Computed`]
    /// resource).
    pub fn is_stored(&self) -> bool {
        matches!(self.storage, Storage::Stored { .. } | Storage::Custom)
    }

    /// The `(group, resource)` objects are stored under. A transient or computed resource
    /// names its own, under which nothing is ever written; a custom resource its CRD's.
    pub fn storage_resource(&self) -> (&str, &str) {
        match self.storage {
            Storage::Stored {
                group, resource, ..
            } => (group, resource),
            Storage::Transient | Storage::Computed(_) | Storage::Custom => {
                (storage_group(&self.group), &self.plural)
            }
        }
    }

    /// The storage key prefix of every object of this resource (ends with `/`).
    pub fn storage_root(&self) -> String {
        let (group, resource) = self.storage_resource();
        format!("/registry/{group}/{resource}/")
    }

    /// The storage key prefix of a namespace, or of everything when `namespace` is `None`.
    pub fn storage_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/", self.storage_root()),
            _ => self.storage_root(),
        }
    }

    /// The storage key of one object.
    pub fn storage_key(&self, namespace: &str, name: &str) -> String {
        if self.namespaced {
            format!("{}{namespace}/{name}", self.storage_root())
        } else {
            format!("{}{name}", self.storage_root())
        }
    }

    /// Decodes an incoming object as the typed resource, applies the scheme defaults and
    /// re-encodes it: unknown fields are dropped and a wrong type is an error message
    /// (answered as 400 BadRequest). Empty metadata fields are omitted as Go's encoding
    /// omits them ([`object::omit_empty_meta`]), for built-in and custom resources alike.
    pub fn decode(&self, obj: Value) -> Result<Value, String> {
        let mut obj = match &self.custom {
            Some(custom) => custom.decode(obj)?,
            None => (self.decode)(obj)?,
        };
        object::omit_empty_meta(&mut obj);
        Ok(obj)
    }

    /// Converts a stored object to this resource's version (a custom resource's also gets
    /// its schema's defaults, as upstream defaults custom resources read from etcd).
    pub fn from_storage(&self, obj: Value) -> Value {
        if let Some(custom) = &self.custom {
            return custom.stored_to_served(obj);
        }
        match self.storage {
            Storage::Stored {
                conversion: Some(c),
                ..
            } => (c.from_storage)(obj),
            _ => obj,
        }
    }

    /// Whether [`to_storage`](Self::to_storage) leaves every object as it is (no conversion,
    /// not a custom resource).
    pub fn stores_as_served(&self) -> bool {
        self.custom.is_none()
            && !matches!(
                self.storage,
                Storage::Stored {
                    conversion: Some(_),
                    ..
                }
            )
    }

    /// Converts an object of this resource's version to the stored form.
    pub fn to_storage(&self, obj: Value) -> Value {
        if let Some(custom) = &self.custom {
            return custom.served_to_stored(obj);
        }
        match self.storage {
            Storage::Stored {
                conversion: Some(c),
                ..
            } => (c.to_storage)(obj),
            _ => obj,
        }
    }

    /// The `kubectl get` printer; NAME and CREATED AT when none was declared. Printers read the
    /// stored form (a converted version is printed as its stored version is).
    pub fn table_printer(&self) -> Printer {
        self.printer.unwrap_or(Printer::GENERIC)
    }

    /// The `meta.k8s.io/v1` Table of `objects` (in this entry's version) as `kubectl get`
    /// shows them: the declared printer over their stored form, or a custom resource's
    /// printer columns.
    pub fn table(&self, objects: &[Value], include: IncludeObject, now: Timestamp) -> Value {
        match &self.custom {
            Some(custom) => custom.table(objects, include, now),
            None => {
                let stored: Vec<Value> =
                    objects.iter().map(|o| self.to_storage(o.clone())).collect();
                crate::table::table_for(self.table_printer(), &stored, include, now)
            }
        }
    }

    /// Whether a printer was declared (possibly the generic one, on purpose).
    pub fn declares_printer(&self) -> bool {
        self.printer.is_some()
    }

    /// The strategic merge patch metadata; every list replaced when none was declared.
    pub fn patch_schema(&self) -> Schema {
        self.merge_schema.unwrap_or(Schema::unknown())
    }

    /// Whether a strategic merge schema was declared.
    pub fn declares_merge_schema(&self) -> bool {
        self.merge_schema.is_some()
    }

    /// An `Invalid` error naming the object, unless `errs` is empty.
    pub fn check(&self, name: &str, errs: Vec<FieldError>) -> Result<(), ApiError> {
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(self.group_kind(), name, &errs))
        }
    }
}

/// Entries of shapes no served resource has yet (read-only, create-only and never stored, two
/// versions over one storage), for the tests of the layers that read verbs and storage.
#[cfg(test)]
pub(crate) mod fixtures {
    use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
    use k8s_openapi::api::autoscaling::v1 as hpa_v1;
    use k8s_openapi::api::autoscaling::v2 as hpa_v2;
    use k8s_openapi::api::core::v1::ComponentStatus;
    use serde_json::{Value, json};

    use super::{Conversion, ResourceDef, Verbs};
    use crate::registry::strategy::Strategy;
    use crate::strategic_merge::kinds;
    use crate::table::printers;
    use crate::validation::FieldError;

    /// core/v1 componentstatuses: read-only.
    pub static COMPONENT_STATUSES: ResourceDef = ResourceDef::of::<ComponentStatus>()
        .short_names(&["cs"])
        .verbs(Verbs::READ_ONLY)
        .printer(printers::GENERIC)
        .merge_schema(&kinds::METADATA_ONLY);

    /// authorization.k8s.io/v1 selfsubjectaccessreviews: create-only, never stored, every
    /// review allowed.
    pub static ACCESS_REVIEWS: ResourceDef = ResourceDef::of::<SelfSubjectAccessReview>()
        .transient()
        .strategy(&AllowAll)
        .printer(printers::GENERIC)
        .merge_schema(&kinds::METADATA_ONLY);

    /// Both.
    pub static ALL: &[&ResourceDef] = &[&COMPONENT_STATUSES, &ACCESS_REVIEWS];

    /// autoscaling/v2 horizontalpodautoscalers: the stored version.
    pub static HPAS_V2: ResourceDef = ResourceDef::of::<hpa_v2::HorizontalPodAutoscaler>()
        .short_names(&["hpa"])
        .printer(printers::GENERIC)
        .merge_schema(&kinds::METADATA_ONLY);

    /// autoscaling/v1 horizontalpodautoscalers, stored as v2.
    pub static HPAS_V1: ResourceDef = ResourceDef::of::<hpa_v1::HorizontalPodAutoscaler>()
        .short_names(&["hpa"])
        .stored_as(
            "autoscaling",
            "horizontalpodautoscalers",
            Conversion {
                to_storage: hpa_v1_to_v2,
                from_storage: hpa_v2_to_v1,
            },
        )
        .printer(printers::GENERIC)
        .merge_schema(&kinds::METADATA_ONLY);

    /// Two versions over one storage, the preferred one first.
    pub static HPAS: &[&ResourceDef] = &[&HPAS_V2, &HPAS_V1];

    /// v1's CPU target as v2's one metric (upstream's conversion also keeps the other
    /// metrics in an annotation; the fixture needs only this one).
    fn hpa_v1_to_v2(mut obj: Value) -> Value {
        obj["apiVersion"] = json!("autoscaling/v2");
        let target = obj
            .get_mut("spec")
            .and_then(Value::as_object_mut)
            .and_then(|spec| spec.remove("targetCPUUtilizationPercentage"));
        if let Some(target) = target {
            obj["spec"]["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": target}}}]);
        }
        obj
    }

    /// v2's CPU utilization metric as v1's CPU target.
    fn hpa_v2_to_v1(mut obj: Value) -> Value {
        obj["apiVersion"] = json!("autoscaling/v1");
        let metrics = obj
            .get_mut("spec")
            .and_then(Value::as_object_mut)
            .and_then(|spec| spec.remove("metrics"));
        let target = metrics
            .as_ref()
            .and_then(|m| m.pointer("/0/resource/target/averageUtilization"))
            .cloned();
        if let Some(target) = target {
            obj["spec"]["targetCPUUtilizationPercentage"] = target;
        }
        obj
    }

    /// Answers every review with `allowed: true`; a review must name resource or
    /// non-resource attributes, as upstream's `ValidateSelfSubjectAccessReviewSpec`.
    struct AllowAll;

    impl Strategy for AllowAll {
        fn prepare_for_create(&self, obj: &mut Value) {
            obj["status"] = json!({"allowed": true});
        }

        fn validate(&self, obj: &Value) -> Vec<FieldError> {
            let spec = obj.get("spec");
            let named = |field: &str| spec.and_then(|s| s.get(field)).is_some();
            if named("resourceAttributes") || named("nonResourceAttributes") {
                return Vec::new();
            }
            vec![FieldError::invalid(
                "spec.resourceAttributes",
                Value::Null,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )]
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
    use k8s_openapi::api::core::v1::{ComponentStatus, Node};
    use serde_json::json;

    use super::*;

    /// Built at compile time: the builder is `const` all the way.
    static DEPLOYMENTS: ResourceDef = ResourceDef::of::<Deployment>()
        .short_names(&["deploy"])
        .categories(&["all"])
        .subresources(&[Subresource::Status, Subresource::Scale])
        .fields(&[SelectableField::boolean("spec.paused", "/spec/paused")]);

    #[test]
    fn names_and_scope_come_from_the_type() {
        assert_eq!(
            (
                &*DEPLOYMENTS.group,
                &*DEPLOYMENTS.version,
                &*DEPLOYMENTS.kind,
                &*DEPLOYMENTS.plural
            ),
            ("apps", "v1", "Deployment", "deployments")
        );
        assert!(DEPLOYMENTS.namespaced);
        assert_eq!(DEPLOYMENTS.singular(), "deployment");
        assert_eq!(DEPLOYMENTS.api_version(), "apps/v1");
        assert_eq!(DEPLOYMENTS.openapi.map(|k| k.kind), Some("Deployment"));
        let nodes = ResourceDef::of::<Node>();
        assert!(!nodes.namespaced);
        assert_eq!(nodes.api_version(), "v1");
        assert_eq!(nodes.storage_resource(), ("core", "nodes"));
    }

    #[test]
    fn keys_and_prefixes() {
        assert_eq!(
            DEPLOYMENTS.storage_key("ns", "a"),
            "/registry/apps/deployments/ns/a"
        );
        assert_eq!(
            DEPLOYMENTS.storage_prefix(Some("ns")),
            "/registry/apps/deployments/ns/"
        );
        assert_eq!(
            DEPLOYMENTS.storage_prefix(None),
            "/registry/apps/deployments/"
        );
        let nodes = ResourceDef::of::<Node>();
        assert_eq!(nodes.storage_key("", "n1"), "/registry/core/nodes/n1");
        assert_eq!(nodes.storage_prefix(Some("ns")), "/registry/core/nodes/");
    }

    #[test]
    fn selectable_fields_render_values() {
        let obj = json!({"metadata": {"name": "a"}, "spec": {"paused": true}});
        let value = |name: &str, obj: &Value| DEPLOYMENTS.field(name).map(|f| f.value(obj));
        assert_eq!(value("metadata.name", &obj), Some("a".to_owned()));
        assert_eq!(value("metadata.namespace", &obj), Some(String::new()));
        assert_eq!(value("spec.paused", &obj), Some("true".to_owned()));
        assert_eq!(value("spec.paused", &json!({})), Some("false".to_owned()));
        assert!(DEPLOYMENTS.field("spec.replicas").is_none());
    }

    #[test]
    fn verbs_render_in_discovery_order() {
        assert_eq!(
            DEPLOYMENTS.verbs.names(),
            [
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch"
            ]
        );
        let read_only = ResourceDef::of::<ComponentStatus>().verbs(Verbs::READ_ONLY);
        assert_eq!(read_only.verbs.names(), ["get", "list"]);
        assert!(read_only.serves(Verbs::GET));
        assert!(!read_only.serves(Verbs::CREATE));
        assert!(!read_only.serves(Verbs::WATCH));
    }

    #[test]
    fn a_transient_resource_is_create_only_and_never_stored() {
        let reviews = ResourceDef::of::<SelfSubjectAccessReview>().transient();
        assert!(!reviews.is_stored());
        assert_eq!(reviews.verbs.names(), ["create"]);
        assert!(!reviews.namespaced);
    }

    #[test]
    fn a_shared_storage_converts_and_an_own_storage_does_not() {
        let conversion = Conversion {
            to_storage: |mut o| {
                o["stored"] = json!(true);
                o
            },
            from_storage: |mut o| {
                if let Some(m) = o.as_object_mut() {
                    m.remove("stored");
                }
                o
            },
        };
        let shared = ResourceDef::of::<Deployment>().stored_as("apps", "shared", conversion);
        assert_eq!(shared.storage_root(), "/registry/apps/shared/");
        let stored = shared.to_storage(json!({"a": 1}));
        assert_eq!(stored, json!({"a": 1, "stored": true}));
        assert_eq!(shared.from_storage(stored), json!({"a": 1}));
        assert_eq!(DEPLOYMENTS.to_storage(json!({"a": 1})), json!({"a": 1}));
    }

    #[test]
    fn undeclared_printer_and_merge_schema_fall_back_and_say_so() {
        assert!(!DEPLOYMENTS.declares_printer());
        assert!(!DEPLOYMENTS.declares_merge_schema());
        assert_eq!(DEPLOYMENTS.table_printer().columns().len(), 2);
        assert!(DEPLOYMENTS.patch_schema().root().fields.is_empty());
    }
}
