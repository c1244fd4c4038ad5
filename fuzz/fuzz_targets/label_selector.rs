//! Label selectors: any text parses or is refused; what parses prints to text that parses back to the same selector.
#![no_main]

use kcm_machinery::labels::Selector;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(selector) = Selector::parse(text) {
        let printed = selector.to_string();
        let again = Selector::parse(&printed).expect("a printed selector parses");
        assert_eq!(again, selector, "{text:?} printed as {printed:?}");
    }
});
