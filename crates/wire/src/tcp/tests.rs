//! TCP view and representation tests against a Linux-style SYN whose checksum was
//! computed independently (plain RFC 1071 sum in Python).

use super::*;
use core::net::Ipv4Addr;

const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

const SYN: [u8; 40] = [
    0x13, 0x88, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0,
    0xad, 0x0d, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
];

fn syn_repr() -> TcpRepr<'static> {
    TcpRepr {
        src_port: 5000,
        dst_port: 80,
        seq: SeqNumber(1),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 64240,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            sack_blocks: SackBlocks::new(),
            timestamp: Some(TcpTimestamp { tsval: 1, tsecr: 0 }),
        },
        payload: &[],
        payload_rest: &[],
    }
}

#[test]
fn deconstruct_syn() {
    let p = TcpPacket::new_checked(&SYN[..]).unwrap();
    assert_eq!((p.src_port(), p.dst_port()), (5000, 80));
    assert_eq!(p.header_len(), 40);
    assert!(p.syn() && !p.ack() && !p.fin());
    assert_eq!(p.segment_len(), 1);
    assert!(p.verify_checksum(&SRC, &DST));
    assert_eq!(
        TcpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full).unwrap(),
        syn_repr()
    );
}

#[test]
fn construct_syn() {
    let r = syn_repr();
    assert_eq!(r.header_len(), 40);
    let mut out = [0xeeu8; 40];
    r.emit(
        &mut TcpPacket::new_unchecked(&mut out[..]),
        &SRC,
        &DST,
        ChecksumMode::Full,
    );
    assert_eq!(out, SYN);
    assert_eq!(
        r.to_string(),
        "5000 > 80: Flags [S], seq 1, win 64240, \
         options [mss 1460,sackOK,TS val 1 ecr 0,nop,wscale 7], length 0"
    );
}

#[test]
fn data_segment_round_trip_and_in_place_payload() {
    let payload = b"GET / HTTP/1.0\r\n\r\n";
    let mut r = syn_repr();
    r.flags = TcpFlags::PSH | TcpFlags::ACK;
    r.ack = SeqNumber(0xdead_beef);
    r.options = TcpOptions::none();
    r.options.timestamp = Some(TcpTimestamp { tsval: 7, tsecr: 9 });
    r.options.sack_blocks.push((SeqNumber(10), SeqNumber(20)));
    r.payload = payload;
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &SRC,
        &DST,
        ChecksumMode::Full,
    );
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full).unwrap(),
        r
    );
    assert_eq!(
        r.to_string(),
        "5000 > 80: Flags [P.], seq 1:19, ack 3735928559, win 64240, \
         options [nop,nop,TS val 7 ecr 9,nop,nop,sack 1 {10:20}], length 18"
    );

    // Same segment with the payload written in place and the checksum filled after.
    let mut hdr = r;
    hdr.payload = &[];
    let mut buf2 = vec![0u8; r.buffer_len()];
    let mut p2 = TcpPacket::new_unchecked(&mut buf2[..]);
    hdr.emit(&mut p2, &SRC, &DST, ChecksumMode::Offload);
    p2.payload_mut().copy_from_slice(payload);
    p2.fill_checksum(&SRC, &DST);
    assert_eq!(buf2, buf);
}

#[test]
fn partial_checksum_completes_to_full() {
    let r = syn_repr();
    let mut full = [0u8; 40];
    r.emit(
        &mut TcpPacket::new_unchecked(&mut full[..]),
        &SRC,
        &DST,
        ChecksumMode::Full,
    );
    let mut partial = [0u8; 40];
    r.emit(
        &mut TcpPacket::new_unchecked(&mut partial[..]),
        &SRC,
        &DST,
        ChecksumMode::Partial,
    );
    // What a device does with CHECKSUM_PARTIAL: sum from the start of the TCP header
    // (the field holds the pseudo-header sum) and store the complement.
    let completed = !checksum::data(&partial);
    assert_eq!(completed.to_be_bytes(), full[16..18]);
    // The field Linux's `__tcp_v4_send_check` leaves: 0xc612 + 0x0001 + 0xc612 +
    // 0x0002 + 6 (TCP) + 40 (length) = 0x18c55, folded 0x8c56 (summed by hand).
    assert_eq!(partial[16..18], [0x8c, 0x56]);
    assert!(TcpPacket::new_unchecked(&partial[..]).checksum_is_unfinished(&SRC, &DST));
    assert!(!TcpPacket::new_unchecked(&full[..]).checksum_is_unfinished(&SRC, &DST));
    // The sum covers the length: the same field on a longer segment is not unfinished.
    let mut longer = [0u8; 44];
    longer[..40].copy_from_slice(&partial);
    assert!(!TcpPacket::new_unchecked(&longer[..]).checksum_is_unfinished(&SRC, &DST));
    let mut off = partial;
    off[17] ^= 1;
    assert!(!TcpPacket::new_unchecked(&off[..]).checksum_is_unfinished(&SRC, &DST));
}

