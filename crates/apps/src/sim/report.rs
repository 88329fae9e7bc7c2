//! The result of a simulated TCP run ([`TcpSimReport`]), serialisable as the JSON that
//! `ulnet sim tcp` prints.

use serde::Serialize;
use ulnet_channel::sim::LinkStats;

use super::options::TcpSimOptions;

/// Minimum, median and maximum of a per-connection figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest value.
    pub min: f64,
    /// Median (the lower middle value for an even count).
    pub median: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(mut values: Vec<f64>) -> Option<Spread> {
        values.retain(|v| !v.is_nan());
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        Some(Spread {
            min: values[0],
            median: values[(values.len() - 1) / 2],
            max: values[values.len() - 1],
        })
    }
}

/// Retransmission counters: from the TCP layer (`segments`, `rto_expiries`,
/// `fast_retransmits`, summed over both ends of every connection) and from the harness's
/// view of the frames node A transmitted (`bytes_on_wire`, `segments_on_wire`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Retransmissions {
    /// Segments retransmitted (TCP layer, `TcpInfo::retransmits`).
    pub segments: u64,
    /// Retransmission timeouts that fired (TCP layer, `TcpInfo::timeouts`).
    pub rto_expiries: u64,
    /// Fast retransmits / recovery episodes entered (TCP layer,
    /// `TcpInfo::fast_recoveries`).
    pub fast_retransmits: u64,
    /// Data segments A sent whose payload had been sent before (harness, on the wire).
    pub segments_on_wire: u64,
    /// Payload bytes A sent again (harness, on the wire): the TCP layer does not count
    /// retransmitted bytes.
    pub bytes_on_wire: u64,
}

/// Window and RTT figures of the sending side (node A) at the end of the transfer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Windows {
    /// Congestion window, bytes.
    pub cwnd: Option<Spread>,
    /// Slow-start threshold, bytes, over connections that left slow start (absent when
    /// none had a congestion event).
    pub ssthresh: Option<Spread>,
    /// Smoothed RTT, milliseconds.
    pub srtt_ms: Option<Spread>,
}

/// One direction of the wire: the link's own counters ([`LinkStats`], through
/// ulnet-channel's `serde` feature, flattened into this object and reachable as fields
/// through `Deref`) plus what the harness did before the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WireDirection {
    /// The simulated link's counters for this direction.
    #[serde(flatten)]
    pub link: LinkStats,
    /// Data segments the harness dropped on purpose (`drop_segments`), before the wire.
    pub dropped_by_harness: u64,
}

impl WireDirection {
    pub(crate) fn new(link: LinkStats, dropped_by_harness: u64) -> WireDirection {
        WireDirection {
            link,
            dropped_by_harness,
        }
    }
}

impl std::ops::Deref for WireDirection {
    type Target = LinkStats;

    fn deref(&self) -> &LinkStats {
        &self.link
    }
}

/// The wire in both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WireReport {
    /// A to B (data).
    pub a_to_b: WireDirection,
    /// B to A (ACKs).
    pub b_to_a: WireDirection,
}

/// Engine-wide TCP counters of one node that say something went wrong or was refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NodeTcpReport {
    /// RSTs the TCP layer sent.
    pub resets_sent: u64,
    /// Connections reset by the peer.
    pub resets_received: u64,
    /// RSTs the harness saw this node transmit.
    pub rsts_on_wire: u64,
    /// Connections aborted on timeout.
    pub timeouts: u64,
    /// Segments dropped by PAWS.
    pub dropped_paws: u64,
    /// Segments outside the receive window.
    pub dropped_out_of_window: u64,
    /// Out-of-order segments dropped for lack of reassembly room.
    pub ooo_dropped: u64,
    /// SYNs that found a full SYN queue (then evicting a half-open connection, answered
    /// with a SYN cookie, or dropped: see `TcpStats`).
    pub syn_queue_overflows: u64,
    /// Handshakes dropped at a full accept queue.
    pub accept_queue_overflows: u64,
    /// Segments dropped as corrupt by the interface (bad TCP checksum).
    pub bad_checksums: u64,
}

/// One connection, when the run has at most 16.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnReport {
    /// Connection number (0-based, in connect order).
    pub index: usize,
    /// A's local port.
    pub port: u16,
    /// Payload bytes A sent.
    pub bytes_sent: u64,
    /// Payload bytes B received.
    pub bytes_received: u64,
    /// SHA-256 of what A sent (hex).
    pub hash_sent: String,
    /// SHA-256 of what B received (hex), once B saw the end of the stream.
    pub hash_received: Option<String>,
    /// A's state when the run ended (or when A released the socket).
    pub client_state: String,
    /// B's state when the run ended (or when B released the socket).
    pub server_state: Option<String>,
    /// The connection's error, if it failed.
    pub error: Option<String>,
    /// A's congestion window at the end, bytes.
    pub cwnd: u32,
    /// A's slow-start threshold at the end, bytes (`None` = never set).
    pub ssthresh: Option<u32>,
    /// A's smoothed RTT at the end, milliseconds.
    pub srtt_ms: Option<f64>,
    /// Segments retransmitted by A and by B.
    pub retransmits: (u64, u64),
    /// Retransmission timeouts at A.
    pub rto_expiries: u64,
    /// Fast retransmits at A.
    pub fast_retransmits: u64,
}

