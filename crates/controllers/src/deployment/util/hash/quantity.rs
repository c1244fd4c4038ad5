//! The internal state of a `resource.Quantity` after Go's `ParseQuantity`, printed as spew does.
//!
//! kube-controller-manager decodes every quantity (protobuf or JSON) with apimachinery's
//! `ParseQuantity`, and spew prints the resulting private fields:
//! `{i:(resource.int64Amount){value scale} d:(resource.infDecAmount){Dec:(*inf.Dec)…} s:(string)… Format:(resource.Format)…}`.
//! This module ports `parseQuantityString` and `ParseQuantity` (k8s.io/apimachinery
//! `pkg/api/resource/quantity.go`, v1.33) exactly: the int64 fast path, including when it keeps
//! the original string in `s` (only for strings already in canonical form), and the `inf.Dec`
//! slow path (more than 18 digits, more than 9 decimal places, fractional binary suffixes such
//! as `1.5Gi`), with the `big.Int` magnitude kept as little-endian 64-bit words like Go's
//! `big.nat` on amd64/arm64.

use serde_json::Value;

use super::spew::{Sink, put_i64, put_u64};

/// `resource.Format` values.
const DECIMAL_SI: &str = "DecimalSI";
const BINARY_SI: &str = "BinarySI";
const DECIMAL_EXPONENT: &str = "DecimalExponent";

/// `maxInt64Factors`: decimal digits an int64 always holds.
const MAX_INT64_FACTORS: i32 = 18;
/// `resource.Nano`: the smallest scale the fast path keeps.
const NANO: i32 = -9;

/// A parsed quantity's private fields.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum State<'a> {
    /// `i` in use (`d.Dec == nil`).
    Int {
        /// `i.value`.
        value: i64,
        /// `i.scale` (power of ten).
        scale: i32,
        /// `s`: the input string when it was already canonical, else empty.
        cached: &'a str,
        /// `Format`.
        format: &'static str,
    },
    /// `d.Dec` in use: `(-1)^neg * abs / 10^scale`.
    Dec {
        /// `big.Int.neg`.
        neg: bool,
        /// `big.Int.abs`, little-endian words, no high zero words; empty is Go's nil.
        abs: Vec<u64>,
        /// `inf.Dec.scale`.
        scale: i32,
        /// `Format`.
        format: &'static str,
    },
    /// The zero `Quantity{}` (absent field, or a string `ParseQuantity` rejects).
    Zero,
}

/// Prints the quantity held by `value` (a JSON string or number; `None` for the zero value).
pub(super) fn write(out: &mut impl Sink, value: Option<&Value>) {
    match value {
        Some(Value::String(s)) => write_state(out, &parse(s.trim())),
        Some(Value::Number(n)) => write_state(out, &parse(&n.to_string())),
        _ => write_state(out, &State::Zero),
    }
}

/// Prints a parsed state.
pub(super) fn write_state(out: &mut impl Sink, state: &State<'_>) {
    out.put(b"{i:(resource.int64Amount){value:(int64)");
    match state {
        State::Int {
            value,
            scale,
            cached,
            format,
        } => {
            put_i64(out, *value);
            out.put(b" scale:(resource.Scale)");
            put_i64(out, i64::from(*scale));
            out.put(b"} d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string)");
            out.put(cached.as_bytes());
            out.put(b" Format:(resource.Format)");
            out.put(format.as_bytes());
        }
        State::Dec {
            neg,
            abs,
            scale,
            format,
        } => {
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
            out.put(b"}} s:(string) Format:(resource.Format)");
            out.put(format.as_bytes());
        }
        State::Zero => {
            out.put(b"0 scale:(resource.Scale)0} d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string) Format:(resource.Format)");
        }
    }
    out.put(b"}");
}

