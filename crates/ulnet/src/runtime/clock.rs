//! The runtime's clock: the monotonic clock turned into the stack's microsecond
//! [`Instant`]s since the runtime started, or a manual clock for tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ulnet_stack::time::Instant;

/// Where the loop gets `now` from (read once per iteration, never per packet).
#[derive(Debug, Clone)]
pub enum Clock {
    /// `std::time::Instant` since the given start: the real thing.
    Monotonic(std::time::Instant),
    /// Microseconds set by whoever holds the other end (tests, simulations).
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// The monotonic clock, with its epoch now.
    pub fn monotonic() -> Clock {
        Clock::Monotonic(std::time::Instant::now())
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
                let us = start.elapsed().as_micros();
                Instant::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
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
