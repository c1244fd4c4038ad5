//! The internal state of a `resource.Quantity` after Go's `ParseQuantity`, printed as spew does.
//!
//! kube-controller-manager decodes every quantity (protobuf or JSON) with apimachinery's
//! `ParseQuantity`, and spew prints the resulting private fields:
//! `{i:(resource.int64Amount){value scale} d:(resource.infDecAmount){Dec:(*inf.Dec)…} s:(string)… Format:(resource.Format)…}`.
//! The parsing is [`crate::quantity::parse`], an exact port that keeps Go's
//! representation (int64 fast path with the cached canonical string, or `inf.Dec` with the
//! `big.Int` magnitude as little-endian 64-bit words like Go's `big.nat` on amd64/arm64).

use crate::quantity::{self, Amount, Quantity};
use serde_json::Value;

use super::sink::{Sink, put_i64, put_u64};

/// Prints the quantity held by `value` (a JSON string or number; `None` for the zero value).
pub(super) fn write(out: &mut impl Sink, value: Option<&Value>) {
    match value {
        Some(Value::String(s)) => write_str(out, s.trim()),
        Some(Value::Number(n)) => write_str(out, &n.to_string()),
        _ => write_zero(out),
    }
}

/// Prints what `ParseQuantity(s)` builds; a string it rejects is the zero `Quantity{}`.
fn write_str(out: &mut impl Sink, s: &str) {
    match quantity::parse(s) {
        Ok(q) => write_quantity(out, &q, s),
        Err(_) => write_zero(out),
    }
}

/// Prints a parsed quantity; `input` is the parsed string, which Go keeps in `s` when it was
/// already canonical.
fn write_quantity(out: &mut impl Sink, q: &Quantity, input: &str) {
    out.put(b"{i:(resource.int64Amount){value:(int64)");
    match q.amount() {
        Amount::Int { value, scale } => {
            put_i64(out, *value);
            out.put(b" scale:(resource.Scale)");
            put_i64(out, i64::from(*scale));
            out.put(b"} d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string)");
            if q.is_cached() {
                out.put(input.as_bytes());
            }
        }
        Amount::Dec { neg, abs, scale } => {
            out.put(b"0 scale:(resource.Scale)0} d:(resource.infDecAmount){Dec:(*inf.Dec){unscaled:(big.Int){neg:(bool)");
            out.put(if *neg { b"true" } else { b"false" });
            out.put(b" abs:(big.nat)");
            if abs.is_empty() {
                out.put(b"<nil>");
            } else {
                out.put(b"[");
                for (i, w) in abs.iter().enumerate() {
                    if i > 0 {
                        out.put(b" ");
                    }
                    put_u64(out, *w);
                }
                out.put(b"]");
            }
            out.put(b"} scale:(inf.Scale)");
            put_i64(out, i64::from(*scale));
            out.put(b"}} s:(string)");
        }
    }
    out.put(b" Format:(resource.Format)");
    out.put(q.format().as_str().as_bytes());
    out.put(b"}");
}

/// Prints the zero `Quantity{}` (absent field, or a string `ParseQuantity` rejects).
fn write_zero(out: &mut impl Sink) {
    out.put(b"{i:(resource.int64Amount){value:(int64)0 scale:(resource.Scale)0} d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string) Format:(resource.Format)}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(value: Option<&Value>) -> String {
        let mut out = Vec::new();
        write(&mut out, value);
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn prints_go_state() {
        struct Case {
            name: &'static str,
            value: Option<Value>,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "fast path keeps the canonical string",
                value: Some(Value::from("100m")),
                want: "{i:(resource.int64Amount){value:(int64)100 scale:(resource.Scale)-3} \
                       d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string)100m Format:(resource.Format)DecimalSI}",
            },
            Case {
                name: "non-canonical string is not kept",
                value: Some(Value::from("0.5")),
                want: "{i:(resource.int64Amount){value:(int64)5 scale:(resource.Scale)-1} \
                       d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string) Format:(resource.Format)DecimalSI}",
            },
            Case {
                name: "slow path",
                value: Some(Value::from("1.5Gi")),
                want: "{i:(resource.int64Amount){value:(int64)0 scale:(resource.Scale)0} \
                       d:(resource.infDecAmount){Dec:(*inf.Dec){unscaled:(big.Int){neg:(bool)false \
                       abs:(big.nat)[1610612736000000000]} scale:(inf.Scale)9}} s:(string) Format:(resource.Format)BinarySI}",
            },
            Case {
                name: "JSON number",
                value: Some(serde_json::json!(2)),
                want: "{i:(resource.int64Amount){value:(int64)2 scale:(resource.Scale)0} \
                       d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string)2 Format:(resource.Format)DecimalSI}",
            },
            Case {
                name: "invalid is the zero value",
                value: Some(Value::from("1Xi")),
                want: "{i:(resource.int64Amount){value:(int64)0 scale:(resource.Scale)0} \
                       d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string) Format:(resource.Format)}",
            },
            Case {
                name: "absent is the zero value",
                value: None,
                want: "{i:(resource.int64Amount){value:(int64)0 scale:(resource.Scale)0} \
                       d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string) Format:(resource.Format)}",
            },
        ];
        for c in cases {
            assert_eq!(printed(c.value.as_ref()), c.want, "{}", c.name);
        }
    }
}
