//! The seam custom resources plug into a [`ResourceDef`](crate::registry::resource::ResourceDef): what an entry built at run time from a CustomResourceDefinition does that a built-in's `static` parts cannot.
//!
//! A built-in entry decodes bodies as its k8s-openapi type, prints with a compiled printer and
//! documents itself with the type's schema. A custom resource has none of these: its schema,
//! printer columns and scale paths come from the CRD, so its entry carries one
//! [`CustomBehaviour`] (implemented in [`crate::apiextensions`]) that the registry, the table
//! printer and the OpenAPI documents ask instead.

use jiff::Timestamp;
use serde_json::Value;

use crate::table::IncludeObject;

/// Where the `/scale` subresource of a custom resource reads and writes (the CRD's
/// `subresources.scale`), as JSON pointers into the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath` (`.spec.replicas` → `/spec/replicas`).
    pub spec_replicas: String,
    /// `statusReplicasPath`.
    pub status_replicas: String,
    /// `labelSelectorPath`, if declared: a string (serialized selector) at that path.
    pub label_selector: Option<String>,
}

/// What a custom resource's entry does that a built-in's `static` parts cannot.
pub trait CustomBehaviour: Send + Sync + 'static {
    /// Unique among every custom entry built in this process: the event cache keys decoded
    /// objects by it, so a rebuilt entry (a changed CRD) never reads an old entry's decoding.
    fn id(&self) -> usize;

    /// The CRD's `names.singular`.
    fn singular(&self) -> &str;

    /// Decodes a request body (already known to be an object of the entry's kind): unknown
    /// fields pruned and the schema's defaults applied, as upstream's custom resource codec.
    fn decode(&self, obj: Value) -> Result<Value, String>;

    /// The paths (`spec.foo`, `spec.items[0].bar`) [`Self::decode`] would prune from `obj`,
    /// for `fieldValidation` (warned about, or a 400 under `Strict`).
    fn unknown_fields(&self, obj: &Value) -> Vec<String>;

    /// A stored object as this version serves it: `apiVersion` rewritten (conversion
    /// strategy `None`) and the version's defaults applied (upstream defaults on read).
    fn stored_to_served(&self, obj: Value) -> Value;

    /// An object of this version in the stored version's form.
    fn served_to_stored(&self, obj: Value) -> Value;

    /// The `meta.k8s.io/v1` Table of `objects` (this version's form): the CRD's
    /// `additionalPrinterColumns` between NAME and AGE, as upstream's custom resource
    /// table convertor.
    fn table(&self, objects: &[Value], include: IncludeObject, now: Timestamp) -> Value;

    /// The version's OpenAPI v3 schema of the whole object (`apiVersion`, `kind`,
    /// `metadata` included), as the `/openapi/v3` document publishes it.
    fn openapi_schema(&self) -> Value;

    /// Where `/scale` reads and writes; `None` without a scale subresource.
    fn scale_paths(&self) -> Option<&ScalePaths>;
}
