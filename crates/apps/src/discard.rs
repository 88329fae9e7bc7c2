//! Discard (RFC 863) and chargen (RFC 864 in spirit): a TCP/UDP sink that counts what it
//! swallows and checks it against the [`pattern`], and a TCP/UDP source
//! that sends the pattern until the peer closes.
//!
//! Chargen sends the pattern, not RFC 864's rotating ASCII lines, so that a receiver can
//! verify every byte (`pattern::matches`) or a SHA-256 of a prefix.

use std::net::SocketAddr;

use ulnet_stack::iface::Interface;
use ulnet_stack::socket::UdpHandle;
use ulnet_stack::tcp::{Event, RecvError, SocketHandle, Tcp};
use ulnet_stack::time::Instant;

use super::echo::{bind_udp, AppError};
use super::pattern;
use super::server::{Limits, Next, ServerStats, Session, TcpServer};
use ulnet::runtime::App;

/// Totals of a sink or source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// TCP bytes received (discard) or sent (chargen) by finished connections.
    pub tcp_bytes: u64,
    /// Finished TCP connections whose every byte was the pattern (discard).
    pub tcp_pattern_ok: u64,
    /// UDP datagrams received (discard) or sent (chargen).
    pub udp_datagrams: u64,
    /// UDP payload bytes.
    pub udp_bytes: u64,
}

/// One discard connection.
#[derive(Debug, Default)]
pub struct DiscardSession {
    /// Bytes received.
    pub bytes: u64,
    /// Every byte so far was the pattern at its offset.
    pub pattern_ok: bool,
    buf: Vec<u8>,
}

impl Session for DiscardSession {
    fn drive(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle) -> Next {
        if self.buf.is_empty() {
            self.buf = vec![0; 64 * 1024];
            self.pattern_ok = true;
        }
        loop {
            match tcp.recv(now, h, &mut self.buf) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    self.pattern_ok &= pattern::matches(self.bytes, &self.buf[..n]);
                    self.bytes += n as u64;
                }
                Err(RecvError::WouldBlock) => return Next::Open,
                Err(_) => return Next::Abort,
            }
        }
    }
}

/// The discard service on one port, UDP and TCP.
#[derive(Debug)]
pub struct Discard {
    udp: UdpHandle,
    tcp: TcpServer<DiscardSession>,
    stats: FlowStats,
    buf: Box<[u8]>,
}

impl Discard {
    /// Binds UDP and listens on TCP at `local`.
    ///
    /// # Errors
    /// The port is taken or the socket set is full.
    pub fn new(iface: &mut Interface, local: SocketAddr) -> Result<Discard, AppError> {
        let udp = bind_udp(iface, local)?;
        let mut tcp = TcpServer::new(local, Limits::default());
        if let Some(t) = iface.tcp_mut() {
            tcp.listen(t)?;
        }
        Ok(Discard {
            udp,
            tcp,
            stats: FlowStats::default(),
            buf: vec![0; 65_536].into_boxed_slice(),
        })
    }

    /// Totals, open connections included.
    pub fn stats(&self) -> FlowStats {
        let mut s = self.stats;
        for sess in self.tcp.sessions() {
            s.tcp_bytes += sess.bytes;
        }
        s
    }

    /// Replaces the TCP connection limits (default [`Limits::default`]).
    pub fn set_limits(&mut self, limits: Limits) {
        self.tcp.set_limits(limits);
    }

    /// TCP server counters.
    pub fn tcp_stats(&self) -> ServerStats {
        self.tcp.stats()
    }
}

impl App for Discard {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        let s = iface
            .sockets_mut()
            .udp_mut(self.udp)
            .expect("the app never removes its socket");
        while let Ok((n, _)) = s.recv_from(&mut self.buf) {
            self.stats.udp_datagrams += 1;
            self.stats.udp_bytes += n as u64;
        }
        if let Some(t) = iface.tcp_mut() {
            let stats = &mut self.stats;
            self.tcp
                .poll(t, now, events, &mut DiscardSession::default, &mut |s| {
                    stats.tcp_bytes += s.bytes;
                    stats.tcp_pattern_ok += u64::from(s.pattern_ok && s.bytes > 0);
                });
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        // Idle timeouts (issue 13) fire without any event.
        self.tcp.poll_at()
    }
}

