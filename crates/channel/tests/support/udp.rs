//! Hand-built Ethernet/IPv4/UDP frames with numbered, self-checking payloads, and the
//! loops that push them through a channel or a kernel socket (bounded by [`DEADLINE`]).

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use ulnet_channel::Channel;

/// How long any receive loop in these tests waits at most.
pub const DEADLINE: Duration = Duration::from_secs(5);

fn sum16(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The Internet checksum of `data` (RFC 1071).
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum16(data, 0))
}

fn udp_checksum(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8]) -> u16 {
    // RFC 768: the pseudo-header is source, destination, zero, protocol, UDP length.
    let mut acc = sum16(&src.octets(), 0);
    acc = sum16(&dst.octets(), acc);
    acc += 17 + udp.len() as u32;
    let c = !fold(sum16(udp, acc));
    // RFC 768: a computed zero is sent as all ones.
    if c == 0 {
        0xffff
    } else {
        c
    }
}

/// Addresses of a hand-built UDP frame.
pub struct UdpSpec {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
}

/// Length of an Ethernet/IPv4/UDP frame carrying `payload_len` bytes.
pub fn udp_frame_len(payload_len: usize) -> usize {
    14 + 20 + 8 + payload_len
}

/// Writes an Ethernet/IPv4/UDP frame carrying `payload` into `buf` (exactly
/// [`udp_frame_len`] bytes), checksums included.
pub fn write_udp_frame(spec: &UdpSpec, payload: &[u8], buf: &mut [u8]) {
    let total_ip = 20 + 8 + payload.len();
    buf[0..6].copy_from_slice(&spec.dst_mac);
    buf[6..12].copy_from_slice(&spec.src_mac);
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut buf[14..34];
    ip.fill(0);
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(total_ip as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&spec.src.ip().octets());
    ip[16..20].copy_from_slice(&spec.dst.ip().octets());
    let c = checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut buf[34..34 + 8 + payload.len()];
    udp[0..2].copy_from_slice(&spec.src.port().to_be_bytes());
    udp[2..4].copy_from_slice(&spec.dst.port().to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    udp[6..8].fill(0);
    udp[8..].copy_from_slice(payload);
    let c = udp_checksum(*spec.src.ip(), *spec.dst.ip(), udp);
    udp[6..8].copy_from_slice(&c.to_be_bytes());
}

/// The frame [`write_udp_frame`] writes, in a new buffer.
pub fn udp_frame(spec: &UdpSpec, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0; udp_frame_len(payload.len())];
    write_udp_frame(spec, payload, &mut f);
    f
}

/// A received Ethernet/IPv4/UDP frame, with its checksums checked.
#[derive(Debug)]
pub struct SeenUdp<'a> {
    pub dst_mac: [u8; 6],
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub payload: &'a [u8],
    pub ip_checksum_ok: bool,
    pub udp_checksum_ok: bool,
}

/// Parses `frame` as Ethernet/IPv4 (no options)/UDP; `None` for anything else.
pub fn parse_udp(frame: &[u8]) -> Option<SeenUdp<'_>> {
    if frame.len() < 42 || frame[12..14] != [0x08, 0x00] || frame[14] != 0x45 || frame[23] != 17 {
        return None;
    }
    let ip = &frame[14..34];
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if total < 28 || 14 + total > frame.len() {
        return None;
    }
    let udp = &frame[34..14 + total];
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len != udp.len() {
        return None;
    }
    let src_ip = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst_ip = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let stored = u16::from_be_bytes([udp[6], udp[7]]);
    let udp_checksum_ok = stored == 0 || {
        let mut acc = sum16(&src_ip.octets(), 0);
        acc = sum16(&dst_ip.octets(), acc);
        acc += 17 + udp.len() as u32;
        fold(sum16(udp, acc)) == 0xffff
    };
    Some(SeenUdp {
        dst_mac: frame[0..6].try_into().ok()?,
        src: SocketAddrV4::new(src_ip, u16::from_be_bytes([udp[0], udp[1]])),
        dst: SocketAddrV4::new(dst_ip, u16::from_be_bytes([udp[2], udp[3]])),
        payload: &udp[8..],
        ip_checksum_ok: checksum(ip) == 0,
        udp_checksum_ok,
    })
}

/// The test payload for datagram `seq`: the sequence number, then a pattern of
/// `len - 4` bytes derived from it, so corruption anywhere is visible.
pub fn payload(seq: u32, len: usize) -> Vec<u8> {
    let mut p = seq.to_be_bytes().to_vec();
    p.extend(
        (0..len.saturating_sub(4)).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8),
    );
    p
}

/// The sequence number of a payload made by [`payload`], if it is one exactly.
pub fn check_payload(p: &[u8]) -> Option<u32> {
    let seq = u32::from_be_bytes(p.get(..4)?.try_into().ok()?);
    (payload(seq, p.len()) == p).then_some(seq)
}

