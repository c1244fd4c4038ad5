//! `--controllers`: which controllers run (`*`, `name`, `-name`), with aliases resolved.

use std::collections::{BTreeSet, HashMap};

/// The `--controllers` value with aliases replaced by canonical names, as
/// kube-controller-manager's `GenericControllerManagerConfigurationOptions.ApplyTo`.
///
/// Semantics of [`is_enabled`](Self::is_enabled), as `genericcontrollermanager.IsControllerEnabled`:
/// the first entry naming the controller decides (`name` enables, `-name` disables); when none
/// does, the controller runs only if `*` is present and it is not disabled by default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSelection {
    /// Entries in flag order: `*`, `name` or `-name`, names canonical. Never contains aliases.
    entries: Vec<String>,
}

/// `--controllers` named a controller nobody registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "--controllers: {} not in the list of known controllers; known controllers: {}",
    quote_all(unknown),
    known.join(", ")
)]
pub struct UnknownControllers {
    /// The unknown names as written (without the `-` prefix), in flag order.
    pub unknown: Vec<String>,
    /// Every canonical controller name, sorted.
    pub known: Vec<String>,
}

fn quote_all(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    let verb = if names.len() == 1 { "is" } else { "are" };
    format!("{} {verb}", quoted.join(", "))
}

impl ControllerSelection {
    /// Resolves `entries` (as given to `--controllers`) against the canonical names in `known`
    /// and the `aliases` (alias → canonical name). Blank entries are ignored. Fails listing
    /// every entry that names no known controller or alias.
    pub fn resolve<S: AsRef<str>>(
        entries: &[S],
        known: &BTreeSet<String>,
        aliases: &HashMap<String, String>,
    ) -> Result<Self, UnknownControllers> {
        let mut resolved = Vec::with_capacity(entries.len());
        let mut unknown = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            if entry.is_empty() {
                continue;
            }
            if entry == "*" {
                resolved.push(entry.to_owned());
                continue;
            }
            let (disable, name) = match entry.strip_prefix('-') {
                Some(name) => (true, name),
                None => (false, entry),
            };
            let canonical = aliases.get(name).map_or(name, String::as_str);
            if !known.contains(canonical) {
                unknown.push(name.to_owned());
                continue;
            }
            resolved.push(if disable {
                format!("-{canonical}")
            } else {
                canonical.to_owned()
            });
        }
        if !unknown.is_empty() {
            return Err(UnknownControllers {
                unknown,
                known: known.iter().cloned().collect(),
            });
        }
        Ok(Self { entries: resolved })
    }

    /// The default, `*`: every controller that is on by default.
    pub fn all() -> Self {
        Self {
            entries: vec!["*".to_owned()],
        }
    }

    /// Whether the controller with canonical `name` runs.
    pub fn is_enabled(&self, name: &str, disabled_by_default: bool) -> bool {
        let mut star = false;
        for entry in &self.entries {
            if entry == name {
                return true;
            }
            if entry.strip_prefix('-') == Some(name) {
                return false;
            }
            if entry == "*" {
                star = true;
            }
        }
        star && !disabled_by_default
    }

    /// The resolved entries, in flag order.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> BTreeSet<String> {
        [
            "replicaset-controller",
            "deployment-controller",
            "bootstrap-signer-controller",
        ]
        .into_iter()
        .map(String::from)
        .collect()
    }

    fn aliases() -> HashMap<String, String> {
        [
            ("replicaset", "replicaset-controller"),
            ("deployment", "deployment-controller"),
            ("bootstrapsigner", "bootstrap-signer-controller"),
        ]
        .into_iter()
        .map(|(a, n)| (a.to_owned(), n.to_owned()))
        .collect()
    }

    #[test]
    fn enablement_follows_kube_controller_manager() {
        struct Case {
            name: &'static str,
            flag: &'static [&'static str],
            /// Enabled: replicaset, deployment, bootstrap-signer (disabled by default).
            want: [bool; 3],
        }
        let cases = [
            Case {
                name: "star enables the on-by-default ones",
                flag: &["*"],
                want: [true, true, false],
            },
            Case {
                name: "empty list enables nothing",
                flag: &[],
                want: [false, false, false],
            },
            Case {
                name: "a name alone enables only that one",
                flag: &["replicaset-controller"],
                want: [true, false, false],
            },
            Case {
                name: "aliases resolve to canonical names",
                flag: &["*", "-replicaset", "-deployment"],
                want: [false, false, false],
            },
            Case {
                name: "star with an off-by-default one enabled by name",
                flag: &["*", "bootstrapsigner"],
                want: [true, true, true],
            },
            Case {
                name: "first mention wins: enable then disable",
                flag: &["replicaset", "-replicaset", "*"],
                want: [true, true, false],
            },
            Case {
                name: "first mention wins: disable then enable",
                flag: &["-replicaset-controller", "replicaset", "*"],
                want: [false, true, false],
            },
            Case {
                name: "disabling without star leaves everything off",
                flag: &["-deployment"],
                want: [false, false, false],
            },
            Case {
                name: "blank entries are ignored",
                flag: &["", " * "],
                want: [true, true, false],
            },
        ];
        for case in cases {
            let selection =
                ControllerSelection::resolve(case.flag, &known(), &aliases()).expect(case.name);
            let got = [
                selection.is_enabled("replicaset-controller", false),
                selection.is_enabled("deployment-controller", false),
                selection.is_enabled("bootstrap-signer-controller", true),
            ];
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn unknown_names_are_listed_with_the_known_ones() {
        let err = ControllerSelection::resolve(
            &["*", "-nodelifecycle", "replicaset", "frobnicator"],
            &known(),
            &aliases(),
        )
        .expect_err("unknown names");
        assert_eq!(err.unknown, vec!["nodelifecycle", "frobnicator"]);
        assert_eq!(
            err.to_string(),
            "--controllers: \"nodelifecycle\", \"frobnicator\" are not in the list of known \
             controllers; known controllers: bootstrap-signer-controller, deployment-controller, \
             replicaset-controller"
        );
        let one = ControllerSelection::resolve(&["nope"], &known(), &aliases()).expect_err("one");
        assert!(
            one.to_string()
                .starts_with("--controllers: \"nope\" is not")
        );
    }

    #[test]
    fn resolved_entries_use_canonical_names() {
        let selection =
            ControllerSelection::resolve(&["*", "-replicaset"], &known(), &aliases()).expect("ok");
        assert_eq!(selection.entries(), ["*", "-replicaset-controller"]);
        assert_eq!(ControllerSelection::all().entries(), ["*"]);
    }
}
