//! Initial sequence numbers (RFC 6528).
//!
//! Read first: RFC 6528 §3 (the algorithm), RFC 9293 §3.4.1 (why ISNs must not repeat
//! within a segment lifetime).
//!
//! ISN = M + F(localip, localport, remoteip, remoteport, secretkey), where M is a timer
//! ticking every 4 microseconds and F is SipHash-2-4 keyed with a secret (RFC 6528 §3
//! asks for a PRF; SipHash is what Linux uses). The key comes from the caller: the
//! runtime draws it from the OS RNG once, tests use a fixed key. Within one 4-tuple the
//! ISN advances with time like RFC 793's clock; across 4-tuples it is unpredictable to an
//! off-path attacker.

use crate::time::Instant;
use core::hash::Hasher;
use core::net::{IpAddr, SocketAddr};
use siphasher::sip::SipHasher24;
use ulnet_wire::SeqNumber;

/// Feeds an address into a hash with its family, so that a v4 address and a v6 address
/// with the same bytes never collide.
pub(crate) fn hash_ip(h: &mut SipHasher24, ip: IpAddr) {
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

/// Generates RFC 6528 initial sequence numbers.
#[derive(Clone)]
pub struct IsnGenerator {
    key: [u8; 16],
}

impl core::fmt::Debug for IsnGenerator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The key is a secret; keep it out of logs.
        f.debug_struct("IsnGenerator").finish_non_exhaustive()
    }
}

impl IsnGenerator {
    /// A generator keyed with `key` (RFC 6528 §3 "secretkey"): 128 random bits, drawn
    /// once per boot (or per stack instance).
    pub fn new(key: [u8; 16]) -> Self {
        IsnGenerator { key }
    }

    /// The ISN for a connection from `local` to `remote` opened at `now`.
    pub fn generate(&self, now: Instant, local: SocketAddr, remote: SocketAddr) -> SeqNumber {
        let mut h = SipHasher24::new_with_key(&self.key);
        hash_ip(&mut h, local.ip());
        h.write_u16(local.port());
        hash_ip(&mut h, remote.ip());
        h.write_u16(remote.port());
        // F: 32 bits of the 64-bit PRF output.
        let f = h.finish() as u32;
        // M: the 4 µs timer of RFC 6528 §3 (RFC 793's clock), modulo 2^32.
        let m = (now.total_micros() / 4) as u32;
        SeqNumber(m.wrapping_add(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 16] = *b"0123456789abcdef";

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn advances_with_the_4us_clock() {
        let g = IsnGenerator::new(KEY);
        let (l, r) = (sa("198.18.0.1:40000"), sa("198.18.0.2:80"));
        let t = Instant::from_secs(100);
        let a = g.generate(t, l, r);
        assert_eq!(g.generate(t, l, r), a);
        assert_eq!(
            g.generate(t + core::time::Duration::from_micros(4), l, r),
            a + 1
        );
        assert_eq!(
            g.generate(t + core::time::Duration::from_millis(1), l, r),
            a + 250
        );
        // 2^32 ticks of 4 µs is about 4.77 hours: the clock wraps and comes back.
        let wrap = Instant::from_micros(t.total_micros() + (1u64 << 32) * 4);
        assert_eq!(g.generate(wrap, l, r), a);
    }

    #[test]
    fn depends_on_every_input() {
        let g = IsnGenerator::new(KEY);
        let t = Instant::from_secs(1);
        let base = g.generate(t, sa("198.18.0.1:40000"), sa("198.18.0.2:80"));
        let others = [
            g.generate(t, sa("198.18.0.3:40000"), sa("198.18.0.2:80")),
            g.generate(t, sa("198.18.0.1:40001"), sa("198.18.0.2:80")),
            g.generate(t, sa("198.18.0.1:40000"), sa("198.18.0.4:80")),
            g.generate(t, sa("198.18.0.1:40000"), sa("198.18.0.2:81")),
            g.generate(
                t,
                sa("[::ffff:198.18.0.1]:40000"),
                sa("[::ffff:198.18.0.2]:80"),
            ),
            IsnGenerator::new([7; 16]).generate(t, sa("198.18.0.1:40000"), sa("198.18.0.2:80")),
        ];
        for o in others {
            assert_ne!(o, base);
        }
        // Swapping the ends gives an unrelated number, not a mirror.
        let swapped = g.generate(t, sa("198.18.0.2:80"), sa("198.18.0.1:40000"));
        assert_ne!(swapped, base);
    }

    #[test]
    fn debug_hides_key() {
        let s = format!("{:?}", IsnGenerator::new(KEY));
        assert!(!s.contains("48") && !s.contains("0123"), "{s}");
    }
}
