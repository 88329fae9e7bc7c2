//! Congestion control: how much data may be in flight.
//!
//! Read first: RFC 5681 (slow start, congestion avoidance, loss window, restart after
//! idle), RFC 3465 (appropriate byte counting), RFC 6582 (NewReno fast recovery),
//! RFC 6675 (SACK-based recovery), RFC 6928 (initial window), RFC 9438 (CUBIC).
//!
//! Division of labour: the sender detects losses and runs fast recovery itself (RFC 6582
//! or RFC 6675: which segment to send, `pipe`, partial ACKs). The controller owns only
//! `cwnd` and `ssthresh` and is told about events:
//!
//! | event | call |
//! | --- | --- |
//! | an ACK acknowledges new data, not in recovery | [`CongestionControl::on_ack`] |
//! | loss detected by duplicate ACKs / SACK, recovery starts | [`CongestionControl::on_congestion_event`] |
//! | (non-SACK recovery only) each further duplicate ACK | [`CongestionControl::on_dup_ack`] |
//! | (non-SACK recovery only) a partial ACK | [`CongestionControl::on_partial_ack`] |
//! | recovery ends (the "full ACK" of RFC 6582 §3.2 step 3) | [`CongestionControl::on_recovery_exit`] |
//! | the retransmission timer fired | [`CongestionControl::on_rto`] |
//! | about to send with nothing in flight | [`CongestionControl::on_idle_restart`] |
//! | the end of every ACK's processing, with its delivery-rate sample | [`CongestionControl::on_rate_sample`] |
//! | everything outstanding at a timeout was acknowledged | [`CongestionControl::on_loss_recovered`] |
//!
//! Loss-based algorithms (NewReno, CUBIC) act on the first seven; a model-based one
//! (BBR, [`CongestionControl::model_based`]) builds its window from the rate samples and
//! sets it during recovery itself, so the sender skips PRR for it (as Linux does for a
//! module with its own `cong_control`).
//!
//! `cwnd` and `ssthresh` are in bytes. The algorithm is picked per connection and
//! dispatched through the [`Controller`] enum (no boxing).

mod bbr;
mod cubic;
mod newreno;

pub use bbr::{Bbr, Mode as BbrMode};
pub use cubic::Cubic;
pub use newreno::NewReno;

/// What one ACK says about the path's delivery rate (draft-cheng-iccrg-delivery-rate-
/// estimation-02 §3.4, "rate sample"), handed to the controller at the end of every ACK.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateSample {
    /// Bytes delivered over `interval` (RS.delivered).
    pub delivered: u64,
    /// The interval over which they were delivered, the longer of the send and the ACK
    /// interval (RS.interval); `None` when the ACK gives no valid sample.
    pub interval: Option<Duration>,
    /// The connection's delivered total when the newest delivered segment was sent
    /// (RS.prior_delivered): a round trip ends when it passes the total at the round's
    /// start.
    pub prior_delivered: u64,
    /// The connection's delivered total after this ACK (C.delivered).
    pub total_delivered: u64,
    /// The sample was taken while the application, not the network, limited the flow.
    pub is_app_limited: bool,
    /// Bytes this ACK acknowledged cumulatively or by SACK.
    pub acked_sacked: u32,
    /// Bytes this ACK marked lost.
    pub lost: u32,
    /// Bytes in flight after it (RFC 6675 pipe).
    pub inflight: u32,
    /// The RTT of the newest delivered segment, if it was never retransmitted.
    pub rtt: Option<Duration>,
}

use crate::time::{Duration, Instant};

/// The congestion control events every algorithm handles. See the module docs for when
/// the sender calls each.
pub trait CongestionControl {
    /// The congestion window, bytes.
    fn cwnd(&self) -> usize;

    /// The slow start threshold, bytes (`usize::MAX` until the first congestion event,
    /// RFC 5681 §3.1 "arbitrarily high").
    fn ssthresh(&self) -> usize;

