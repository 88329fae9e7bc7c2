//! Connection lookup by 4-tuple in O(1): a hash map keyed with a secret (so remote hosts
//! cannot aim collisions at one bucket), bounded by `TcpConfig::max_connections`.
//!
//! Addresses are stored as 16 bytes (IPv4 as v4-mapped) plus a family tag, which keeps the
//! key small and lets one table hold both families.

use core::cell::Cell;
use core::hash::BuildHasher;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use hashbrown::HashMap;

use siphasher::sip::SipHasher13;

/// The connection identifier: local and remote address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FourTuple {
    local: [u8; 16],
    remote: [u8; 16],
    local_port: u16,
    remote_port: u16,
    v6: bool,
}

fn ip_bytes(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn bytes_ip(b: [u8; 16], v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(b))
    } else {
        IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15]))
    }
}

impl FourTuple {
    /// The tuple of a connection from `local` to `remote`. Mixed families never match a
    /// real connection; the caller rejects them before.
    pub(crate) fn new(local: SocketAddr, remote: SocketAddr) -> Self {
        FourTuple {
            local: ip_bytes(local.ip()),
            remote: ip_bytes(remote.ip()),
            local_port: local.port(),
            remote_port: remote.port(),
            v6: local.is_ipv6(),
        }
    }

    /// Our end.
    pub(crate) fn local(&self) -> SocketAddr {
        SocketAddr::new(bytes_ip(self.local, self.v6), self.local_port)
    }

    /// The peer's end.
    pub(crate) fn remote(&self) -> SocketAddr {
        SocketAddr::new(bytes_ip(self.remote, self.v6), self.remote_port)
    }
}

/// A keyed SipHash-1-3 builder: the key comes from the engine's secret, so bucket
/// placement is unpredictable to remote hosts (hash flooding) and reproducible in tests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyedState {
    k0: u64,
    k1: u64,
}

impl KeyedState {
    /// A builder keyed from a 16-byte secret and a domain label, so different uses of the
    /// same secret give unrelated hashes.
    pub(crate) fn new(secret: &[u8; 16], domain: u64) -> Self {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&secret[..8]);
        b.copy_from_slice(&secret[8..]);
        KeyedState {
            k0: u64::from_le_bytes(a) ^ domain.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            k1: u64::from_le_bytes(b).rotate_left(17) ^ domain,
        }
    }

    /// Hash of one value.
    pub(crate) fn hash<T: core::hash::Hash>(&self, v: &T) -> u64 {
        self.hash_one(v)
    }
}

impl BuildHasher for KeyedState {
    type Hasher = SipHasher13;
    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.k0, self.k1)
    }
}

/// 4-tuple → connection slot index.
///
/// The last hit is remembered: a receive batch is mostly one connection's segments (a bulk
/// flow fills a batch), and comparing 36 bytes is cheaper than the keyed SipHash a lookup
/// costs (3% of the receive core at MTU 1500 in docs/performance-log.md). The hash stays keyed
/// for every other lookup, so the cache gives an attacker no handle on the table.
#[derive(Debug)]
pub(crate) struct ConnTable {
    map: HashMap<FourTuple, u32, KeyedState>,
    limit: usize,
    last: Cell<Option<(FourTuple, u32)>>,
}

impl ConnTable {
    /// An empty table that holds at most `limit` connections.
    pub(crate) fn new(secret: &[u8; 16], limit: usize) -> Self {
        ConnTable {
            map: HashMap::with_hasher(KeyedState::new(secret, 1)),
            limit,
            last: Cell::new(None),
        }
    }

    /// The slot of the connection with this tuple.
    #[inline]
    pub(crate) fn get(&self, t: &FourTuple) -> Option<u32> {
        if let Some((last, slot)) = self.last.get() {
            if last == *t {
                return Some(slot);
            }
        }
        let slot = self.map.get(t).copied();
        if let Some(slot) = slot {
            self.last.set(Some((*t, slot)));
        }
        slot
    }

    /// True when no more connections fit.
    pub(crate) fn is_full(&self) -> bool {
        self.map.len() >= self.limit
    }

