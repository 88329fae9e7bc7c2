//! The socket set: the sockets an interface serves, found by generation-checked handle,
//! demultiplexed in O(1), with readiness events and engine-chosen ephemeral ports.
//!
//! In: sockets the application adds (bound, or to be given an ephemeral port), datagrams
//! and echo replies the interface delivers, and transmissions the interface takes. Out:
//! [`Event`]s saying a socket's readiness may have changed (a datagram or reply arrived,
//! room was freed), drained with [`SocketSet::poll_event`].
//!
//! Invariants: at most the configured number of sockets of each kind; no two UDP
//! sockets bound to overlapping endpoints (same port, and the same address or either
//! unspecified); every UDP socket in the set is bound and listed in `udp_bound` under its
//! endpoint, and `udp_ports` counts the sockets per port; every ICMP socket is listed in
//! `icmp_idents`; the event queue holds each slot at most once, so it never outgrows the
//! socket limits and never allocates after creation. The maps are keyed with a SipHash
//! key from the engine's secret ([`SocketSet::set_secret`]), so remote hosts cannot aim
//! collisions at one bucket; the engine reads no OS randomness itself.

use alloc::collections::VecDeque;
use core::fmt;
use core::hash::BuildHasher;
use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use core::ops::RangeInclusive;

use hashbrown::HashMap;
use siphasher::sip::SipHasher13;

use super::slots::{Handle, Slots};
use super::{IcmpSocket, UdpSocket};
use crate::ports::{EphemeralPorts, DEFAULT_RANGE};

/// Refers to a UDP socket in a [`SocketSet`]; stale once the socket is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UdpHandle(Handle);

/// Refers to an ICMP echo socket in a [`SocketSet`]; stale once the socket is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IcmpHandle(Handle);

/// A socket's readiness may have changed: a datagram (or echo reply) arrived, or a
/// queued one left and freed room. Query the socket for the details. Each socket is
/// queued at most once until the event is taken; an event for a socket removed since is
/// not returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// A UDP socket's readiness may have changed.
    Udp(UdpHandle),
    /// An ICMP echo socket's readiness may have changed.
    Icmp(IcmpHandle),
}

/// The handle names no socket of this set: the socket was removed (and its slot perhaps
/// reused), or the handle is of another set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidHandle;

impl fmt::Display for InvalidHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stale or foreign socket handle")
    }
}

impl core::error::Error for InvalidHandle {}

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

/// Why [`SocketSet::set_udp_v6only`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum V6OnlyError {
    /// The handle is stale.
    InvalidHandle,
    /// Taking IPv4 too would overlap a socket bound to `0.0.0.0` or an IPv4 address
    /// on the same port.
    AddrInUse,
}

impl fmt::Display for V6OnlyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            V6OnlyError::InvalidHandle => "invalid socket handle",
            V6OnlyError::AddrInUse => "address in use",
        })
    }
}

impl core::error::Error for V6OnlyError {}

/// A keyed SipHash-1-3 builder for the demux maps.
#[derive(Debug, Clone, Copy)]
struct Keyed {
    k0: u64,
    k1: u64,
}

impl Keyed {
    /// Keys from `secret`, separated by `domain` so each map hashes differently.
    fn new(secret: &[u8; 16], domain: u64) -> Keyed {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&secret[..8]);
        b.copy_from_slice(&secret[8..]);
        Keyed {
            k0: u64::from_le_bytes(a) ^ domain.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            k1: u64::from_le_bytes(b).rotate_left(29) ^ domain,
        }
    }
}

impl BuildHasher for Keyed {
    type Hasher = SipHasher13;
    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.k0, self.k1)
    }
}

/// A slot waiting in the event queue.
#[derive(Debug, Clone, Copy)]
enum Queued {
    Udp(u32),
    Icmp(u32),
}

