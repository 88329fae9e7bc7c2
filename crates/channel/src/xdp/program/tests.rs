//! The steering program run in the kernel through `BPF_PROG_TEST_RUN` (no device, no
//! namespace): steered frames return `XDP_DROP` as a marker, the rest `XDP_PASS`.

use super::*;
use crate::xdp::steer::{load, FlowRule, SteeringMaps, SynPolicer};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const OURS4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const OTHER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const OURS6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0x12, 0x3456);

fn eth(vlan: bool, ethertype: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    if vlan {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn ipv4(vlan: bool, dst: Ipv4Addr, proto: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
    let mut f = eth(vlan, 0x0800);
    let total = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1]);
    f.extend_from_slice(&frag.to_be_bytes());
    f.extend_from_slice(&[64, proto, 0, 0, 198, 18, 0, 9]);
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(l4);
    f
}

fn udp(dport: u16) -> Vec<u8> {
    let mut l4 = vec![0x30, 0x39];
    l4.extend_from_slice(&dport.to_be_bytes());
    l4.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
    l4
}

fn arp(tpa: Ipv4Addr) -> Vec<u8> {
    let mut f = eth(false, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 198, 18, 0, 9]);
    f.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&tpa.octets());
    f
}

fn ipv6(dst: Ipv6Addr, nh: u8, l4: &[u8]) -> Vec<u8> {
    ipv6_tagged(false, dst, nh, l4)
}

