//! Two interfaces on a simulated cable, each driven by a [`Driver`] in virtual time, with
//! a tap on every frame they transmit: deliberate drops of chosen data segments, and
//! observations the TCP layer does not count (retransmitted bytes, RSTs on the wire).
//! Capture goes through the one pcap adapter, [`Pcap`], stacked over the tap so that a
//! frame the tap drops is still recorded as sent (it was lost on the wire, not unsent).
//!
//! Node A is 198.18.0.1/24 (MAC 02:00:00:00:00:01), node B 198.18.0.2/24
//! (02:00:00:00:00:02); over IPv6 2001:2::1/64 and 2001:2::2/64; endpoint 0 of the wire
//! is A, endpoint 1 is B.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::Duration;

use ulnet::runtime::{App, Driver};
use ulnet_channel::pcap::{Pcap, PcapWriter, Precision};
use ulnet_channel::sim::{Endpoint, LinkStats, Wire};
use ulnet_channel::{Capabilities, Channel, Stats, Tx, TxError};
use ulnet_stack::iface::{Interface, InterfaceConfig, IpCidr};
use ulnet_stack::tcp::Tcp;
use ulnet_stack::time::Instant;
use ulnet_wire::TcpPacket;
use ulnet_wire::{
    EtherType, EthernetAddress, EthernetFrame, IpProtocol, Ipv4Packet, Ipv6Packet, SeqNumber,
};

/// Node A's index in [`Net::nodes`].
pub const A: usize = 0;
/// Node B's index in [`Net::nodes`].
pub const B: usize = 1;

/// Node `i`'s (0 or 1) IPv4 address: 198.18.0.1 and 198.18.0.2.
pub fn node_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, i as u8 + 1)
}

/// Node `i`'s (0 or 1) IPv6 address: 2001:2::1 and 2001:2::2.
pub fn node_ip6(i: usize) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, i as u16 + 1)
}

/// Node `i`'s address in the family asked for.
pub fn node_addr(i: usize, ipv6: bool) -> IpAddr {
    if ipv6 {
        IpAddr::V6(node_ip6(i))
    } else {
        IpAddr::V4(node_ip(i))
    }
}

fn node_mac(i: usize) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, i as u8 + 1])
}

/// What the tap saw of one node's transmissions.
#[derive(Debug, Default, Clone, Copy)]
pub struct TapCounters {
    /// TCP segments carrying payload.
    pub data_segments: u64,
    /// Data segments whose payload (some of it) had been sent before on that flow.
    pub retransmitted_segments: u64,
    /// Payload bytes sent again: below the highest sequence number the flow had sent.
    pub retransmitted_bytes: u64,
    /// Segments with RST set.
    pub rsts: u64,
    /// Segments the harness dropped on purpose.
    pub dropped: u64,
}

/// RSTs remembered between two [`Net::take_rsts`] calls; more are counted, not kept.
const RST_LOG_LEN: usize = 1024;

/// The per-node frame tap.
#[derive(Debug)]
struct Tap {
    /// Highest sequence number sent per flow, keyed by (source port, destination port).
    highest: HashMap<(u16, u16), SeqNumber>,
    /// Data segment numbers to drop, ascending, not yet reached.
    drop: Vec<u64>,
    counters: TapCounters,
    /// (source port, destination port) of RSTs sent since the last `take_rsts`.
    rst_log: Vec<(u16, u16)>,
    scratch: Vec<u8>,
}

impl Tap {
    /// Counts one transmitted frame; true when the harness should lose it.
    fn inspect(&mut self, frame: &[u8]) -> bool {
        let Some(tcp) = tcp_of(frame) else {
            return false;
        };
        let c = &mut self.counters;
        if tcp.rst() {
            c.rsts += 1;
            if self.rst_log.len() < RST_LOG_LEN {
                self.rst_log.push((tcp.src_port(), tcp.dst_port()));
            }
        }
        let len = tcp.payload().len() as u32;
        if len == 0 {
            return false;
        }
        c.data_segments += 1;
        let seq = tcp.seq_number();
        let end = seq + len;
        let key = (tcp.src_port(), tcp.dst_port());
        match self.highest.get_mut(&key) {
            Some(high) => {
                if seq < *high {
                    c.retransmitted_segments += 1;
                    c.retransmitted_bytes += u64::from(high.distance_from(seq).min(len));
                }
                *high = high.max(end);
            }
            None => {
                // Bounded by the flows the stacks hold; the harness owns both ends.
                self.highest.insert(key, end);
            }
        }
        if self.drop.first() == Some(&c.data_segments) {
            self.drop.remove(0);
            c.dropped += 1;
            return true;
        }
        false
    }
}

