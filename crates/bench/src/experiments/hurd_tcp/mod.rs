//! `hurd-tcp` (seed 000, experiment 1): a bulk TCP transfer from a peer to a receiver,
//! with the average rate, the peak rate over 100 ms windows and the CPU it cost, for
//! the kernel's own TCP and for ulnet, in both directions, at MTU 1500, 9000 and 65535.
//!
//! The seed sent 100 MB from a host to a Hurd guest and compared the in-kernel pcnet32
//! driver with the same driver moved to user level. Here the two hosts are network
//! namespaces joined by a veth pair (the testbed): the peer is a kernel socket in
//! namespace B on the load core, the system under test is in namespace A on its own core:
//!
//! - `kernel-nooffload`, `kernel-default`: a `std::net` socket in A, with the veth's
//!   checksum/segmentation/GRO offloads off at both ends, or on (as users run it). No XDP
//!   program is attached in kernel rounds (a native one on A's end turns TSO off on B's).
//! - `ulnet-xdp`, `ulnet-packet`, `ulnet-tap`: ulnet's public socket API
//!   (`Stack::builder()...build()`, then `TcpListener` + blocking reads, or
//!   `TcpStream::connect` + `write_all`), its loop sleeping in `poll(2)`, over AF_XDP
//!   (multi-buffer at MTU 9000), AF_PACKET or a TAP device. With TAP the peer reaches
//!   ulnet through A's kernel, which forwards between the veth and the TAP device.
//! - `ulnet-xdp-tokio`: the same over AF_XDP with the application on tokio (ulnet's
//!   async sockets on a current-thread runtime), for applications written that way.
//! - `ulnet-xdp-gso`, `ulnet-xdp-tso` (transmit cases): `ulnet-xdp` with TCP bursts cut
//!   by the kernel (`XdpOptions::gso`): new data leaves as frames of up to 64 KB through
//!   an AF_PACKET socket with a virtio-net header. `-gso` keeps the offloads off at both
//!   ends (A's kernel cuts each burst in software, as `kernel-nooffload` cuts its GSO
//!   packets); `-tso` turns A's tx/tso/gso on (veth passes the bursts whole, as
//!   `kernel-default`'s TSO packets), B's transmit checksums staying off.
//! - `ulnet-xdp-super` (receive cases): `ulnet-xdp` with offloads on at both veth ends, as
//!   `kernel-default`, and `XdpOptions::rx_super_frames`: B's TCP leaves in 64 KB TSO
//!   frames, which ulnet's channel (generic XDP, multi-buffer) takes whole, accepting
//!   their unfinished checksums as the kernel's own receive on a veth does. Goal 2's
//!   receive verdict is judged on it.
//! - `ulnet-packet-whole`: ulnet over AF_PACKET as it runs by default, with offloads on at
//!   both veth ends, as `kernel-default`: receiving, the ring shows B's TSO frames whole
//!   and the stack accepts their unfinished checksums on a veth, with no option; sending,
//!   its bursts (`PacketOptions::gso`) pass veth's TSO whole.
//! - `ulnet-xdp-tokio-whole` (MTU 9000 and 65535): the tokio application in the
//!   configuration goal 2 judges the blocking rows in: receiving as `ulnet-xdp-super`,
//!   sending as `ulnet-xdp-tso`. `ulnet-xdp-tokio` keeps the offloads off, so against
//!   `kernel-default` it compares segments with 64 KB frames.
//! - `ulnet-xdp-engine` (receive at MTU 1500 only): the discard app inside ulnet's loop,
//!   no socket API (engine only), as the old `tcp_rx` scenario measured it.
//!
//! Every transfer carries the deterministic pattern and the receiver checks every byte
//! (a round with one wrong or missing byte fails). The receiver timestamps each read:
//! goodput is the payload over the time from its first byte to its last, and the peak is
//! the fullest 100 ms window, slid in 1 ms steps from the first byte.
//!
//! CPU figures: machine-wide busy time (user + system + softirq, /proc/stat) over the
//! transfer, per GB of payload, and the system under test's own CPU (this process minus
//! the in-process peer thread). On veth the sending core runs the receiver's kernel
//! receive path, so the machine figure is the fair one to compare.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ulnet::channel::packet::{PacketChannel, PacketOptions};
use ulnet::channel::tap::{TapChannel, TapOptions};
use ulnet::channel::xdp::{XdpChannel, XdpOptions};
use ulnet::channel::Capabilities;
use ulnet::net::{Stack, TcpListener, TcpStream};
use ulnet::runtime::{self, App, Backend, WaitMode};
use ulnet::stack::iface::{Interface, IpCidr};
use ulnet::stack::tcp::Event;
use ulnet_apps::discard::Discard;
use ulnet_apps::pattern;

pub(super) mod transfer;

use transfer::*;

use super::{load, Experiment};
use crate::harness::{io_err, Ctx, Metrics, Plan, Window, LOAD_CPU, SUT_CPU};
use crate::results::{ExperimentResult, Metric, PlotKind, PlotView, SystemKind, TableView, View};
use crate::summary::Summary;
use crate::testbed::{Side, Testbed};

/// The seed's window for the peak rate.
const PEAK_WINDOW: Duration = Duration::from_millis(100);
/// Application read and write size (the kernel peers use the same).
pub(crate) const IO_CHUNK: usize = 64 * 1024;
/// A transfer idle this long counts as failed.
pub(crate) const IDLE_LIMIT: Duration = Duration::from_secs(20);
/// The TAP device ulnet creates in namespace A.
const TAP_DEV: &str = "ulhurd0";
/// A's kernel address on the TAP device; ulnet takes .2. Outside every testbed subnet
/// (198.18.1.0/24 ..= 198.19.254.0/24) and only ever configured inside this testbed's
/// namespaces.
const TAP_KERNEL_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 255, 1);
/// ulnet's address behind the TAP device.
const TAP_ULNET_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 255, 2);

/// The experiment.
#[derive(Debug, Clone, Copy)]
pub struct HurdTcp;

/// One system's identity.
struct Sys {
    id: &'static str,
    label: &'static str,
    kind: SystemKind,
    engine_only: bool,
    backend: Option<Backend>,
}

const KERNEL_NOOFF: &str = "kernel-nooffload";
const KERNEL_DEFAULT: &str = "kernel-default";
const ULNET_XDP: &str = "ulnet-xdp";
const ULNET_PACKET: &str = "ulnet-packet";
const ULNET_TAP: &str = "ulnet-tap";
const ULNET_ENGINE: &str = "ulnet-xdp-engine";
const ULNET_TOKIO: &str = "ulnet-xdp-tokio";
const ULNET_TOKIO_WHOLE: &str = "ulnet-xdp-tokio-whole";
const ULNET_GSO: &str = "ulnet-xdp-gso";
const ULNET_TSO: &str = "ulnet-xdp-tso";
const ULNET_SUPER: &str = "ulnet-xdp-super";
const ULNET_PACKET_WHOLE: &str = "ulnet-packet-whole";
const IPERF3: &str = "iperf3-kernel";

