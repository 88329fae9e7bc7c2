//! Test-only network plumbing for the `packet` and `tap` tests: uniquely named network
//! namespaces and veth pairs torn down by `Drop`, kernel UDP sockets inside them, and
//! hand-built Ethernet/IPv4/UDP frames. The real testbed lives in `ulnet_bench`; this is
//! the minimum these tests need.
//!
//! Missing privileges or tools make the helpers panic with a message naming what is
//! missing: the tests fail, they never pass by skipping.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::sys::netns;
use crate::Channel;

/// How long any receive loop in these tests waits at most.
pub(crate) const DEADLINE: Duration = Duration::from_secs(5);

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A number unique within this test process, for names.
pub(crate) fn unique() -> u32 {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// A short id from the pid and a counter, for names that must fit 15 bytes.
pub(crate) fn short_id() -> String {
    format!("{}x{}", std::process::id() % 100_000, unique())
}

/// Runs `prog args`, panicking with its output (and what may be missing) on failure.
pub(crate) fn run(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run `{prog}` ({e}): this test needs it installed (iproute2/ethtool)")
    });
    if !out.status.success() {
        panic!(
            "`{prog} {}` failed ({}): {}\nthis test needs root (CAP_NET_ADMIN and \
             CAP_SYS_ADMIN) to create network namespaces and interfaces",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace created for one test, deleted (with its interfaces) on drop.
#[derive(Debug)]
pub(crate) struct Netns {
    pub(crate) name: String,
}

impl Netns {
    pub(crate) fn new(tag: &str) -> Netns {
        let name = format!("ulnet-{tag}-{}-{}", std::process::id(), unique());
        run("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NAME args...`.
    pub(crate) fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Runs `prog args` inside the namespace (`ip netns exec`).
    pub(crate) fn exec(&self, prog: &str, args: &[&str]) -> String {
        let mut all = vec!["netns", "exec", self.name.as_str(), prog];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// The MAC address of `ifname` in this namespace.
    pub(crate) fn mac(&self, ifname: &str) -> [u8; 6] {
        let out = self.ip(&["-br", "link", "show", "dev", ifname]);
        let field = out.split_whitespace().nth(2).unwrap_or("");
        parse_mac(field).unwrap_or_else(|| panic!("no MAC in `ip -br link` output {out:?}"))
    }

    /// A nonblocking UDP socket bound to `addr` inside this namespace (it stays there
    /// whichever thread uses it).
    pub(crate) fn udp_socket(&self, addr: SocketAddrV4) -> UdpSocket {
        let s = netns::run_in(&self.name, || UdpSocket::bind(addr))
            .unwrap_or_else(|e| panic!("entering {}: {e}", self.name))
            .unwrap_or_else(|e| panic!("binding {addr} in {}: {e}", self.name));
        s.set_nonblocking(true).unwrap();
        s
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes the interfaces in it (both veth ends go with
        // whichever namespace goes first). Nothing to do about a failure in drop.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

fn fmt_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Two namespaces joined by a veth pair: `a` is the end a channel attaches to (no
/// address in the kernel), `b` is the kernel peer at `ip_b`/24 with offloads off and a
/// permanent neighbour entry for `ip_a` → `mac_a`, so no ARP is needed.
#[derive(Debug)]
pub(crate) struct VethPair {
    pub(crate) if_a: String,
    pub(crate) if_b: String,
    pub(crate) mac_a: [u8; 6],
    pub(crate) mac_b: [u8; 6],
    pub(crate) ip_a: Ipv4Addr,
    pub(crate) ip_b: Ipv4Addr,
    pub(crate) a: Netns,
    pub(crate) b: Netns,
}

impl VethPair {
    pub(crate) fn new(tag: &str) -> VethPair {
        let a = Netns::new(&format!("{tag}a"));
        let b = Netns::new(&format!("{tag}b"));
        let id = short_id();
        let (if_a, if_b) = (format!("u{id}a"), format!("u{id}b"));
        let n = unique() as u8;
        let mac_a = [0x02, 0x00, 0x5e, 0x10, n, 0x0a];
        let mac_b = [0x02, 0x00, 0x5e, 0x10, n, 0x0b];
        run(
            "ip",
            &[
                "link",
                "add",
                &if_a,
                "netns",
                &a.name,
                "address",
                &fmt_mac(mac_a),
                "type",
                "veth",
                "peer",
                "name",
                &if_b,
                "netns",
                &b.name,
                "address",
                &fmt_mac(mac_b),
            ],
        );
        let ip_a = Ipv4Addr::new(198, 18, n, 2);
        let ip_b = Ipv4Addr::new(198, 18, n, 1);
        // The kernel side must hand out finished checksums and no GSO super-frames
        // (LINUX-NOTES: veth leaves checksums partial otherwise).
        b.exec(
            "ethtool",
            &["-K", &if_b, "tx", "off", "tso", "off", "gso", "off"],
        );
        b.ip(&["addr", "add", &format!("{ip_b}/24"), "dev", &if_b]);
        b.ip(&[
            "neigh",
            "add",
            &ip_a.to_string(),
            "lladdr",
            &fmt_mac(mac_a),
            "dev",
            &if_b,
            "nud",
            "permanent",
        ]);
        a.ip(&["link", "set", &if_a, "up"]);
        b.ip(&["link", "set", &if_b, "up"]);
        VethPair {
            if_a,
            if_b,
            mac_a,
            mac_b,
            ip_a,
            ip_b,
            a,
            b,
        }
    }
}

/// Adds a permanent neighbour entry `ip → mac` on `ifname` in `ns`.
pub(crate) fn static_neighbour(ns: &Netns, ifname: &str, ip: Ipv4Addr, mac: [u8; 6]) {
    ns.ip(&[
        "neigh",
        "add",
        &ip.to_string(),
        "lladdr",
        &fmt_mac(mac),
        "dev",
        ifname,
        "nud",
        "permanent",
    ]);
}

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
pub(crate) fn checksum(data: &[u8]) -> u16 {
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
pub(crate) struct UdpSpec {
    pub(crate) src_mac: [u8; 6],
    pub(crate) dst_mac: [u8; 6],
    pub(crate) src: SocketAddrV4,
    pub(crate) dst: SocketAddrV4,
}

/// Length of an Ethernet/IPv4/UDP frame carrying `payload_len` bytes.
pub(crate) fn udp_frame_len(payload_len: usize) -> usize {
    14 + 20 + 8 + payload_len
}

/// Writes an Ethernet/IPv4/UDP frame carrying `payload` into `buf` (exactly
/// [`udp_frame_len`] bytes), checksums included.
pub(crate) fn write_udp_frame(spec: &UdpSpec, payload: &[u8], buf: &mut [u8]) {
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

/// A received Ethernet/IPv4/UDP frame, with its checksums checked.
#[derive(Debug)]
pub(crate) struct SeenUdp<'a> {
    pub(crate) dst_mac: [u8; 6],
    pub(crate) src: SocketAddrV4,
    pub(crate) dst: SocketAddrV4,
    pub(crate) payload: &'a [u8],
    pub(crate) ip_checksum_ok: bool,
    pub(crate) udp_checksum_ok: bool,
}

/// Parses `frame` as Ethernet/IPv4 (no options)/UDP; `None` for anything else.
pub(crate) fn parse_udp(frame: &[u8]) -> Option<SeenUdp<'_>> {
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
pub(crate) fn payload(seq: u32, len: usize) -> Vec<u8> {
    let mut p = seq.to_be_bytes().to_vec();
    p.extend(
        (0..len.saturating_sub(4)).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8),
    );
    p
}

/// The sequence number of a payload made by [`payload`], if it is one exactly.
pub(crate) fn check_payload(p: &[u8]) -> Option<u32> {
    let seq = u32::from_be_bytes(p.get(..4)?.try_into().ok()?);
    (payload(seq, p.len()) == p).then_some(seq)
}

/// Polls `ch` until `count` UDP datagrams for `dst` arrived, [`DEADLINE`] passed, or
/// (with `quiet`) nothing for `dst` arrived for that long,
/// varying the batch size so the walk also resumes in the middle of ring blocks. Panics
/// on a frame for `dst` that is corrupted (bad checksum or payload). Returns the
/// sequence numbers in arrival order and the number of frames seen whose source MAC is
/// `own_mac`, the channel's address (frames the channel's side sent).
pub(crate) fn collect_udp(
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
pub(crate) fn send_udp(
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
pub(crate) fn kernel_send(sock: &UdpSocket, dst: SocketAddrV4, count: u32) {
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
pub(crate) fn assert_all_once(mut seqs: Vec<u32>, count: u32, what: &str) {
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

    #[test]
    fn mac_parsing() {
        assert_eq!(
            parse_mac("02:00:5e:10:01:0a"),
            Some([2, 0, 0x5e, 0x10, 1, 0x0a])
        );
        assert_eq!(parse_mac("02:00:5e"), None);
        assert_eq!(parse_mac("02:00:5e:10:01:0a:00"), None);
    }
}