/// The pieces `parseQuantityString` splits a quantity into.
struct Split<'a> {
    positive: bool,
    /// Sign, digits, point and fraction: what `inf.Dec.SetString` reads.
    value: &'a str,
    /// Integer digits without leading zeros (`"0"` if none).
    num: &'a str,
    /// Fraction digits.
    denom: &'a str,
    suffix: &'a str,
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// apimachinery's `parseQuantityString`; `None` is `ErrFormatWrong`.
fn split(s: &str) -> Option<Split<'_>> {
    let b = s.as_bytes();
    let end = b.len();
    let mut positive = true;
    let mut pos = 0;
    if pos < end {
        match b[0] {
            b'-' => {
                positive = false;
                pos += 1;
            }
            b'+' => pos += 1,
            _ => {}
        }
    }
    // Leading zeros.
    loop {
        if pos >= end {
            return Some(Split {
                positive,
                value: "0",
                num: "0",
                denom: "",
                suffix: "",
            });
        }
        if b[pos] == b'0' {
            pos += 1;
        } else {
            break;
        }
    }
    // Numerator.
    let num_start = pos;
    let mut i = pos;
    while i < end && is_digit(b[i]) {
        i += 1;
    }
    if i >= end {
        return Some(Split {
            positive,
            value: s,
            num: &s[num_start..],
            denom: "",
            suffix: "",
        });
    }
    let mut num = &s[num_start..i];
    pos = i;
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let start = pos;
        let mut i = pos;
        while i < end && is_digit(b[i]) {
            i += 1;
        }
        if i >= end {
            return Some(Split {
                positive,
                value: s,
                num,
                denom: &s[start..],
                suffix: "",
            });
        }
        denom = &s[start..i];
        pos = i;
    }
    let value = &s[..pos];
    let suffix_start = pos;
    let mut i = pos;
    loop {
        if i >= end {
            return Some(Split {
                positive,
                value,
                num,
                denom,
                suffix: &s[suffix_start..],
            });
        }
        if !b"eEinumkKMGTP".contains(&b[i]) {
            pos = i;
            break;
        }
        i += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    let mut i = pos;
    loop {
        if i >= end {
            return Some(Split {
                positive,
                value,
                num,
                denom,
                suffix: &s[suffix_start..],
            });
        }
        if !is_digit(b[i]) {
            return None;
        }
        i += 1;
    }
}

/// `quantitySuffixer.interpret`: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i32, &'static str)> {
    let decimal = |e| Some((10, e, DECIMAL_SI));
    let binary = |e| Some((2, e, BINARY_SI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            if rest.is_empty() {
                return None;
            }
            // strconv.ParseInt(.., 10, 64) then int32(): wraps like `as`.
            let parsed: i64 = rest.parse().ok()?;
            Some((10, parsed as i32, DECIMAL_EXPONENT))
        }
    }
}

/// apimachinery's `int64Multiply`.
fn int64_multiply(a: i64, b: i64) -> Option<i64> {
    if a == 0 || b == 0 || a == 1 || b == 1 {
        return Some(a.wrapping_mul(b));
    }
    if a == i64::MIN || b == i64::MIN {
        return None;
    }
    a.checked_mul(b)
}