/// Every system, in alternation order (kernel, ulnet, kernel, ulnet, ...).
const SYSTEMS: [Sys; 13] = [
    Sys {
        id: KERNEL_NOOFF,
        label: "kernel, offloads off",
        kind: SystemKind::Kernel,
        engine_only: false,
        backend: None,
    },
    Sys {
        id: ULNET_XDP,
        label: "ulnet, AF_XDP, segment by segment",
        kind: SystemKind::Ulnet,
        engine_only: false,
        backend: Some(Backend::Xdp),
    },
    Sys {
        id: KERNEL_DEFAULT,
        label: "kernel, default offloads",
        kind: SystemKind::Kernel,
        engine_only: false,
        backend: None,
    },
    Sys {
        id: ULNET_PACKET,
        label: "ulnet, AF_PACKET",
        kind: SystemKind::Ulnet,
        engine_only: false,
        backend: Some(Backend::Packet),
    },
    Sys {
        id: ULNET_TAP,
        label: "ulnet, TAP (via A's forwarding)",
        kind: SystemKind::Ulnet,
        engine_only: false,
        backend: Some(Backend::Tap),
    },
    Sys {
        id: IPERF3,
        label: "iperf3, kernel both ends, offloads off (cross-check)",
        kind: SystemKind::Kernel,
        engine_only: false,
        backend: None,
    },
    Sys {
        id: ULNET_TOKIO,
        label: "ulnet, AF_XDP, tokio",
        kind: SystemKind::Ulnet,
        engine_only: false,
        backend: Some(Backend::Xdp),
    },
    Sys {
        id: ULNET_GSO,
        label: "ulnet, AF_XDP, bursts cut by A's kernel in software",
        kind: SystemKind::Ulnet,
        engine_only: false,
        backend: Some(Backend::Xdp),
    },
    Sys {
        id: ULNET_TSO,
        label: "ulnet, AF_XDP, bursts passed whole by veth's TSO",
        kind: SystemKind::Ulnet,
        engine_only: false,
        backend: Some(Backend::Xdp),
    },
    Sys {
        id: ULNET_SUPER,
        label: "ulnet, AF_XDP, B's TSO frames taken whole",
        kind: SystemKind::Ulnet,
        engine_only: false,
        backend: Some(Backend::Xdp),
    },
    Sys {
        id: ULNET_PACKET_WHOLE,
        label: "ulnet, AF_PACKET, 64 KB frames whole both ways (offloads on)",
        kind: SystemKind::Ulnet,
        engine_only: false,
        backend: Some(Backend::Packet),
    },
    Sys {
        id: ULNET_TOKIO_WHOLE,
        label: "ulnet, AF_XDP, tokio, 64 KB frames whole (B's TSO in, veth's TSO out)",
        kind: SystemKind::Ulnet,
        engine_only: false,
        backend: Some(Backend::Xdp),
    },
    Sys {
        id: ULNET_ENGINE,
        label: "ulnet, AF_XDP, discard in loop",
        kind: SystemKind::Ulnet,
        engine_only: true,
        backend: Some(Backend::Xdp),
    },
];

fn sys(id: &str) -> &'static Sys {
    SYSTEMS.iter().find(|s| s.id == id).expect("a known system")
}

/// One case: an MTU, a direction and a transfer size, with the systems measured.
#[derive(Debug, Clone)]
struct CaseSpec {
    id: String,
    mtu: u32,
    /// ulnet (or the kernel in A) sending instead of receiving.
    tx: bool,
    bytes: u64,
    systems: Vec<&'static str>,
}

impl CaseSpec {
    fn label(&self) -> String {
        format!(
            "{} {} MB, MTU {}",
            if self.tx {
                "A sends (tx)"
            } else {
                "A receives (rx)"
            },
            self.bytes / 1_000_000,
            self.mtu
        )
    }
}

