//! What the application can read about a connection ([`TcpInfo`], like Linux `tcp_info`)
//! and about the whole engine ([`TcpStats`]: every dropped or refused segment is counted
//! under the rule that dropped it).

use crate::time::Duration;

use super::congestion::Algorithm;
use super::state::State;

/// The sender's loss-recovery state (the states of Linux `tcpi_ca_state`, without CWR:
/// ECN is not supported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum CaState {
    /// Nothing suspicious.
    #[default]
    Open,
    /// Duplicate ACKs or SACKs seen, not (yet) a loss (RFC 5681 §3.2, RFC 3042).
    Disorder,
    /// Fast recovery after a loss found by duplicate ACKs or SACK (RFC 6582, RFC 6675).
    Recovery,
    /// Retransmitting after a timeout (RFC 6298 §5, RFC 5681 §3.1).
    Loss,
}

/// A snapshot of one connection, for the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpInfo {
    /// Connection state.
    pub state: State,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes.
    pub ssthresh: u32,
    /// Smoothed RTT (RFC 6298), if any sample was taken.
    pub srtt: Option<Duration>,
    /// RTT variation (RFC 6298).
    pub rttvar: Duration,
    /// Current retransmission timeout (with backoff).
    pub rto: Duration,
    /// Effective send MSS, bytes.
    pub snd_mss: u16,
    /// Peer's receive window (scaled), bytes.
    pub snd_wnd: u32,
    /// Window we advertise, bytes.
    pub rcv_wnd: u32,
    /// Bytes sent and not yet acknowledged (cumulatively).
    pub bytes_in_flight: u32,
    /// Bytes the peer has selectively acknowledged above the cumulative ACK.
    pub sacked_bytes: u32,
    /// Segments retransmitted, over the connection's life.
    pub retransmits: u64,
    /// Payload bytes retransmitted, over the connection's life (Linux `tcpi_bytes_retrans`).
    pub bytes_retrans: u64,
    /// Loss-recovery state.
    pub ca_state: CaState,
    /// Bytes presumed lost and not yet acknowledged: the hole at SND.UNA in NewReno
    /// recovery, unSACKed bytes below the highest SACKed one in SACK recovery (RFC 6675),
    /// everything outstanding after a timeout.
    pub lost: u32,
    /// Largest segment payload received from the peer (Linux `tcpi_rcv_mss`).
    pub rcv_mss: u16,
    /// Consecutive RTO backoffs now in force.
    pub backoff: u8,
    /// D-SACK blocks received (RFC 2883): the peer got some data twice.
    pub dsacks_received: u64,
    /// Fast retransmits / recovery episodes entered.
    pub fast_recoveries: u64,
    /// Retransmission timeouts that fired.
    pub timeouts: u64,
    /// Segments sent.
    pub segs_out: u64,
    /// Segments received and accepted by the connection.
    pub segs_in: u64,
    /// Payload bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Payload bytes received in order.
    pub bytes_received: u64,
    /// Bytes queued in the send buffer (unsent + unacknowledged).
    pub send_queue_len: usize,
    /// Bytes readable now.
    pub recv_queue_len: usize,
    /// Window scale shifts (send, receive) in force; `None` when not negotiated.
    pub window_scale: Option<(u8, u8)>,
    /// Timestamps negotiated.
    pub timestamps: bool,
    /// SACK negotiated.
    pub sack: bool,
    /// Congestion control algorithm in use.
    pub congestion: Algorithm,
    /// The rate the congestion controller paces at, bytes per second; `None` when it
    /// does not pace (NewReno, CUBIC).
    pub pacing_rate: Option<u64>,
    /// The latest delivery-rate sample, bytes per second (Linux `tcpi_delivery_rate`,
    /// draft-cheng-iccrg-delivery-rate-estimation); `None` before the first, or with RACK
    /// off (the samples are taken over its per-segment records).
    pub delivery_rate: Option<u64>,
}

/// Per-connection counters kept on the control block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConnCounters {
    pub retransmits: u64,
    pub bytes_retrans: u64,
    pub fast_recoveries: u64,
    pub timeouts: u64,
    pub segs_out: u64,
    pub segs_in: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
}

