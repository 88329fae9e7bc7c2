//! Ephemeral port selection (RFC 6056), for every protocol: TCP's `connect`, and the
//! socket set's UDP `bind(:0)` and TCP listeners on port 0 (through the interface).
//!
//! Read first: RFC 6056 §3.3.4 (Algorithm 4, "Double-Hash Port Selection").
//!
//! The port for a new outgoing connection is `min + (F(local, remote, key1) +
//! table[G(local, remote, key2)]) mod count`, trying successive values until one is free.
//! F makes the sequence of ports differ per destination, so an off-path attacker cannot
//! guess the port from ports seen to other destinations; the per-bucket counter in the
//! table makes successive connections to one destination use different ports, which
//! avoids reusing a 4-tuple still in TIME-WAIT at the peer. Memory is fixed: a table of
//! [`TABLE_LEN`] counters.

use core::hash::Hasher;
use core::net::{IpAddr, SocketAddr};
use core::ops::RangeInclusive;
use siphasher::sip::SipHasher24;

/// The IANA dynamic port range (RFC 6335 §6; RFC 6056 §3.2 allows any range above
/// 1023): where the socket set's ephemeral ports come from unless configured otherwise.
pub const DEFAULT_RANGE: RangeInclusive<u16> = 49152..=65535;

/// Feeds an address into a hash with its family, so that a v4 address and a v6 address
/// with the same bytes never collide (the same encoding as the TCP ISN generator's).
fn hash_ip(h: &mut SipHasher24, ip: IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            h.write_u8(4);
            h.write(&a.octets());
        }
        IpAddr::V6(a) => {
            h.write_u8(6);
            h.write(&a.octets());
        }
    }
}

/// Number of counters in the perturbation table (RFC 6056 §3.3.4 suggests a few hundred
/// to a few thousand; 256 keeps the allocator within a cache-friendly 512 bytes).
pub const TABLE_LEN: usize = 256;

/// Picks ephemeral ports for outgoing connections.
#[derive(Clone)]
pub struct EphemeralPorts {
    key: [u8; 16],
    min: u16,
    /// Number of ports in the range (0 when the range is empty).
    count: u32,
    table: [u16; TABLE_LEN],
}

impl core::fmt::Debug for EphemeralPorts {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EphemeralPorts")
            .field("min", &self.min)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl EphemeralPorts {
    /// An allocator over `range` (RFC 6056 §3.2 recommends 1024..=65535; Linux uses
    /// 32768..=60999), keyed with a secret `key`. An empty range allocates nothing.
    pub fn new(key: [u8; 16], range: RangeInclusive<u16>) -> Self {
        let (min, max) = (*range.start(), *range.end());
        let count = if max >= min {
            u32::from(max - min) + 1
        } else {
            0
        };
        EphemeralPorts {
            key,
            min,
            count,
            table: [0; TABLE_LEN],
        }
    }

    /// Number of ports in the range.
    pub fn range_len(&self) -> usize {
        self.count as usize
    }

    fn hash(&self, domain: u8, local_ip: IpAddr, remote: SocketAddr) -> u64 {
        let mut h = SipHasher24::new_with_key(&self.key);
        // Domain separation turns one key into RFC 6056's two independent keys.
        h.write_u8(domain);
        hash_ip(&mut h, local_ip);
        hash_ip(&mut h, remote.ip());
        h.write_u16(remote.port());
        h.finish()
    }

    /// A local port for a connection from `local_ip` to `remote`: the first port in the
    /// RFC 6056 Algorithm 4 sequence for which `in_use` is false, or `None` after trying
    /// every port in the range. `in_use(port)` should say whether
    /// `(local_ip, port, remote)` is taken (or the port at all, for a stricter policy).
    pub fn next(
        &mut self,
        local_ip: IpAddr,
        remote: SocketAddr,
        in_use: impl Fn(u16) -> bool,
    ) -> Option<u16> {
        if self.count == 0 {
            return None;
        }
        let offset = self.hash(1, local_ip, remote);
        let index = (self.hash(2, local_ip, remote) % TABLE_LEN as u64) as usize;
        for _ in 0..self.count {
            let step = u64::from(self.table[index]);
            self.table[index] = self.table[index].wrapping_add(1);
            let port = u64::from(self.min) + offset.wrapping_add(step) % u64::from(self.count);
            // Fits: min + (count - 1) == max <= u16::MAX.
            let port = port as u16;
            if !in_use(port) {
                return Some(port);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const KEY: [u8; 16] = [0x5a; 16];

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn stays_in_range_and_varies_per_connection() {
        let mut p = EphemeralPorts::new(KEY, 40000..=40099);
        let local: IpAddr = "198.18.0.1".parse().unwrap();
        let remote = sa("198.18.0.2:80");
        let mut seen = HashSet::new();
        for _ in 0..100 {
            let port = p.next(local, remote, |_| false).unwrap();
            assert!((40000..=40099).contains(&port));
            seen.insert(port);
        }
        // Successive connections to one destination walk the whole range.
        assert_eq!(seen.len(), 100);
    }

    #[test]
    fn skips_ports_in_use_and_reports_exhaustion() {
        let mut p = EphemeralPorts::new(KEY, 50000..=50009);
        let local: IpAddr = "198.18.0.1".parse().unwrap();
        let remote = sa("198.18.0.2:443");
        let port = p.next(local, remote, |x| x != 50007).unwrap();
        assert_eq!(port, 50007);
        assert_eq!(p.next(local, remote, |_| true), None);
        let (lo, hi) = (10u16, 9u16);
        let mut empty = EphemeralPorts::new(KEY, lo..=hi);
        assert_eq!(empty.range_len(), 0);
        assert_eq!(empty.next(local, remote, |_| false), None);
        let mut full = EphemeralPorts::new(KEY, 0..=u16::MAX);
        assert_eq!(full.range_len(), 65536);
        assert!(full.next(local, remote, |_| false).is_some());
        let mut one = EphemeralPorts::new(KEY, u16::MAX..=u16::MAX);
        assert_eq!(one.next(local, remote, |_| false), Some(u16::MAX));
    }

    #[test]
    fn destinations_get_unrelated_sequences() {
        let local: IpAddr = "198.18.0.1".parse().unwrap();
        let mut a = EphemeralPorts::new(KEY, 1024..=65535);
        let first: Vec<u16> = (0..8u16)
            .map(|i| {
                a.next(
                    local,
                    SocketAddr::new("198.18.0.2".parse().unwrap(), 1000 + i),
                    |_| false,
                )
                .unwrap()
            })
            .collect();
        // Eight destinations, eight different starting points (collisions are possible
        // but not for this fixed key).
        let distinct: HashSet<_> = first.iter().collect();
        assert_eq!(distinct.len(), 8, "{first:?}");
        // Another key, another sequence.
        let mut b = EphemeralPorts::new([1; 16], 1024..=65535);
        let remote = SocketAddr::new("198.18.0.2".parse().unwrap(), 1000);
        assert_ne!(b.next(local, remote, |_| false), Some(first[0]));
    }
}
