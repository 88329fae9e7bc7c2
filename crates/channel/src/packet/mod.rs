//! The `packet` channel: AF_PACKET with a TPACKET_V3 receive ring, a TPACKET_V2 ring
//! for pure TCP ACKs, and a transmit ring (`PACKET_QDISC_BYPASS`), on any Ethernet
//! interface, with no XDP program needed.
//!
//! In: frames the interface receives, walked block by block from the shared ring (no
//! system call and no copy per frame; a block goes back to the kernel once all its
//! frames were handed out), pure ACKs first from their own ring (see Latency). Out:
//! frames written in place into transmit-ring slots, handed to the kernel with one
//! `send(fd, NULL, 0, MSG_DONTWAIT)` per [`Tx::flush`].
//!
//! # The kernel still sees every packet
//!
//! AF_PACKET receives a *copy*: the kernel's own stack also processes each packet that
//! arrives on the interface. If the address ulnet uses is configured on that interface
//! in the kernel, the kernel answers too: a TCP RST for a port it has no socket on, an
//! ICMP port unreachable for UDP, its own ARP replies. So:
//!
//! - **ulnet's address must not be assigned to the interface in the kernel** (`ip addr`
//!   on the interface must not list it). With no local address, the kernel drops the
//!   packets at IP input (not for this host) and stays silent. Forwarding
//!   (`net.ipv4.ip_forward`) should also be off for that interface, or the kernel routes
//!   the copies onward.
//! - Alternatively, drop the packets in the kernel after AF_PACKET has captured them:
//!   packet taps run before the ingress hooks, so an nftables `netdev` ingress chain on
//!   the interface stops the kernel's processing while the ring still receives
//!   everything:
//!   `nft add table netdev ulnet`,
//!   `nft add chain netdev ulnet in '{ type filter hook ingress device <ifname> priority 0; }'`,
//!   `nft add rule netdev ulnet in drop`
//!   (a tc ingress `matchall action drop` does the same where `cls_matchall` and
//!   `act_gact` are available; they are not on every kernel). It saves the kernel's
//!   per-packet work, which depends on what the kernel does with the copies: with no
//!   address and forwarding off it is a failed route lookup, and
//!   `examples/packet_rx_drop.rs --ingress-drop` measured only ~8% less CPU per frame
//!   on veth (2.7 → 2.5 µs, on the sending core, which runs the receiver's kernel path
//!   too); docs/LINUX-NOTES.md records ~306 → ~600 kpps for a tc drop after capture where the
//!   kernel did more with each packet. The price: the host's own stack loses that
//!   interface. This module does not install such rules.
//!
//! # Offloads of the sending side
//!
//! The ring shows frames as the interface received them. When the peer hands out
//! unfinished work — a veth peer with checksum offload leaves checksums partial
//! (`TP_STATUS_CSUMNOTREADY`), with TSO/GSO it passes super-frames larger than the MTU.
//! On a veth the channel says so (`Capabilities::rx_checksum_unfinished`): the stack
//! accepts a checksum field that is exactly the pseudo-header sum, as the kernel's own
//! receive on a veth does, and takes a TCP super-frame whole (one 64 KiB ring block, the
//! default, holds the largest TSO frame Linux sends), which saves both ends the
//! segmentation. Elsewhere, or with blocks too small, turn those offloads off on the
//! sending side (`ethtool -K <peer> tx off tso off gso off`);
//! [`PacketChannel::partial_checksum_count`] shows when they are on. Frames too large
//! for a ring block arrive truncated and are dropped and counted.
//!
//! # Latency
//!
//! TPACKET_V3 hands a block to user space only when it is full or when its retire timer
//! (`rx_block_timeout_ms`, at least 1 ms) fires. Under load blocks fill quickly; at low
//! rates every frame waits up to the timeout. A sender's ACK stream is such a low rate
//! (a few hundred bytes a millisecond at 20 Gb/s): every block of a bulk send was
//! retired by its timer, about 50 ACKs each, so each ACK waited up to a millisecond.
//! Hence a second receive socket, the ACK ring (`rx_ack_slots`, on by default): a
//! classic BPF filter on both sockets sorts pure TCP ACKs (no payload, no SYN, FIN or
//! RST) into a TPACKET_V2 ring that hands each frame over as it is written, and
//! everything else into the blocks. A pure ACK carries no data, so reading it before
//! data that arrived earlier loses nothing (see `ack_filter`); segments with data, and
//! SYN, FIN and RST, stay in order in the blocks. Data, and any other protocol, still
//! waits for its block: use the `xdp` channel where a request's latency matters.
//!
//! Invariants: no heap allocation after [`PacketChannel::open`]; the rings never grow —
//! when one is full the kernel drops and counts (`PACKET_STATISTICS`, reported as
//! `rx_dropped`).

