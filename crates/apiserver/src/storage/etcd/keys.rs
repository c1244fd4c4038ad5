//! Storage keys to etcd keys and back, laid out as kube-apiserver lays them out.
//!
//! The API server names objects `/registry/<group>/<resource>/<namespace>/<name>` with `core`
//! for the core group (one layout for every backend). In etcd, kube-apiserver puts objects
//! under `--etcd-prefix` (default `/registry`) with no segment for the core group:
//! `/registry/pods/default/nginx`, `/registry/apps/deployments/default/web`. This module maps
//! between the two so that etcd tools (`etcdctl get --prefix /registry/pods`) see the familiar
//! layout, and so that the prefix can be changed to share one etcd between clusters.
//!
//! Going back from etcd needs to know whether the first segment is a group. API groups other
//! than core either contain a dot (every custom and most built-in groups) or are one of the
//! few legacy undotted groups, and upstream's two non-object roots (`ranges`, `masterleases`)
//! are kept as named; no core resource is named like any of them, so the mapping is a
//! bijection on every key the API server writes. Keys outside `/registry/` (the storage tests
//! use short keys like `/a`) are stored verbatim; they must not start with the etcd prefix.

/// The storage layer's root for API objects (the layout every backend shares).
pub(crate) const STORAGE_ROOT: &str = "/registry/";

/// The segment that names the core group in storage keys and is left out in etcd.
const CORE_SEGMENT: &str = "core/";

/// API groups without a dot: every other non-core group name contains one.
const UNDOTTED_GROUPS: &[&str] = &["apps", "autoscaling", "batch", "extensions", "policy"];

/// Upstream's keys under the prefix that are not objects of a group (the Service range
/// allocations, the API servers' endpoint leases): stored as they are named.
const PLAIN_SEGMENTS: &[&str] = &["ranges", "masterleases"];

/// Maps storage keys to etcd keys under one prefix (`/registry` by default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyMapper {
    /// The etcd prefix with one trailing slash, e.g. `/registry/`.
    root: String,
}

impl KeyMapper {
    /// A mapper for `--etcd-prefix` `prefix` (trailing slashes ignored; empty means `/`).
    pub(crate) fn new(prefix: &str) -> Self {
        let trimmed = prefix.trim_end_matches('/');
        let root = if trimmed.starts_with('/') {
            format!("{trimmed}/")
        } else {
            format!("/{trimmed}/").replace("//", "/")
        };
        KeyMapper { root }
    }

    /// The etcd key (or key prefix) for a storage key (or key prefix).
    pub(crate) fn to_etcd(&self, key: &str) -> String {
        match key.strip_prefix(STORAGE_ROOT) {
            Some(rest) => {
                let rest = rest.strip_prefix(CORE_SEGMENT).unwrap_or(rest);
                format!("{}{rest}", self.root)
            }
            None => key.to_owned(),
        }
    }

    /// The storage key for an etcd key; `None` for keys this store does not own (another
    /// prefix, or etcd keys such as `compact_rev_key` that are not objects).
    pub(crate) fn storage_key(&self, key: &[u8]) -> Option<String> {
        let key = std::str::from_utf8(key).ok()?;
        match key.strip_prefix(self.root.as_str()) {
            Some(rest) => {
                let first = rest.split('/').next().unwrap_or_default();
                if first.contains('.')
                    || UNDOTTED_GROUPS.contains(&first)
                    || PLAIN_SEGMENTS.contains(&first)
                {
                    Some(format!("{STORAGE_ROOT}{rest}"))
                } else {
                    Some(format!("{STORAGE_ROOT}{CORE_SEGMENT}{rest}"))
                }
            }
            None if key.starts_with('/') && !key.starts_with(STORAGE_ROOT) => Some(key.to_owned()),
            None => None,
        }
    }

    /// The etcd range `[start, end)` that holds every storage key starting with `prefix`
    /// (a superset when `prefix` stops inside the core-group rewrite; callers filter).
    pub(crate) fn range(&self, prefix: &str) -> (Vec<u8>, Vec<u8>) {
        let start = if STORAGE_ROOT.starts_with(prefix) {
            if self.root == STORAGE_ROOT {
                // Everything this store owns: every key starting with a slash.
                return (b"/".to_vec(), b"0".to_vec());
            }
            self.root.clone()
        } else if "/registry/core/".starts_with(prefix) {
            // "/registry/co" matches core resources and groups such as coordination.k8s.io.
            self.root.clone()
        } else {
            self.to_etcd(prefix)
        };
        let end = prefix_end(start.as_bytes());
        (start.into_bytes(), end)
    }
}

