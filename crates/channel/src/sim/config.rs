//! How one direction of a simulated link misbehaves: [`LinkConfig`].
//!
//! Every knob defaults to a perfect wire (no loss, no delay, infinite bandwidth), so a
//! test states only the impairments it is about. Probabilities outside `0.0..=1.0` are
//! clamped and NaN counts as `0.0`, so no configuration can make the simulator panic.

use std::time::Duration;

/// Frames a link holds in flight (queued at the bottleneck, propagating, or arrived but
/// not yet polled) before it drops new ones; see [`LinkConfig::in_flight_limit`].
///
/// 16 Ki frames covers the bandwidth-delay product of 1 Gbit/s over a 190 ms path with
/// full-size frames, while capping one link's buffers at about 25 MB.
pub const DEFAULT_IN_FLIGHT_LIMIT: usize = 16 * 1024;

/// The impairments of one direction of a simulated link, set with builder-style methods.
///
/// The order a frame meets them in is fixed (and so is the order of random draws, which
/// keeps runs reproducible): bursty loss, loss, duplication, then for each copy the bottleneck
/// (rate limit and drop-tail queue), corruption, and finally delay, jitter and
/// reordering.
///
/// ```
/// use std::time::Duration;
/// use ulnet_channel::sim::LinkConfig;
///
/// let lossy = LinkConfig::new()
///     .loss(0.01)
///     .delay(Duration::from_millis(10))
///     .rate_bps(100_000_000)
///     .queue_limit_frames(64);
/// assert_eq!(lossy.loss_probability(), 0.01);
/// assert!(LinkConfig::default().is_perfect());
/// ```
///
/// With the `serde` feature it (de)serialises as its knobs by name (durations as serde's
/// `{secs, nanos}`); a document may leave knobs out (they take the defaults), and
/// deserialising goes through the builder methods, so values out of range are clamped
/// as they are here and no document can make the simulator panic.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(from = "de::Knobs"))]
pub struct LinkConfig {
    pub(crate) loss: f64,
    pub(crate) burst_enter: f64,
    pub(crate) burst_exit: f64,
    pub(crate) duplicate: f64,
    pub(crate) corrupt: f64,
    pub(crate) reorder: f64,
    pub(crate) reorder_delay: Duration,
    pub(crate) delay: Duration,
    pub(crate) jitter: Duration,
    pub(crate) rate_bps: Option<u64>,
    pub(crate) overhead_len: usize,
    pub(crate) queue_limit_frames: Option<usize>,
    pub(crate) queue_limit_bytes: Option<usize>,
    pub(crate) in_flight_limit: usize,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            loss: 0.0,
            burst_enter: 0.0,
            burst_exit: 1.0,
            duplicate: 0.0,
            corrupt: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(1),
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            rate_bps: None,
            overhead_len: 0,
            queue_limit_frames: None,
            queue_limit_bytes: None,
            in_flight_limit: DEFAULT_IN_FLIGHT_LIMIT,
        }
    }
}

/// Deserialising a [`LinkConfig`]: the same knobs as plain public fields, turned into
/// a configuration by the builder methods, which clamp (the only way in, so the
/// clamping invariant holds for deserialised configurations too).
#[cfg(feature = "serde")]
mod de {
    use std::time::Duration;

    use super::LinkConfig;

