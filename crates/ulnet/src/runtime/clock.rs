//! The runtime's clock: the monotonic clock turned into the stack's microsecond
//! [`Instant`]s since the runtime started, or a manual clock for tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ulnet_stack::time::Instant;

/// Where the loop gets `now` from (read once per iteration, never per packet).
#[derive(Debug, Clone)]
pub enum Clock {
    /// `CLOCK_MONOTONIC` since the given start: the real thing.
    Monotonic(Epoch),
    /// Microseconds set by whoever holds the other end (tests, simulations).
    Manual(Arc<AtomicU64>),
}

/// The start of a monotonic [`Clock`]: `CLOCK_MONOTONIC` when it was taken, in
/// microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch(u64);

impl Epoch {
    /// Now.
    pub fn now() -> Epoch {
        Epoch(monotonic_micros())
    }
}

/// `CLOCK_MONOTONIC` in microseconds, read through the vDSO. Not `std::time::Instant`:
/// its `elapsed` adds a subtraction of two timespecs and a `Duration`, and a busy-polling
/// loop reads the clock every iteration (a third of an idle iteration's 73 ns went to it,
/// `cargo bench -p ulnet --bench idle_turn`).
fn monotonic_micros() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // Never negative: the monotonic clock counts from boot.
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(nanos / 1_000)
}

impl Clock {
    /// The monotonic clock, with its epoch now.
    pub fn monotonic() -> Clock {
        Clock::Monotonic(Epoch::now())
    }

    /// A manual clock at zero and the cell that sets it (in microseconds).
    pub fn manual() -> (Clock, Arc<AtomicU64>) {
        let cell = Arc::new(AtomicU64::new(0));
        (Clock::Manual(Arc::clone(&cell)), cell)
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        match self {
            Clock::Monotonic(start) => {
                Instant::from_micros(monotonic_micros().saturating_sub(start.0))
            }
            Clock::Manual(cell) => Instant::from_micros(cell.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_follows_its_cell_and_monotonic_never_goes_back() {
        let (clock, cell) = Clock::manual();
        assert_eq!(clock.now(), Instant::ZERO);
        cell.store(1_500, Ordering::Relaxed);
        assert_eq!(clock.now(), Instant::from_micros(1_500));
        let m = Clock::monotonic();
        let a = m.now();
        assert!(m.now() >= a);
    }
}
