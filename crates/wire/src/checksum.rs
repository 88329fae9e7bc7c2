//! The Internet checksum (RFC 1071): the 16-bit one's complement of the one's complement
//! sum of 16-bit words, with the TCP/UDP pseudo-header (RFC 9293 §3.1, RFC 768, RFC 8200
//! §8.1) and incremental update (RFC 1624).
//!
//! Convention (as in smoltcp): [`data`], [`pseudo_header`] and [`combine`] return the
//! *folded sum*, not yet complemented; the value written into a header is `!sum`, and a
//! received header verifies when the sum over it (checksum field included) is `0xffff`.

use core::net::IpAddr;

use crate::ip::IpProtocol;

/// What to do with transport and IPv4 header checksums.
///
/// Channels whose device verified the checksum on receive, or computes it on transmit,
/// select [`ChecksumMode::Offload`] or [`ChecksumMode::Partial`] so the data path does not
/// touch the payload twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ChecksumMode {
    /// Verify on parse (a bad checksum is [`crate::Error::Malformed`]); compute on emit.
    #[default]
    Full,
    /// Do not verify on parse; on emit write zero and let the device fill the field.
    Offload,
    /// Do not verify on parse; on emit write the pseudo-header sum only, the form that
    /// Linux `CHECKSUM_PARTIAL` and virtio `VIRTIO_NET_HDR_F_NEEDS_CSUM` expect (the
    /// device adds the segment and complements). For the IPv4 header, same as `Full`.
    Partial,
}

impl ChecksumMode {
    /// Whether parsing should verify checksums.
    #[inline]
    pub fn verify_rx(self) -> bool {
        matches!(self, ChecksumMode::Full)
    }
}

/// Folds a 64-bit accumulator of 16-bit words into a 16-bit one's complement sum.
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    // 2^16 ≡ 1 (mod 2^16 - 1), so adding the high part to the low part keeps the sum.
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// The one's complement sum of `data` read as big-endian 16-bit words; an odd final byte
/// is padded with a zero byte on the right (RFC 1071 §4.1).
///
/// Fast path: 64-bit words in native order, since the one's complement sum is byte-order
/// independent (RFC 1071 §2(B)); the result is swapped back once at the end. The words
/// go into two 128-bit accumulators, an add and an add-with-carry each, and 2^64 ≡ 1
/// (mod 2^16 - 1) lets the carries fold in at the end (RFC 1071 §2(C): deferred carries).
/// Splitting each word into 32-bit halves in 64-bit accumulators, as this did before, was
/// slower: `cargo bench -p ulnet-wire --bench checksum -- checksum/` 96 bytes 7.1 → 4.6
/// ns, 20 bytes 4.9 → 3.6, 1460 bytes 44.8 → 40.0 (four accumulators were slower again).
#[inline]
pub fn data(data: &[u8]) -> u16 {
    let mut a: u128 = 0;
    let mut b: u128 = 0;
    let mut chunks = data.chunks_exact(32);
    for c in &mut chunks {
        let w = |i: usize| {
            u128::from(u64::from_ne_bytes([
                c[i],
                c[i + 1],
                c[i + 2],
                c[i + 3],
                c[i + 4],
                c[i + 5],
                c[i + 6],
                c[i + 7],
            ]))
        };
        a += w(0) + w(16);
        b += w(8) + w(24);
    }
    // The last 0-31 bytes: whole words, then by halves, each read where it lies (a
    // zero-padded copy of them was a `memcpy` call, twice the whole sum of a 20-byte
    // IPv4 header). Every piece starts at an even offset, so the 16-bit words keep their
    // places.
    let mut rest = chunks.remainder();
    while let Some((x, r)) = rest.split_first_chunk::<8>() {
        a += u128::from(u64::from_ne_bytes(*x));
        rest = r;
    }
    if let Some((x, r)) = rest.split_first_chunk::<4>() {
        b += u128::from(u32::from_ne_bytes(*x));
        rest = r;
    }
    if let Some((x, r)) = rest.split_first_chunk::<2>() {
        b += u128::from(u16::from_ne_bytes(*x));
        rest = r;
    }
    if let [last] = rest {
        // RFC 1071 §4.1: an odd byte is padded with a zero on its right.
        b += u128::from(u16::from_ne_bytes([*last, 0]));
    }
    // Each accumulator stays below 2^64 times the number of words, far from 2^128. The
    // high half of their sum counts the carries out of the low one, each worth 1; two
    // folds bring it within 64 bits.
    let s = a + b;
    let s = (s & u128::from(u64::MAX)) + (s >> 64);
    let s = (s & u128::from(u64::MAX)) + (s >> 64);
    // Native-order words summed: bring the folded sum back to network order.
    u16::from_be(fold(s as u64))
}

