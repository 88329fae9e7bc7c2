//! Fragmentation: reassembly of incoming IPv4 fragments (RFC 791 §3.2, RFC 815) and
//! IPv6 fragments (RFC 8200 §4.5), sharing one set of bounds, and the cutting of
//! outgoing IPv4 datagrams larger than the MTU (IPv6's is in `ipv6.rs`).
//!
//! In: fragments (header fields and payload) and `now`; out: whole datagrams, handed
//! back as an owned buffer the caller returns with [`Reassembler::recycle`].
//!
//! Invariants:
//! - at most `datagram_count` datagrams in progress, holding at most `buffer_len` bytes
//!   in all (a buffer is as long as the furthest fragment end seen), and at most
//!   `per_datagram` fragments each: hostile fragments are dropped and counted, memory
//!   never grows past the limits;
//! - a datagram incomplete after `timeout` (RFC 1122 §3.3.2 suggests 60 s) is dropped and
//!   its memory freed;
//! - a fragment that partly overlaps another drops the whole datagram (RFC 5722's rule,
//!   which Linux also applies to IPv4 since CVE-2018-5391); an exact duplicate is
//!   dropped on its own, since links such as the simulator duplicate frames.

use alloc::vec::Vec;
use core::net::IpAddr;

use ulnet_wire::{IpProtocol, Ipv4Repr, Ipv6FragRepr, Ipv6Repr};

use super::stats::DropReason;
use crate::time::{Duration, Instant};

/// Identifies the fragments of one datagram (RFC 791 §3.2: source, destination,
/// protocol and identification; RFC 8200 §4.5: source, destination and
/// identification, the protocol then fixed to the fragment header's number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: IpAddr,
    dst: IpAddr,
    protocol: IpProtocol,
    ident: u32,
}

/// The header kept from the first fragment.
#[derive(Debug, Clone, Copy)]
enum First {
    V4(Ipv4Repr),
    /// The fixed header, with `next_header` the fragment header's (the first header
    /// of the fragmentable part).
    V6(Ipv6Repr),
}

/// A completed datagram: the first fragment's header, the total length, the bytes.
type Done = (Option<First>, usize, Vec<u8>);

/// An IPv6 packet rebuilt from its fragments.
#[derive(Debug)]
pub struct Reassembled6 {
    /// The first fragment's fixed header, with `next_header` the first header of the
    /// fragmentable part and `payload_len` its length.
    pub header: Ipv6Repr,
    /// The fragmentable part.
    pub payload: Vec<u8>,
}

#[derive(Debug)]
struct Datagram {
    key: Key,
    /// The header of the first fragment (offset 0) once seen: its TTL and DSCP/ECN are
    /// what the reassembled datagram reports.
    first: Option<First>,
    /// Received fragments as sorted, disjoint `[start, end)` byte ranges.
    ranges: Vec<(u16, u16)>,
    /// The datagram's payload length, known once the last fragment arrived.
    total_len: Option<usize>,
    buf: Vec<u8>,
    expires_at: Instant,
}

/// A datagram rebuilt from its fragments.
#[derive(Debug)]
pub struct Reassembled {
    /// The header: the first fragment's, with the whole payload length and no
    /// fragmentation fields.
    pub header: Ipv4Repr,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Bounded reassembly, IPv4 and IPv6 sharing the bounds.
#[derive(Debug)]
pub struct Reassembler {
    datagrams: Vec<Datagram>,
    datagram_count: usize,
    buffer_limit: usize,
    per_datagram: usize,
    timeout: Duration,
    /// Bytes held by buffers in progress.
    held: usize,
}

/// The largest IPv4 payload: a 65535-byte datagram less the minimal header.
const MAX_PAYLOAD: usize = 65535 - 20;

impl Reassembler {
    /// A reassembler keeping at most `datagram_count` datagrams, `buffer_len` bytes and
    /// `per_datagram` fragments per datagram, each for at most `timeout`.
    pub fn new(
        datagram_count: usize,
        buffer_len: usize,
        per_datagram: usize,
        timeout: Duration,
    ) -> Self {
        Reassembler {
            datagrams: Vec::with_capacity(datagram_count),
            datagram_count,
            buffer_limit: buffer_len,
            per_datagram: per_datagram.max(1),
            timeout,
            held: 0,
        }
    }

    /// Datagrams in progress.
    pub fn datagram_count(&self) -> usize {
        self.datagrams.len()
    }

    /// Bytes held by datagrams in progress.
    pub fn buffered_len(&self) -> usize {
        self.held
    }

    /// The earliest timeout of a datagram in progress.
    pub fn poll_at(&self) -> Option<Instant> {
        self.datagrams.iter().map(|d| d.expires_at).min()
    }