    /// `cwnd < ssthresh` (RFC 5681 §3.1).
    fn in_slow_start(&self) -> bool {
        self.cwnd() < self.ssthresh()
    }

    /// The sender's maximum segment size in use (SMSS).
    fn mss(&self) -> usize;

    /// New data was cumulatively acknowledged outside loss recovery: grow `cwnd`.
    /// `newly_acked` is the number of bytes this ACK acknowledged; `flight_size` the bytes
    /// outstanding when it arrived (including `newly_acked`); `rtt` the current smoothed
    /// RTT (or latest sample), if any. The window does not grow while less than half of
    /// it was in flight (application- or receiver-limited, RFC 7661 §4.3), nor while in
    /// recovery (between `on_congestion_event` and `on_recovery_exit`).
    fn on_ack(
        &mut self,
        now: Instant,
        newly_acked: usize,
        flight_size: usize,
        rtt: Option<Duration>,
    );

    /// Loss was detected by duplicate ACKs or SACK and fast retransmit / recovery begins
    /// (RFC 5681 §3.2 step 2, RFC 6675 §5 step 4): sets `ssthresh` and `cwnd`.
    /// `flight_size` is the data outstanding when the loss was detected. A second call
    /// during the same recovery is ignored (one reduction per window, RFC 6582 §3.2).
    fn on_congestion_event(&mut self, now: Instant, flight_size: usize);

    /// Non-SACK fast recovery: one more duplicate ACK arrived after the ones that started
    /// recovery; inflates `cwnd` by one SMSS (RFC 5681 §3.2 step 4, RFC 6582 §3.2 step 3).
    /// SACK-based recovery (RFC 6675) does not call it: `pipe` replaces inflation.
    fn on_dup_ack(&mut self);

    /// Non-SACK fast recovery: a partial ACK acknowledged `newly_acked` bytes; deflates
    /// `cwnd` by that amount and adds back one SMSS if at least one SMSS was acknowledged
    /// (RFC 6582 §3.2 step 4).
    fn on_partial_ack(&mut self, newly_acked: usize);

    /// Recovery ended with a "full ACK". Sets `cwnd = ssthresh`: RFC 6582 §3.2 step 3
    /// option 2. That option can release a burst when little data is in flight; the
    /// sender limits bursts (RFC 6582 §3.2 says so for this option).
    fn on_recovery_exit(&mut self, now: Instant);

    /// The retransmission timer fired: `ssthresh` per RFC 5681 §3.1 eq. 4 (CUBIC: RFC 9438
    /// §4.8) and `cwnd` = one SMSS, the loss window. Repeated timeouts without an ACK in
    /// between keep `ssthresh` (RFC 5681 §3.1, note after eq. 4).
    fn on_rto(&mut self, now: Instant, flight_size: usize);

    /// The sender is about to send with nothing in flight. If nothing has happened for
    /// longer than `rto` (the last ACK or event the controller saw), restarts from the
    /// restart window `min(IW, cwnd)` (RFC 5681 §4.1) and returns true.
    fn on_idle_restart(&mut self, now: Instant, rto: Duration) -> bool;

    /// The SMSS changed (e.g. path MTU discovery). `cwnd` keeps its byte count but is
    /// never below one SMSS. Values are clamped to `1..=65535`.
    fn set_mss(&mut self, mss: usize);

    /// The end of an ACK's processing (after loss detection), with its delivery-rate
    /// sample. Loss-based algorithms ignore it.
    fn on_rate_sample(&mut self, _now: Instant, _rs: &RateSample) {}

    /// Everything that was outstanding when the retransmission timer fired has been
    /// acknowledged (Linux leaves `TCP_CA_Loss`).
    fn on_loss_recovered(&mut self, _now: Instant) {}

    /// The controller sets the window during recovery itself: the sender sends up to
    /// `cwnd - pipe` then rather than at PRR's rate (RFC 6937 is for loss-based
    /// reductions).
    fn model_based(&self) -> bool {
        false
    }

    /// The rate the controller paces at, bytes per second, if it paces.
    fn pacing_rate(&self) -> Option<u64> {
        None
    }

