//! A tcpdump-like one-line description of a frame, for logs and tests.
//!
//! `pretty_print(frame)` borrows the frame and formats lazily, so a disabled log line
//! costs nothing. Every layer is checked before it is read: a malformed frame prints a
//! line saying what is wrong and never panics. Checksums are verified where the whole
//! datagram is present and a mismatch is flagged (`bad cksum`), not hidden.

use core::fmt;
use core::net::IpAddr;

use crate::arp::{ArpPacket, ArpRepr};
use crate::checksum::ChecksumMode;
use crate::ethernet::{EtherType, EthernetFrame};
use crate::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use crate::ip::IpProtocol;
use crate::ipv4::Ipv4Packet;
use crate::tcp::{SegmentSummary, TcpPacket};
use crate::udp::UdpPacket;
use crate::Error;

/// Describes an Ethernet II frame in one line (see the module docs).
pub fn pretty_print(frame: &[u8]) -> PrettyFrame<'_> {
    PrettyFrame { frame }
}

/// Describes an IP packet (no link-layer header) in one line.
pub fn pretty_print_ip(packet: &[u8]) -> PrettyIp<'_> {
    PrettyIp { packet }
}

/// The [`fmt::Display`] of [`pretty_print`].
#[derive(Debug, Clone, Copy)]
pub struct PrettyFrame<'a> {
    frame: &'a [u8],
}

/// The [`fmt::Display`] of [`pretty_print_ip`].
#[derive(Debug, Clone, Copy)]
pub struct PrettyIp<'a> {
    packet: &'a [u8],
}

impl fmt::Display for PrettyFrame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let frame = match EthernetFrame::new_checked(self.frame) {
            Ok(frame) => frame,
            Err(e) => return write!(f, "Ethernet: {e}, length {}", self.frame.len()),
        };
        let payload = frame.payload();
        match frame.ethertype() {
            EtherType::Ipv4 | EtherType::Ipv6 => fmt_ip(f, payload),
            EtherType::Arp => fmt_arp(f, payload),
            EtherType::Unknown(t) => write!(f, "ethertype 0x{t:04x}, length {}", payload.len()),
        }
    }
}

impl fmt::Display for PrettyIp<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ip(f, self.packet)
    }
}

fn fmt_arp(f: &mut fmt::Formatter<'_>, buf: &[u8]) -> fmt::Result {
    let parsed = ArpPacket::new_checked(buf).and_then(|p| ArpRepr::parse(&p));
    match parsed {
        Ok(repr) => write!(f, "ARP, {repr}, length {}", buf.len()),
        Err(e) => write!(f, "ARP, {e}, length {}", buf.len()),
    }
}

fn fmt_ip(f: &mut fmt::Formatter<'_>, buf: &[u8]) -> fmt::Result {
    match buf.first().map(|b| b >> 4) {
        Some(4) => fmt_ipv4(f, buf),
        Some(6) => fmt_ipv6(f, buf),
        Some(v) => write!(
            f,
            "IP version {v}: {}, length {}",
            Error::Unsupported,
            buf.len()
        ),
        None => write!(f, "IP: {}, length 0", Error::Truncated),
    }
}