/// The cases of a profile, with the systems `plan` allows.
fn cases(plan: &Plan) -> Vec<CaseSpec> {
    let p = plan.profile;
    // The seed's 100 MB lasts 40-80 ms here at MTU 9000 and above: slow start and the
    // buffers' growth were a large and varying share of it (medians of the same build
    // swung 13-21 Gb/s between runs), so the default moves 1 GB.
    let bytes: u64 = p.pick(2_000_000, 100_000_000, 1_000_000_000, 1_000_000_000);
    // Over IPv6 the TAP row would need A's kernel to route IPv6 to the TAP device: not
    // built, so that row is left out.
    let backends = if plan.ipv6 {
        plan.backends_or(&[Backend::Xdp, Backend::Packet])
    } else {
        plan.backends_or(&[Backend::Xdp, Backend::Packet, Backend::Tap])
    };
    let keep = |ids: &[&'static str]| -> Vec<&'static str> {
        ids.iter()
            .copied()
            .filter(|id| sys(id).backend.is_none_or(|b| backends.contains(&b)))
            .collect()
    };
    let smoke = p == crate::harness::Profile::Smoke;
    let rx_1500: &[&str] = if smoke {
        &[KERNEL_NOOFF, ULNET_XDP, ULNET_ENGINE]
    } else {
        &[
            KERNEL_NOOFF,
            ULNET_XDP,
            KERNEL_DEFAULT,
            ULNET_PACKET,
            ULNET_TAP,
            ULNET_TOKIO,
            ULNET_SUPER,
            ULNET_PACKET_WHOLE,
            ULNET_ENGINE,
            IPERF3,
        ]
    };
    let tx_1500: &[&str] = if smoke {
        &[KERNEL_NOOFF, ULNET_XDP, ULNET_TSO]
    } else {
        &[
            KERNEL_NOOFF,
            ULNET_XDP,
            KERNEL_DEFAULT,
            ULNET_GSO,
            ULNET_TSO,
            ULNET_PACKET,
            ULNET_PACKET_WHOLE,
            ULNET_TAP,
            ULNET_TOKIO,
        ]
    };
    let jumbo: &[&str] = &[
        KERNEL_NOOFF,
        ULNET_XDP,
        KERNEL_DEFAULT,
        ULNET_TOKIO,
        ULNET_SUPER,
        ULNET_PACKET_WHOLE,
        ULNET_TOKIO_WHOLE,
    ];
    // Bursts only change what ulnet sends.
    let jumbo_tx: &[&str] = &[
        KERNEL_NOOFF,
        ULNET_XDP,
        KERNEL_DEFAULT,
        ULNET_GSO,
        ULNET_TSO,
        ULNET_TOKIO,
        ULNET_TOKIO_WHOLE,
        ULNET_PACKET_WHOLE,
    ];
    let mut v = vec![
        case("rx-1500", 1500, false, bytes, keep(rx_1500)),
        case("tx-1500", 1500, true, bytes, keep(tx_1500)),
    ];
    if !smoke {
        v.push(case("rx-9000", 9000, false, bytes, keep(jumbo)));
        v.push(case("tx-9000", 9000, true, bytes, keep(jumbo_tx)));
        // veth's largest MTU: the "9000 and larger". A 65549-byte frame is 17
        // UMEM descriptors; the kernel, with its default offloads, moves 64 KB GSO
        // packets over veth at any MTU, so here both pay their per-packet costs per 64 KB.
        v.push(case("rx-65535", 65535, false, bytes, keep(jumbo)));
        v.push(case("tx-65535", 65535, true, bytes, keep(jumbo_tx)));
    }
    v
}

fn case(id: &str, mtu: u32, tx: bool, bytes: u64, systems: Vec<&'static str>) -> CaseSpec {
    CaseSpec {
        id: id.into(),
        mtu,
        tx,
        bytes,
        systems,
    }
}

/// Setup shared by every ulnet row using the socket API.
/// The bursts of the rows that send as ulnet does by default.
const BURSTS_SETUP: &str = "XdpOptions::gso, ulnet's default: new data leaves as frames of up to 64 KB (one TCP header, a virtio-net header with SKB_GSO_TCPV4 and the MSS) through an AF_PACKET socket on A's veth end; on a link above 16 KB (MTU 65535) each segment of 16 KB or more goes through the same socket whole, its checksum left to the kernel (GSO_NONE, NEEDS_CSUM); receive and every other frame on AF_XDP; none for a second after a retransmission";

fn ulnet_setup(backend: Backend) -> Vec<(&'static str, String)> {
    let mut v = vec![
        (
            "API",
            "ulnet::net socket API: Stack::builder()...build(); rx: TcpListener::bind + accept + blocking read of 64 KiB, every byte checked; tx: TcpStream::connect + write_all of 64 KiB pattern slices".to_owned(),
        ),
        ("wait mode", "sleep (poll(2) after an adaptive spin; a received TCP stream in coalesced batches, 10-400 µs apart: Runtime::set_coalesce)".into()),
        (
            "TCP",
            "ulnet's default TcpConfig (buffers grown with use: send 64 KiB up to 4 MiB, receive 128 KiB up to 6 MiB, as Linux's tcp_wmem/tcp_rmem; SACK, timestamps)".into(),
        ),
        ("threads", "ulnet's loop and the application thread on CPU 1; the kernel peer in B on CPU 0".into()),
        (
            "offloads",
            "off at both veth ends (tx, tso, gso, gro): the same segments as kernel-nooffload".into(),
        ),
    ];
    match backend {
        Backend::Xdp => v.push((
            "channel",
            "AF_XDP on A's veth end with ulnet's steering program (ulnet's address to the socket, everything else to the kernel); 4096 frames of 4 KiB, multi-buffer (XDP_USE_SG, frags-aware program) when a frame exceeds one".into(),
        )),
        Backend::Packet => v.push((
            "channel",
            "AF_PACKET (TPACKET_V3) on A's veth end; A's kernel also receives every frame and drops it (not its address)".into(),
        )),
        Backend::Tap => v.push((
            "channel",
            format!("a TAP device ({TAP_DEV}) ulnet creates in A; ulnet at {TAP_ULNET_IP}/24 behind it, A's kernel at {TAP_KERNEL_IP} forwarding between veth and TAP (ip_forward=1 in A during these rounds), B routing 198.19.255.0/24 via A's veth address: a kernel forwarding hop the other rows do not have"),
        )),
    }
    v
}

fn declare_systems(ctx: &mut Ctx<'_>, used: &[&'static str], cc: &str) {
    for id in used {
        let s = sys(id);
        let setup: Vec<(&str, String)> = match *id {
            KERNEL_NOOFF | KERNEL_DEFAULT => vec![
                (
                    "stack",
                    "the Linux kernel's TCP: a std::net socket on a thread in namespace A pinned to CPU 1, 64 KiB reads/writes, every byte checked".into(),
                ),
                (
                    "offloads",
                    if *id == KERNEL_DEFAULT {
                        "on at both veth ends (ethtool -K tx on tso on gso on gro on), as users run it".into()
                    } else {
                        "off at both veth ends (ethtool -K tx off tso off gso off gro off): the same 1500- or 9000-byte segments ulnet handles".into()
                    },
                ),
                ("XDP", "no program attached (ulnet's channel closed)".into()),
                ("congestion control", cc.to_owned()),
            ],
            ULNET_ENGINE => vec![
                (
                    "API",
                    "engine only: ulnet's discard app inside the runtime loop (no socket API, no thread hand-off), every byte checked".into(),
                ),
                ("wait mode", "sleep (poll(2) after an adaptive spin; a received TCP stream in coalesced batches, 10-400 µs apart: Runtime::set_coalesce)".into()),
                (
                    "channel",
                    "AF_XDP on A's veth end with ulnet's steering program".into(),
                ),
                (
                    "offloads",
                    "off at both veth ends".into(),
                ),
            ],
            IPERF3 => vec![
                (
                    "API",
                    "iperf3 3.x: `iperf3 -s -1` in A (taskset -c 1), `iperf3 -c -n BYTES -i 0.1 -J` in B (taskset -c 0); its own figures: receiver average, fullest 100 ms interval, server CPU".into(),
                ),
                ("offloads", "off at both veth ends, as the kernel offloads-off row".into()),
                ("purpose", "an independent check of the kernel offloads-off row's rate, by a tool no one here wrote".into()),
            ],
            ULNET_TOKIO => {
                let mut v = ulnet_setup(Backend::Xdp);
                v.push(("bursts", BURSTS_SETUP.into()));
                v[0] = (
                    "API",
                    "ulnet::net async sockets on a current-thread tokio runtime with IO and timers enabled (the application's only task, which turns the loop when its reactor sees the channel readable): rx: TcpListener::accept_async + AsyncReadExt::read of 64 KiB, every byte checked; tx: TcpStream::connect_async + AsyncWriteExt::write_all of 64 KiB, shutdown, read to EOF".into(),
                );
                v
            }
            ULNET_TOKIO_WHOLE => {
                let mut v = ulnet_setup(Backend::Xdp);
                v.retain(|(k, _)| *k != "offloads" && *k != "channel");
                v[0] = (
                    "API",
                    "as ulnet-xdp-tokio: ulnet::net async sockets on a current-thread tokio runtime".into(),
                );
                v.push((
                    "receive cases",
                    "as ulnet-xdp-super: generic XDP, multi-buffer, XdpOptions::rx_super_frames; offloads on at both veth ends, as kernel-default (B's TCP sends 64 KB TSO frames)".into(),
                ));
                v.push((
                    "send cases",
                    format!("as ulnet-xdp-tso: {BURSTS_SETUP}; tx, tso, gso on at A's veth end (veth passes the bursts whole), off at B's"),
                ));
                v
            }
            ULNET_GSO | ULNET_TSO => {
                let mut v = ulnet_setup(Backend::Xdp);
                v.push(("bursts", BURSTS_SETUP.into()));
                if *id == ULNET_TSO {
                    v.retain(|(k, _)| *k != "offloads");
                    v.push((
                        "offloads",
                        "tx, tso, gso on at A's veth end (veth passes the 64 KB bursts to B whole, as the kernel-default row's TSO packets); off at B's, as the other ulnet rows".into(),
                    ));
                } else {
                    v.retain(|(k, _)| *k != "offloads");
                    v.push((
                        "offloads",
                        "off at both veth ends, as kernel-nooffload: A's kernel cuts each burst into segments in software (validate_xmit_skb), as it cuts its own 64 KB GSO packets".into(),
                    ));
                }
                v
            }
            ULNET_SUPER => {
                let mut v = ulnet_setup(Backend::Xdp);
                v.retain(|(k, _)| *k != "offloads" && *k != "channel");
                v.push((
                    "channel",
                    "AF_XDP on A's veth end with ulnet's steering program in generic mode (a native program turns TSO off at B's end), multi-buffer at every MTU, XdpOptions::rx_super_frames: B's TSO frames of up to 64 KB arrive whole (17 UMEM descriptors at most) and their checksums, which B leaves unfinished (the pseudo-header sum only), are accepted as such, as the kernel's own receive on veth accepts them".into(),
                ));
                v.push((
                    "offloads",
                    "on at both veth ends (ethtool -K tx on tso on gso on gro on), as the kernel-default row: B's TCP sends 64 KB TSO frames".into(),
                ));
                v.push((
                    "bursts",
                    "off (receive rows only; ulnet sends ACKs)".into(),
                ));
                v
            }
            ULNET_PACKET_WHOLE => {
                let mut v = ulnet_setup(Backend::Packet);
                v.retain(|(k, _)| *k != "offloads");
                v.push((
                    "offloads",
                    "on at both veth ends (ethtool -K tx on tso on gso on gro on), as the kernel-default row. Receiving: B's TCP sends 64 KB TSO frames, which the ring shows whole (one 64 KiB block holds the largest at MTU 1500; blocks grow with the MTU) with B's checksums unfinished, accepted as such on a veth (Capabilities::rx_checksum_unfinished); no option needed. Sending: the bursts pass veth's TSO whole".into(),
                ));
                v.push((
                    "bursts",
                    "PacketOptions::gso, ulnet's default: new data leaves as frames of up to 64 KB through a second AF_PACKET socket with a virtio-net header, after what the ring holds; every other frame through the ring".into(),
                ));
                v
            }
            ULNET_XDP => {
                let mut v = ulnet_setup(Backend::Xdp);
                v.push((
                    "bursts",
                    "off (XdpOptions::gso false, not ulnet's default): every segment its own AF_XDP frame, the transmit path without the kernel's help".into(),
                ));
                v
            }
            ULNET_PACKET => {
                let mut v = ulnet_setup(Backend::Packet);
                v.push((
                    "bursts",
                    "off (PacketOptions::gso false, not ulnet's default): every segment through the ring".into(),
                ));
                v
            }
            _ => ulnet_setup(s.backend.expect("ulnet rows have a backend")),
        };
        ctx.system(s.id, s.label, s.kind, s.engine_only, &setup);
    }
}