/// The TCP header of an Ethernet/IPv4/TCP or Ethernet/IPv6/TCP frame, if it is one
/// (unfragmented; our stacks put no extension header in front of TCP).
fn tcp_of(frame: &[u8]) -> Option<TcpPacket<&[u8]>> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    match eth.ethertype() {
        EtherType::Ipv4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            if ip.protocol() != IpProtocol::Tcp || ip.is_fragment() {
                return None;
            }
            TcpPacket::new_checked(ip.payload()).ok()
        }
        EtherType::Ipv6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
            if ip.next_header() != IpProtocol::Tcp {
                return None;
            }
            TcpPacket::new_checked(ip.payload()).ok()
        }
        _ => None,
    }
}

/// A node's end of the cable seen through its tap: every transmitted frame is
/// inspected (and maybe lost) before the wire sees it.
#[derive(Debug)]
struct Tapped {
    ep: Endpoint,
    tap: Tap,
}

/// Sends through the tap into `tx`; true (like a send the wire accepted) for a frame
/// the harness drops on purpose.
fn tap_send(
    tap: &mut Tap,
    tx: &mut dyn Tx,
    len: usize,
    fill: &mut dyn FnMut(&mut [u8]),
) -> Result<(), TxError> {
    if tap.drop.is_empty() {
        // The common case: inspect the frame in place, in the channel's buffer.
        return tx.send(len, &mut |buf| {
            fill(buf);
            tap.inspect(buf);
        });
    }
    // A drop is pending: build the frame aside to decide before the wire sees it.
    let mut scratch = std::mem::take(&mut tap.scratch);
    scratch.clear();
    scratch.resize(len, 0);
    fill(&mut scratch);
    let r = if tap.inspect(&scratch) {
        Ok(())
    } else {
        tx.send(len, &mut |b| b.copy_from_slice(&scratch))
    };
    tap.scratch = scratch;
    r
}

/// The transmit half lent to a receive callback, seen through the tap.
struct TappedTx<'a> {
    tx: &'a mut dyn Tx,
    tap: &'a mut Tap,
}

impl Tx for TappedTx<'_> {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), TxError> {
        tap_send(self.tap, self.tx, len, fill)
    }

    fn flush(&mut self) -> ulnet_channel::Result<()> {
        self.tx.flush()
    }
}

impl Tx for Tapped {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), TxError> {
        tap_send(&mut self.tap, &mut self.ep, len, fill)
    }

    fn flush(&mut self) -> ulnet_channel::Result<()> {
        self.ep.flush()
    }
}

impl Channel for Tapped {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> ulnet_channel::Result<usize> {
        let tap = &mut self.tap;
        self.ep.rx_batch(max_count, &mut |frame, tx| {
            f(frame, &mut TappedTx { tx, tap: &mut *tap });
        })
    }

    fn tx(&mut self) -> &mut dyn Tx {
        self
    }

    fn capabilities(&self) -> Capabilities {
        self.ep.capabilities()
    }

    fn stats(&self) -> Stats {
        self.ep.stats()
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.ep.wait_fd()
    }
}

/// The pcap timestamp source: the wire's virtual time.
type WireClock = Box<dyn FnMut() -> Duration>;

/// A node's channel: the tapped endpoint, captured to a file when asked.
enum NodeChannel {
    Plain(Tapped),
    Captured(Pcap<Tapped, BufWriter<File>, WireClock>),
}

impl NodeChannel {
    fn tapped(&self) -> &Tapped {
        match self {
            NodeChannel::Plain(t) => t,
            NodeChannel::Captured(p) => p.inner(),
        }
    }

