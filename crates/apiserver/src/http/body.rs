//! Request bodies: the size limit (413), media types (415) and decoding of JSON and YAML objects (400 when malformed).

use axum::body::Body;
use bytes::Bytes;
use http::HeaderMap;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::strict_decoding::{self, Findings};

/// kube-apiserver's default limit on request bodies (`--max-request-body-bytes`, 3 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Media types accepted for objects.
pub const OBJECT_MEDIA_TYPES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// Reads a whole body, refusing more than `limit` bytes with 413.
pub async fn read(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(ApiError::too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::too_large(limit)),
        Err(e) => Err(ApiError::bad_request(format!(
            "error reading request body: {e}"
        ))),
    }
}

/// The media type of a request (`application/json` when absent), without parameters.
pub fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "application/json".to_owned())
}

/// Decodes an object body by media type: JSON, YAML, or Kubernetes protobuf (decoded to the
/// same JSON); anything else is 415, and a body that does not parse (or is not an object)
/// is 400. A field given twice keeps its last value, as upstream's lenient decoders.
pub fn decode_object(bytes: &[u8], media: &str) -> Result<Value> {
    let value = match media {
        "application/json" | "*/*" => serde_json::from_slice(bytes).map_err(json_error)?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            strict_decoding::yaml(bytes).map_err(yaml_error)?.0
        }
        crate::protobuf::CONTENT_TYPE => protobuf(bytes)?,
        other => return Err(ApiError::unsupported_media_type(other, &OBJECT_MEDIA_TYPES)),
    };
    object_only(value)
}

/// [`decode_object`] for a create or update body, with what strict decoding found that the
/// decoded object no longer shows (fields given twice), for `fieldValidation`.
pub fn decode_body(bytes: &Bytes, media: &str) -> Result<(Value, Findings)> {
    let (value, findings) = match media {
        "application/json" | "*/*" => strict_decoding::json(bytes).map_err(json_error)?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            strict_decoding::yaml(bytes).map_err(yaml_error)?
        }
        crate::protobuf::CONTENT_TYPE => (protobuf(bytes)?, Findings::default()),
        other => return Err(ApiError::unsupported_media_type(other, &OBJECT_MEDIA_TYPES)),
    };
    Ok((object_only(value)?, findings))
}

fn protobuf(bytes: &[u8]) -> Result<Value> {
    crate::protobuf::decode_to_json(bytes).map_err(|e| {
        let message = e.to_string();
        match e.status_code() {
            415 => {
                ApiError::unsupported_media_type(crate::protobuf::CONTENT_TYPE, &OBJECT_MEDIA_TYPES)
                    .with_message(message)
            }
            _ => ApiError::bad_request(message),
        }
    })
}

fn yaml_error(e: serde_saphyr::Error) -> ApiError {
    ApiError::bad_request(format!("error converting YAML to JSON: {e}"))
}

fn json_error(e: serde_json::Error) -> ApiError {
    ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
}

fn object_only(value: Value) -> Result<Value> {
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the request body is not a JSON object",
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn size_limit() {
        let headers = HeaderMap::new();
        let ok = read(Body::from(vec![b'a'; 10]), &headers, 10)
            .await
            .expect("fits");
        assert_eq!(ok.len(), 10);
        let err = read(Body::from(vec![b'a'; 11]), &headers, 10)
            .await
            .expect_err("too big");
        assert_eq!(err.code, 413);
        let mut declared = HeaderMap::new();
        declared.insert(CONTENT_LENGTH, "1000".parse().expect("header"));
        let err = read(Body::from("x"), &declared, 10)
            .await
            .expect_err("declared too big");
        assert_eq!(err.code, 413);
    }

    #[test]
    fn decoding() {
        let cases = [
            ("json object", "application/json", "{\"a\": 1}", None),
            ("yaml object", "application/yaml", "a: 1\nb: [x]\n", None),
            ("malformed json", "application/json", "{\"a\": ", Some(400)),
            ("json array", "application/json", "[1]", Some(400)),
            (
                "protobuf without magic",
                "application/vnd.kubernetes.protobuf",
                "x",
                Some(400),
            ),
            ("unknown media type", "application/cbor", "x", Some(415)),
            (
                "binary garbage",
                "application/json",
                "\u{0}\u{1}",
                Some(400),
            ),
        ];
        for (name, media, body, want) in cases {
            let got = decode_object(body.as_bytes(), media).err().map(|e| e.code);
            assert_eq!(got, want, "case {name}");
        }
        let yaml = decode_object(b"a: 1\nb: [x]\n", "application/yaml").expect("yaml");
        assert_eq!(yaml, serde_json::json!({"a": 1, "b": ["x"]}));
    }
}
