//! IPv4 fragmentation: reassembly of incoming fragments (RFC 791 §3.2, RFC 815) and the
//! cutting of outgoing datagrams larger than the MTU.
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
use core::net::Ipv4Addr;

use ulnet_wire::{IpProtocol, Ipv4Repr};

use super::stats::DropReason;
use crate::time::{Duration, Instant};

/// Identifies the fragments of one datagram (RFC 791 §3.2: source, destination,
/// protocol and identification).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: IpProtocol,
    ident: u16,
}

#[derive(Debug)]
struct Datagram {
    key: Key,
    /// The header of the first fragment (offset 0) once seen: its TTL and DSCP/ECN are
    /// what the reassembled datagram reports.
    first: Option<Ipv4Repr>,
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

/// Bounded IPv4 reassembly.
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
        let start = usize::from(header.frag_offset);
        let end = start + payload.len();
        // RFC 791 §3.2: every fragment but the last carries a multiple of 8 bytes; no
        // datagram exceeds 65535 bytes (the "ping of death" check).
        if end > MAX_PAYLOAD
            || (header.more_frags && (payload.is_empty() || !payload.len().is_multiple_of(8)))
        {
            return Err(DropReason::FragMalformed);
        }
        let key = Key {
            src: header.src_addr,
            dst: header.dst_addr,
            protocol: header.protocol,
            ident: header.ident,
        };
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
        match self.insert(i, start, end, header, payload) {
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
        let mut header = d.first.unwrap_or(*header);
        let total = d.total_len.unwrap_or(0);
        let mut payload = d.buf;
        payload.truncate(total);
        header.payload_len = total;
        header.more_frags = false;
        header.frag_offset = 0;
        header.dont_frag = false;
        Ok(Some(Reassembled { header, payload }))
    }

    fn insert(
        &mut self,
        i: usize,
        start: usize,
        end: usize,
        header: &Ipv4Repr,
        payload: &[u8],
    ) -> Result<(), DropReason> {
        let held = self.held;
        let limit = self.buffer_limit;
        let per_datagram = self.per_datagram;
        let d = &mut self.datagrams[i];
        if !header.more_frags {
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
            d.first = Some(*header);
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
