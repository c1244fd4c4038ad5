//! go-spew's `%#v` rendering of a Go value, driven by a static Go type layout.
//!
//! This reproduces what `spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true,
//! SpewKeys: true, DisablePointerAddresses: true, DisableCapacities: true}.Sprintf("%#v", v)`
//! (k8s.io/apimachinery `dump.ForHash`, go-spew v1.1.2-0.20180830191138-d8f796af33cc) writes for
//! the types reachable from `v1.PodTemplateSpec`, reading the values from the object's JSON.
//!
//! The rules, from spew's `format.go`:
//! - every value is prefixed with `(` + `reflect.Type.String()` + `)` unless spew's
//!   `ignoreNextType` is set, which it is for slice elements, map keys and values, and the target
//!   of a pointer;
//! - a struct prints `{Name:value Name:value}` with every Go field in declaration order,
//!   exported or not, zero or not;
//! - a nil pointer prints `(*T)<nil>` (`<nil>` when the type is suppressed); a non-nil pointer
//!   prints `(*T)` and then its target without a type;
//! - a nil slice or map prints its type and `<nil>`; a slice prints `[e1 e2]`, a map
//!   `map[k1:v1 k2:v2]` with keys sorted (`SortKeys`; every map key here is a string kind);
//! - strings print raw (no quotes, no escaping), integers in decimal, bools as `true`/`false`.
//!
//! JSON → Go value: a missing or `null` member is the Go zero value; an empty JSON array or
//! object in a slice or map position is nil, because kube-controller-manager decodes objects
//! from protobuf (or from JSON written with `omitempty`), where an empty list or map cannot be
//! told from an absent one. An empty object in a pointer position (`securityContext: {}`) is a
//! non-nil pointer to a zero struct, as protobuf decodes it.

use serde_json::Value;

use super::sink::{Sink, put_i64, put_u64};
use super::spew_quantity;

/// A Go type as spew sees it.
#[derive(Debug)]
pub(super) struct GoType {
    /// `reflect.Type.String()`, e.g. `v1.PodSpec`, `*int64`, `[]v1.Container`, `v1.ResourceList`.
    pub name: &'static str,
    /// How values of the type print.
    pub kind: Kind,
}

