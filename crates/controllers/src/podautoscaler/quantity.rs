//! `resource.Quantity.MilliValue()` for the quantities the metrics API and pod requests carry (`250m`, `1.5`, `128Mi`, `2500000n`).

/// The quantity in thousandths, rounded up as apimachinery's `MilliValue` (so `1n` is 1);
/// `None` when it does not parse or does not fit an `i64`.
pub fn milli_value(s: &str) -> Option<i64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    // (numerator, denominator) of the suffix's multiplier, times 1000 for milli units.
    let (mul, div): (i128, i128) = match suffix {
        "n" => (1, 1_000_000),
        "u" => (1, 1_000),
        "m" => (1, 1),
        "" => (1_000, 1),
        "k" => (1_000_000, 1),
        "M" => (1_000_000_000, 1),
        "G" => (1_000_000_000_000, 1),
        "T" => (1_000_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000_000, 1),
        "Ki" => (1_000 << 10, 1),
        "Mi" => (1_000 << 20, 1),
        "Gi" => (1_000 << 30, 1),
        "Ti" => (1_000 << 40, 1),
        "Pi" => (1_000 << 50, 1),
        "Ei" => (1_000 << 60, 1),
        _ => return None,
    };
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if (whole.is_empty() && fraction.is_empty())
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
        || fraction.len() > 18
    {
        return None;
    }
    let scale = 10i128.pow(u32::try_from(fraction.len()).ok()?);
    let mantissa: i128 = format!("{whole}{fraction}").parse().ok()?;
    let numerator = mantissa.checked_mul(mul)?;
    let denominator = scale.checked_mul(div)?;
    // Ceiling division for positive amounts (MilliValue rounds up).
    let magnitude = (numerator + denominator - 1) / denominator;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_values_as_apimachinery() {
        let cases = [
            ("250m", Some(250)),
            ("1", Some(1000)),
            ("1.5", Some(1500)),
            ("2500000n", Some(3)),
            ("150000000n", Some(150)),
            ("1u", Some(1)),
            ("128Mi", Some(128 * 1024 * 1024 * 1000)),
            ("3072Ki", Some(3 * 1024 * 1024 * 1000)),
            ("1k", Some(1_000_000)),
            ("0", Some(0)),
            ("", None),
            ("1x", None),
            ("abc", None),
            (".", None),
        ];
        for (input, want) in cases {
            assert_eq!(milli_value(input), want, "{input:?}");
        }
    }
}
