//! Content negotiation of GET answers: plain JSON, `meta.k8s.io` Tables (kubectl get) or `PartialObjectMetadata` (metadata informers).
//!
//! Clients name the representation in `Accept`, e.g. kubectl's
//! `application/json;as=Table;v=v1;g=meta.k8s.io,application/json` or a metadata informer's
//! `application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`. The first range the
//! server can produce wins; `application/json` (or nothing) is the object itself.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::pointer::At;
use crate::registry::resource::ResourceDef;
use crate::table::IncludeObject;

/// The 406 message, in upstream's words (`errNotAcceptable`) with the media types this server
/// encodes answers in (it decodes protobuf bodies but never writes protobuf).
const NOT_ACCEPTABLE: &str =
    "only the following media types are accepted: application/json, application/yaml";

/// The representation an answer is rendered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Representation {
    /// The object or list itself.
    Json,
    /// A `meta.k8s.io` `Table` (`version` is `v1` or `v1beta1`).
    Table {
        /// The meta.k8s.io version asked for.
        version: &'static str,
        /// What each row's `object` holds (`includeObject`).
        include: IncludeObject,
    },
    /// `PartialObjectMetadata` / `PartialObjectMetadataList` (metadata only).
    Metadata {
        /// The meta.k8s.io version asked for.
        version: &'static str,
    },
}

impl Representation {
    /// The representation `Accept` asks of an answer about `def`; `include_object` is the
    /// `includeObject` query parameter. An `Accept` naming only representations this server
    /// cannot produce for `def` is a 406 (upstream's `NegotiateOutputMediaType`, where a Table
    /// needs the resource's `TableConvertor`).
    pub fn negotiate(
        def: &ResourceDef,
        headers: &HeaderMap,
        include_object: Option<&str>,
    ) -> Result<Self> {
        let accept = headers
            .get(ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if accept.trim().is_empty() {
            return Ok(Representation::Json);
        }
        let include = match include_object {
            None => IncludeObject::default(),
            Some(v) => IncludeObject::parse(v).ok_or_else(|| {
                ApiError::bad_request(format!("invalid includeObject value {v:?}"))
            })?,
        };
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let (mut as_kind, mut group, mut version) = ("", "", "");
            for param in parts {
                match param.split_once('=') {
                    Some(("as", v)) => as_kind = v,
                    Some(("g", v)) => group = v,
                    Some(("v", v)) => version = v,
                    _ => {}
                }
            }
            let json_like = matches!(
                media.as_str(),
                "application/json" | "application/*" | "*/*" | "application/yaml"
            );
            if !json_like {
                continue;
            }
            if as_kind.is_empty() {
                return Ok(Representation::Json);
            }
            let version = match (group, version) {
                ("meta.k8s.io", "v1") => "v1",
                ("meta.k8s.io", "v1beta1") => "v1beta1",
                _ => continue,
            };
            match as_kind {
                "Table" if def.serves_tables() => {
                    return Ok(Representation::Table { version, include });
                }
                "PartialObjectMetadata" | "PartialObjectMetadataList" => {
                    return Ok(Representation::Metadata { version });
                }
                _ => continue,
            }
        }
        Err(ApiError::not_acceptable(NOT_ACCEPTABLE))
    }

    /// The `Content-Type` of answers in this representation.
    fn content_type(self, list: bool) -> String {
        match self {
            Representation::Json => "application/json".to_owned(),
            Representation::Table { version, .. } => {
                format!("application/json;as=Table;v={version};g=meta.k8s.io")
            }
            Representation::Metadata { version } => {
                let kind = if list {
                    "PartialObjectMetadataList"
                } else {
                    "PartialObjectMetadata"
                };
                format!("application/json;as={kind};v={version};g=meta.k8s.io")
            }
        }
    }

