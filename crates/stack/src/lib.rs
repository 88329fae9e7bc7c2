//! The sans-I/O TCP/IP engine: it takes frames and the current instant, and gives back
//! frames and the next deadline. It does no system calls, reads no clock and starts no
//! thread, which is what makes it testable in virtual time.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod iface;
pub mod ports;
pub mod socket;
pub mod storage;
pub mod tcp;
pub mod time;