/// The least key greater than every key starting with `prefix` (etcd's `range_end` for a
/// prefix); `\0` (the whole keyspace) when there is none.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_as_kube_apiserver_lays_them_out() {
        struct Case {
            name: &'static str,
            prefix: &'static str,
            storage: &'static str,
            etcd: &'static str,
        }
        let cases = [
            Case {
                name: "core group has no segment",
                prefix: "/registry",
                storage: "/registry/core/pods/default/nginx",
                etcd: "/registry/pods/default/nginx",
            },
            Case {
                name: "undotted group keeps its segment",
                prefix: "/registry",
                storage: "/registry/apps/deployments/default/web",
                etcd: "/registry/apps/deployments/default/web",
            },
            Case {
                name: "dotted group",
                prefix: "/registry",
                storage: "/registry/coordination.k8s.io/leases/kube-system/a",
                etcd: "/registry/coordination.k8s.io/leases/kube-system/a",
            },
            Case {
                name: "cluster-scoped core",
                prefix: "/registry",
                storage: "/registry/core/nodes/n1",
                etcd: "/registry/nodes/n1",
            },
            Case {
                name: "custom prefix, trailing slash ignored",
                prefix: "/kcm/one/",
                storage: "/registry/core/pods/ns/p",
                etcd: "/kcm/one/pods/ns/p",
            },
            Case {
                name: "custom prefix, group",
                prefix: "kcm",
                storage: "/registry/batch/jobs/ns/j",
                etcd: "/kcm/batch/jobs/ns/j",
            },
            Case {
                name: "range allocations as upstream",
                prefix: "/registry",
                storage: "/registry/ranges/serviceips",
                etcd: "/registry/ranges/serviceips",
            },
            Case {
                name: "API server leases as upstream",
                prefix: "/registry",
                storage: "/registry/masterleases/10.0.0.1",
                etcd: "/registry/masterleases/10.0.0.1",
            },
            Case {
                name: "keys outside the registry are verbatim",
                prefix: "/registry",
                storage: "/w/a",
                etcd: "/w/a",
            },
        ];
        for case in cases {
            let mapper = KeyMapper::new(case.prefix);
            assert_eq!(mapper.to_etcd(case.storage), case.etcd, "{}", case.name);
            assert_eq!(
                mapper.storage_key(case.etcd.as_bytes()).as_deref(),
                Some(case.storage),
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn keys_the_store_does_not_own_are_skipped() {
        let mapper = KeyMapper::new("/registry");
        assert_eq!(mapper.storage_key(b"compact_rev_key"), None);
        assert_eq!(mapper.storage_key(&[0xff, 0xfe]), None);
        let other = KeyMapper::new("/other");
        assert_eq!(other.storage_key(b"/registry/pods/a/b"), None);
    }

    #[test]
    fn ranges_cover_the_prefix() {
        let mapper = KeyMapper::new("/registry");
        let range = |p| {
            let (s, e) = mapper.range(p);
            (String::from_utf8(s).unwrap(), String::from_utf8(e).unwrap())
        };
        assert_eq!(
            range("/registry/core/pods/"),
            ("/registry/pods/".into(), "/registry/pods0".into())
        );
        assert_eq!(
            range("/registry/apps/deployments/ns/"),
            (
                "/registry/apps/deployments/ns/".into(),
                "/registry/apps/deployments/ns0".into()
            )
        );
        assert_eq!(range(""), ("/".into(), "0".into()));
        assert_eq!(range("/registry/"), ("/".into(), "0".into()));
        assert_eq!(
            range("/registry/core/"),
            ("/registry/".into(), "/registry0".into())
        );
        assert_eq!(range("/q/"), ("/q/".into(), "/q0".into()));
    }

    #[test]
    fn prefix_end_is_the_least_upper_bound() {
        assert_eq!(prefix_end(b"/a"), b"/b");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
    }
}
