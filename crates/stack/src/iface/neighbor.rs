//! The neighbour cache: IP address → MAC address, learned from ARP and IPv6 Neighbor
//! Discovery, or set statically. IPv4 and IPv6 entries share the cache and its bound.
//!
//! Entries of both families follow RFC 4861 §7.3's Neighbor Unreachability Detection: a
//! reachable entry whose reachable time ran out becomes STALE (still used); the first
//! packet sent to a stale entry moves it to DELAY; if nothing confirms reachability within
//! `delay_first_probe` (DELAY_FIRST_PROBE_TIME, 5 s) it goes to PROBE and unicast
//! solicitations (IPv6) or ARP requests (IPv4) go to the cached MAC every retry interval,
//! `max_requests` times (MAX_UNICAST_SOLICIT), before the entry is removed. Confirmation
//! (an answer to a probe, or upper-layer forward progress, §7.3.1) makes it REACHABLE
//! again. For IPv4 this is RFC 1122 §2.3.2.1's "unicast poll" with "higher-layer
//! advice", as Linux runs ARP: an entry in use is never dropped only because its time
//! ran out. (The rule before, expire and ask again, parked a stream's segments behind a
//! broadcast request every `neighbor_ttl`: past the eight the queue holds per neighbour
//! they were dropped, and the connection recovered them by retransmission.)
//!
//! In: answers from the network ([`NeighborCache::fill`]), lookups from the output path
//! and `now`; out: the MAC to send to, and which addresses need an ARP request now or
//! have failed to resolve. Invariants: the cache never holds more than its capacity;
//! static entries never expire and are never evicted; an incomplete entry sends at most
//! one request per retry interval (RFC 1122 §2.3.2.1: no ARP flooding) and gives up
//! after the configured number of requests.

use alloc::vec::Vec;
use core::net::IpAddr;

use ulnet_wire::EthernetAddress;

use crate::time::{Duration, Instant};

/// What the cache knows about an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighborState {
    /// Configured by hand: never expires.
    Static(EthernetAddress),
    /// Learned; valid until `expires_at`.
    Reachable {
        /// The neighbour's MAC.
        mac: EthernetAddress,
        /// When the entry must be resolved again.
        expires_at: Instant,
    },
    /// RFC 4861 §7.3.2 STALE: the MAC is used, but reachability is not known; the next
    /// packet sent moves the entry to [`Delay`](Self::Delay).
    Stale {
        /// The neighbour's MAC.
        mac: EthernetAddress,
    },
    /// DELAY: a packet was sent to a stale entry; unless reachability is
    /// confirmed by `probe_at`, probing starts.
    Delay {
        /// The neighbour's MAC.
        mac: EthernetAddress,
        /// When to start probing.
        probe_at: Instant,
    },
    /// PROBE: unicast solicitations (ARP requests for IPv4) are being sent to `mac`.
    Probe {
        /// The neighbour's MAC (still used while probing).
        mac: EthernetAddress,
        /// Solicitations sent.
        probes: u8,
        /// When the next is due (or the entry is dropped).
        next_probe_at: Instant,
    },
    /// Being resolved: `requests` ARP requests (or multicast solicitations) sent so far,
    /// the next one due at `next_request_at`.
    Incomplete {
        /// Requests sent.
        requests: u8,
        /// When to send the next one (or give up).
        next_request_at: Instant,
    },
}

/// The result of [`NeighborCache::lookup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Send to this MAC.
    Found(EthernetAddress),
    /// Resolution is under way.
    Pending,
    /// Unknown (or expired): start resolving.
    Missing,
}

/// Why a static entry could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NeighborError {
    /// Every slot holds a static entry.
    Full,
    /// The MAC is a group address.
    BadMac,
}

impl core::fmt::Display for NeighborError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            NeighborError::Full => "neighbour cache full of static entries",
            NeighborError::BadMac => "neighbour MAC is a group address",
        })
    }
}

impl core::error::Error for NeighborError {}

