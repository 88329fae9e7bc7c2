//! libFuzzer target: see `ulnet_fuzz::icmp` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ulnet_fuzz::icmp(data));
