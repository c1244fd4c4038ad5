//! Property tests of the machinery's parsers: label selectors (parse ↔ Display), quantities (canonical form against exact arithmetic) and the watch events the Reflector decodes.
//!
//! `cargo test` runs a bounded number of cases per property; `PROPTEST_CASES=1000000 cargo
//! test --release -p kcm-machinery --test properties` runs them long (see BENCHMARKS.md).

use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::labels::{Operator, Requirement, Selector};
use kcm_machinery::quantity::{self, Amount};
use kube::api::WatchEvent;
use proptest::prelude::*;

/// Cases per property unless `PROPTEST_CASES` says otherwise.
fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn label_key() -> impl Strategy<Value = String> {
    (
        prop::option::of("[a-z]{1,4}(\\.[a-z]{1,4})?"),
        "[a-zA-Z0-9]([a-zA-Z0-9._-]{0,5}[a-zA-Z0-9])?",
    )
        .prop_map(|(prefix, name)| match prefix {
            Some(p) => format!("{p}/{name}"),
            None => name,
        })
}

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-zA-Z0-9]([a-zA-Z0-9._-]{0,5}[a-zA-Z0-9])?",
    ]
}

fn requirement() -> impl Strategy<Value = Requirement> {
    let operator = prop_oneof![
        Just(Operator::Equals),
        Just(Operator::NotEquals),
        Just(Operator::In),
        Just(Operator::NotIn),
        Just(Operator::Exists),
        Just(Operator::DoesNotExist),
        Just(Operator::GreaterThan),
        Just(Operator::LessThan),
    ];
    (
        label_key(),
        operator,
        prop::collection::vec(label_value(), 1..4),
        -1000i64..1000,
    )
        .prop_filter_map("a valid requirement", |(key, op, values, n)| {
            let values = match op {
                Operator::Equals | Operator::NotEquals => values[..1].to_vec(),
                Operator::In | Operator::NotIn => values,
                Operator::Exists | Operator::DoesNotExist => Vec::new(),
                Operator::GreaterThan | Operator::LessThan => vec![n.to_string()],
            };
            Requirement::new(key, op, values).ok()
        })
}

/// A quantity string and its exact value in nano-units.
#[derive(Clone, Debug)]
struct Exact {
    text: String,
    nanos: i128,
}

fn exact_quantity() -> impl Strategy<Value = Exact> {
    const SUFFIXES: [(&str, i128); 15] = [
        ("", 1_000_000_000),
        ("m", 1_000_000),
        ("u", 1_000),
        ("k", 1_000_000_000_000),
        ("M", 1_000_000_000_000_000),
        ("G", 1_000_000_000_000_000_000),
        ("Ki", 1024 * 1_000_000_000),
        ("Mi", 1024 * 1024 * 1_000_000_000),
        ("Gi", 1024 * 1024 * 1024 * 1_000_000_000),
        ("e3", 1_000_000_000_000),
        ("e-3", 1_000_000),
        ("E6", 1_000_000_000_000_000),
        ("e0", 1_000_000_000),
        ("e-6", 1_000),
        ("e9", 1_000_000_000_000_000_000),
    ];
    (
        any::<bool>(),
        0u64..10_000_000,
        0u32..1000,
        0usize..3,
        0usize..SUFFIXES.len(),
    )
        .prop_map(|(negative, whole, frac, digits, suffix)| {
            let (suffix, mul) = SUFFIXES[suffix];
            let (frac_text, frac_value, div) = match digits {
                0 => (String::new(), 0i128, 1i128),
                1 => (format!(".{}", frac % 10), i128::from(frac % 10), 10),
                _ => (format!(".{frac:03}"), i128::from(frac), 1000),
            };
            let magnitude = i128::from(whole) * mul + frac_value * mul / div;
            let sign = if negative { "-" } else { "" };
            Exact {
                text: format!("{sign}{whole}{frac_text}{suffix}"),
                nanos: if negative { -magnitude } else { magnitude },
            }
        })
}

/// The exact value of a parsed quantity in nano-units, when it is a whole number of them.
fn nanos(q: &quantity::Quantity) -> Option<i128> {
    match q.amount() {
        Amount::Int { value, scale } => {
            let shift = scale + 9;
            let v = i128::from(*value);
            if shift >= 0 {
                v.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)
            } else {
                let d = 10i128.checked_pow(u32::try_from(-shift).ok()?)?;
                (v % d == 0).then(|| v / d)
            }
        }
        Amount::Dec { neg, abs, scale } => {
            let mut magnitude: i128 = 0;
            for word in abs.iter().rev() {
                magnitude = magnitude
                    .checked_mul(1i128 << 64)?
                    .checked_add(i128::from(*word))?;
            }
            let shift = 9 - scale;
            let v = if shift >= 0 {
                magnitude.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)?
            } else {
                let d = 10i128.checked_pow(u32::try_from(-shift).ok()?)?;
                if magnitude % d != 0 {
                    return None;
                }
                magnitude / d
            };
            Some(if *neg { -v } else { v })
        }
    }
}

/// The canonical form of the quantity `text` is.
fn fixed_point(text: &str) -> Result<String, TestCaseError> {
    quantity::parse(text)
        .map(|q| q.canonical())
        .map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))
}