    /// Drops datagrams whose timeout passed; returns how many. RFC 792 would have us
    /// send "time exceeded (reassembly)" when the first fragment was received; Linux
    /// does, but it is optional (RFC 1122 §3.3.2 "MAY"), and we do not.
    pub fn expire(&mut self, now: Instant) -> u64 {
        let mut n = 0;
        let mut i = 0;
        while i < self.datagrams.len() {
            if self.datagrams[i].expires_at <= now {
                self.remove(i);
                n += 1;
            } else {
                i += 1;
            }
        }
        n
    }

    fn remove(&mut self, i: usize) -> Datagram {
        let d = self.datagrams.swap_remove(i);
        self.held -= d.buf.len();
        d
    }

    /// Adds one fragment. Returns the whole datagram once every byte arrived.
    ///
    /// # Errors
    /// The reason the fragment (and, for overlaps, its datagram) was dropped.
    pub fn add(
        &mut self,
        now: Instant,
        header: &Ipv4Repr,
        payload: &[u8],
    ) -> Result<Option<Reassembled>, DropReason> {
        let key = Key {
            src: IpAddr::V4(header.src_addr),
            dst: IpAddr::V4(header.dst_addr),
            protocol: header.protocol,
            ident: u32::from(header.ident),
        };
        let start = usize::from(header.frag_offset);
        let done = self.add_raw(
            now,
            key,
            start,
            header.more_frags,
            First::V4(*header),
            payload,
        )?;
        Ok(done.map(|(first, total, mut payload)| {
            let mut header = match first {
                Some(First::V4(h)) => h,
                _ => *header,
            };
            payload.truncate(total);
            header.payload_len = total;
            header.more_frags = false;
            header.frag_offset = 0;
            header.dont_frag = false;
            Reassembled { header, payload }
        }))
    }

    /// Adds one IPv6 fragment: `header` is the packet's fixed header, `frag` its
    /// fragment header, `payload` the fragment's data (after the fragment header).
    /// Returns the fragmentable part once every byte arrived.
    ///
    /// # Errors
    /// The reason the fragment (and, for overlaps, its packet, RFC 5722 §4) was
    /// dropped.
    pub fn add_v6(
        &mut self,
        now: Instant,
        header: &Ipv6Repr,
        frag: &Ipv6FragRepr,
        payload: &[u8],
    ) -> Result<Option<Reassembled6>, DropReason> {
        let key = Key {
            src: IpAddr::V6(header.src_addr),
            dst: IpAddr::V6(header.dst_addr),
            protocol: IpProtocol::Ipv6Frag,
            ident: frag.ident,
        };
        let mut first = *header;
        first.next_header = frag.next_header;
        let start = usize::from(frag.offset);
        let done = self.add_raw(now, key, start, frag.more_frags, First::V6(first), payload)?;
        Ok(done.map(|(kept, total, mut payload)| {
            let mut header = match kept {
                Some(First::V6(h)) => h,
                _ => first,
            };
            payload.truncate(total);
            header.payload_len = total;
            Reassembled6 { header, payload }
        }))
    }

    /// The shared part: bounds, the datagram's slot, insertion, completion.
    fn add_raw(
        &mut self,
        now: Instant,
        key: Key,
        start: usize,
        more: bool,
        first: First,
        payload: &[u8],
    ) -> Result<Option<Done>, DropReason> {
        let end = start + payload.len();
        // RFC 791 §3.2 / RFC 8200 §4.5: every fragment but the last carries a multiple
        // of 8 bytes; no datagram exceeds 65535 bytes (the "ping of death" check).
        if end > MAX_PAYLOAD || (more && (payload.is_empty() || !payload.len().is_multiple_of(8))) {
            return Err(DropReason::FragMalformed);
        }
        let i = match self.datagrams.iter().position(|d| d.key == key) {
            Some(i) => i,
            None => {
                if self.datagrams.len() >= self.datagram_count {
                    return Err(DropReason::FragNoRoom);
                }
                self.datagrams.push(Datagram {
                    key,
                    first: None,
                    ranges: Vec::new(),
                    total_len: None,
                    buf: Vec::new(),
                    expires_at: now + self.timeout,
                });
                self.datagrams.len() - 1
            }
        };
        match self.insert(i, start, end, more, first, payload) {
            Ok(()) => {}
            Err(DropReason::FragDuplicate) => return Err(DropReason::FragDuplicate),
            Err(e) => {
                self.remove(i);
                return Err(e);
            }
        }
        let d = &self.datagrams[i];
        let complete = match (d.total_len, d.ranges.first()) {
            (Some(total), Some(&(0, _))) => {
                // Disjoint sorted ranges cover [0, total) exactly when they abut.
                d.ranges.windows(2).all(|w| w[0].1 == w[1].0)
                    && d.ranges.last().is_some_and(|r| usize::from(r.1) == total)
            }
            _ => false,
        };
        if !complete {
            return Ok(None);
        }
        let d = self.remove(i);
        Ok(Some((d.first, d.total_len.unwrap_or(0), d.buf)))
    }