/// The remote endpoint RFC 6056's hash is fed for a port not tied to one peer (a UDP
/// `bind(:0)`, a listener): the per-bucket counter then walks the range from a secret
/// starting point.
const ANY_REMOTE: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// The sockets of one interface.
#[derive(Debug, Clone)]
pub struct SocketSet {
    udp: Slots<UdpSocket>,
    icmp: Slots<IcmpSocket>,
    /// Bound endpoint → UDP slot.
    udp_bound: HashMap<SocketAddr, u32, Keyed>,
    /// Port → number of UDP sockets bound to it, IPv4 and IPv6 (any address).
    udp_ports: HashMap<u16, [u32; 2], Keyed>,
    /// Echo identifier → ICMP slot.
    icmp_idents: HashMap<u16, u32, Keyed>,
    events: VecDeque<Queued>,
    ports: EphemeralPorts,
    secret: [u8; 16],
    range: RangeInclusive<u16>,
    udp_limit: usize,
    icmp_limit: usize,
}

impl SocketSet {
    /// An empty set of at most `udp_count` UDP and `icmp_count` ICMP sockets, keyed with
    /// an all-zero secret until [`set_secret`](Self::set_secret) gives it one.
    pub fn new(udp_count: usize, icmp_count: usize) -> SocketSet {
        SocketSet::with_secret(udp_count, icmp_count, [0; 16])
    }

    /// An empty set keyed with `secret` (16 random bytes: demux placement and the
    /// ephemeral port sequence, RFC 6056 §3.3.4, derive from it).
    pub fn with_secret(udp_count: usize, icmp_count: usize, secret: [u8; 16]) -> SocketSet {
        SocketSet {
            udp: Slots::new(udp_count),
            icmp: Slots::new(icmp_count),
            udp_bound: HashMap::with_capacity_and_hasher(udp_count, Keyed::new(&secret, 1)),
            udp_ports: HashMap::with_capacity_and_hasher(udp_count, Keyed::new(&secret, 2)),
            icmp_idents: HashMap::with_capacity_and_hasher(icmp_count, Keyed::new(&secret, 3)),
            events: VecDeque::with_capacity(udp_count + icmp_count),
            ports: EphemeralPorts::new(secret, DEFAULT_RANGE),
            secret,
            range: DEFAULT_RANGE,
            udp_limit: udp_count,
            icmp_limit: icmp_count,
        }
    }

    /// Rekeys the set with `secret` (see [`with_secret`](Self::with_secret)); the
    /// sockets stay, the ephemeral port sequence starts afresh.
    pub fn set_secret(&mut self, secret: [u8; 16]) {
        self.secret = secret;
        self.rebuild();
    }

    /// The range ephemeral ports come from (default [`DEFAULT_RANGE`], the IANA dynamic
    /// range); an empty range makes every `bind(:0)` fail with [`AddError::NoPorts`].
    pub fn set_ephemeral_range(&mut self, range: RangeInclusive<u16>) {
        self.range = range;
        self.ports = EphemeralPorts::new(self.secret, self.range.clone());
    }

    fn rebuild(&mut self) {
        let s = &self.secret;
        let mut bound = HashMap::with_capacity_and_hasher(self.udp_limit, Keyed::new(s, 1));
        bound.extend(self.udp_bound.drain());
        let mut ports = HashMap::with_capacity_and_hasher(self.udp_limit, Keyed::new(s, 2));
        ports.extend(self.udp_ports.drain());
        let mut idents = HashMap::with_capacity_and_hasher(self.icmp_limit, Keyed::new(s, 3));
        idents.extend(self.icmp_idents.drain());
        self.udp_bound = bound;
        self.udp_ports = ports;
        self.icmp_idents = idents;
        self.ports = EphemeralPorts::new(self.secret, self.range.clone());
    }

    /// Adds a UDP socket. An unbound socket, or one bound to port 0, gets an ephemeral
    /// port chosen here by RFC 6056 Algorithm 4, not by the caller.
    ///
    /// # Errors
    /// [`AddError::Full`], [`AddError::AddrInUse`] or [`AddError::NoPorts`].
    pub fn add_udp(&mut self, mut socket: UdpSocket) -> Result<UdpHandle, AddError> {
        if !self.udp.has_room() {
            return Err(AddError::Full);
        }
        let mut local = socket.local_endpoint().unwrap_or(ANY_REMOTE);
        let v6only = socket.v6only();
        if local.port() == 0 {
            let port = self
                .ephemeral(local.ip(), v6only)
                .ok_or(AddError::NoPorts)?;
            local.set_port(port);
        } else if self.udp_in_use(local, v6only) {
            return Err(AddError::AddrInUse);
        }
        socket.set_local(local);
        let h = self.udp.insert(socket).ok_or(AddError::Full)?;
        self.udp_bound.insert(local, h.index);
        self.udp_ports.entry(local.port()).or_insert([0; 2])[family(local)] += 1;
        Ok(UdpHandle(h))
    }