/// Runs every case of one MTU on a fresh testbed.
fn run_mtu(ctx: &mut Ctx<'_>, mtu: u32, specs: &[CaseSpec], port: &mut u16) -> io::Result<()> {
    // Over IPv6 every address below is the testbed's IPv6 one (the transfer functions
    // read the family from the testbed: `Side::ipv6`).
    let tb = Testbed::builder()
        .name_prefix("hurdtcp")
        .ipv6(ctx.plan.ipv6)
        .mtu(mtu)
        .build()
        .map_err(io_err)?;
    let (a, b, v6) = (tb.a(), tb.b(), ctx.plan.ipv6);
    ctx.param(
        &format!("addresses, MTU {mtu}"),
        format!(
            "kernel A {}, kernel B {}, ulnet A {} (AF_XDP) / {} (AF_PACKET)",
            a.ip_of(v6),
            b.ip_of(v6),
            a.spare_of(v6, 0),
            a.spare_of(v6, 1)
        ),
    );
    // Setup learnt while measuring (channel modes, offloads as read back), recorded
    // after each case since the measuring closure cannot reach `ctx`.
    let learnt: RefCell<BTreeMap<(&'static str, String), String>> = RefCell::new(BTreeMap::new());
    for spec in specs {
        ctx.case(
            &spec.id,
            &spec.label(),
            &[
                ("mtu", f64::from(spec.mtu)),
                ("direction", if spec.tx { 1.0 } else { 0.0 }),
                ("mbytes", spec.bytes as f64 / 1e6),
            ],
        );
        ctx.alternate(&spec.id, &spec.systems, |id, _round| {
            *port = port.wrapping_add(1).max(20_000);
            let port = *port;
            let s = sys(id);
            let kernel_default = id == KERNEL_DEFAULT;
            // B's super-frames reach ulnet only while B's offloads are on, as for the
            // kernel's own default row.
            let tokio_whole = id == ULNET_TOKIO_WHOLE;
            let super_frames = id == ULNET_SUPER || (tokio_whole && !spec.tx);
            set_offloads(
                &tb,
                kernel_default || super_frames || id == ULNET_PACKET_WHOLE,
            )?;
            if id == ULNET_TSO || (tokio_whole && spec.tx) {
                set_a_tx_offloads(&tb, true)?;
            }
            if id == IPERF3 {
                return iperf3_rx(&tb, port, spec.bytes);
            }
            if s.kind == SystemKind::Kernel {
                learnt.borrow_mut().insert(
                    (s.id, format!("offloads read back, MTU {mtu}")),
                    format!("A: {}; B: {}", offload_text(tb.a()), offload_text(tb.b())),
                );
                return if spec.tx {
                    kernel_tx(&tb, port, spec.bytes)
                } else {
                    kernel_rx(&tb, port, spec.bytes)
                };
            }
            if s.engine_only {
                let (m, mode) = engine_rx(&tb, port, spec.bytes)?;
                learnt
                    .borrow_mut()
                    .insert((s.id, format!("mode, MTU {mtu}")), mode);
                return Ok(m);
            }
            let tokio = id == ULNET_TOKIO || tokio_whole;
            let gso = id == ULNET_GSO || id == ULNET_TSO || id == ULNET_PACKET_WHOLE || tokio;
            let backend = s.backend.expect("ulnet rows have a backend");
            let u = open_stack_with(&tb, backend, gso, super_frames)?;
            learnt
                .borrow_mut()
                .insert((s.id, format!("mode, MTU {mtu}")), u.mode.clone());
            let r = match (spec.tx, tokio) {
                (true, false) => ulnet_tx(&u, tb.b(), port, spec.bytes),
                (false, false) => ulnet_rx(&u, tb.b(), port, spec.bytes),
                (true, true) => ulnet_tx_tokio(&u, tb.b(), port, spec.bytes),
                (false, true) => ulnet_rx_tokio(&u, tb.b(), port, spec.bytes),
            };
            let closed = close_stack(&tb, u);
            let m = r?;
            closed?;
            Ok(m)
        });
        for ((id, k), v) in std::mem::take(&mut *learnt.borrow_mut()) {
            ctx.system_setup(id, &k, v);
        }
    }
    let _ = set_offloads(&tb, false);
    tb.teardown().map_err(io_err)
}

impl Experiment for HurdTcp {
    fn name(&self) -> &'static str {
        "hurd-tcp"
    }

    fn seed(&self) -> &'static str {
        "000"
    }

    fn title(&self) -> &'static str {
        "Bulk TCP from a peer: average and 100 ms peak rate, CPU per GB, kernel vs ulnet, both directions, MTU 1500, 9000 and 65535"
    }

    fn estimate(&self, plan: &Plan) -> Duration {
        // Per transfer: the payload at a pessimistic rate plus fixed costs (ethtool,
        // threads, for ulnet opening and closing its channel and the stack's linger).
        let mut s = 0.0;
        for c in cases(plan) {
            s += 1.0; // testbed and case bookkeeping
            for id in &c.systems {
                // Rates seen on this 2-core machine while it was shared (kernel
                // 1.4-3.5 Gb/s, ulnet 0.7-1.3 Gb/s): pessimistic, so the estimate holds.
                let (gbps, fixed) = match *id {
                    KERNEL_NOOFF | KERNEL_DEFAULT => (2.0, 0.15),
                    IPERF3 => (2.0, 0.6),
                    ULNET_TAP | ULNET_PACKET => (0.8, 0.5),
                    ULNET_ENGINE => (0.6, 0.5),
                    _ => (1.0, 0.5),
                };
                s += f64::from(plan.rounds) * (fixed + c.bytes as f64 * 8.0 / (gbps * 1e9));
            }
        }
        Duration::from_secs_f64(s)
    }

    fn tools(&self) -> &'static [&'static str] {
        &["ip", "ethtool", "sysctl", "iperf3", "taskset"]
    }

    fn supports_ipv6(&self) -> bool {
        true
    }

    fn run(&self, ctx: &mut Ctx<'_>) -> io::Result<()> {
        if ctx.ipv6() {
            ctx.note("Over IPv6: the kernel and ulnet use the testbed's 2001:2:0:<slot>::/64 addresses (MSS 1440 at MTU 1500); the TAP row is left out (A's kernel would have to route IPv6 to the TAP device).");
        }
        let specs = cases(ctx.plan);
        let mut used: Vec<&'static str> = Vec::new();
        for id in SYSTEMS.iter().map(|s| s.id) {
            if specs.iter().any(|c| c.systems.contains(&id)) {
                used.push(id);
            }
        }
        let cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
            .map_or_else(|_| "unknown".into(), |s| s.trim().to_owned());
        declare_systems(ctx, &used, &format!("{cc} (this kernel's default)"));
        ctx.param(
            "transfer",
            "one TCP connection per round, the pattern, every byte checked by the receiver",
        );
        ctx.param("peak window", "the fullest 100 ms window of the receiver's byte count, slid in 1 ms steps from its first byte, wholly inside the transfer");
        ctx.param("read/write size", "64 KiB");
        ctx.param(
            "sizes",
            specs
                .iter()
                .map(|c| format!("{}: {} B", c.id, c.bytes))
                .collect::<Vec<_>>()
                .join(", "),
        );
        ctx.param("rounds", ctx.rounds());

        let mut port = 20_000u16;
        for mtu in [1500, 9000, 65535] {
            let of_mtu: Vec<CaseSpec> = specs.iter().filter(|c| c.mtu == mtu).cloned().collect();
            if of_mtu.is_empty() {
                continue;
            }
            ctx.status(format!("MTU {mtu} testbed"));
            run_mtu(ctx, mtu, &of_mtu, &mut port)?;
        }

        let metrics = vec![
            Metric::more("goodput_gbps", "goodput (Gb/s)", 2),
            Metric::more("peak_gbps", "peak 100 ms (Gb/s)", 2),
            Metric::more("avg_mbytes_s", "average (MB/s)", 0),
            Metric::less("cpus_busy_s_per_gb", "machine CPU, busy time (s/GB)", 3),
            Metric::less("machine_s_per_gb", "machine CPU, /proc/stat (s/GB)", 3),
            Metric::less("sut_s_per_gb", "system under test CPU (s/GB)", 3),
            // Each core's exact busy time: on veth one of the two is saturated, and which
            // one (and what each system spends on it) is what holds the rate.
            Metric::less("sut_core_cores", "SUT core busy (cores)", 2),
            Metric::less("load_core_cores", "B's core busy (cores)", 2),
            Metric::less("sut_core_s_per_gb", "SUT core busy (s/GB)", 3),
            Metric::less("load_core_s_per_gb", "B's core busy (s/GB)", 3),
        ];
        for c in &specs {
            let baselines: Vec<String> = [KERNEL_NOOFF, KERNEL_DEFAULT]
                .iter()
                .filter(|k| c.systems.contains(k))
                .map(|k| (*k).to_owned())
                .collect();
            ctx.view(View::Table(TableView {
                title: format!(
                    "{}: {} B per transfer, {}",
                    c.label(),
                    c.bytes,
                    if c.tx {
                        "the system under test in A sends to a kernel receiver in B"
                    } else {
                        "a kernel sender in B sends to the system under test in A"
                    }
                ),
                cases: vec![c.id.clone()],
                systems: c.systems.iter().map(|s| (*s).to_owned()).collect(),
                metrics: metrics.clone(),
                baselines,
                ratio_metric: Some("goodput_gbps".into()),
            }));
        }
        let case_ids: Vec<String> = specs.iter().map(|c| c.id.clone()).collect();
        ctx.view(View::Plot(PlotView {
            id: "goodput".into(),
            title: "Bulk TCP goodput by case and system".into(),
            kind: PlotKind::Bars,
            cases: case_ids.clone(),
            systems: used.iter().map(|s| (*s).to_owned()).collect(),
            x_param: None,
            x_label: "case".into(),
            y: Metric::more("goodput_gbps", "goodput (Gb/s)", 2),
            y2: None,
            x_log: false,
        }));
        ctx.view(View::Plot(PlotView {
            id: "cpu".into(),
            title: "Machine CPU per GB moved".into(),
            kind: PlotKind::Bars,
            cases: case_ids,
            systems: used.iter().map(|s| (*s).to_owned()).collect(),
            x_param: None,
            x_label: "case".into(),
            // The exact busy time where this machine keeps it (as goal 1 is judged).
            y: if crate::cpu::idle_per_cpu(1).is_some() {
                Metric::less("cpus_busy_s_per_gb", "machine CPU, busy time (s/GB)", 3)
            } else {
                Metric::less("machine_s_per_gb", "machine CPU, /proc/stat (s/GB)", 3)
            },
            y2: None,
            x_log: false,
        }));

        ctx.note("The seed's 100 MB took ~40 s at 2.4 MB/s; here it would take 40-200 ms, mostly slow start and buffer growth, so the default and full profiles move 1 GB (the quick one 100 MB): a transfer has few complete 100 ms windows (metric full_windows) only in the quick profile, where a transfer shorter than one window reports its average as its peak.");
        ctx.note("Goodput is measured by the receiver, from its first byte to its last (payload only, as the seed counted); the CPU window also covers connection setup and teardown.");
        ctx.note("On veth the sending core runs the receiving side's kernel receive path: for rx rows the kernel's (and AF_XDP's / AF_PACKET's) receive work is done on the peer's core 0 and shows in machine CPU, not in the system-under-test figure; compare machine CPU per GB.");
        ctx.note("\"Offloads off\" does not make the kernel's TCP send segment by segment: since Linux 4.13 (commit 0a6b2a1dc2a2, \"tcp: switch to GSO being always on\") TCP builds packets of up to 64 KB whatever the device offers and, with gso off, cuts them in software at the device (skb_segment, with the checksum, was 14% of the sending core in a profile here). Its TCP/IP stack is traversed once per 64 KB; ulnet's, like every stack writing MTU-sized frames into a channel, once per segment. At MTU 65535 both traverse once per 64 KB.");
        ctx.note("kernel-default rounds turn tx/tso/gso/gro on at both veth ends and have no XDP program attached; every other round turns them off again (AF_XDP and AF_PACKET readers need finished checksums and MTU-sized frames).");
        if used.contains(&ULNET_TAP) {
            ctx.note(format!("ulnet-tap takes a different path: the peer in B reaches ulnet only through A's kernel, which routes between the veth and the TAP device ulnet created (A's kernel at {TAP_KERNEL_IP}, ulnet at {TAP_ULNET_IP}, ip_forward=1 in A during those rounds). Its rows include a kernel IP forwarding hop and the TAP read/write system call per frame."));
        }
        if specs.iter().any(|c| c.mtu == 9000) {
            ctx.note("MTU 9000 and 65535 are measured for the kernel (both settings) and ulnet on AF_XDP (multi-buffer: a 9014-byte frame spans three 4 KiB UMEM descriptors, a 65549-byte one seventeen). ulnet on AF_PACKET and TAP is left out there: the seed's question is the driver path, and the AF_XDP row is the one that needs the jumbo support.");
        }
        if ctx.profile() == crate::harness::Profile::Smoke {
            ctx.note("Smoke profile: 2 MB transfers, rx-1500 and tx-1500 only, kernel offloads off and ulnet on AF_XDP; figures prove the harness runs, nothing more.");
        }
        Ok(())
    }

    fn seed_figure(&self) -> &'static str {
        "Experiment 1 of the seed: 100 MB sent over TCP from the host (Mac OS X) to the Hurd in a VMware guest, 2.4 GHz Intel Core 2 Duo, payload rate only, averages of 3 runs; the Hurd only receives.\n\n\
| pcnet32 driver | average rate | peak rate |\n\
| --- | --- | --- |\n\
| in-kernel | 2.3 MB/s | 3.9 MB/s |\n\
| user-level | 2.4 MB/s | 2.6 MB/s |\n\n\
Claim: \"the user-level driver still has fairly good performance compared with the in-kernel driver\" (average 2.4 vs 2.3 MB/s)."
    }

    fn verdict(&self, r: &ExperimentResult, s: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        let mut held = Vec::new();
        let mut failed = Vec::new();
        for c in &r.cases {
            let mut parts = Vec::new();
            // Sending, ulnet as it runs by default (bursts), with A's offloads as the
            // kernel row's: off (A's kernel cuts the bursts in software) against the
            // offloads-off kernel, on (veth's TSO passes them whole) against the
            // default-offloads kernel. Receiving, the one ulnet row.
            let bursts = s.median(&c.id, ULNET_GSO, "goodput_gbps").is_some();
            let rows = if bursts {
                [
                    (KERNEL_NOOFF, ULNET_GSO, "offloads off"),
                    (KERNEL_DEFAULT, ULNET_TSO, "default offloads"),
                ]
            } else {
                [
                    (KERNEL_NOOFF, ULNET_XDP, "offloads off"),
                    (KERNEL_DEFAULT, ULNET_XDP, "default offloads"),
                ]
            };
            for (k, u, what) in rows {
                if let Some(x) = s.paired(&c.id, u, k, "goodput_gbps") {
                    parts.push(format!("{x:.2}x the kernel with {what}"));
                    let verdict = format!("{} vs {what}", c.id);
                    if x >= 1.0 {
                        held.push(verdict);
                    } else {
                        failed.push(verdict);
                    }
                }
            }
            if let Some(x) = s.paired(&c.id, rows[0].1, KERNEL_NOOFF, "peak_gbps") {
                parts.push(format!("peak {x:.2}x (offloads off)"));
            }
            if !parts.is_empty() {
                let gbps = |u| {
                    s.median(&c.id, u, "goodput_gbps")
                        .map_or_else(|| "-".to_owned(), |g| format!("{g:.2}"))
                };
                let how = if bursts {
                    format!(
                        " with its default bursts ({} Gb/s cut in software, {} Gb/s through TSO; segment by segment {})",
                        gbps(ULNET_GSO),
                        gbps(ULNET_TSO),
                        gbps(ULNET_XDP)
                    )
                } else {
                    format!(" ({} Gb/s)", gbps(ULNET_XDP))
                };
                out.push(format!(
                    "{}: ulnet on AF_XDP through its socket API{how} moved {}.",
                    c.label,
                    parts.join(", ")
                ));
            }
        }
        if held.is_empty() && failed.is_empty() {
            out.push(
                "No case has both ulnet on AF_XDP and a kernel row measured: no verdict.".into(),
            );
        } else {
            out.push(format!(
                "The seed's claim (user level at least as fast as in-kernel on average) {} here: ulnet ≥ kernel in {} of {} comparisons{}{}.",
                if failed.is_empty() {
                    "holds"
                } else if held.is_empty() {
                    "does not hold"
                } else {
                    "holds only in part"
                },
                held.len(),
                held.len() + failed.len(),
                if held.is_empty() {
                    String::new()
                } else {
                    format!(" (holds: {})", held.join(", "))
                },
                if failed.is_empty() {
                    String::new()
                } else {
                    format!("; below the kernel: {}", failed.join(", "))
                }
            ));
        }
        out.extend(goal_verdicts(s));
        out
    }

    fn goals(&self, _r: &ExperimentResult, s: &Summary) -> Vec<String> {
        goal_verdicts(s)
    }
}

