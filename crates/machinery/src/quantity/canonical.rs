//! `Quantity.String()` (`CanonicalizeBytes`) and `RoundUp`.

use std::cmp::Ordering;
use std::fmt;

use super::nat::Nat;
use super::{Amount, Format, Quantity};

/// `resource.Milli`: the scale `SetDefaults_ResourceList` rounds up to.
pub(super) const MILLI: i32 = -3;

/// A value as sign, magnitude and `inf.Dec` scale: `(-1)^neg * abs / 10^scale`.
struct DecView {
    neg: bool,
    abs: Nat,
    scale: i32,
}

impl Amount {
    fn to_dec(&self) -> DecView {
        match self {
            Amount::Int { value, scale } => DecView {
                neg: *value < 0,
                abs: Nat::from_u64(value.unsigned_abs()),
                scale: scale.wrapping_neg(),
            },
            Amount::Dec { neg, abs, scale } => DecView {
                neg: *neg,
                abs: Nat(abs.clone()),
                scale: *scale,
            },
        }
    }

    fn is_zero(&self) -> bool {
        match self {
            Amount::Int { value, .. } => *value == 0,
            Amount::Dec { abs, .. } => abs.is_empty(),
        }
    }

    /// `AsScale`: rounded up (away from zero) to `10^scale`, and whether that was exact.
    fn as_scale(&self, scale: i32) -> (Amount, bool) {
        match self {
            Amount::Int { value, scale: own } => {
                if *own >= scale {
                    return (self.clone(), true);
                }
                let (value, exact) = negative_scale_i64(*value, i64::from(scale) - i64::from(*own));
                (Amount::Int { value, scale }, exact)
            }
            Amount::Dec {
                neg,
                abs,
                scale: own,
            } => {
                let target = scale.wrapping_neg();
                let mut abs = Nat(abs.clone());
                let exact = if *own <= target {
                    let up = u32::try_from(i64::from(target) - i64::from(*own)).unwrap_or(u32::MAX);
                    if !abs.mul_pow10(up) {
                        // Beyond any parsed quantity: keep the value as it is.
                        return (self.clone(), true);
                    }
                    true
                } else {
                    let down =
                        u32::try_from(i64::from(*own) - i64::from(target)).unwrap_or(u32::MAX);
                    abs.div_pow10_round_up(down)
                };
                (
                    Amount::Dec {
                        neg: *neg && !abs.is_zero(),
                        abs: abs.0,
                        scale: target,
                    },
                    exact,
                )
            }
        }
    }

    /// `AsCanonicalBytes`: digits and a base-10 exponent that is a multiple of three.
    fn canonical_base10(&self) -> (String, i32) {
        if let Amount::Int { value, scale } = self {
            let (mut amount, times) = remove_i64_factors(*value, 10);
            let mut exponent = scale.wrapping_add(times);
            let adjust = match exponent % 3 {
                1 | -2 => Some((10, 1)),
                2 | -1 => Some((100, 2)),
                _ => None,
            };
            match adjust {
                None => return (amount.to_string(), exponent),
                Some((factor, by)) => {
                    if let Some(scaled) = amount.checked_mul(factor) {
                        amount = scaled;
                        exponent = exponent.wrapping_sub(by);
                        return (amount.to_string(), exponent);
                    }
                }
            }
        }
        // The inf.Dec form (also the int64 form's fallback on overflow).
        let DecView {
            neg,
            mut abs,
            scale,
        } = self.to_dec();
        let mut exponent = scale.wrapping_neg();
        exponent = exponent.wrapping_add(abs.remove_factors(10));
        while exponent % 3 != 0 {
            abs.mul_small(10);
            exponent = exponent.wrapping_sub(1);
        }
        (signed(neg, &abs), exponent)
    }

    /// `AsCanonicalBase1024Bytes` of an amount already rounded to scale 0: digits and a
    /// base-1024 exponent. `None` only beyond anything parsing produces.
    fn canonical_base1024(&self) -> Option<(String, i32)> {
        if let Amount::Int { value, scale: 0 } = self {
            let (amount, times) = remove_i64_factors(*value, 1024);
            return Some((amount.to_string(), times));
        }
        let DecView {
            neg,
            mut abs,
            scale,
        } = self.to_dec();
        if scale < 0 {
            if !abs.mul_pow10(scale.unsigned_abs()) {
                return None;
            }
        } else {
            abs.div_pow10_round_up(scale.unsigned_abs());
        }
        let times = abs.remove_factors(1024);
        Some((signed(neg, &abs), times))
    }