fn ipv6_tagged(vlan: bool, dst: Ipv6Addr, nh: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = eth(vlan, 0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    f.extend_from_slice(&[nh, 64]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(l4);
    f
}

struct Fixture {
    _maps: SteeringMaps,
    prog: crate::sys::bpf::Program,
}

impl Fixture {
    fn new(rules: &[FlowRule]) -> Self {
        Self::with(&[IpAddr::V4(OURS4), IpAddr::V6(OURS6)], rules)
    }

    fn with(addrs: &[IpAddr], rules: &[FlowRule]) -> Self {
        let maps = SteeringMaps::create(1, None).expect("bpf maps (needs root or CAP_BPF)");
        for a in addrs {
            maps.add_address(*a).unwrap();
        }
        for r in rules {
            maps.add_rule(*r).unwrap();
        }
        let prog = load(&maps, !rules.is_empty(), false, Steer::Verdict(XDP_DROP)).unwrap();
        Fixture { _maps: maps, prog }
    }

    fn verdict(&self, frame: &[u8]) -> i32 {
        let mut f = frame.to_vec();
        // BPF_PROG_TEST_RUN wants at least an Ethernet header; pad runts like a NIC would.
        f.resize(f.len().max(60), 0);
        self.prog.test_run(&f).unwrap() as i32
    }
}

#[test]
fn without_rules_steers_by_address() {
    let fx = Fixture::new(&[]);
    assert_eq!(fx.verdict(&ipv4(false, OURS4, 17, 0, &udp(7))), XDP_DROP);
    assert_eq!(
        fx.verdict(&ipv4(false, OURS4, 1, 0, &[8, 0, 0, 0])),
        XDP_DROP
    );
    assert_eq!(
        fx.verdict(&ipv4(true, OURS4, 6, 0, &udp(80))),
        XDP_DROP,
        "VLAN-tagged"
    );
    assert_eq!(fx.verdict(&ipv4(false, OTHER4, 17, 0, &udp(7))), XDP_PASS);
    assert_eq!(fx.verdict(&arp(OURS4)), XDP_DROP);
    assert_eq!(fx.verdict(&arp(OTHER4)), XDP_PASS);
    assert_eq!(fx.verdict(&ipv6(OURS6, 17, &udp(7))), XDP_DROP);
    let sn: Ipv6Addr = "ff02::1:ff12:3456".parse().unwrap();
    assert_eq!(
        fx.verdict(&ipv6(sn, 58, &[135, 0, 0, 0])),
        XDP_DROP,
        "neighbour solicitation"
    );
    assert_eq!(
        fx.verdict(&ipv6("2001:db8::99".parse().unwrap(), 17, &udp(7))),
        XDP_PASS
    );
}

#[test]
fn with_rules_steers_matching_flows_only() {
    let fx = Fixture::new(&[
        FlowRule::udp(5000),
        FlowRule::icmp(),
        FlowRule {
            protocol: 6,
            dst_port: 0,
        },
    ]);
    assert_eq!(fx.verdict(&ipv4(false, OURS4, 17, 0, &udp(5000))), XDP_DROP);
    assert_eq!(fx.verdict(&ipv4(false, OURS4, 17, 0, &udp(5001))), XDP_PASS);
    assert_eq!(
        fx.verdict(&ipv4(false, OURS4, 6, 0, &udp(22))),
        XDP_DROP,
        "TCP wildcard"
    );
    assert_eq!(
        fx.verdict(&ipv4(false, OURS4, 1, 0, &[8, 0, 0, 0])),
        XDP_DROP
    );
    assert_eq!(
        fx.verdict(&ipv4(false, OURS4, 47, 0, &[0; 8])),
        XDP_PASS,
        "GRE: no rule"
    );
    assert_eq!(
        fx.verdict(&ipv4(false, OTHER4, 17, 0, &udp(5000))),
        XDP_PASS,
        "not our address"
    );
    // A non-first fragment has no port: it goes by address.
    assert_eq!(
        fx.verdict(&ipv4(false, OURS4, 17, 0x0010, &[0; 8])),
        XDP_DROP
    );
    assert_eq!(
        fx.verdict(&ipv4(false, OTHER4, 17, 0x0010, &[0; 8])),
        XDP_PASS
    );
    // ARP is steered regardless of rules.
    assert_eq!(fx.verdict(&arp(OURS4)), XDP_DROP);
    assert_eq!(fx.verdict(&ipv6(OURS6, 17, &udp(5000))), XDP_DROP);
    assert_eq!(fx.verdict(&ipv6(OURS6, 17, &udp(9))), XDP_PASS);
    assert_eq!(
        fx.verdict(&ipv6(OURS6, 58, &[128, 0, 0, 0])),
        XDP_DROP,
        "ICMPv6 by address"
    );
}

#[test]
fn truncated_and_foreign_frames_pass() {
    let fx = Fixture::new(&[FlowRule::udp(5000)]);
    // A UDP header cut short: the kernel judges it.
    let mut short = ipv4(false, OURS4, 17, 0, &udp(5000));
    short.truncate(14 + 20 + 2);
    let prog_input = short.clone();
    assert_eq!(fx.prog.test_run(&prog_input).unwrap() as i32, XDP_PASS);
    // IHL below 5 is malformed.
    let mut bad = ipv4(false, OURS4, 17, 0, &udp(5000));
    bad[14] = 0x44;
    assert_eq!(fx.verdict(&bad), XDP_PASS);
    // IPv4 EtherType with an IPv6 version nibble.
    let mut v = ipv4(false, OURS4, 17, 0, &udp(5000));
    v[14] = 0x65;
    assert_eq!(fx.verdict(&v), XDP_PASS);
    // Unknown EtherType.
    let mut f = eth(false, 0x88cc);
    f.extend_from_slice(&[0; 46]);
    assert_eq!(fx.verdict(&f), XDP_PASS);
    // Bare Ethernet header.
    assert_eq!(
        fx.prog.test_run(&eth(false, 0x0800)).unwrap() as i32,
        XDP_PASS
    );
}

#[test]
fn options_shift_the_l4_header() {
    let fx = Fixture::new(&[FlowRule::udp(5000)]);
    // IHL 6: four bytes of options (a NOP-padded option) before the UDP header.
    let mut l4 = vec![1, 1, 1, 0];
    l4.extend_from_slice(&udp(5000));
    let mut f = ipv4(false, OURS4, 17, 0, &l4);
    f[14] = 0x46;
    assert_eq!(fx.verdict(&f), XDP_DROP);
    // Same bytes read as IHL 5 would see port 0x0101 (257): no match.
    f[14] = 0x45;
    assert_eq!(fx.verdict(&f), XDP_PASS);
}

#[test]
fn redirect_variants_pass_the_verifier() {
    for policer in [None, Some(SynPolicer::default())] {
        let maps = SteeringMaps::create(4, policer.as_ref()).unwrap();
        for (rules, frags) in [(false, false), (true, false), (false, true), (true, true)] {
            let p = load(&maps, rules, frags, Steer::Redirect).unwrap();
            // No socket in the XSKMAP: the redirect falls back to XDP_PASS.
            for frame in [
                ipv4(false, OURS4, 17, 0, &udp(5000)),
                ipv4(false, OURS4, 6, 0, &tcp(80, TCP_SYN as u8)),
            ] {
                assert_eq!(p.test_run(&frame).unwrap() as i32, XDP_PASS);
            }
        }
    }
}

/// A TCP header to `dport` with `flags` (no options).
fn tcp(dport: u16, flags: u8) -> Vec<u8> {
    let mut h = vec![0x30, 0x39];
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    h
}

/// `ipv4` from `src` instead of the fixed sender.
fn ipv4_from(src: Ipv4Addr, dst: Ipv4Addr, l4: &[u8]) -> Vec<u8> {
    let mut f = ipv4(false, dst, 6, 0, l4);
    f[26..30].copy_from_slice(&src.octets());
    f
}

/// `ipv6` from `src` instead of the fixed sender.
fn ipv6_from(src: Ipv6Addr, l4: &[u8]) -> Vec<u8> {
    let mut f = ipv6(OURS6, 6, l4);
    f[22..38].copy_from_slice(&src.octets());
    f
}

/// The policer with rates so low (1 per second) that nothing refills during a test:
/// the global bucket passes 3 SYNs (1 + burst 2), each source 4 more (1 + burst 3).
/// Steered frames return `XDP_TX`, so the policer's `XDP_DROP` stands out.
fn policed(rules: &[FlowRule]) -> (SteeringMaps, crate::sys::bpf::Program) {
    let p = SynPolicer {
        rate: 1,
        burst: 2,
        per_source_rate: 1,
        per_source_burst: 3,
        sources: 16,
    };
    let maps = SteeringMaps::create(1, Some(&p)).unwrap();
    maps.add_address(IpAddr::V4(OURS4)).unwrap();
    maps.add_address(IpAddr::V6(OURS6)).unwrap();
    for r in rules {
        maps.add_rule(*r).unwrap();
    }
    let prog = load(&maps, !rules.is_empty(), false, Steer::Verdict(XDP_TX)).unwrap();
    (maps, prog)
}

const XDP_TX: i32 = 3;
const SYN: u8 = TCP_SYN as u8;

fn run(p: &crate::sys::bpf::Program, f: &[u8]) -> i32 {
    let mut f = f.to_vec();
    f.resize(f.len().max(60), 0);
    p.test_run(&f).unwrap() as i32
}

#[test]
fn syn_policer_drops_a_flood_from_one_host_and_passes_a_quiet_one() {
    for rules in [&[][..], &[FlowRule::tcp(80)][..]] {
        let (maps, p) = policed(rules);
        let x = Ipv4Addr::new(198, 18, 0, 77);
        let verdicts: Vec<i32> = (0..20)
            .map(|_| run(&p, &ipv4_from(x, OURS4, &tcp(80, SYN))))
            .collect();
        let passed = verdicts.iter().filter(|&&v| v == XDP_TX).count();
        assert_eq!(passed, 3 + 4, "{verdicts:?} (rules {rules:?})");
        assert!(verdicts[7..].iter().all(|&v| v == XDP_DROP), "{verdicts:?}");
        assert_eq!(maps.syn_dropped().unwrap(), 13);
        // A quiet host gets through while the global bucket is empty.
        let y = Ipv4Addr::new(198, 18, 0, 78);
        assert_eq!(run(&p, &ipv4_from(y, OURS4, &tcp(80, SYN))), XDP_TX);
        // Only SYNs without ACK are policed: the flooding host's open connections and
        // its handshakes' answers still flow.
        for flags in [0x10, 0x18, SYN | 0x10, 0x04, 0x11] {
            assert_eq!(
                run(&p, &ipv4_from(x, OURS4, &tcp(80, flags))),
                XDP_TX,
                "flags {flags:#x}"
            );
        }
        // Not ulnet's (other address) goes to the kernel unpoliced.
        assert_eq!(run(&p, &ipv4_from(x, OTHER4, &tcp(80, SYN))), XDP_PASS);
        if !rules.is_empty() {
            // Nor a port ulnet does not serve.
            assert_eq!(run(&p, &ipv4_from(x, OURS4, &tcp(81, SYN))), XDP_PASS);
        }
        assert_eq!(maps.syn_dropped().unwrap(), 13, "nothing else counted");
        // UDP is never policed (steered when no rule limits it).
        let mut u = ipv4(false, OURS4, 17, 0, &udp(80));
        u[26..30].copy_from_slice(&x.octets());
        let want = if rules.is_empty() { XDP_TX } else { XDP_PASS };
        assert_eq!(run(&p, &u), want, "rules {rules:?}");
    }
}

#[test]
fn syn_policer_keys_ipv6_sources_by_their_slash_64() {
    let (maps, p) = policed(&[]);
    let (a, b) = (v6("2001:2:0:7::1"), v6("2001:2:0:7::2"));
    // 3 on the global bucket, then a's /64 gets 4, shared with b.
    let passed = (0..10)
        .map(|i| {
            run(
                &p,
                &ipv6_from(if i % 2 == 0 { a } else { b }, &tcp(80, SYN)),
            )
        })
        .filter(|&v| v == XDP_TX)
        .count();
    assert_eq!(passed, 7);
    assert_eq!(maps.syn_dropped().unwrap(), 3);
    // Another /64 is another source.
    assert_eq!(
        run(&p, &ipv6_from(v6("2001:2:0:8::1"), &tcp(80, SYN))),
        XDP_TX
    );
    // A truncated TCP header is not judged here.
    let short = ipv6_from(a, &tcp(80, SYN)[..12]);
    assert_eq!(run(&p, &short[..short.len()]), XDP_TX);
}

const LINK_LOCAL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0075, 0x6cff, 0xfe00, 0x010a);

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// An ICMPv6 message header (type, code, checksum left zero) with `body`.
fn icmp6(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, 0, 0, 0];
    m.extend_from_slice(body);
    m
}

