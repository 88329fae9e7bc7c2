//! libFuzzer target: see `ulnet_fuzz::icmpv6` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ulnet_fuzz::icmpv6(data));