    fn udp_in_use(&self, local: SocketAddr, v6only: bool) -> bool {
        udp_in_use(&self.udp_bound, &self.udp_ports, &self.udp, local, v6only)
    }

    /// An ephemeral port free for `ip` (RFC 6056 §3.3.4).
    fn ephemeral(&mut self, ip: IpAddr, v6only: bool) -> Option<u16> {
        let (bound, ports, slots) = (&self.udp_bound, &self.udp_ports, &self.udp);
        self.ports.next(ip, ANY_REMOTE, |port| {
            udp_in_use(bound, ports, slots, SocketAddr::new(ip, port), v6only)
        })
    }

    /// Makes the UDP socket of `handle`, if bound to `[::]`, take IPv6 only (`on`) or
    /// IPv4 too, as `IPV6_V6ONLY` (RFC 3493 §5.3).
    ///
    /// # Errors
    /// [`V6OnlyError::InvalidHandle`] for a stale handle; [`V6OnlyError::AddrInUse`]
    /// turning it off while another socket is bound to IPv4 on the port (Linux refuses
    /// that overlap at `bind(2)`).
    pub fn set_udp_v6only(&mut self, handle: UdpHandle, on: bool) -> Result<(), V6OnlyError> {
        let s = self.udp.get(handle.0).ok_or(V6OnlyError::InvalidHandle)?;
        let local = s.local_endpoint().unwrap_or(ANY_REMOTE);
        let v4_on_port = self.udp_ports.get(&local.port()).is_some_and(|n| n[0] > 0);
        if !on && local.is_ipv6() && local.ip().is_unspecified() && v4_on_port {
            return Err(V6OnlyError::AddrInUse);
        }
        if let Some(s) = self.udp.get_mut(handle.0) {
            s.set_v6only(on);
        }
        Ok(())
    }

    /// An ephemeral port for a listener or other socket on `ip` that the set does not
    /// hold itself (TCP listeners bound to port 0), the first of the RFC 6056 sequence
    /// for which `in_use` is false; `None` when the range is exhausted.
    pub fn ephemeral_port(&mut self, ip: IpAddr, in_use: impl Fn(u16) -> bool) -> Option<u16> {
        self.ports.next(ip, ANY_REMOTE, in_use)
    }

    /// Number of ports in the ephemeral range.
    pub fn ephemeral_range_len(&self) -> usize {
        self.ports.range_len()
    }

    /// The UDP socket of `handle`.
    ///
    /// # Errors
    /// [`InvalidHandle`] when `handle` was removed or belongs to another set.
    pub fn udp(&self, handle: UdpHandle) -> Result<&UdpSocket, InvalidHandle> {
        self.udp.get(handle.0).ok_or(InvalidHandle)
    }

    /// The UDP socket of `handle`, mutably.
    ///
    /// # Errors
    /// [`InvalidHandle`] when `handle` was removed or belongs to another set.
    pub fn udp_mut(&mut self, handle: UdpHandle) -> Result<&mut UdpSocket, InvalidHandle> {
        self.udp.get_mut(handle.0).ok_or(InvalidHandle)
    }

    /// Removes and returns the UDP socket of `handle`; its slot may be reused, and
    /// `handle` stays stale for good.
    ///
    /// # Errors
    /// [`InvalidHandle`] when `handle` was removed already or belongs to another set.
    pub fn remove_udp(&mut self, handle: UdpHandle) -> Result<UdpSocket, InvalidHandle> {
        let s = self.udp.remove(handle.0).ok_or(InvalidHandle)?;
        if let Some(local) = s.local_endpoint() {
            self.udp_bound.remove(&local);
            if let Some(n) = self.udp_ports.get_mut(&local.port()) {
                n[family(local)] -= 1;
                if *n == [0; 2] {
                    self.udp_ports.remove(&local.port());
                }
            }
        }
        Ok(s)
    }

