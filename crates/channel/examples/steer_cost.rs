//! What the steering program costs a frame, measured in the kernel with
//! `BPF_PROG_TEST_RUN` (`repeat` runs, the kernel's mean time per run): with and without
//! the SYN policer, with and without flow rules, for a TCP data segment, a UDP datagram
//! and a SYN (which, a million times over, is mostly policed). Needs root; no device,
//! no namespace.
//!
//! ```text
//! cargo run --release -p ulnet-channel --example steer_cost -- [REPEAT]
//! ```

use std::net::{IpAddr, Ipv4Addr};

use ulnet_channel::xdp::program::{Steer, XDP_DROP};
use ulnet_channel::xdp::steer::load;
use ulnet_channel::xdp::{FlowRule, SteeringMaps, SynPolicer};

const OURS: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

/// Ethernet, IPv4 (no options) and `l4` (checksums left zero: the program reads none).
fn frame(proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    let total = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0, 198, 18, 0, 9]);
    f.extend_from_slice(&OURS.octets());
    f.extend_from_slice(l4);
    f
}

fn tcp(flags: u8, payload: usize) -> Vec<u8> {
    let mut h = vec![
        0x30, 0x39, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0,
    ];
    h.resize(20 + payload, 0x5a);
    frame(6, &h)
}

fn udp(payload: usize) -> Vec<u8> {
    let len = (8 + payload) as u16;
    let mut h = vec![0x30, 0x39, 0, 80];
    h.extend_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.resize(8 + payload, 0x5a);
    frame(17, &h)
}

fn main() {
    let repeat: u32 = std::env::args().nth(1).map_or(1_000_000, |s| {
        s.parse().expect("usage: steer_cost [REPEAT]")
    });
    let frames = [
        ("TCP data, 1448 B", tcp(0x10, 1448)),
        ("UDP, 1400 B", udp(1400)),
        ("TCP SYN", tcp(0x02, 0)),
    ];
    println!("ns per frame (BPF_PROG_TEST_RUN, {repeat} runs each)");
    println!(
        "{:<18} {:>10} {:>10} {:>10} {:>10}",
        "frame", "plain", "policer", "rules", "rules+pol"
    );
    for (name, f) in &frames {
        let mut row = Vec::new();
        for rules in [false, true] {
            for policer in [None, Some(SynPolicer::default())] {
                let maps = SteeringMaps::create(1, policer.as_ref()).expect("bpf maps (root?)");
                maps.add_address(IpAddr::V4(OURS)).expect("address");
                if rules {
                    maps.add_rule(FlowRule::tcp(80)).expect("rule");
                    maps.add_rule(FlowRule::udp(80)).expect("rule");
                }
                // Steered frames return XDP_DROP here: the cost of the decision only.
                let p = load(&maps, rules, false, Steer::Verdict(XDP_DROP)).expect("load");
                let (_, ns) = p.test_run_repeat(f, repeat).expect("test run");
                row.push(ns);
            }
        }
        println!(
            "{:<18} {:>10} {:>10} {:>10} {:>10}",
            name, row[0], row[1], row[2], row[3]
        );
    }
}
