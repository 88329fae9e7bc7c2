//! Tunables of the TCP engine: one [`TcpConfig`] per [`Tcp`](super::Tcp), with per-socket
//! overrides for the few options an application may change ([`SocketOptions`]).
//!
//! Defaults follow RFC 6298 (RTO 1 s initial; 1 s minimum is the RFC's figure, §2.4
//! allows lower: like Linux we floor the whole RTO at 200 ms and the variance term at
//! 200 ms too, so RTO ≥ SRTT + 200 ms), RFC 1122 §4.2.3.2 (delayed ACK ≤ 500 ms; we use
//! 40 ms), RFC 1122 §4.2.3.6 (keepalive interval ≥ 2 h when enabled) and RFC 9293 §3.4.2
//! (MSL of 2 min is the RFC's; 30 s like Linux's 60 s TIME-WAIT).

use crate::time::Duration;

use super::congestion::Algorithm;
pub use crate::storage::MemLimits;

/// Configuration shared by every connection of one [`Tcp`](super::Tcp).
///
/// With the `serde` feature it (de)serialises field by field, durations as serde's
/// `{secs, nanos}`; fields a document leaves out take their defaults.
#[derive(Debug, Clone)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(default)
)]
#[non_exhaustive]
pub struct TcpConfig {
    /// Largest send buffer per connection, in bytes (Linux `tcp_wmem[2]`). A connection
    /// starts at `send_buffer_initial` and grows towards this with its congestion window
    /// (see `tcp/socket/mem.rs`).
    pub send_buffer_len: usize,
    /// Send buffer a connection starts with (Linux `tcp_wmem[1]`), at most
    /// `send_buffer_len`.
    pub send_buffer_initial: usize,
    /// Send buffer a connection starts with while memory is under pressure (Linux
    /// `tcp_wmem[0]`).
    pub send_buffer_min: usize,
    /// Largest receive buffer per connection, in bytes (Linux `tcp_rmem[2]`): the largest
    /// window we advertise, and what the window scale we offer is chosen for (RFC 7323
    /// §2.3). A connection starts at `recv_buffer_initial` and grows towards this with
    /// what the application reads per round trip (dynamic right-sizing, Linux
    /// `tcp_rcv_space_adjust`).
    pub recv_buffer_len: usize,
    /// Receive buffer a connection starts with (Linux `tcp_rmem[1]`), at most
    /// `recv_buffer_len`.
    pub recv_buffer_initial: usize,
    /// Receive buffer a connection starts with while memory is under pressure (Linux
    /// `tcp_rmem[0]`).
    pub recv_buffer_min: usize,
    /// The stack-wide budget for buffer storage (Linux `tcp_mem`, in bytes, not pages):
    /// past `pressure` buffers stop growing and new ones start at their minimum; past
    /// `hard` new connections are refused and data that needs more storage is dropped.
    pub mem: MemLimits,
    /// A connection whose buffers stay empty and that heard nothing from the peer for
    /// this long gives their storage back (it is allocated again when data comes).
    pub buffer_idle: Duration,
    /// The largest path MTU (IP header included) used to derive our MSS. The default is the
    /// largest IP packet, so the link decides: attaching the layer to an interface
    /// ([`Interface::set_tcp`](crate::iface::Interface::set_tcp)) lowers it to the
    /// interface's MTU. Set it lower to cap the MSS below the link's. Per-connection paths
    /// may lower it further with [`Tcp::set_path_mtu`](super::Tcp::set_path_mtu).
    pub mtu: usize,
    /// The most new data one transmission may carry as a burst of full-sized segments,
    /// cut by the channel's segmentation offload (Linux's TSO/GSO autosizing, capped at
    /// 64 KB); 0 sends every segment on its own. Attaching the layer to an interface sets
    /// it from the channel ([`InterfaceConfig::gso_max_len`](crate::iface::InterfaceConfig::gso_max_len)).
    /// Retransmissions, probes and segments that are not full-sized go alone.
    pub gso_max: u32,
    /// Send window scaling (RFC 7323 §2) when the peer agrees.
    pub window_scaling: bool,
    /// Send timestamps (RFC 7323 §3) when the peer agrees; enables PAWS and RTTM.
    pub timestamps: bool,
    /// Offer and honour selective acknowledgements (RFC 2018).
    pub sack: bool,
    /// Nagle's algorithm (RFC 1122 §4.2.3.4) on new sockets. Off by default, for latency.
    pub nagle: bool,
    /// How long a delayed ACK may wait (RFC 1122 §4.2.3.2); zero acknowledges at once.
    pub delayed_ack: Duration,
    /// How the receiver paces its ACKs within the delayed-ACK rules (see [`AckPolicy`]).
    pub ack_policy: AckPolicy,
    /// Retransmission timeout before any RTT sample (RFC 6298 §2.1).
    pub initial_rto: Duration,
    /// Lower bound on the whole RTO (RFC 6298 §2.4).
    pub min_rto: Duration,
    /// Lower bound on the RTO's variance term: RTO = SRTT + max(G, 4*RTTVAR, this), as
    /// Linux applies its minimum RTO. Zero gives plain RFC 6298. See
    /// [`RttEstimator::set_min_variance`](super::rtt::RttEstimator::set_min_variance) for
    /// why the default (200 ms, Linux's `tcp_rto_min`) floors the variance rather than
    /// only the whole RTO.
    pub min_rto_var: Duration,
    /// Upper bound on the RTO after backoff (RFC 6298 §2.5).
    pub max_rto: Duration,
    /// Maximum segment lifetime; TIME-WAIT lasts twice this (RFC 9293 §3.4.2).
    pub msl: Duration,
    /// How many times a SYN (or SYN-ACK) is retransmitted before the open fails.
    pub syn_retries: u8,
    /// How many RTO retransmissions of data before the connection is aborted
    /// (RFC 1122 §4.2.3.5 "R2"), unless the user timeout fires first.
    pub max_retransmits: u8,
    /// Abort when sent data stays unacknowledged this long (RFC 5482 user timeout);
    /// `None` leaves it to `max_retransmits`.
    pub user_timeout: Option<Duration>,
    /// Keepalive defaults for new sockets (RFC 1122 §4.2.3.6); `None` = off.
    pub keepalive: Option<Keepalive>,
    /// How long an orphaned FIN-WAIT-2 connection waits for the peer's FIN (Linux
    /// `tcp_fin_timeout`); without it a vanished peer would pin memory forever.
    pub fin_wait2_timeout: Duration,
    /// Congestion control algorithm for new sockets. BBR takes its delivery-rate samples
    /// from RACK's per-segment records: with [`TcpConfig::rack`] off, a connection asked
    /// to run BBR runs CUBIC .
    pub congestion: Algorithm,
    /// Initial congestion window in segments (RFC 6928: 10; RFC 5681 §3.1 allows 2-4).
    /// At least 1.
    pub initial_window: u32,
    /// Largest accept-queue length a listener may ask for.
    pub max_backlog: usize,
    /// Half-open (SYN-RECEIVED) connections allowed per listener. When it is full a new
    /// SYN first evicts the oldest half-open connection whose SYN-ACK was already
    /// retransmitted, else it is answered with a SYN cookie (see [`SynCookies`]), else
    /// dropped.
    pub syn_queue_len: usize,
    /// When listeners answer SYNs with SYN cookies (RFC 4987 §3.6) instead of keeping
    /// state, like Linux's `tcp_syncookies`. [`SynCookies::WhenFull`] by default.
    pub syn_cookies: SynCookies,
    /// Connections (all states except TIME-WAIT records) the engine will hold.
    pub max_connections: usize,
    /// TIME-WAIT records kept; when full the oldest is recycled early.
    pub max_time_wait: usize,
    /// Challenge ACKs (RFC 5961 §7) sent per second, engine-wide.
    pub challenge_ack_limit: u32,
    /// Out-of-order segments (distinct holes) the reassembler tracks per connection.
    pub max_ooo_ranges: usize,
    /// Tail loss probes (RFC 8985 §7): when an ACK is overdue by 2*SRTT, send one segment
    /// to draw SACK feedback, so a loss at the tail of a flight is repaired by fast
    /// recovery instead of a retransmission timeout. Needs SACK. On by default, as in
    /// Linux.
    pub tail_loss_probe: bool,
    /// RACK-style time-based loss detection for the segment at SND.UNA (RFC 8985 §6):
    /// it is deemed lost, and retransmitted, once data sent after its latest
    /// transmission is SACKed and a reordering window has passed. This repairs lost
    /// retransmissions and losses followed by too few segments for three duplicate ACKs
    /// (the case RFC 5827 early retransmit covers) without a timeout. Needs SACK. On by
    /// default, as in Linux.
    pub rack: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            // Linux's tcp_wmem[2] and tcp_rmem[2] defaults: with buffers that grow with use
            // (storage is allocated as data needs it), a large maximum costs an idle or
            // slow connection nothing, and a bulk one is not held to 256 KiB in flight
            // (measured: 29 jumbo segments, a stall on every burst of the peer's ACKs).
            send_buffer_len: 4 * 1024 * 1024,
            send_buffer_initial: 64 * 1024,
            send_buffer_min: 4096,
            recv_buffer_len: 6 * 1024 * 1024,
            recv_buffer_initial: 128 * 1024,
            recv_buffer_min: 4096,
            mem: MemLimits::default(),
            buffer_idle: Duration::from_secs(1),
            mtu: 65535,
            gso_max: 0,
            window_scaling: true,
            timestamps: true,
            sack: true,
            nagle: false,
            delayed_ack: Duration::from_millis(40),
            ack_policy: AckPolicy::PerBatch,
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            min_rto_var: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            msl: Duration::from_secs(30),
            syn_retries: 6,
            max_retransmits: 15,
            user_timeout: None,
            keepalive: None,
            fin_wait2_timeout: Duration::from_secs(60),
            congestion: Algorithm::default(),
            initial_window: 10,
            max_backlog: 4096,
            syn_queue_len: 1024,
            syn_cookies: SynCookies::WhenFull,
            max_connections: 65536,
            max_time_wait: 65536,
            challenge_ack_limit: 1000,
            max_ooo_ranges: 32,
            tail_loss_probe: true,
            rack: true,
        }
    }
}