    /// Adds a connection; false when the tuple is taken or the table is full.
    pub(crate) fn insert(&mut self, t: FourTuple, slot: u32) -> bool {
        if self.is_full() || self.map.contains_key(&t) {
            return false;
        }
        self.map.insert(t, slot);
        true
    }

    /// Removes a connection, if present.
    pub(crate) fn remove(&mut self, t: &FourTuple) {
        self.map.remove(t);
        if self.last.get().is_some_and(|(last, _)| last == *t) {
            self.last.set(None);
        }
    }

    /// True when the tuple is in use.
    pub(crate) fn contains(&self, t: &FourTuple) -> bool {
        self.map.contains_key(t)
    }

    /// Gives back capacity a peak left behind: below a quarter of its capacity the map
    /// shrinks to twice its length (amortised: a refill pays one regrowth).
    pub(crate) fn shrink(&mut self) {
        let n = self.map.len();
        if self.map.capacity() > super::timewait::MIN_SHRINK && n < self.map.capacity() / 4 {
            self.map.shrink_to(2 * n);
        }
    }

    /// The map's capacity (tests of the shrinking).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.map.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn tuple_round_trips_both_families() {
        let t = FourTuple::new(sa("198.18.0.1:80"), sa("198.18.0.2:40000"));
        assert_eq!(t.local(), sa("198.18.0.1:80"));
        assert_eq!(t.remote(), sa("198.18.0.2:40000"));
        let t6 = FourTuple::new(sa("[2001:db8::1]:80"), sa("[::ffff:198.18.0.2]:1"));
        assert_eq!(t6.remote(), sa("[::ffff:198.18.0.2]:1"));
        // A v4 tuple and its v4-mapped v6 twin are different connections.
        let t4m = FourTuple::new(
            sa("[::ffff:198.18.0.1]:80"),
            sa("[::ffff:198.18.0.2]:40000"),
        );
        assert_ne!(t, t4m);
    }

    /// The remembered last hit never outlives its entry: a removed tuple is not found, and
    /// a tuple reused for another slot finds the new one.
    #[test]
    fn last_hit_cache_follows_removal_and_reuse() {
        let mut tab = ConnTable::new(&[7; 16], 4);
        let a = FourTuple::new(sa("198.18.0.1:80"), sa("198.18.0.2:1"));
        let b = FourTuple::new(sa("198.18.0.1:80"), sa("198.18.0.2:2"));
        assert!(tab.insert(a, 3));
        assert!(tab.insert(b, 1));
        assert_eq!(tab.get(&a), Some(3));
        assert_eq!(tab.get(&a), Some(3));
        assert_eq!(tab.get(&b), Some(1));
        tab.remove(&b);
        assert_eq!(tab.get(&b), None);
        assert!(tab.insert(b, 2));
        assert_eq!(tab.get(&b), Some(2));
        tab.remove(&b);
        assert_eq!(tab.get(&a), Some(3));
        assert_eq!(tab.get(&b), None);
    }

    #[test]
    fn table_is_bounded_and_exact() {
        let mut tab = ConnTable::new(&[7; 16], 2);
        let a = FourTuple::new(sa("198.18.0.1:80"), sa("198.18.0.2:1"));
        let b = FourTuple::new(sa("198.18.0.1:80"), sa("198.18.0.2:2"));
        let c = FourTuple::new(sa("198.18.0.1:80"), sa("198.18.0.2:3"));
        assert!(tab.insert(a, 0));
        assert!(!tab.insert(a, 5));
        assert!(tab.insert(b, 1));
        assert!(tab.is_full());
        assert!(!tab.insert(c, 2));
        assert_eq!(tab.get(&b), Some(1));
        tab.remove(&a);
        assert!(tab.insert(c, 2));
        assert!(!tab.contains(&a));
    }

    #[test]
    fn keyed_hash_depends_on_secret_and_domain() {
        let t = FourTuple::new(sa("198.18.0.1:80"), sa("198.18.0.2:1"));
        let h1 = KeyedState::new(&[1; 16], 1).hash(&t);
        assert_eq!(h1, KeyedState::new(&[1; 16], 1).hash(&t));
        assert_ne!(h1, KeyedState::new(&[2; 16], 1).hash(&t));
        assert_ne!(h1, KeyedState::new(&[1; 16], 2).hash(&t));
    }
}
