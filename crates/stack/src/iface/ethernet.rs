//! Ethernet II framing: the first and last step of every frame.
//!
//! In: a received frame; out: its payload, handed to ARP, IPv4 or IPv6 when it is
//! addressed to us (our MAC, broadcast, or an IPv6 multicast MAC when IPv6 is on) from a
//! unicast source. On output, writes the 14-byte
//! header in place in front of the payload its caller fills. Frames are not padded to
//! the 60-byte minimum: the device pads (IEEE 802.3 §4.2.3.3), as for the kernel's own
//! frames.

use ulnet_wire::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};

use super::{Core, DropReason, Interface, TxSink};
use crate::time::Instant;

/// The Ethernet II header length.
pub(crate) const HEADER_LEN: usize = ulnet_wire::ethernet::HEADER_LEN;

impl Interface {
    /// `rest`, when not empty, holds the rest of a frame that arrived in several buffers,
    /// which [`parts_in_place`](super::parts_in_place) accepted.
    pub(super) fn process_ethernet(
        &mut self,
        now: Instant,
        frame: &[u8],
        rest: &[&[u8]],
        tx: &mut dyn TxSink,
    ) {
        let stats = &mut self.core.stats;
        let len = (frame.len() + rest.iter().map(|p| p.len()).sum::<usize>()) as u64;
        stats.rx_frames += 1;
        stats.rx_bytes += len;
        stats.rx_largest = stats.rx_largest.max(len);
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            stats.drop(DropReason::EthTruncated);
            return;
        };
        let dst = eth.dst_addr();
        // RFC 2464 §7: IPv6 multicast maps to 33:33:xx:xx:xx:xx; the IPv6 layer checks
        // the group itself.
        let v6_multicast = dst.0[..2] == [0x33, 0x33] && self.core.v6.enabled;
        if dst != self.core.config.mac && !dst.is_broadcast() && !v6_multicast {
            stats.drop(DropReason::EthNotForUs);
            return;
        }
        let src = eth.src_addr();
        if !src.is_unicast() {
            stats.drop(DropReason::EthBadSource);
            return;
        }
        // Our own IPv6 frame looped back (a multicast echoed by a switch or a TAP): a
        // DAD solicitation of ours must not read as another node's (RFC 4862 §5.4.3
        // notes the case; RFC 7527 §4 would use a nonce).
        if src == self.core.config.mac && eth.ethertype() == EtherType::Ipv6 {
            stats.drop(DropReason::EthNotForUs);
            return;
        }
        match eth.ethertype() {
            EtherType::Arp => self.core.process_arp(now, eth.payload(), tx),
            EtherType::Ipv4 if v6_multicast => stats.drop(DropReason::EthNotForUs),
            EtherType::Ipv4 => {
                stage_hook!(rx_mark RxEthernet);
                self.process_ipv4(now, eth.payload(), rest, dst.is_broadcast(), tx)
            }
            EtherType::Ipv6 => self.process_ipv6(now, eth.payload(), rest, !dst.is_unicast(), tx),
            _ => stats.drop(DropReason::EthUnknownType),
        }
    }
}

impl Core {
    /// Sends one frame to `dst`: the Ethernet header, then `payload_len` bytes written
    /// by `fill`. Counts the frame, or a [`DropReason::TxFull`] drop.
    pub(super) fn send_frame(
        &mut self,
        tx: &mut dyn TxSink,
        dst: EthernetAddress,
        ethertype: EtherType,
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> bool {
        let len = HEADER_LEN + payload_len;
        let header = EthernetRepr {
            src_addr: self.config.mac,
            dst_addr: dst,
            ethertype,
        };
        let sent = tx.send(len, &mut |buf| {
            let (head, payload) = buf.split_at_mut(HEADER_LEN);
            header.emit(&mut EthernetFrame::new_unchecked(head));
            stage_hook!(tx_mark TxEthernet);
            fill(payload);
        });
        if sent {
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += len as u64;
        } else {
            self.stats.drop(DropReason::TxFull);
        }
        sent
    }
}