    /// Renders an object or `{Kind}List` (a `Status` is always sent as is).
    pub fn render(self, def: &ResourceDef, code: StatusCode, value: &Value) -> Response {
        let is_status = value.get("kind").and_then(Value::as_str) == Some("Status");
        let items = value.get("items").and_then(Value::as_array);
        let (body, content_type) = match (self, is_status, items) {
            (Representation::Json, _, _) | (_, true, _) => {
                (value.clone(), Representation::Json.content_type(false))
            }
            (Representation::Table { version, include }, false, items) => {
                let objects: &[Value] = match items {
                    Some(items) => items,
                    None => std::slice::from_ref(value),
                };
                let mut table = def.table(objects, include, jiff::Timestamp::now());
                table["apiVersion"] = json!(format!("meta.k8s.io/{version}"));
                if items.is_some() {
                    table["metadata"] = list_metadata(value);
                }
                (table, self.content_type(false))
            }
            (Representation::Metadata { version }, false, Some(items)) => {
                let items: Vec<Value> = items.iter().map(|o| partial(o, version)).collect();
                let list = json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": format!("meta.k8s.io/{version}"),
                    "metadata": list_metadata(value),
                    "items": items,
                });
                (list, self.content_type(true))
            }
            (Representation::Metadata { version }, false, None) => {
                (partial(value, version), self.content_type(false))
            }
        };
        let mut response = Response::new(Body::from(serde_json::to_vec(&body).unwrap_or_default()));
        *response.status_mut() = code;
        if let Ok(ct) = HeaderValue::from_str(&content_type) {
            response.headers_mut().insert(CONTENT_TYPE, ct);
        }
        response
    }

    /// Re-renders one encoded watch line: object events become one-row Tables or
    /// `PartialObjectMetadata`; BOOKMARK and ERROR events pass through.
    pub fn render_watch_line(self, def: &ResourceDef, line: Bytes) -> Bytes {
        if self == Representation::Json {
            return line;
        }
        let Ok(mut event) = serde_json::from_slice::<Value>(&line) else {
            return line;
        };
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(kind, "ADDED" | "MODIFIED" | "DELETED") {
            return line;
        }
        let object = event.get("object").cloned().unwrap_or(Value::Null);
        event["object"] = match self {
            Representation::Json => object,
            Representation::Table { version, include } => {
                let mut table = def.table(
                    std::slice::from_ref(&object),
                    include,
                    jiff::Timestamp::now(),
                );
                table["apiVersion"] = json!(format!("meta.k8s.io/{version}"));
                table["metadata"] = json!({"resourceVersion": object.at("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)});
                table
            }
            Representation::Metadata { version } => partial(&object, version),
        };
        let mut out = serde_json::to_vec(&event).unwrap_or_default();
        out.push(b'\n');
        Bytes::from(out)
    }

    /// The `Content-Type` of a watch in this representation.
    pub fn watch_content_type(self) -> String {
        self.content_type(false)
    }
}

/// A list's `metadata` (`resourceVersion`, `continue`).
fn list_metadata(list: &Value) -> Value {
    list.get("metadata").cloned().unwrap_or_else(|| json!({}))
}

/// An object as `PartialObjectMetadata`.
fn partial(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::pod::PODS;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_str(v).expect("header"));
        h
    }

    #[test]
    fn negotiation() {
        let cases = [
            ("none", "", Some(Representation::Json)),
            ("json", "application/json", Some(Representation::Json)),
            (
                "kubectl get",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
                Some(Representation::Table {
                    version: "v1",
                    include: IncludeObject::Metadata,
                }),
            ),
            (
                "metadata informer",
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                Some(Representation::Metadata { version: "v1" }),
            ),
            (
                "unknown as falls back",
                "application/json;as=Foo;v=v1;g=meta.k8s.io,application/json",
                Some(Representation::Json),
            ),
            (
                "protobuf then json",
                "application/vnd.kubernetes.protobuf, */*",
                Some(Representation::Json),
            ),
            ("only protobuf", "application/vnd.kubernetes.protobuf", None),
        ];
        for (name, header, want) in cases {
            let got = Representation::negotiate(&PODS, &accept(header), None).ok();
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn a_resource_without_tables_answers_406_to_a_table_only_accept() {
        let reviews = &crate::resources::authorization::SELF_SUBJECT_ACCESS_REVIEWS;
        let table_only = accept("application/json;as=Table;v=v1;g=meta.k8s.io");
        let err = Representation::negotiate(reviews, &table_only, None).expect_err("406");
        assert_eq!((err.code, err.reason), (406, "NotAcceptable"));
        assert_eq!(err.message, NOT_ACCEPTABLE);
        // kubectl's Accept falls back to the object itself.
        let with_fallback = accept("application/json;as=Table;v=v1;g=meta.k8s.io,application/json");
        assert_eq!(
            Representation::negotiate(reviews, &with_fallback, None).ok(),
            Some(Representation::Json)
        );
        assert!(matches!(
            Representation::negotiate(&PODS, &table_only, None),
            Ok(Representation::Table { version: "v1", .. })
        ));
    }

    #[test]
    fn table_and_metadata_rendering() {
        let pod = json!({"metadata": {"name": "p", "namespace": "default", "resourceVersion": "3"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Pending"}});
        let table = Representation::Table {
            version: "v1",
            include: IncludeObject::Metadata,
        };
        let line =
            table.render_watch_line(&PODS, crate::registry::watch::encode_event("ADDED", &pod));
        let event: Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["kind"], "Table");
        assert_eq!(event["object"]["rows"][0]["cells"][0], "p");
        let meta = Representation::Metadata { version: "v1" }.render_watch_line(
            &PODS,
            crate::registry::watch::encode_event("MODIFIED", &pod),
        );
        let event: Value = serde_json::from_slice(&meta).expect("json");
        assert_eq!(event["object"]["kind"], "PartialObjectMetadata");
        assert!(event["object"].get("spec").is_none());
    }
}