/// Crashes the fuzzer found, kept as inputs: each parses to a canonical form that parses
/// again, or is refused.
#[test]
fn quantity_fuzz_regressions_round_trip() {
    // `fuzz/regressions/quantity-wrapped-exponent`: the exponent wraps as Go's int32() does, to
    // e+348825369 on the int64 fast path; its canonical form needs 20 digits, takes the slow
    // path and was refused there. Such magnitudes are now refused on either path.
    let inputs = [
        "-11133.1111111122267E-21126011111",
        "111331111111122267e4062",
        "111331111111122267e4063",
        "999999999999999999e4062",
        "9.99999999999999999e4079",
    ];
    for text in inputs {
        if let Ok(q) = quantity::parse(text) {
            let canonical = q.canonical();
            let again = quantity::parse(&canonical)
                .unwrap_or_else(|e| panic!("{text}: canonical {canonical} does not parse: {e}"));
            assert_eq!(
                again.canonical(),
                fixed_point(&canonical).expect("parses"),
                "{text}"
            );
        }
    }
    assert_eq!(
        quantity::parse("-11133.1111111122267E-21126011111"),
        Err(quantity::Error::TooLarge)
    );
    // Every magnitude up to the bound round-trips, whichever path the canonical form takes.
    for exponent in 4050..4085 {
        for digits in ["1", "12", "111331111111122267", "1234567890123456789"] {
            let text = format!("{digits}e{exponent}");
            if let Ok(q) = quantity::parse(&text) {
                let canonical = q.canonical();
                assert!(
                    quantity::parse(&canonical).is_ok(),
                    "{text} printed as {canonical}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    /// Display then parse gives back the same selector, and its string form is stable.
    #[test]
    fn label_selectors_round_trip_through_display(reqs in prop::collection::vec(requirement(), 0..5)) {
        let selector = Selector::from_requirements(reqs);
        let text = selector.to_string();
        let parsed = Selector::parse(&text).map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(&parsed, &selector, "{}", text);
        prop_assert_eq!(parsed.to_string(), text);
    }

    /// Any string: parsed or refused, never a panic; what parses prints to a string that
    /// parses to the same selector.
    #[test]
    fn label_selector_parsing_never_panics(text in "[a-z0-9 =!<>(),./_-]{0,24}|\\PC{0,24}") {
        if let Ok(selector) = Selector::parse(&text) {
            let again = Selector::parse(&selector.to_string());
            prop_assert_eq!(again.ok(), Some(selector), "{}", text);
        }
    }

    /// Any string: a quantity or an error, never a panic; the canonical form of what parses
    /// parses, and reaches a fixed point by its second printing.
    #[test]
    fn quantity_parsing_never_panics(text in "[-+0-9.eEinumkKMGTP]{0,16}|\\PC{0,16}") {
        if let Ok(q) = quantity::parse(&text) {
            prop_assert_eq!(fixed_point(&q.canonical())?, fixed_point(&fixed_point(&q.canonical())?)?);
        }
    }

    /// Parsing and the canonical form keep the exact value (checked with 128-bit integer
    /// arithmetic in nano-units), and printing reaches a fixed point by the second time.
    /// (Not the first: as Go's `CanonicalizeBytes`, a binary-SI value that is not a multiple
    /// of 1024 prints without a suffix, e.g. `6854640.625Ki` as `7019152000`, which reads back
    /// as decimal-SI and prints as `7019152k`.)
    #[test]
    fn quantities_keep_their_exact_value(a in exact_quantity(), b in exact_quantity()) {
        for x in [&a, &b] {
            let q = quantity::parse(&x.text).map_err(|e| TestCaseError::fail(format!("{}: {e}", x.text)))?;
            prop_assert_eq!(nanos(&q), Some(x.nanos), "parsed {}", x.text);
            let canonical = q.canonical();
            let back = quantity::parse(&canonical).map_err(|e| TestCaseError::fail(format!("{canonical}: {e}")))?;
            prop_assert_eq!(nanos(&back), Some(x.nanos), "{} printed as {}", x.text, canonical);
            let second = fixed_point(&canonical)?;
            prop_assert_eq!(fixed_point(&second)?, second);
        }
    }

    /// Watch event lines as a server (or a hostile peer) may send them: decoded or refused by
    /// the Reflector's decoder, never a panic.
    #[test]
    fn watch_event_lines_never_panic(
        kind in prop_oneof![
            prop::sample::select(vec!["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]).prop_map(str::to_owned),
            "[A-Z]{0,8}",
        ],
        object in prop_oneof![
            Just(serde_json::json!({"metadata": {"name": "p", "resourceVersion": "5"}})),
            Just(serde_json::json!({"kind": "Status", "code": 410, "reason": "Expired"})),
            Just(serde_json::json!({"metadata": {"resourceVersion": 5}})),
            Just(serde_json::json!(null)),
            Just(serde_json::json!([1, 2])),
            "[a-z]{0,6}".prop_map(serde_json::Value::String),
        ],
        garbage in prop::collection::vec(any::<u8>(), 0..48),
    ) {
        let line = serde_json::to_vec(&serde_json::json!({"type": kind, "object": object})).expect("json");
        let _ = serde_json::from_slice::<WatchEvent<Pod>>(&line);
        let _ = serde_json::from_slice::<WatchEvent<Pod>>(&garbage);
    }
}