#[test]
fn ipv6_link_local_and_neighbour_discovery_groups_are_steered() {
    // Issue 15: ulnet's link-local and global addresses, their solicited-node groups and
    // all-nodes reach the socket; other groups and other hosts' addresses stay with the
    // kernel.
    let fx = Fixture::with(&[IpAddr::V6(OURS6), IpAddr::V6(LINK_LOCAL)], &[]);
    let ns = icmp6(135, &[0; 20]);
    assert_eq!(
        fx.verdict(&ipv6(LINK_LOCAL, 58, &ns)),
        XDP_DROP,
        "NS to the link-local"
    );
    assert_eq!(
        fx.verdict(&ipv6(v6("ff02::1:ff00:10a"), 58, &ns)),
        XDP_DROP,
        "NS to the link-local's solicited-node group"
    );
    assert_eq!(
        fx.verdict(&ipv6(v6("ff02::1:ff12:3456"), 58, &ns)),
        XDP_DROP,
        "NS to the global's solicited-node group"
    );
    assert_eq!(
        fx.verdict(&ipv6(v6("ff02::1"), 58, &icmp6(134, &[0; 12]))),
        XDP_DROP,
        "router advertisement to all-nodes"
    );
    assert_eq!(
        fx.verdict(&ipv6_tagged(true, v6("ff02::1"), 58, &icmp6(136, &[0; 20]))),
        XDP_DROP,
        "VLAN-tagged neighbour advertisement to all-nodes"
    );
    assert_eq!(
        fx.verdict(&ipv6(v6("ff02::2"), 58, &icmp6(133, &[0; 4]))),
        XDP_PASS,
        "router solicitation to all-routers: not for a host"
    );
    assert_eq!(
        fx.verdict(&ipv6(v6("ff02::1:ff99:9999"), 58, &ns)),
        XDP_PASS,
        "another address's solicited-node group"
    );
    assert_eq!(
        fx.verdict(&ipv6(v6("fe80::1"), 58, &icmp6(128, &[0; 4]))),
        XDP_PASS,
        "another link-local"
    );
    assert_eq!(
        fx.verdict(&ipv6(OURS6, 6, &udp(80))),
        XDP_DROP,
        "TCP to the global address"
    );
}

