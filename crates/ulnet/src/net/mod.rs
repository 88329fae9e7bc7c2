//! The socket API: [`TcpListener`], [`TcpStream`] and [`UdpSocket`] shaped like
//! `std::net`, over a ulnet [`Stack`] whose runtime loop runs on its own thread.
//!
//! How it works: every socket operation locks the stack's interface for one short
//! step (try the operation on the sans-I/O engine), then wakes the runtime loop so what
//! it queued goes out at once. An operation that cannot complete yet (no data, no room,
//! handshake pending) waits on the socket's own notification cell, which the
//! loop bumps when the TCP layer reports a readiness event for that socket (UDP sockets
//! with waiters are checked once per loop iteration). The same signal wakes tokio tasks
//! (feature `tokio`) and [`Poller`]s, so no thread or task ever polls in a loop.
//!
//! ```no_run
//! use std::io::{Read, Write};
//! use ulnet::net::{Stack, TcpStream};
//!
//! let stack = Stack::builder().interface("veth1").address("198.18.0.5/24").build()?;
//! let mut s = TcpStream::connect(&stack, "198.18.0.1:7")?;
//! s.write_all(b"hello")?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Errors are `std::io::Error`s with the kinds std uses (`WouldBlock`,
//! `ConnectionReset`, `ConnectionRefused`, `TimedOut`, `AddrInUse`, `BrokenPipe`,
//! `NotConnected`, `InvalidInput`). Misuse returns an error, never a panic; the one
//! exception is tokio's own: async sockets on a runtime without its IO driver (see
//! [`StackBuilder::drive_from_tasks`]).
//!
//! Invariants: lock order is interface, then registry, then a socket's notify cell;
//! nothing blocks while holding the interface lock; a handle of the engine is used only
//! while the socket object that owns it is alive (so it can never be stale).

mod builder;
mod error;
mod poll;
mod reactor;
mod stack;
mod tcp;
#[cfg(feature = "tokio")]
mod tokio_io;
mod udp;

pub use builder::{BuildError, CidrError, StackBuilder};
pub use poll::{Event, Interest, Poller, Source, Token};
pub use reactor::WatchFn;
pub use stack::{Stack, Turns};
pub use tcp::{ConnectOptions, TcpListener, TcpStream};
pub use udp::UdpSocket;

pub use ulnet_stack::tcp::{Algorithm, Keepalive, ListenerLimits, SocketOption, TcpInfo};
pub use ulnet_stack::IpFields;