    /// A pacing controller's earliest departure time for the next burst of new data
    /// (`None`: send at once).
    fn send_time(&self) -> Option<Instant> {
        None
    }

    /// The largest burst a pacing controller lets leave at once, bytes.
    fn send_quantum(&self) -> Option<u32> {
        None
    }

    /// `bytes` left at `now` (new data or retransmitted): the pacer's clock advances.
    fn on_send(&mut self, _now: Instant, _bytes: usize) {}
}

/// Which congestion control algorithm a connection uses. With the `serde` feature it
/// (de)serialises as its [`Display`](core::fmt::Display) name, `"newreno"`, `"cubic"` or `"bbr"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum Algorithm {
    /// RFC 5681 + RFC 6582 (+ RFC 6675 with SACK).
    NewReno,
    /// RFC 9438; the default, as in Linux.
    #[default]
    Cubic,
    /// BBR v1 (`congestion/bbr.rs`); needs RACK's per-segment records for its rate
    /// samples ([`TcpConfig::rack`](crate::tcp::TcpConfig::rack)).
    Bbr,
}

impl Algorithm {
    /// The algorithm a connection with RACK on or off (`rack`) runs when asked for this
    /// one: BBR's rate samples come from RACK's per-segment records, so without them it
    /// is CUBIC.
    pub fn with_rack(self, rack: bool) -> Algorithm {
        match self {
            Algorithm::Bbr if !rack => Algorithm::Cubic,
            a => a,
        }
    }
}

/// An unknown algorithm name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownAlgorithm;

impl core::fmt::Display for UnknownAlgorithm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("unknown congestion control algorithm (expected newreno, reno, cubic or bbr)")
    }
}

impl core::error::Error for UnknownAlgorithm {}

impl core::str::FromStr for Algorithm {
    type Err = UnknownAlgorithm;

    /// Parses `newreno`, `reno`, `cubic` or `bbr`, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("newreno") || s.eq_ignore_ascii_case("reno") {
            Ok(Algorithm::NewReno)
        } else if s.eq_ignore_ascii_case("cubic") {
            Ok(Algorithm::Cubic)
        } else if s.eq_ignore_ascii_case("bbr") {
            Ok(Algorithm::Bbr)
        } else {
            Err(UnknownAlgorithm)
        }
    }
}

impl core::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Algorithm::NewReno => "newreno",
            Algorithm::Cubic => "cubic",
            Algorithm::Bbr => "bbr",
        })
    }
}

/// A connection's congestion controller, dispatching to the chosen algorithm.
#[derive(Debug, Clone)]
pub enum Controller {
    /// RFC 5681 / 6582.
    NewReno(NewReno),
    /// RFC 9438.
    Cubic(Cubic),
    /// BBR v1; boxed, being twice CUBIC's size, so the control block does not grow for
    /// connections that do not use it.
    Bbr(alloc::boxed::Box<Bbr>),
}

impl Controller {
    /// A controller for `alg` with SMSS `mss` (clamped to `1..=65535`) and an initial window of
    /// `initial_window_segments` segments (RFC 6928 says 10). Zero segments selects the
    /// RFC 5681 §3.1 eq. 1 initial window (2 to 4 segments by SMSS).
    pub fn new(alg: Algorithm, mss: usize, initial_window_segments: usize) -> Self {
        match alg {
            Algorithm::NewReno => Controller::NewReno(NewReno::new(mss, initial_window_segments)),
            Algorithm::Cubic => Controller::Cubic(Cubic::new(mss, initial_window_segments)),
            Algorithm::Bbr => Controller::Bbr(alloc::boxed::Box::new(Bbr::new(
                mss,
                initial_window_segments,
            ))),
        }
    }

    /// The algorithm in use.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Controller::NewReno(_) => Algorithm::NewReno,
            Controller::Cubic(_) => Algorithm::Cubic,
            Controller::Bbr(_) => Algorithm::Bbr,
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Controller::NewReno($c) => $e,
            Controller::Cubic($c) => $e,
            Controller::Bbr($c) => $e,
        }
    };
}