#[test]
fn hostile_flags_parse() {
    let mut b = SYN;
    b[13] = 0x03 | 0x04 | 0x20; // SYN|FIN|RST|URG
    b[12] |= 0x0e; // reserved bits
    let p = TcpPacket::new_checked(&b[..]).unwrap();
    let r = TcpRepr::parse(&p, &SRC, &DST, ChecksumMode::Offload).unwrap();
    assert!(r
        .flags
        .contains(TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST | TcpFlags::URG));
    assert!(!r.flags.contains(TcpFlags::AE));
    assert_eq!(r.segment_len(), 2);
}

#[test]
fn errors() {
    assert_eq!(
        TcpPacket::new_checked(&SYN[..19]).unwrap_err(),
        Error::Truncated
    );
    assert_eq!(
        TcpPacket::new_checked(&SYN[..39]).unwrap_err(),
        Error::Truncated
    );
    let mut bad = SYN;
    bad[12] = 0x40; // data offset 4
    assert_eq!(
        TcpPacket::new_checked(&bad[..]).unwrap_err(),
        Error::Malformed
    );
    let mut bad = SYN;
    bad[39] ^= 1;
    let p = TcpPacket::new_checked(&bad[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
    assert!(TcpRepr::parse(&p, &SRC, &DST, ChecksumMode::Offload).is_ok());
    let mut bad = SYN;
    bad[21] = 9; // MSS option claims 9 bytes
    let p = TcpPacket::new_checked(&bad[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &SRC, &DST, ChecksumMode::Offload).unwrap_err(),
        Error::Malformed
    );
}

mod unfinished {
    use super::*;
    use core::net::Ipv6Addr;
    use proptest::prelude::*;

    fn addrs(v6: bool, a: [u8; 16], b: [u8; 16]) -> (IpAddr, IpAddr) {
        if v6 {
            (Ipv6Addr::from(a).into(), Ipv6Addr::from(b).into())
        } else {
            (
                Ipv4Addr::new(a[0], a[1], a[2], a[3]).into(),
                Ipv4Addr::new(b[0], b[1], b[2], b[3]).into(),
            )
        }
    }

    proptest! {
        /// Whatever the addresses and payload: the field our `Partial` mode leaves (and
        /// Linux's CHECKSUM_PARTIAL) reads as unfinished, and completing it as a device
        /// does gives the full checksum; a field one bit off never reads as unfinished.
        #[test]
        fn a_partial_field_and_only_it_reads_as_unfinished(
            v6 in any::<bool>(),
            a in any::<[u8; 16]>(),
            b in any::<[u8; 16]>(),
            payload in proptest::collection::vec(any::<u8>(), 0..1500),
            bit in 0u32..16,
        ) {
            let (src, dst) = addrs(v6, a, b);
            let mut r = syn_repr();
            r.flags = TcpFlags::ACK | TcpFlags::PSH;
            r.payload = &payload;
            let mut partial = vec![0u8; r.buffer_len()];
            r.emit(&mut TcpPacket::new_unchecked(&mut partial[..]), &src, &dst, ChecksumMode::Partial);
            prop_assert!(TcpPacket::new_unchecked(&partial[..]).checksum_is_unfinished(&src, &dst));
            let mut done = partial.clone();
            let c = !checksum::data(&done);
            done[16..18].copy_from_slice(&c.to_be_bytes());
            prop_assert!(TcpPacket::new_unchecked(&done[..]).verify_checksum(&src, &dst));
            let mut off = partial.clone();
            let f = u16::from_be_bytes([off[16], off[17]]) ^ (1 << bit);
            off[16..18].copy_from_slice(&f.to_be_bytes());
            // One bit never turns one of the two zeros (0x0000, 0xffff) into the other.
            prop_assert!(!TcpPacket::new_unchecked(&off[..]).checksum_is_unfinished(&src, &dst));
        }
    }
}