/// Go's `ParseQuantity` (v1.33), returning the private state it builds.
pub(super) fn parse(s: &str) -> State<'_> {
    if s.is_empty() {
        return State::Zero;
    }
    if s == "0" {
        return State::Int {
            value: 0,
            scale: 0,
            cached: s,
            format: DECIMAL_SI,
        };
    }
    let Some(sp) = split(s) else {
        return State::Zero;
    };
    let Some((base, exponent, mut format)) = interpret(sp.suffix) else {
        return State::Zero;
    };

    let mut scale: i32 = 0;
    let mut mantissa: i64 = 1;
    let precision: i32 = if format == BINARY_SI {
        if exponent >= 0 && sp.denom.is_empty() {
            mantissa <<= exponent;
            // float32(exponent)*3/10 is exact for the binary exponents (10..60).
            15 - sp.num.len() as i32 - exponent * 3 / 10 - 1
        } else {
            -1
        }
    } else {
        scale = exponent;
        MAX_INT64_FACTORS - (sp.num.len() + sp.denom.len()) as i32
    };

    if precision >= 0 {
        scale = scale.wrapping_sub(sp.denom.len() as i32);
        if scale >= NANO {
            // strconv.ParseInt(num+denom): at most 18 digits here, so it cannot overflow.
            let digits = sp.num.bytes().chain(sp.denom.bytes());
            let mut value: i64 = 0;
            for d in digits.clone() {
                value = match value
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(i64::from(d - b'0')))
                {
                    Some(v) => v,
                    None => return State::Zero,
                };
            }
            if let Some(mut result) = int64_multiply(value, mantissa) {
                if !sp.positive {
                    result = -result;
                }
                let canonical = if format == BINARY_SI {
                    exponent % 10 == 0 && value & 0x07 != 0
                } else {
                    let len = sp.num.len() + sp.denom.len();
                    let ends_000 = len >= 3 && digits.clone().skip(len - 3).all(|d| d == b'0');
                    let first_zero = digits.clone().next() == Some(b'0');
                    scale % 3 == 0 && !ends_000 && !first_zero
                };
                return State::Int {
                    value: result,
                    scale,
                    cached: if canonical { s } else { "" },
                    format,
                };
            }
        }
    }

    // Slow path: inf.Dec.SetString(value).
    let (neg_in, digits, frac_len) = {
        let v = sp.value.as_bytes();
        let (neg, body) = match v.first() {
            Some(b'-') => (true, &v[1..]),
            Some(b'+') => (false, &v[1..]),
            _ => (false, v),
        };
        let frac_len = body
            .iter()
            .position(|&c| c == b'.')
            .map(|p| body.len() - p - 1);
        if !body.iter().any(|c| c.is_ascii_digit()) {
            return State::Zero;
        }
        (neg, body, frac_len.unwrap_or(0) as i32)
    };
    let mut abs = Nat::from_decimal(digits.iter().copied().filter(u8::is_ascii_digit));
    let mut dscale = frac_len;
    if base == 10 {
        dscale = dscale.wrapping_sub(exponent);
    } else {
        abs.mul_small(1u64 << exponent);
    }
    // Positive from here on (amount.Neg when sign == -1); zero has sign 0.
    let negative = neg_in && !abs.is_zero();
    if !abs.is_zero() {
        // amount.Round(amount, Nano.infScale() = 9, inf.RoundUp).
        if dscale <= 9 {
            abs.mul_pow10((9 - dscale) as u32);
        } else {
            abs.div_pow10_round_up((dscale - 9) as u32);
        }
        dscale = 9;
    }
    if format == BINARY_SI && !abs.is_zero() {
        // Cmp(maxAllowed) > 0: abs / 10^9 > 2^63-1.
        let mut max = Nat::from_u64(i64::MAX as u64);
        max.mul_pow10(9);
        if abs.cmp(&max) == std::cmp::Ordering::Greater {
            abs = Nat::from_u64(i64::MAX as u64);
            dscale = 0;
        }
    }
    if format == BINARY_SI
        && dscale == 9
        && !abs.is_zero()
        && abs.cmp(&Nat::from_u64(1_000_000_000)) == std::cmp::Ordering::Less
    {
        format = DECIMAL_SI;
    }
    State::Dec {
        neg: negative,
        abs: abs.0,
        scale: dscale,
        format,
    }
}

/// A non-negative big integer as little-endian 64-bit words, normalized (no high zero words),
/// like Go's `big.nat`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Nat(Vec<u64>);

impl Nat {
    fn from_u64(v: u64) -> Self {
        let mut n = Nat(vec![v]);
        n.norm();
        n
    }

    fn from_decimal(digits: impl Iterator<Item = u8>) -> Self {
        let mut n = Nat(Vec::new());
        for d in digits {
            n.mul_add_small(10, u64::from(d - b'0'));
        }
        n
    }

    fn norm(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn mul_add_small(&mut self, m: u64, a: u64) {
        let mut carry = u128::from(a);
        for w in &mut self.0 {
            let t = u128::from(*w) * u128::from(m) + carry;
            *w = t as u64;
            carry = t >> 64;
        }
        if carry != 0 {
            self.0.push(carry as u64);
        }
        self.norm();
    }

    fn mul_small(&mut self, m: u64) {
        self.mul_add_small(m, 0);
    }

    fn mul_pow10(&mut self, mut k: u32) {
        while k > 0 {
            let step = k.min(19);
            self.mul_small(10u64.pow(step));
            k -= step;
        }
    }

    /// Divides by `d`, returning whether the remainder was non-zero.
    fn div_small(&mut self, d: u64) -> bool {
        let mut rem: u128 = 0;
        for w in self.0.iter_mut().rev() {
            let cur = (rem << 64) | u128::from(*w);
            *w = (cur / u128::from(d)) as u64;
            rem = cur % u128::from(d);
        }
        self.norm();
        rem != 0
    }

    /// Divides by 10^k rounding away from zero.
    fn div_pow10_round_up(&mut self, mut k: u32) {
        let mut inexact = false;
        while k > 0 {
            let step = k.min(19);
            inexact |= self.div_small(10u64.pow(step));
            k -= step;
        }
        if inexact {
            self.mul_add_small(1, 1);
        }
    }

    fn cmp(&self, other: &Nat) -> std::cmp::Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(value: i64, scale: i32, cached: &'static str, format: &'static str) -> State<'static> {
        State::Int {
            value,
            scale,
            cached,
            format,
        }
    }

