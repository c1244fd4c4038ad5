//! Kinds of resource names in a ResourceList (upstream's `pkg/apis/core/v1/helper`): native
//! (`cpu`, `kubernetes.io/…`), huge pages, extended (`example.com/gpu`). Quota accounting and
//! the API server's container validation both ask.

use crate::labels;

/// `IsHugePageResourceName`: `hugepages-<size>`.
pub fn is_huge_pages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `IsNativeResource`: unprefixed, or under `kubernetes.io/`.
pub fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `IsExtendedResourceName`: not native, not a `requests.` quota name, and a qualified name
/// once prefixed with `requests.` (as a quota would name it).
pub fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && labels::validate_label_key(&format!("requests.{name}")).is_ok()
}

/// `IsOvercommitAllowed`: native resources other than huge pages may be requested below
/// their limit.
pub fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_huge_pages(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fall_into_upstreams_kinds() {
        // (name, native, huge pages, extended, overcommit allowed)
        let cases = [
            ("cpu", true, false, false, true),
            ("hugepages-2Mi", true, true, false, false),
            ("kubernetes.io/foo", true, false, false, true),
            ("example.com/gpu", false, false, true, false),
            ("requests.example.com/gpu", false, false, false, false),
            ("example.com/Bad Name", false, false, false, false),
        ];
        for (name, native, huge, extended, overcommit) in cases {
            assert_eq!(
                (
                    is_native(name),
                    is_huge_pages(name),
                    is_extended(name),
                    overcommit_allowed(name)
                ),
                (native, huge, extended, overcommit),
                "{name}"
            );
        }
    }
}
