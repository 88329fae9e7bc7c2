//! Netchannels: batched frame channels from a device to the program, with no protocol
//! work in between (seed 004).
//!
//! Owns: the [`Channel`] trait and its backends — [`sim`] (a virtual wire with seeded
//! impairments, for tests), [`tap`], [`packet`] (AF_PACKET TPACKET_V3) and [`xdp`]
//! (AF_XDP with a flow-steering XDP program), [`pipe`] (an in-memory link between two
//! stacks on different threads) — and the [`pcap`] adapter any channel can be wrapped
//! in, and [`netif`] for what a program reads about an interface before it opens one
//! (its MAC). In: frames from the device; out: frames to the device.
//!
//! Invariants: a received frame is borrowed from the ring only for the duration of the
//! callback that sees it and returns to the ring afterwards (no per-packet allocation);
//! a full ring drops and counts, never blocks or grows. `unsafe` lives only in [`sys`]
//! and `ring` (docs/STYLE.md 4.6), and stays there: `sys`'s `syscall!` is not exported, and
//! [`Channel::wait_fd`] lends a `BorrowedFd`, so callers need no `unsafe` to poll.
#![deny(unsafe_code)]
#![deny(missing_docs)]

#[cfg(target_os = "linux")]
mod bursts;
pub mod pcap;
#[cfg(target_os = "linux")]
pub mod pipe;
pub mod sim;
pub mod sys;

#[cfg(target_os = "linux")]
pub mod netif;
#[cfg(target_os = "linux")]
pub mod packet;
#[cfg(target_os = "linux")]
pub mod ring;
#[cfg(target_os = "linux")]
pub mod tap;
#[cfg(target_os = "linux")]
pub mod xdp;

mod channel;
mod error;

pub use channel::{Capabilities, Channel, Gso, RxParts, Stats, Tx, TxError};
pub use error::{Error, Result};
