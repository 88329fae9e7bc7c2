//! Applications that run inside the [`runtime`](crate::runtime) loop as
//! [`App`](crate::runtime::App)s, event-driven over the stack's sockets: the servers
//! behind `ulnet serve` ([`echo`], [`discard`] with chargen, [`http`]), `ulnet ping`
//! ([`ping`]) and a TCP bulk client ([`bulk`]) for interop tests. [`pattern`] is the
//! deterministic byte stream they send and check.

pub mod bulk;
pub mod discard;
pub mod echo;
pub mod http;
pub mod iperf3;
pub mod pattern;
pub mod ping;
pub mod server;

pub use echo::AppError;
