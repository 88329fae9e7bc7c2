//! ulnet: user-level networking for Linux. The library users take: the runtime that
//! drives the sans-I/O stack over a netchannel, and the socket API. Ready-made services
//! and the simulated-wire experiment runner built on it live in `ulnet-apps`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use ulnet_channel as channel;
pub use ulnet_stack as stack;
pub use ulnet_wire as wire;

pub mod net;
pub mod runtime;
pub mod stage;
