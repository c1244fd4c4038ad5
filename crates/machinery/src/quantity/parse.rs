//! apimachinery's `ParseQuantity` (v1.33): the int64 fast path and the `inf.Dec` slow path.

use std::cmp::Ordering;

use super::nat::Nat;
use super::{Amount, Error, Format, Quantity, Result};

/// `maxInt64Factors`: decimal digits an int64 always holds.
const MAX_INT64_FACTORS: i32 = 18;
/// `resource.Nano`: the smallest scale the fast path keeps.
const NANO: i32 = -9;
/// Most integer digits a parsed quantity may have. Any value this size or smaller prints a
/// canonical form whose exponent stays within what [`Nat::mul_pow10`] accepts when it is parsed
/// again (with room for a rounding carry), so everything that parses round-trips. Go has no
/// bound; a person never writes a quantity of more than a few dozen digits.
const MAX_MAGNITUDE: i64 = super::nat::MAX_POW10 as i64 - 16;

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
    while i < end && b[i].is_ascii_digit() {
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
        while i < end && b[i].is_ascii_digit() {
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
        if !b[i].is_ascii_digit() {
            return None;
        }
        i += 1;
    }
}

/// `quantitySuffixer.interpret`: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSI));
    let binary = |e| Some((2, e, Format::BinarySI));
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
            Some((10, parsed as i32, Format::DecimalExponent))
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