/// The shape of a Go type.
#[derive(Debug)]
pub(super) enum Kind {
    /// `string` or a named string type (`v1.Protocol`, `types.UID`).
    String,
    /// `bool`.
    Bool,
    /// Any integer kind, named or not.
    Int,
    /// `*T`.
    Ptr(&'static GoType),
    /// `[]T` (never `[]byte`: the only one reachable is `FieldsV1.Raw`, see [`Kind::FieldsV1`]).
    Slice(&'static GoType),
    /// `map[K]V` with a string-kind key, named or not.
    Map(&'static GoType, &'static GoType),
    /// A struct with its fields in Go declaration order.
    Struct(&'static [Field]),
    /// `resource.Quantity`, printed from its parsed internal state.
    Quantity,
    /// `intstr.IntOrString`.
    IntOrString,
    /// `metav1.Time`.
    Time,
    /// `metav1.FieldsV1`: raw JSON bytes.
    FieldsV1,
}

/// One Go struct field.
#[derive(Debug)]
pub(super) struct Field {
    /// The Go field name spew prints (for an embedded field, its type's name).
    pub name: &'static str,
    /// Where the field's value lives in the JSON object of the struct.
    pub json: Json,
    /// The field's Go type.
    pub ty: &'static GoType,
}

/// Where a Go field's value is found in JSON.
#[derive(Debug)]
pub(super) enum Json {
    /// Under this member name.
    Key(&'static str),
    /// Embedded with `json:",inline"`: the members sit in the enclosing object.
    Inline,
}

/// Writes `(T)`.
fn put_type(out: &mut impl Sink, ty: &GoType) {
    out.put(b"(");
    out.put(ty.name.as_bytes());
    out.put(b")");
}

/// `v` unless it is JSON `null` (which Go decodes as the zero value).
fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// Prints `value` (the JSON of a Go value of type `ty`; `None` for the zero value) as spew's
/// `%#v` does; `show_type` is the negation of spew's `ignoreNextType`.
pub(super) fn write_value(
    out: &mut impl Sink,
    ty: &GoType,
    value: Option<&Value>,
    show_type: bool,
) {
    let value = present(value);
    if let Kind::Ptr(target) = &ty.kind {
        match value {
            None => {
                if show_type {
                    put_type(out, ty);
                }
                out.put(b"<nil>");
            }
            Some(v) => {
                if show_type {
                    put_type(out, ty);
                } else {
                    out.put(b"<*>");
                }
                write_value(out, target, Some(v), false);
            }
        }
        return;
    }
    if show_type {
        put_type(out, ty);
    }
    match &ty.kind {
        Kind::Ptr(_) => {}
        Kind::String => {
            if let Some(Value::String(s)) = value {
                out.put(s.as_bytes());
            }
        }
        Kind::Bool => {
            let b = matches!(value, Some(Value::Bool(true)));
            out.put(if b { b"true" } else { b"false" });
        }
        Kind::Int => match value {
            Some(Value::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    put_i64(out, i);
                } else if let Some(u) = n.as_u64() {
                    put_u64(out, u);
                } else {
                    out.put(b"0");
                }
            }
            _ => out.put(b"0"),
        },
        Kind::Slice(elem) => match value {
            Some(Value::Array(items)) if !items.is_empty() => {
                out.put(b"[");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.put(b" ");
                    }
                    write_value(out, elem, Some(item), false);
                }
                out.put(b"]");
            }
            _ => out.put(b"<nil>"),
        },
        Kind::Map(key_ty, value_ty) => match value {
            Some(Value::Object(map)) if !map.is_empty() => {
                // Every key type here is a string kind: spew sorts by the string and prints it
                // raw without a type.
                debug_assert!(matches!(key_ty.kind, Kind::String));
                out.put(b"map[");
                let mut write_entry = |i: usize, k: &str, v: &Value| {
                    if i > 0 {
                        out.put(b" ");
                    }
                    out.put(k.as_bytes());
                    out.put(b":");
                    write_value(out, value_ty, Some(v), false);
                };
                if map.keys().is_sorted() {
                    for (i, (k, v)) in map.iter().enumerate() {
                        write_entry(i, k, v);
                    }
                } else {
                    // serde_json keeps insertion order when `preserve_order` is on.
                    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    for (i, (k, v)) in entries.into_iter().enumerate() {
                        write_entry(i, k, v);
                    }
                }
                out.put(b"]");
            }
            _ => out.put(b"<nil>"),
        },
        Kind::Struct(fields) => {
            let obj = match value {
                Some(Value::Object(map)) => Some(map),
                _ => None,
            };
            write_struct(out, fields, obj);
        }
        Kind::Quantity => spew_quantity::write(out, value),
        Kind::IntOrString => write_int_or_string(out, value),
        Kind::Time => write_time(out, value),
        Kind::FieldsV1 => {
            out.put(b"{Raw:([]uint8)");
            match value {
                Some(v) => match serde_json::to_vec(v) {
                    Ok(raw) => put_bytes(out, &raw),
                    Err(_) => out.put(b"<nil>"),
                },
                None => out.put(b"<nil>"),
            }
            out.put(b"}");
        }
    }
}

/// `{Field:value ...}`, reading each field from `obj` (absent object: all zero values).
fn write_struct(
    out: &mut impl Sink,
    fields: &[Field],
    obj: Option<&serde_json::Map<String, Value>>,
) {
    out.put(b"{");
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.put(b" ");
        }
        out.put(f.name.as_bytes());
        out.put(b":");
        match f.json {
            Json::Key(k) => write_value(out, f.ty, obj.and_then(|o| o.get(k)), true),
            Json::Inline => {
                // An embedded struct is never nil: print it from the enclosing object.
                put_type(out, f.ty);
                match &f.ty.kind {
                    Kind::Struct(inner) => write_struct(out, inner, obj),
                    _ => out.put(b"{}"),
                }
            }
        }
    }
    out.put(b"}");
}

/// A `[]uint8` with elements: `[1 2 3]`.
fn put_bytes(out: &mut impl Sink, bytes: &[u8]) {
    out.put(b"[");
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.put(b" ");
        }
        put_u64(out, u64::from(*b));
    }
    out.put(b"]");
}

/// `intstr.IntOrString{Type, IntVal, StrVal}` from a JSON number or string.
fn write_int_or_string(out: &mut impl Sink, value: Option<&Value>) {
    let (ty, int_val, str_val) = match value {
        Some(Value::String(s)) => (1, 0, s.as_str()),
        Some(Value::Number(n)) => (0, n.as_i64().unwrap_or(0), ""),
        _ => (0, 0, ""),
    };
    out.put(b"{Type:(intstr.Type)");
    put_i64(out, ty);
    out.put(b" IntVal:(int32)");
    put_i64(out, int_val);
    out.put(b" StrVal:(string)");
    out.put(str_val.as_bytes());
    out.put(b"}");
}