/// When a listener answers a SYN with a SYN cookie (RFC 4987 §3.6, `tcp/cookie.rs`): the
/// SYN-ACK's sequence number encodes what the connection needs, nothing is stored, and
/// the connection is created when the peer's ACK returns the cookie. The modes are
/// Linux's `tcp_syncookies` 0, 1 and 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
#[non_exhaustive]
pub enum SynCookies {
    /// Never: a SYN that finds the SYN queue full (and nothing to evict) is dropped.
    Never,
    /// Only while the SYN queue is full (and for two cookie periods after it last was,
    /// so the ACKs of the cookies sent can still be validated). The default.
    #[default]
    WhenFull,
    /// For every SYN: listeners keep no half-open state at all. Connections lose what a
    /// cookie cannot carry (exact MSS; window scale and SACK without timestamps).
    Always,
}

/// How the receiver paces its ACKs. Both keep the rules of RFC 1122 §4.2.3.2 and RFC 5681
/// §4.2 (an ACK at least every second full-sized segment, within the delay; at once for
/// data that fills a hole, and for out-of-order data the first three per hole, then
/// Linux's SACK compression, `socket/recv.rs`) and the quick-ACK mode at a connection's
/// start; they differ in how ACKs of one receive batch are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
#[non_exhaustive]
pub enum AckPolicy {
    /// One cumulative ACK per connection per receive batch for in-order data (a stretch
    /// ACK, as Linux's receiver does per GRO aggregate). The default: each ACK costs a
    /// frame and, on veth, the peer's receive path on our core.
    #[default]
    PerBatch,
    /// Linux's receiver without GRO, segment by segment (`__tcp_ack_snd_check`): an ACK
    /// as the second full-sized segment arrives. What a Linux peer does; the simulator
    /// uses it to stand in for one.
    Linux,
}

