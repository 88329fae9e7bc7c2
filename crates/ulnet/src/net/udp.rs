//! [`UdpSocket`]: `std::net::UdpSocket` over a ulnet [`Stack`].
//!
//! Datagrams wait in the socket's bounded buffers (sizes from
//! [`UdpSocket::bind_with`]); a full receive buffer drops and counts, a full send
//! buffer makes `send_to` wait (or fail with `WouldBlock` when non-blocking).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use ulnet_stack::iface::Interface;
use ulnet_stack::socket::{
    RecvError, SendError, UdpConfig, UdpHandle, UdpSocket as EngineUdp, V6OnlyError,
};

use ulnet_stack::IpFields;

use super::error::{self, err};
use super::poll::Source;
use super::reactor::{Key, Notify};
use super::stack::{Queued, Stack};

#[derive(Debug)]
struct Inner {
    stack: Stack,
    h: UdpHandle,
    local: SocketAddr,
    notify: Arc<Notify>,
    peer: Mutex<Option<SocketAddr>>,
    nonblocking: AtomicBool,
    read_timeout: Mutex<Option<Duration>>,
    write_timeout: Mutex<Option<Duration>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let h = self.h;
        // Datagrams already queued still go out (bounded wait, like a close).
        let _ = self.stack.wait_while(Duration::from_secs(1), |set| {
            set.udp(h).is_ok_and(|s| s.tx_queued() > 0)
        });
        // Under one lock: the reactor must never see the entry without the socket.
        self.stack.with(|iface| {
            self.stack.registry().remove(Key::Udp(h));
            let _ = iface.sockets_mut().remove_udp(h);
        });
    }
}

