//! A small harness that drives interfaces over `ulnet_channel::sim` in virtual time,
//! each through the runtime's plain driver (`ulnet::runtime::Driver`, a dev-dependency:
//! the stack itself knows no channel), with helpers to build nodes on 198.18.0.0/24 or,
//! for IPv6, 2001:2::/64 (RFC 5180's benchmarking block, 2001:2::/48).
//! The tests read the engine's events themselves, so the harness runs only the driver's
//! I/O phases (receive, transmit, flush), never its event-draining serve phase.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ulnet::runtime::Driver;
use ulnet_channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet_channel::Channel;
use ulnet_stack::iface::{Interface, InterfaceConfig, IpCidr};
use ulnet_stack::time::{Duration, Instant};
use ulnet_wire::EthernetAddress;

pub mod tcp;

pub fn mac(i: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, i])
}

pub fn ip(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, i)
}

pub fn ipa(i: u8) -> IpAddr {
    IpAddr::V4(ip(i))
}

pub fn sa(i: u8, port: u16) -> SocketAddr {
    SocketAddr::new(ipa(i), port)
}

/// Node `i`: MAC 02:00:00:00:00:i, address 198.18.0.i/24.
pub fn config(i: u8) -> InterfaceConfig {
    InterfaceConfig::new(mac(i)).address(IpCidr::new(ipa(i), 24).unwrap())
}

pub fn ip6(i: u8) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, u16::from(i))
}

pub fn ip6a(i: u8) -> IpAddr {
    IpAddr::V6(ip6(i))
}

/// Node `i` over IPv6 only: MAC 02:00:00:00:00:i, address 2001:2::i/64 (and its
/// link-local fe80::ff:fe00:i), DAD on with the default limits.
pub fn config6(i: u8) -> InterfaceConfig {
    InterfaceConfig::new(mac(i)).address(IpCidr::new(ip6a(i), 64).unwrap())
}

/// The address family a test runs over: the same scenario, parametrised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// Node `i`'s address in this family.
    pub fn ip(self, i: u8) -> IpAddr {
        match self {
            Family::V4 => ipa(i),
            Family::V6 => ip6a(i),
        }
    }

    pub fn sa(self, i: u8, port: u16) -> SocketAddr {
        SocketAddr::new(self.ip(i), port)
    }

    /// Node `i`'s configuration. Over IPv6 DAD is off, so that both families start
    /// sending at the same instant and the scenario compares like with like (DAD has
    /// its own tests).
    pub fn config(self, i: u8) -> InterfaceConfig {
        match self {
            Family::V4 => config(i),
            Family::V6 => {
                let mut c = config6(i);
                c.limits.dad_transmits = 0;
                c
            }
        }
    }
}

/// A channel on the simulated wire that can tell when its next frame arrives.
pub trait SimChannel: Channel {
    fn next_arrival(&self) -> Option<std::time::Duration>;
}

impl SimChannel for Endpoint {
    fn next_arrival(&self) -> Option<std::time::Duration> {
        Endpoint::next_arrival(self)
    }
}

impl<W: std::io::Write, F: FnMut() -> std::time::Duration> SimChannel
    for ulnet_channel::pcap::Pcap<Endpoint, W, F>
{
    fn next_arrival(&self) -> Option<std::time::Duration> {
        self.inner().next_arrival()
    }
}

/// Frames one receive takes.
const BATCH: usize = 64;

/// Passes at one instant after which [`Sim::run_until`] declares a livelock. Each pass
/// moves at least one frame or timer, so a finite exchange quiesces long before.
pub const MAX_PASSES_PER_INSTANT: usize = 10_000;

pub struct Node {
    pub iface: Interface,
    pub driver: Driver<Box<dyn SimChannel>>,
}

impl Node {
    pub fn new(iface: Interface, chan: Box<dyn SimChannel>) -> Node {
        let mut driver = Driver::new(chan);
        driver.set_batch_count(BATCH);
        Node { iface, driver }
    }
}

pub struct Sim {
    pub wire: Wire,
    pub nodes: Vec<Node>,
    /// The family the scenario helpers (`common::tcp`) address nodes in.
    pub family: Family,
}

impl Sim {
    pub fn new(wire: Wire) -> Sim {
        Sim {
            wire,
            nodes: Vec::new(),
            family: Family::V4,
        }
    }

    /// Two nodes (198.18.0.1 and .2) on a cable with `link` both ways.
    pub fn pair(seed: u64, link: LinkConfig) -> Sim {
        Sim::pair_in(Family::V4, seed, link)
    }

    /// Two nodes (.1 and .2 of `family`, configured by [`Family::config`]) on a cable
    /// with `link` both ways.
    pub fn pair_in(family: Family, seed: u64, link: LinkConfig) -> Sim {
        let (wire, a, b) = Wire::pair(seed, link.clone(), link);
        let mut sim = Sim::new(wire);
        sim.family = family;
        sim.add(family.config(1), Box::new(a));
        sim.add(family.config(2), Box::new(b));
        sim
    }

    pub fn add(&mut self, config: InterfaceConfig, chan: Box<dyn SimChannel>) -> usize {
        self.nodes.push(Node::new(
            Interface::new(config).expect("valid config"),
            chan,
        ));
        self.nodes.len() - 1
    }

    pub fn endpoint(&self) -> Endpoint {
        self.wire.endpoint()
    }

