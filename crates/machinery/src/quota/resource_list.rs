//! ResourceList arithmetic for quota (kubernetes `pkg/quota/v1/resources.go`): add, subtract, mask, compare, print.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity::{self, Amount as GoAmount, Format};

/// A quantity held as thousandths, which is all quota needs: ResourceList values are rounded
/// up to milli scale when stored (`SetDefaults_ResourceList`), so sums and comparisons of
/// stored values are exact. The format is the one the value prints in, as Go's `Quantity.Add`
/// keeps the receiver's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Amount {
    /// The value in thousandths (`1Gi` is `1073741824000`).
    pub milli: i128,
    /// How the value prints.
    pub format: Format,
}

impl Amount {
    /// A count (`resource.NewQuantity(n, DecimalSI)`).
    pub fn count(n: i64) -> Self {
        Self {
            milli: i128::from(n) * 1000,
            format: Format::DecimalSI,
        }
    }

    /// Parses a quantity string; `None` when it does not parse or does not fit.
    pub fn parse(s: &str) -> Option<Self> {
        let q = quantity::parse(s.trim()).ok()?;
        let (negative, magnitude, exponent): (bool, i128, i32) = match q.amount() {
            GoAmount::Int { value, scale } => (*value < 0, i128::from(*value).abs(), scale + 3),
            GoAmount::Dec { neg, abs, scale } => {
                let mut n: i128 = 0;
                for word in abs.iter().rev() {
                    n = n.checked_mul(1 << 64)?.checked_add(i128::from(*word))?;
                }
                (*neg, n, 3 - scale)
            }
        };
        let ten = |e: i32| 10i128.checked_pow(e.unsigned_abs());
        // Rounded up to milli scale, as the stored value would be.
        let milli = if exponent >= 0 {
            magnitude.checked_mul(ten(exponent)?)?
        } else {
            let d = ten(exponent)?;
            magnitude / d + i128::from(magnitude % d != 0)
        };
        Some(Self {
            milli: if negative { -milli } else { milli },
            format: q.format(),
        })
    }

    /// The canonical string (`Quantity.String()`).
    pub fn to_quantity_string(&self) -> String {
        let raw = if self.milli % 1000 != 0 {
            format!("{}m", self.milli)
        } else {
            let whole = self.milli / 1000;
            if self.format == Format::BinarySI && whole != 0 && whole % 1024 == 0 {
                format!("{}Ki", whole / 1024)
            } else {
                whole.to_string()
            }
        };
        quantity::canonicalize(&raw).unwrap_or(raw)
    }
}

/// A ResourceList: resource name to amount, ordered by name.
pub type ResourceList = BTreeMap<String, Amount>;

/// Reads a ResourceList, skipping values that do not parse (the server never stores those).
pub fn from_quantities(map: Option<&BTreeMap<String, Quantity>>) -> ResourceList {
    map.into_iter()
        .flatten()
        .filter_map(|(k, v)| Amount::parse(&v.0).map(|a| (k.clone(), a)))
        .collect()
}

/// Writes a ResourceList in canonical quantities.
pub fn to_quantities(list: &ResourceList) -> BTreeMap<String, Quantity> {
    list.iter()
        .map(|(k, v)| (k.clone(), Quantity(v.to_quantity_string())))
        .collect()
}

/// `a + b` per resource (`quota.Add`). A zero left value takes the right one's format, as
/// Go's `Quantity.Add` does (so `0` plus `1Gi` prints `1Gi`).
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, v) in b {
        out.entry(k.clone())
            .and_modify(|x| {
                if x.milli == 0 {
                    x.format = v.format;
                }
                x.milli += v.milli;
            })
            .or_insert(*v);
    }
    out
}

/// `a - b` per resource of `a`, floored at zero (`quota.SubtractWithNonNegativeResult`).
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    for (k, v) in a {
        let other = b.get(k).map_or(0, |o| o.milli);
        out.insert(
            k.clone(),
            Amount {
                milli: (v.milli - other).max(0),
                format: v.format,
            },
        );
    }
    for (k, v) in b {
        out.entry(k.clone()).or_insert(Amount {
            milli: 0,
            format: v.format,
        });
    }
    out
}

