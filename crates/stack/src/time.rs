//! Time as the stack sees it: an [`Instant`] handed in by the caller (virtual in tests,
//! the monotonic clock in the runtime) and [`Duration`]s. Microsecond resolution, which
//! RFC 6298 §4 wants for the RTT clock.

pub use core::time::Duration;

/// A point in time, in microseconds since an epoch the caller chose. The stack never
/// reads a clock; every entry point takes `now: Instant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant { micros: 0 };

    /// An instant `micros` microseconds after the epoch.
    pub const fn from_micros(micros: u64) -> Self {
        Instant { micros }
    }

    /// An instant `millis` milliseconds after the epoch.
    pub const fn from_millis(millis: u64) -> Self {
        Instant {
            micros: millis.saturating_mul(1000),
        }
    }

    /// An instant `secs` seconds after the epoch.
    pub const fn from_secs(secs: u64) -> Self {
        Instant {
            micros: secs.saturating_mul(1_000_000),
        }
    }

    /// Microseconds since the epoch.
    pub const fn total_micros(self) -> u64 {
        self.micros
    }

    /// Milliseconds since the epoch.
    pub const fn total_millis(self) -> u64 {
        self.micros / 1000
    }

    /// The time since the epoch.
    pub const fn since_epoch(self) -> Duration {
        Duration::from_micros(self.micros)
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }
}

impl core::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        let add = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        Instant {
            micros: self.micros.saturating_add(add),
        }
    }
}

impl core::ops::AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl core::ops::Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        let sub = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        Instant {
            micros: self.micros.saturating_sub(sub),
        }
    }
}

impl core::ops::Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl core::fmt::Display for Instant {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.micros / 1_000_000,
            self.micros % 1_000_000
        )
    }
}
