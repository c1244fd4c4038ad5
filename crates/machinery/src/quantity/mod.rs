//! `resource.Quantity` as apimachinery parses, prints and rounds it.
//!
//! kube-apiserver decodes every quantity with `ParseQuantity` and encodes it with
//! `Quantity.String()` (`CanonicalizeBytes`), so what it stores and serves is the canonical
//! form: `0.5` becomes `500m`, `1.5Gi` becomes `1536Mi`, `1e3` becomes `1k`. ResourceLists are
//! also rounded up to milli scale (`SetDefaults_ResourceList`): `0.0001` becomes `1m`.
//!
//! - [`parse`] is `ParseQuantity` (v1.33), keeping Go's internal representation ([`Amount`]).
//! - [`Quantity::canonical`] is `String()`/`CanonicalizeBytes`.
//! - [`Quantity::round_up`] is `RoundUp`.
//! - [`canonicalize`] and [`canonicalize_resource_list_value`] go from string to canonical string.

mod canonical;
mod nat;
mod parse;

pub use parse::parse;

/// `resource.Format`: how a quantity prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `e.g., 12e6`.
    DecimalExponent,
    /// `e.g., 12Mi` (12 * 2^20).
    BinarySI,
    /// `e.g., 12M` (12 * 10^6).
    DecimalSI,
}

impl Format {
    /// Go's name of the format (`"DecimalSI"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::DecimalExponent => "DecimalExponent",
            Format::BinarySI => "BinarySI",
            Format::DecimalSI => "DecimalSI",
        }
    }
}

/// The value of a quantity in the representation Go's `Quantity` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Amount {
    /// `int64Amount` (`d.Dec == nil`): `value * 10^scale`.
    Int {
        /// `i.value`.
        value: i64,
        /// `i.scale` (a power of ten).
        scale: i32,
    },
    /// `infDecAmount`: `(-1)^neg * abs / 10^scale`.
    Dec {
        /// `big.Int.neg`; false for zero.
        neg: bool,
        /// `big.Int.abs`: little-endian 64-bit words without high zero words, as Go's
        /// `big.nat` on 64-bit platforms; empty is zero (Go's nil).
        abs: Vec<u64>,
        /// `inf.Dec.scale` (note: the opposite sign of `Int`'s scale).
        scale: i32,
    },
}

/// A parsed `resource.Quantity`.
///
/// Invariant: built only by [`parse`] and [`Quantity::round_up`], so its scales stay within
/// what parsing produces (the canonical printer relies on it to keep arithmetic small).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    amount: Amount,
    format: Format,
    /// Go's `s`: the parsed string was already canonical and is kept as the printed form.
    cached: bool,
}

impl Quantity {
    /// The value, as Go holds it.
    pub fn amount(&self) -> &Amount {
        &self.amount
    }

    /// The format it prints in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether Go keeps the parsed string in `s` (it was already in canonical form).
    pub fn is_cached(&self) -> bool {
        self.cached
    }
}

/// Why a string is not a quantity; the messages are apimachinery's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `ErrFormatWrong`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// `ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// `ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// An exponent so large that the value cannot be held (Go would try, and run out of memory).
    #[error("unable to parse quantity: exponent too large")]
    TooLarge,
}

/// Results of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The canonical form of a quantity string, as kube-apiserver stores it
/// (`ParseQuantity(s).String()`).
pub fn canonicalize(s: &str) -> Result<String> {
    Ok(parse(s)?.canonical())
}

/// The canonical form of a ResourceList value: rounded up to milli scale first, as
/// `SetDefaults_ResourceList` does (`0.0001` is `1m`).
pub fn canonicalize_resource_list_value(s: &str) -> Result<String> {
    let mut q = parse(s)?;
    q.round_up(canonical::MILLI);
    Ok(q.canonical())
}