impl CongestionControl for Controller {
    fn cwnd(&self) -> usize {
        dispatch!(self, c => c.cwnd())
    }
    fn ssthresh(&self) -> usize {
        dispatch!(self, c => c.ssthresh())
    }
    fn in_slow_start(&self) -> bool {
        dispatch!(self, c => c.in_slow_start())
    }
    fn mss(&self) -> usize {
        dispatch!(self, c => c.mss())
    }
    fn on_ack(
        &mut self,
        now: Instant,
        newly_acked: usize,
        flight_size: usize,
        rtt: Option<Duration>,
    ) {
        dispatch!(self, c => c.on_ack(now, newly_acked, flight_size, rtt))
    }
    fn on_congestion_event(&mut self, now: Instant, flight_size: usize) {
        dispatch!(self, c => c.on_congestion_event(now, flight_size))
    }
    fn on_dup_ack(&mut self) {
        dispatch!(self, c => c.on_dup_ack())
    }
    fn on_partial_ack(&mut self, newly_acked: usize) {
        dispatch!(self, c => c.on_partial_ack(newly_acked))
    }
    fn on_recovery_exit(&mut self, now: Instant) {
        dispatch!(self, c => c.on_recovery_exit(now))
    }
    fn on_rto(&mut self, now: Instant, flight_size: usize) {
        dispatch!(self, c => c.on_rto(now, flight_size))
    }
    fn on_idle_restart(&mut self, now: Instant, rto: Duration) -> bool {
        dispatch!(self, c => c.on_idle_restart(now, rto))
    }
    fn set_mss(&mut self, mss: usize) {
        dispatch!(self, c => c.set_mss(mss))
    }
    fn on_rate_sample(&mut self, now: Instant, rs: &RateSample) {
        if let Controller::Bbr(c) = self {
            c.on_rate_sample(now, rs);
        }
    }
    fn on_loss_recovered(&mut self, now: Instant) {
        if let Controller::Bbr(c) = self {
            c.on_loss_recovered(now);
        }
    }
    fn model_based(&self) -> bool {
        matches!(self, Controller::Bbr(_))
    }
    fn pacing_rate(&self) -> Option<u64> {
        dispatch!(self, c => c.pacing_rate())
    }
    #[inline]
    fn send_time(&self) -> Option<Instant> {
        match self {
            Controller::Bbr(c) => c.send_time(),
            _ => None,
        }
    }
    #[inline]
    fn send_quantum(&self) -> Option<u32> {
        match self {
            Controller::Bbr(c) => c.send_quantum(),
            _ => None,
        }
    }
    #[inline]
    fn on_send(&mut self, now: Instant, bytes: usize) {
        if let Controller::Bbr(c) = self {
            c.on_send(now, bytes);
        }
    }
}

/// The state every algorithm shares: windows, recovery and idle bookkeeping, and the
/// RFC 5681 pieces that CUBIC keeps (slow start, loss window, restart window).
#[derive(Debug, Clone)]
struct Common {
    mss: usize,
    cwnd: usize,
    ssthresh: usize,
    /// The configured initial window in segments (0: RFC 5681 §3.1 eq. 1).
    iw_segments: usize,
    in_recovery: bool,
    /// A timeout happened and no ACK of new data since (RFC 5681 §3.1 eq. 4 note).
    after_rto: bool,
    /// The last time the controller heard of the connection (for RFC 5681 §4.1).
    last_event: Option<Instant>,
}

/// SMSS within what the MSS option can say (16 bits, RFC 9293 §3.7.1), and at least one
/// byte, so window arithmetic in multiples of SMSS cannot overflow.
fn clamp_mss(mss: usize) -> usize {
    mss.clamp(1, usize::from(u16::MAX))
}

