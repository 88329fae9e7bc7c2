//! The socket set: the sockets an interface serves, found by handle.
//!
//! Invariants: at most the configured number of sockets of each kind; no two UDP
//! sockets bound to overlapping endpoints (same port, and the same address or either
//! unspecified); every UDP socket in the set is bound.

use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::{IcmpSocket, UdpSocket};

/// Refers to a UDP socket in a [`SocketSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpHandle(usize);

/// Refers to an ICMP echo socket in a [`SocketSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IcmpHandle(usize);

/// Why a socket could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddError {
    /// The set holds its maximum number of sockets of that kind.
    Full,
    /// Another socket is bound to an overlapping endpoint (or echo identifier).
    AddrInUse,
    /// No ephemeral port is free.
    NoPorts,
}

impl fmt::Display for AddError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddError::Full => "socket set full",
            AddError::AddrInUse => "address in use",
            AddError::NoPorts => "no ephemeral port free",
        })
    }
}

impl core::error::Error for AddError {}

/// The IANA dynamic port range (RFC 6335 §6), where ephemeral ports come from.
const EPHEMERAL: core::ops::RangeInclusive<u16> = 49152..=65535;

/// The sockets of one interface.
#[derive(Debug, Clone)]
pub struct SocketSet {
    udp: Vec<Option<UdpSocket>>,
    icmp: Vec<Option<IcmpSocket>>,
    udp_limit: usize,
    icmp_limit: usize,
    next_ephemeral: u16,
}

impl SocketSet {
    /// An empty set of at most `udp_count` UDP and `icmp_count` ICMP sockets.
    pub fn new(udp_count: usize, icmp_count: usize) -> SocketSet {
        SocketSet {
            udp: Vec::with_capacity(udp_count),
            icmp: Vec::with_capacity(icmp_count),
            udp_limit: udp_count,
            icmp_limit: icmp_count,
            next_ephemeral: *EPHEMERAL.start(),
        }
    }

    /// Adds a UDP socket. An unbound socket, or one bound to port 0, gets an ephemeral
    /// port.
    ///
    /// # Errors
    /// [`AddError::Full`], [`AddError::AddrInUse`] or [`AddError::NoPorts`].
    pub fn add_udp(&mut self, mut socket: UdpSocket) -> Result<UdpHandle, AddError> {
        let slot = free_slot(&self.udp, self.udp_limit).ok_or(AddError::Full)?;
        let mut local = socket
            .local_endpoint()
            .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
        if local.port() == 0 {
            let port = self.ephemeral(local.ip()).ok_or(AddError::NoPorts)?;
            local.set_port(port);
        } else if self.udp_in_use(local) {
            return Err(AddError::AddrInUse);
        }
        socket.set_local(local);
        put(&mut self.udp, slot, socket);
        Ok(UdpHandle(slot))
    }

    fn udp_in_use(&self, local: SocketAddr) -> bool {
        self.udp
            .iter()
            .flatten()
            .filter_map(|s| s.local_endpoint())
            .any(|l| {
                l.port() == local.port()
                    && (l.ip() == local.ip()
                        || l.ip().is_unspecified()
                        || local.ip().is_unspecified())
            })
    }

    fn ephemeral(&mut self, ip: IpAddr) -> Option<u16> {
        let span = usize::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        for _ in 0..span {
            let port = self.next_ephemeral;
            self.next_ephemeral = if port == *EPHEMERAL.end() {
                *EPHEMERAL.start()
            } else {
                port + 1
            };
            if !self.udp_in_use(SocketAddr::new(ip, port)) {
                return Some(port);
            }
        }
        None
    }

    /// The UDP socket of `handle`.
    ///
    /// # Panics
    /// When `handle` was removed or belongs to another set.
    pub fn udp(&self, handle: UdpHandle) -> &UdpSocket {
        self.udp[handle.0].as_ref().expect("stale UDP handle")
    }

    /// The UDP socket of `handle`, mutably.
    ///
    /// # Panics
    /// When `handle` was removed or belongs to another set.
    pub fn udp_mut(&mut self, handle: UdpHandle) -> &mut UdpSocket {
        self.udp[handle.0].as_mut().expect("stale UDP handle")
    }

    /// Removes and returns the UDP socket of `handle`; its slot may be reused.
    pub fn remove_udp(&mut self, handle: UdpHandle) -> Option<UdpSocket> {
        self.udp.get_mut(handle.0)?.take()
    }

    /// Adds an ICMP echo socket.
    ///
    /// # Errors
    /// [`AddError::Full`], or [`AddError::AddrInUse`] when another socket has the same
    /// echo identifier.
    pub fn add_icmp(&mut self, socket: IcmpSocket) -> Result<IcmpHandle, AddError> {
        if self
            .icmp
            .iter()
            .flatten()
            .any(|s| s.ident() == socket.ident())
        {
            return Err(AddError::AddrInUse);
        }
        let slot = free_slot(&self.icmp, self.icmp_limit).ok_or(AddError::Full)?;
        put(&mut self.icmp, slot, socket);
        Ok(IcmpHandle(slot))
    }

