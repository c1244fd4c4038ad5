//! Schema-driven decoding of a Kubernetes protobuf message into the JSON Go would write.

use base64::Engine;
use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::schema::{Field, Kind, Message};
use super::schema_gen::MESSAGES;
use super::wire::{LEN, Reader, VARINT};

/// Decodes `buf` as message `index` of the schema into a JSON object.
pub(super) fn message(buf: &[u8], index: u16) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    merge_message(buf, index, &mut out)?;
    Ok(out)
}

fn schema(index: u16) -> Result<&'static Message> {
    MESSAGES
        .get(usize::from(index))
        .ok_or(Error::Malformed("schema index out of range"))
}

/// Decodes `buf` into `out`, field by field; later values of a singular field win, as in
/// protobuf.
fn merge_message(buf: &[u8], index: u16, out: &mut Map<String, Value>) -> Result<()> {
    let msg = schema(index)?;
    let mut r = Reader::new(buf);
    while !r.done() {
        let (tag, wire_type) = r.key()?;
        let Some(field) = msg.field(tag) else {
            r.skip(wire_type)?;
            continue;
        };
        if field.repeated && wire_type == LEN && is_varint_kind(field.kind) {
            // A packed repeated scalar.
            let mut packed = Reader::new(r.bytes()?);
            while !packed.done() {
                let v = scalar_from_varint(field.kind, packed.varint()?);
                push(out, field.json, v);
            }
            continue;
        }
        let value = value(&mut r, wire_type, field, msg)?;
        store(out, field, value);
    }
    Ok(())
}

fn is_varint_kind(kind: Kind) -> bool {
    matches!(kind, Kind::Bool | Kind::Int32 | Kind::Int64)
}

fn scalar_from_varint(kind: Kind, v: u64) -> Value {
    match kind {
        Kind::Bool => Value::Bool(v != 0),
        // int32 values are sign-extended to 64 bits on the wire.
        Kind::Int32 => Value::from(v as i64 as i32),
        _ => Value::from(v as i64),
    }
}

/// A decoded field value; `None` for values Go's JSON leaves out (the zero `Time`, an
/// empty embedded document).
fn value(
    r: &mut Reader<'_>,
    wire_type: u8,
    field: &'static Field,
    msg: &'static Message,
) -> Result<Option<Value>> {
    let expect = |wanted: u8| {
        if wire_type == wanted {
            Ok(())
        } else {
            Err(Error::WrongWireType {
                message: msg.name,
                field: field.json,
                wire_type,
            })
        }
    };
    let kind = match field.kind {
        Kind::Map(value_kind) => {
            expect(LEN)?;
            let (k, v) = map_entry(r.bytes()?, value_kind, field, msg)?;
            let mut entry = Map::new();
            entry.insert(k, v);
            return Ok(Some(Value::Object(entry)));
        }
        kind => kind,
    };
    match kind {
        Kind::Bool | Kind::Int32 | Kind::Int64 => {
            expect(VARINT)?;
            Ok(Some(scalar_from_varint(kind, r.varint()?)))
        }
        _ => {
            expect(LEN)?;
            let bytes = r.bytes()?;
            typed(bytes, kind, field, msg)
        }
    }
}

/// The JSON of a length-delimited value of `kind`.
fn typed(
    bytes: &[u8],
    kind: Kind,
    field: &'static Field,
    msg: &'static Message,
) -> Result<Option<Value>> {
    Ok(Some(match kind {
        Kind::String => Value::String(utf8(bytes, field, msg)?),
        Kind::Bytes => Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        Kind::Message(index) => Value::Object(message(bytes, index)?),
        Kind::Time => {
            // Upstream marshals the zero time as an empty message, and keeps only seconds.
            if bytes.is_empty() {
                return Ok(None);
            }
            let (seconds, _) = timestamp(bytes)?;
            Value::String(format_time(seconds, None)?)
        }
        Kind::MicroTime => {
            if bytes.is_empty() {
                return Ok(None);
            }
            let (seconds, nanos) = timestamp(bytes)?;
            Value::String(format_time(seconds, Some(nanos))?)
        }
        Kind::IntOrString => {
            let mut r = Reader::new(bytes);
            let (mut ty, mut int_val, mut str_val) = (0u64, 0i32, String::new());
            while !r.done() {
                match r.key()? {
                    (1, VARINT) => ty = r.varint()?,
                    (2, VARINT) => int_val = r.varint()? as i64 as i32,
                    (3, LEN) => str_val = utf8(r.bytes()?, field, msg)?,
                    (_, wire_type) => r.skip(wire_type)?,
                }
            }
            if ty == 1 {
                Value::String(str_val)
            } else {
                Value::from(int_val)
            }
        }
        Kind::Quantity => {
            let mut r = Reader::new(bytes);
            let mut s = String::new();
            while !r.done() {
                match r.key()? {
                    (1, LEN) => s = utf8(r.bytes()?, field, msg)?,
                    (_, wire_type) => r.skip(wire_type)?,
                }
            }
            Value::String(s)
        }
        Kind::RawJson => {
            let mut r = Reader::new(bytes);
            let mut raw: &[u8] = &[];
            while !r.done() {
                match r.key()? {
                    (1, LEN) => raw = r.bytes()?,
                    (_, wire_type) => r.skip(wire_type)?,
                }
            }
            if raw.is_empty() {
                return Ok(None);
            }
            serde_json::from_slice(raw).map_err(|e| Error::BadEmbeddedJson {
                message: msg.name,
                field: field.json,
                reason: e.to_string(),
            })?
        }
        Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::Map(_) => {
            return Err(Error::WrongWireType {
                message: msg.name,
                field: field.json,
                wire_type: LEN,
            });
        }
    }))
}

