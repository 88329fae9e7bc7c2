//! Echo (RFC 862): every UDP datagram goes back to its sender; every byte of a TCP
//! connection goes back on it, for many connections at once, with backpressure (a
//! connection whose send buffer is full is not read until it drains).

use std::net::SocketAddr;

use ulnet_stack::iface::Interface;
use ulnet_stack::socket::{AddError, UdpConfig, UdpHandle, UdpSocket};
use ulnet_stack::tcp::{Event, ListenError, RecvError, SocketHandle, Tcp};
use ulnet_stack::time::Instant;

use super::server::{Limits, Next, ServerStats, Session, TcpServer};
use ulnet::runtime::App;

/// Bytes one TCP echo session holds between receiving and sending.
const HOLD_LEN: usize = 16 * 1024;

/// Counters of the UDP half.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpEchoStats {
    /// Datagrams echoed.
    pub echoed: u64,
    /// Datagrams dropped because the send buffer was full.
    pub dropped: u64,
}

/// One TCP echo connection.
#[derive(Debug)]
pub struct EchoSession {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Bytes echoed so far.
    pub echoed: u64,
}

impl Default for EchoSession {
    fn default() -> Self {
        EchoSession {
            buf: vec![0; HOLD_LEN].into_boxed_slice(),
            start: 0,
            end: 0,
            echoed: 0,
        }
    }
}

impl Session for EchoSession {
    fn drive(&mut self, tcp: &mut Tcp, now: Instant, h: SocketHandle) -> Next {
        loop {
            while self.start < self.end {
                match tcp.send(now, h, &self.buf[self.start..self.end]) {
                    Ok(0) => return Next::Open,
                    Ok(n) => {
                        self.start += n;
                        self.echoed += n as u64;
                    }
                    Err(_) => return Next::Abort,
                }
            }
            self.start = 0;
            self.end = 0;
            match tcp.recv(now, h, &mut self.buf) {
                Ok(0) => return Next::Close,
                Ok(n) => self.end = n,
                Err(RecvError::WouldBlock) => return Next::Open,
                Err(_) => return Next::Abort,
            }
        }
    }
}

/// The echo service on one port, UDP and TCP.
#[derive(Debug)]
pub struct Echo {
    udp: Option<UdpHandle>,
    tcp: TcpServer<EchoSession>,
    stats: UdpEchoStats,
    buf: Box<[u8]>,
}

impl Echo {
    /// Binds UDP and listens on TCP at `local` (TCP only if the interface has it).
    ///
    /// # Errors
    /// The UDP port or TCP listener is taken, or the socket set is full.
    pub fn new(iface: &mut Interface, local: SocketAddr) -> Result<Echo, AppError> {
        let udp = bind_udp(iface, local)?;
        let mut tcp = TcpServer::new(local, Limits::default());
        if let Some(t) = iface.tcp_mut() {
            tcp.listen(t)?;
        }
        Ok(Echo {
            udp: Some(udp),
            tcp,
            stats: UdpEchoStats::default(),
            buf: vec![0; 65_536].into_boxed_slice(),
        })
    }

    /// UDP counters.
    pub fn udp_stats(&self) -> UdpEchoStats {
        self.stats
    }

    /// Replaces the TCP connection limits (default [`Limits::default`]).
    pub fn set_limits(&mut self, limits: Limits) {
        self.tcp.set_limits(limits);
    }

    /// TCP counters.
    pub fn tcp_stats(&self) -> ServerStats {
        self.tcp.stats()
    }

    /// Bytes echoed over TCP by the connections still open.
    pub fn tcp_open_echoed(&self) -> u64 {
        self.tcp.sessions().map(|s| s.echoed).sum()
    }
}

impl App for Echo {
    fn poll(&mut self, now: Instant, iface: &mut Interface, events: &[Event]) {
        if let Some(h) = self.udp {
            let s = iface
                .sockets_mut()
                .udp_mut(h)
                .expect("the app never removes its socket");
            while let Ok((n, meta)) = s.recv_from(&mut self.buf) {
                match s.send_to(&self.buf[..n], meta.peer) {
                    Ok(()) => self.stats.echoed += 1,
                    Err(_) => self.stats.dropped += 1,
                }
            }
        }
        if let Some(t) = iface.tcp_mut() {
            self.tcp
                .poll(t, now, events, &mut EchoSession::default, &mut |_| {});
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        // Idle timeouts (issue 13) fire without any event.
        self.tcp.poll_at()
    }
}

/// Binds a UDP socket with room for bursts (256 datagrams, 256 KiB each way).
pub(crate) fn bind_udp(iface: &mut Interface, local: SocketAddr) -> Result<UdpHandle, AppError> {
    let mut s = UdpSocket::new(UdpConfig {
        rx_datagram_count: 256,
        rx_len: 256 * 1024,
        tx_datagram_count: 256,
        tx_len: 256 * 1024,
    });
    s.bind(local).map_err(|_| AppError::Bind)?;
    Ok(iface.sockets_mut().add_udp(s)?)
}

/// Why an app could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AppError {
    /// The UDP socket could not be bound.
    Bind,
    /// The socket set refused the socket.
    Add(AddError),
    /// The TCP listener could not be created.
    Listen(ListenError),
    /// The interface has no TCP layer.
    NoTcp,
    /// The HTTP server's root directory could not be opened.
    Root(std::io::ErrorKind),
}

impl From<AddError> for AppError {
    fn from(e: AddError) -> Self {
        AppError::Add(e)
    }
}

impl From<ListenError> for AppError {
    fn from(e: ListenError) -> Self {
        AppError::Listen(e)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppError::Bind => f.write_str("cannot bind the UDP socket"),
            AppError::Add(e) => write!(f, "cannot add the socket: {e}"),
            AppError::Listen(e) => write!(f, "cannot listen: {e}"),
            AppError::NoTcp => f.write_str("the interface has no TCP layer"),
            AppError::Root(e) => write!(f, "cannot open the root directory: {e}"),
        }
    }
}

impl std::error::Error for AppError {}