fn fmt_ipv6(f: &mut fmt::Formatter<'_>, buf: &[u8]) -> fmt::Result {
    use crate::ipv6::Ipv6Packet;
    let packet = match Ipv6Packet::new_checked(buf) {
        Ok(p) => p,
        Err(e) => return write!(f, "IP6: {e}, length {}", buf.len()),
    };
    let (src, dst) = (IpAddr::V6(packet.src_addr()), IpAddr::V6(packet.dst_addr()));
    let payload = packet.payload();
    // The extension headers, walked within the same bounds the stack uses.
    let chain = match crate::ipv6ext::walk(packet.next_header(), payload) {
        Ok(c) => c,
        Err(e) => return write!(f, "{src} > {dst}: {e}, length {}", payload.len()),
    };
    let upper = &payload[chain.header_len..];
    if let Some(frag) = chain.fragment.filter(|fr| !fr.is_atomic()) {
        if frag.offset != 0 {
            return write!(
                f,
                "{src} > {dst}: {} {frag}, length {}",
                frag.next_header,
                upper.len()
            );
        }
    }
    let whole = chain.fragment.is_none_or(|fr| fr.is_atomic());
    match chain.upper {
        IpProtocol::Tcp => fmt_tcp(f, &src, &dst, upper, whole),
        IpProtocol::Udp => fmt_udp(f, &src, &dst, upper, whole),
        IpProtocol::Icmpv6 => {
            let (IpAddr::V6(s6), IpAddr::V6(d6)) = (src, dst) else {
                return Ok(());
            };
            let parsed = crate::icmpv6::Icmpv6Packet::new_checked(upper).and_then(|p| {
                crate::icmpv6::Icmpv6Repr::parse(&p, &s6, &d6, crate::ChecksumMode::Offload)
            });
            match parsed {
                Ok(r) => write!(f, "{src} > {dst}: {r}")?,
                Err(e) => write!(f, "{src} > {dst}: ICMP6 {e}, length {}", upper.len())?,
            }
            let ok = crate::icmpv6::Icmpv6Packet::new_checked(upper)
                .is_ok_and(|p| p.verify_checksum(&s6, &d6));
            if whole && !ok {
                f.write_str(", bad cksum")?;
            }
            Ok(())
        }
        other => write!(f, "{src} > {dst}: {other}, length {}", upper.len()),
    }
}

fn fmt_ipv4(f: &mut fmt::Formatter<'_>, buf: &[u8]) -> fmt::Result {
    let packet = match Ipv4Packet::new_checked(buf) {
        Ok(p) => p,
        Err(e) => return write!(f, "IP: {e}, length {}", buf.len()),
    };
    let (src, dst) = (IpAddr::V4(packet.src_addr()), IpAddr::V4(packet.dst_addr()));
    let payload = packet.payload();
    let protocol = packet.protocol();
    if packet.frag_offset() != 0 {
        write!(
            f,
            "{src} > {dst}: {protocol} frag (id {}, off {}, len {}{})",
            packet.ident(),
            packet.frag_offset(),
            payload.len(),
            if packet.more_frags() { ", more" } else { "" }
        )?;
    } else {
        // A first fragment holds the transport header but not the whole datagram, so
        // its transport checksum cannot be checked.
        let whole = !packet.more_frags();
        match protocol {
            IpProtocol::Tcp => fmt_tcp(f, &src, &dst, payload, whole)?,
            IpProtocol::Udp => fmt_udp(f, &src, &dst, payload, whole)?,
            IpProtocol::Icmp => fmt_icmp(f, &src, &dst, payload, whole)?,
            other => write!(f, "{src} > {dst}: {other}, length {}", payload.len())?,
        }
        if packet.more_frags() {
            write!(f, " (frag id {}, more)", packet.ident())?;
        }
    }
    if !packet.verify_checksum() {
        write!(f, ", bad IP cksum 0x{:04x}", packet.checksum())?;
    }
    Ok(())
}

fn fmt_tcp(
    f: &mut fmt::Formatter<'_>,
    src: &IpAddr,
    dst: &IpAddr,
    buf: &[u8],
    verify: bool,
) -> fmt::Result {
    let packet = match TcpPacket::new_checked(buf) {
        Ok(p) => p,
        Err(e) => return write!(f, "{src} > {dst}: TCP {e}, length {}", buf.len()),
    };
    write!(
        f,
        "{src}.{} > {dst}.{}: ",
        packet.src_port(),
        packet.dst_port()
    )?;
    let summary = SegmentSummary {
        flags: packet.flags(),
        seq: packet.seq_number(),
        ack: packet.ack_number(),
        window: packet.window_len(),
        urgent: packet.urgent_at(),
        payload_len: packet.payload().len(),
    };
    summary.write(f, |w| {
        for (i, opt) in packet.options_iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            match opt {
                Ok(o) => write!(w, "{sep}{o}")?,
                Err(e) => write!(w, "{sep}{e} option")?,
            }
        }
        Ok(())
    })?;
    if verify && !packet.verify_checksum(src, dst) {
        write!(f, ", bad cksum 0x{:04x}", packet.checksum())?;
    }
    Ok(())
}

