//! Fuzz targets for the `wire` parsers, shared by the libFuzzer binaries in
//! `fuzz_targets/` and by the stable-toolchain `smoke` runner.
//!
//! Each target takes arbitrary bytes and must never panic. Beyond "no panic", each checks
//! an oracle: whatever parses must emit back to bytes that parse to the same value
//! (`parse(emit(parse(x))) == parse(x)`), and `check_len` success makes every getter
//! safe. See docs/fuzzing.md for how to run them.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ulnet_wire::*;

const SRC4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const DST4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
const SRC6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
const DST6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));

/// A fuzz target: takes arbitrary bytes, panics only on a bug.
pub type Target = fn(&[u8]);

/// Every target, by name, as the `smoke` runner and docs list them.
pub const TARGETS: &[(&str, Target)] = &[
    ("ethernet", ethernet),
    ("arp", arp),
    ("ipv4", ipv4),
    ("icmp", icmp),
    ("udp", udp),
    ("tcp", tcp),
    ("pretty", pretty),
    ("ipv6", ipv6),
    ("icmpv6", icmpv6),
];

/// An Ethernet frame: header view, repr round trip, and the layers below it.
pub fn ethernet(data: &[u8]) {
    let Ok(frame) = EthernetFrame::new_checked(data) else {
        return;
    };
    let repr = EthernetRepr::parse(&frame).expect("checked frame parses");
    let mut out = [0u8; 14];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
    assert_eq!(&out[..], &data[..14]);
    match repr.ethertype {
        EtherType::Arp => arp(frame.payload()),
        EtherType::Ipv4 => ipv4(frame.payload()),
        EtherType::Ipv6 => ipv6(frame.payload()),
        _ => {}
    }
}

/// An ARP packet.
pub fn arp(data: &[u8]) {
    let Ok(packet) = ArpPacket::new_checked(data) else {
        return;
    };
    let _ = (packet.source_hardware_addr(), packet.target_protocol_addr());
    if let Ok(repr) = ArpRepr::parse(&packet) {
        let mut out = [0u8; 28];
        repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
        let again = ArpRepr::parse(&ArpPacket::new_checked(&out[..]).unwrap());
        assert_eq!(again, Ok(repr));
    }
}

/// An IPv4 datagram, then its transport payload (unless it is a later fragment).
pub fn ipv4(data: &[u8]) {
    let Ok(packet) = Ipv4Packet::new_checked(data) else {
        return;
    };
    let _ = (
        packet.options(),
        packet.verify_checksum(),
        packet.frag_offset(),
    );
    let Ok(repr) = Ipv4Repr::parse(&packet, ChecksumMode::Offload) else {
        return;
    };
    assert_eq!(repr.payload_len, packet.payload().len());
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Ipv4Packet::new_unchecked(&mut out[..]),
        ChecksumMode::Full,
    );
    let again = Ipv4Repr::parse(
        &Ipv4Packet::new_checked(&out[..]).unwrap(),
        ChecksumMode::Full,
    );
    assert_eq!(again, Ok(repr));
    if repr.frag_offset != 0 {
        return;
    }
    match repr.protocol {
        IpProtocol::Icmp => icmp(packet.payload()),
        IpProtocol::Udp => udp(packet.payload()),
        IpProtocol::Tcp => tcp(packet.payload()),
        _ => {}
    }
}

