//! RFC 5961 §7: challenge ACKs are rate limited, so a blind attacker cannot use us as an
//! ACK amplifier. One token bucket per engine, refilled each second (Linux
//! `tcp_challenge_ack_limit`).

use crate::time::Instant;

/// A per-second budget of challenge ACKs.
#[derive(Debug, Clone)]
pub(crate) struct ChallengeLimiter {
    limit: u32,
    left: u32,
    window_start: Instant,
}

impl ChallengeLimiter {
    /// A limiter allowing `limit` challenge ACKs per second (0 = none at all).
    pub(crate) fn new(limit: u32) -> Self {
        ChallengeLimiter {
            limit,
            left: limit,
            window_start: Instant::ZERO,
        }
    }

    /// Takes one token; false when this second's budget is spent.
    pub(crate) fn allow(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.window_start).as_micros() >= 1_000_000
            || now < self.window_start
        {
            self.window_start = now;
            self.left = self.limit;
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_refills_each_second() {
        let mut l = ChallengeLimiter::new(2);
        let t = Instant::from_secs(5);
        assert!(l.allow(t));
        assert!(l.allow(t));
        assert!(!l.allow(t + crate::time::Duration::from_millis(999)));
        assert!(l.allow(t + crate::time::Duration::from_secs(1)));
        let mut none = ChallengeLimiter::new(0);
        assert!(!none.allow(t));
    }
}
