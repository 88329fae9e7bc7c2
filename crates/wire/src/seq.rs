//! TCP sequence numbers: 32-bit values compared modulo 2^32 (RFC 9293 §3.4,
//! "serial number arithmetic" of RFC 1982).

use core::cmp::Ordering;
use core::fmt;
use core::ops;

/// A TCP sequence number. Ordering is circular: `a < b` when `b` is ahead of `a` by less
/// than 2^31, so comparisons stay right across wraparound. Only compare numbers that are
/// within 2^31 of each other (true of any two numbers inside one window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// The number `n` bytes after `self`.
    #[inline]
    #[must_use]
    pub const fn add(self, n: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(n))
    }

    /// How far `self` is ahead of `earlier`, in bytes; zero when it is not ahead.
    #[inline]
    pub fn distance_from(self, earlier: SeqNumber) -> u32 {
        let d = self.0.wrapping_sub(earlier.0);
        if (d as i32) < 0 {
            0
        } else {
            d
        }
    }

    /// The signed distance `self - other`, valid when they are within 2^31.
    #[inline]
    pub const fn diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// The later of two numbers, circularly.
    #[inline]
    #[must_use]
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self.diff(other) >= 0 {
            self
        } else {
            other
        }
    }

    /// The earlier of two numbers, circularly.
    #[inline]
    #[must_use]
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self.diff(other) <= 0 {
            self
        } else {
            other
        }
    }

    /// `start <= self < end`, circularly.
    #[inline]
    pub fn in_range(self, start: SeqNumber, end: SeqNumber) -> bool {
        self.diff(start) >= 0 && self.diff(end) < 0
    }
}

impl PartialOrd for SeqNumber {
    fn partial_cmp(&self, other: &SeqNumber) -> Option<Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

impl ops::Add<u32> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn add(self, n: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(n))
    }
}

impl ops::AddAssign<u32> for SeqNumber {
    #[inline]
    fn add_assign(&mut self, n: u32) {
        self.0 = self.0.wrapping_add(n);
    }
}

impl ops::Sub<u32> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn sub(self, n: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(n))
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_across_wraparound() {
        let a = SeqNumber(u32::MAX - 10);
        let b = a + 20;
        assert_eq!(b.0, 9);
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b.diff(a), 20);
        assert_eq!(b.distance_from(a), 20);
        assert_eq!(a.distance_from(b), 0);
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
        assert!((a + 5).in_range(a, b));
        assert!(!b.in_range(a, b));
    }
}