/// An ICMPv4 message.
pub fn icmp(data: &[u8]) {
    let Ok(packet) = Icmpv4Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.verify_checksum(), packet.next_hop_mtu());
    let _ = Icmpv4Repr::parse(&packet, ChecksumMode::Full);
    // The quote parser the stack hands TCP and UDP errors through (RFC 5927): never a
    // panic, and it agrees with the representation's view of the quote.
    let direct = ulnet_wire::IcmpQuote::from_payload(packet.payload());
    let Ok(repr) = Icmpv4Repr::parse(&packet, ChecksumMode::Offload) else {
        return;
    };
    if let Some(q) = repr.quote() {
        assert_eq!(q, direct);
    }
    // A quoted header with a payload_len that cannot be re-emitted is legal on the
    // wire (we only parsed it); skip the round trip there.
    if let Icmpv4Repr::DstUnreachable { header, .. } | Icmpv4Repr::TimeExceeded { header, .. } =
        repr
    {
        if header.payload_len > 65515 {
            return;
        }
    }
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv4Packet::new_unchecked(&mut out[..]),
        ChecksumMode::Full,
    );
    let again = Icmpv4Repr::parse(
        &Icmpv4Packet::new_checked(&out[..]).unwrap(),
        ChecksumMode::Full,
    );
    assert_eq!(again, Ok(repr));
    let _ = repr.to_string();
}

/// A UDP datagram, against IPv4 and IPv6 pseudo-headers.
pub fn udp(data: &[u8]) {
    let Ok(packet) = UdpPacket::new_checked(data) else {
        return;
    };
    for (src, dst) in [(SRC4, DST4), (SRC6, DST6)] {
        let _ = UdpRepr::parse(&packet, &src, &dst, ChecksumMode::Full);
        let repr = UdpRepr::parse(&packet, &src, &dst, ChecksumMode::Offload)
            .expect("unverified parse of a checked datagram succeeds");
        let payload = packet.payload();
        let mut out = vec![0u8; repr.buffer_len(payload.len())];
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut out[..]),
            &src,
            &dst,
            payload.len(),
            |b| b.copy_from_slice(payload),
            ChecksumMode::Full,
        );
        let p = UdpPacket::new_checked(&out[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, &src, &dst, ChecksumMode::Full), Ok(repr));
        assert_eq!(p.payload(), payload);
    }
}

/// A TCP segment with options, against IPv4 and IPv6 pseudo-headers.
pub fn tcp(data: &[u8]) {
    let _ = TcpOptions::parse(data);
    let _ = TcpOptionsIter::new(data).count();
    let Ok(packet) = TcpPacket::new_checked(data) else {
        return;
    };
    let _ = (packet.segment_len(), packet.options_iter().count());
    for (src, dst) in [(SRC4, DST4), (SRC6, DST6)] {
        let _ = TcpRepr::parse(&packet, &src, &dst, ChecksumMode::Full);
        let Ok(repr) = TcpRepr::parse(&packet, &src, &dst, ChecksumMode::Offload) else {
            continue;
        };
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(
            &mut TcpPacket::new_unchecked(&mut out[..]),
            &src,
            &dst,
            ChecksumMode::Full,
        );
        let p = TcpPacket::new_checked(&out[..]).unwrap();
        let mut again = TcpRepr::parse(&p, &src, &dst, ChecksumMode::Full).unwrap();
        // Our layout may leave less room for SACK blocks than the sender's did
        // (RFC 2018 §3 lets a sender send fewer): compare the blocks that were kept.
        let kept = again.options.sack_blocks.len();
        assert_eq!(
            again.options.sack_blocks.as_slice(),
            &repr.options.sack_blocks.as_slice()[..kept]
        );
        again.options.sack_blocks = repr.options.sack_blocks;
        assert_eq!(again, repr);
        let _ = repr.to_string();
    }
}

