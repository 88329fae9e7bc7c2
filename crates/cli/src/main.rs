//! The `ulnet` command-line tool.
#![forbid(unsafe_code)]

fn main() {
    println!("ulnet {}", env!("CARGO_PKG_VERSION"));
}
