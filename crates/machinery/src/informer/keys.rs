//! Cache keys: `namespace/name` (or `name`), as client-go's `MetaNamespaceKeyFunc` family.

use kube::Resource;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a key could not be computed or split.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The object has no `metadata.name`, so it has no key.
    #[error(
        "cannot compute the cache key of an object without metadata.name (namespace {namespace:?})"
    )]
    MissingName {
        /// The object's namespace, if it has one.
        namespace: Option<String>,
    },
    /// The key is not `name` or `namespace/name`.
    #[error("unexpected key format: {key:?}")]
    InvalidKey {
        /// The offending key.
        key: String,
    },
}

/// The key of `obj` in every informer cache: `namespace/name` for namespaced objects,
/// `name` for cluster-scoped ones, as client-go's `MetaNamespaceKeyFunc`.
///
/// Unlike client-go (which would key a nameless object under `""`), an object without a
/// name is an error: the API server never sends one, and a shared empty key would make
/// unrelated objects overwrite each other.
pub fn meta_namespace_key<K: Resource>(obj: &K) -> Result<String> {
    let meta = obj.meta();
    let name = match meta.name.as_deref() {
        Some(name) if !name.is_empty() => name,
        _ => {
            return Err(Error::MissingName {
                namespace: meta.namespace.clone(),
            });
        }
    };
    Ok(match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => {
            let mut key = String::with_capacity(ns.len() + 1 + name.len());
            key.push_str(ns);
            key.push('/');
            key.push_str(name);
            key
        }
        _ => name.to_owned(),
    })
}

/// The key for `namespace` and `name` (`""` or `None`-like empty namespace means cluster-scoped),
/// the inverse of [`split_meta_namespace_key`].
pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        let mut key = String::with_capacity(namespace.len() + 1 + name.len());
        key.push_str(namespace);
        key.push('/');
        key.push_str(name);
        key
    }
}

/// Splits a key made by [`meta_namespace_key`] into `(namespace, name)`, as client-go's
/// `SplitMetaNamespaceKey`: `name` gives `(None, name)`, `ns/name` gives `(Some(ns), name)`,
/// anything with more than one `/` is an error.
///
/// Stricter than client-go: an empty name (`""`, `ns/`) or an empty namespace before the `/`
/// (`/name`) is an error too, since no object has such a key and a work queue holding one can
/// only have been fed garbage.
pub fn split_meta_namespace_key(key: &str) -> Result<(Option<&str>, &str)> {
    let invalid = || Error::InvalidKey {
        key: key.to_owned(),
    };
    let mut parts = key.split('/');
    let first = parts.next().unwrap_or_default();
    match (parts.next(), parts.next()) {
        (None, _) if !first.is_empty() => Ok((None, first)),
        (Some(name), None) if !first.is_empty() && !name.is_empty() => Ok((Some(first), name)),
        _ => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn cm(ns: Option<&str>, name: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: ns.map(str::to_owned),
                name: name.map(str::to_owned),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn meta_namespace_key_cases() {
        struct Case {
            name: &'static str,
            obj: ConfigMap,
            want: Result<String>,
        }
        let cases = [
            Case {
                name: "namespaced",
                obj: cm(Some("ns"), Some("a")),
                want: Ok("ns/a".into()),
            },
            Case {
                name: "cluster-scoped",
                obj: cm(None, Some("a")),
                want: Ok("a".into()),
            },
            Case {
                name: "empty namespace is cluster-scoped",
                obj: cm(Some(""), Some("a")),
                want: Ok("a".into()),
            },
            Case {
                name: "no name",
                obj: cm(Some("ns"), None),
                want: Err(Error::MissingName {
                    namespace: Some("ns".into()),
                }),
            },
            Case {
                name: "empty name",
                obj: cm(None, Some("")),
                want: Err(Error::MissingName { namespace: None }),
            },
        ];
        for case in cases {
            assert_eq!(meta_namespace_key(&case.obj), case.want, "{}", case.name);
        }
        let node = kcm_testing::node("n1").build();
        assert_eq!(meta_namespace_key(&node).as_deref(), Ok("n1"));
    }

    #[test]
    fn split_meta_namespace_key_cases() {
        struct Case {
            name: &'static str,
            key: &'static str,
            want: Option<(Option<&'static str>, &'static str)>,
        }
        let cases = [
            Case {
                name: "name only",
                key: "a",
                want: Some((None, "a")),
            },
            Case {
                name: "namespace and name",
                key: "ns/a",
                want: Some((Some("ns"), "a")),
            },
            Case {
                name: "too many slashes",
                key: "a/b/c",
                want: None,
            },
            Case {
                name: "empty",
                key: "",
                want: None,
            },
            Case {
                name: "empty name",
                key: "ns/",
                want: None,
            },
            Case {
                name: "empty namespace",
                key: "/a",
                want: None,
            },
        ];
        for case in cases {
            match (split_meta_namespace_key(case.key), case.want) {
                (Ok(got), Some(want)) => assert_eq!(got, want, "{}", case.name),
                (Err(Error::InvalidKey { key }), None) => {
                    assert_eq!(key, case.key, "{}", case.name)
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", case.name),
            }
        }
    }

    #[test]
    fn object_key_round_trips() {
        assert_eq!(object_key("ns", "a"), "ns/a");
        assert_eq!(object_key("", "a"), "a");
        assert_eq!(
            split_meta_namespace_key(&object_key("ns", "a")).expect("valid"),
            (Some("ns"), "a")
        );
    }
}