fn get<T: Copy>(m: &Mutex<T>) -> T {
    *m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn set<T>(m: &Mutex<T>, v: T) {
    *m.lock().unwrap_or_else(PoisonError::into_inner) = v;
}

/// A UDP socket, like [`std::net::UdpSocket`]. `Send + Sync`.
#[derive(Debug)]
pub struct UdpSocket {
    inner: Arc<Inner>,
}

/// Buffers of sockets made by [`UdpSocket::bind`]: 256 datagrams, 256 KiB each way.
const DEFAULT_CONFIG: UdpConfig = UdpConfig {
    rx_datagram_count: 256,
    rx_len: 256 * 1024,
    tx_datagram_count: 256,
    tx_len: 256 * 1024,
};

impl UdpSocket {
    /// Binds to `addr` (unspecified IP: every address of the stack; port 0: a free
    /// port), with buffers of 256 datagrams and 256 KiB each way.
    ///
    /// # Errors
    /// `AddrInUse` when another socket has the port; `AddrNotAvailable` when no port is
    /// free.
    pub fn bind(stack: &Stack, addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        Self::bind_with(stack, addr, DEFAULT_CONFIG)
    }

    /// Like [`bind`](Self::bind) with the buffer sizes of `config`.
    ///
    /// # Errors
    /// As [`bind`](Self::bind).
    pub fn bind_with(
        stack: &Stack,
        addr: impl ToSocketAddrs,
        config: UdpConfig,
    ) -> io::Result<UdpSocket> {
        let addr = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, "no address given"))?;
        let mut s = EngineUdp::new(config);
        s.bind(addr)
            .map_err(|e| err(io::ErrorKind::InvalidInput, e))?;
        stack.with(|iface| {
            let h = iface.sockets_mut().add_udp(s).map_err(error::udp_add)?;
            // The engine chose the port when `addr` has port 0 (RFC 6056).
            let local = iface
                .sockets()
                .udp(h)
                .ok()
                .and_then(|s| s.local_endpoint())
                .unwrap_or(addr);
            Ok(UdpSocket {
                inner: Arc::new(Inner {
                    stack: stack.clone(),
                    h,
                    local,
                    notify: stack.registry().notify(Key::Udp(h)),
                    peer: Mutex::new(None),
                    nonblocking: AtomicBool::new(false),
                    read_timeout: Mutex::new(None),
                    write_timeout: Mutex::new(None),
                }),
            })
        })
    }

    /// The bound address.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.inner.local)
    }

    /// The connected peer.
    ///
    /// # Errors
    /// `NotConnected` before [`connect`](Self::connect).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        get(&self.inner.peer).ok_or_else(|| err(io::ErrorKind::NotConnected, "not connected"))
    }

    /// For a socket on `[::]`: receive IPv6 datagrams only (`true`, like
    /// `IPV6_V6ONLY`) or IPv4 ones too that no IPv4 socket on the port claims (`false`,
    /// the default, as Linux with `net.ipv6.bindv6only=0`; their senders are reported as
    /// IPv4 addresses). Linux sets it before `bind(2)`; here it may change later within
    /// the same rule: `0.0.0.0` (or an IPv4 address) and a `[::]` socket that is not
    /// v6-only overlap on a port.
    ///
    /// # Errors
    /// `AddrInUse` turning it off while an IPv4 socket holds the port; `NotConnected`
    /// when the socket is gone.
    pub fn set_only_v6(&self, on: bool) -> io::Result<()> {
        let h = self.inner.h;
        self.inner.stack.with(|iface| {
            iface
                .sockets_mut()
                .set_udp_v6only(h, on)
                .map_err(|e| match e {
                    V6OnlyError::AddrInUse => err(io::ErrorKind::AddrInUse, e),
                    _ => err(io::ErrorKind::NotConnected, e),
                })
        })
    }

    /// The TOS byte and TTL (IPv6: Traffic Class and Hop Limit) of the datagrams sent
    /// from now on, like `IP_TOS` and `IP_TTL`: the whole byte, ECN bits included, as
    /// Linux sends them for UDP. The default is TOS 0 and the stack's TTL.
    ///
    /// # Errors
    /// `NotConnected` when the socket is gone.
    pub fn set_ip_fields(&self, ip: IpFields) -> io::Result<()> {
        let h = self.inner.h;
        self.inner.stack.with(|iface| {
            iface
                .sockets_mut()
                .udp_mut(h)
                .map(|s| s.set_ip_fields(ip))
                .map_err(|_| err(io::ErrorKind::NotConnected, "the socket is gone"))
        })
    }

    /// What [`set_ip_fields`](Self::set_ip_fields) set.
    ///
    /// # Errors
    /// `NotConnected` when the socket is gone.
    pub fn ip_fields(&self) -> io::Result<IpFields> {
        let h = self.inner.h;
        self.inner.stack.with(|iface| {
            iface
                .sockets()
                .udp(h)
                .map(|s| s.ip_fields())
                .map_err(|_| err(io::ErrorKind::NotConnected, "the socket is gone"))
        })
    }

    /// Another handle to the same socket.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            inner: Arc::clone(&self.inner),
        })
    }

    /// Sets the default destination for [`send`](Self::send) and keeps only its
    /// datagrams for [`recv`](Self::recv) (others are discarded, as `connect(2)` does).
    /// Like Linux, an ICMP port unreachable for a datagram sent to the peer makes the
    /// next send or receive fail with `ConnectionRefused`.
    ///
    /// # Errors
    /// `InvalidInput` for an unspecified address or port 0.
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let a = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, "no address given"))?;
        if a.port() == 0 || a.ip().is_unspecified() {
            return Err(err(
                io::ErrorKind::InvalidInput,
                "cannot connect to an unspecified address",
            ));
        }
        set(&self.inner.peer, Some(a));
        // The engine reports ICMP errors about datagrams to the peer (ECONNREFUSED).
        let h = self.inner.h;
        self.inner.stack.with(|iface| {
            if let Ok(s) = iface.sockets_mut().udp_mut(h) {
                s.connect(Some(a));
            }
        });
        Ok(())
    }

    /// Dissolves the association [`connect`](Self::connect) made, as `connect(2)` with
    /// `AF_UNSPEC` does: datagrams from every sender are received again, and `send`
    /// needs a destination. The C library uses it when a second socket shares this one's
    /// port (`SO_REUSEADDR`) and it sorts the datagrams itself.
    pub fn disconnect(&self) {
        set(&self.inner.peer, None);
        let h = self.inner.h;
        self.inner.stack.with(|iface| {
            if let Ok(s) = iface.sockets_mut().udp_mut(h) {
                s.connect(None);
            }
        });
    }

    /// Non-blocking mode.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.inner.nonblocking.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// Timeout of blocking receives; a receive that times out fails with
    /// `WouldBlock`, as std's does on Unix.
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        if t == Some(Duration::ZERO) {
            return Err(err(io::ErrorKind::InvalidInput, "zero timeout"));
        }
        set(&self.inner.read_timeout, t);
        Ok(())
    }

    /// Timeout of blocking sends.
    ///
    /// # Errors
    /// `InvalidInput` for a zero duration.
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        if t == Some(Duration::ZERO) {
            return Err(err(io::ErrorKind::InvalidInput, "zero timeout"));
        }
        set(&self.inner.write_timeout, t);
        Ok(())
    }

    /// The read timeout.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(get(&self.inner.read_timeout))
    }

    /// The write timeout.
    ///
    /// # Errors
    /// Never (the `Result` mirrors std).
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(get(&self.inner.write_timeout))
    }

    /// One try at sending, with the interface locked.
    /// `start` is the TSC when the application's `send` began (stage accounting; 0:
    /// none).
    pub(crate) fn try_send_to(
        &self,
        iface: &mut Interface,
        buf: &[u8],
        dst: SocketAddr,
        start: u64,
    ) -> Poll<io::Result<usize>> {
        let s = match iface.sockets_mut().udp_mut(self.inner.h) {
            Ok(s) => s,
            Err(e) => return Poll::Ready(Err(error::udp_handle(e))),
        };
        // The trace starts at the application's call, before the lock.
        #[cfg(feature = "stage-cycles")]
        ulnet_stack::stage::tx_origin(start);
        #[cfg(not(feature = "stage-cycles"))]
        let _ = start;
        let r = s.send_to(buf, dst);
        #[cfg(feature = "stage-cycles")]
        ulnet_stack::stage::tx_origin(0);
        match r {
            Ok(()) => Poll::Ready(Ok(buf.len())),
            Err(SendError::BufferFull) => Poll::Pending,
            Err(e) => Poll::Ready(Err(error::udp_send(e))),
        }
    }

    /// One try at receiving, with the interface locked (datagrams from other than the
    /// connected peer are discarded).
    pub(crate) fn try_recv_from(
        &self,
        iface: &mut Interface,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let peer = get(&self.inner.peer);
        let s = match iface.sockets_mut().udp_mut(self.inner.h) {
            Ok(s) => s,
            Err(e) => return Poll::Ready(Err(error::udp_handle(e))),
        };
        loop {
            match s.recv_from(buf) {
                Ok((n, meta)) => {
                    if peer.is_some_and(|p| p != meta.peer) {
                        continue;
                    }
                    return Poll::Ready(Ok((n, meta.peer)));
                }
                Err(RecvError::ConnectionRefused) => {
                    return Poll::Ready(Err(err(
                        io::ErrorKind::ConnectionRefused,
                        "connection refused (ICMP port unreachable)",
                    )))
                }
                Err(_) => return Poll::Pending,
            }
        }
    }

    /// Sends one datagram to `addr`; returns its length.
    ///
    /// # Errors
    /// `WouldBlock` when the buffer is full and non-blocking (or the write timeout
    /// passed); `InvalidInput` for a datagram that can never fit or an unusable
    /// destination.
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let dst = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, "no address given"))?;
        let i = &self.inner;
        let start = crate::stage::send_start();
        i.stack.block(
            &i.notify,
            i.nonblocking.load(Ordering::Relaxed),
            get(&i.write_timeout),
            io::ErrorKind::WouldBlock,
            |iface| self.try_send_to(iface, buf, dst, start),
            Queued::Maybe,
        )
    }

    /// Sends one datagram to the connected peer.
    ///
    /// # Errors
    /// `NotConnected` before [`connect`](Self::connect); as [`send_to`](Self::send_to).
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let p = self.peer_addr()?;
        self.send_to(buf, p)
    }

    /// Receives one datagram (the part that fits `buf`; the rest is discarded) and its
    /// sender.
    ///
    /// # Errors
    /// `WouldBlock` when nothing is waiting and non-blocking (or the read timeout
    /// passed); `NotConnected` when the stack stopped.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let i = &self.inner;
        i.stack.block(
            &i.notify,
            i.nonblocking.load(Ordering::Relaxed),
            get(&i.read_timeout),
            io::ErrorKind::WouldBlock,
            |iface| self.try_recv_from(iface, buf),
            Queued::Nothing,
        )
    }

    /// Receives one datagram from the connected peer.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv_from(buf).map(|(n, _)| n)
    }

    /// Datagrams dropped because the receive buffer was full, so far.
    pub fn dropped_count(&self) -> u64 {
        let h = self.inner.h;
        self.inner
            .stack
            .with(|iface| iface.sockets().udp(h).map_or(0, |s| s.stats().rx_dropped))
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn stack(&self) -> &Stack {
        &self.inner.stack
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn key(&self) -> Key {
        Key::Udp(self.inner.h)
    }
}

impl super::poll::sealed::Sealed for UdpSocket {
    fn key(&self) -> (Key, &Stack) {
        (Key::Udp(self.inner.h), &self.inner.stack)
    }
}

impl Source for UdpSocket {}
