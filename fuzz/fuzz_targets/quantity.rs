//! Quantities: any text parses or is refused; the canonical form of what parses parses and reaches a fixed point by its second printing.
#![no_main]

use kcm_machinery::quantity;
use libfuzzer_sys::fuzz_target;

fn reprint(text: &str) -> String {
    quantity::parse(text)
        .unwrap_or_else(|e| panic!("canonical form {text:?} does not parse: {e}"))
        .canonical()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(q) = quantity::parse(text) {
        let second = reprint(&q.canonical());
        assert_eq!(reprint(&second), second, "{text:?}");
    }
});