impl TcpConfig {
    /// The (send, receive) buffer sizes a new connection starts with: the initial ones,
    /// or the minimum ones while memory is under pressure; never above the largest.
    pub(crate) fn starting_buffers(&self, pressure: bool) -> (usize, usize) {
        let (tx, rx) = if pressure {
            (self.send_buffer_min, self.recv_buffer_min)
        } else {
            (self.send_buffer_initial, self.recv_buffer_initial)
        };
        (
            tx.clamp(1, self.send_buffer_len.max(1)),
            rx.clamp(1, self.recv_buffer_len.max(1)),
        )
    }
}

/// Keepalive timing (RFC 1122 §4.2.3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(default)
)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub idle: Duration,
    /// Time between unanswered probes.
    pub interval: Duration,
    /// Unanswered probes after which the connection is dropped.
    pub count: u8,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive {
            idle: Duration::from_secs(2 * 3600),
            interval: Duration::from_secs(75),
            count: 9,
        }
    }
}

/// Options an application may change on one socket: after it exists
/// ([`Tcp::set_option`](super::Tcp::set_option)), before its SYN
/// ([`Tcp::connect_with`](super::Tcp::connect_with)), or on a listener for every
/// connection it accepts ([`Tcp::set_listener_option`](super::Tcp::set_listener_option)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketOption {
    /// Disable Nagle's algorithm (`true` = send small segments at once).
    NoDelay(bool),
    /// Keepalive on (with timing) or off.
    Keepalive(Option<Keepalive>),
    /// The RFC 5482 user timeout; `None` = rely on the retransmission count.
    UserTimeout(Option<Duration>),
    /// Switch the congestion control algorithm (the new one starts from the current cwnd).
    Congestion(Algorithm),
    /// Delayed ACK on (`true`) or acknowledge every segment at once (`false`, like
    /// Linux `TCP_QUICKACK`).
    DelayedAck(bool),
    /// Receive buffer size in bytes (like `SO_RCVBUF`; at least 1): the largest window
    /// offered. Before the SYN it also picks the window scale offered (RFC 7323 §2.3).
    /// Afterwards it may only grow, and only while nothing is buffered (shrinking would
    /// take back offered window, RFC 9293 §3.8.6).
    RecvBuffer(usize),
    /// Send buffer size in bytes (like `SO_SNDBUF`; at least 1); only while nothing is
    /// queued or unacknowledged.
    SendBuffer(usize),
    /// Largest segment (like `TCP_MAXSEG`, bytes of TCP payload, at least 88): before
    /// the SYN it lowers the MSS we announce (RFC 9293 §3.7.1) and the one we send with;
    /// afterwards only the one we send with.
    MaxSegment(u16),
    /// The TOS byte (IPv4) or Traffic Class (IPv6) of every segment, like `IP_TOS`:
    /// only its DSCP bits are kept, the ECN field stays the transport's (RFC 3168 §6.1.1;
    /// Linux masks it the same way for TCP). Default 0.
    Tos(u8),
    /// The TTL (IPv4) or Hop Limit (IPv6) of every segment, like `IP_TTL`; `None` is
    /// the interface's (the default).
    HopLimit(Option<u8>),
}

/// Largest MSS that fits `mtu` for the given address family (RFC 9293 §3.7.1: MSS is the
/// MTU less the fixed IP and TCP headers).
pub(crate) fn mss_for_mtu(mtu: usize, ipv6: bool) -> u16 {
    let hdr = if ipv6 { 40 + 20 } else { 20 + 20 };
    // RFC 9293 §3.7.1 / RFC 1122: never below the 536 (IPv4) / 1220 (IPv6) defaults' floor
    // of 88 bytes that keeps headers a minority; clamp the top to what the field holds.
    let mss = mtu.saturating_sub(hdr).clamp(88, u16::MAX as usize);
    mss as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mss_follows_mtu_and_family() {
        assert_eq!(mss_for_mtu(1500, false), 1460);
        assert_eq!(mss_for_mtu(1500, true), 1440);
        assert_eq!(mss_for_mtu(9000, false), 8960);
        assert_eq!(mss_for_mtu(10, false), 88);
        assert_eq!(mss_for_mtu(1 << 20, false), u16::MAX);
    }
}