/// The project's speed goals for the socket API (issue 11), judged on the median of
/// this run's rounds' own ratios ([`Summary::paired`]): one sentence per goal whose rows were measured.
fn goal_verdicts(s: &Summary) -> Vec<String> {
    let word = |ok: bool| if ok { "met" } else { "not met" };
    // Two decimals, or three where two would print the limit itself (0.996 as "1.00x",
    // not met).
    let x = |v: f64, limit: f64| {
        let two = format!("{v:.2}");
        if two == format!("{limit:.2}") && v != limit {
            format!("{v:.3}x")
        } else {
            format!("{two}x")
        }
    };
    let mut out = Vec::new();
    // Goal 1: MTU 1500, both APIs, against the kernel with offloads off: goodput at
    // least its, machine CPU per GB at most its; receive also within 10% of the
    // engine-only row. Sending, ulnet as it runs by default (bursts).
    //
    // Machine CPU is every CPU's exact busy time where both rows have it (`cpus_busy`:
    // the window minus each CPU's idle time, kept at every idle entry and exit), else
    // `/proc/stat`'s busy states. This kernel samples those at the tick, so work that
    // runs in bursts shorter than a tick and then idles is missed: the kernel's
    // softirq receive path far more than ulnet's threads, which run without a break
    // (session 29: the kernel's rx-1500 at 1.04-1.10 s/GB by `/proc/stat`, 1.26-1.29
    // exact; ulnet's 1.00-1.12 against 1.11-1.19).
    let machine_cpu = |case: &str, sys: &str| {
        s.paired(case, sys, KERNEL_NOOFF, "cpus_busy_s_per_gb")
            .map(|r| (r, "busy time"))
            .or_else(|| {
                s.paired(case, sys, KERNEL_NOOFF, "machine_s_per_gb")
                    .map(|r| (r, "/proc/stat"))
            })
    };
    let mut one = Vec::new();
    for (case, rows) in [
        ("rx-1500", [("blocking", ULNET_XDP), ("tokio", ULNET_TOKIO)]),
        ("tx-1500", [("blocking", ULNET_GSO), ("tokio", ULNET_TOKIO)]),
    ] {
        for (api, sys) in rows {
            let rate = s.paired(case, sys, KERNEL_NOOFF, "goodput_gbps");
            let (Some(rate), Some((cpu, how))) = (rate, machine_cpu(case, sys)) else {
                continue;
            };
            let engine = s.paired(case, sys, ULNET_ENGINE, "goodput_gbps");
            let ok = rate >= 1.0 && cpu <= 1.0 && engine.is_none_or(|e| e >= 0.9);
            let of_engine = engine.map_or(String::new(), |e| format!(", {} the engine", x(e, 0.9)));
            one.push(format!(
                "{case} {api} {} at {} the CPU ({how}){of_engine}: {}",
                x(rate, 1.0),
                x(cpu, 1.0),
                word(ok)
            ));
        }
    }
    if !one.is_empty() {
        out.push(format!(
            "Goal 1 (MTU 1500, the socket API at ≥ 1.0x the kernel with offloads off and ≤ 1.0x its machine CPU per GB; receive within 10% of the engine-only row): {}.",
            one.join("; ")
        ));
    }
    out.extend(goal_one_bounds(s));
    // Goal 2: jumbo frames against the kernel as users run it (default offloads).
    // Sending, the row with A's offloads on as the kernel row has them (veth's TSO);
    // receiving, the row with B's offloads on as the kernel row has them (B's TSO
    // frames taken whole), else segment by segment.
    let mut two = Vec::new();
    for (case, rows) in [
        (
            "rx-9000",
            &[(ULNET_SUPER, " (B's TSO frames whole)"), (ULNET_XDP, "")][..],
        ),
        ("tx-9000", &[(ULNET_TSO, " (bursts through TSO)")][..]),
        (
            "rx-65535",
            &[(ULNET_SUPER, " (B's TSO frames whole)"), (ULNET_XDP, "")][..],
        ),
        ("tx-65535", &[(ULNET_TSO, " (bursts through TSO)")][..]),
    ] {
        let judged = rows.iter().find_map(|(sys, how)| {
            s.paired(case, sys, KERNEL_DEFAULT, "goodput_gbps")
                .map(|r| (r, *how))
        });
        if let Some((r, how)) = judged {
            // The tokio row in the same configuration, else the one with offloads off.
            let tokio = [ULNET_TOKIO_WHOLE, ULNET_TOKIO]
                .iter()
                .find_map(|sys| s.paired(case, sys, KERNEL_DEFAULT, "goodput_gbps"))
                .map_or(String::new(), |t| format!(" (tokio {})", x(t, 1.0)));
            // The same frames through AF_PACKET, shown beside the verdict, which stays
            // on the AF_XDP row the issue names.
            let packet = s
                .paired(case, ULNET_PACKET_WHOLE, KERNEL_DEFAULT, "goodput_gbps")
                .map_or(String::new(), |t| format!(" (AF_PACKET {})", x(t, 1.0)));
            two.push(format!(
                "{case} {}{how}: {}{tokio}{packet}",
                x(r, 1.0),
                word(r >= 1.0)
            ));
        }
    }
    if !two.is_empty() {
        out.push(format!(
            "Goal 2 (MTU 9000 and larger, ≥ 1.0x the kernel with default offloads): {}.",
            two.join("; ")
        ));
    }
    out
}

