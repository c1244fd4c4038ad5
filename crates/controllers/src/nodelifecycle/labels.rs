//! Node label reconciliation: the beta OS/arch labels follow the stable ones (upstream's `reconcileNodeLabels`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

/// The stable OS label (`v1.LabelOSStable`).
pub const LABEL_OS_STABLE: &str = "kubernetes.io/os";
/// The beta OS label kubelets used to set (`kubeletapis.LabelOS`).
pub const LABEL_OS_BETA: &str = "beta.kubernetes.io/os";
/// The stable architecture label (`v1.LabelArchStable`).
pub const LABEL_ARCH_STABLE: &str = "kubernetes.io/arch";
/// The beta architecture label (`kubeletapis.LabelArch`).
pub const LABEL_ARCH_BETA: &str = "beta.kubernetes.io/arch";

/// One reconciled pair: the secondary label takes the primary's value.
struct LabelReconcile {
    /// The source of truth.
    primary: &'static str,
    /// The label kept equal to it.
    secondary: &'static str,
    /// Whether a missing secondary label is added.
    ensure_secondary_exists: bool,
}

/// Upstream's `labelReconcileInfo` (kube-controller-manager 1.33).
const RECONCILED: [LabelReconcile; 2] = [
    LabelReconcile {
        primary: LABEL_OS_STABLE,
        secondary: LABEL_OS_BETA,
        ensure_secondary_exists: true,
    },
    LabelReconcile {
        primary: LABEL_ARCH_STABLE,
        secondary: LABEL_ARCH_BETA,
        ensure_secondary_exists: true,
    },
];

/// The labels to set on `node` so that every secondary label equals its primary: a
/// secondary that differs is overwritten, a missing one added; pairs whose primary is
/// missing are left alone. Empty when nothing needs to change.
pub fn labels_to_reconcile(node: &Node) -> BTreeMap<String, String> {
    let mut update = BTreeMap::new();
    let Some(labels) = node.metadata.labels.as_ref() else {
        return update;
    };
    for pair in &RECONCILED {
        let Some(primary) = labels.get(pair.primary) else {
            continue;
        };
        let wanted = match labels.get(pair.secondary) {
            Some(secondary) => secondary != primary,
            None => pair.ensure_secondary_exists,
        };
        if wanted {
            update.insert(pair.secondary.to_owned(), primary.clone());
        }
    }
    update
}

#[cfg(test)]
mod tests {
    use kcm_testing::MetaBuilder;

    use super::*;

    fn node(labels: Option<&[(&str, &str)]>) -> Node {
        let n = kcm_testing::node("n");
        match labels {
            Some(labels) => n.labels(labels).build(),
            None => n.build(),
        }
    }

    #[test]
    fn secondary_labels_follow_primary_ones() {
        struct Case {
            name: &'static str,
            labels: Option<&'static [(&'static str, &'static str)]>,
            want: &'static [(&'static str, &'static str)],
        }
        let cases = [
            Case {
                name: "no labels at all",
                labels: None,
                want: &[],
            },
            Case {
                name: "no primary labels",
                labels: Some(&[("beta.kubernetes.io/os", "windows")]),
                want: &[],
            },
            Case {
                name: "missing secondaries are added",
                labels: Some(&[
                    ("kubernetes.io/os", "linux"),
                    ("kubernetes.io/arch", "amd64"),
                ]),
                want: &[
                    ("beta.kubernetes.io/arch", "amd64"),
                    ("beta.kubernetes.io/os", "linux"),
                ],
            },
            Case {
                name: "a differing secondary is overwritten",
                labels: Some(&[
                    ("kubernetes.io/os", "linux"),
                    ("beta.kubernetes.io/os", "windows"),
                    ("kubernetes.io/arch", "arm64"),
                    ("beta.kubernetes.io/arch", "arm64"),
                ]),
                want: &[("beta.kubernetes.io/os", "linux")],
            },
            Case {
                name: "consistent labels need nothing",
                labels: Some(&[
                    ("kubernetes.io/os", "linux"),
                    ("beta.kubernetes.io/os", "linux"),
                    ("kubernetes.io/arch", "amd64"),
                    ("beta.kubernetes.io/arch", "amd64"),
                ]),
                want: &[],
            },
        ];
        for case in cases {
            let got = labels_to_reconcile(&node(case.labels));
            let want: BTreeMap<String, String> = case
                .want
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            assert_eq!(got, want, "{}", case.name);
        }
    }
}
