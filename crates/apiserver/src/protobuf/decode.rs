//! Schema-driven decoding of a Kubernetes protobuf message into the JSON Go would write.

use base64::Engine;
use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::schema::{Field, Kind, Message, Wrapper};
use super::schema_gen::MESSAGES;
use super::wire::{FIXED64, LEN, Reader, VARINT};

/// How deep the JSON of a body may nest (objects and arrays). Recursive messages (a CRD's
/// `JSONSchemaProps`) would otherwise let a small body exhaust the stack; the bound stays
/// below `serde_json`'s 128, so what is decoded here parses again when read back.
pub(super) const MAX_DEPTH: usize = 100;

/// Decodes `buf` as message `index` of the schema into a JSON object.
pub(super) fn message(buf: &[u8], index: u16) -> Result<Map<String, Value>> {
    nested(buf, index, 1)
}

/// Decodes message `index` whose object sits `depth` levels deep in the document.
fn nested(buf: &[u8], index: u16, depth: usize) -> Result<Map<String, Value>> {
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep(MAX_DEPTH));
    }
    let mut out = Map::new();
    merge_message(buf, index, depth, &mut out)?;
    Ok(out)
}

fn schema(index: u16) -> Result<&'static Message> {
    MESSAGES
        .get(usize::from(index))
        .ok_or(Error::Malformed("schema index out of range"))
}

/// Decodes `buf` into `out`, field by field; later values of a singular field win, as in
/// protobuf.
fn merge_message(buf: &[u8], index: u16, depth: usize, out: &mut Map<String, Value>) -> Result<()> {
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
        // A field's value nests one level below this object; a list's or map's items two.
        let child = depth
            + if field.repeated || matches!(field.kind, Kind::Map(_)) {
                2
            } else {
                1
            };
        let value = value(&mut r, wire_type, field, msg, child)?;
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
    depth: usize,
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
            let (k, v) = map_entry(r.bytes()?, value_kind, field, msg, depth)?;
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
        Kind::Double => {
            expect(FIXED64)?;
            Ok(Some(double(f64::from_bits(r.fixed64()?))?))
        }
        _ => {
            expect(LEN)?;
            let bytes = r.bytes()?;
            typed(bytes, kind, field, msg, depth)
        }
    }
}

/// A `double` as Go's JSON writes it: integral values without a fraction (`5`, not `5.0`).
/// Go cannot write NaN or infinities at all, so they are refused.
fn double(v: f64) -> Result<Value> {
    if !v.is_finite() {
        return Err(Error::Malformed("a double is NaN or infinite"));
    }
    // Integers up to 2^53 are exact in a double, and Go writes them without an exponent.
    if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
        return Ok(Value::from(v as i64));
    }
    Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
}

/// The JSON of a length-delimited value of `kind`, `depth` levels deep in the document.
fn typed(
    bytes: &[u8],
    kind: Kind,
    field: &'static Field,
    msg: &'static Message,
    depth: usize,
) -> Result<Option<Value>> {
    Ok(Some(match kind {
        Kind::String => Value::String(utf8(bytes, field, msg)?),
        Kind::Bytes => Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        Kind::Message(index) => Value::Object(nested(bytes, index, depth)?),
        Kind::Wrapped(index, wrapper) => wrapped(bytes, index, wrapper, depth)?,
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
        Kind::RawJson | Kind::Json => {
            let mut r = Reader::new(bytes);
            let mut raw: &[u8] = &[];
            while !r.done() {
                match r.key()? {
                    (1, LEN) => raw = r.bytes()?,
                    (_, wire_type) => r.skip(wire_type)?,
                }
            }
            if raw.is_empty() {
                // An empty RawExtension is left out; apiextensions' JSON writes `null`.
                return Ok((kind == Kind::Json).then_some(Value::Null));
            }
            let value: Value = serde_json::from_slice(raw).map_err(|e| Error::BadEmbeddedJson {
                message: msg.name,
                field: field.json,
                reason: e.to_string(),
            })?;
            // The document nests below this field: the whole must stay within the bound.
            if depth + json_depth(&value) > MAX_DEPTH + 1 {
                return Err(Error::TooDeep(MAX_DEPTH));
            }
            value
        }
        Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::Double | Kind::Map(_) => {
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
    depth: usize,
) -> Result<(String, Value)> {
    let mut r = Reader::new(bytes);
    let mut key = String::new();
    let mut value: Option<Value> = None;
    while !r.done() {
        match r.key()? {
            (1, LEN) => key = utf8(r.bytes()?, field, msg)?,
            (2, LEN) => value = typed(r.bytes()?, *value_kind, field, msg, depth)?,
            (_, wire_type) => r.skip(wire_type)?,
        }
    }
    let value = match value {
        Some(value) => value,
        None => match value_kind {
            Kind::Message(_) | Kind::Wrapped(..) => {
                typed(&[], *value_kind, field, msg, depth)?.unwrap_or(Value::Null)
            }
            _ => Value::String(String::new()),
        },
    };
    Ok((key, value))
}

/// The JSON of a [`Kind::Wrapped`] message: decoded by its own table, then written as its
/// Go type's `MarshalJSON` writes it (apiextensions' `marshal.go`).
fn wrapped(bytes: &[u8], index: u16, wrapper: Wrapper, depth: usize) -> Result<Value> {
    let inner = schema(index)?;
    // One level deeper than the value itself: a bound, never an undercount.
    let mut fields = nested(bytes, index, depth + 1)?;
    let mut take = |tag: u32| inner.field(tag).and_then(|f| fields.remove(f.json));
    let non_empty = |v: Option<Value>| v.filter(|v| v.as_array().is_some_and(|a| !a.is_empty()));
    Ok(match wrapper {
        // A nil `[]string` would be `null`; an empty list means the same to every reader.
        Wrapper::List => take(1).unwrap_or_else(|| Value::Array(Vec::new())),
        Wrapper::PropsOrArray | Wrapper::PropsOrStringArray => {
            let list = non_empty(take(2));
            list.or_else(|| take(1)).unwrap_or(Value::Null)
        }
        Wrapper::PropsOrBool => match take(2) {
            Some(schema) => schema,
            None => Value::Bool(take(1) == Some(Value::Bool(true))),
        },
    })
}

/// How many levels a JSON value nests: 1 for a scalar, one more per object or array.
/// Values come from `serde_json`, whose parser bounds their depth, so recursion is safe.
fn json_depth(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(json_depth).max().unwrap_or(0),
        Value::Object(fields) => fields.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
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
        (Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::Double | Kind::String, v)
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