    /// The ICMP socket of `handle`.
    ///
    /// # Panics
    /// When `handle` was removed or belongs to another set.
    pub fn icmp(&self, handle: IcmpHandle) -> &IcmpSocket {
        self.icmp[handle.0].as_ref().expect("stale ICMP handle")
    }

    /// The ICMP socket of `handle`, mutably.
    ///
    /// # Panics
    /// When `handle` was removed or belongs to another set.
    pub fn icmp_mut(&mut self, handle: IcmpHandle) -> &mut IcmpSocket {
        self.icmp[handle.0].as_mut().expect("stale ICMP handle")
    }

    /// Removes and returns the ICMP socket of `handle`.
    pub fn remove_icmp(&mut self, handle: IcmpHandle) -> Option<IcmpSocket> {
        self.icmp.get_mut(handle.0)?.take()
    }

    /// The UDP socket a datagram to `dst` is for.
    pub(crate) fn udp_for(&mut self, dst: SocketAddr) -> Option<&mut UdpSocket> {
        // A socket bound to the exact address wins over a wildcard one.
        let mut wildcard = None;
        for (i, s) in self.udp.iter().enumerate() {
            if let Some(s) = s {
                if s.accepts(dst) {
                    if s.local_endpoint().is_some_and(|l| !l.ip().is_unspecified()) {
                        return self.udp[i].as_mut();
                    }
                    wildcard.get_or_insert(i);
                }
            }
        }
        wildcard.and_then(move |i| self.udp[i].as_mut())
    }

    /// The ICMP socket with echo identifier `ident`.
    pub(crate) fn icmp_for(&mut self, ident: u16) -> Option<&mut IcmpSocket> {
        self.icmp.iter_mut().flatten().find(|s| s.ident() == ident)
    }

    /// UDP sockets, mutably, for egress.
    pub(crate) fn udp_iter_mut(&mut self) -> impl Iterator<Item = &mut UdpSocket> + '_ {
        self.udp.iter_mut().flatten()
    }

    /// ICMP sockets, mutably, for egress.
    pub(crate) fn icmp_iter_mut(&mut self) -> impl Iterator<Item = &mut IcmpSocket> + '_ {
        self.icmp.iter_mut().flatten()
    }

    /// Whether any socket has something to send.
    pub fn has_tx(&self) -> bool {
        self.udp.iter().flatten().any(|s| s.tx_queued() > 0)
            || self.icmp.iter().flatten().any(|s| s.tx_queued() > 0)
    }
}

fn free_slot<T>(v: &[Option<T>], limit: usize) -> Option<usize> {
    match v.iter().position(Option::is_none) {
        Some(i) => Some(i),
        None if v.len() < limit => Some(v.len()),
        None => None,
    }
}

fn put<T>(v: &mut Vec<Option<T>>, slot: usize, item: T) {
    if slot == v.len() {
        v.push(Some(item));
    } else {
        v[slot] = Some(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::UdpConfig;

    fn bound(s: &str) -> UdpSocket {
        let mut u = UdpSocket::new(UdpConfig::default());
        u.bind(s.parse().unwrap()).unwrap();
        u
    }

    #[test]
    fn conflicts_ephemeral_and_limits() {
        let mut set = SocketSet::new(3, 1);
        let a = set.add_udp(bound("0.0.0.0:7")).unwrap();
        assert_eq!(
            set.add_udp(bound("198.18.0.1:7")).unwrap_err(),
            AddError::AddrInUse
        );
        let e = set.add_udp(UdpSocket::new(UdpConfig::default())).unwrap();
        assert_eq!(set.udp(e).local_endpoint().unwrap().port(), 49152);
        let b = set.add_udp(bound("198.18.0.1:8")).unwrap();
        assert_eq!(set.add_udp(bound("0.0.0.0:9")).unwrap_err(), AddError::Full);
        assert!(set.udp_for("198.18.0.1:7".parse().unwrap()).is_some());
        assert!(set.udp_for("198.18.0.2:8".parse().unwrap()).is_none());
        set.remove_udp(a).unwrap();
        assert!(set.udp_for("198.18.0.1:7".parse().unwrap()).is_none());
        let _ = b;
        set.add_icmp(IcmpSocket::new(1, 1, 64)).unwrap();
        assert_eq!(
            set.add_icmp(IcmpSocket::new(1, 1, 64)).unwrap_err(),
            AddError::AddrInUse
        );
        assert_eq!(
            set.add_icmp(IcmpSocket::new(2, 1, 64)).unwrap_err(),
            AddError::Full
        );
    }
}