    /// Adds an ICMP echo socket.
    ///
    /// # Errors
    /// [`AddError::Full`], or [`AddError::AddrInUse`] when another socket has the same
    /// echo identifier.
    pub fn add_icmp(&mut self, socket: IcmpSocket) -> Result<IcmpHandle, AddError> {
        if self.icmp_idents.contains_key(&socket.ident()) {
            return Err(AddError::AddrInUse);
        }
        let ident = socket.ident();
        let h = self.icmp.insert(socket).ok_or(AddError::Full)?;
        self.icmp_idents.insert(ident, h.index);
        Ok(IcmpHandle(h))
    }

    /// The ICMP socket of `handle`.
    ///
    /// # Errors
    /// [`InvalidHandle`] when `handle` was removed or belongs to another set.
    pub fn icmp(&self, handle: IcmpHandle) -> Result<&IcmpSocket, InvalidHandle> {
        self.icmp.get(handle.0).ok_or(InvalidHandle)
    }

    /// The ICMP socket of `handle`, mutably.
    ///
    /// # Errors
    /// [`InvalidHandle`] when `handle` was removed or belongs to another set.
    pub fn icmp_mut(&mut self, handle: IcmpHandle) -> Result<&mut IcmpSocket, InvalidHandle> {
        self.icmp.get_mut(handle.0).ok_or(InvalidHandle)
    }

    /// Removes and returns the ICMP socket of `handle`.
    ///
    /// # Errors
    /// [`InvalidHandle`] when `handle` was removed already or belongs to another set.
    pub fn remove_icmp(&mut self, handle: IcmpHandle) -> Result<IcmpSocket, InvalidHandle> {
        let s = self.icmp.remove(handle.0).ok_or(InvalidHandle)?;
        self.icmp_idents.remove(&s.ident());
        Ok(s)
    }

