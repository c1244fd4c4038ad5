//! Int-or-percent values (`maxUnavailable: 25%`) resolved against a total, as apimachinery's `intstr.GetScaledValueFromIntOrPercent`.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Why an int-or-percent value does not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No value where one is required.
    #[error("nil value for IntOrString")]
    Nil,
    /// A string that is not a percentage.
    #[error("invalid value for IntOrString: invalid type: string is not a percentage")]
    NotAPercentage(String),
    /// A percentage whose number does not parse.
    #[error("invalid value {0:?}: strconv.Atoi: parsing failed")]
    InvalidPercentage(String),
}

/// The absolute value of `value` against `total`: an integer as is, a percentage of `total`
/// rounded up or down, as apimachinery's `GetScaledValueFromIntOrPercent`.
pub fn scaled_value(value: Option<&IntOrString>, total: i32, round_up: bool) -> Result<i32, Error> {
    match value {
        None => Err(Error::Nil),
        Some(IntOrString::Int(v)) => Ok(*v),
        Some(IntOrString::String(s)) => {
            let number = s
                .strip_suffix('%')
                .ok_or_else(|| Error::NotAPercentage(s.clone()))?;
            let percent: i64 = number
                .parse()
                .map_err(|_| Error::InvalidPercentage(s.clone()))?;
            let product = percent.saturating_mul(i64::from(total));
            // Integer arithmetic, as Go's `math.Ceil(float64(v) * float64(total) / 100)` for
            // the values that fit.
            let scaled = if round_up {
                product.div_euclid(100) + i64::from(product.rem_euclid(100) != 0)
            } else {
                product.div_euclid(100)
            };
            Ok(i32::try_from(scaled).unwrap_or(if scaled < 0 { i32::MIN } else { i32::MAX }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_value_table() {
        let s = |v: &str| Some(IntOrString::String(v.into()));
        let cases = [
            ("int", Some(IntOrString::Int(3)), 10, true, Ok(3)),
            ("percent rounded up", s("25%"), 10, true, Ok(3)),
            ("percent rounded down", s("25%"), 10, false, Ok(2)),
            ("exact percent", s("50%"), 10, false, Ok(5)),
            ("zero total", s("50%"), 0, true, Ok(0)),
            ("100 percent", s("100%"), 7, true, Ok(7)),
            ("nil", None, 10, true, Err(Error::Nil)),
            (
                "not a percent",
                s("3"),
                10,
                true,
                Err(Error::NotAPercentage("3".into())),
            ),
            (
                "bad number",
                s("x%"),
                10,
                true,
                Err(Error::InvalidPercentage("x%".into())),
            ),
        ];
        for (name, value, total, up, want) in cases {
            assert_eq!(scaled_value(value.as_ref(), total, up), want, "{name}");
        }
    }
}
