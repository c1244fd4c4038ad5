//! Protobuf request bodies (with or without the `k8s\0` envelope): decoded or refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kcm_apiserver::protobuf::decode_to_json(data);
});
