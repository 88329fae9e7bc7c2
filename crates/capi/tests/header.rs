//! The checked-in C header (include/ulnet.h) is the one cbindgen makes from the code
//! now (build.rs writes it to OUT_DIR); refresh it with
//! `ULNET_WRITE_HEADER=1 cargo build -p ulnet-capi`.

#[test]
fn header_is_current() {
    let generated = std::fs::read_to_string(concat!(env!("OUT_DIR"), "/ulnet.h"))
        .expect("build.rs writes OUT_DIR/ulnet.h");
    let checked_in =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/ulnet.h"))
            .expect("include/ulnet.h");
    assert!(
        generated == checked_in,
        "include/ulnet.h is stale: run `ULNET_WRITE_HEADER=1 cargo build -p ulnet-capi`"
    );
    for f in [
        "ulnet_init",
        "ulnet_socket",
        "ulnet_accept4",
        "ulnet_recvmsg",
        "ulnet_epoll_pwait",
    ] {
        assert!(
            checked_in.contains(&format!(" {f}(")),
            "{f} missing from the header"
        );
    }
}
