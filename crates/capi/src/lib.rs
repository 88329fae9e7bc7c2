//! libulnet: ulnet's socket API for C, with the signatures and errno rules of the libc
//! socket functions (`ulnet_socket`, `ulnet_connect`, ... in `include/ulnet.h`).
//!
//! Every ulnet socket is handed out as a real kernel descriptor (one end of an
//! AF_UNIX socket pair) whose readiness follows the ulnet socket's, so the kernel's
//! poll, select and epoll work on sets mixing ulnet and kernel descriptors, and dup,
//! close-on-exec and descriptor numbering behave. `ulnet_preload` (in `preload/`) uses
//! the same code to run unmodified programs on ulnet. See docs/capi.md.
//!
//! `unsafe` is this crate's job (raw pointers from C, system calls on the descriptors
//! it owns); every block says why it is sound.
#![deny(missing_docs)]
#![allow(unsafe_code)]

pub mod addr;
pub mod api;
pub mod global;
pub mod mirror;
pub mod opts;
pub mod sock;
pub mod sys;
mod udpshare;

pub use api::*;
