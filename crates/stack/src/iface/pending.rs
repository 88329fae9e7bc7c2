//! Packets waiting for neighbour resolution.
//!
//! When the output path finds no MAC for the next hop it parks the IP payload here and
//! sends an ARP request; the answer releases the packets in order, a failed resolution
//! drops them. Invariants: at most `per_neighbor` packets per next hop, `count` packets
//! and `len` payload bytes in all; payload buffers are recycled, so a steady trickle of
//! unresolved packets does not allocate per packet once the pool is warm.

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ulnet_wire::IpProtocol;

use super::stats::DropReason;

/// The IPv4 header fields of a parked packet; the rest is decided when it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IpHeader {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: IpProtocol,
    pub ttl: u8,
    /// The TOS byte (DSCP and ECN).
    pub tos: u8,
}

/// The IPv6 header fields of a parked packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ip6Header {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next_header: IpProtocol,
    pub hop_limit: u8,
    /// The Traffic Class byte (DSCP and ECN).
    pub traffic_class: u8,
}

/// The header of a parked packet, of either family (ARP and Neighbor Discovery share
/// the queue and its bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnyHeader {
    V4(IpHeader),
    V6(Ip6Header),
}

#[derive(Debug)]
pub(crate) struct Parked {
    pub next_hop: IpAddr,
    pub header: AnyHeader,
    pub payload: Vec<u8>,
}

/// The bounded queue of parked packets.
#[derive(Debug)]
pub(crate) struct PendingQueue {
    packets: Vec<Parked>,
    pool: Vec<Vec<u8>>,
    per_neighbor: usize,
    count: usize,
    len_limit: usize,
    len: usize,
}

impl PendingQueue {
    pub fn new(per_neighbor: usize, count: usize, len_limit: usize) -> Self {
        PendingQueue {
            packets: Vec::with_capacity(count),
            pool: Vec::new(),
            per_neighbor,
            count,
            len_limit,
            len: 0,
        }
    }

    /// Packets parked.
    pub fn count(&self) -> usize {
        self.packets.len()
    }

    /// Payload bytes parked.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Parks a `payload_len`-byte payload written by `fill`.
    ///
    /// # Errors
    /// [`DropReason::NeighborQueueFull`] when a bound would be exceeded.
    pub fn push(
        &mut self,
        next_hop: IpAddr,
        header: AnyHeader,
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), DropReason> {
        let for_hop = self
            .packets
            .iter()
            .filter(|p| p.next_hop == next_hop)
            .count();
        if for_hop >= self.per_neighbor
            || self.packets.len() >= self.count
            || self.len + payload_len > self.len_limit
        {
            return Err(DropReason::NeighborQueueFull);
        }
        let mut payload = self.pool.pop().unwrap_or_default();
        payload.clear();
        payload.resize(payload_len, 0);
        fill(&mut payload);
        self.len += payload_len;
        self.packets.push(Parked {
            next_hop,
            header,
            payload,
        });
        Ok(())
    }

    /// The next hop of the `i`-th parked packet.
    pub fn next_hop_at(&self, i: usize) -> Option<IpAddr> {
        self.packets.get(i).map(|p| p.next_hop)
    }

    /// Removes and returns the oldest packet for `next_hop`.
    pub fn pop_for(&mut self, next_hop: IpAddr) -> Option<Parked> {
        let i = self.packets.iter().position(|p| p.next_hop == next_hop)?;
        let p = self.packets.remove(i);
        self.len -= p.payload.len();
        Some(p)
    }

    /// Returns a payload buffer to the pool (bounded by the packet limit).
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < self.count {
            self.pool.push(buf);
        }
    }

    /// Drops every packet for `next_hop`; returns how many.
    pub fn drop_for(&mut self, next_hop: IpAddr) -> u64 {
        let mut n = 0;
        while let Some(p) = self.pop_for(next_hop) {
            self.recycle(p.payload);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr() -> IpHeader {
        IpHeader {
            src: Ipv4Addr::new(198, 18, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 2),
            protocol: IpProtocol::Udp,
            ttl: 64,
            tos: 0,
        }
    }

    #[test]
    fn bounds_per_neighbor_count_and_bytes() {
        let a = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
        let b = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 3));
        let mut q = PendingQueue::new(2, 3, 100);
        let mut fill = |buf: &mut [u8]| buf.fill(7);
        assert!(q.push(a, AnyHeader::V4(hdr()), 10, &mut fill).is_ok());
        assert!(q.push(a, AnyHeader::V4(hdr()), 10, &mut fill).is_ok());
        assert_eq!(
            q.push(a, AnyHeader::V4(hdr()), 10, &mut fill),
            Err(DropReason::NeighborQueueFull)
        );
        assert_eq!(
            q.push(b, AnyHeader::V4(hdr()), 81, &mut fill),
            Err(DropReason::NeighborQueueFull)
        );
        assert!(q.push(b, AnyHeader::V4(hdr()), 80, &mut fill).is_ok());
        assert_eq!(
            q.push(b, AnyHeader::V4(hdr()), 0, &mut fill),
            Err(DropReason::NeighborQueueFull)
        );
        let p = q.pop_for(a).unwrap();
        assert_eq!(p.payload, [7; 10]);
        q.recycle(p.payload);
        assert_eq!(q.drop_for(a), 1);
        assert_eq!((q.count(), q.len()), (1, 80));
    }
}
