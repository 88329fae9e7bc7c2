//! One direction of a simulated link: its impairments, its random stream, its
//! bottleneck queue and its counters.
//!
//! The link decides a frame's fate ([`Link::plan`]) without touching the frame bytes;
//! the wire then copies, corrupts and schedules the buffers. Every link draws from its
//! own seeded PCG stream (derived from the wire seed and the two endpoint ids), so
//! traffic in one direction never changes what happens in another, and a run is a pure
//! function of the seed and the traffic.

use std::collections::VecDeque;

use rand_pcg::rand_core::Rng;
use rand_pcg::Pcg64;

use super::config::LinkConfig;

/// Counters of one direction of a simulated link.
///
/// Every frame sent is lost or becomes one or two copies, and every copy is delivered,
/// dropped at the bottleneck or by the in-flight limit, or still in flight:
/// `sent - dropped_loss + duplicated = delivered + dropped_queue + dropped_overflow +
/// in_flight`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LinkStats {
    /// Frames the sender put on this link.
    pub sent: u64,
    /// Bytes the sender put on this link.
    pub sent_bytes: u64,
    /// Frame copies handed to the receiving program.
    pub delivered: u64,
    /// Bytes handed to the receiving program.
    pub delivered_bytes: u64,
    /// Frames dropped by random loss, bursty or not.
    pub dropped_loss: u64,
    /// Frame copies dropped because the bottleneck queue was full (drop-tail).
    pub dropped_queue: u64,
    /// Frame copies dropped because the link already held its in-flight limit.
    pub dropped_overflow: u64,
    /// Frames that were duplicated (each adds one extra copy).
    pub duplicated: u64,
    /// Frame copies delivered after a frame that was sent later on this link: the
    /// reordering the receiver actually saw, whether the cause was the reordering
    /// impairment or jitter.
    pub reordered: u64,
    /// Frame copies with a flipped bit.
    pub corrupted: u64,
}

/// What happens to one copy of a frame that survived the link's admission checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Delivery {
    /// Virtual delivery time in nanoseconds.
    pub(crate) at_ns: u64,
    /// The bit to flip (counted from the first bit of the frame), if corrupted.
    pub(crate) flip_bit: Option<usize>,
    /// The frame's sequence number on this link, for reordering statistics.
    pub(crate) link_seq: u64,
}

/// One direction of a link.
#[derive(Debug)]
pub(crate) struct Link {
    config: LinkConfig,
    rng: Pcg64,
    /// Departure times (serialisation complete) and lengths of the frames at the
    /// bottleneck, oldest first. Bounded by the in-flight limit.
    bottleneck: VecDeque<(u64, usize)>,
    bottleneck_bytes: usize,
    busy_until_ns: u64,
    in_flight: usize,
    next_link_seq: u64,
    newest_delivered: Option<u64>,
    /// The Gilbert model's state: true while in a loss burst.
    in_burst: bool,
    stats: LinkStats,
}