/// The one's complement sum of `head` followed by each of `rest`, as [`data`] of their
/// concatenation: a frame that arrived in several buffers, summed where it lies. A part
/// that starts at an odd offset of the whole has its bytes in the other halves of the
/// 16-bit words, so its sum is byte-swapped before it is added (RFC 1071 §2(B): the sum
/// is byte-order independent, and §4.1's zero pad of an odd part is what the swap
/// moves to the front of the next word).
#[inline]
pub fn data_chain(head: &[u8], rest: &[&[u8]]) -> u16 {
    let mut acc = u64::from(data(head));
    let mut odd = head.len() % 2 == 1;
    for part in rest {
        let s = data(part);
        acc += u64::from(if odd { s.swap_bytes() } else { s });
        odd ^= part.len() % 2 == 1;
    }
    fold(acc)
}

/// Combines partial sums (from [`data`], [`pseudo_header`] or raw 16-bit fields).
#[inline]
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// Whether two one's complement sums are equal, counting 0x0000 and 0xffff as the same
/// number (the two zeros of RFC 1071 §2's arithmetic).
#[inline]
pub fn same(a: u16, b: u16) -> bool {
    a == b || (a | b == 0xffff && (a == 0 || b == 0))
}

/// The sum of the TCP/UDP pseudo-header: source and destination address, protocol and
/// upper-layer `length` in bytes (RFC 9293 §3.1 for IPv4, RFC 8200 §8.1 for IPv6).
///
/// The IPv4 and IPv6 layouts have the same one's complement sum for the same values
/// (zero padding adds nothing, and a 32-bit length sums as its two halves), so one
/// computation serves both. The two addresses should be of one family.
#[inline]
pub fn pseudo_header(src: &IpAddr, dst: &IpAddr, protocol: IpProtocol, length: u32) -> u16 {
    let mut acc =
        u64::from(u8::from(protocol)) + u64::from(length >> 16) + u64::from(length & 0xffff);
    for addr in [src, dst] {
        match addr {
            IpAddr::V4(a) => acc += sum_words(&a.octets()),
            IpAddr::V6(a) => acc += sum_words(&a.octets()),
        }
    }
    fold(acc)
}

/// The plain sum of big-endian 16-bit words of a short even-length array (addresses),
/// cheaper than [`data`] for 4 or 16 bytes.
#[inline]
fn sum_words<const N: usize>(bytes: &[u8; N]) -> u64 {
    bytes
        .chunks_exact(2)
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
        .sum()
}

/// Updates a header checksum field after one 16-bit word changed from `old` to `new`,
/// without summing the packet again: `HC' = ~(~HC + ~m + m')` (RFC 1624 §3, eqn. 3).
///
/// `checksum` and the result are the values as stored in the header (complemented).
#[inline]
pub fn update(checksum: u16, old: u16, new: u16) -> u16 {
    !combine(&[!checksum, !old, new])
}

