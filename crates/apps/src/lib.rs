//! ulnet-apps: ready-made services on the ulnet library, used by the CLI and the bench.
//! Nothing in the library depends on this crate, so a library user's build never pulls
//! in its dependencies (serde, serde_json, sha2, httparse).
//!
//! Owns: applications that run inside the [`runtime`](ulnet::runtime) loop as
//! [`App`](ulnet::runtime::App)s, event-driven over the stack's sockets: the servers
//! behind `ulnet serve` ([`echo`], [`discard`] with chargen, [`http`]), `ulnet ping`
//! ([`ping`]) and a TCP bulk client ([`bulk`]) for interop tests; the TCP servers share
//! [`server::TcpServer`], whose [`server::Limits`] (total and per-source sessions, idle
//! timeout) keep one host from locking the others out; an [`iperf3`] server
//! over the [`net`](ulnet::net) socket API; and [`sim`], the simulated-wire experiment
//! runner behind `ulnet sim tcp`. [`pattern`] is the deterministic byte stream the apps
//! send and check.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod bulk;
pub mod discard;
pub mod echo;
pub mod http;
pub mod iperf3;
pub mod pattern;
pub mod ping;
pub mod server;
pub mod sim;

pub use echo::AppError;