    fn insert(
        &mut self,
        i: usize,
        start: usize,
        end: usize,
        more: bool,
        first: First,
        payload: &[u8],
    ) -> Result<(), DropReason> {
        let held = self.held;
        let limit = self.buffer_limit;
        let per_datagram = self.per_datagram;
        let d = &mut self.datagrams[i];
        if !more {
            match d.total_len {
                Some(t) if t != end => return Err(DropReason::FragOverlap),
                _ => d.total_len = Some(end),
            }
        }
        if d.total_len.is_some_and(|t| end > t) {
            return Err(DropReason::FragOverlap);
        }
        let (s16, e16) = (start as u16, end as u16);
        let pos = d.ranges.partition_point(|r| r.0 < s16);
        if d.ranges.get(pos) == Some(&(s16, e16)) {
            return Err(DropReason::FragDuplicate);
        }
        let overlaps_prev = pos > 0 && d.ranges[pos - 1].1 > s16;
        let overlaps_next = d.ranges.get(pos).is_some_and(|r| r.0 < e16);
        if overlaps_prev || overlaps_next {
            return Err(DropReason::FragOverlap);
        }
        if d.ranges.len() >= per_datagram {
            return Err(DropReason::FragTooManyFragments);
        }
        if end > d.buf.len() {
            let grow = end - d.buf.len();
            if held + grow > limit {
                return Err(DropReason::FragNoRoom);
            }
            d.buf.resize(end, 0);
            self.held += grow;
        }
        d.buf[start..end].copy_from_slice(payload);
        d.ranges.insert(pos, (s16, e16));
        if start == 0 {
            d.first = Some(first);
        }
        Ok(())
    }

    /// Takes back a reassembled buffer. Reassembly is the slow path: the buffer is
    /// simply freed, so memory held stays what [`Reassembler::buffered_len`] reports.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        drop(buf);
    }
}