/// One chargen connection: sends the pattern until the peer closes or resets.
#[derive(Debug, Default)]
pub struct ChargenSession {
    /// Bytes sent.
    pub bytes: u64,
    /// Stop after this many bytes (then close), if set.
    pub limit: Option<u64>,
}

impl Session for ChargenSession {
    fn drive(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle) -> Next {
        // Whatever the peer sends is read and ignored; its FIN ends the stream.
        let mut sink = [0u8; 2048];
        loop {
            match tcp.recv(now, h, &mut sink) {
                Ok(0) => return Next::Close,
                Ok(_) => {}
                Err(RecvError::WouldBlock) => break,
                Err(_) => return Next::Abort,
            }
        }
        loop {
            let want = match self.limit {
                Some(l) if self.bytes >= l => return Next::Close,
                Some(l) => (l - self.bytes).min(pattern::MAX_CHUNK as u64) as usize,
                None => pattern::MAX_CHUNK,
            };
            match tcp.send(now, h, pattern::slice(self.bytes, want)) {
                Ok(0) => return Next::Open,
                Ok(n) => self.bytes += n as u64,
                Err(_) => return Next::Abort,
            }
        }
    }
}

/// The chargen service on one port: TCP streams the pattern; each UDP datagram is
/// answered with 512 pattern bytes.
#[derive(Debug)]
pub struct Chargen {
    udp: UdpHandle,
    tcp: TcpServer<ChargenSession>,
    stats: FlowStats,
    limit: Option<u64>,
    buf: Box<[u8]>,
}

impl Chargen {
    /// Binds UDP and listens on TCP at `local`; each TCP stream stops (FIN) after
    /// `limit` bytes if given.
    ///
    /// # Errors
    /// The port is taken or the socket set is full.
    pub fn new(
        iface: &mut Interface,
        local: SocketAddr,
        limit: Option<u64>,
    ) -> Result<Chargen, AppError> {
        let udp = bind_udp(iface, local)?;
        let mut tcp = TcpServer::new(local, Limits::default());
        if let Some(t) = iface.tcp_mut() {
            tcp.listen(t)?;
        }
        Ok(Chargen {
            udp,
            tcp,
            stats: FlowStats::default(),
            limit,
            buf: vec![0; 2048].into_boxed_slice(),
        })
    }

    /// Totals, open connections included.
    pub fn stats(&self) -> FlowStats {
        let mut s = self.stats;
        for sess in self.tcp.sessions() {
            s.tcp_bytes += sess.bytes;
        }
        s
    }

    /// Replaces the TCP connection limits (default [`Limits::default`]).
    pub fn set_limits(&mut self, limits: Limits) {
        self.tcp.set_limits(limits);
    }

    /// TCP server counters.
    pub fn tcp_stats(&self) -> ServerStats {
        self.tcp.stats()
    }
}

impl App for Chargen {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        let s = iface
            .sockets_mut()
            .udp_mut(self.udp)
            .expect("the app never removes its socket");
        while let Ok((_, meta)) = s.recv_from(&mut self.buf) {
            if s.send_to(pattern::slice(0, 512), meta.peer).is_ok() {
                self.stats.udp_datagrams += 1;
                self.stats.udp_bytes += 512;
            }
        }
        if let Some(t) = iface.tcp_mut() {
            let stats = &mut self.stats;
            let limit = self.limit;
            self.tcp.poll(
                t,
                now,
                events,
                &mut || ChargenSession { bytes: 0, limit },
                &mut |s| stats.tcp_bytes += s.bytes,
            );
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        // Idle timeouts (issue 13) fire without any event.
        self.tcp.poll_at()
    }
}