    /// `-1024 < self < 1024`.
    fn abs_below_1024(&self) -> bool {
        let DecView { mut abs, scale, .. } = self.to_dec();
        let mut limit = Nat::from_u64(1024);
        if scale >= 0 {
            if !limit.mul_pow10(scale.unsigned_abs()) {
                return true;
            }
        } else if !abs.mul_pow10(scale.unsigned_abs()) {
            return false;
        }
        abs.cmp(&limit) == Ordering::Less
    }
}

fn signed(neg: bool, abs: &Nat) -> String {
    let digits = abs.to_decimal();
    if neg { format!("-{digits}") } else { digits }
}

/// `removeInt64Factors`: divides out every factor `base`, keeping the sign.
fn remove_i64_factors(value: i64, base: i64) -> (i64, i32) {
    let negative = value < 0;
    let mut result = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    let mut times: i32 = 0;
    while result >= base && result % base == 0 {
        times += 1;
        result /= base;
    }
    (
        if negative {
            result.wrapping_neg()
        } else {
            result
        },
        times,
    )
}

/// `negativeScaleInt64`: `base / 10^scale`, rounded away from zero, and whether it was exact.
fn negative_scale_i64(base: i64, scale: i64) -> (i64, bool) {
    if scale == 0 {
        return (base, true);
    }
    let mut value = base;
    let mut fraction = false;
    for _ in 0..scale {
        if !fraction && value % 10 != 0 {
            fraction = true;
        }
        value /= 10;
        if value == 0 {
            if fraction {
                return (if base > 0 { 1 } else { -1 }, false);
            }
            return (0, true);
        }
    }
    if fraction {
        if base > 0 {
            value += 1;
        } else {
            value -= 1;
        }
    }
    (value, !fraction)
}

/// The SI suffix of a base-10 exponent.
fn decimal_si_suffix(exponent: i32) -> Option<&'static str> {
    Some(match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return None,
    })
}

/// The binary suffix of a base-1024 exponent.
fn binary_suffix(exponent: i32) -> Option<&'static str> {
    Some(match exponent {
        0 => "",
        1 => "Ki",
        2 => "Mi",
        3 => "Gi",
        4 => "Ti",
        5 => "Pi",
        6 => "Ei",
        _ => return None,
    })
}

/// Digits and exponent in `DecimalExponent` notation.
fn exponent_form(digits: String, exponent: i32) -> String {
    if exponent == 0 {
        digits
    } else {
        format!("{digits}e{exponent}")
    }
}

impl Quantity {
    /// Whether the value is zero (`IsZero`).
    pub fn is_zero(&self) -> bool {
        self.amount.is_zero()
    }