fn fmt_udp(
    f: &mut fmt::Formatter<'_>,
    src: &IpAddr,
    dst: &IpAddr,
    buf: &[u8],
    verify: bool,
) -> fmt::Result {
    let packet = match UdpPacket::new_checked(buf) {
        Ok(p) => p,
        Err(e) => return write!(f, "{src} > {dst}: UDP {e}, length {}", buf.len()),
    };
    write!(
        f,
        "{src}.{} > {dst}.{}: UDP, length {}",
        packet.src_port(),
        packet.dst_port(),
        packet.payload().len()
    )?;
    if verify && !packet.verify_checksum(src, dst) {
        write!(f, ", bad cksum 0x{:04x}", packet.checksum())?;
    }
    Ok(())
}

fn fmt_icmp(
    f: &mut fmt::Formatter<'_>,
    src: &IpAddr,
    dst: &IpAddr,
    buf: &[u8],
    verify: bool,
) -> fmt::Result {
    write!(f, "{src} > {dst}: ")?;
    let packet = match Icmpv4Packet::new_checked(buf) {
        Ok(p) => p,
        Err(e) => return write!(f, "ICMP {e}, length {}", buf.len()),
    };
    match Icmpv4Repr::parse(&packet, ChecksumMode::Offload) {
        Ok(repr) => write!(f, "{repr}")?,
        Err(Error::Unsupported) => write!(
            f,
            "ICMP type {} code {}, length {}",
            u8::from(packet.msg_type()),
            packet.msg_code(),
            buf.len()
        )?,
        Err(e) => write!(
            f,
            "ICMP type {}: {e}, length {}",
            u8::from(packet.msg_type()),
            buf.len()
        )?,
    }
    if verify && !packet.verify_checksum() {
        write!(f, ", bad cksum 0x{:04x}", packet.checksum())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ArpOperation, EthernetAddress, EthernetRepr, Icmpv4Repr, Ipv4Repr, SeqNumber, TcpFlags,
        TcpOptions, TcpRepr, TcpTimestamp, UdpRepr,
    };
    use core::net::Ipv4Addr;

    const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    fn eth(ethertype: EtherType, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + payload.len()];
        EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        f[14..].copy_from_slice(payload);
        f
    }

    fn ipv4(protocol: IpProtocol, payload: &[u8]) -> Vec<u8> {
        let ip = Ipv4Repr::new(A, B, protocol, payload.len(), 64);
        let mut b = vec![0u8; ip.buffer_len()];
        ip.emit(
            &mut Ipv4Packet::new_unchecked(&mut b[..]),
            ChecksumMode::Full,
        );
        b[20..].copy_from_slice(payload);
        eth(EtherType::Ipv4, &b)
    }

    fn syn() -> Vec<u8> {
        let tcp = TcpRepr {
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
                timestamp: Some(TcpTimestamp { tsval: 1, tsecr: 0 }),
                ..TcpOptions::none()
            },
            payload: &[],
            payload_rest: &[],
        };
        let mut seg = vec![0u8; tcp.buffer_len()];
        tcp.emit(
            &mut TcpPacket::new_unchecked(&mut seg[..]),
            &A.into(),
            &B.into(),
            ChecksumMode::Full,
        );
        ipv4(IpProtocol::Tcp, &seg)
    }

    #[test]
    fn tcp_syn_line() {
        assert_eq!(
            pretty_print(&syn()).to_string(),
            "198.18.0.1.5000 > 198.18.0.2.80: Flags [S], seq 1, win 64240, \
             options [mss 1460,sackOK,TS val 1 ecr 0,nop,wscale 7], length 0"
        );
    }

    #[test]
    fn corruption_is_flagged() {
        let mut f = syn();
        let last = f.len() - 1;
        f[last] ^= 0x01;
        let line = pretty_print(&f).to_string();
        // The SYN's checksum is the one of tcp::tests::SYN (computed independently).
        assert!(line.ends_with("length 0, bad cksum 0xad0d"), "{line}");
        let mut f = syn();
        f[14 + 8] = 1; // TTL changed without fixing the IP checksum
        assert!(pretty_print(&f).to_string().contains("bad IP cksum"));
        let mut f = syn();
        f[14 + 20 + 21] = 1; // MSS option length 1
        let line = pretty_print(&f).to_string();
        assert!(line.contains("options [malformed packet option]"), "{line}");
    }

    #[test]
    fn arp_line() {
        let arp = ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            source_protocol_addr: A,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: B,
        };
        let mut b = [0u8; 28];
        arp.emit(&mut ArpPacket::new_unchecked(&mut b[..]));
        let f = eth(EtherType::Arp, &b);
        assert_eq!(
            pretty_print(&f).to_string(),
            "ARP, Request who-has 198.18.0.2 tell 198.18.0.1, length 28"
        );
        let f = eth(EtherType::Arp, &b[..20]);
        assert_eq!(
            pretty_print(&f).to_string(),
            "ARP, truncated packet, length 20"
        );
    }

    #[test]
    fn icmp_and_udp_lines() {
        let echo = Icmpv4Repr::EchoRequest {
            ident: 1,
            seq_no: 2,
            data: b"abcdefgh",
        };
        let mut b = [0u8; 16];
        echo.emit(
            &mut Icmpv4Packet::new_unchecked(&mut b[..]),
            ChecksumMode::Full,
        );
        assert_eq!(
            pretty_print(&ipv4(IpProtocol::Icmp, &b)).to_string(),
            "198.18.0.1 > 198.18.0.2: ICMP echo request, id 1, seq 2, length 16"
        );

        let udp = UdpRepr {
            src_port: 5000,
            dst_port: 53,
        };
        let mut b = [0u8; 13];
        udp.emit(
            &mut UdpPacket::new_unchecked(&mut b[..]),
            &A.into(),
            &B.into(),
            5,
            |p| p.copy_from_slice(b"hello"),
            ChecksumMode::Full,
        );
        assert_eq!(
            pretty_print(&ipv4(IpProtocol::Udp, &b)).to_string(),
            "198.18.0.1.5000 > 198.18.0.2.53: UDP, length 5"
        );
    }

    #[test]
    fn fragments_and_other_protocols() {
        let mut ip = Ipv4Repr::new(A, B, IpProtocol::Udp, 16, 64);
        ip.dont_frag = false;
        ip.ident = 7;
        ip.frag_offset = 1480;
        ip.more_frags = true;
        let mut b = [0u8; 36];
        ip.emit(
            &mut Ipv4Packet::new_unchecked(&mut b[..]),
            ChecksumMode::Full,
        );
        assert_eq!(
            pretty_print_ip(&b).to_string(),
            "198.18.0.1 > 198.18.0.2: UDP frag (id 7, off 1480, len 16, more)"
        );
        assert_eq!(
            pretty_print(&ipv4(IpProtocol::Unknown(47), &[0; 4])).to_string(),
            "198.18.0.1 > 198.18.0.2: ip-proto-47, length 4"
        );
        assert_eq!(
            pretty_print(&eth(EtherType::Unknown(0x88cc), &[0; 10])).to_string(),
            "ethertype 0x88cc, length 10"
        );
    }

    #[test]
    fn icmpv6_and_extension_headers() {
        use crate::icmpv6::{Icmpv6Packet, Icmpv6Repr};
        use crate::ipv6::{Ipv6Packet, Ipv6Repr};
        let (s, d): (core::net::Ipv6Addr, core::net::Ipv6Addr) =
            ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap());
        let echo = Icmpv6Repr::EchoRequest {
            ident: 1,
            seq_no: 2,
            data: b"abcd",
        };
        let mut b = [0u8; 40 + 8 + 12];
        Ipv6Repr {
            src_addr: s,
            dst_addr: d,
            next_header: IpProtocol::HopByHop,
            payload_len: 20,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        crate::ipv6ext::emit_padding_header(&mut b[40..48], IpProtocol::Icmpv6, 8);
        echo.emit(
            &mut Icmpv6Packet::new_unchecked(&mut b[48..]),
            &s,
            &d,
            crate::ChecksumMode::Full,
        );
        assert_eq!(
            pretty_print_ip(&b).to_string(),
            "fe80::1 > fe80::2: ICMP6, echo request, id 1, seq 2, length 12"
        );
        b[59] ^= 1;
        assert!(pretty_print_ip(&b).to_string().ends_with(", bad cksum"));
    }

    #[test]
    fn truncation_lines() {
        assert_eq!(
            pretty_print(&[1, 2, 3]).to_string(),
            "Ethernet: truncated packet, length 3"
        );
        let f = syn();
        assert_eq!(
            pretty_print(&f[..30]).to_string(),
            "IP: truncated packet, length 16"
        );
        assert_eq!(
            pretty_print(&eth(EtherType::Ipv4, &[])).to_string(),
            "IP: truncated packet, length 0"
        );
    }
}
