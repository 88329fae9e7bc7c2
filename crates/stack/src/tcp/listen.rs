//! Listening sockets (RFC 9293 §3.10.7.2 LISTEN): a SYN queue of half-open connections
//! and an accept queue of established ones, both bounded, so a SYN flood costs at most
//! `syn_queue_len` control blocks per listener and never more.
//!
//! Half-open connections are full control blocks in SYN-RECEIVED (they handle their own
//! SYN-ACK retransmission); the listener only counts them. When the handshake completes
//! the connection moves to the accept queue; when that queue is full, the completing ACK
//! is dropped (the SYN-ACK will be retransmitted and the peer's ACK retried), as Linux
//! does, and the SYN of new connections is dropped.
//!
//! A full SYN queue is the mark of a SYN flood (RFC 4987 §2). A new SYN then first
//! evicts the oldest half-open connection whose SYN-ACK was already retransmitted (no
//! ACK came within an RTO: most likely a spoofed source, RFC 4987 §3.4 "drop oldest"),
//! else it is answered with a SYN cookie (`cookie.rs`) and nothing is stored. The
//! listener remembers when that last happened: ACKs for no connection are checked as
//! cookies only for two cookie periods after it (Linux's `tcp_synq_no_recent_overflow`).
//!
//! Memory: at most `syn_queue_len` control blocks per listener, and the arrival-order
//! list below holds at most twice that many handles.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::SocketAddr;

use super::config::SocketOption;
use super::handle::SocketHandle;
use crate::time::Instant;

/// A listening socket.
#[derive(Debug)]
pub(crate) struct Listener {
    pub local: SocketAddr,
    pub backlog: usize,
    /// Established connections not yet accepted, oldest first.
    pub accept_queue: VecDeque<SocketHandle>,
    /// Connections in SYN-RECEIVED that came from this listener.
    pub syn_count: usize,
    /// Those connections in arrival order, oldest first, for early eviction. Entries
    /// whose connection left SYN-RECEIVED (or was freed) are stale and skipped lazily:
    /// the layer checks each handle against its slot before using it, and drops stale
    /// entries when the list grows past twice the SYN queue.
    pub syn_order: VecDeque<SocketHandle>,
    /// When the SYN queue was last found full (the listener is in cookie mode for two
    /// cookie periods after it).
    pub last_overflow: Option<Instant>,
    /// Options every new connection gets before its SYN-ACK, at most one per kind.
    pub options: Vec<SocketOption>,
    /// For a listener on the IPv6 wildcard `[::]`: refuse IPv4 connections (Linux
    /// `IPV6_V6ONLY`, RFC 3493 §5.3). Off by default, as Linux's `bindv6only=0`: the
    /// wildcard listener then also takes IPv4 connections no IPv4 listener claims.
    pub v6only: bool,
}

impl Listener {
    pub(crate) fn new(local: SocketAddr, backlog: usize) -> Self {
        Listener {
            local,
            backlog,
            accept_queue: VecDeque::with_capacity(backlog.min(1024)),
            syn_count: 0,
            syn_order: VecDeque::new(),
            last_overflow: None,
            options: Vec::new(),
            v6only: false,
        }
    }

    /// Records `opt` for future connections, replacing an earlier option of its kind.
    pub(crate) fn set_option(&mut self, opt: SocketOption) {
        let kind = core::mem::discriminant(&opt);
        self.options.retain(|o| core::mem::discriminant(o) != kind);
        self.options.push(opt);
    }

    /// True when a completed handshake would not fit the accept queue.
    pub(crate) fn accept_queue_full(&self) -> bool {
        self.accept_queue.len() >= self.backlog
    }
}