use std::cell::Cell;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::event::epoll;

use crate::bursts::{BurstTx, Bursts};
use crate::sys::netns;
use crate::sys::packet::{
    self as sys, FrameRing, RxFrame, RxGeometry, RxRing, TxGeometry, TxRing, RX_FRAME_OVERHEAD,
    TX_DATA_OFFSET,
};
use crate::{Capabilities, Channel, Error, Gso, Result, Stats, Tx, TxError};

mod ack_filter;
#[cfg(test)]
mod ring_tests;

/// Bytes per slot of the ACK ring: the largest pure ACK (IPv6, 60 bytes of TCP header,
/// 114 bytes with Ethernet; 134 for IPv4 with 40 bytes of options) plus the 66 bytes
/// the kernel puts before it.
const ACK_SLOT_SIZE: usize = 256;

/// Ethernet header plus one VLAN tag: what a frame carries beyond the MTU.
const L2_OVERHEAD: usize = 14 + 4;

/// Options for [`PacketChannel::open`]: everything specific to AF_PACKET (the
/// interface and its namespace are `open`'s own arguments, as for
/// [`XdpChannel::open`](crate::xdp::XdpChannel::open)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOptions {
    /// Bytes per receive block (a page multiple); raised automatically to hold at least
    /// two largest frames.
    pub rx_block_size: usize,
    /// Number of receive blocks.
    pub rx_block_count: usize,
    /// Milliseconds before a partly filled block is handed over (≥ 1): the latency
    /// floor at low packet rates.
    pub rx_block_timeout_ms: u32,
    /// Slots of the ACK ring: pure TCP ACKs (no payload, no SYN, FIN or RST) are sorted
    /// into a TPACKET_V2 ring of their own, handed over one by one instead of waiting
    /// with the blocks (see the module docs). 0 leaves them in the blocks.
    pub rx_ack_slots: usize,
    /// Number of transmit slots (each holds one frame of up to MTU + 18 bytes).
    pub tx_frame_count: usize,
    /// Most frames one `rx_batch` hands out.
    pub batch_count: usize,
    /// Send with `PACKET_QDISC_BYPASS` (straight to the driver, no qdisc).
    pub qdisc_bypass: bool,
    /// TCP bursts of up to 64 KB through a second `AF_PACKET` socket with a virtio-net
    /// header, for the kernel to cut (GSO) or the device's TSO to pass whole, one send
    /// per burst, as `XdpOptions::gso` does for AF_XDP; every other frame through the
    /// ring. On by default.
    pub gso: bool,
}

impl Default for PacketOptions {
    /// 64 × 64 KiB receive blocks with a 1 ms timeout, 1024 ACK slots, 1024 transmit
    /// slots, batches of 64, qdisc bypass on, bursts on.
    fn default() -> Self {
        PacketOptions {
            rx_block_size: 64 * 1024,
            rx_block_count: 64,
            rx_block_timeout_ms: 1,
            rx_ack_slots: 1024,
            tx_frame_count: 1024,
            batch_count: 64,
            qdisc_bypass: true,
            gso: true,
        }
    }
}

/// Where the receive walk stands inside the current block.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    remaining: u32,
    offset: usize,
}

/// The ACK ring, the slot it is read at, and what the channel waits on with it.
#[derive(Debug)]
struct AckRing {
    ring: FrameRing,
    next: usize,
    /// Frames handed out from it.
    frames: u64,
    /// An epoll descriptor readable when either receive ring is.
    waiter: OwnedFd,
}

/// The receive counters both rings feed.
#[derive(Debug, Default)]
struct RxCounts {
    frames: u64,
    bytes: u64,
    /// Frames dropped here (truncated, or a block whose layout made no sense).
    dropped: u64,
    /// Frames handed out with `TP_STATUS_CSUMNOTREADY`.
    csum_not_ready: u64,
}