    pub fn now(&self) -> Instant {
        Instant::from_micros(self.wire.now_micros())
    }

    pub fn iface(&mut self, i: usize) -> &mut Interface {
        &mut self.nodes[i].iface
    }

    /// One pass at the current instant: every node takes its frames, runs egress and
    /// flushes.
    pub fn step(&mut self) {
        let now = self.now();
        for n in &mut self.nodes {
            while n.driver.receive(now, &mut n.iface).expect("rx") > 0 {}
            n.driver.transmit(now, &mut n.iface);
            n.driver.flush().expect("flush");
        }
    }

    /// Instants at which something happens to a node: interface deadlines and frame
    /// arrivals. Frames waiting at raw endpoints the test drives itself do not count.
    fn events(&self) -> impl Iterator<Item = u64> + '_ {
        self.nodes
            .iter()
            .filter_map(|n| n.iface.poll_at())
            .map(|t| t.total_micros())
            .chain(
                self.nodes
                    .iter()
                    .filter_map(|n| n.driver.channel().next_arrival())
                    .map(|d| u64::try_from(d.as_nanos().div_ceil(1000)).unwrap_or(u64::MAX)),
            )
    }

    /// Runs until `done` holds (true) or virtual time passes `deadline` (false).
    ///
    /// At each instant every node is polled until none has anything due at that instant
    /// (no deadline at or before now, no frame arriving now), so an ACK sent in answer to
    /// a frame goes out at the same instant, as a run-to-completion runtime sends it; only
    /// then does time move to the next event. A node that stays due after
    /// [`MAX_PASSES_PER_INSTANT`] passes is a livelock (a layer reporting "now" while it
    /// waits for something), and the run panics rather than hide it by moving time on.
    pub fn run_until(&mut self, deadline: Instant, mut done: impl FnMut(&mut Sim) -> bool) -> bool {
        loop {
            let now = self.wire.now_micros();
            let mut passes = 0;
            loop {
                self.step();
                if done(self) {
                    return true;
                }
                if !self.events().any(|t| t <= now) {
                    break;
                }
                passes += 1;
                assert!(
                    passes < MAX_PASSES_PER_INSTANT,
                    "livelock: a node is still due at {now} us after {passes} passes"
                );
            }
            let next = self.events().filter(|&t| t > now).min().unwrap_or(u64::MAX);
            if next > deadline.total_micros() {
                self.wire
                    .advance_to_micros(deadline.total_micros().max(now));
                self.step();
                return done(self);
            }
            self.wire.advance_to_micros(next);
        }
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now() + d;
        self.run_until(end, |_| false);
    }
}

use ulnet_wire::{
    ChecksumMode, EtherType, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr,
    UdpPacket, UdpRepr,
};

/// An Ethernet frame carrying `payload` with `ethertype`.
pub fn eth_frame(
    src: EthernetAddress,
    dst: EthernetAddress,
    ethertype: EtherType,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = vec![0u8; 14 + payload.len()];
    EthernetRepr {
        src_addr: src,
        dst_addr: dst,
        ethertype,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f[14..].copy_from_slice(payload);
    f
}

/// An IPv4 packet (header from `repr`, its `payload_len` set from `payload`).
pub fn ipv4_packet(mut repr: Ipv4Repr, payload: &[u8]) -> Vec<u8> {
    repr.payload_len = payload.len();
    let mut p = vec![0u8; 20 + payload.len()];
    repr.emit(
        &mut Ipv4Packet::new_unchecked(&mut p[..]),
        ChecksumMode::Full,
    );
    p[20..].copy_from_slice(payload);
    p
}

/// A UDP datagram (header and payload) with its checksum.
pub fn udp_datagram(src: SocketAddr, dst: SocketAddr, data: &[u8]) -> Vec<u8> {
    let mut d = vec![0u8; 8 + data.len()];
    UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
    }
    .emit(
        &mut UdpPacket::new_unchecked(&mut d[..]),
        &src.ip(),
        &dst.ip(),
        data.len(),
        |p| p.copy_from_slice(data),
        ChecksumMode::Full,
    );
    d
}

/// The fragments (as Ethernet frames) of a UDP datagram from node `from` to node `to`,
/// `chunk` payload bytes each (a multiple of 8).
pub fn udp_fragments(from: u8, to: u8, ident: u16, datagram: &[u8], chunk: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < datagram.len() {
        let end = (off + chunk).min(datagram.len());
        let mut repr = Ipv4Repr::new(ip(from), ip(to), IpProtocol::Udp, 0, 64);
        repr.dont_frag = false;
        repr.ident = ident;
        repr.frag_offset = off as u16;
        repr.more_frags = end < datagram.len();
        out.push(eth_frame(
            mac(from),
            mac(to),
            EtherType::Ipv4,
            &ipv4_packet(repr, &datagram[off..end]),
        ));
        off = end;
    }
    out
}

/// Sends raw frames from an endpoint.
pub fn inject(ep: &mut Endpoint, frames: &[Vec<u8>]) {
    for f in frames {
        ep.tx()
            .send(f.len(), &mut |b| b.copy_from_slice(f))
            .expect("inject");
    }
    ep.tx().flush().expect("flush");
}

/// Takes every frame waiting at an endpoint.
pub fn collect(ep: &mut Endpoint) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while ep.rx_batch(64, &mut |f, _| v.push(f.to_vec())).expect("rx") > 0 {}
    v
}