/// One `map<string, V>` entry: key is field 1, value field 2 (missing ones are zero).
fn map_entry(
    bytes: &[u8],
    value_kind: &'static Kind,
    field: &'static Field,
    msg: &'static Message,
) -> Result<(String, Value)> {
    let mut r = Reader::new(bytes);
    let mut key = String::new();
    let mut value: Option<Value> = None;
    while !r.done() {
        match r.key()? {
            (1, LEN) => key = utf8(r.bytes()?, field, msg)?,
            (2, LEN) => value = typed(r.bytes()?, *value_kind, field, msg)?,
            (_, wire_type) => r.skip(wire_type)?,
        }
    }
    let value = value.unwrap_or_else(|| match value_kind {
        Kind::Message(_) => Value::Object(Map::new()),
        _ => Value::String(String::new()),
    });
    Ok((key, value))
}

fn utf8(bytes: &[u8], field: &'static Field, msg: &'static Message) -> Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::NotUtf8 {
        message: msg.name,
        field: field.json,
    })
}

/// `google.protobuf.Timestamp`-shaped fields: seconds (1) and nanos (2).
fn timestamp(bytes: &[u8]) -> Result<(i64, i32)> {
    let mut r = Reader::new(bytes);
    let (mut seconds, mut nanos) = (0i64, 0i32);
    while !r.done() {
        match r.key()? {
            (1, VARINT) => seconds = r.varint()? as i64,
            (2, VARINT) => nanos = r.varint()? as i64 as i32,
            (_, wire_type) => r.skip(wire_type)?,
        }
    }
    Ok((seconds, nanos))
}

/// RFC 3339 in UTC: `2006-01-02T15:04:05Z`, or with six fractional digits when `nanos`
/// is given (`metav1.MicroTime`).
fn format_time(seconds: i64, nanos: Option<i32>) -> Result<String> {
    let t = jiff::Timestamp::from_second(seconds)
        .map_err(|_| Error::Malformed("timestamp out of range"))?;
    let base = t.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    Ok(match nanos {
        None => format!("{base}Z"),
        Some(n) => format!("{base}.{:06}Z", n.clamp(0, 999_999_999) / 1000),
    })
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

fn push(out: &mut Map<String, Value>, key: &str, v: Value) {
    match out.get_mut(key) {
        Some(Value::Array(list)) => list.push(v),
        _ => {
            out.insert(key.to_owned(), Value::Array(vec![v]));
        }
    }
}

/// Puts a decoded value where it belongs: arrays grow, maps gain an entry, embedded
/// messages merge into the parent, zero scalars of non-pointer fields are left out.
fn store(out: &mut Map<String, Value>, field: &Field, value: Option<Value>) {
    let Some(value) = value else {
        return;
    };
    if field.repeated {
        push(out, field.json, value);
        return;
    }
    match (field.kind, value) {
        (Kind::Map(_), Value::Object(entry)) => match out.get_mut(field.json) {
            Some(Value::Object(map)) => map.extend(entry),
            _ => {
                out.insert(field.json.to_owned(), Value::Object(entry));
            }
        },
        (Kind::Message(_), Value::Object(fields)) if field.json.is_empty() => out.extend(fields),
        (Kind::Message(_), Value::Object(fields)) => match out.get_mut(field.json) {
            Some(Value::Object(existing)) => existing.extend(fields),
            _ => {
                out.insert(field.json.to_owned(), Value::Object(fields));
            }
        },
        (Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::String, v)
            if is_zero(&v) && !field.keep_zero =>
        {
            out.remove(field.json);
        }
        (_, v) => {
            out.insert(field.json.to_owned(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(
            format_time(1_714_564_800, None).expect("time"),
            "2024-05-01T12:00:00Z"
        );
        assert_eq!(
            format_time(1_714_564_800, Some(123_456_789)).expect("micro"),
            "2024-05-01T12:00:00.123456Z"
        );
    }
}
