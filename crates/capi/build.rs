//! Generates the C header from the `ulnet_*` functions with cbindgen into OUT_DIR.
//! The header users include is checked in (`include/ulnet.h`, so C users need no Rust
//! tool to read it); the test `header_is_current` fails when it differs from this one.
//! `ULNET_WRITE_HEADER=1 cargo build -p ulnet-capi` rewrites it.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=ULNET_WRITE_HEADER");
    let config = cbindgen::Config::from_file(format!("{dir}/cbindgen.toml"))
        .expect("crates/capi/cbindgen.toml");
    let header = cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate the header");
    header.write_to_file(format!("{out}/ulnet.h"));
    if std::env::var_os("ULNET_WRITE_HEADER").is_some() {
        header.write_to_file(format!("{dir}/include/ulnet.h"));
    }
}
