//! Kubernetes resource quantities (`100m`, `128Mi`, `1.5G`, `2e3`) parsed to exact integers.
//!
//! apimachinery's `resource.Quantity` is arbitrary precision; the scheduler and the simulated
//! kubelet only need `MilliValue()` (cpu) and `Value()` (bytes, pod counts), which fit an
//! `i128` for every quantity a real cluster uses. Parsing is exact: no floating point.

/// Why a quantity string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {input:?}"
)]
pub struct Error {
    /// The rejected input.
    pub input: String,
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A parsed quantity, held in milli-units (so `100m` cpu is 100 and `1` is 1000).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    milli: i128,
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { milli: 0 };

    /// A quantity of `milli` thousandths (cpu millicores).
    pub fn from_milli(milli: i128) -> Self {
        Self { milli }
    }

    /// A quantity of whole units (bytes, pods, cores).
    pub fn from_value(value: i128) -> Self {
        Self {
            milli: value.saturating_mul(1000),
        }
    }

    /// Parses the Kubernetes serialization, as apimachinery's `resource.ParseQuantity`.
    /// Fractions below a milli-unit round up, as `MilliValue()` does.
    pub fn parse(input: &str) -> Result<Self> {
        let err = || Error {
            input: input.to_owned(),
        };
        let s = input.trim();
        if s.is_empty() {
            return Err(err());
        }
        let (negative, s) = match s.as_bytes()[0] {
            b'+' => (false, &s[1..]),
            b'-' => (true, &s[1..]),
            _ => (false, s),
        };
        let number_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(number_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(err());
        }
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        // The number as mantissa * 10^-frac_digits.
        let digits = format!("{int_part}{frac_part}");
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| err())?
        };
        let frac_digits = i32::try_from(frac_part.len()).map_err(|_| err())?;

        // value = mantissa * 10^-frac_digits * base^exp
        let (base, exp): (i128, i32) = match suffix {
            "" => (10, 0),
            "n" => (10, -9),
            "u" => (10, -6),
            "m" => (10, -3),
            "k" => (10, 3),
            "M" => (10, 6),
            "G" => (10, 9),
            "T" => (10, 12),
            "P" => (10, 15),
            "E" => (10, 18),
            "Ki" => (2, 10),
            "Mi" => (2, 20),
            "Gi" => (2, 30),
            "Ti" => (2, 40),
            "Pi" => (2, 50),
            "Ei" => (2, 60),
            other => {
                let rest = other
                    .strip_prefix('e')
                    .or_else(|| other.strip_prefix('E'))
                    .ok_or_else(err)?;
                let exp: i32 = rest.parse().map_err(|_| err())?;
                if !(-30..=30).contains(&exp) {
                    return Err(err());
                }
                (10, exp)
            }
        };

        // milli = mantissa * 1000 * base^exp / 10^frac_digits, rounded up.
        let mut numerator = mantissa.checked_mul(1000).ok_or_else(err)?;
        let mut denominator: i128 = 10i128.checked_pow(frac_digits as u32).ok_or_else(err)?;
        if base == 2 {
            numerator = numerator.checked_mul(1i128 << exp).ok_or_else(err)?;
        } else if exp >= 0 {
            numerator = numerator
                .checked_mul(10i128.checked_pow(exp as u32).ok_or_else(err)?)
                .ok_or_else(err)?;
        } else {
            denominator = denominator
                .checked_mul(10i128.checked_pow((-exp) as u32).ok_or_else(err)?)
                .ok_or_else(err)?;
        }
        let milli = (numerator + denominator - 1) / denominator;
        Ok(Self {
            milli: if negative { -milli } else { milli },
        })
    }

    /// Parses an optional `k8s_openapi` quantity; absent means zero.
    pub fn parse_opt(
        q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    ) -> Result<Self> {
        q.map_or(Ok(Self::ZERO), |q| Self::parse(&q.0))
    }

    /// The value in milli-units (`MilliValue()`).
    pub fn milli(self) -> i128 {
        self.milli
    }

    /// The value in whole units, rounded up (`Value()`).
    pub fn value(self) -> i128 {
        if self.milli >= 0 {
            (self.milli + 999) / 1000
        } else {
            self.milli / 1000
        }
    }

    /// `self + other`, saturating.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            milli: self.milli.saturating_add(other.milli),
        }
    }

    /// `self - other`, saturating.
    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity {
            milli: self.milli.saturating_sub(other.milli),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_forms() {
        let cases: &[(&str, i128)] = &[
            ("0", 0),
            ("1", 1000),
            ("100m", 100),
            ("1.5", 1500),
            ("0.1", 100),
            (".5", 500),
            ("2k", 2_000_000),
            ("128Mi", 128 * 1024 * 1024 * 1000),
            ("1Gi", (1i128 << 30) * 1000),
            ("1G", 1_000_000_000_000),
            ("2e3", 2_000_000),
            ("1E3", 1_000_000),
            ("1n", 1),    // rounds up to a milli
            ("1500u", 2), // 1.5m rounds up
            ("-1", -1000),
            ("+250m", 250),
        ];
        for (input, milli) in cases {
            assert_eq!(
                Quantity::parse(input).map(Quantity::milli),
                Ok(*milli),
                "{input}"
            );
        }
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "abc", "1..2", "1Zi", "1e", "1e99", ".", "--1", "1 Mi"] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn value_rounds_up() {
        assert_eq!(Quantity::parse("100m").map(Quantity::value), Ok(1));
        assert_eq!(Quantity::parse("2").map(Quantity::value), Ok(2));
        assert_eq!(Quantity::parse("1Ki").map(Quantity::value), Ok(1024));
    }
}