    fn dec(neg: bool, abs: &[u64], scale: i32, format: &'static str) -> State<'static> {
        State::Dec {
            neg,
            abs: abs.to_vec(),
            scale,
            format,
        }
    }

    #[test]
    fn parse_quantity_states_match_go() {
        struct Case {
            name: &'static str,
            input: &'static str,
            want: State<'static>,
        }
        let cases = [
            Case {
                name: "zero keeps its string",
                input: "0",
                want: int(0, 0, "0", DECIMAL_SI),
            },
            Case {
                name: "canonical milli",
                input: "100m",
                want: int(100, -3, "100m", DECIMAL_SI),
            },
            Case {
                name: "canonical milli 500m",
                input: "500m",
                want: int(500, -3, "500m", DECIMAL_SI),
            },
            Case {
                name: "1000m is not canonical",
                input: "1000m",
                want: int(1000, -3, "", DECIMAL_SI),
            },
            Case {
                name: "fraction",
                input: "0.5",
                want: int(5, -1, "", DECIMAL_SI),
            },
            Case {
                name: "plain int",
                input: "1",
                want: int(1, 0, "1", DECIMAL_SI),
            },
            Case {
                name: "bytes",
                input: "128974848",
                want: int(128_974_848, 0, "128974848", DECIMAL_SI),
            },
            Case {
                name: "exponent",
                input: "129e6",
                want: int(129, 6, "129e6", DECIMAL_EXPONENT),
            },
            Case {
                name: "canonical Gi",
                input: "1Gi",
                want: int(1 << 30, 0, "1Gi", BINARY_SI),
            },
            Case {
                name: "1536Mi is not cached",
                input: "1536Mi",
                want: int(1536 << 20, 0, "", BINARY_SI),
            },
            Case {
                name: "123Mi",
                input: "123Mi",
                want: int(123 << 20, 0, "123Mi", BINARY_SI),
            },
            Case {
                name: "Ki",
                input: "64Ki",
                want: int(64 << 10, 0, "", BINARY_SI),
            },
            Case {
                name: "negative",
                input: "-2",
                want: int(-2, 0, "-2", DECIMAL_SI),
            },
            Case {
                name: "fractional binary takes the slow path",
                input: "1.5Gi",
                want: dec(false, &[1_610_612_736_000_000_000], 9, BINARY_SI),
            },
            Case {
                name: "tiny binary becomes decimal",
                input: "0.0000000001Ki",
                want: dec(false, &[103], 9, DECIMAL_SI),
            },
            Case {
                name: "sub-nano rounds up",
                input: "0.0000000001",
                want: dec(false, &[1], 9, DECIMAL_SI),
            },
            Case {
                name: "zero slow path keeps its scale",
                input: "0.0000000000",
                want: dec(false, &[], 10, DECIMAL_SI),
            },
            Case {
                name: "big binary is capped",
                input: "100Ei",
                want: dec(false, &[i64::MAX as u64], 0, BINARY_SI),
            },
            Case {
                name: "many digits",
                input: "1234567890123456789",
                want: dec(
                    false,
                    &[7_888_470_988_684_038_656, 66_926_059],
                    9,
                    DECIMAL_SI,
                ),
            },
            Case {
                name: "three words",
                input: "12345678901234567890123456789012345",
                want: dec(
                    false,
                    &[
                        9_103_449_232_771_086_848,
                        12_719_282_166_159_138_267,
                        36_280,
                    ],
                    9,
                    DECIMAL_SI,
                ),
            },
            Case {
                name: "negative slow path",
                input: "-1.5Ki",
                want: dec(true, &[1_536_000_000_000], 9, BINARY_SI),
            },
            Case {
                name: "bad suffix",
                input: "1Xi",
                want: State::Zero,
            },
            Case {
                name: "bad format",
                input: "1e",
                want: State::Zero,
            },
        ];
        for c in cases {
            assert_eq!(parse(c.input), c.want, "{}: {}", c.name, c.input);
        }
    }

    #[test]
    fn prints_the_fast_path_state() {
        let mut out = Vec::new();
        write_state(&mut out, &parse("100m"));
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "{i:(resource.int64Amount){value:(int64)100 scale:(resource.Scale)-3} \
             d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string)100m Format:(resource.Format)DecimalSI}"
        );
    }
}