impl RxCounts {
    /// Hands `frame` to `f`, or drops it when it arrived truncated; counts either way.
    /// Whether it was handed out.
    fn hand_out(
        &mut self,
        frame: &RxFrame<'_>,
        tx: &mut PacketTx,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> bool {
        if frame.data.len() < frame.wire_len {
            self.dropped += 1;
            return false;
        }
        self.frames += 1;
        self.bytes += frame.data.len() as u64;
        if frame.status & libc::TP_STATUS_CSUMNOTREADY != 0 {
            self.csum_not_ready += 1;
        }
        f(frame.data, tx);
        true
    }
}

#[derive(Debug)]
struct PacketRx {
    ring: RxRing,
    block: usize,
    cursor: Option<Cursor>,
    acks: Option<AckRing>,
    counts: RxCounts,
    empty_polls: u64,
    /// Flips every batch: who gets an odd batch's middle frame (see `rx_batch`).
    odd_turn: bool,
}

/// The transmit half of a [`PacketChannel`].
#[derive(Debug)]
pub struct PacketTx {
    ring: TxRing,
    head: usize,
    pending: usize,
    max_frame_len: usize,
    frames: u64,
    bytes: u64,
    dropped: u64,
    kicks: u64,
    /// TCP bursts go out here (`PacketOptions::gso`).
    bursts: Bursts,
}

/// An AF_PACKET channel on one interface (see the module docs for what the kernel
/// still does with received packets).
#[derive(Debug)]
pub struct PacketChannel {
    rx: PacketRx,
    tx: PacketTx,
    caps: Capabilities,
    /// Kernel ring drops read so far (`PACKET_STATISTICS` resets on read).
    kernel_drops: Cell<u64>,
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

impl PacketChannel {
    /// Opens the channel on interface `ifname` in network namespace `netns` (as in
    /// `ip netns add NAME`; `None` for the calling thread's): the sockets are created
    /// there, then the thread returns to its namespace.
    ///
    /// # Errors
    /// - `open(netns)`/`setns` when the namespace is missing or not enterable;
    /// - `ioctl(SIOCGIFINDEX)` `ENODEV` when the interface does not exist there;
    /// - `socket(AF_PACKET)` `EPERM` without root/CAP_NET_RAW;
    /// - `setsockopt(PACKET_RX_RING/TX_RING)` `ENOMEM` for a ring too large;
    /// - `config` (`EINVAL`) for zero counts.
    ///
    /// Each error carries a hint naming the fix.
    pub fn open(ifname: &str, netns: Option<&str>, cfg: &PacketOptions) -> Result<PacketChannel> {
        if cfg.batch_count == 0 || cfg.rx_block_count == 0 || cfg.tx_frame_count == 0 {
            return Err(Error::invalid("config")
                .with_hint("batch_count, rx_block_count and tx_frame_count must be non-zero"));
        }
        let _ns = netns.map(netns::enter).transpose()?;
        let ctl = sys::control_socket()?;
        let ifindex = sys::interface_index(ctl.as_fd(), ifname)?;
        let mtu = sys::interface_mtu(ctl.as_fd(), ifname)?;
        let largest = mtu + L2_OVERHEAD;
        // A block starts with its 48-byte descriptor; each frame takes the overhead.
        let min_block = round_up(2 * (largest + RX_FRAME_OVERHEAD) + 48, sys::page_size());
        let rx_geo = RxGeometry {
            block_size: round_up(cfg.rx_block_size.max(min_block), sys::page_size()),
            block_count: cfg.rx_block_count,
            block_timeout_ms: cfg.rx_block_timeout_ms.max(1),
        };
        let tx_geo = TxGeometry {
            frame_size: (TX_DATA_OFFSET + largest).next_power_of_two().max(128),
            frame_count: cfg.tx_frame_count,
        };
        let (rx, acks) = if cfg.rx_ack_slots > 0 {
            let rx = RxRing::open(ifindex, rx_geo, Some(&ack_filter::program(false)))?;
            let acks = FrameRing::open(
                ifindex,
                ACK_SLOT_SIZE,
                cfg.rx_ack_slots,
                &ack_filter::program(true),
            )?;
            let waiter = epoll::create(epoll::CreateFlags::CLOEXEC)
                .map_err(|e| Error::new("epoll_create1", e.into()))?;
            for fd in [rx.fd(), acks.fd()] {
                epoll::add(
                    &waiter,
                    fd,
                    epoll::EventData::new_u64(0),
                    epoll::EventFlags::IN,
                )
                .map_err(|e| Error::new("epoll_ctl", e.into()))?;
            }
            (rx, Some((acks, waiter)))
        } else {
            (RxRing::open(ifindex, rx_geo, None)?, None)
        };
        let tx = TxRing::open(ifindex, tx_geo, cfg.qdisc_bypass)?;
        let max_frame_len = (mtu + 14).min(tx.max_frame_len());
        let bursts = Bursts::open(cfg.gso, ifindex)?;
        let caps = Capabilities {
            name: "packet",
            mtu,
            max_frame_len,
            rx_checksum_verified: false,
            rx_checksum_unfinished: crate::netif::is_veth(ifname),
            tx_checksum_offload: false,
            batch_count: cfg.batch_count,
            gso_max_len: bursts.max_frame_len(),
            mode: format!(
                "tpacket_v3 rx ({} x {} KiB blocks, {} ms timeout){}, tx ring ({} slots){}{}",
                rx.block_count(),
                rx.block_size() / 1024,
                rx_geo.block_timeout_ms,
                match &acks {
                    Some((a, _)) => format!(", tpacket_v2 ack ring ({} slots)", a.slot_count()),
                    None => String::new(),
                },
                tx.frame_count(),
                if cfg.qdisc_bypass {
                    ", qdisc bypass"
                } else {
                    ""
                },
                if cfg.gso { ", gso bursts" } else { "" },
            ),
        };
        let mut ch = PacketChannel::assemble(rx, tx, caps, bursts);
        ch.rx.acks = acks.map(|(ring, waiter)| AckRing {
            ring,
            next: 0,
            frames: 0,
            waiter,
        });
        Ok(ch)
    }

