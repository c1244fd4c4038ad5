//! The `kcm` binary.

fn main() {
    println!("kcm {}", env!("CARGO_PKG_VERSION"));
}