#[derive(Debug, Clone, Copy)]
struct Entry {
    ip: IpAddr,
    state: NeighborState,
    /// Last time the entry was created or refreshed, for least-recently-learned eviction.
    touched: Instant,
}

/// What [`NeighborCache::poll`] asks the interface to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Send another ARP request for this address.
    Request(IpAddr),
    /// Resolution failed: drop what waits for this address.
    Failed(IpAddr),
    /// Send a unicast Neighbor Solicitation (IPv6) or ARP request (IPv4) to this
    /// neighbour at its cached MAC (RFC 4861 §7.3.3, PROBE).
    Probe(IpAddr, EthernetAddress),
}

/// A bounded neighbour cache. Lookups scan linearly: the cache holds tens of entries
/// and a scan of a small array beats hashing at that size.
#[derive(Debug, Clone)]
pub struct NeighborCache {
    entries: Vec<Entry>,
    capacity: usize,
    ttl: Duration,
    retry_interval: Duration,
    max_requests: u8,
    /// DELAY_FIRST_PROBE_TIME (RFC 4861 §10).
    delay_first_probe: Duration,
    /// The last confirmation by forward progress: which neighbour, and when (see
    /// [`confirmed_lately`](Self::confirmed_lately)).
    last_confirm: Option<(IpAddr, Instant)>,
}

impl NeighborCache {
    /// A cache of at most `capacity` entries; learned entries live `ttl`; unresolved
    /// addresses are asked for every `retry_interval`, `max_requests` times.
    pub fn new(capacity: usize, ttl: Duration, retry_interval: Duration, max_requests: u8) -> Self {
        NeighborCache {
            entries: Vec::with_capacity(capacity),
            capacity,
            ttl,
            retry_interval,
            max_requests: max_requests.max(1),
            delay_first_probe: Duration::from_secs(5),
            last_confirm: None,
        }
    }

    /// Sets DELAY_FIRST_PROBE_TIME (RFC 4861 §10: 5 s).
    pub fn set_delay_first_probe(&mut self, d: Duration) {
        self.delay_first_probe = d;
    }

    /// Entries held (of every state).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The maximum number of entries.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The state of `ip`'s entry, if any (expired entries included until swept).
    pub fn state(&self, ip: IpAddr) -> Option<NeighborState> {
        self.find(ip).map(|i| self.entries[i].state)
    }