/// Seconds from 0001-01-01 to 1970-01-01, Go's `unixToInternal`.
const UNIX_TO_INTERNAL: i64 = 62_135_596_800;

/// The `*time.Location` a decoded non-zero time points at: `metav1.Time` always calls `Local()`,
/// and in kube-controller-manager's container (no `TZ`, no `/etc/localtime`) Local is an empty
/// zone named `UTC`.
const LOCAL_UTC: &[u8] = b"(*time.Location){name:(string)UTC zone:([]time.zone)<nil> \
tx:([]time.zoneTrans)<nil> extend:(string) cacheStart:(int64)0 cacheEnd:(int64)0 \
cacheZone:(*time.zone)<nil>}";

/// `metav1.Time{time.Time{wall, ext, loc}}` from an RFC 3339 string (zero value otherwise).
fn write_time(out: &mut impl Sink, value: Option<&Value>) {
    let parsed = match value {
        Some(Value::String(s)) => s.parse::<jiff::Timestamp>().ok(),
        _ => None,
    };
    out.put(b"{Time:(time.Time){wall:(uint64)");
    match parsed {
        None => out.put(b"0 ext:(int64)0 loc:(*time.Location)<nil>"),
        Some(ts) => {
            // time.Parse keeps no monotonic reading: wall holds the nanoseconds, ext the
            // seconds since year 1.
            put_u64(out, u64::from(ts.subsec_nanosecond().unsigned_abs()));
            out.put(b" ext:(int64)");
            put_i64(out, ts.as_second() + UNIX_TO_INTERNAL);
            out.put(b" loc:");
            out.put(LOCAL_UTC);
        }
    }
    out.put(b"}}");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    static T_STRING: GoType = GoType {
        name: "string",
        kind: Kind::String,
    };
    static T_PTR_STRING: GoType = GoType {
        name: "*string",
        kind: Kind::Ptr(&T_STRING),
    };
    static T_SLICE_STRING: GoType = GoType {
        name: "[]string",
        kind: Kind::Slice(&T_STRING),
    };
    static T_MAP: GoType = GoType {
        name: "map[string]string",
        kind: Kind::Map(&T_STRING, &T_STRING),
    };

    fn text(ty: &GoType, v: Option<Value>) -> String {
        let mut out = Vec::new();
        write_value(&mut out, ty, v.as_ref(), true);
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn scalars_pointers_slices_and_maps_follow_spew() {
        struct Case {
            name: &'static str,
            ty: &'static GoType,
            value: Option<Value>,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "zero string",
                ty: &T_STRING,
                value: None,
                want: "(string)",
            },
            Case {
                name: "raw string",
                ty: &T_STRING,
                value: Some(json!("a b\"c\n")),
                want: "(string)a b\"c\n",
            },
            Case {
                name: "nil pointer",
                ty: &T_PTR_STRING,
                value: None,
                want: "(*string)<nil>",
            },
            Case {
                name: "null pointer",
                ty: &T_PTR_STRING,
                value: Some(Value::Null),
                want: "(*string)<nil>",
            },
            Case {
                name: "pointer",
                ty: &T_PTR_STRING,
                value: Some(json!("x")),
                want: "(*string)x",
            },
            Case {
                name: "absent slice",
                ty: &T_SLICE_STRING,
                value: None,
                want: "([]string)<nil>",
            },
            Case {
                name: "empty slice is nil",
                ty: &T_SLICE_STRING,
                value: Some(json!([])),
                want: "([]string)<nil>",
            },
            Case {
                name: "slice elements untyped",
                ty: &T_SLICE_STRING,
                value: Some(json!(["a", "b"])),
                want: "([]string)[a b]",
            },
            Case {
                name: "empty map is nil",
                ty: &T_MAP,
                value: Some(json!({})),
                want: "(map[string]string)<nil>",
            },
            Case {
                name: "map sorted",
                ty: &T_MAP,
                value: Some(json!({"b": "2", "a": "1", "B": "3"})),
                want: "(map[string]string)map[B:3 a:1 b:2]",
            },
        ];
        for c in cases {
            assert_eq!(text(c.ty, c.value), c.want, "{}", c.name);
        }
    }

    #[test]
    fn integers_print_in_decimal() {
        let mut out = Vec::new();
        put_i64(&mut out, i64::MIN);
        out.put(b" ");
        put_u64(&mut out, u64::MAX);
        out.put(b" ");
        put_i64(&mut out, 0);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "-9223372036854775808 18446744073709551615 0"
        );
    }
}
