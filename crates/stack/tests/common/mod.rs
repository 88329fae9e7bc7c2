//! A small harness that drives interfaces over `ulnet_channel::sim` in virtual time:
//! the loop documented on `Interface`, with helpers to build nodes on 198.18.0.0/24.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use ulnet_channel::sim::{Endpoint, LinkConfig, Wire};
use ulnet_channel::{Channel, Tx};
use ulnet_stack::iface::{Interface, InterfaceConfig, IpCidr, TxSink};
use ulnet_stack::time::{Duration, Instant};
use ulnet_wire::EthernetAddress;

/// A channel's transmit half as the interface's sink.
pub struct Sink<'a>(pub &'a mut dyn Tx);

impl TxSink for Sink<'_> {
    fn send(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.0.send(len, fill).is_ok()
    }
}

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

pub struct Node {
    pub iface: Interface,
    pub chan: Box<dyn Channel>,
}

pub struct Sim {
    pub wire: Wire,
    pub nodes: Vec<Node>,
}

impl Sim {
    pub fn new(wire: Wire) -> Sim {
        Sim {
            wire,
            nodes: Vec::new(),
        }
    }

    /// Two nodes (198.18.0.1 and .2) on a cable with `link` both ways.
    pub fn pair(seed: u64, link: LinkConfig) -> Sim {
        let (wire, a, b) = Wire::pair(seed, link.clone(), link);
        let mut sim = Sim::new(wire);
        sim.add(config(1), Box::new(a));
        sim.add(config(2), Box::new(b));
        sim
    }

    pub fn add(&mut self, config: InterfaceConfig, chan: Box<dyn Channel>) -> usize {
        self.nodes.push(Node {
            iface: Interface::new(config).expect("valid config"),
            chan,
        });
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
            let iface = &mut n.iface;
            n.chan
                .rx_batch(64, &mut |frame, tx| iface.ingress(now, frame, &mut Sink(tx)))
                .expect("rx");
            iface.egress(now, &mut Sink(n.chan.tx()));
            n.chan.tx().flush().expect("flush");
        }
    }

    /// The next instant anything happens, if anything will.
    pub fn next_event(&self) -> Option<u64> {
        self.nodes
            .iter()
            .filter_map(|n| n.iface.poll_at())
            .map(|t| t.total_micros())
            .chain(self.wire.next_event_micros())
            .min()
    }

    /// Runs until `done` holds (true) or virtual time passes `deadline` (false).
    pub fn run_until(&mut self, deadline: Instant, mut done: impl FnMut(&mut Sim) -> bool) -> bool {
        let mut same_instant = 0;
        loop {
            self.step();
            if done(self) {
                return true;
            }
            let now = self.wire.now_micros();
            let next = self.next_event().unwrap_or(u64::MAX);
            if next <= now {
                same_instant += 1;
                assert!(same_instant < 10_000, "livelock at {now} us");
                continue;
            }
            same_instant = 0;
            if next > deadline.total_micros() {
                self.wire.advance_to_micros(deadline.total_micros().max(now));
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