    fn assemble(rx: RxRing, tx: TxRing, caps: Capabilities, bursts: Bursts) -> PacketChannel {
        PacketChannel {
            rx: PacketRx {
                ring: rx,
                block: 0,
                cursor: None,
                acks: None,
                counts: RxCounts::default(),
                empty_polls: 0,
                odd_turn: false,
            },
            tx: PacketTx {
                ring: tx,
                head: 0,
                pending: 0,
                max_frame_len: caps.max_frame_len,
                frames: 0,
                bytes: 0,
                dropped: 0,
                kicks: 0,
                bursts,
            },
            caps,
            kernel_drops: Cell::new(0),
        }
    }

    /// How many handed-out frames carried a partial checksum (`TP_STATUS_CSUMNOTREADY`):
    /// non-zero means the sender has checksum offload on; the stack accepts those on a
    /// veth only (see the module docs).
    pub fn partial_checksum_count(&self) -> u64 {
        self.rx.counts.csum_not_ready
    }

    /// How many of the frames handed out came from the ACK ring
    /// (`PacketOptions::rx_ack_slots`); 0 without one.
    pub fn ack_ring_frames(&self) -> u64 {
        self.rx.acks.as_ref().map_or(0, |a| a.frames)
    }

    /// The transmit half, concretely typed.
    pub fn packet_tx(&mut self) -> &mut PacketTx {
        &mut self.tx
    }
}

impl BurstTx for PacketTx {
    fn bursts(&mut self) -> &mut Bursts {
        &mut self.bursts
    }

    fn drain_ring(&mut self) -> bool {
        // The ring's frames go first (its `send` hands every ready slot to the device
        // before it returns), so a burst never overtakes the segments or ACKs queued
        // before it. Congestion leaves the slots queued (`flush` returns Ok): the burst
        // waits.
        if self.pending == 0 {
            return true;
        }
        let flushed = self.flush();
        flushed.is_ok() && self.pending == 0
    }