/// The initial window in bytes: `iw_segments` SMSS-sized segments, or RFC 5681 §3.1
/// eq. 1 when zero.
fn initial_window(mss: usize, iw_segments: usize) -> usize {
    match iw_segments {
        0 if mss > 2190 => 2 * mss,
        0 if mss > 1095 => 3 * mss,
        0 => 4 * mss,
        n => n.saturating_mul(mss),
    }
}

impl Common {
    fn new(mss: usize, iw_segments: usize) -> Self {
        let mss = clamp_mss(mss);
        Common {
            mss,
            cwnd: initial_window(mss, iw_segments),
            ssthresh: usize::MAX,
            iw_segments,
            in_recovery: false,
            after_rto: false,
            last_event: None,
        }
    }

    fn touch(&mut self, now: Instant) {
        self.last_event = Some(self.last_event.map_or(now, |t| t.max(now)));
    }

    /// RFC 5681 §3.1 slow start with RFC 3465 byte counting: cwnd grows by every byte an
    /// ACK newly acknowledges, up to `ssthresh`; returns the bytes left over for congestion
    /// avoidance.
    ///
    /// No per-ACK limit L (RFC 3465 §2.2 suggests 2*SMSS): receivers that acknowledge an
    /// aggregate at once (Linux with GRO, ulnet once per receive batch) send stretch ACKs,
    /// and with L = 2*SMSS slow start then adds two segments per round trip instead of
    /// doubling (ulnet's simulator showed cwnd 10, 12, 14, ... segments). Linux counts
    /// every acknowledged segment in slow start for the same reason (`tcp_slow_start`).
    fn slow_start(&mut self, newly_acked: usize) -> usize {
        let room = self.ssthresh.saturating_sub(self.cwnd);
        let grow = newly_acked.min(room);
        self.cwnd = self.cwnd.saturating_add(grow);
        newly_acked - grow
    }

    /// RFC 7661 §4.3: the window grows only while the sender uses it, i.e. at least half
    /// of it was in flight (`flight_size` stands in for pipeACK). Without this an
    /// application-limited sender would inflate cwnd without bound and burst later.
    fn cwnd_limited(&self, flight_size: usize) -> bool {
        flight_size >= self.cwnd / 2
    }

    /// RFC 5681 §3.1 eq. 4: max(FlightSize / 2, 2*SMSS). FlightSize is capped at cwnd:
    /// it only exceeds cwnd after the window was just cut (a timeout with much data
    /// outstanding), and a congestion event must never raise the window.
    fn half_flight(&self, flight_size: usize) -> usize {
        (flight_size.min(self.cwnd) / 2).max(2 * self.mss)
    }

    fn on_dup_ack(&mut self) {
        if self.in_recovery {
            self.cwnd = self.cwnd.saturating_add(self.mss);
        }
    }

    fn on_partial_ack(&mut self, newly_acked: usize) {
        if !self.in_recovery {
            return;
        }
        self.cwnd = self.cwnd.saturating_sub(newly_acked);
        if newly_acked >= self.mss {
            self.cwnd = self.cwnd.saturating_add(self.mss);
        }
        self.cwnd = self.cwnd.max(self.mss);
    }

    /// RFC 5681 §4.1; returns whether the restart window was applied.
    fn idle_restart(&mut self, now: Instant, rto: Duration) -> bool {
        let idle = match self.last_event {
            Some(t) => now.saturating_duration_since(t) > rto,
            None => false,
        };
        self.touch(now);
        if idle {
            self.cwnd = self.cwnd.min(initial_window(self.mss, self.iw_segments));
        }
        idle
    }