    /// [`LinkConfig`]'s fields as they appear in a document; missing ones take the
    /// defaults of a perfect wire.
    #[derive(serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub(super) struct Knobs {
        loss: f64,
        burst_enter: f64,
        burst_exit: f64,
        duplicate: f64,
        corrupt: f64,
        reorder: f64,
        reorder_delay: Duration,
        delay: Duration,
        jitter: Duration,
        rate_bps: Option<u64>,
        overhead_len: usize,
        queue_limit_frames: Option<usize>,
        queue_limit_bytes: Option<usize>,
        in_flight_limit: usize,
    }

    impl Default for Knobs {
        fn default() -> Self {
            let d = LinkConfig::default();
            Knobs {
                loss: d.loss,
                burst_enter: d.burst_enter,
                burst_exit: d.burst_exit,
                duplicate: d.duplicate,
                corrupt: d.corrupt,
                reorder: d.reorder,
                reorder_delay: d.reorder_delay,
                delay: d.delay,
                jitter: d.jitter,
                rate_bps: d.rate_bps,
                overhead_len: d.overhead_len,
                queue_limit_frames: d.queue_limit_frames,
                queue_limit_bytes: d.queue_limit_bytes,
                in_flight_limit: d.in_flight_limit,
            }
        }
    }

    impl From<Knobs> for LinkConfig {
        fn from(k: Knobs) -> Self {
            let mut c = LinkConfig::new()
                .loss(k.loss)
                .burst_loss(k.burst_enter, k.burst_exit)
                .duplicate(k.duplicate)
                .corrupt(k.corrupt)
                .reorder(k.reorder)
                .reorder_delay(k.reorder_delay)
                .delay(k.delay)
                .jitter(k.jitter)
                .rate_bps(k.rate_bps.unwrap_or(0))
                .overhead_len(k.overhead_len)
                .in_flight_limit(k.in_flight_limit);
            c.queue_limit_frames = k.queue_limit_frames;
            c.queue_limit_bytes = k.queue_limit_bytes;
            c
        }
    }
}

/// Clamps a probability into `0.0..=1.0`, mapping NaN to `0.0`.
fn probability(p: f64) -> f64 {
    if p.is_nan() {
        0.0
    } else {
        p.clamp(0.0, 1.0)
    }
}

impl LinkConfig {
    /// A perfect wire: the same as `LinkConfig::default()`.
    pub fn new() -> Self {
        LinkConfig::default()
    }

    /// Drops each frame independently with probability `p` (clamped to `0.0..=1.0`).
    #[must_use]
    pub fn loss(mut self, p: f64) -> Self {
        self.loss = probability(p);
        self
    }

    /// Adds bursty loss (the Gilbert model): before each frame, a link in the good
    /// state turns bad with probability `enter`, and a bad one turns good again with
    /// probability `exit`; every frame met in the bad state is lost. Bursts last
    /// `1 / exit` frames on average, and the long-run loss rate is
    /// `enter / (enter + exit)`. Independent [`LinkConfig::loss`] still applies in the
    /// good state. Real paths lose packets in bursts (a full router queue), which is
    /// what exercises SACK and fast recovery. `enter == 0` (the default) turns it off.
    #[must_use]
    pub fn burst_loss(mut self, enter: f64, exit: f64) -> Self {
        self.burst_enter = probability(enter);
        self.burst_exit = probability(exit);
        self
    }

    /// Delivers each surviving frame twice with probability `p`; the two copies then meet
    /// the remaining impairments independently.
    #[must_use]
    pub fn duplicate(mut self, p: f64) -> Self {
        self.duplicate = probability(p);
        self
    }

    /// Flips one uniformly chosen bit of each frame copy with probability `p` (the frame
    /// keeps its length; the Ethernet header may be hit too, as on a real wire without
    /// a frame check sequence).
    #[must_use]
    pub fn corrupt(mut self, p: f64) -> Self {
        self.corrupt = probability(p);
        self
    }

    /// Holds each frame copy back by [`LinkConfig::reorder_delay`] with probability `p`,
    /// so frames sent after it overtake it.
    #[must_use]
    pub fn reorder(mut self, p: f64) -> Self {
        self.reorder = probability(p);
        self
    }

    /// How long a frame picked for reordering is held back (default 1 ms).
    #[must_use]
    pub fn reorder_delay(mut self, d: Duration) -> Self {
        self.reorder_delay = d;
        self
    }