    /// The slot of the UDP socket a datagram to `dst` is for: one bound to the exact
    /// address wins over a wildcard one.
    fn udp_slot_for(&self, dst: SocketAddr) -> Option<u32> {
        if let Some(&i) = self.udp_bound.get(&dst) {
            return Some(i);
        }
        let any = match dst {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED),
        };
        if let Some(&i) = self.udp_bound.get(&SocketAddr::new(any, dst.port())) {
            return Some(i);
        }
        // Dual stack as for TCP listeners (RFC 3493 §3.7, Linux bindv6only=0): an IPv4
        // datagram no IPv4 socket claims goes to a `[::]` socket on its port unless that
        // one is v6-only; a `0.0.0.0` socket never takes IPv6.
        if dst.is_ipv4() {
            let any6 = SocketAddr::new(IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED), dst.port());
            let i = *self.udp_bound.get(&any6)?;
            return self.udp.at(i).is_some_and(|s| !s.v6only()).then_some(i);
        }
        None
    }

    /// The UDP socket a datagram to `dst` is for.
    #[cfg(test)]
    pub(crate) fn udp_for(&mut self, dst: SocketAddr) -> Option<&mut UdpSocket> {
        let i = self.udp_slot_for(dst)?;
        self.udp.at_mut(i)
    }

    /// Hands a datagram to `dst` to its socket. `None`: no socket is bound there;
    /// `Some(false)`: the socket's buffer was full (dropped and counted by the socket).
    pub(crate) fn deliver_udp(
        &mut self,
        dst: SocketAddr,
        meta: super::UdpMetadata,
        payload: &[u8],
    ) -> Option<bool> {
        let i = self.udp_slot_for(dst)?;
        let s = self.udp.at_mut(i)?;
        debug_assert!(s.accepts(dst));
        stage_hook!(rx_mark RxUdp);
        let delivered = s.deliver(meta, payload);
        if delivered {
            stage_hook!(rx_delivered(dst.port(), s.rx_queued() == 1));
            self.queue(Queued::Udp(i));
        }
        Some(delivered)
    }

    /// An ICMP error quoted a UDP datagram from `local` to `remote`: the socket bound to
    /// `local` records it if it is connected to `remote`, and gets an event so a blocked
    /// receive wakes to report it. Returns whether a socket took it.
    pub(crate) fn udp_icmp_error(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        e: super::UdpError,
    ) -> bool {
        let Some(i) = self.udp_slot_for(local) else {
            return false;
        };
        let taken = self
            .udp
            .at_mut(i)
            .is_some_and(|s| s.icmp_error(local, remote, e));
        if taken {
            self.queue(Queued::Udp(i));
        }
        taken
    }

    /// Hands an echo reply to the socket of `ident`; `None` when there is none.
    pub(crate) fn deliver_icmp(
        &mut self,
        now: crate::time::Instant,
        ident: u16,
        src: IpAddr,
        seq_no: u16,
        data: &[u8],
    ) -> Option<bool> {
        let i = *self.icmp_idents.get(&ident)?;
        let delivered = self.icmp.at_mut(i)?.deliver(now, src, seq_no, data);
        if delivered {
            self.queue(Queued::Icmp(i));
        }
        Some(delivered)
    }

    fn queue(&mut self, q: Queued) {
        let fresh = match q {
            Queued::Udp(i) => self.udp.mark_queued(i),
            Queued::Icmp(i) => self.icmp.mark_queued(i),
        };
        if fresh {
            self.events.push_back(q);
        }
    }

    /// Number of UDP slots, for egress to walk by index.
    pub(crate) fn udp_slot_count(&self) -> u32 {
        self.udp.slot_count() as u32
    }

    /// The UDP socket in slot `i`, for egress.
    pub(crate) fn udp_at_mut(&mut self, i: u32) -> Option<&mut UdpSocket> {
        self.udp.at_mut(i)
    }

    /// Egress took datagrams from UDP slot `i`: its buffer has room again.
    pub(crate) fn udp_sent(&mut self, i: u32) {
        self.queue(Queued::Udp(i));
    }

    /// Number of ICMP slots, for egress to walk by index.
    pub(crate) fn icmp_slot_count(&self) -> u32 {
        self.icmp.slot_count() as u32
    }

    /// The ICMP socket in slot `i`, for egress.
    pub(crate) fn icmp_at_mut(&mut self, i: u32) -> Option<&mut IcmpSocket> {
        self.icmp.at_mut(i)
    }

    /// Egress took requests from ICMP slot `i`.
    pub(crate) fn icmp_sent(&mut self, i: u32) {
        self.queue(Queued::Icmp(i));
    }

    /// The next readiness event, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        while let Some(q) = self.events.pop_front() {
            let ev = match q {
                Queued::Udp(i) => {
                    self.udp.unmark_queued(i);
                    self.udp.handle_at(i).map(|h| Event::Udp(UdpHandle(h)))
                }
                Queued::Icmp(i) => {
                    self.icmp.unmark_queued(i);
                    self.icmp.handle_at(i).map(|h| Event::Icmp(IcmpHandle(h)))
                }
            };
            if ev.is_some() {
                return ev;
            }
        }
        None
    }

    /// Whether events wait to be taken.
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The UDP sockets with their handles.
    pub fn udp_sockets(&self) -> impl Iterator<Item = (UdpHandle, &UdpSocket)> + '_ {
        self.udp.iter_handles().map(|(h, s)| (UdpHandle(h), s))
    }

    /// Whether any socket has something to send.
    pub fn has_tx(&self) -> bool {
        self.udp.iter().any(|s| s.tx_queued() > 0) || self.icmp.iter().any(|s| s.tx_queued() > 0)
    }
}

/// Index of `a`'s family in the per-port counts.
fn family(a: SocketAddr) -> usize {
    usize::from(a.is_ipv6())
}

