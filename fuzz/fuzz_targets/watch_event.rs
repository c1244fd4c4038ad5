//! Watch event lines as a server or a hostile peer may send them: decoded by the Reflector's decoder or refused, never a panic.
#![no_main]

use k8s_openapi::api::core::v1::Pod;
use kube::api::WatchEvent;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = serde_json::from_slice::<WatchEvent<Pod>>(data);
});