    fn count(&mut self, len: usize, sent: bool) {
        if sent {
            self.frames += 1;
            self.bytes += len as u64;
        } else {
            self.dropped += 1;
        }
    }
}

impl Tx for PacketTx {
    fn send(
        &mut self,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> std::result::Result<(), TxError> {
        if len > self.max_frame_len {
            self.dropped += 1;
            return Err(TxError::TooLarge);
        }
        // Slots are used in ring order, the order the kernel sends them in, so the head
        // slot being busy means the ring is full.
        if !self.ring.fill(self.head, len, fill) {
            self.dropped += 1;
            return Err(TxError::Full);
        }
        self.head += 1;
        if self.head == self.ring.frame_count() {
            self.head = 0;
        }
        self.pending += 1;
        self.frames += 1;
        self.bytes += len as u64;
        Ok(())
    }

    fn send_gso(
        &mut self,
        len: usize,
        gso: Gso,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> std::result::Result<(), TxError> {
        self.burst(len, |b| b.send_filled(len, gso, fill))
    }

    fn send_gso_parts(
        &mut self,
        head: &[u8],
        payload: &[u8],
        gso: Gso,
    ) -> std::result::Result<(), TxError> {
        self.burst(head.len() + payload.len(), |b| {
            b.send_parts(head, payload, gso)
        })
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        self.kicks += 1;
        match self.ring.kick() {
            Ok(_) => {
                self.pending = 0;
                Ok(())
            }
            // Congested: the slots stay queued and go with the next flush.
            Err(e)
                if matches!(
                    e.source.raw_os_error(),
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(match e.source.raw_os_error() {
                Some(libc::ENETDOWN) | Some(libc::ENXIO) => {
                    e.with_hint("the interface is down: `ip link set <if> up`")
                }
                _ => e,
            }),
        }
    }
}

/// Hands out frames of the ACK ring, if there is one, while `*n < until`.
fn take_acks(
    rx: &mut PacketRx,
    tx: &mut PacketTx,
    n: &mut usize,
    until: usize,
    f: &mut dyn FnMut(&[u8], &mut dyn Tx),
) {
    let Some(acks) = &mut rx.acks else {
        return;
    };
    while *n < until {
        let index = acks.next;
        let Some(frame) = acks.ring.frame(index) else {
            break;
        };
        if rx.counts.hand_out(&frame, tx, f) {
            *n += 1;
            acks.frames += 1;
        }
        acks.ring.release(index);
        acks.next = if index + 1 == acks.ring.slot_count() {
            0
        } else {
            index + 1
        };
    }
}

impl Channel for PacketChannel {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> Result<usize> {
        let max = max_count.min(self.caps.batch_count);
        let (rx, tx) = (&mut self.rx, &mut self.tx);
        let mut n = 0;
        // Pure ACKs first: they carry no data for the frames in the blocks to come
        // after (see `ack_filter`), and they free the send window sooner. At most half
        // the batch, then the blocks, then ACKs again if room is left: ACKs are 64-byte
        // frames any host can send, and a flood of them must not keep the blocks, which
        // hold every other frame, from being read (nor a flood of data the ACKs). An odd
        // batch's middle frame goes to each side in turn, so a batch of one alternates.
        rx.odd_turn = !rx.odd_turn;
        take_acks(rx, tx, &mut n, (max + usize::from(rx.odd_turn)) / 2, f);
        while n < max {
            let index = rx.block;
            let Some(block) = rx.ring.block(index) else {
                break;
            };
            let mut cur = rx.cursor.unwrap_or(Cursor {
                remaining: block.frame_count(),
                offset: block.first_offset(),
            });
            while cur.remaining > 0 && n < max {
                let Some(frame) = block.frame(cur.offset) else {
                    // The kernel's layout is inconsistent: nothing after this point can
                    // be trusted, so drop the rest of the block.
                    rx.counts.dropped += u64::from(cur.remaining);
                    cur.remaining = 0;
                    break;
                };
                cur.remaining -= 1;
                cur.offset = frame.next_offset;
                if rx.counts.hand_out(&frame, tx, f) {
                    n += 1;
                }
            }
            if cur.remaining == 0 {
                rx.cursor = None;
                rx.ring.release(index);
                rx.block = if index + 1 == rx.ring.block_count() {
                    0
                } else {
                    index + 1
                };
            } else {
                rx.cursor = Some(cur);
            }
        }
        take_acks(rx, tx, &mut n, max, f);
        if n == 0 {
            rx.empty_polls += 1;
        }
        Ok(n)
    }

    fn tx(&mut self) -> &mut dyn Tx {
        &mut self.tx
    }

    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    fn stats(&self) -> Stats {
        // A failing getsockopt leaves the count where it was; the counters are advisory.
        if let Ok(d) = self.rx.ring.take_drops() {
            self.kernel_drops.set(self.kernel_drops.get() + d);
        }
        if let Some(Ok(d)) = self.rx.acks.as_ref().map(|a| a.ring.take_drops()) {
            self.kernel_drops.set(self.kernel_drops.get() + d);
        }
        Stats {
            rx_frames: self.rx.counts.frames,
            rx_bytes: self.rx.counts.bytes,
            rx_dropped: self.rx.counts.dropped + self.kernel_drops.get(),
            rx_policed: 0,
            tx_frames: self.tx.frames,
            tx_bytes: self.tx.bytes,
            tx_dropped: self.tx.dropped,
            kicks: self.tx.kicks,
            empty_polls: self.rx.empty_polls,
        }
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.rx.acks {
            Some(a) => Some(a.waiter.as_fd()),
            None => Some(self.rx.ring.fd()),
        }
    }
}