/// An IPv6 packet: the fixed header round trip, the bounded extension-header walk
/// (RFC 8200 §4; never past the payload, never more than its bounds), then the upper
/// layer when the packet is not a later fragment.
pub fn ipv6(data: &[u8]) {
    let Ok(packet) = Ipv6Packet::new_checked(data) else {
        return;
    };
    let Ok(repr) = Ipv6Repr::parse(&packet) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
    assert_eq!(
        Ipv6Repr::parse(&Ipv6Packet::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
    let payload = packet.payload();
    let Ok(chain) = ipv6ext::walk(repr.next_header, payload) else {
        return;
    };
    assert!(chain.header_len <= payload.len());
    assert!(chain.count <= ipv6ext::MAX_EXT_HEADERS);
    if chain.fragment.is_some_and(|f| !f.is_atomic()) {
        return;
    }
    let upper = &payload[chain.header_len..];
    let (src, dst) = (IpAddr::V6(repr.src_addr), IpAddr::V6(repr.dst_addr));
    match chain.upper {
        IpProtocol::Icmpv6 => icmpv6_between(upper, &repr.src_addr, &repr.dst_addr),
        IpProtocol::Udp => {
            if let Ok(p) = UdpPacket::new_checked(upper) {
                let _ = UdpRepr::parse(&p, &src, &dst, ChecksumMode::Full);
            }
        }
        IpProtocol::Tcp => {
            if let Ok(p) = TcpPacket::new_checked(upper) {
                let _ = TcpRepr::parse(&p, &src, &dst, ChecksumMode::Full);
            }
        }
        _ => {}
    }
}

/// An ICMPv6 message (and the ND messages and options in it), between two fixed
/// addresses.
pub fn icmpv6(data: &[u8]) {
    let (IpAddr::V6(s), IpAddr::V6(d)) = (SRC6, DST6) else {
        unreachable!()
    };
    icmpv6_between(data, &s, &d);
}

fn icmpv6_between(data: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr) {
    let Ok(packet) = Icmpv6Packet::new_checked(data) else {
        return;
    };
    let _ = Icmpv6Repr::parse(&packet, src, dst, ChecksumMode::Full);
    let Ok(repr) = Icmpv6Repr::parse(&packet, src, dst, ChecksumMode::Offload) else {
        return;
    };
    let _ = repr.quote();
    let _ = repr.to_string();
    if let Icmpv6Repr::Ndisc(nd) = repr {
        let o = nd.options();
        // A parsed option list iterates to its end, one option per 8 bytes at most.
        assert!(o.iter().count() <= o.as_bytes().len() / 8);
        let _ = (
            o.source_lladdr(),
            o.target_lladdr(),
            o.mtu(),
            o.prefixes().count(),
        );
    }
    if let Icmpv6Repr::DstUnreachable { header, .. }
    | Icmpv6Repr::PktTooBig { header, .. }
    | Icmpv6Repr::TimeExceeded { header, .. }
    | Icmpv6Repr::ParamProblem { header, .. } = repr
    {
        if header.payload_len > 65535 {
            return;
        }
    }
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv6Packet::new_unchecked(&mut out[..]),
        src,
        dst,
        ChecksumMode::Full,
    );
    let again = Icmpv6Repr::parse(
        &Icmpv6Packet::new_checked(&out[..]).unwrap(),
        src,
        dst,
        ChecksumMode::Full,
    );
    assert_eq!(again, Ok(repr));
}

/// The pretty-printer over a frame and over a bare IP packet.
pub fn pretty(data: &[u8]) {
    let mut line = String::new();
    write!(line, "{}", pretty_print(data)).unwrap();
    assert!(!line.is_empty() && !line.contains('\n'));
    line.clear();
    write!(line, "{}", pretty_print_ip(data)).unwrap();
    assert!(!line.is_empty() && !line.contains('\n'));
}

/// Valid frames to start mutating from (the smoke runner's corpus; also written out
/// by `smoke --write-seeds DIR` for libFuzzer).
pub fn seed_frames() -> Vec<Vec<u8>> {
    let (src, dst) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
    let eth = |ethertype, body: &[u8]| {
        let mut f = vec![0u8; 14];
        EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        f.extend_from_slice(body);
        f
    };
    let ip = |protocol, body: &[u8], frag: Option<(u16, bool)>| {
        let mut r = Ipv4Repr::new(src, dst, protocol, body.len(), 64);
        if let Some((offset, more)) = frag {
            r.dont_frag = false;
            r.frag_offset = offset;
            r.more_frags = more;
            r.ident = 42;
        }
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(
            &mut Ipv4Packet::new_unchecked(&mut b[..]),
            ChecksumMode::Full,
        );
        b[20..].copy_from_slice(body);
        eth(EtherType::Ipv4, &b)
    };
    let tcp = |flags, options: TcpOptions, payload: &[u8]| {
        let r = TcpRepr {
            src_port: 5000,
            dst_port: 80,
            seq: SeqNumber(1),
            ack: SeqNumber(7),
            flags,
            window: 64240,
            urgent: 0,
            options,
            payload,
            payload_rest: &[],
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(
            &mut TcpPacket::new_unchecked(&mut b[..]),
            &src.into(),
            &dst.into(),
            ChecksumMode::Full,
        );
        b
    };
    let syn_options = TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamp: Some(TcpTimestamp { tsval: 1, tsecr: 0 }),
        ..TcpOptions::none()
    };
    let mut data_options = TcpOptions::none();
    data_options.timestamp = Some(TcpTimestamp { tsval: 9, tsecr: 8 });
    data_options
        .sack_blocks
        .push((SeqNumber(100), SeqNumber(200)));
    data_options
        .sack_blocks
        .push((SeqNumber(300), SeqNumber(400)));

    let udp = {
        let r = UdpRepr {
            src_port: 5353,
            dst_port: 53,
        };
        let mut b = vec![0u8; r.buffer_len(12)];
        r.emit(
            &mut UdpPacket::new_unchecked(&mut b[..]),
            &src.into(),
            &dst.into(),
            12,
            |p| p.copy_from_slice(b"hello, world"),
            ChecksumMode::Full,
        );
        b
    };
    let icmp = |r: Icmpv4Repr<'_>| {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(
            &mut Icmpv4Packet::new_unchecked(&mut b[..]),
            ChecksumMode::Full,
        );
        b
    };
    let quoted = Ipv4Repr::new(dst, src, IpProtocol::Udp, udp.len(), 1);
    let (ns6, echo6, hbh_tcp6, frag6) = v6_bodies();
    let v6 = |next_header, body: &[u8]| {
        let (IpAddr::V6(s), IpAddr::V6(d)) = (SRC6, DST6) else {
            unreachable!()
        };
        let r = Ipv6Repr {
            src_addr: s,
            dst_addr: d,
            next_header,
            payload_len: body.len(),
            hop_limit: 255,
            traffic_class: 0,
            flow_label: 0,
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        b[40..].copy_from_slice(body);
        eth(EtherType::Ipv6, &b)
    };
    let arp = {
        let r = ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            source_protocol_addr: src,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: dst,
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut ArpPacket::new_unchecked(&mut b[..]));
        b
    };
    vec![
        ip(IpProtocol::Tcp, &tcp(TcpFlags::SYN, syn_options, &[]), None),
        ip(
            IpProtocol::Tcp,
            &tcp(
                TcpFlags::PSH | TcpFlags::ACK,
                data_options,
                b"GET / HTTP/1.1\r\n\r\n",
            ),
            None,
        ),
        ip(IpProtocol::Udp, &udp, None),
        ip(IpProtocol::Udp, &udp, Some((0, true))),
        ip(IpProtocol::Udp, &udp, Some((1480, false))),
        ip(
            IpProtocol::Icmp,
            &icmp(Icmpv4Repr::EchoRequest {
                ident: 1,
                seq_no: 2,
                data: b"ping-data",
            }),
            None,
        ),
        ip(
            IpProtocol::Icmp,
            &icmp(Icmpv4Repr::DstUnreachable {
                reason: icmpv4::Icmpv4DstUnreachable::PortUnreachable,
                header: quoted,
                data: &udp[..8],
            }),
            None,
        ),
        eth(EtherType::Arp, &arp),
        v6(IpProtocol::Icmpv6, &ns6),
        v6(IpProtocol::Icmpv6, &echo6),
        v6(IpProtocol::HopByHop, &hbh_tcp6),
        v6(IpProtocol::Ipv6Frag, &frag6),
    ]
}