/// The payload bytes each fragment of a datagram carries when the link MTU is `mtu`:
/// the room after a 20-byte header rounded down to a multiple of 8 (RFC 791 §3.2).
pub fn fragment_payload_len(mtu: usize) -> usize {
    (mtu.saturating_sub(20) / 8 * 8).max(8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn v6() -> Ipv6Repr {
        Ipv6Repr {
            src_addr: "2001:2::2".parse().unwrap(),
            dst_addr: "2001:2::1".parse().unwrap(),
            next_header: IpProtocol::Ipv6Frag,
            payload_len: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
    }

    fn f6(offset: u16, more: bool) -> Ipv6FragRepr {
        Ipv6FragRepr {
            next_header: IpProtocol::Udp,
            offset,
            more_frags: more,
            ident: 0x1234_5678,
        }
    }

    /// RFC 8200 §4.5 reassembly, and RFC 5722 §4: an overlap drops the whole packet
    /// (its fragments already held are freed, later ones start a new one).
    #[test]
    fn ipv6_reassembly_and_overlap() {
        let mut r = r();
        let t = Instant::from_secs(1);
        assert!(r
            .add_v6(t, &v6(), &f6(16, false), &data(8))
            .unwrap()
            .is_none());
        let whole = r
            .add_v6(t, &v6(), &f6(0, true), &data(16))
            .unwrap()
            .unwrap();
        assert_eq!(whole.header.next_header, IpProtocol::Udp);
        assert_eq!(whole.header.payload_len, 24);
        assert_eq!(whole.payload.len(), 24);
        assert_eq!(r.buffered_len(), 0);
        // Overlap: 0..16 then 8..24.
        assert!(r
            .add_v6(t, &v6(), &f6(0, true), &data(16))
            .unwrap()
            .is_none());
        assert_eq!(
            r.add_v6(t, &v6(), &f6(8, false), &data(16)).unwrap_err(),
            DropReason::FragOverlap
        );
        assert_eq!((r.datagram_count(), r.buffered_len()), (0, 0));
        // A non-last fragment not a multiple of 8.
        assert_eq!(
            r.add_v6(t, &v6(), &f6(0, true), &data(12)).unwrap_err(),
            DropReason::FragMalformed
        );
    }

    fn hdr(ident: u16, offset: u16, more: bool, len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::new(198, 18, 0, 2),
            dst_addr: Ipv4Addr::new(198, 18, 0, 1),
            protocol: IpProtocol::Udp,
            payload_len: len,
            ttl: 64,
            dscp_ecn: 0,
            ident,
            dont_frag: false,
            more_frags: more,
            frag_offset: offset,
        }
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    fn r() -> Reassembler {
        Reassembler::new(4, 100_000, 64, Duration::from_secs(30))
    }

    #[test]
    fn in_order_and_out_of_order() {
        let whole = data(4000);
        for order in [[0usize, 1, 2], [2, 0, 1], [1, 2, 0]] {
            let mut r = r();
            let cuts = [(0usize, 1480usize), (1480, 2960), (2960, 4000)];
            let mut out = None;
            for &k in &order {
                let (s, e) = cuts[k];
                let h = hdr(9, s as u16, e != 4000, e - s);
                out = r.add(Instant::ZERO, &h, &whole[s..e]).unwrap();
            }
            let out = out.expect("complete");
            assert_eq!(out.payload, whole);
            assert_eq!(out.header.payload_len, 4000);
            assert!(!out.header.is_fragment());
            assert_eq!(r.buffered_len(), 0);
        }
    }

    #[test]
    fn overlap_drops_datagram_duplicate_drops_fragment() {
        let whole = data(24);
        let mut r = r();
        assert!(r
            .add(Instant::ZERO, &hdr(1, 0, true, 16), &whole[..16])
            .unwrap()
            .is_none());
        assert_eq!(
            r.add(Instant::ZERO, &hdr(1, 0, true, 16), &whole[..16])
                .unwrap_err(),
            DropReason::FragDuplicate
        );
        assert_eq!(r.datagram_count(), 1);
        assert_eq!(
            r.add(Instant::ZERO, &hdr(1, 8, false, 16), &whole[8..])
                .unwrap_err(),
            DropReason::FragOverlap
        );
        assert_eq!((r.datagram_count(), r.buffered_len()), (0, 0));
        // The rest of the old datagram now starts a fresh one that never completes.
        assert!(r
            .add(Instant::ZERO, &hdr(1, 16, false, 8), &whole[16..])
            .unwrap()
            .is_none());
    }

    #[test]
    fn conflicting_ends_and_malformed() {
        let mut r = r();
        assert!(r
            .add(Instant::ZERO, &hdr(2, 16, false, 8), &[0; 8])
            .unwrap()
            .is_none());
        assert_eq!(
            r.add(Instant::ZERO, &hdr(2, 32, false, 8), &[0; 8])
                .unwrap_err(),
            DropReason::FragOverlap
        );
        assert_eq!(
            r.add(Instant::ZERO, &hdr(3, 0, true, 7), &[0; 7])
                .unwrap_err(),
            DropReason::FragMalformed
        );
        assert_eq!(
            r.add(Instant::ZERO, &hdr(3, 65528, false, 16), &[0; 16])
                .unwrap_err(),
            DropReason::FragMalformed
        );
    }

    #[test]
    fn bounded_and_timed_out() {
        let mut r = Reassembler::new(2, 4096, 3, Duration::from_secs(30));
        assert!(r
            .add(Instant::ZERO, &hdr(1, 2000, true, 8), &[0; 8])
            .unwrap()
            .is_none());
        assert_eq!(r.buffered_len(), 2008);
        assert_eq!(
            r.add(Instant::ZERO, &hdr(2, 3000, true, 8), &[0; 8])
                .unwrap_err(),
            DropReason::FragNoRoom
        );
        assert_eq!(
            r.datagram_count(),
            1,
            "the refused fragment's datagram is dropped"
        );
        assert!(r
            .add(Instant::ZERO, &hdr(3, 8, true, 8), &[0; 8])
            .unwrap()
            .is_none());
        assert_eq!(
            r.add(Instant::ZERO, &hdr(4, 8, true, 8), &[0; 8])
                .unwrap_err(),
            DropReason::FragNoRoom
        );
        assert!(r
            .add(Instant::ZERO, &hdr(3, 16, true, 8), &[0; 8])
            .unwrap()
            .is_none());
        assert!(r
            .add(Instant::ZERO, &hdr(3, 24, true, 8), &[0; 8])
            .unwrap()
            .is_none());
        assert_eq!(
            r.add(Instant::ZERO, &hdr(3, 32, true, 8), &[0; 8])
                .unwrap_err(),
            DropReason::FragTooManyFragments
        );
        assert_eq!(r.poll_at(), Some(Instant::from_secs(30)));
        assert_eq!(r.expire(Instant::from_secs(29)), 0);
        assert_eq!(r.expire(Instant::from_secs(30)), 1);
        assert_eq!((r.datagram_count(), r.buffered_len()), (0, 0));
    }

    #[test]
    fn fragment_sizes() {
        assert_eq!(fragment_payload_len(1500), 1480);
        assert_eq!(fragment_payload_len(576), 552);
        assert_eq!(fragment_payload_len(68), 48);
    }
}