/// Polls `ch` until `count` UDP datagrams for `dst` arrived, [`DEADLINE`] passed, or
/// (with `quiet`) nothing for `dst` arrived for that long,
/// varying the batch size so the walk also resumes in the middle of ring blocks. Panics
/// on a frame for `dst` that is corrupted (bad checksum or payload). Returns the
/// sequence numbers in arrival order and the number of frames seen whose source MAC is
/// `own_mac`, the channel's address (frames the channel's side sent).
pub fn collect_udp(
    ch: &mut dyn Channel,
    dst: SocketAddrV4,
    count: usize,
    own_mac: [u8; 6],
    quiet: Option<Duration>,
) -> (Vec<u32>, usize) {
    let deadline = Instant::now() + DEADLINE;
    let mut seqs = Vec::new();
    let mut own = 0;
    let mut round = 0usize;
    let mut last = Instant::now();
    while seqs.len() < count && Instant::now() < deadline {
        if quiet.is_some_and(|q| last.elapsed() > q) {
            break;
        }
        let before = seqs.len();
        round += 1;
        let max = if round.is_multiple_of(2) {
            64
        } else {
            1 + round % 7
        };
        let n = ch
            .rx_batch(max, &mut |frame, _tx| {
                if frame.len() >= 12 && frame[6..12] == own_mac {
                    own += 1;
                }
                let Some(u) = parse_udp(frame) else { return };
                if u.dst != dst {
                    return;
                }
                assert_eq!(u.dst_mac, own_mac, "frame for {dst} to another MAC");
                assert!(
                    u.ip_checksum_ok,
                    "IPv4 header checksum wrong in {frame:02x?}"
                );
                assert!(u.udp_checksum_ok, "UDP checksum wrong in {frame:02x?}");
                let seq = check_payload(u.payload)
                    .unwrap_or_else(|| panic!("payload corrupted: {:02x?}", u.payload));
                seqs.push(seq);
            })
            .unwrap();
        assert!(n <= max, "rx_batch handed out {n} > {max} frames");
        if seqs.len() > before {
            last = Instant::now();
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(300));
        }
    }
    (seqs, own)
}

/// Sends `count` hand-built UDP frames through `ch` in batches of 16 (one flush each)
/// and returns the sequence numbers `sock` received intact from `spec.src`, waiting at
/// most [`DEADLINE`] for stragglers. Also drains `ch`'s receive side and returns how
/// many received frames carried `spec.src_mac` (the channel's own transmissions).
pub fn send_udp(
    ch: &mut dyn Channel,
    spec: &UdpSpec,
    count: u32,
    sock: &UdpSocket,
) -> (Vec<u32>, usize) {
    let mut got = Vec::new();
    let mut own = 0;
    let mut buf = [0u8; 2048];
    let mut drain = |got: &mut Vec<u32>, ch: &mut dyn Channel| {
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            assert_eq!(
                from,
                std::net::SocketAddr::V4(spec.src),
                "datagram from elsewhere"
            );
            got.push(check_payload(&buf[..n]).expect("datagram payload corrupted"));
        }
        ch.rx_batch(64, &mut |f, _| {
            if f.len() >= 12 && f[6..12] == spec.src_mac {
                own += 1;
            }
        })
        .unwrap();
    };
    for first in (0..count).step_by(16) {
        for seq in first..(first + 16).min(count) {
            let p = payload(seq, 4 + (seq as usize * 37) % 300);
            ch.tx()
                .send(udp_frame_len(p.len()), &mut |b| {
                    write_udp_frame(spec, &p, b)
                })
                .unwrap_or_else(|e| panic!("send {seq}: {e}"));
        }
        ch.tx().flush().unwrap();
        drain(&mut got, ch);
    }
    let deadline = Instant::now() + DEADLINE;
    while got.len() < count as usize && Instant::now() < deadline {
        // Frames a congested device left queued go out with a later flush.
        ch.tx().flush().unwrap();
        std::thread::sleep(Duration::from_millis(1));
        drain(&mut got, ch);
    }
    (got, own)
}

/// Sends `count` datagrams of varying size (4..=1472 bytes) from `sock` to `dst`.
pub fn kernel_send(sock: &UdpSocket, dst: SocketAddrV4, count: u32) {
    for seq in 0..count {
        let p = payload(seq, 4 + (seq as usize * 97) % 1469);
        let deadline = Instant::now() + DEADLINE;
        // A full socket buffer (EAGAIN/ENOBUFS) is waited out, boundedly.
        while let Err(e) = sock.send_to(&p, dst) {
            assert!(Instant::now() < deadline, "send_to {dst}: {e}");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Asserts `seqs` is exactly `0..count`, each once.
pub fn assert_all_once(mut seqs: Vec<u32>, count: u32, what: &str) {
    seqs.sort_unstable();
    let missing: Vec<u32> = (0..count)
        .filter(|s| seqs.binary_search(s).is_err())
        .collect();
    assert!(
        missing.is_empty(),
        "{what}: {} of {count} missing: {missing:?}",
        missing.len()
    );
    seqs.dedup();
    assert_eq!(seqs.len(), count as usize, "{what}: duplicates");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_frames_parse_back_with_valid_checksums() {
        let spec = UdpSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: "198.18.0.2:5555".parse().unwrap(),
            dst: "198.18.0.1:7777".parse().unwrap(),
        };
        for len in [4, 5, 100, 1471] {
            let p = payload(len as u32, len);
            let mut buf = vec![0; udp_frame_len(len)];
            write_udp_frame(&spec, &p, &mut buf);
            let seen = parse_udp(&buf).unwrap();
            assert!(seen.ip_checksum_ok && seen.udp_checksum_ok);
            assert_eq!((seen.src, seen.dst), (spec.src, spec.dst));
            assert_eq!(check_payload(seen.payload), Some(len as u32));
            buf[40] ^= 1;
            assert!(!parse_udp(&buf).unwrap().udp_checksum_ok);
        }
    }

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (before complement).
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
    }
}