/// IPv6 bodies for the seed corpus: a neighbour solicitation, an echo request, a TCP
/// SYN behind a hop-by-hop header, and a first fragment.
fn v6_bodies() -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let (IpAddr::V6(s), IpAddr::V6(d)) = (SRC6, DST6) else {
        unreachable!()
    };
    let icmp = |r: Icmpv6Repr<'_>| {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(
            &mut Icmpv6Packet::new_unchecked(&mut b[..]),
            &s,
            &d,
            ChecksumMode::Full,
        );
        b
    };
    let mut ob = [0u8; 8];
    let options = ndisc::one_option(
        &mut ob,
        &NdiscOption::SourceLinkLayer(EthernetAddress([2, 0, 0, 0, 0, 1])),
    );
    let ns = icmp(Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
        target: d,
        options,
    }));
    let echo = icmp(Icmpv6Repr::EchoRequest {
        ident: 7,
        seq_no: 1,
        data: b"ping6",
    });
    let tcp = TcpRepr {
        src_port: 5000,
        dst_port: 80,
        seq: SeqNumber(1),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 64240,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1440),
            ..TcpOptions::none()
        },
        payload: &[],
        payload_rest: &[],
    };
    let mut hbh = vec![0u8; 8 + tcp.buffer_len()];
    ipv6ext::emit_padding_header(&mut hbh[..8], IpProtocol::Tcp, 8);
    tcp.emit(
        &mut TcpPacket::new_unchecked(&mut hbh[8..]),
        &SRC6,
        &DST6,
        ChecksumMode::Full,
    );
    let mut frag = vec![0u8; 8 + 16];
    Ipv6FragRepr {
        next_header: IpProtocol::Udp,
        offset: 0,
        more_frags: true,
        ident: 9,
    }
    .emit(&mut frag[..8]);
    (ns, echo, hbh, frag)
}