    /// Every entry.
    pub fn iter(&self) -> impl Iterator<Item = (IpAddr, NeighborState)> + '_ {
        self.entries.iter().map(|e| (e.ip, e.state))
    }

    fn find(&self, ip: IpAddr) -> Option<usize> {
        self.entries.iter().position(|e| e.ip == ip)
    }

    /// Where to send a packet for `ip`: an entry in any state with a MAC is used (RFC 4861
    /// §7.3.3), a reachable one past its time included (it is stale). The time argument
    /// no longer changes the answer (it did while IPv4 entries expired); it stays for the
    /// callers that pass it.
    pub fn lookup(&self, ip: IpAddr, _now: Instant) -> Lookup {
        match self.find(ip).map(|i| self.entries[i].state) {
            Some(e) => state_lookup(e),
            None => Lookup::Missing,
        }
    }

    /// As [`lookup`](Self::lookup), for a packet about to be sent: a STALE entry (or a
    /// reachable one whose time ran out) moves to DELAY (RFC 4861 §7.3.3).
    pub(crate) fn lookup_for_send(&mut self, ip: IpAddr, now: Instant) -> Lookup {
        let Some(i) = self.find(ip) else {
            return Lookup::Missing;
        };
        let delay = self.delay_first_probe;
        let e = &mut self.entries[i];
        match e.state {
            NeighborState::Stale { mac } => {
                e.state = NeighborState::Delay {
                    mac,
                    probe_at: now + delay,
                };
            }
            NeighborState::Reachable { mac, expires_at } if expires_at <= now => {
                e.state = NeighborState::Delay {
                    mac,
                    probe_at: now + delay,
                };
            }
            _ => {}
        }
        state_lookup(e.state)
    }

    /// Whether `ip` was confirmed within the last eighth of the reachable time, so that
    /// a hint of forward progress may be skipped: its entry is still reachable (or was
    /// changed since by news of its own, which a later hint confirms in turn).
    pub(crate) fn confirmed_lately(&self, ip: IpAddr, now: Instant) -> bool {
        self.last_confirm
            .is_some_and(|(c, at)| c == ip && now < at + self.ttl / 8)
    }

    /// RFC 4861 §7.2.5 / §7.3.1: reachability of a neighbour was confirmed (a solicited
    /// advertisement, or forward progress of a connection through it). An
    /// entry with a MAC becomes REACHABLE for the reachable time; `mac`, when given,
    /// replaces the cached one. Returns whether an incomplete entry became resolved.
    pub(crate) fn confirm(
        &mut self,
        ip: IpAddr,
        mac: Option<EthernetAddress>,
        now: Instant,
    ) -> bool {
        let Some(i) = self.find(ip) else {
            return false;
        };
        let ttl = self.ttl;
        let e = &mut self.entries[i];
        let old = match e.state {
            NeighborState::Static(_) => return false,
            NeighborState::Incomplete { .. } => None,
            NeighborState::Reachable { mac, .. }
            | NeighborState::Stale { mac }
            | NeighborState::Delay { mac, .. }
            | NeighborState::Probe { mac, .. } => Some(mac),
        };
        let Some(mac) = mac.or(old) else {
            return false;
        };
        e.state = NeighborState::Reachable {
            mac,
            expires_at: now + ttl,
        };
        e.touched = now;
        self.last_confirm = Some((ip, now));
        old.is_none()
    }

    /// RFC 4861 §7.2.5: a REACHABLE entry becomes STALE (its MAC kept).
    pub(crate) fn demote(&mut self, ip: IpAddr) {
        if let Some(i) = self.find(ip) {
            if let NeighborState::Reachable { mac, .. } = self.entries[i].state {
                self.entries[i].state = NeighborState::Stale { mac };
            }
        }
    }

    /// RFC 4861 §7.2.3 / §7.2.5: the neighbour announced `mac` without confirming
    /// reachability (a solicitation's source link-layer address, an unsolicited or
    /// overriding advertisement, a router advertisement). A new entry is created STALE
    /// when `create`; an existing one becomes STALE if the MAC changed (or it was
    /// incomplete), else is left as is. Returns whether an incomplete entry became
    /// resolved.
    pub(crate) fn stale(
        &mut self,
        ip: IpAddr,
        mac: EthernetAddress,
        now: Instant,
        create: bool,
    ) -> bool {
        let i = match self.find(ip) {
            Some(i) => i,
            None if create => match self.slot(now) {
                Some(i) => i,
                None => return false,
            },
            None => return false,
        };
        let e = &mut self.entries[i];
        let fresh = e.ip != ip;
        let (was_incomplete, same) = match e.state {
            NeighborState::Static(_) if !fresh => return false,
            NeighborState::Incomplete { .. } => (!fresh, false),
            NeighborState::Reachable { mac: m, .. }
            | NeighborState::Stale { mac: m }
            | NeighborState::Delay { mac: m, .. }
            | NeighborState::Probe { mac: m, .. } => (false, !fresh && m == mac),
            NeighborState::Static(_) => (false, false),
        };
        if !same {
            *e = Entry {
                ip,
                state: NeighborState::Stale { mac },
                touched: now,
            };
        }
        was_incomplete
    }

    /// Adds or replaces a static entry.
    ///
    /// # Errors
    /// [`NeighborError::BadMac`] for a group MAC; [`NeighborError::Full`] when every
    /// slot is static.
    pub fn add_static(&mut self, ip: IpAddr, mac: EthernetAddress) -> Result<(), NeighborError> {
        if !mac.is_unicast() {
            return Err(NeighborError::BadMac);
        }
        let i = match self.find(ip) {
            Some(i) => i,
            None => self.slot(Instant::ZERO).ok_or(NeighborError::Full)?,
        };
        self.entries[i] = Entry {
            ip,
            state: NeighborState::Static(mac),
            touched: Instant::ZERO,
        };
        Ok(())
    }

    /// Removes `ip`'s entry; returns its state if there was one.
    pub fn remove(&mut self, ip: IpAddr) -> Option<NeighborState> {
        let i = self.find(ip)?;
        Some(self.entries.swap_remove(i).state)
    }

    /// Records that `ip` is at `mac` (an ARP answer or request from it). Static entries
    /// are kept. With `create` false only an existing entry is updated (RFC 826's merge
    /// step: unsolicited ARP only refreshes what we already track). Returns whether an
    /// incomplete entry became resolved, so that packets waiting for it can go.
    pub(crate) fn fill(
        &mut self,
        ip: IpAddr,
        mac: EthernetAddress,
        now: Instant,
        create: bool,
    ) -> bool {
        let i = match self.find(ip) {
            Some(i) => i,
            None if create => match self.slot(now) {
                Some(i) => i,
                None => return false,
            },
            None => return false,
        };
        let e = &mut self.entries[i];
        if matches!(e.state, NeighborState::Static(_)) && e.ip == ip {
            return false;
        }
        let was_incomplete = e.ip == ip && matches!(e.state, NeighborState::Incomplete { .. });
        *e = Entry {
            ip,
            state: NeighborState::Reachable {
                mac,
                expires_at: now + self.ttl,
            },
            touched: now,
        };
        was_incomplete
    }

    /// Starts resolving `ip`: creates an incomplete entry whose first request is due
    /// now. Returns false when the cache is full of entries that cannot be evicted (the
    /// caller drops and counts), true otherwise (also when resolution was already under
    /// way).
    pub(crate) fn start(&mut self, ip: IpAddr, now: Instant) -> bool {
        let i = match self.find(ip) {
            Some(i) => match self.entries[i].state {
                NeighborState::Reachable { .. } => i,
                _ => return true,
            },
            None => match self.slot(now) {
                Some(i) => i,
                None => return false,
            },
        };
        self.entries[i] = Entry {
            ip,
            state: NeighborState::Incomplete {
                requests: 0,
                next_request_at: now,
            },
            touched: now,
        };
        true
    }

    /// An index for a new entry: a free slot, else an expired learned entry, else the
    /// least recently learned one (never a static or incomplete entry, so resolution in
    /// progress is not starved by a flood of new addresses). Entries being checked (DELAY,
    /// PROBE) count as learned: they hold a MAC, and a host sending to more neighbours
    /// than the cache holds must not find every slot pinned for the seconds a check
    /// takes (the evicted one is resolved again when next used).
    fn slot(&mut self, now: Instant) -> Option<usize> {
        if self.entries.len() < self.capacity {
            self.entries.push(Entry {
                ip: IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED),
                state: NeighborState::Incomplete {
                    requests: 0,
                    next_request_at: now,
                },
                touched: now,
            });
            return Some(self.entries.len() - 1);
        }
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                matches!(
                    e.state,
                    NeighborState::Reachable { .. }
                        | NeighborState::Stale { .. }
                        | NeighborState::Delay { .. }
                        | NeighborState::Probe { .. }
                )
            })
            .min_by_key(|(_, e)| match e.state {
                NeighborState::Reachable { expires_at, .. } if expires_at <= now => Instant::ZERO,
                _ => e.touched,
            })
            .map(|(i, _)| i)
    }

    /// Runs the timers: due requests are counted and reported as
    /// [`Timer::Request`]; entries out of requests are removed and reported as
    /// [`Timer::Failed`]; expired learned entries are swept.
    #[cfg(test)]
    pub(crate) fn poll(&mut self, now: Instant, mut f: impl FnMut(Timer)) {
        self.poll_limited(now, &mut |t| {
            f(t);
            true
        });
    }

    /// As `poll`, stopping after the first report for which `f` returns false (the
    /// rest stays due for the next call).
    pub(crate) fn poll_limited(&mut self, now: Instant, f: &mut dyn FnMut(Timer) -> bool) {
        let mut i = 0;
        while i < self.entries.len() {
            let e = &mut self.entries[i];
            match e.state {
                NeighborState::Incomplete {
                    requests,
                    next_request_at,
                } if next_request_at <= now => {
                    if requests >= self.max_requests {
                        let ip = e.ip;
                        self.entries.swap_remove(i);
                        if !f(Timer::Failed(ip)) {
                            return;
                        }
                        continue;
                    }
                    e.state = NeighborState::Incomplete {
                        requests: requests + 1,
                        next_request_at: now + self.retry_interval,
                    };
                    if !f(Timer::Request(e.ip)) {
                        return;
                    }
                }
                NeighborState::Reachable { mac, expires_at } if expires_at <= now => {
                    // RFC 4861 §7.3.3: REACHABLE → STALE when ReachableTime passes.
                    e.state = NeighborState::Stale { mac };
                }
                NeighborState::Delay { mac, probe_at } if probe_at <= now => {
                    e.state = NeighborState::Probe {
                        mac,
                        probes: 1,
                        next_probe_at: now + self.retry_interval,
                    };
                    if !f(Timer::Probe(e.ip, mac)) {
                        return;
                    }
                }
                NeighborState::Probe {
                    mac,
                    probes,
                    next_probe_at,
                } if next_probe_at <= now => {
                    if probes >= self.max_requests {
                        // §7.3.3: no answer to MAX_UNICAST_SOLICIT probes: delete.
                        self.entries.swap_remove(i);
                        continue;
                    }
                    e.state = NeighborState::Probe {
                        mac,
                        probes: probes + 1,
                        next_probe_at: now + self.retry_interval,
                    };
                    if !f(Timer::Probe(e.ip, mac)) {
                        return;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// The earliest instant a timer fires: a request or give-up due, or an entry
    /// expiring.
    pub fn poll_at(&self) -> Option<Instant> {
        self.entries
            .iter()
            .filter_map(|e| match e.state {
                NeighborState::Incomplete {
                    next_request_at, ..
                } => Some(next_request_at),
                NeighborState::Reachable { expires_at, .. } => Some(expires_at),
                NeighborState::Delay { probe_at, .. } => Some(probe_at),
                NeighborState::Probe { next_probe_at, .. } => Some(next_probe_at),
                NeighborState::Static(_) | NeighborState::Stale { .. } => None,
            })
            .min()
    }
}

/// What a lookup answers for an entry in `state`.
fn state_lookup(state: NeighborState) -> Lookup {
    match state {
        NeighborState::Static(mac)
        | NeighborState::Reachable { mac, .. }
        | NeighborState::Stale { mac }
        | NeighborState::Delay { mac, .. }
        | NeighborState::Probe { mac, .. } => Lookup::Found(mac),
        NeighborState::Incomplete { .. } => Lookup::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 9]);

    fn ip(d: u8) -> IpAddr {
        IpAddr::V4(core::net::Ipv4Addr::new(198, 18, 0, d))
    }

    fn cache(n: usize) -> NeighborCache {
        NeighborCache::new(n, Duration::from_secs(30), Duration::from_secs(1), 3)
    }

    /// An IPv4 entry follows NUD as an IPv6 one does: past its time it is still used
    /// (stale), a packet sent to it starts the delay, then unicast probes to the cached
    /// MAC; unanswered, the entry goes and the next packet resolves afresh.
    #[test]
    fn ipv4_entries_go_stale_and_are_probed_before_they_go() {
        let mut c = cache(4);
        let t0 = Instant::from_secs(1);
        assert_eq!(c.lookup(ip(2), t0), Lookup::Missing);
        assert!(c.start(ip(2), t0));
        assert_eq!(c.lookup(ip(2), t0), Lookup::Pending);
        let mut asked = Vec::new();
        c.poll(t0, |t| asked.push(t));
        assert_eq!(asked, [Timer::Request(ip(2))]);
        // Rate limit: nothing more within the retry interval.
        asked.clear();
        c.poll(t0 + Duration::from_millis(999), |t| asked.push(t));
        assert!(asked.is_empty());
        assert!(c.fill(ip(2), MAC, t0, true));
        let t30 = t0 + Duration::from_secs(30);
        c.poll(t30, |t| asked.push(t));
        assert!(asked.is_empty());
        assert_eq!(c.state(ip(2)), Some(NeighborState::Stale { mac: MAC }));
        // Still used, and sending to it starts DELAY_FIRST_PROBE_TIME.
        assert_eq!(c.lookup_for_send(ip(2), t30), Lookup::Found(MAC));
        let probe_at = t30 + Duration::from_secs(5);
        assert_eq!(
            c.state(ip(2)),
            Some(NeighborState::Delay { mac: MAC, probe_at })
        );
        // Unconfirmed: three unicast probes a second apart, then the entry goes.
        for k in 0..4 {
            c.poll(probe_at + Duration::from_secs(k), |t| asked.push(t));
        }
        assert_eq!(asked, [Timer::Probe(ip(2), MAC); 3]);
        assert_eq!(c.lookup(ip(2), probe_at), Lookup::Missing);
        assert!(c.start(ip(2), probe_at));
        assert_eq!(c.lookup(ip(2), probe_at), Lookup::Pending);
    }

    /// A cache full of entries being checked still takes a new neighbour: the least
    /// recently learned is evicted.
    #[test]
    fn entries_being_checked_can_be_evicted() {
        let mut c = cache(2);
        let t0 = Instant::from_secs(1);
        c.fill(ip(2), MAC, t0, true);
        c.fill(ip(3), MAC, t0 + Duration::from_secs(1), true);
        let later = t0 + Duration::from_secs(40);
        let mut timers = Vec::new();
        c.poll(later, |t| timers.push(t));
        for d in [2, 3] {
            assert_eq!(c.lookup_for_send(ip(d), later), Lookup::Found(MAC));
        }
        assert!(matches!(c.state(ip(2)), Some(NeighborState::Delay { .. })));
        assert!(c.start(ip(4), later));
        assert_eq!(c.state(ip(2)), None);
        assert!(matches!(c.state(ip(3)), Some(NeighborState::Delay { .. })));
        assert_eq!(c.lookup(ip(4), later), Lookup::Pending);
    }

    /// Confirmation (an answer to a probe, or a connection's forward progress) ends
    /// DELAY or PROBE: reachable again for the whole time, no probe sent.
    #[test]
    fn ipv4_confirmation_ends_the_delay() {
        let mut c = cache(4);
        let t0 = Instant::from_secs(1);
        c.fill(ip(2), MAC, t0, true);
        let t31 = t0 + Duration::from_secs(31);
        assert_eq!(c.lookup_for_send(ip(2), t31), Lookup::Found(MAC));
        assert!(!c.confirm(ip(2), None, t31 + Duration::from_secs(1)));
        let mut asked = Vec::new();
        c.poll(t31 + Duration::from_secs(10), |t| asked.push(t));
        assert!(asked.is_empty(), "{asked:?}");
        assert_eq!(
            c.state(ip(2)),
            Some(NeighborState::Reachable {
                mac: MAC,
                expires_at: t31 + Duration::from_secs(31)
            })
        );
    }

    #[test]
    fn gives_up_after_max_requests() {
        let mut c = cache(4);
        assert!(c.start(ip(3), Instant::ZERO));
        let mut events = Vec::new();
        for s in 0..5 {
            c.poll(Instant::from_secs(s), |t| events.push(t));
        }
        assert_eq!(
            events,
            [
                Timer::Request(ip(3)),
                Timer::Request(ip(3)),
                Timer::Request(ip(3)),
                Timer::Failed(ip(3))
            ]
        );
        assert!(c.is_empty());
    }

    #[test]
    fn static_entries_survive_floods() {
        let mut c = cache(2);
        c.add_static(ip(1), MAC).unwrap();
        for d in 10..200 {
            c.fill(ip(d), MAC, Instant::from_secs(u64::from(d)), true);
        }
        assert_eq!(c.len(), 2);
        assert_eq!(
            c.lookup(ip(1), Instant::from_secs(1_000_000)),
            Lookup::Found(MAC)
        );
        // Learning never overrides a static entry.
        assert!(!c.fill(
            ip(1),
            EthernetAddress([2, 0, 0, 0, 0, 7]),
            Instant::ZERO,
            true
        ));
        assert_eq!(c.state(ip(1)), Some(NeighborState::Static(MAC)));
        c.add_static(ip(2), MAC).unwrap();
        assert_eq!(c.add_static(ip(3), MAC), Err(NeighborError::Full));
        assert!(!c.start(ip(4), Instant::ZERO));
        assert_eq!(
            c.add_static(ip(5), EthernetAddress::BROADCAST),
            Err(NeighborError::BadMac)
        );
    }

    fn ip6(d: u8) -> IpAddr {
        IpAddr::V6(core::net::Ipv6Addr::new(
            0xfe80,
            0,
            0,
            0,
            0,
            0,
            0,
            u16::from(d),
        ))
    }

    /// RFC 4861 §7.3.3: REACHABLE → STALE → (send) DELAY → PROBE ×3 → deleted, and a
    /// confirmation in DELAY or PROBE returns to REACHABLE.
    #[test]
    fn nud_state_machine() {
        let mut c = cache(4);
        let t0 = Instant::from_secs(1);
        assert!(c.start(ip6(2), t0));
        assert!(c.confirm(ip6(2), Some(MAC), t0));
        assert!(matches!(
            c.state(ip6(2)),
            Some(NeighborState::Reachable { .. })
        ));
        let t1 = t0 + Duration::from_secs(30);
        c.poll(t1, |_| {});
        assert_eq!(c.state(ip6(2)), Some(NeighborState::Stale { mac: MAC }));
        assert_eq!(c.lookup_for_send(ip6(2), t1), Lookup::Found(MAC));
        assert!(matches!(c.state(ip6(2)), Some(NeighborState::Delay { .. })));
        let mut probes = Vec::new();
        let t2 = t1 + Duration::from_secs(5);
        for s in 0..5 {
            c.poll(t2 + Duration::from_secs(s), |t| probes.push(t));
        }
        assert_eq!(probes, [Timer::Probe(ip6(2), MAC); 3]);
        assert_eq!(c.state(ip6(2)), None);
        // Confirmation while probing.
        assert!(c.start(ip6(3), t0));
        c.confirm(ip6(3), Some(MAC), t0);
        c.poll(t1, |_| {});
        c.lookup_for_send(ip6(3), t1);
        c.poll(t2, |_| {});
        assert!(matches!(c.state(ip6(3)), Some(NeighborState::Probe { .. })));
        assert!(!c.confirm(ip6(3), None, t2));
        assert!(matches!(
            c.state(ip6(3)),
            Some(NeighborState::Reachable { .. })
        ));
        // A changed MAC announced without confirmation: STALE with the new MAC.
        let other = EthernetAddress([2, 0, 0, 0, 0, 7]);
        c.stale(ip6(3), other, t2, false);
        assert_eq!(c.state(ip6(3)), Some(NeighborState::Stale { mac: other }));
    }

    #[test]
    fn unsolicited_only_updates() {
        let mut c = cache(4);
        assert!(!c.fill(ip(7), MAC, Instant::ZERO, false));
        assert!(c.is_empty());
    }
}