/// Whether binding `local` (a `[::]` one v6-only or not) would overlap a bound socket,
/// as Linux decides for UDP without SO_REUSEADDR: the addresses a socket receives on
/// overlap on the same port. `0.0.0.0` covers every IPv4 address, `[::]` every IPv6 one
/// and, unless v6-only, every IPv4 one too (RFC 3493 §3.7 and §5.3).
fn udp_in_use(
    bound: &HashMap<SocketAddr, u32, Keyed>,
    ports: &HashMap<u16, [u32; 2], Keyed>,
    slots: &Slots<UdpSocket>,
    local: SocketAddr,
    v6only: bool,
) -> bool {
    let port = local.port();
    let [v4, v6] = ports.get(&port).copied().unwrap_or([0; 2]);
    let any4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
    let any6 = SocketAddr::new(IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED), port);
    let dual_any6 = || {
        bound
            .get(&any6)
            .and_then(|&i| slots.at(i))
            .is_some_and(|s| !s.v6only())
    };
    match (local.ip(), local.ip().is_unspecified()) {
        (IpAddr::V4(_), true) => v4 > 0 || dual_any6(),
        (IpAddr::V4(_), false) => {
            bound.contains_key(&local) || bound.contains_key(&any4) || dual_any6()
        }
        (IpAddr::V6(_), true) => v6 > 0 || (!v6only && v4 > 0),
        (IpAddr::V6(_), false) => bound.contains_key(&local) || bound.contains_key(&any6),
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
        // RFC 6056 picks from the dynamic range, not the range's first port.
        let port = set.udp(e).unwrap().local_endpoint().unwrap().port();
        assert!(DEFAULT_RANGE.contains(&port), "{port}");
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

    #[test]
    fn wildcards_overlap_across_families_as_on_linux() {
        // RFC 3493 §3.7 / §5.3 with Linux's bindv6only=0: `[::]:p` covers IPv4 on p
        // unless v6-only; `0.0.0.0:p` covers IPv4 only.
        let mut set = SocketSet::new(16, 1);
        let any6 = set.add_udp(bound("[::]:7")).unwrap();
        for a in ["0.0.0.0:7", "198.18.0.1:7", "[2001:2::1]:7", "[::]:7"] {
            assert_eq!(
                set.add_udp(bound(a)).unwrap_err(),
                AddError::AddrInUse,
                "{a}"
            );
        }
        set.set_udp_v6only(any6, true).unwrap();
        let v4 = set.add_udp(bound("0.0.0.0:7")).unwrap();
        assert_eq!(
            set.set_udp_v6only(any6, false).unwrap_err(),
            V6OnlyError::AddrInUse
        );
        // IPv4 to the v6-only wildcard's port goes to the IPv4 socket, IPv6 to it.
        let i4 = set.udp_slot_for("198.18.0.1:7".parse().unwrap());
        let i6 = set.udp_slot_for("[2001:2::1]:7".parse().unwrap());
        assert_eq!((i4, i6), (Some(v4.0.index), Some(any6.0.index)));
        set.remove_udp(v4).unwrap();
        assert_eq!(set.udp_slot_for("198.18.0.1:7".parse().unwrap()), None);
        set.set_udp_v6only(any6, false).unwrap();
        assert_eq!(
            set.udp_slot_for("198.18.0.1:7".parse().unwrap()),
            Some(any6.0.index)
        );
        // 0.0.0.0 first: [::] refused, an IPv6 address and a v6-only [::] are not.
        set.add_udp(bound("0.0.0.0:8")).unwrap();
        assert_eq!(
            set.add_udp(bound("[::]:8")).unwrap_err(),
            AddError::AddrInUse
        );
        set.add_udp(bound("[2001:2::1]:8")).unwrap();
        let mut only6 = bound("[::]:9");
        only6.set_v6only(true);
        set.add_udp(bound("0.0.0.0:9")).unwrap();
        set.add_udp(only6).unwrap();
        // An IPv4 wildcard datagram never reaches an IPv6 socket, nor the reverse.
        assert_eq!(set.udp_slot_for("[2001:2::1]:10".parse().unwrap()), None);
        set.add_udp(bound("0.0.0.0:10")).unwrap();
        assert_eq!(set.udp_slot_for("[2001:2::1]:10".parse().unwrap()), None);
    }

    #[test]
    fn stale_udp_handle_is_an_error_after_close_and_reuse() {
        let mut set = SocketSet::new(1, 1);
        let a = set.add_udp(bound("0.0.0.0:7")).unwrap();
        set.remove_udp(a).unwrap();
        assert_eq!(set.remove_udp(a).unwrap_err(), InvalidHandle);
        let b = set.add_udp(bound("0.0.0.0:8")).unwrap();
        // Same slot, new generation: the old handle reaches nothing.
        assert_ne!(a, b);
        assert_eq!(set.udp(a).unwrap_err(), InvalidHandle);
        assert!(set.udp_mut(a).is_err());
        assert_eq!(set.udp(b).unwrap().local_endpoint().unwrap().port(), 8);
        let i = set.add_icmp(IcmpSocket::new(1, 1, 64)).unwrap();
        set.remove_icmp(i).unwrap();
        let j = set.add_icmp(IcmpSocket::new(2, 1, 64)).unwrap();
        assert!(set.icmp(i).is_err() && set.icmp_mut(i).is_err());
        assert_eq!(set.icmp(j).unwrap().ident(), 2);
        // A handle of a bigger set is foreign here.
        let mut big = SocketSet::new(4, 0);
        for p in 1..4 {
            big.add_udp(bound(&format!("0.0.0.0:{p}"))).unwrap();
        }
        let far = big.add_udp(bound("0.0.0.0:9")).unwrap();
        assert_eq!(set.udp(far).unwrap_err(), InvalidHandle);
    }

    fn meta() -> crate::socket::UdpMetadata {
        crate::socket::UdpMetadata {
            peer: "198.18.0.9:1000".parse().unwrap(),
            local_addr: "198.18.0.1".parse().unwrap(),
        }
    }

    #[test]
    fn demux_with_many_sockets() {
        const N: u16 = 2000;
        let mut set = SocketSet::with_secret(usize::from(N) * 2, 0, [7; 16]);
        let cfg = UdpConfig {
            rx_datagram_count: 1,
            rx_len: 8,
            tx_datagram_count: 1,
            tx_len: 8,
        };
        let mut exact = Vec::new();
        let mut wild = Vec::new();
        for p in 0..N {
            let mut u = UdpSocket::new(cfg);
            u.bind(SocketAddr::new([198, 18, 0, 1].into(), 1000 + p))
                .unwrap();
            exact.push(set.add_udp(u).unwrap());
            let mut w = UdpSocket::new(cfg);
            w.bind(SocketAddr::new([0, 0, 0, 0].into(), 20000 + p))
                .unwrap();
            wild.push(set.add_udp(w).unwrap());
        }
        for p in (0..N).step_by(7) {
            let dst = SocketAddr::new([198, 18, 0, 1].into(), 1000 + p);
            assert_eq!(set.deliver_udp(dst, meta(), b"x"), Some(true));
            assert!(set.udp(exact[usize::from(p)]).unwrap().can_recv());
            // Another of our addresses reaches the wildcard socket only.
            let dst = SocketAddr::new([198, 18, 0, 2].into(), 20000 + p);
            assert_eq!(set.deliver_udp(dst, meta(), b"x"), Some(true));
            assert!(set.udp(wild[usize::from(p)]).unwrap().can_recv());
            let dst = SocketAddr::new([198, 18, 0, 2].into(), 1000 + p);
            assert_eq!(set.deliver_udp(dst, meta(), b"x"), None);
        }
        // Full buffer: delivered to the right socket, refused there.
        let dst = SocketAddr::new([198, 18, 0, 1].into(), 1000);
        assert_eq!(set.deliver_udp(dst, meta(), b"x"), Some(false));
        // Removal takes the endpoint out of the map; the port is free again.
        set.remove_udp(exact[0]).unwrap();
        assert_eq!(set.deliver_udp(dst, meta(), b"x"), None);
        assert!(!set.udp_in_use(dst, false));
        assert!(set.udp_in_use(SocketAddr::new([198, 18, 0, 3].into(), 20000), false));
        set.set_secret([9; 16]);
        let dst = SocketAddr::new([198, 18, 0, 1].into(), 1007);
        assert_eq!(set.deliver_udp(dst, meta(), b"y"), Some(false));
    }

    #[test]
    fn events_say_readable_and_writable_once_until_taken() {
        let mut set = SocketSet::new(2, 1);
        let a = set.add_udp(bound("0.0.0.0:7")).unwrap();
        let b = set.add_udp(bound("0.0.0.0:8")).unwrap();
        assert_eq!(set.poll_event(), None);
        let to = |p: u16| SocketAddr::new([198, 18, 0, 1].into(), p);
        set.deliver_udp(to(8), meta(), b"1");
        set.deliver_udp(to(7), meta(), b"2");
        set.deliver_udp(to(8), meta(), b"3");
        assert!(set.has_events());
        assert_eq!(set.poll_event(), Some(Event::Udp(b)));
        assert_eq!(set.poll_event(), Some(Event::Udp(a)));
        assert_eq!(set.poll_event(), None);
        // Egress freed room in `a`.
        set.udp_sent(a.0.index);
        assert_eq!(set.poll_event(), Some(Event::Udp(a)));
        // A removed socket's queued event is dropped; its successor's are its own.
        set.deliver_udp(to(8), meta(), b"4");
        set.remove_udp(b).unwrap();
        assert_eq!(set.poll_event(), None);
        let c = set.add_udp(bound("0.0.0.0:9")).unwrap();
        set.deliver_udp(to(9), meta(), b"5");
        assert_eq!(set.poll_event(), Some(Event::Udp(c)));
        let i = set.add_icmp(IcmpSocket::new(3, 1, 64)).unwrap();
        let src = "198.18.0.2".parse().unwrap();
        assert_eq!(
            set.deliver_icmp(crate::time::Instant::ZERO, 3, src, 1, b""),
            Some(true)
        );
        assert_eq!(
            set.deliver_icmp(crate::time::Instant::ZERO, 4, src, 1, b""),
            None
        );
        assert_eq!(set.poll_event(), Some(Event::Icmp(i)));
    }

    #[test]
    fn bind_port_zero_takes_an_rfc6056_port_chosen_by_the_engine() {
        let mut a = SocketSet::with_secret(64, 0, [1; 16]);
        let mut b = SocketSet::with_secret(64, 0, [2; 16]);
        let mut ports_a = Vec::new();
        let mut ports_b = Vec::new();
        for _ in 0..32 {
            let h = a.add_udp(bound("0.0.0.0:0")).unwrap();
            ports_a.push(a.udp(h).unwrap().local_endpoint().unwrap().port());
            let h = b.add_udp(UdpSocket::new(UdpConfig::default())).unwrap();
            ports_b.push(b.udp(h).unwrap().local_endpoint().unwrap().port());
        }
        assert!(ports_a.iter().all(|p| DEFAULT_RANGE.contains(p)));
        let distinct: std::collections::HashSet<_> = ports_a.iter().collect();
        assert_eq!(distinct.len(), 32);
        // The secret decides where the sequence starts: not the range's first port, and
        // not the same for two engines.
        assert_ne!(ports_a, ports_b);
        assert_ne!(ports_a[0], *DEFAULT_RANGE.start());
        // A port taken explicitly is never handed out.
        let mut c = SocketSet::with_secret(3, 0, [1; 16]);
        c.set_ephemeral_range(40000..=40001);
        c.add_udp(bound("198.18.0.1:40000")).unwrap();
        let h = c.add_udp(bound("198.18.0.1:0")).unwrap();
        assert_eq!(c.udp(h).unwrap().local_endpoint().unwrap().port(), 40001);
    }

    #[test]
    fn port_exhaustion_is_an_error() {
        let mut set = SocketSet::new(8, 0);
        set.set_ephemeral_range(50000..=50002);
        for _ in 0..3 {
            set.add_udp(bound("0.0.0.0:0")).unwrap();
        }
        assert_eq!(
            set.add_udp(bound("0.0.0.0:0")).unwrap_err(),
            AddError::NoPorts
        );
        assert_eq!(
            set.add_udp(bound("198.18.0.1:0")).unwrap_err(),
            AddError::NoPorts
        );
        // Explicit ports outside the range still bind.
        set.add_udp(bound("0.0.0.0:7")).unwrap();
        let (lo, hi) = (10u16, 9u16);
        set.set_ephemeral_range(lo..=hi);
        assert_eq!(
            set.add_udp(bound("0.0.0.0:0")).unwrap_err(),
            AddError::NoPorts
        );
    }
}
