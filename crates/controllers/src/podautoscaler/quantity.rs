//! `resource.Quantity.MilliValue()` for the quantities the metrics API and pod requests carry (`250m`, `1.5`, `128Mi`, `2500000n`).

/// The quantity in thousandths, rounded up as apimachinery's `MilliValue` (so `1n` is 1);
/// `None` when it does not parse or does not fit an `i64`.
pub fn milli_value(s: &str) -> Option<i64> {
    kcm_machinery::quantity::parse(s.trim())
        .ok()?
        .milli_value()
        .and_then(|milli| i64::try_from(milli).ok())
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
            // Go's parser reads a bare "." as an empty numerator, so 0.
            (".", Some(0)),
        ];
        for (input, want) in cases {
            assert_eq!(milli_value(input), want, "{input:?}");
        }
    }
}
