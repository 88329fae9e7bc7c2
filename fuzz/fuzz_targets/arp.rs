//! libFuzzer target: see `ulnet_fuzz::arp` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ulnet_fuzz::arp(data));
