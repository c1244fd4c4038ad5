//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded to JSON.
//!
//! kubectl's typed clients (`kubectl create deployment|namespace|configmap`, `drain`)
//! send protobuf and do not fall back to JSON. A body is the magic `k8s\0` followed by a
//! `runtime.Unknown` message: `typeMeta {apiVersion, kind}`, and `raw`, the object's own
//! protobuf encoding. [`decode_to_json`] turns it into the JSON object Go's JSON encoding
//! of the same object would be, so the REST layer handles one format.
//!
//! The envelope is decoded with `prost` and the `k8s-pb` message; the object itself with a
//! schema-driven decoder over tables generated from `k8s-pb` (field numbers) and
//! `k8s-openapi` (JSON names) by `generate.py`. `k8s-pb` has no JSON support, and a table
//! keeps the ~450 message types reachable from the served kinds out of hand-written code.

mod decode;
mod error;
mod schema;
mod schema_gen;
mod wire;

pub use error::{Error, Result};

use prost::Message as _;
use serde_json::Value;

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Decodes a protobuf request body into the object's JSON, with `apiVersion` and `kind`
/// from the envelope. Supported: the built-in kinds kcm serves (`generate.py`'s `ROOTS`,
/// apiextensions.k8s.io/v1 `CustomResourceDefinition` among them), and `DeleteOptions` of
/// any group version. Custom resources are JSON only, as upstream.
pub fn decode_to_json(body: &[u8]) -> Result<Value> {
    let rest = body.strip_prefix(MAGIC).ok_or(Error::MissingMagic)?;
    let envelope = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(rest)
        .map_err(|e| Error::Envelope(e.to_string()))?;
    if let Some(encoding) = envelope.content_encoding.filter(|e| !e.is_empty()) {
        return Err(Error::UnsupportedEncoding(encoding));
    }
    let type_meta = envelope.type_meta.ok_or(Error::MissingTypeMeta)?;
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let root = root(&api_version, &kind).ok_or_else(|| Error::UnsupportedKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    let mut object = decode::message(envelope.raw.as_deref().unwrap_or_default(), root)?;
    object.insert("apiVersion".to_owned(), Value::String(api_version));
    object.insert("kind".to_owned(), Value::String(kind));
    Ok(Value::Object(object))
}

/// Whether bodies of `apiVersion`/`kind` can be decoded: the generated tables have a root
/// message for them (`generate.py`'s `ROOTS`).
pub fn decodes(api_version: &str, kind: &str) -> bool {
    root(api_version, kind).is_some()
}

/// The index of the root message of `apiVersion`/`kind`.
fn root(api_version: &str, kind: &str) -> Option<u16> {
    schema_gen::ROOTS
        .iter()
        .find(|(v, k, _)| *k == kind && (*v == api_version || *v == "*"))
        .map(|&(_, _, index)| index)
}

#[cfg(test)]
mod tests;
