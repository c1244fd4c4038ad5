//! Field selectors (pods' fields): any text parses or is refused with a 400, never a panic.
#![no_main]

use kcm_apiserver::registry::field_selector::FieldSelector;
use kcm_apiserver::resources::pod::PODS;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(err) = FieldSelector::parse(text, &PODS) {
        assert_eq!(err.code, 400, "{text:?}: {err}");
    }
});