/// SplitMix64 (Steele, Lea, Flood 2014): spreads a 64-bit seed into well-mixed words
/// for the PCG state and stream, so neighbouring seeds and link ids give unrelated
/// streams.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Nanoseconds in `d`, saturating at `u64::MAX` (584 years).
pub(crate) fn duration_ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Link {
    /// A link from endpoint `from` to endpoint `to` on a wire seeded with `seed`.
    pub(crate) fn new(seed: u64, from: usize, to: usize, config: LinkConfig) -> Self {
        let mut s = seed ^ splitmix64(&mut ((from as u64) << 32 | to as u64));
        let mut word = || u128::from(splitmix64(&mut s));
        let state = word() << 64 | word();
        let stream = word() << 64 | word();
        Link {
            config,
            rng: Pcg64::new(state, stream),
            bottleneck: VecDeque::new(),
            bottleneck_bytes: 0,
            busy_until_ns: 0,
            in_flight: 0,
            next_link_seq: 0,
            newest_delivered: None,
            in_burst: false,
            stats: LinkStats::default(),
        }
    }

    /// The link's configuration.
    pub(crate) fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Replaces the configuration; frames already in flight keep their schedule.
    pub(crate) fn set_config(&mut self, config: LinkConfig) {
        self.config = config;
    }

    /// The link's counters.
    pub(crate) fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Frame copies scheduled on this link and not yet delivered or discarded.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// True with probability `p`. Draws only when `0 < p < 1`, so a perfect link costs
    /// no random numbers.
    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        // 53 random bits give a uniform f64 in [0, 1) exactly, on every platform.
        let unit = (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        unit < p
    }

    /// A uniform integer in `0..=max` (Lemire's multiply-shift; the bias is below 2^-64
    /// per value, irrelevant here).
    fn up_to(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let range = u128::from(max) + 1;
        ((u128::from(self.rng.next_u64()) * range) >> 64) as u64
    }

    /// Decides the fate of a `len`-byte frame sent at `now_ns`: lost (empty result), or
    /// one or two copies to schedule. Counts everything it decides; every copy returned
    /// is counted in flight until [`Link::delivered`] or [`Link::discarded`].
    pub(crate) fn plan(&mut self, now_ns: u64, len: usize) -> [Option<Delivery>; 2] {
        self.stats.sent += 1;
        self.stats.sent_bytes += len as u64;
        let link_seq = self.next_link_seq;
        self.next_link_seq += 1;
        let mut out = [None, None];
        if self.in_burst {
            self.in_burst = !self.chance(self.config.burst_exit);
        } else {
            self.in_burst = self.chance(self.config.burst_enter);
        }
        if self.in_burst || self.chance(self.config.loss) {
            self.stats.dropped_loss += 1;
            return out;
        }
        let copies = if self.chance(self.config.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for slot in out.iter_mut().take(copies) {
            *slot = self.plan_copy(now_ns, len, link_seq);
        }
        out
    }

    fn plan_copy(&mut self, now_ns: u64, len: usize, link_seq: u64) -> Option<Delivery> {
        if self.in_flight >= self.config.in_flight_limit {
            self.stats.dropped_overflow += 1;
            return None;
        }
        let Some(depart_ns) = self.bottleneck(now_ns, len) else {
            self.stats.dropped_queue += 1;
            return None;
        };
        let flip_bit = if len > 0 && self.chance(self.config.corrupt) {
            self.stats.corrupted += 1;
            Some(self.up_to(len as u64 * 8 - 1) as usize)
        } else {
            None
        };
        let mut at_ns = depart_ns.saturating_add(duration_ns(self.config.delay));
        let jitter = duration_ns(self.config.jitter);
        if jitter > 0 {
            at_ns = at_ns.saturating_add(self.up_to(jitter));
        }
        if self.chance(self.config.reorder) {
            at_ns = at_ns.saturating_add(duration_ns(self.config.reorder_delay));
        }
        self.in_flight += 1;
        Some(Delivery {
            at_ns,
            flip_bit,
            link_seq,
        })
    }

    /// Passes a frame through the rate limiter and drop-tail queue: its departure time
    /// (serialisation finished), or `None` if the queue is full.
    fn bottleneck(&mut self, now_ns: u64, len: usize) -> Option<u64> {
        let Some(rate) = self.config.rate_bps else {
            return Some(now_ns);
        };
        while let Some(&(depart, bytes)) = self.bottleneck.front() {
            if depart > now_ns {
                break;
            }
            self.bottleneck.pop_front();
            self.bottleneck_bytes -= bytes;
        }
        let over_frames = self
            .config
            .queue_limit_frames
            .is_some_and(|limit| self.bottleneck.len() >= limit);
        let over_bytes = self
            .config
            .queue_limit_bytes
            .is_some_and(|limit| self.bottleneck_bytes.saturating_add(len) > limit);
        if over_frames || over_bytes {
            return None;
        }
        let bits = (len as u128 + self.config.overhead_len as u128) * 8;
        let serialise_ns = (bits * 1_000_000_000).div_ceil(u128::from(rate));
        let start = now_ns.max(self.busy_until_ns);
        let depart = start.saturating_add(u64::try_from(serialise_ns).unwrap_or(u64::MAX));
        self.busy_until_ns = depart;
        self.bottleneck.push_back((depart, len));
        self.bottleneck_bytes += len;
        Some(depart)
    }

    /// Counts a copy handed to the receiver.
    pub(crate) fn delivered(&mut self, link_seq: u64, len: usize) {
        self.in_flight -= 1;
        self.stats.delivered += 1;
        self.stats.delivered_bytes += len as u64;
        match self.newest_delivered {
            Some(newest) if link_seq < newest => self.stats.reordered += 1,
            _ => self.newest_delivered = Some(link_seq),
        }
    }

    /// Forgets a copy that will never be delivered (its receiver went away).
    pub(crate) fn discarded(&mut self) {
        self.in_flight -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn perfect_link_delivers_now_without_randomness() {
        let mut link = Link::new(1, 0, 1, LinkConfig::new());
        let before = link.rng.clone();
        let plan = link.plan(5, 100);
        assert_eq!(
            plan,
            [
                Some(Delivery {
                    at_ns: 5,
                    flip_bit: None,
                    link_seq: 0
                }),
                None
            ]
        );
        assert_eq!(link.rng, before);
    }

    #[test]
    fn serialisation_queues_back_to_back() {
        // 1000 bytes at 8 Mbit/s = 1 ms each.
        let cfg = LinkConfig::new()
            .rate_bps(8_000_000)
            .delay(Duration::from_micros(10));
        let mut link = Link::new(1, 0, 1, cfg);
        let a = link.plan(0, 1000)[0].unwrap();
        let b = link.plan(0, 1000)[0].unwrap();
        assert_eq!(a.at_ns, 1_000_000 + 10_000);
        assert_eq!(b.at_ns, 2_000_000 + 10_000);
        // After the queue drained the link is idle again.
        let c = link.plan(5_000_000, 1000)[0].unwrap();
        assert_eq!(c.at_ns, 6_000_000 + 10_000);
    }

    #[test]
    fn in_flight_limit_bounds_the_link() {
        let mut link = Link::new(1, 0, 1, LinkConfig::new().in_flight_limit(2));
        assert!(link.plan(0, 10)[0].is_some());
        assert!(link.plan(0, 10)[0].is_some());
        assert!(link.plan(0, 10)[0].is_none());
        assert_eq!(link.stats().dropped_overflow, 1);
        link.delivered(0, 10);
        assert!(link.plan(0, 10)[0].is_some());
    }

    #[test]
    fn links_draw_from_distinct_streams() {
        let a = Link::new(7, 0, 1, LinkConfig::new());
        let b = Link::new(7, 1, 0, LinkConfig::new());
        let c = Link::new(8, 0, 1, LinkConfig::new());
        assert_ne!(a.rng, b.rng);
        assert_ne!(a.rng, c.rng);
        assert_eq!(a.rng, Link::new(7, 0, 1, LinkConfig::new()).rng);
    }
}