    /// The canonical string (`String()` / `CanonicalizeBytes`): the mantissa is the smallest
    /// integer, the exponent a multiple of three (of 1024 for `BinarySI`), in the quantity's
    /// format; `BinarySI` values below 1024 or with a fraction print as `DecimalSI`.
    ///
    /// Exponents without an SI suffix (beyond `E`/`Ei`, below `n`) print in exponent notation
    /// (`1000E` is `1e21`) as current upstream does; apimachinery up to v1.33 dropped the
    /// suffix there (printing `1`), corrupting the value.
    pub fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".to_owned();
        }
        let mut format = self.format;
        let mut rounded = None;
        if format == Format::BinarySI {
            if self.amount.abs_below_1024() {
                format = Format::DecimalSI;
            } else {
                let (r, exact) = self.amount.as_scale(0);
                if exact {
                    rounded = Some(r);
                } else {
                    format = Format::DecimalSI;
                }
            }
        }
        if let Some(rounded) = rounded
            && let Some((digits, exponent)) = rounded.canonical_base1024()
            && let Some(suffix) = binary_suffix(exponent)
        {
            return digits + suffix;
        }
        let (digits, exponent) = self.amount.canonical_base10();
        match (format, decimal_si_suffix(exponent)) {
            (Format::DecimalSI, Some(suffix)) => digits + suffix,
            _ => exponent_form(digits, exponent),
        }
    }

    /// `ScaledValue(scale)`: the value in units of `10^scale`, rounded away from zero as Go's
    /// `AsScale`; `None` when it does not fit an `i128` (Go's `int64` result would overflow).
    pub fn scaled_value(&self, scale: i32) -> Option<i128> {
        match self.amount.as_scale(scale).0 {
            Amount::Int { value, scale: own } => {
                let up = u32::try_from(i64::from(own) - i64::from(scale)).ok()?;
                i128::from(value).checked_mul(10i128.checked_pow(up)?)
            }
            Amount::Dec {
                neg,
                abs,
                scale: own,
            } => {
                // `as_scale` leaves a value too large to rescale as it was.
                if i64::from(own) != -i64::from(scale) {
                    return None;
                }
                let magnitude = match abs.as_slice() {
                    [] => 0,
                    [low] => i128::from(*low),
                    [low, high] => {
                        i128::try_from((u128::from(*high) << 64) | u128::from(*low)).ok()?
                    }
                    _ => return None,
                };
                Some(if neg { -magnitude } else { magnitude })
            }
        }
    }

    /// `MilliValue()`: the value in thousandths, rounded away from zero (`1n` is 1).
    pub fn milli_value(&self) -> Option<i128> {
        self.scaled_value(MILLI)
    }

    /// `Value()`: the value in whole units, rounded away from zero (`100m` is 1).
    pub fn value(&self) -> Option<i128> {
        self.scaled_value(0)
    }

    /// `RoundUp`: rounds away from zero to a multiple of `10^scale`; returns whether the value
    /// was already one.
    pub fn round_up(&mut self, scale: i32) -> bool {
        if let Amount::Int { scale: own, .. } = self.amount
            && own >= scale
        {
            return true;
        }
        self.cached = false;
        let (amount, exact) = self.amount.as_scale(scale);
        self.amount = amount;
        exact
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{canonicalize, canonicalize_resource_list_value, parse};
    use super::*;

    /// Upstream's `decQuantity(value, scale, format)`: an `inf.Dec` of `value * 10^scale`.
    fn dec_q(value: i64, scale: i32, format: Format) -> Quantity {
        let mut abs = vec![value.unsigned_abs()];
        if value == 0 {
            abs.clear();
        }
        Quantity {
            amount: Amount::Dec {
                neg: value < 0,
                abs,
                scale: -scale,
            },
            format,
            cached: false,
        }
    }

    fn negated(q: &Quantity) -> Quantity {
        let mut q = q.clone();
        if let Amount::Dec { neg, .. } = &mut q.amount {
            *neg = !*neg;
        }
        q
    }

    /// Upstream's `TestQuantityString`: value → canonical; the canonical string parses with
    /// `s` kept; the alternate spelling prints canonically; the negation prints with a `-`.
    #[test]
    fn quantity_string_as_upstream() {
        use Format::*;
        struct Case {
            name: &'static str,
            input: Quantity,
            expect: &'static str,
            alternate: &'static str,
        }
        let case = |name, input, expect, alternate| Case {
            name,
            input,
            expect,
            alternate,
        };
        let cases = [
            case(
                "1Gi",
                dec_q(1024 * 1024 * 1024, 0, BinarySI),
                "1Gi",
                "1024Mi",
            ),
            case(
                "300Mi",
                dec_q(300 * 1024 * 1024, 0, BinarySI),
                "300Mi",
                "307200Ki",
            ),
            case("6Ki", dec_q(6 * 1024, 0, BinarySI), "6Ki", ""),
            case(
                "1001Gi",
                dec_q(1001 * 1024 * 1024 * 1024, 0, BinarySI),
                "1001Gi",
                "1025024Mi",
            ),
            case(
                "1Ti",
                dec_q(1024 * 1024 * 1024 * 1024, 0, BinarySI),
                "1Ti",
                "1024Gi",
            ),
            case("small binary", dec_q(5, 0, BinarySI), "5", "5000m"),
            case("binary fraction", dec_q(500, -3, BinarySI), "500m", "0.5"),
            case("1G", dec_q(1, 9, DecimalSI), "1G", "1000M"),
            case("1000M", dec_q(1000, 6, DecimalSI), "1G", "0.001T"),
            case("1000000k", dec_q(1_000_000, 3, DecimalSI), "1G", ""),
            case("1000000000", dec_q(1_000_000_000, 0, DecimalSI), "1G", ""),
            case("1m", dec_q(1, -3, DecimalSI), "1m", "1000u"),
            case("80m", dec_q(80, -3, DecimalSI), "80m", ""),
            case("1080m", dec_q(1080, -3, DecimalSI), "1080m", "1.08"),
            case("108e-2", dec_q(108, -2, DecimalSI), "1080m", "1080000000n"),
            case("10800e-4", dec_q(10800, -4, DecimalSI), "1080m", ""),
            case("300M", dec_q(300, 6, DecimalSI), "300M", ""),
            case("1T", dec_q(1, 12, DecimalSI), "1T", ""),
            case("1E", dec_q(1, 18, DecimalSI), "1E", ""),
            case("past E", dec_q(1, 21, DecimalSI), "1e21", "1000E"),
            case("5000E", dec_q(5, 21, DecimalSI), "5e21", "5000E"),
            case("1000000E", dec_q(1, 24, DecimalSI), "1e24", "1000000E"),
            case("binary past Ei", dec_q(1, 70, BinarySI), "10e69", ""),
            case("binary 2e70", dec_q(2, 70, BinarySI), "20e69", ""),
            case("binary 1e72", dec_q(1, 72, BinarySI), "1e72", ""),
            case("1234567M", dec_q(1_234_567, 6, DecimalSI), "1234567M", ""),
            case(
                "binary milli",
                dec_q(1_234_567, -3, BinarySI),
                "1234567m",
                "",
            ),
            case("3k", dec_q(3, 3, DecimalSI), "3k", ""),
            case("1025 binary", dec_q(1025, 0, BinarySI), "1025", ""),
            case("zero", dec_q(0, 0, DecimalSI), "0", ""),
            case("binary zero", dec_q(0, 0, BinarySI), "0", ""),
            case("1e9", dec_q(1, 9, DecimalExponent), "1e9", ".001e12"),
            case("1e-3", dec_q(1, -3, DecimalExponent), "1e-3", "0.001e0"),
            case("1e-9", dec_q(1, -9, DecimalExponent), "1e-9", "1000e-12"),
            case("80e-3", dec_q(80, -3, DecimalExponent), "80e-3", ""),
            case("300e6", dec_q(300, 6, DecimalExponent), "300e6", ""),
            case("1e12", dec_q(1, 12, DecimalExponent), "1e12", ""),
            case("1e3", dec_q(1, 3, DecimalExponent), "1e3", ""),
            case("3e3", dec_q(3, 3, DecimalExponent), "3e3", ""),
            case("exponent zero", dec_q(0, 0, DecimalExponent), "0", "00"),
            case("1n", dec_q(1, -9, DecimalSI), "1n", ""),
            case("80n", dec_q(80, -9, DecimalSI), "80n", ""),
            case("1080n", dec_q(1080, -9, DecimalSI), "1080n", ""),
            case("108e-8", dec_q(108, -8, DecimalSI), "1080n", ""),
            case("10800e-10", dec_q(10800, -10, DecimalSI), "1080n", ""),
            case("1u", dec_q(1, -6, DecimalSI), "1u", ""),
            case("80u", dec_q(80, -6, DecimalSI), "80u", ""),
            case("1080u", dec_q(1080, -6, DecimalSI), "1080u", ""),
        ];
        for c in cases {
            assert_eq!(c.input.canonical(), c.expect, "{}", c.name);
            let parsed = parse(c.expect).expect("canonical parses");
            assert!(
                parsed.is_cached(),
                "{}: {} keeps its string",
                c.name,
                c.expect
            );
            assert_eq!(parsed.canonical(), c.expect, "{}: reparsed", c.name);
            if !c.alternate.is_empty() {
                let alt = parse(c.alternate).expect("alternate parses");
                assert!(
                    !alt.is_cached(),
                    "{}: {} is not canonical",
                    c.name,
                    c.alternate
                );
                assert_eq!(
                    alt.canonical(),
                    c.expect,
                    "{}: alternate {}",
                    c.name,
                    c.alternate
                );
            }
            if !c.input.is_zero() {
                let want = format!("-{}", c.expect);
                assert_eq!(negated(&c.input).canonical(), want, "{}: negated", c.name);
            }
        }
    }

    /// Upstream's `TestQuantityStringBelowNano` and `TestBinarySIZeroExponentString`.
    #[test]
    fn edge_exponents() {
        assert_eq!(dec_q(1, -12, Format::DecimalSI).canonical(), "1e-12");
        assert_eq!(dec_q(1, -10, Format::DecimalSI).canonical(), "100e-12");
        assert_eq!(dec_q(2000, 0, Format::BinarySI).canonical(), "2000");
        assert_eq!(dec_q(-2000, 0, Format::BinarySI).canonical(), "-2000");
        let int = |value, scale, format| Quantity {
            amount: Amount::Int { value, scale },
            format,
            cached: false,
        };
        assert_eq!(int(2000, 0, Format::BinarySI).canonical(), "2000");
        assert_eq!(int(-2000, 0, Format::BinarySI).canonical(), "-2000");
        assert_eq!(
            int(i64::MIN, 0, Format::DecimalSI).canonical(),
            "-9223372036854775808"
        );
        assert_eq!(
            int(i64::MAX, 1, Format::DecimalSI).canonical(),
            "92233720368547758070"
        );
        assert_eq!(
            int(i64::MAX, 2, Format::DecimalSI).canonical(),
            "922337203685477580700"
        );
    }

    /// Upstream's `TestQuantityParseEmit`, and the same negated.
    #[test]
    fn parse_emit_as_upstream() {
        struct Case {
            name: &'static str,
            input: &'static str,
            expect: &'static str,
        }
        let cases = [
            Case {
                name: "Ki",
                input: "1Ki",
                expect: "1Ki",
            },
            Case {
                name: "Mi",
                input: "1Mi",
                expect: "1Mi",
            },
            Case {
                name: "Gi",
                input: "1Gi",
                expect: "1Gi",
            },
            Case {
                name: "1024Mi",
                input: "1024Mi",
                expect: "1Gi",
            },
            Case {
                name: "1000M",
                input: "1000M",
                expect: "1G",
            },
            Case {
                name: "milli Ki",
                input: ".001Ki",
                expect: "1024m",
            },
            Case {
                name: "micro Ki",
                input: ".000001Ki",
                expect: "1024u",
            },
            Case {
                name: "nano Ki",
                input: ".000000001Ki",
                expect: "1024n",
            },
            Case {
                name: "sub-nano Ki",
                input: ".000000000001Ki",
                expect: "2n",
            },
        ];
        for c in cases {
            assert_eq!(canonicalize(c.input).as_deref(), Ok(c.expect), "{}", c.name);
            let neg = format!("-{}", c.input);
            assert_eq!(
                canonicalize(&neg),
                Ok(format!("-{}", c.expect)),
                "{}: negated",
                c.name
            );
        }
    }

    /// What users write in pod specs, as kube-apiserver serves it back.
    #[test]
    fn user_spellings() {
        struct Case {
            name: &'static str,
            input: &'static str,
            expect: &'static str,
            resource_list: &'static str,
        }
        let cases = [
            Case {
                name: "half a cpu",
                input: "0.5",
                expect: "500m",
                resource_list: "500m",
            },
            Case {
                name: "fractional Gi",
                input: "1.5Gi",
                expect: "1536Mi",
                resource_list: "1536Mi",
            },
            Case {
                name: "exponent",
                input: "1e3",
                expect: "1e3",
                resource_list: "1e3",
            },
            Case {
                name: "decimal exponent k",
                input: "1000",
                expect: "1k",
                resource_list: "1k",
            },
            Case {
                name: "trailing zero",
                input: "100.0m",
                expect: "100m",
                resource_list: "100m",
            },
            Case {
                name: "canonical kept",
                input: "250m",
                expect: "250m",
                resource_list: "250m",
            },
            Case {
                name: "bytes",
                input: "134217728",
                expect: "134217728",
                resource_list: "134217728",
            },
            Case {
                name: "128Mi",
                input: "128Mi",
                expect: "128Mi",
                resource_list: "128Mi",
            },
            Case {
                name: "1024Ki",
                input: "1024Ki",
                expect: "1Mi",
                resource_list: "1Mi",
            },
            Case {
                name: "sub-milli",
                input: "0.0001",
                expect: "100u",
                resource_list: "1m",
            },
            Case {
                name: "sub-milli Ki",
                input: "0.0000001Ki",
                expect: "102400n",
                resource_list: "1m",
            },
            Case {
                name: "2.5 cpus",
                input: "2.5",
                expect: "2500m",
                resource_list: "2500m",
            },
            Case {
                name: "1.1Ki",
                input: "1.1Ki",
                expect: "1126400m",
                resource_list: "1126400m",
            },
            Case {
                name: "zero",
                input: "0",
                expect: "0",
                resource_list: "0",
            },
            Case {
                name: "zero milli",
                input: "0m",
                expect: "0",
                resource_list: "0",
            },
            Case {
                name: "plus",
                input: "+1",
                expect: "1",
                resource_list: "1",
            },
            Case {
                name: "big decimal",
                input: "12345678901234567890",
                expect: "12345678901234567890",
                resource_list: "12345678901234567890",
            },
            Case {
                name: "capped binary",
                input: "100Ei",
                expect: "9223372036854775807",
                resource_list: "9223372036854775807",
            },
        ];
        for c in cases {
            assert_eq!(canonicalize(c.input).as_deref(), Ok(c.expect), "{}", c.name);
            assert_eq!(
                canonicalize_resource_list_value(c.input).as_deref(),
                Ok(c.resource_list),
                "{}: resource list",
                c.name
            );
        }
    }

    /// Upstream's `TestQuantityRoundUp`.
    #[test]
    fn round_up_as_upstream() {
        struct Case {
            name: &'static str,
            input: &'static str,
            scale: i32,
            expect: &'static str,
            exact: bool,
        }
        let cases = [
            Case {
                name: "milli",
                input: "9.01",
                scale: -3,
                expect: "9010m",
                exact: true,
            },
            Case {
                name: "centi",
                input: "9.01",
                scale: -2,
                expect: "9010m",
                exact: true,
            },
            Case {
                name: "deci",
                input: "9.01",
                scale: -1,
                expect: "9100m",
                exact: false,
            },
            Case {
                name: "unit",
                input: "9.01",
                scale: 0,
                expect: "10",
                exact: false,
            },
            Case {
                name: "ten",
                input: "9.01",
                scale: 1,
                expect: "10",
                exact: false,
            },
            Case {
                name: "hundred",
                input: "9.01",
                scale: 2,
                expect: "100",
                exact: false,
            },
            Case {
                name: "neg milli",
                input: "-9.01",
                scale: -3,
                expect: "-9010m",
                exact: true,
            },
            Case {
                name: "neg centi",
                input: "-9.01",
                scale: -2,
                expect: "-9010m",
                exact: true,
            },
            Case {
                name: "neg deci",
                input: "-9.01",
                scale: -1,
                expect: "-9100m",
                exact: false,
            },
            Case {
                name: "neg unit",
                input: "-9.01",
                scale: 0,
                expect: "-10",
                exact: false,
            },
            Case {
                name: "neg ten",
                input: "-9.01",
                scale: 1,
                expect: "-10",
                exact: false,
            },
            Case {
                name: "neg hundred",
                input: "-9.01",
                scale: 2,
                expect: "-100",
                exact: false,
            },
        ];
        for c in cases {
            for as_dec in [false, true] {
                let mut q = parse(c.input).expect("parses");
                if as_dec {
                    let DecView { neg, abs, scale } = q.amount.to_dec();
                    q.amount = Amount::Dec {
                        neg,
                        abs: abs.0,
                        scale,
                    };
                }
                assert_eq!(q.round_up(c.scale), c.exact, "{} ({as_dec}): exact", c.name);
                assert_eq!(q.canonical(), c.expect, "{} ({as_dec})", c.name);
            }
        }
    }

    #[test]
    fn milli_value_and_value_round_away_from_zero_as_go() {
        let milli = |s: &str| super::super::parse(s).ok().and_then(|q| q.milli_value());
        let value = |s: &str| super::super::parse(s).ok().and_then(|q| q.value());
        for (input, want) in [
            ("0", 0),
            ("1", 1000),
            ("100m", 100),
            ("1.5", 1500),
            (".5", 500),
            ("2k", 2_000_000),
            ("128Mi", 128 * 1024 * 1024 * 1000),
            ("1G", 1_000_000_000_000),
            ("2e3", 2_000_000),
            ("1n", 1),
            ("1500u", 2),
            ("2500000n", 3),
            ("-1", -1000),
            ("-1500u", -2),
            ("+250m", 250),
            ("0.0000000001", 1),
        ] {
            assert_eq!(milli(input), Some(want), "{input}");
        }
        assert_eq!(value("100m"), Some(1));
        assert_eq!(value("-100m"), Some(-1));
        assert_eq!(value("1Ki"), Some(1024));
        assert_eq!(value("1.5Gi"), Some(1_610_612_736));
        assert_eq!(milli("1e99"), None, "beyond i128");
        assert_eq!(value("1e30"), Some(10i128.pow(30)));
    }
}