/// Go's `ParseQuantity` (k8s.io/apimachinery v1.33) on an already trimmed string.
///
/// The result keeps the representation Go builds (int64 amount or `inf.Dec`, scale, format,
/// whether the input is kept as the cached canonical string). One deliberate difference: a
/// value with more than `MAX_MAGNITUDE` integer digits, or whose exponent would need more
/// than 4096 decimal digits of scaling, is refused with [`Error::TooLarge`] instead of
/// exhausting memory (or, for `1e2000000000`, printing a canonical form that then cannot be
/// parsed).
pub fn parse(s: &str) -> Result<Quantity> {
    if s.is_empty() {
        return Err(Error::Format);
    }
    if s == "0" {
        return Ok(Quantity {
            amount: Amount::Int { value: 0, scale: 0 },
            format: Format::DecimalSI,
            cached: true,
        });
    }
    let sp = split(s).ok_or(Error::Format)?;
    let (base, exponent, mut format) = interpret(sp.suffix).ok_or(Error::Suffix)?;

    let mut scale: i32 = 0;
    let mut mantissa: i64 = 1;
    let precision: i32 = if format == Format::BinarySI {
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
                value = value
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(i64::from(d - b'0')))
                    .ok_or(Error::Numeric)?;
            }
            if let Some(mut result) = int64_multiply(value, mantissa) {
                if !sp.positive {
                    result = -result;
                }
                let cached = if format == Format::BinarySI {
                    exponent % 10 == 0 && value & 0x07 != 0
                } else {
                    let len = sp.num.len() + sp.denom.len();
                    let ends_000 = len >= 3 && digits.clone().skip(len - 3).all(|d| d == b'0');
                    let first_zero = digits.clone().next() == Some(b'0');
                    scale % 3 == 0 && !ends_000 && !first_zero
                };
                let digits = i64::from(result.unsigned_abs().checked_ilog10().unwrap_or(0)) + 1;
                if result != 0 && digits + i64::from(scale) > MAX_MAGNITUDE {
                    return Err(Error::TooLarge);
                }
                return Ok(Quantity {
                    amount: Amount::Int {
                        value: result,
                        scale,
                    },
                    format,
                    cached,
                });
            }
        }
    }

    // Slow path: inf.Dec.SetString(value).
    let v = sp.value.as_bytes();
    let (neg_in, body) = match v.first() {
        Some(b'-') => (true, &v[1..]),
        Some(b'+') => (false, &v[1..]),
        _ => (false, v),
    };
    if !body.iter().any(u8::is_ascii_digit) {
        return Err(Error::Numeric);
    }
    let frac_len = body
        .iter()
        .position(|&c| c == b'.')
        .map_or(0, |p| body.len() - p - 1) as i32;
    let mut abs = Nat::from_decimal(body.iter().copied().filter(u8::is_ascii_digit));
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
        let diff = i64::from(dscale) - 9;
        if diff <= 0 {
            let up = u32::try_from(-diff).map_err(|_| Error::TooLarge)?;
            if !abs.mul_pow10(up) {
                return Err(Error::TooLarge);
            }
        } else {
            abs.div_pow10_round_up(diff as u32);
        }
        dscale = 9;
    }
    if format == Format::BinarySI && !abs.is_zero() {
        // Cmp(maxAllowed) > 0: abs / 10^9 > 2^63-1.
        let mut max = Nat::from_u64(i64::MAX as u64);
        max.mul_small(1_000_000_000);
        if abs.cmp(&max) == Ordering::Greater {
            abs = Nat::from_u64(i64::MAX as u64);
            dscale = 0;
        }
    }
    if format == Format::BinarySI
        && dscale == 9
        && !abs.is_zero()
        && abs.cmp(&Nat::from_u64(1_000_000_000)) == Ordering::Less
    {
        format = Format::DecimalSI;
    }
    // `abs` holds whole nanos here: below 10^(MAX_MAGNITUDE + 9) it has at most MAX_MAGNITUDE
    // integer digits. Counting bits first keeps the exact count to the rare huge value.
    let nano_digits_bound = (MAX_MAGNITUDE + 9) as usize;
    if abs.0.len() * 64 > nano_digits_bound * 3 && abs.to_decimal().len() > nano_digits_bound {
        return Err(Error::TooLarge);
    }
    Ok(Quantity {
        amount: Amount::Dec {
            neg: negative,
            abs: abs.0,
            scale: dscale,
        },
        format,
        cached: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(value: i64, scale: i32, cached: bool, format: Format) -> Result<Quantity> {
        Ok(Quantity {
            amount: Amount::Int { value, scale },
            format,
            cached,
        })
    }

    fn dec(neg: bool, abs: &[u64], scale: i32, format: Format) -> Result<Quantity> {
        Ok(Quantity {
            amount: Amount::Dec {
                neg,
                abs: abs.to_vec(),
                scale,
            },
            format,
            cached: false,
        })
    }

    /// The private state Go's `ParseQuantity` builds (checked against Go by the
    /// deployment hash vectors).
    #[test]
    fn parse_states_match_go() {
        use Format::*;
        struct Case {
            name: &'static str,
            input: &'static str,
            want: Result<Quantity>,
        }
        let cases = [
            Case {
                name: "zero keeps its string",
                input: "0",
                want: int(0, 0, true, DecimalSI),
            },
            Case {
                name: "canonical milli",
                input: "100m",
                want: int(100, -3, true, DecimalSI),
            },
            Case {
                name: "1000m is not canonical",
                input: "1000m",
                want: int(1000, -3, false, DecimalSI),
            },
            Case {
                name: "fraction",
                input: "0.5",
                want: int(5, -1, false, DecimalSI),
            },
            Case {
                name: "plain int",
                input: "1",
                want: int(1, 0, true, DecimalSI),
            },
            Case {
                name: "bytes",
                input: "128974848",
                want: int(128_974_848, 0, true, DecimalSI),
            },
            Case {
                name: "exponent",
                input: "129e6",
                want: int(129, 6, true, DecimalExponent),
            },
            Case {
                name: "canonical Gi",
                input: "1Gi",
                want: int(1 << 30, 0, true, BinarySI),
            },
            Case {
                name: "1536Mi is not cached",
                input: "1536Mi",
                want: int(1536 << 20, 0, false, BinarySI),
            },
            Case {
                name: "123Mi",
                input: "123Mi",
                want: int(123 << 20, 0, true, BinarySI),
            },
            Case {
                name: "Ki",
                input: "64Ki",
                want: int(64 << 10, 0, false, BinarySI),
            },
            Case {
                name: "negative",
                input: "-2",
                want: int(-2, 0, true, DecimalSI),
            },
            Case {
                name: "fractional binary takes the slow path",
                input: "1.5Gi",
                want: dec(false, &[1_610_612_736_000_000_000], 9, BinarySI),
            },
            Case {
                name: "tiny binary becomes decimal",
                input: "0.0000000001Ki",
                want: dec(false, &[103], 9, DecimalSI),
            },
            Case {
                name: "sub-nano rounds up",
                input: "0.0000000001",
                want: dec(false, &[1], 9, DecimalSI),
            },
            Case {
                name: "zero slow path keeps its scale",
                input: "0.0000000000",
                want: dec(false, &[], 10, DecimalSI),
            },
            Case {
                name: "big binary is capped",
                input: "100Ei",
                want: dec(false, &[i64::MAX as u64], 0, BinarySI),
            },
            Case {
                name: "many digits",
                input: "1234567890123456789",
                want: dec(
                    false,
                    &[7_888_470_988_684_038_656, 66_926_059],
                    9,
                    DecimalSI,
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
                    DecimalSI,
                ),
            },
            Case {
                name: "negative slow path",
                input: "-1.5Ki",
                want: dec(true, &[1_536_000_000_000], 9, BinarySI),
            },
            Case {
                name: "empty",
                input: "",
                want: Err(Error::Format),
            },
            Case {
                name: "bad suffix",
                input: "1Xi",
                want: Err(Error::Format),
            },
            Case {
                name: "bad format",
                input: "1e",
                want: Err(Error::Suffix),
            },
            Case {
                name: "letters",
                input: "aoeu",
                want: Err(Error::Format),
            },
            Case {
                name: "two points",
                input: "1.1.M",
                want: Err(Error::Format),
            },
            Case {
                name: "a lone point is zero",
                input: ".",
                want: int(0, 0, false, DecimalSI),
            },
            Case {
                name: "a huge exponent on the fast path",
                input: "1e2000000000",
                want: Err(Error::TooLarge),
            },
            Case {
                name: "the largest magnitude",
                input: "1e4079",
                want: int(1, 4079, false, DecimalExponent),
            },
            Case {
                name: "one digit more",
                input: "1e4080",
                want: Err(Error::TooLarge),
            },
            Case {
                name: "one digit more on the slow path",
                input: "1234567890123456789e4062",
                want: Err(Error::TooLarge),
            },
            Case {
                name: "hostile exponent",
                input: "1234567890123456789e2000000000",
                want: Err(Error::TooLarge),
            },
        ];
        for c in cases {
            assert_eq!(parse(c.input), c.want, "{}: {}", c.name, c.input);
        }
    }

    /// Upstream's `TestQuantityParse` invalid inputs that v1.33 rejects.
    #[test]
    fn rejects_upstream_invalid_inputs() {
        for input in [
            "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1",
            "1 ",
        ] {
            assert!(parse(input).is_err(), "{input} parsed unexpectedly");
        }
    }
}
