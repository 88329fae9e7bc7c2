//! The stack-wide account of buffer memory (like Linux's `tcp_mem`): every byte of
//! storage a lazy [`RingBuffer`](super::RingBuffer) allocates is charged here and given
//! back when freed, so the total in use is known without walking the connections.
//!
//! Three thresholds, in bytes:
//! - below `low` nothing is moderated;
//! - above `pressure` the stack is *under pressure* until usage falls back below `low`
//!   (the hysteresis Linux's `tcp_memory_pressure` has): buffers stop growing and new
//!   connections start at their minimum size;
//! - `hard` is never exceeded: a charge that would cross it is refused (the caller drops
//!   and counts what it could not store, or refuses the new connection).

/// Thresholds of a [`MemBudget`], in bytes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(default)
)]
pub struct MemLimits {
    /// Pressure ends once usage falls below this.
    pub low: usize,
    /// Pressure starts once usage rises above this.
    pub pressure: usize,
    /// Never exceeded.
    pub hard: usize,
}

impl Default for MemLimits {
    /// 512 MiB hard, pressure at three quarters of it, low at half.
    fn default() -> Self {
        MemLimits::from_hard(512 << 20)
    }
}

impl MemLimits {
    /// Limits derived from a hard limit: pressure at 3/4 of it, low at 1/2.
    pub const fn from_hard(hard: usize) -> Self {
        MemLimits {
            low: hard / 2,
            pressure: hard / 4 * 3,
            hard,
        }
    }
}

/// The account itself (see the module docs).
#[derive(Debug, Clone)]
pub struct MemBudget {
    limits: MemLimits,
    used: usize,
    peak: usize,
    pressure: bool,
    refused: u64,
}

impl MemBudget {
    /// Nothing charged yet. `pressure` and `low` are clamped to `hard`, `low` to
    /// `pressure`.
    pub fn new(limits: MemLimits) -> Self {
        let hard = limits.hard;
        let pressure = limits.pressure.min(hard);
        let low = limits.low.min(pressure);
        MemBudget {
            limits: MemLimits {
                low,
                pressure,
                hard,
            },
            used: 0,
            peak: 0,
            pressure: false,
            refused: 0,
        }
    }

    /// The thresholds in force.
    #[inline]
    pub fn limits(&self) -> MemLimits {
        self.limits
    }

    /// Bytes charged now.
    #[inline]
    pub fn used(&self) -> usize {
        self.used
    }

    /// The most ever charged at once.
    #[inline]
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Charges refused because they would have crossed `hard`.
    #[inline]
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Under pressure: buffers should not grow, new ones start small.
    #[inline]
    pub fn under_pressure(&self) -> bool {
        self.pressure
    }

    /// At or past `hard`: a new connection would be refused.
    #[inline]
    pub fn exhausted(&self) -> bool {
        self.used >= self.limits.hard
    }

    /// Charges `n` bytes; false (and nothing charged) when that would cross `hard`.
    pub fn try_charge(&mut self, n: usize) -> bool {
        let Some(total) = self.used.checked_add(n).filter(|&t| t <= self.limits.hard) else {
            self.refused += 1;
            return false;
        };
        self.used = total;
        self.peak = self.peak.max(total);
        if total > self.limits.pressure {
            self.pressure = true;
        }
        true
    }

    /// Gives `n` bytes back (never below zero).
    pub fn release(&mut self, n: usize) {
        self.used = self.used.saturating_sub(n);
        if self.used < self.limits.low {
            self.pressure = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_and_hysteresis() {
        let mut b = MemBudget::new(MemLimits {
            low: 100,
            pressure: 200,
            hard: 300,
        });
        assert!(b.try_charge(150));
        assert!(!b.under_pressure());
        assert!(b.try_charge(100));
        assert!(b.under_pressure());
        assert!(!b.try_charge(51), "crossing hard is refused");
        assert_eq!(b.used(), 250);
        assert_eq!(b.refused(), 1);
        b.release(100);
        assert!(
            b.under_pressure(),
            "pressure lasts until usage is below low"
        );
        b.release(60);
        assert!(!b.under_pressure());
        assert_eq!(b.peak(), 250);
        b.release(usize::MAX);
        assert_eq!(b.used(), 0);
        assert!(
            !b.try_charge(usize::MAX),
            "overflow is a refusal, not a panic"
        );
    }

    #[test]
    fn limits_are_ordered() {
        let b = MemBudget::new(MemLimits {
            low: 500,
            pressure: 400,
            hard: 300,
        });
        assert_eq!(
            b.limits(),
            MemLimits {
                low: 300,
                pressure: 300,
                hard: 300
            }
        );
    }
}