#[test]
fn ipv4_only_leaves_ipv6_multicast_to_the_kernel() {
    let fx = Fixture::with(&[IpAddr::V4(OURS4)], &[]);
    assert_eq!(
        fx.verdict(&ipv6(v6("ff02::1"), 58, &icmp6(134, &[0; 12]))),
        XDP_PASS
    );
    assert_eq!(fx.verdict(&ipv4(false, OURS4, 17, 0, &udp(7))), XDP_DROP);
}

#[test]
fn ipv6_extension_headers_go_by_address_under_rules() {
    let fx = Fixture::new(&[FlowRule::tcp(80)]);
    // A destination-options header (8 bytes: next header TCP, length 0, PadN) before
    // TCP: the port is not at offset 40, so the packet goes by address.
    let mut l4 = vec![6, 0, 1, 4, 0, 0, 0, 0];
    l4.extend_from_slice(&udp(80));
    assert_eq!(
        fx.verdict(&ipv6(OURS6, 60, &l4)),
        XDP_DROP,
        "destination options"
    );
    assert_eq!(fx.verdict(&ipv6(OURS6, 0, &l4)), XDP_DROP, "hop-by-hop");
    assert_eq!(fx.verdict(&ipv6(OURS6, 43, &l4)), XDP_DROP, "routing");
    assert_eq!(fx.verdict(&ipv6(OURS6, 44, &l4)), XDP_DROP, "fragment");
    assert_eq!(
        fx.verdict(&ipv6(v6("2001:db8::99"), 60, &l4)),
        XDP_PASS,
        "not our address"
    );
    assert_eq!(fx.verdict(&ipv6(OURS6, 6, &udp(80))), XDP_DROP);
    assert_eq!(fx.verdict(&ipv6(OURS6, 6, &udp(81))), XDP_PASS, "no rule");
    assert_eq!(
        fx.verdict(&ipv6(v6("ff02::1"), 17, &udp(80))),
        XDP_PASS,
        "UDP to all-nodes without a UDP rule"
    );
    assert_eq!(
        fx.verdict(&ipv6(v6("ff02::1"), 58, &icmp6(134, &[0; 12]))),
        XDP_DROP,
        "ICMPv6 to all-nodes by address"
    );
    // A v6 header cut short of its 40 bytes (after padding to 60, still short: a
    // VLAN tag + 40 > 60 is not possible here, so cut the frame and skip padding).
    let mut short = ipv6(OURS6, 6, &udp(80));
    short.truncate(14 + 39);
    assert_eq!(fx.prog.test_run(&short).unwrap() as i32, XDP_PASS);
    // Version nibble 4 under the IPv6 EtherType.
    let mut bad = ipv6(OURS6, 6, &udp(80));
    bad[14] = 0x40;
    assert_eq!(fx.verdict(&bad), XDP_PASS);
}