/// Engine-wide counters: why segments were dropped or answered with a reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpStats {
    /// Segments handed to `process`.
    pub segs_in: u64,
    /// Bytes of our data the peers acknowledged, over all connections: forward
    /// progress, which the interface takes as confirmation of an IPv6 neighbour's
    /// reachability (RFC 4861 §7.3.1).
    pub bytes_acked: u64,
    /// Payload bytes received in order, over all connections.
    pub bytes_received: u64,
    /// Segments handed out by `process` and `dispatch`.
    pub segs_out: u64,
    /// RSTs sent (to segments for no connection, or by aborts).
    pub resets_sent: u64,
    /// Segments dropped as malformed (SYN+FIN, SYN+RST, bad ports or addresses).
    pub dropped_malformed: u64,
    /// Segments outside the receive window (answered with an ACK).
    pub dropped_out_of_window: u64,
    /// Segments rejected by PAWS (RFC 7323 §5).
    pub dropped_paws: u64,
    /// Segments with an unacceptable ACK (RFC 5961 §5).
    pub dropped_bad_ack: u64,
    /// RSTs ignored (out of window, or in TIME-WAIT per RFC 1337).
    pub dropped_rst: u64,
    /// Segments dropped for other RFC 9293 rules (e.g. no ACK bit).
    pub dropped_other: u64,
    /// Challenge ACKs sent (RFC 5961).
    pub challenge_acks: u64,
    /// Challenge ACKs suppressed by the rate limit (RFC 5961 §7).
    pub challenge_acks_suppressed: u64,
    /// SYNs that found a listener's SYN queue full (each was then handled by an eviction,
    /// a SYN cookie, or dropped).
    pub syn_queue_overflows: u64,
    /// Half-open connections evicted from a full SYN queue to make room for a new SYN
    /// (the oldest one whose SYN-ACK had already been retransmitted).
    pub syn_queue_evictions: u64,
    /// SYN-ACKs sent carrying a SYN cookie (RFC 4987 §3.6), no state kept.
    pub syn_cookies_sent: u64,
    /// ACKs whose cookie validated: connections created from a cookie.
    pub syn_cookies_accepted: u64,
    /// ACKs for no connection, checked as a cookie while a listener was in cookie mode,
    /// that failed validation (forged, stale or corrupted; answered with a RST), or,
    /// rarely, validated but did not complete the handshake (dropped).
    pub syn_cookies_failed: u64,
    /// Handshakes dropped because a listener's accept queue was full.
    pub accept_queue_overflows: u64,
    /// SYNs dropped because a listener had [`ListenerLimits::pending`] connections not
    /// yet accepted.
    ///
    /// [`ListenerLimits::pending`]: super::ListenerLimits::pending
    pub listen_pending_refused: u64,
    /// SYNs refused (with a RST) because their source had
    /// [`ListenerLimits::per_source`] connections not yet accepted on the listener.
    ///
    /// [`ListenerLimits::per_source`]: super::ListenerLimits::per_source
    pub listen_source_refused: u64,
    /// New connections refused because the table was full.
    pub table_full: u64,
    /// Out-of-order segments dropped because the reassembler had no room.
    pub ooo_dropped: u64,
    /// Connections that entered ESTABLISHED.
    pub established: u64,
    /// Connections reset by the peer.
    pub resets_received: u64,
    /// Connections aborted on timeout.
    pub timeouts: u64,
    /// Segments retransmitted (all connections).
    pub retransmitted_segments: u64,
    /// Payload bytes retransmitted (all connections).
    pub retransmitted_bytes: u64,
    /// TIME-WAIT records created.
    pub time_wait_created: u64,
    /// TIME-WAIT records recycled early because the table was full.
    pub time_wait_recycled: u64,
    /// TIME-WAIT connections reused by a new SYN (RFC 6191).
    pub time_wait_reused: u64,
    /// Tail loss probes sent (RFC 8985 §7).
    pub loss_probes: u64,
    /// Segments at SND.UNA (original or retransmitted) deemed lost by RACK's time-based
    /// detection (RFC 8985 §6) rather than by duplicate-ACK counting.
    pub rack_losses: u64,
    /// ICMP errors about our segments handed to [`Tcp::icmp_error`](super::Tcp::icmp_error).
    pub icmp_received: u64,
    /// ... of which quoted a 4-tuple no connection has.
    pub icmp_no_connection: u64,
    /// ... of which quoted a sequence number outside SND.UNA..SND.NXT (RFC 5927 §4.1):
    /// dropped as forged or stale.
    pub icmp_out_of_window: u64,
    /// ... of which aborted a connection in SYN-SENT (hard errors, RFC 5461).
    pub icmp_aborts: u64,
    /// ... of which were recorded as soft errors (RFC 1122 §4.2.3.9).
    pub icmp_soft_errors: u64,
    /// ... of which lowered the path MTU and the MSS (RFC 1191).
    pub icmp_mtu_lowered: u64,
    /// ... of which reported an MTU no lower than the one in force (ignored).
    pub icmp_mtu_not_lower: u64,
    /// Bytes of buffer storage allocated now, all connections (the memory budget's
    /// usage, see [`TcpConfig::mem`](super::TcpConfig::mem)).
    pub mem_bytes: u64,
    /// The most buffer storage ever allocated at once.
    pub mem_peak_bytes: u64,
    /// Whether memory is under pressure now (buffers do not grow, new ones start small).
    pub mem_pressure: bool,
    /// New connections refused because buffer memory reached its hard limit (SYNs
    /// dropped, connects refused).
    pub mem_refused: u64,
    /// Data segments dropped because buffer memory reached its hard limit.
    pub mem_dropped: u64,
}
