//! The sans-I/O TCP/IP engine: it takes frames and the current instant, and gives back
//! frames and the next deadline. It does no system calls, reads no clock and starts no
//! thread, which is what makes it testable in virtual time.
//!
//! It is `no_std + alloc` without the default `std` feature: it needs a heap and nothing
//! else of an operating system (no clock, and no randomness: every hash map is keyed from
//! the engine's secret, see `tcp::table::KeyedState`). `scripts/test.sh` builds it so, and
//! links it into the `#![no_std]` crate `crates/stack/nostd-check`.
#![cfg_attr(not(feature = "std"), no_std)]
// The `stage-cycles` feature's TSC read is the one `unsafe` (in `stage::tsc`).
#![cfg_attr(not(feature = "stage-cycles"), forbid(unsafe_code))]
#![deny(missing_docs)]

extern crate alloc;

/// Calls a [`stage`] hook when the `stage-cycles` feature is on, and nothing otherwise:
/// `stage_hook!(rx_mark RxIpv4)` marks a boundary, `stage_hook!(f(args))` calls `f`.
macro_rules! stage_hook {
    ($f:ident $s:ident) => {
        #[cfg(feature = "stage-cycles")]
        {
            $crate::stage::$f($crate::stage::Stage::$s);
        }
    };
    ($f:ident($($a:expr),*)) => {
        #[cfg(feature = "stage-cycles")]
        {
            $crate::stage::$f($($a),*);
        }
    };
}

pub mod iface;
mod ipfields;
pub mod ports;
pub mod socket;
#[cfg(feature = "stage-cycles")]
pub mod stage;
pub mod storage;
pub mod tcp;
pub mod time;

pub use ipfields::{IpFields, ECN_MASK};