/// One sample of connection 0's sender state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CwndSample {
    /// Virtual time, seconds since the start.
    pub t: f64,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes (`u32::MAX` before the first congestion event).
    pub ssthresh: u32,
    /// Smoothed RTT, seconds (0 before the first sample).
    pub srtt: f64,
    /// The send MSS, bytes.
    pub mss: u16,
    /// Bytes in flight.
    pub in_flight: u32,
}

/// Everything a run measured. `ok` is the verdict: every byte arrived intact, every
/// connection closed cleanly, and no RST hit a connection in progress.
#[derive(Debug, Clone, Serialize)]
pub struct TcpSimReport {
    /// True when the run passed every check.
    pub ok: bool,
    /// Why it did not, one line per problem (empty when `ok`).
    pub failures: Vec<String>,
    /// Connections run.
    pub connections: usize,
    /// Payload bytes A sent, over all connections.
    pub bytes_sent: u64,
    /// Payload bytes B received, over all connections.
    pub bytes_received: u64,
    /// SHA-256 over the per-connection SHA-256 digests of what A sent, in connection
    /// order (for one connection: that connection's digest).
    pub hash_sent: String,
    /// The same over what B received.
    pub hash_received: String,
    /// Every connection's received digest equals its sent digest.
    pub hashes_equal: bool,
    /// Every connection ended with A in TIME-WAIT (or CLOSED) and B in CLOSED, without
    /// error, and no RST hit a connection in progress.
    pub all_closed_cleanly: bool,
    /// Virtual time from the first connect until every connection was closed, seconds.
    pub virtual_duration_s: f64,
    /// Virtual time from the first connect until B had every byte, seconds.
    pub transfer_duration_s: f64,
    /// Payload goodput: `bytes_received * 8 / transfer_duration_s`, bits per second;
    /// `None` when the transfer took no virtual time (no delay and no bandwidth limit).
    pub goodput_bps: Option<f64>,
    /// Payload goodput between the instants 25% and 95% of all bytes had arrived, bits
    /// per second: the steady state, without slow start and the final tail.
    pub goodput_steady_bps: Option<f64>,
    /// Real time the run took, seconds.
    pub wall_s: f64,
    /// Retransmission counters.
    pub retransmissions: Retransmissions,
    /// Sender-side windows and RTT at the end.
    pub windows: Windows,
    /// The wire's counters.
    pub wire: WireReport,
    /// Node A's TCP counters.
    pub tcp_a: NodeTcpReport,
    /// Node B's TCP counters.
    pub tcp_b: NodeTcpReport,
    /// Per connection, when there are at most 16.
    pub per_connection: Option<Vec<ConnReport>>,
    /// Passes where a stack's `poll_at` stayed at or before now three times running
    /// (it reported work it could not do yet) and the harness moved time on to the next
    /// later event. Not a failure here, but a runtime would busy-poll through them.
    pub stale_deadlines: u64,
    /// RSTs that answered a stray segment (a duplicated final ACK, say) after the
    /// connection had completed on both sides, as RFC 9293 §3.10.7.1 prescribes for a
    /// segment to no connection. Not a failure; an RST on a connection still in
    /// progress is.
    pub rsts_after_close: u64,
    /// The options the run used.
    pub options: TcpSimOptions,
    /// Connection 0's window over time (only with `cwnd_trace`; not in the JSON).
    #[serde(skip)]
    pub cwnd_trace: Vec<CwndSample>,
}

impl TcpSimReport {
    /// Writes the cwnd trace as CSV (`t_s,cwnd,ssthresh,srtt_s,mss,in_flight`).
    ///
    /// # Errors
    /// The writer's error.
    pub fn write_cwnd_csv(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        writeln!(w, "t_s,cwnd,ssthresh,srtt_s,mss,in_flight")?;
        for s in &self.cwnd_trace {
            writeln!(
                w,
                "{:.6},{},{},{:.6},{},{}",
                s.t, s.cwnd, s.ssthresh, s.srtt, s.mss, s.in_flight
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread() {
        assert_eq!(Spread::of(vec![]), None);
        let s = Spread::of(vec![3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 10.0));
        let s = Spread::of(vec![5.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (5.0, 5.0, 5.0));
    }
}
