//! Kubernetes resource quantities (`100m`, `128Mi`, `1.5G`, `2e3`) as exact milli-unit integers, for the scheduler's and the simulated kubelet's arithmetic.
//!
//! Parsing is machinery's [`kcm_machinery::quantity::parse`] (apimachinery's
//! `resource.ParseQuantity`, arbitrary precision); the scheduler and the simulated kubelet
//! only need `MilliValue()` (cpu) and `Value()` (bytes, pod counts), which fit an `i128` for
//! every quantity a real cluster uses, so that is what is kept.

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

    /// Parses the Kubernetes serialization with machinery's `resource.ParseQuantity`, then
    /// takes its `MilliValue()`: fractions below a milli-unit round away from zero.
    pub fn parse(input: &str) -> Result<Self> {
        kcm_machinery::quantity::parse(input.trim())
            .ok()
            .and_then(|q| q.milli_value())
            .map(|milli| Self { milli })
            .ok_or_else(|| Error {
                input: input.to_owned(),
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
        for bad in ["", "abc", "1..2", "1Zi", "1e", "1e99", "--1", "1 Mi"] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        // Go's parser reads a bare "." as an empty numerator, so 0.
        assert_eq!(Quantity::parse("."), Ok(Quantity::ZERO));
    }

    #[test]
    fn value_rounds_up() {
        assert_eq!(Quantity::parse("100m").map(Quantity::value), Ok(1));
        assert_eq!(Quantity::parse("2").map(Quantity::value), Ok(2));
        assert_eq!(Quantity::parse("1Ki").map(Quantity::value), Ok(1024));
    }
}