    fn set_mss(&mut self, mss: usize) {
        self.mss = clamp_mss(mss);
        self.cwnd = self.cwnd.max(self.mss);
        self.ssthresh = self.ssthresh.max(2 * self.mss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Ev {
        Ack(u64, usize, usize, Option<u64>),
        Congestion(u64, usize),
        DupAck,
        PartialAck(usize),
        RecoveryExit(u64),
        Rto(u64, usize),
        Idle(u64, u64),
        Mss(usize),
        Rate(u64, RateSample),
        LossRecovered(u64),
    }

    fn rate_sample() -> impl Strategy<Value = RateSample> {
        (
            (
                0u64..10_000_000,
                proptest::option::of(0u64..2_000_000),
                0u64..u64::MAX / 2,
            ),
            (
                0u64..u64::MAX / 2,
                any::<bool>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
            ),
            proptest::option::of(0u64..2_000_000),
        )
            .prop_map(|((d, i, p), (t, app, a, l, f), r)| RateSample {
                delivered: d,
                interval: i.map(Duration::from_micros),
                prior_delivered: p,
                total_delivered: t,
                is_app_limited: app,
                acked_sacked: a,
                lost: l,
                inflight: f,
                rtt: r.map(Duration::from_micros),
            })
    }

    fn ev() -> impl Strategy<Value = Ev> {
        prop_oneof![
            6 => (0u64..10_000_000, 0usize..200_000, 0usize..2_000_000, proptest::option::of(0u64..2_000_000))
                .prop_map(|(t, a, f, r)| Ev::Ack(t, a, f, r)),
            1 => (0u64..10_000_000, 0usize..2_000_000).prop_map(|(t, f)| Ev::Congestion(t, f)),
            1 => Just(Ev::DupAck),
            1 => (0usize..100_000).prop_map(Ev::PartialAck),
            1 => (0u64..10_000_000).prop_map(Ev::RecoveryExit),
            1 => (0u64..10_000_000, 0usize..2_000_000).prop_map(|(t, f)| Ev::Rto(t, f)),
            1 => (0u64..10_000_000, 0u64..3_000_000).prop_map(|(t, r)| Ev::Idle(t, r)),
            1 => (0usize..10_000).prop_map(Ev::Mss),
            4 => (0u64..10_000_000, rate_sample()).prop_map(|(t, r)| Ev::Rate(t, r)),
            1 => (0u64..10_000_000).prop_map(Ev::LossRecovered),
        ]
    }

    proptest! {
        /// Any event sequence keeps the windows sane: cwnd at least one SMSS, ssthresh at
        /// least two once set, growth per ACK bounded by slow start's 2*SMSS or CUBIC's
        /// 1.5x target cap, and a congestion event or timeout never raises cwnd. Rate
        /// samples (BBR's input) of any values, absurd ones included, never panic.
        #[test]
        fn windows_stay_sane(alg in prop_oneof![Just(Algorithm::NewReno), Just(Algorithm::Cubic), Just(Algorithm::Bbr)],
                             mss in 1usize..9000, iw in 0usize..20,
                             evs in proptest::collection::vec(ev(), 0..200)) {
            let mut c = Controller::new(alg, mss, iw);
            for e in evs {
                let before = c.cwnd();
                match e {
                    Ev::Ack(t, a, f, r) => {
                        c.on_ack(Instant::from_micros(t), a, f, r.map(Duration::from_micros));
                        // Slow start grows by at most the bytes acknowledged, plus
                        // one SMSS of congestion avoidance with the leftover; CUBIC at
                        // most to 1.5 cwnd.
                        let cap = before + a + (3 * c.mss()).max(before / 2 + 2 * c.mss());
                        prop_assert!(c.cwnd() <= cap, "{} -> {}", before, c.cwnd());
                    }
                    Ev::Congestion(t, f) => {
                        c.on_congestion_event(Instant::from_micros(t), f);
                        prop_assert!(c.cwnd() <= before.max(2 * c.mss()));
                    }
                    Ev::DupAck => c.on_dup_ack(),
                    Ev::PartialAck(n) => c.on_partial_ack(n),
                    Ev::RecoveryExit(t) => c.on_recovery_exit(Instant::from_micros(t)),
                    Ev::Rto(t, f) => {
                        c.on_rto(Instant::from_micros(t), f);
                        prop_assert_eq!(c.cwnd(), c.mss());
                    }
                    Ev::Idle(t, r) => {
                        c.on_idle_restart(Instant::from_micros(t), Duration::from_micros(r));
                        prop_assert!(c.cwnd() <= before);
                    }
                    Ev::Mss(m) => c.set_mss(m),
                    Ev::Rate(t, r) => {
                        c.on_rate_sample(Instant::from_micros(t), &r);
                        // A pacer's departure time stays a time, and sending moves it on.
                        c.on_send(Instant::from_micros(t), r.acked_sacked as usize);
                        let _ = (c.send_time(), c.send_quantum(), c.pacing_rate());
                    }
                    Ev::LossRecovered(t) => c.on_loss_recovered(Instant::from_micros(t)),
                }
                prop_assert!(c.cwnd() >= c.mss());
                prop_assert!(c.ssthresh() >= 2 * c.mss());
            }
        }
    }

    #[test]
    fn algorithm_names() {
        assert_eq!("newreno".parse(), Ok(Algorithm::NewReno));
        assert_eq!("Reno".parse(), Ok(Algorithm::NewReno));
        assert_eq!("CUBIC".parse(), Ok(Algorithm::Cubic));
        assert_eq!("BBR".parse(), Ok(Algorithm::Bbr));
        assert_eq!("vegas".parse::<Algorithm>(), Err(UnknownAlgorithm));
        for a in [Algorithm::NewReno, Algorithm::Cubic, Algorithm::Bbr] {
            assert_eq!(a.to_string().parse(), Ok(a));
            assert_eq!(Controller::new(a, 1000, 10).algorithm(), a);
        }
    }

    #[test]
    fn initial_window_rfc5681_eq1() {
        assert_eq!(
            Controller::new(Algorithm::NewReno, 1460, 0).cwnd(),
            3 * 1460
        );
        assert_eq!(Controller::new(Algorithm::NewReno, 536, 0).cwnd(), 4 * 536);
        assert_eq!(Controller::new(Algorithm::Cubic, 8960, 0).cwnd(), 2 * 8960);
        assert_eq!(Controller::new(Algorithm::Cubic, 1460, 10).cwnd(), 14_600);
        let c = Controller::new(Algorithm::Cubic, 1460, 10);
        assert_eq!(c.ssthresh(), usize::MAX);
        assert!(c.in_slow_start());
    }

    #[test]
    fn idle_restart_rfc5681_4_1() {
        for alg in [Algorithm::NewReno, Algorithm::Cubic] {
            let mut c = Controller::new(alg, 1000, 4);
            let t0 = Instant::from_secs(1);
            for i in 0..20 {
                c.on_ack(t0 + Duration::from_millis(i), 1000, 10_000, None);
            }
            assert!(c.cwnd() > 4000);
            let rto = Duration::from_millis(300);
            assert!(!c.on_idle_restart(t0 + Duration::from_millis(200), rto));
            assert!(c.cwnd() > 4000);
            assert!(c.on_idle_restart(t0 + Duration::from_secs(2), rto));
            assert_eq!(c.cwnd(), 4000);
        }
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        for alg in [Algorithm::NewReno, Algorithm::Cubic, Algorithm::Bbr] {
            for mss in [0, 1, 1460, usize::MAX] {
                let mut c = Controller::new(alg, mss, usize::MAX);
                let t = Instant::from_micros(u64::MAX);
                c.on_ack(t, usize::MAX, usize::MAX, Some(Duration::MAX));
                c.on_ack(Instant::ZERO, usize::MAX, 0, Some(Duration::ZERO));
                c.on_congestion_event(t, usize::MAX);
                c.on_dup_ack();
                c.on_partial_ack(usize::MAX);
                c.on_recovery_exit(Instant::ZERO);
                c.on_ack(t, usize::MAX, usize::MAX, Some(Duration::MAX));
                c.on_rto(Instant::ZERO, 0);
                c.on_ack(t, usize::MAX, usize::MAX, None);
                c.on_idle_restart(Instant::ZERO, Duration::MAX);
                c.set_mss(0);
                c.on_ack(t, 1, 1, Some(Duration::from_millis(1)));
                assert!(c.cwnd() >= c.mss());
            }
        }
    }
}
