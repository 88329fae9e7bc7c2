//! The AF_XDP netchannel and its flow-steering XDP program.
//!
//! [`XdpChannel::open`] builds a UMEM, maps the four rings, binds an AF_XDP socket to
//! one queue of an interface (zero-copy first, copy mode when the driver refuses), and
//! attaches a steering program (native XDP first, generic when the driver refuses) that
//! redirects to the socket only ulnet's frames: its addresses, ARP/ND for them and, if
//! flow rules are given, only matching flows. Everything else gets `XDP_PASS`, so the
//! host keeps using the link. The mode in use is in `capabilities().mode`, e.g.
//! `"native, copy"`.
//!
//! The program is written in Rust ([`asm`], [`program`]) and loaded with `bpf(2)`; no
//! libbpf, clang or object files. It is attached through a BPF link, so it detaches when
//! the channel is dropped and when the process dies in any way.
//!
//! Cost to the host (docs/LINUX-NOTES.md): a native XDP program on one veth end turns off TSO on
//! the other end, so the kernel's own TCP over that pair slows down (about 18 → 5.7 Gb/s
//! measured here); generic mode keeps TSO but hands the socket super-frames, which
//! [`XdpOptions::rx_super_frames`] takes whole: on a veth whose other end is this host's
//! kernel, the peer's segmentation then costs nothing (`ulnet bench hurd-tcp`'s
//! `ulnet-xdp-super` row).

pub mod asm;
mod channel;
mod options;
pub mod program;
pub mod steer;

pub use channel::{XdpChannel, XdpTx};
pub use options::{XdpOptions, ZeroCopy};
pub use steer::{FlowRule, SteeringMaps, SynPolicer, XdpMode};