    /// The fixed one-way propagation delay, added after serialisation.
    #[must_use]
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }

    /// Adds a uniformly distributed extra delay in `0..=d` to each frame copy. Jitter
    /// larger than the spacing between frames reorders them, as it does on real paths.
    #[must_use]
    pub fn jitter(mut self, d: Duration) -> Self {
        self.jitter = d;
        self
    }

    /// Limits the bandwidth to `bits_per_second`: each frame occupies the link for
    /// `(len + overhead_len) * 8 / bits_per_second` of virtual time, and frames wait
    /// their turn in the bottleneck queue. Zero means unlimited.
    #[must_use]
    pub fn rate_bps(mut self, bits_per_second: u64) -> Self {
        self.rate_bps = (bits_per_second != 0).then_some(bits_per_second);
        self
    }

    /// Bytes added to every frame's length for serialisation only (default 0). Use 24 to
    /// model Ethernet's preamble, start delimiter, frame check sequence and inter-frame
    /// gap (IEEE 802.3 §3.1, §4.4.2), which the frames handed to a channel do not carry.
    #[must_use]
    pub fn overhead_len(mut self, bytes: usize) -> Self {
        self.overhead_len = bytes;
        self
    }

    /// Drop-tail: a frame that finds `frames` frames already in the bottleneck queue
    /// (the one being serialised included) is dropped. Only matters with a rate limit,
    /// since without one the queue never builds.
    #[must_use]
    pub fn queue_limit_frames(mut self, frames: usize) -> Self {
        self.queue_limit_frames = Some(frames);
        self
    }

    /// Drop-tail: a frame that would take the bottleneck queue (the frame being
    /// serialised included) past `bytes` bytes is dropped. Only matters with a rate limit.
    #[must_use]
    pub fn queue_limit_bytes(mut self, bytes: usize) -> Self {
        self.queue_limit_bytes = Some(bytes);
        self
    }

    /// The most frames the link holds at once, from transmission until the receiver
    /// polls them (default [`DEFAULT_IN_FLIGHT_LIMIT`]); beyond it frames are dropped and
    /// counted in [`LinkStats::dropped_overflow`](super::LinkStats::dropped_overflow).
    /// This is the simulator's memory bound, not an impairment.
    #[must_use]
    pub fn in_flight_limit(mut self, frames: usize) -> Self {
        self.in_flight_limit = frames;
        self
    }

    /// The configured loss probability.
    pub fn loss_probability(&self) -> f64 {
        self.loss
    }

    /// The configured bursty loss: the probabilities of entering and leaving a burst.
    pub fn burst_loss_probabilities(&self) -> (f64, f64) {
        (self.burst_enter, self.burst_exit)
    }

    /// The configured duplication probability.
    pub fn duplicate_probability(&self) -> f64 {
        self.duplicate
    }

    /// The configured corruption probability.
    pub fn corrupt_probability(&self) -> f64 {
        self.corrupt
    }

    /// The configured reordering probability.
    pub fn reorder_probability(&self) -> f64 {
        self.reorder
    }

    /// The configured propagation delay.
    pub fn delay_duration(&self) -> Duration {
        self.delay
    }

    /// The configured maximum jitter.
    pub fn jitter_duration(&self) -> Duration {
        self.jitter
    }

    /// The configured bandwidth in bits per second, `None` if unlimited.
    pub fn rate(&self) -> Option<u64> {
        self.rate_bps
    }

    /// True if this link neither loses, duplicates, corrupts, reorders nor delays
    /// anything and has unlimited bandwidth (the in-flight limit aside).
    pub fn is_perfect(&self) -> bool {
        self.loss == 0.0
            && self.burst_enter == 0.0
            && self.duplicate == 0.0
            && self.corrupt == 0.0
            && self.reorder == 0.0
            && self.delay.is_zero()
            && self.jitter.is_zero()
            && self.rate_bps.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_are_clamped() {
        let c = LinkConfig::new()
            .loss(2.0)
            .duplicate(-1.0)
            .corrupt(f64::NAN)
            .reorder(0.5);
        assert_eq!(c.loss_probability(), 1.0);
        assert_eq!(c.duplicate_probability(), 0.0);
        assert_eq!(c.corrupt_probability(), 0.0);
        assert_eq!(c.reorder_probability(), 0.5);
    }

    #[test]
    fn zero_rate_is_unlimited() {
        assert_eq!(LinkConfig::new().rate_bps(0).rate(), None);
        assert_eq!(LinkConfig::new().rate_bps(8).rate(), Some(8));
        assert!(!LinkConfig::new().rate_bps(8).is_perfect());
    }
}