/// The entries of `list` whose names are in `names` (`quota.Mask`).
pub fn mask<'a>(list: &ResourceList, names: impl IntoIterator<Item = &'a String>) -> ResourceList {
    names
        .into_iter()
        .filter_map(|n| list.get(n).map(|v| (n.clone(), *v)))
        .collect()
}

/// Whether every value of `a` is at most `b`'s for the names both hold, and the names that
/// are over (`quota.LessThanOrEqual`).
pub fn less_than_or_equal(a: &ResourceList, b: &ResourceList) -> (bool, Vec<String>) {
    let over: Vec<String> = b
        .iter()
        .filter(|(k, limit)| a.get(*k).is_some_and(|v| v.milli > limit.milli))
        .map(|(k, _)| k.clone())
        .collect();
    (over.is_empty(), over)
}

/// Whether both lists hold the same names with equal values (`quota.Equals`).
pub fn equals(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|o| o.milli == v.milli))
}

/// Drops zero values (`quota.RemoveZeros`).
pub fn remove_zeros(list: ResourceList) -> ResourceList {
    list.into_iter().filter(|(_, v)| v.milli != 0).collect()
}

/// The names with negative values (`quota.IsNegative`).
pub fn negative(list: &ResourceList) -> Vec<String> {
    list.iter()
        .filter(|(_, v)| v.milli < 0)
        .map(|(k, _)| k.clone())
        .collect()
}

/// `a=1,b=2Gi`, sorted by name, as the quota admission plugin's `prettyPrint`.
pub fn pretty_print(list: &ResourceList) -> String {
    list.iter()
        .map(|(k, v)| format!("{k}={}", v.to_quantity_string()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Names sorted and joined with `,` (`prettyPrintResourceNames`).
pub fn pretty_print_names<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    names
        .into_iter()
        .map(String::as_str)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(&str, &str)]) -> ResourceList {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Amount::parse(v).expect("parses")))
            .collect()
    }

    #[test]
    fn amounts_parse_and_print_canonically() {
        let cases = [
            ("1", "1"),
            ("500m", "500m"),
            ("0.5", "500m"),
            ("1Gi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("2000", "2k"),
            ("0.0001", "1m"),
        ];
        for (input, want) in cases {
            let a = Amount::parse(input).expect("parses");
            assert_eq!(a.to_quantity_string(), want, "{input}");
        }
        assert_eq!(Amount::parse("nope"), None);
    }

    #[test]
    fn arithmetic_keeps_the_left_format() {
        let a = list(&[("memory", "1Gi"), ("pods", "1")]);
        let b = list(&[("memory", "1Gi"), ("cpu", "250m")]);
        let sum = add(&a, &b);
        assert_eq!(pretty_print(&sum), "cpu=250m,memory=2Gi,pods=1");
        let from_zero = add(&list(&[("memory", "0")]), &list(&[("memory", "1Gi")]));
        assert_eq!(pretty_print(&from_zero), "memory=1Gi");
        let diff = subtract_non_negative(&a, &b);
        assert_eq!(pretty_print(&diff), "cpu=0,memory=0,pods=1");
        assert_eq!(pretty_print(&remove_zeros(diff)), "pods=1");
    }

    #[test]
    fn less_than_or_equal_names_what_is_over() {
        let used = list(&[("pods", "3"), ("cpu", "1")]);
        let hard = list(&[("pods", "2"), ("cpu", "2"), ("memory", "1Gi")]);
        assert_eq!(
            less_than_or_equal(&used, &hard),
            (false, vec!["pods".to_owned()])
        );
        assert!(less_than_or_equal(&list(&[("pods", "2")]), &hard).0);
        assert_eq!(
            pretty_print(&mask(&hard, &["pods".to_owned(), "x".to_owned()])),
            "pods=2"
        );
        assert!(equals(&list(&[("pods", "2")]), &list(&[("pods", "2000m")])));
        assert_eq!(negative(&list(&[("cpu", "-1")])), ["cpu"]);
    }
}