/// A small deterministic generator (xorshift64*), so smoke runs are reproducible from
/// their seed without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (zero is replaced, xorshift needs a non-zero state).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Mutates `input` in place the way a fuzzer would: byte flips and overwrites with
/// interesting values, truncation, extension, and splicing of random bytes.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    const INTERESTING: [u8; 8] = [0x00, 0x01, 0x02, 0x05, 0x0a, 0x40, 0x7f, 0xff];
    for _ in 0..=rng.below(4) {
        match rng.below(6) {
            0 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] ^= 1 << rng.below(8);
            }
            1 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] = rng.next_u64() as u8;
            }
            3 => {
                let keep = rng.below(input.len() + 1);
                input.truncate(keep);
            }
            4 => {
                for _ in 0..rng.below(16) {
                    input.push(rng.next_u64() as u8);
                }
            }
            _ => {
                let at = rng.below(input.len() + 1);
                let n = rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                input.splice(at..at, bytes);
            }
        }
    }
}

/// The slice of a seed frame a target expects: the whole frame for `ethernet` and
/// `pretty`, the network layer for `arp`/`ipv4`, the transport for the others.
pub fn layer_for<'a>(target: &str, frame: &'a [u8]) -> &'a [u8] {
    let ip_payload = |f: &'a [u8]| -> &'a [u8] {
        let ip = f.get(14..).unwrap_or(&[]);
        let ihl = ip.first().map_or(0, |b| usize::from(b & 0x0f) * 4);
        ip.get(ihl..).unwrap_or(&[])
    };
    match target {
        "arp" | "ipv4" | "ipv6" => frame.get(14..).unwrap_or(&[]),
        "icmpv6" => frame.get(54..).unwrap_or(&[]),
        "icmp" | "udp" | "tcp" => ip_payload(frame),
        _ => frame,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_pass_every_target() {
        for frame in seed_frames() {
            for (name, target) in TARGETS {
                target(layer_for(name, &frame));
            }
        }
    }

    #[test]
    fn short_deterministic_run() {
        let seeds = seed_frames();
        let mut rng = Rng::new(1);
        for _ in 0..20_000 {
            let (name, target) = TARGETS[rng.below(TARGETS.len())];
            let mut input = layer_for(name, &seeds[rng.below(seeds.len())]).to_vec();
            mutate(&mut rng, &mut input);
            target(&input);
        }
    }
}
