//! libFuzzer target: see `ulnet_fuzz::ipv6` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ulnet_fuzz::ipv6(data));
