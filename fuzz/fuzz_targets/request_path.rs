//! Request paths: once a path's segments are accepted, the object it names is stored one segment under its namespace's prefix (no traversal, no escape into another namespace or group).
#![no_main]

use kcm_apiserver::http::request_info::{self, Route};
use kcm_apiserver::resources::pod::PODS;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    let Route::Resource(r) = request_info::parse(path) else {
        return;
    };
    for field in [&r.group, &r.version, &r.resource] {
        assert!(!field.contains('/'), "{path:?}");
    }
    if request_info::validate_segments(&r).is_err() {
        return;
    }
    let (Some(ns), Some(name)) = (&r.namespace, &r.name) else {
        return;
    };
    for part in [ns, name] {
        assert!(
            part != "." && part != ".." && !part.contains('/') && !part.contains('%'),
            "{path:?}"
        );
    }
    let prefix = PODS.storage_prefix(Some(ns));
    let key = PODS.storage_key(ns, name);
    assert!(key.starts_with(&prefix), "{key} outside {prefix}");
    assert!(
        !key[prefix.len()..].trim_start_matches('/').contains('/'),
        "{key}"
    );
});