/// Which core held each MTU 1500 case of goal 1, and what each system spent on it per GB
/// moved. On veth the sending core also runs the receiver's kernel receive path (the
/// kernel's TCP input; for ulnet, copy mode's channel), so receiving, the core that
/// saturates is B's, the sender's, whatever the system under test does on its own core;
/// sending, it is the system under test's, which also runs B's receive. Where one core
/// was busy in every row, the goodput ratio is the inverse of the ratio of the cost per
/// GB on that core, and this sentence says whose cost it is.
fn goal_one_bounds(s: &Summary) -> Vec<String> {
    const SATURATED: f64 = 0.9;
    let mut out = Vec::new();
    for (case, rows, sut, peer) in [
        (
            "rx-1500",
            [("blocking", ULNET_XDP), ("tokio", ULNET_TOKIO)],
            "the SUT core",
            "B's core (the sender's, where veth runs A's receive too: the kernel's TCP input, or ulnet's channel with copy mode's two copies of each frame)",
        ),
        (
            "tx-1500",
            [("blocking", ULNET_GSO), ("tokio", ULNET_TOKIO)],
            "the SUT core (where veth runs B's TCP receive too)",
            "B's core (the receiver's)",
        ),
    ] {
        let busy = |sys: &str| {
            Some((
                s.median(case, sys, "sut_core_cores")?,
                s.median(case, sys, "load_core_cores")?,
            ))
        };
        let Some(kernel) = busy(KERNEL_NOOFF) else {
            continue;
        };
        let rows: Vec<(&str, &str, (f64, f64))> = rows
            .iter()
            .filter_map(|(api, sys)| Some((*api, *sys, busy(sys)?)))
            .collect();
        if rows.is_empty() {
            continue;
        }
        let apis = rows.iter().map(|r| r.0).collect::<Vec<_>>().join(" / ");
        let list = |f: &dyn Fn(&(f64, f64)) -> f64| {
            rows.iter()
                .map(|r| format!("{:.2}", f(&r.2)))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        let (sut_list, load_list) = (list(&|b| b.0), list(&|b| b.1));
        let who = if case.starts_with("rx") {
            ("receiving", "receiver")
        } else {
            ("sending", "sender")
        };
        let busy_text = format!(
            "{sut} was busy {:.2} of the time with the kernel {} and {sut_list} with ulnet ({apis}), {peer} {:.2} and {load_list}",
            kernel.0, who.0, kernel.1
        );
        let all = |f: &dyn Fn(&(f64, f64)) -> f64| {
            f(&kernel) >= SATURATED && rows.iter().all(|r| f(&r.2) >= SATURATED)
        };
        let held = if all(&|b| b.0) {
            Some(("sut_core", "the SUT core"))
        } else if all(&|b| b.1) {
            Some(("load_core", "B's core"))
        } else {
            None
        };
        let Some((metric, name)) = held else {
            out.push(format!(
                "What held {case}: {busy_text}; no core was busy {SATURATED} of the time in every row, so neither core alone set the rate."
            ));
            continue;
        };
        let key = format!("{metric}_s_per_gb");
        let per_gb = s.median(case, KERNEL_NOOFF, &key);
        let ratios: Vec<String> = rows
            .iter()
            .filter_map(|r| s.paired(case, r.1, KERNEL_NOOFF, &key))
            .map(|x| format!("{x:.2}x"))
            .collect();
        let cost = match per_gb {
            Some(k) if ratios.len() == rows.len() => format!(
                " Per GB it spent {k:.3} s with the kernel as the {}, {} that with ulnet (the rounds' own ratios).",
                who.1,
                ratios.join(" / ")
            ),
            _ => String::new(),
        };
        out.push(format!(
            "What held {case}: {busy_text}: {name} set the rate.{cost}"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_pick_cases_and_systems() {
        let plan = |profile| Plan {
            profile,
            rounds: 1,
            backends: vec![],
            out: "/tmp".into(),
            ipv6: false,
            cases: vec![],
            systems: vec![],
        };
        let smoke = cases(&plan(crate::harness::Profile::Smoke));
        assert_eq!(smoke.len(), 2);
        assert!(smoke[0].systems.contains(&ULNET_ENGINE));
        let def = cases(&plan(crate::harness::Profile::Default));
        let mtus: Vec<u32> = def.iter().map(|c| c.mtu).collect();
        assert_eq!(mtus, [1500, 1500, 9000, 9000, 65535, 65535]);
        assert!(def.iter().all(|c| c.bytes == 1_000_000_000));
        assert!(!def[2].systems.contains(&ULNET_TAP));
        assert!(def[4].systems.contains(&KERNEL_DEFAULT));
        let mut p = plan(crate::harness::Profile::Default);
        p.backends = vec![Backend::Tap];
        let only_tap = cases(&p);
        assert!(!only_tap[0].systems.contains(&ULNET_XDP));
        assert!(only_tap[0].systems.contains(&ULNET_TAP));
    }

    /// A summary of rounds given as (case, system, round, metrics).
    fn of_rounds<'a>(
        rounds: impl IntoIterator<Item = (&'a str, &'a str, u32, Vec<(&'a str, f64)>)>,
    ) -> Summary {
        let mut r = ExperimentResult::new("hurd-tcp", "000", "goals");
        for (case, sys, round, metrics) in rounds {
            r.measurements.push(crate::results::Measurement {
                case: case.into(),
                system: sys.into(),
                round,
                seq: 0,
                metrics: metrics
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
            });
        }
        Summary::of(&r)
    }

    /// Rounds of (case, system, goodput, machine CPU per GB).
    fn summary<'a>(rows: &[(&'a str, &'a str, &[f64], &[f64])]) -> Summary {
        of_rounds(rows.iter().flat_map(|&(case, sys, gbps, cpu)| {
            gbps.iter()
                .zip(cpu)
                .enumerate()
                .map(move |(round, (&g, &c))| {
                    let m = vec![("goodput_gbps", g), ("machine_s_per_gb", c)];
                    (case, sys, round as u32, m)
                })
        }))
    }

    #[test]
    fn goals_are_judged_on_paired_rounds_with_every_condition() {
        let s = summary(&[
            ("rx-1500", KERNEL_NOOFF, &[7.0, 8.0, 7.5], &[1.5, 1.4, 1.5]),
            // Round by round 1.40x, 1.125x and 1.32x: the median of those, not the
            // ratio of the medians (9.8 / 7.5 = 1.31x).
            ("rx-1500", ULNET_XDP, &[9.8, 9.0, 9.9], &[1.2, 1.3, 1.1]),
            // Faster than the kernel at less CPU, but 0.85x the engine: not met.
            ("rx-1500", ULNET_TOKIO, &[8.5, 8.5, 8.5], &[1.4, 1.4, 1.4]),
            (
                "rx-1500",
                ULNET_ENGINE,
                &[10.0, 10.0, 10.0],
                &[1.1, 1.1, 1.1],
            ),
            ("tx-1500", KERNEL_NOOFF, &[7.5, 7.5, 7.5], &[1.4, 1.4, 1.4]),
            // Faster, but at more CPU per GB: not met.
            ("tx-1500", ULNET_GSO, &[7.8, 7.8, 7.8], &[1.5, 1.5, 1.5]),
            (
                "rx-9000",
                KERNEL_DEFAULT,
                &[16.0, 16.0, 16.0],
                &[0.6, 0.6, 0.6],
            ),
            ("rx-9000", ULNET_XDP, &[15.0, 17.0, 16.5], &[0.6, 0.6, 0.6]),
            // Judged on B's TSO frames taken whole where that row ran.
            (
                "rx-65535",
                KERNEL_DEFAULT,
                &[16.0, 16.0, 16.0],
                &[0.6, 0.6, 0.6],
            ),
            ("rx-65535", ULNET_XDP, &[8.0, 8.0, 8.0], &[0.6, 0.6, 0.6]),
            (
                "rx-65535",
                ULNET_SUPER,
                &[17.0, 17.0, 17.0],
                &[0.6, 0.6, 0.6],
            ),
            // The tokio row in the judged configuration is preferred to the one with
            // offloads off.
            ("rx-65535", ULNET_TOKIO, &[8.0, 8.0, 8.0], &[0.6, 0.6, 0.6]),
            (
                "rx-65535",
                ULNET_TOKIO_WHOLE,
                &[16.8, 16.8, 16.8],
                &[0.6, 0.6, 0.6],
            ),
            (
                "rx-65535",
                ULNET_PACKET_WHOLE,
                &[18.0, 18.0, 18.0],
                &[0.6, 0.6, 0.6],
            ),
            (
                "tx-9000",
                KERNEL_DEFAULT,
                &[16.0, 16.0, 16.0],
                &[0.6, 0.6, 0.6],
            ),
            ("tx-9000", ULNET_TSO, &[15.0, 15.0, 15.0], &[0.4, 0.4, 0.4]),
            (
                "tx-9000",
                ULNET_TOKIO,
                &[15.94, 15.94, 15.94],
                &[0.4, 0.4, 0.4],
            ),
        ]);
        let g = goal_verdicts(&s);
        assert_eq!(g.len(), 2, "{g:?}");
        assert_eq!(
            g[0],
            "Goal 1 (MTU 1500, the socket API at ≥ 1.0x the kernel with offloads off and ≤ 1.0x its machine CPU per GB; receive within 10% of the engine-only row): rx-1500 blocking 1.32x at 0.80x the CPU (/proc/stat), 0.98x the engine: met; rx-1500 tokio 1.13x at 0.93x the CPU (/proc/stat), 0.85x the engine: not met; tx-1500 blocking 1.04x at 1.07x the CPU (/proc/stat): not met."
        );
        assert_eq!(
            g[1],
            "Goal 2 (MTU 9000 and larger, ≥ 1.0x the kernel with default offloads): rx-9000 1.03x: met; tx-9000 0.94x (bursts through TSO): not met (tokio 0.996x); rx-65535 1.06x (B's TSO frames whole): met (tokio 1.05x) (AF_PACKET 1.12x)."
        );
        assert!(goal_verdicts(&summary(&[])).is_empty());
    }

    /// Three rounds of (case, system, SUT core busy, B's core busy), 1 GB in a second each.
    fn cores<'a>(rows: &[(&'a str, &'a str, f64, f64)]) -> Summary {
        of_rounds(rows.iter().flat_map(|&(case, sys, sut, load)| {
            (0..3).map(move |round| {
                let m = vec![
                    ("sut_core_cores", sut),
                    ("load_core_cores", load),
                    ("sut_core_s_per_gb", sut),
                    ("load_core_s_per_gb", load),
                ];
                (case, sys, round, m)
            })
        }))
    }

    #[test]
    fn goal_one_names_the_core_that_held_each_case() {
        let s = cores(&[
            ("rx-1500", KERNEL_NOOFF, 0.64, 0.95),
            ("rx-1500", ULNET_XDP, 0.54, 0.99),
            ("rx-1500", ULNET_TOKIO, 0.55, 0.98),
            ("tx-1500", KERNEL_NOOFF, 1.0, 0.45),
            // The tokio row did not run: the sentence names the rows that did.
            ("tx-1500", ULNET_GSO, 0.99, 0.40),
        ]);
        let b = goal_one_bounds(&s);
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!(
            b[0],
            "What held rx-1500: the SUT core was busy 0.64 of the time with the kernel receiving and 0.54 / 0.55 with ulnet (blocking / tokio), B's core (the sender's, where veth runs A's receive too: the kernel's TCP input, or ulnet's channel with copy mode's two copies of each frame) 0.95 and 0.99 / 0.98: B's core set the rate. Per GB it spent 0.950 s with the kernel as the receiver, 1.04x / 1.03x that with ulnet (the rounds' own ratios)."
        );
        assert_eq!(
            b[1],
            "What held tx-1500: the SUT core (where veth runs B's TCP receive too) was busy 1.00 of the time with the kernel sending and 0.99 with ulnet (blocking), B's core (the receiver's) 0.45 and 0.40: the SUT core set the rate. Per GB it spent 1.000 s with the kernel as the sender, 0.99x that with ulnet (the rounds' own ratios)."
        );
        // No core saturated in every row: said so, with no cost ratio.
        let s = cores(&[
            ("rx-1500", KERNEL_NOOFF, 0.64, 0.95),
            ("rx-1500", ULNET_XDP, 0.54, 0.7),
        ]);
        let b = goal_one_bounds(&s);
        assert!(
            b[0].starts_with("What held rx-1500: ")
                && b[0].ends_with("so neither core alone set the rate."),
            "{}",
            b[0]
        );
        // Without the cores' figures (a machine without exact idle times): nothing.
        assert!(goal_one_bounds(&summary(&[("rx-1500", KERNEL_NOOFF, &[7.0], &[1.5])])).is_empty());
    }

    #[test]
    fn goal_one_takes_the_exact_busy_time_where_both_rows_have_it() {
        let mut r = ExperimentResult::new("hurd-tcp", "000", "goals");
        // (system, goodput, /proc/stat s/GB, busy time s/GB): by `/proc/stat` ulnet
        // costs 1.05x the kernel, by busy time 0.90x.
        for (sys, g, stat, busy) in [
            (KERNEL_NOOFF, 9.0, 1.0, 1.25),
            (ULNET_XDP, 10.0, 1.05, 1.125),
        ] {
            r.measurements.push(crate::results::Measurement {
                case: "rx-1500".into(),
                system: sys.into(),
                round: 0,
                seq: 0,
                metrics: BTreeMap::from([
                    ("goodput_gbps".to_owned(), g),
                    ("machine_s_per_gb".to_owned(), stat),
                    ("cpus_busy_s_per_gb".to_owned(), busy),
                ]),
            });
        }
        let g = goal_verdicts(&Summary::of(&r));
        assert_eq!(g.len(), 1, "{g:?}");
        assert!(
            g[0].ends_with("rx-1500 blocking 1.11x at 0.90x the CPU (busy time): met."),
            "{}",
            g[0]
        );
        // Without it in one row, `/proc/stat` decides.
        r.measurements[0].metrics.remove("cpus_busy_s_per_gb");
        let g = goal_verdicts(&Summary::of(&r));
        assert!(
            g[0].ends_with("rx-1500 blocking 1.11x at 1.05x the CPU (/proc/stat): not met."),
            "{}",
            g[0]
        );
    }
}
