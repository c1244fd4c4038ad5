//! `apiextensions.k8s.io/v1`: CustomResourceDefinitions and the custom resources they define, served at run time.
//!
//! Layout, following the CRD's life:
//! - [`crd_strategy`] and [`crd_validation`]: the CRD itself, validated as upstream
//!   (names, versions, structural schemas, subresources, printer columns, conversion), its
//!   status owned by the server (`storedVersions`, conditions);
//! - [`controller`]: the API server's own controllers (upstream's naming, establishing and
//!   finalizing controllers in one loop): `NamesAccepted`, `Established`, `Terminating`,
//!   every custom resource deleted before the CRD goes, and the registry's custom resource
//!   set replaced whenever a CRD changes;
//! - [`custom_kind`]: one served version's entry, built from the CRD: [`structural`] schema,
//!   [`values`] (validation, pruning, defaulting), [`cel`] rules, [`printer`] columns, the
//!   published OpenAPI schema, the scale paths.

pub mod cel;
pub mod controller;
pub mod crd_strategy;
pub mod crd_validation;
pub mod custom_kind;
pub mod printer;
pub mod structural;
pub mod values;

use std::cmp::Ordering;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// The API group.
pub const GROUP: &str = "apiextensions.k8s.io";

/// The finalizer that holds a deleted CRD until all of its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Whether the CRD's condition `type` is `True`.
pub fn condition_true(crd: &CustomResourceDefinition, ty: &str) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == ty && c.status == "True"))
}

/// Whether the CRD is `Established` (its resources are served).
pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    condition_true(crd, "Established")
}

/// A version name's kind and numbers: `v1` GA, `v2beta3`, `v1alpha1`; `None` for names
/// that do not look like Kubernetes versions.
fn parse_kube_version(v: &str) -> Option<(u8, u64, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let major: u64 = rest[..digits].parse().ok()?;
    if major == 0 {
        return None;
    }
    let tail = &rest[digits..];
    let (class, minor_text) = if tail.is_empty() {
        return Some((2, major, 0));
    } else if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (0, m)
    } else {
        return None;
    };
    if minor_text.is_empty() {
        return Some((class, major, 0));
    }
    if !minor_text.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some((class, major, minor_text.parse().ok()?))
}

/// Orders version names by upstream's `CompareKubeAwareVersionStrings`, highest priority
/// first: GA before beta before alpha, higher numbers first, other names last by name.
pub fn version_priority(a: &str, b: &str) -> Ordering {
    match (parse_kube_version(a), parse_kube_version(b)) {
        (Some((ca, ma, na)), Some((cb, mb, nb))) => (cb, mb, nb).cmp(&(ca, ma, na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// Whether `path` is a simple JSON path (`.a.b.c`, no brackets or filters): what scale paths
/// and printer columns may use (shared by their validation and the printer).
pub fn is_simple_json_path(path: &str) -> bool {
    path.starts_with('.')
        && path.len() > 1
        && path[1..]
            .split('.')
            .all(|seg| !seg.is_empty() && !seg.contains(['[', ']', '*', '?', '@', '$', '(']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_upstreams_kube_aware_order() {
        let mut versions = vec![
            "foo1",
            "v1alpha1",
            "v10",
            "v1",
            "v2beta1",
            "v1beta2",
            "v11alpha2",
            "v12alpha1",
            "foo10",
            "v2",
        ];
        versions.sort_by(|a, b| version_priority(a, b));
        assert_eq!(
            versions,
            [
                "v10",
                "v2",
                "v1",
                "v2beta1",
                "v1beta2",
                "v12alpha1",
                "v11alpha2",
                "v1alpha1",
                "foo1",
                "foo10"
            ]
        );
    }
}
