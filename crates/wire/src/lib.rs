//! Packet formats as zero-copy typed views over byte buffers, and their emitters.
//!
//! Owns: Ethernet II, ARP, IPv4, ICMPv4, UDP, TCP (with options) and the Internet
//! checksum. In: byte slices from a channel. Out: typed views (`*Packet<T>`) and
//! high-level representations (`*Repr`). Invariant: nothing panics after `check_len`
//! (or `new_checked`) returns `Ok`.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod seq;

pub use seq::SeqNumber;
