//! What an [`XdpChannel`](super::XdpChannel) is opened with beyond the interface and its
//! namespace: queue, UMEM and ring sizes, modes and what is steered. The interface and
//! namespace are arguments of [`XdpChannel::open`](super::XdpChannel::open), so a caller
//! that already states them (ulnet's `StackBuilder`) never states them twice; the AF_PACKET
//! and TAP channels are opened the same way.

use std::net::IpAddr;

use super::steer::{FlowRule, SynPolicer, XdpMode};

/// Zero-copy preference for the AF_XDP bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZeroCopy {
    /// Try zero-copy, fall back to copy mode when the driver refuses (`EOPNOTSUPP`).
    #[default]
    Auto,
    /// Zero-copy or fail.
    On,
    /// Copy mode.
    Off,
}

/// Options for [`XdpChannel::open`](super::XdpChannel::open): everything specific to
/// AF_XDP (the interface and its namespace are `open`'s own arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpOptions {
    /// Receive queue to bind (frames arriving on other queues go to the kernel).
    pub queue_id: u32,
    /// UMEM frames, split evenly between receive and transmit.
    pub frame_count: u32,
    /// UMEM frame size: a power of two from 2048 to the page size.
    pub frame_size: u32,
    /// Rx ring descriptors (a power of two).
    pub rx_ring_size: u32,
    /// Tx ring descriptors (a power of two).
    pub tx_ring_size: u32,
    /// Most frames one `rx_batch` hands out.
    pub batch_count: usize,
    /// Native or generic XDP.
    pub mode: XdpMode,
    /// Zero-copy preference.
    pub zero_copy: ZeroCopy,
    /// Addresses whose traffic (and ARP / neighbour discovery) is steered to ulnet.
    pub addresses: Vec<IpAddr>,
    /// Flow rules; empty means every frame for `addresses` is steered.
    pub rules: Vec<FlowRule>,
    /// Bind with `XDP_USE_NEED_WAKEUP` (system calls only when the kernel sleeps).
    pub need_wakeup: bool,
    /// Frames larger than one UMEM frame as several descriptors (`XDP_USE_SG` and a
    /// frags-aware program), so jumbo MTUs work.
    pub multi_buffer: bool,
    /// TCP bursts through a second, AF_PACKET socket for the kernel to segment (GSO, or
    /// the device's TSO), one send per burst: AF_XDP has no segmentation offload, so
    /// without it every segment is a frame of its own (the same socket finishes the
    /// checksum of a single jumbo segment, `Gso::segment_size` 0). Receive stays on
    /// AF_XDP. On by default: segment by segment, sending through the socket API reached
    /// 0.77x the kernel's goodput at MTU 1500 and 0.31x the kernel with its default
    /// offloads; with bursts 0.92-1.04x and 1.4x (docs/performance-log.md).
    pub gso: bool,
    /// The steering program's SYN policer; `None` steers every SYN for ulnet.
    pub syn_policer: Option<SynPolicer>,
    /// Take the TCP super-frames (up to 64 KB) this host's own kernel sends over a veth
    /// with its default offloads, whole, with the checksums it leaves unfinished
    /// (`Capabilities::rx_checksum_unfinished`: a field that is exactly the
    /// pseudo-header sum is accepted, as that kernel's own receive on a veth accepts
    /// it; every other checksum is verified). The peer's segmentation then costs nothing
    /// on either side, as with the kernel's own TSO between two veth ends. Implies
    /// generic XDP (a native program turns TSO off on the veth's other end) and
    /// multi-buffer. Meant for a veth whose other end is this host's kernel: a NIC sends
    /// no frame above the MTU. A UDP super-frame (a sender's `UDP_SEGMENT`) carries many datagrams
    /// without their boundaries: the stack drops and counts it (`udp_above_mtu`). Off
    /// by default.
    pub rx_super_frames: bool,
}

impl Default for XdpOptions {
    /// Queue 0, 4096 frames of 4096 bytes, 2048-descriptor rings, batches of 64, native
    /// mode with generic fallback, zero-copy with copy fallback, need_wakeup and
    /// multi-buffer on, GSO bursts on, the SYN policer on with its defaults, nothing
    /// steered yet.
    fn default() -> Self {
        XdpOptions {
            queue_id: 0,
            frame_count: 4096,
            frame_size: 4096,
            rx_ring_size: 2048,
            tx_ring_size: 2048,
            batch_count: 64,
            mode: XdpMode::Auto,
            zero_copy: ZeroCopy::Auto,
            addresses: Vec::new(),
            rules: Vec::new(),
            need_wakeup: true,
            multi_buffer: true,
            gso: true,
            syn_policer: Some(SynPolicer::default()),
            rx_super_frames: false,
        }
    }
}
