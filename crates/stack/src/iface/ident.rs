//! The IPv4 identification field of datagrams we originate (RFC 791 §3.2, RFC 6864,
//! RFC 7739).
//!
//! Read first: RFC 6864 §4 (the ID only needs to be unique per source, destination and
//! protocol within a maximum datagram lifetime), RFC 7739 §3 and §5 (why a global
//! counter is a side channel: it leaks our packet rate and makes us an idle-scan zombie,
//! and the hash-based selection algorithm).
//!
//! The algorithm is Linux's `ip_idents` (RFC 7739's hash-based one): a keyed hash of
//! (source, destination, protocol) picks one of [`BUCKETS`] counters, which start at
//! secret offsets; a datagram takes the next value of its bucket, plus a per-flow secret
//! offset. Flows that share no bucket see unrelated sequences; flows that do (a pair in
//! 2048) would see each other's traffic advance the counter, so, as Linux does, a bucket
//! idle for `t` milliseconds first jumps by a secret pseudo-random amount below `t`.
//! Memory is fixed: 2048 × 6 bytes.
//!
//! The secret is the interface's ([`Interface::set_secret`](super::Interface::set_secret));
//! the engine reads no OS randomness, so the jumps come from a keyed hash of the bucket
//! and the time, which an off-path observer cannot compute.

use alloc::vec;
use alloc::vec::Vec;
use core::hash::Hasher;
use core::net::Ipv4Addr;

use siphasher::sip::SipHasher13;

use crate::time::Instant;

/// Counters in the table (Linux's `IP_IDENTS_SZ`).
pub(crate) const BUCKETS: usize = 2048;

/// Per-destination identification counters.
pub(crate) struct IpIdents {
    k0: u64,
    k1: u64,
    counters: Vec<u16>,
    /// When each bucket was last used, in milliseconds (wrapping).
    stamps: Vec<u32>,
    /// The last flow's key and hash: a stack mostly talks to one peer at a time, and the
    /// keyed hash was a quarter of the cost of sending a small segment.
    last: Option<((Ipv4Addr, Ipv4Addr, u8), u64)>,
}

impl core::fmt::Debug for IpIdents {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The keys and counters are secrets.
        f.debug_struct("IpIdents").finish_non_exhaustive()
    }
}

impl IpIdents {
    /// A table keyed with `secret`, counters at secret starting points.
    pub(crate) fn new(secret: &[u8; 16]) -> Self {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&secret[..8]);
        b.copy_from_slice(&secret[8..]);
        let mut t = IpIdents {
            // A domain label of its own, so no other keyed hash of the secret matches.
            k0: u64::from_le_bytes(a) ^ 0x1d1d_1d1d_0000_0001,
            k1: u64::from_le_bytes(b).rotate_left(41),
            counters: vec![0; BUCKETS],
            stamps: vec![0; BUCKETS],
            last: None,
        };
        for i in 0..BUCKETS {
            t.counters[i] = t.prf(0, i as u64) as u16;
        }
        t
    }

    fn prf(&self, domain: u8, v: u64) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write_u8(domain);
        h.write_u64(v);
        h.finish()
    }

    /// The identification for the next datagram from `src` to `dst` carrying `protocol`.
    pub(crate) fn next(&mut self, now: Instant, src: Ipv4Addr, dst: Ipv4Addr, protocol: u8) -> u16 {
        self.next_run(now, src, dst, protocol, 1)
    }

    /// The first of `n` consecutive IDs, for a TCP burst whose segments the channel
    /// numbers from it (Linux's GSO increments the ID per segment): the next datagram of
    /// the flow gets an ID past all of them, so consecutive bursts never repeat one.
    pub(crate) fn next_run(
        &mut self,
        now: Instant,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: u8,
        n: u16,
    ) -> u16 {
        let key = (src, dst, protocol);
        let flow = match self.last {
            Some((k, flow)) if k == key => flow,
            _ => {
                let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
                h.write_u8(1);
                h.write(&src.octets());
                h.write(&dst.octets());
                h.write_u8(protocol);
                let flow = h.finish();
                self.last = Some((key, flow));
                flow
            }
        };
        let b = (flow % BUCKETS as u64) as usize;
        let ms = now.total_millis() as u32;
        let idle = ms.wrapping_sub(self.stamps[b]);
        let mut step: u16 = 1;
        if idle != 0 {
            self.stamps[b] = ms;
            let r = self.prf(2, (b as u64) << 32 | u64::from(ms));
            step = step.wrapping_add((r % u64::from(idle)) as u16);
        }
        self.counters[b] = self.counters[b].wrapping_add(step);
        let first = self.counters[b].wrapping_add((flow >> 32) as u16);
        self.counters[b] = self.counters[b].wrapping_add(n.saturating_sub(1));
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_ids_is_skipped_by_the_next_datagram() {
        let mut ids = IpIdents::new(&[7; 16]);
        let now = Instant::from_millis(5);
        let first = ids.next_run(now, US, A, 6, 44);
        let after = ids.next(now, US, A, 6);
        // Within one millisecond the step is 1: the next ID is right after the run.
        assert_eq!(after, first.wrapping_add(44));
    }

    const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    const US: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

    #[test]
    fn consecutive_within_a_millisecond_and_keyed() {
        let mut t = IpIdents::new(&[1; 16]);
        let now = Instant::from_secs(5);
        let first = t.next(now, US, A, 17);
        for k in 1..100u16 {
            assert_eq!(t.next(now, US, A, 17), first.wrapping_add(k));
        }
        let mut other = IpIdents::new(&[2; 16]);
        assert_ne!(other.next(now, US, A, 17), first);
    }

    #[test]
    fn idle_bucket_jumps_by_less_than_the_idle_time() {
        let mut t = IpIdents::new(&[1; 16]);
        let t0 = Instant::from_secs(5);
        let a = t.next(t0, US, A, 6);
        let b = t.next(t0 + crate::time::Duration::from_millis(10), US, A, 6);
        let gap = b.wrapping_sub(a);
        assert!((1..=10).contains(&gap), "gap {gap}");
    }

    #[test]
    fn the_last_flow_cache_changes_no_id() {
        const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
        let (mut cached, mut fresh) = (IpIdents::new(&[3; 16]), IpIdents::new(&[3; 16]));
        let mut now = Instant::from_secs(5);
        for (i, (dst, proto)) in [(A, 6), (A, 6), (B, 6), (A, 17), (A, 6), (B, 6), (B, 6)]
            .into_iter()
            .cycle()
            .take(50)
            .enumerate()
        {
            if i % 7 == 3 {
                now += crate::time::Duration::from_millis(3);
            }
            fresh.last = None;
            assert_eq!(
                cached.next(now, US, dst, proto),
                fresh.next(now, US, dst, proto),
                "datagram {i}"
            );
        }
    }
}