    fn tapped_mut(&mut self) -> &mut Tapped {
        match self {
            NodeChannel::Plain(t) => t,
            NodeChannel::Captured(p) => p.inner_mut(),
        }
    }

    fn as_channel(&mut self) -> &mut dyn Channel {
        match self {
            NodeChannel::Plain(t) => t,
            NodeChannel::Captured(p) => p,
        }
    }
}

impl fmt::Debug for NodeChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let captured = matches!(self, NodeChannel::Captured(_));
        f.debug_struct("NodeChannel")
            .field("tapped", self.tapped())
            .field("captured", &captured)
            .finish()
    }
}

impl Channel for NodeChannel {
    fn rx_batch(
        &mut self,
        max_count: usize,
        f: &mut dyn FnMut(&[u8], &mut dyn Tx),
    ) -> ulnet_channel::Result<usize> {
        self.as_channel().rx_batch(max_count, f)
    }

    fn tx(&mut self) -> &mut dyn Tx {
        self.as_channel().tx()
    }

    fn capabilities(&self) -> Capabilities {
        self.tapped().capabilities()
    }

    fn stats(&self) -> Stats {
        self.tapped().stats()
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

/// One node: its interface, its end of the cable, its tap.
#[derive(Debug)]
pub struct Node {
    /// The interface (with the TCP layer attached).
    pub iface: Interface,
    driver: Driver<NodeChannel>,
}

impl Node {
    /// The TCP layer.
    pub fn tcp(&self) -> &Tcp {
        self.iface
            .tcp()
            .expect("the harness attaches TCP to every node")
    }

    /// The TCP layer, mutably.
    pub fn tcp_mut(&mut self) -> &mut Tcp {
        self.iface
            .tcp_mut()
            .expect("the harness attaches TCP to every node")
    }

    /// What the tap saw of this node's transmissions.
    pub fn tap(&self) -> TapCounters {
        self.driver.channel().tapped().tap.counters
    }
}

/// Two nodes on a simulated cable.
#[derive(Debug)]
pub struct Net {
    /// The cable and its virtual clock.
    pub wire: Wire,
    /// Node A (index [`A`]) and node B (index [`B`]).
    pub nodes: [Node; 2],
}

/// How the two nodes are built.
#[derive(Debug)]
pub struct NetConfig<'a> {
    /// Link MTU.
    pub mtu: usize,
    /// Pre-load the neighbour caches.
    pub static_arp: bool,
    /// The two TCP layers, A's then B's.
    pub tcp: [Tcp; 2],
    /// Capture node A's and node B's frames here.
    pub pcap: [Option<&'a Path>; 2],
    /// A's data segments to drop (numbered from 1).
    pub drop_segments: Vec<u64>,
    /// Address the nodes over IPv6 (DAD off) instead of IPv4.
    pub ipv6: bool,
}

impl Net {
    /// Builds the two nodes on `wire` (whose endpoints 0 and 1 are `ea` and `eb`).
    ///
    /// # Errors
    /// An invalid MTU, or the pcap file failing to open.
    pub fn new(wire: Wire, ea: Endpoint, eb: Endpoint, cfg: NetConfig<'_>) -> io::Result<Net> {
        wire.set_mtu(cfg.mtu);
        let [ta, tb] = cfg.tcp;
        let mut drop = cfg.drop_segments;
        drop.sort_unstable();
        drop.dedup();
        drop.retain(|&n| n > 0);
        let mut nodes = Vec::with_capacity(2);
        for (i, (ep, tcp)) in [(ea, ta), (eb, tb)].into_iter().enumerate() {
            let prefix = if cfg.ipv6 { 64 } else { 24 };
            let mut config = InterfaceConfig::new(node_mac(i))
                .address(IpCidr::new(node_addr(i, cfg.ipv6), prefix).expect("valid prefix"))
                .mtu(cfg.mtu);
            config.limits.dad_transmits = 0;
            let mut iface = Interface::new(config)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
            if cfg.static_arp {
                let peer = 1 - i;
                iface
                    .add_static_neighbor(node_addr(peer, cfg.ipv6), node_mac(peer))
                    .map_err(|e| io::Error::other(format!("{e:?}")))?;
            }
            iface.set_tcp(tcp);
            let tapped = Tapped {
                ep,
                tap: Tap {
                    highest: HashMap::new(),
                    drop: if i == A { drop.clone() } else { Vec::new() },
                    counters: TapCounters::default(),
                    rst_log: Vec::new(),
                    scratch: Vec::new(),
                },
            };
            let channel = match cfg.pcap[i] {
                Some(path) => {
                    let writer = PcapWriter::create(path, Precision::Nanos)?;
                    let clock: WireClock = {
                        let wire = wire.clone();
                        Box::new(move || wire.now())
                    };
                    NodeChannel::Captured(Pcap::new(tapped, writer, clock))
                }
                None => NodeChannel::Plain(tapped),
            };
            let mut driver = Driver::new(channel);
            // Every frame that has arrived, in one call per pass.
            driver.set_batch_count(usize::MAX);
            nodes.push(Node { iface, driver });
        }
        let nodes: [Node; 2] = nodes.try_into().expect("two nodes");
        Ok(Net { wire, nodes })
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        Instant::from_micros(self.wire.now_micros())
    }

    /// Every node takes the frames that have arrived, carrying each through its stack
    /// (the drivers' receive phase).
    pub fn ingress(&mut self) {
        let now = self.now();
        for n in &mut self.nodes {
            // The simulator's endpoint never fails; a failure would only end the batch.
            while let Ok(count) = n.driver.receive(now, &mut n.iface) {
                if count == 0 {
                    break;
                }
            }
        }
    }

    /// Node `i`'s readiness events since its last [`serve`](Self::serve) shown to `app`
    /// (the driver's serve phase).
    pub fn serve(&mut self, i: usize, app: &mut dyn App) {
        let now = self.now();
        let n = &mut self.nodes[i];
        n.driver.serve(now, &mut n.iface, app);
    }

    /// Every node runs its timers and sends what its sockets queued, then flushes (the
    /// drivers' transmit and flush phases).
    pub fn egress(&mut self) {
        let now = self.now();
        for n in &mut self.nodes {
            // Events egress raises stay in the layers until the next serve drains them
            // (no `drain_events` here, unlike the runtime: nothing sleeps on them).
            n.driver.transmit(now, &mut n.iface);
            // The simulator's flush cannot fail.
            let _ = n.driver.flush();
        }
    }

    /// The instants, in microseconds, at which a stack or the wire has work.
    fn events(&self) -> impl Iterator<Item = u64> + '_ {
        self.nodes
            .iter()
            .filter_map(|n| n.iface.poll_at())
            .map(Instant::total_micros)
            .chain(self.wire.next_event_micros())
    }

    /// The next instant, in microseconds, at which a stack or the wire has work; `None`
    /// when nothing will ever happen again.
    pub fn next_event_micros(&self) -> Option<u64> {
        self.events().min()
    }

    /// The earliest such instant strictly after `now` (µs).
    pub fn next_event_after(&self, now: u64) -> Option<u64> {
        self.events().filter(|&t| t > now).min()
    }

    /// The (source port, destination port) of the RSTs node `i` sent since the last
    /// call (at most the first 1024 of them).
    pub fn take_rsts(&mut self, i: usize) -> Vec<(u16, u16)> {
        std::mem::take(&mut self.nodes[i].driver.channel_mut().tapped_mut().tap.rst_log)
    }

    /// The wire's counters for the link `from` → `to` (node indices).
    pub fn link_stats(&self, from: usize, to: usize) -> LinkStats {
        self.wire.link_stats(from, to)
    }

    /// Flushes the capture files.
    ///
    /// # Errors
    /// The first error writing a capture.
    pub fn finish_capture(&mut self) -> io::Result<()> {
        for n in &mut self.nodes {
            if let NodeChannel::Captured(p) = n.driver.channel_mut() {
                p.flush_capture()?;
            }
        }
        Ok(())
    }
}