/// [`update`] for a 32-bit field (an IPv4 address, a sequence number).
#[inline]
pub fn update_u32(checksum: u16, old: u32, new: u32) -> u16 {
    !combine(&[
        !checksum,
        !((old >> 16) as u16),
        !(old as u16),
        (new >> 16) as u16,
        new as u16,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use proptest::prelude::*;

    #[test]
    fn the_two_zeros_are_the_same_sum() {
        assert!(same(0, 0xffff) && same(0xffff, 0) && same(0, 0) && same(0x1234, 0x1234));
        assert!(!same(0xff00, 0x00ff) && !same(0, 1) && !same(0xfffe, 0xffff));
    }

    fn naive(bytes: &[u8]) -> u16 {
        let mut sum: u64 = 0;
        for pair in bytes.chunks(2) {
            let hi = u64::from(pair[0]) << 8;
            let lo = pair.get(1).copied().map_or(0, u64::from);
            sum += hi | lo;
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(data(&bytes), 0xddf2);
        assert_eq!(!data(&bytes), 0x220d);
    }

    #[test]
    fn ipv4_header_from_wikipedia_capture() {
        // A captured IPv4 header with checksum b861 (checksum field at bytes 10..12).
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(data(&hdr), 0xffff);
        let mut zeroed = hdr;
        zeroed[10] = 0;
        zeroed[11] = 0;
        assert_eq!(!data(&zeroed), 0xb861);
    }

    #[test]
    fn rfc1624_example() {
        // RFC 1624 §4: checksum 0xdd2f, a field changes from 0x5555 to 0x3285; eqn. 3
        // gives 0x0000 (where eqn. 2 of RFC 1141 gives the wrong 0xffff).
        assert_eq!(update(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    #[test]
    fn empty_and_odd() {
        assert_eq!(data(&[]), 0);
        assert_eq!(data(&[0xab]), 0xab00);
        assert_eq!(data(&[0xff, 0xff]), 0xffff);
    }

    #[test]
    fn pseudo_header_families_agree_with_layout() {
        let s4 = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
        let d4 = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
        let mut v4 = [0u8; 12];
        v4[0..4].copy_from_slice(&[198, 18, 0, 1]);
        v4[4..8].copy_from_slice(&[198, 18, 0, 2]);
        v4[9] = 6;
        v4[10..12].copy_from_slice(&1234u16.to_be_bytes());
        assert_eq!(pseudo_header(&s4, &d4, IpProtocol::Tcp, 1234), naive(&v4));

        let s6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
        let d6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
        let mut v6 = [0u8; 40];
        v6[0..16].copy_from_slice(&match s6 {
            IpAddr::V6(a) => a.octets(),
            IpAddr::V4(_) => unreachable!(),
        });
        v6[16..32].copy_from_slice(&match d6 {
            IpAddr::V6(a) => a.octets(),
            IpAddr::V4(_) => unreachable!(),
        });
        v6[32..36].copy_from_slice(&70000u32.to_be_bytes());
        v6[39] = 17;
        assert_eq!(pseudo_header(&s6, &d6, IpProtocol::Udp, 70000), naive(&v6));
    }

    proptest! {
        #[test]
        fn a_chain_sums_as_its_concatenation(
            parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..70), 1..6),
        ) {
            let whole: Vec<u8> = parts.concat();
            let rest: Vec<&[u8]> = parts[1..].iter().map(Vec::as_slice).collect();
            prop_assert!(same(data_chain(&parts[0], &rest), data(&whole)));
        }

        #[test]
        fn data_matches_naive(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
            prop_assert_eq!(data(&bytes), naive(&bytes));
        }

        #[test]
        fn incremental_matches_recompute(
            mut bytes in proptest::collection::vec(any::<u8>(), 2..200),
            word in any::<usize>(),
            new in any::<u16>(),
        ) {
            if bytes.len() % 2 == 1 { bytes.pop(); }
            let at = (word % (bytes.len() / 2)) * 2;
            let before = !data(&bytes);
            let old = u16::from_be_bytes([bytes[at], bytes[at + 1]]);
            bytes[at..at + 2].copy_from_slice(&new.to_be_bytes());
            let after = !data(&bytes);
            // Both 0x0000 and 0xffff are one's complement zero; RFC 1624 eqn. 3 picks
            // the form a full recomputation does except for an all-zero sum.
            let inc = update(before, old, new);
            prop_assert!(inc == after || (inc ^ after) == 0xffff && (inc == 0 || after == 0));
        }

        #[test]
        fn incremental_u32(a in any::<u32>(), b in any::<u32>(), rest in any::<[u8; 6]>()) {
            let mut bytes = [0u8; 10];
            bytes[..4].copy_from_slice(&a.to_be_bytes());
            bytes[4..].copy_from_slice(&rest);
            let before = !data(&bytes);
            bytes[..4].copy_from_slice(&b.to_be_bytes());
            let after = !data(&bytes);
            let inc = update_u32(before, a, b);
            prop_assert!(inc == after || (inc ^ after) == 0xffff && (inc == 0 || after == 0));
        }
    }
}
