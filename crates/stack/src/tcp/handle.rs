//! The names the application holds: [`SocketHandle`], [`ListenerHandle`] and the
//! readiness [`Event`] that carries them. A leaf: it imports nothing of the engine, so
//! the layer, the listeners and the control block can all name each other's handles
//! without importing each other.
//!
//! Invariant: a handle is `(index, generation)`; the layer bumps a slot's generation
//! whenever it frees the slot, so a stale handle never reaches another connection.

/// A connection, as the application names it. Small and `Copy`; stale handles are
/// detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SocketHandle {
    pub(super) index: u32,
    pub(super) generation: u32,
}

/// A listening socket, as the application names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerHandle {
    pub(super) index: u32,
    pub(super) generation: u32,
}

/// Something about a socket or listener may have changed (data arrived, buffer space
/// freed, state changed, a connection is ready to accept). Query the details with
/// [`Tcp::readiness`](super::Tcp::readiness) / [`Tcp::accept`](super::Tcp::accept). Each
/// socket is queued at most once until taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// A connection's readiness may have changed.
    Socket(SocketHandle),
    /// A listener may have connections to accept.
    Listener(ListenerHandle),
}
