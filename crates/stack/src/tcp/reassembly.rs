//! Out-of-order data tracking for the receiver.
//!
//! Read first: RFC 9293 §3.10.7.4 (segments beyond RCV.NXT are held until the gap before
//! them is filled), RFC 2018 §4 (the SACK blocks the receiver reports are these ranges).
//!
//! The [`Assembler`] only remembers *which* byte ranges past the receive pointer are
//! present; the bytes themselves sit in the receive [`RingBuffer`]
//! (`write_unallocated`). Offsets are relative to RCV.NXT. The number of ranges is bounded
//! at creation and nothing allocates afterwards: a segment that would need one range too
//! many is refused ([`TooManyRanges`]) and the caller drops it (the peer retransmits).
//!
//! [`RingBuffer`]: crate::storage::RingBuffer

use alloc::vec::Vec;

/// The segment would create more separate ranges than the assembler may hold; nothing
/// was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyRanges;

impl core::fmt::Display for TooManyRanges {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("too many out-of-order ranges")
    }
}

impl core::error::Error for TooManyRanges {}

/// The set of byte ranges present past the receive pointer, as sorted, disjoint,
/// non-adjacent half-open intervals `[start, end)`.
#[derive(Debug, Clone)]
pub struct Assembler {
    /// Sorted by start; no two ranges overlap or touch; every range is non-empty.
    ranges: Vec<(usize, usize)>,
    max_ranges: usize,
}

impl Assembler {
    /// An empty assembler holding at most `max_ranges` separate ranges (storage for them
    /// is reserved now).
    pub fn new(max_ranges: usize) -> Self {
        Assembler {
            ranges: Vec::with_capacity(max_ranges),
            max_ranges,
        }
    }

    /// The maximum number of separate ranges.
    pub fn max_ranges(&self) -> usize {
        self.max_ranges
    }

    /// No data is held.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of separate ranges held.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// Records that bytes `[offset, offset + len)` are present, merging with ranges they
    /// overlap or touch. A zero `len` is a no-op. The end saturates at `usize::MAX`.
    ///
    /// # Errors
    /// [`TooManyRanges`] when the data would need a new range and all are in use; the
    /// assembler is then unchanged.
    pub fn add(&mut self, offset: usize, len: usize) -> Result<(), TooManyRanges> {
        let start = offset;
        let end = offset.saturating_add(len);
        if start == end {
            return Ok(());
        }
        // First range whose end reaches `start` (it may merge), and first range starting
        // past `end` (it cannot); everything in between merges with the new data.
        let first = self.ranges.partition_point(|&(_, e)| e < start);
        let last = self.ranges.partition_point(|&(s, _)| s <= end);
        if first == last {
            if self.ranges.len() >= self.max_ranges {
                return Err(TooManyRanges);
            }
            self.ranges.insert(first, (start, end));
            return Ok(());
        }
        let merged = (
            start.min(self.ranges[first].0),
            end.max(self.ranges[last - 1].1),
        );
        self.ranges[first] = merged;
        self.ranges.drain(first + 1..last);
        Ok(())
    }

    /// If data is present at offset 0, removes the contiguous range there and returns its
    /// length; the remaining ranges shift down by that length, so offsets stay relative
    /// to the (advanced) receive pointer. Returns 0 otherwise.
    pub fn remove_front(&mut self) -> usize {
        match self.ranges.first() {
            Some(&(0, end)) => {
                self.ranges.remove(0);
                for r in &mut self.ranges {
                    r.0 -= end;
                    r.1 -= end;
                }
                end
            }
            _ => 0,
        }
    }

    /// The receive pointer moved forward by `n` bytes that were not held here (in-order
    /// data that needed no range): ranges shift down by `n`; any part of them below `n`
    /// is dropped.
    pub fn advance(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.ranges.retain(|&(_, e)| e > n);
        for r in &mut self.ranges {
            r.0 = r.0.saturating_sub(n);
            r.1 -= n;
        }
    }

    /// Whether the byte at `offset` is present.
    pub fn contains(&self, offset: usize) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= offset);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= offset)
    }

    /// The range holding `offset`, if any: the receiver uses it to find the SACK block
    /// containing the segment that just arrived (RFC 2018 §4).
    pub fn range_containing(&self, offset: usize) -> Option<(usize, usize)> {
        let i = self.ranges.partition_point(|&(_, e)| e <= offset);
        self.ranges.get(i).copied().filter(|&(s, _)| s <= offset)
    }

    /// The first held part of `[offset, offset + len)`, as `(start, end)`, if any: the
    /// bytes of an arriving segment that are already here (a duplicate, RFC 2883 §4.2).
    pub fn first_overlap(&self, offset: usize, len: usize) -> Option<(usize, usize)> {
        let end = offset.saturating_add(len);
        let i = self.ranges.partition_point(|&(_, e)| e <= offset);
        self.ranges
            .get(i)
            .filter(|&&(s, _)| s < end)
            .map(|&(s, e)| (s.max(offset), e.min(end)))
    }

    /// The ranges as `(start, end)` half-open intervals, lowest first.
    pub fn ranges(
        &self,
    ) -> impl DoubleEndedIterator<Item = (usize, usize)> + ExactSizeIterator + Clone + '_ {
        self.ranges.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn first_overlap_finds_held_bytes() {
        let mut a = Assembler::new(4);
        a.add(10, 5).unwrap();
        a.add(20, 5).unwrap();
        assert_eq!(a.first_overlap(0, 10), None);
        assert_eq!(a.first_overlap(15, 5), None);
        assert_eq!(a.first_overlap(10, 5), Some((10, 15)));
        assert_eq!(a.first_overlap(12, 10), Some((12, 15)));
        assert_eq!(a.first_overlap(18, 4), Some((20, 22)));
        assert_eq!(a.first_overlap(30, usize::MAX), None);
    }

    #[test]
    fn merge_overlap_and_adjacent() {
        let mut a = Assembler::new(4);
        a.add(10, 5).unwrap();
        a.add(20, 5).unwrap();
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![(10, 15), (20, 25)]);
        a.add(15, 5).unwrap();
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![(10, 25)]);
        a.add(5, 30).unwrap();
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![(5, 35)]);
        a.add(0, 0).unwrap();
        assert_eq!(a.range_count(), 1);
        assert_eq!(a.remove_front(), 0);
        a.add(0, 5).unwrap();
        assert_eq!(a.remove_front(), 35);
        assert!(a.is_empty());
    }

    #[test]
    fn remove_front_shifts_rest() {
        let mut a = Assembler::new(4);
        a.add(0, 10).unwrap();
        a.add(20, 5).unwrap();
        assert_eq!(a.remove_front(), 10);
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![(10, 15)]);
        assert!(a.contains(10) && a.contains(14) && !a.contains(15) && !a.contains(9));
        assert_eq!(a.range_containing(12), Some((10, 15)));
        assert_eq!(a.range_containing(15), None);
    }

    #[test]
    fn too_many_ranges_is_atomic() {
        let mut a = Assembler::new(2);
        a.add(10, 1).unwrap();
        a.add(20, 1).unwrap();
        assert_eq!(a.add(30, 1), Err(TooManyRanges));
        assert_eq!(a.add(0, 1), Err(TooManyRanges));
        assert_eq!(a.add(15, 1), Err(TooManyRanges));
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![(10, 11), (20, 21)]);
        // Merging into existing ranges still works when full.
        a.add(11, 9).unwrap();
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![(10, 21)]);
        let mut z = Assembler::new(0);
        assert_eq!(z.add(0, 1), Err(TooManyRanges));
    }

    #[test]
    fn advance_shifts_and_trims() {
        let mut a = Assembler::new(3);
        a.add(10, 5).unwrap();
        a.add(20, 5).unwrap();
        a.add(30, 5).unwrap();
        a.advance(4);
        assert_eq!(
            a.ranges().collect::<Vec<_>>(),
            vec![(6, 11), (16, 21), (26, 31)]
        );
        a.advance(18);
        assert_eq!(a.ranges().collect::<Vec<_>>(), vec![(0, 3), (8, 13)]);
        a.advance(100);
        assert!(a.is_empty());
    }

    #[test]
    fn extreme_offsets_saturate() {
        let mut a = Assembler::new(2);
        a.add(usize::MAX - 1, 10).unwrap();
        assert_eq!(
            a.ranges().collect::<Vec<_>>(),
            vec![(usize::MAX - 1, usize::MAX)]
        );
        a.add(usize::MAX, 10).unwrap();
        assert_eq!(a.range_count(), 1);
        let mut b = Assembler::new(1);
        b.add(usize::MAX, 10).unwrap();
        assert!(b.is_empty());
    }

    #[test]
    fn never_reallocates() {
        let mut a = Assembler::new(8);
        let cap = a.ranges.capacity();
        for i in 0..100 {
            let _ = a.add(i * 7 % 50 * 3, 1);
            if i % 10 == 0 {
                let _ = a.add(0, 1);
                a.remove_front();
            }
        }
        assert_eq!(a.ranges.capacity(), cap);
    }

    const SPACE: usize = 96;

    #[derive(Debug, Clone)]
    enum Op {
        Add(usize, usize),
        RemoveFront,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..SPACE, 0usize..20).prop_map(|(o, l)| Op::Add(o, l)),
            1 => Just(Op::RemoveFront),
        ]
    }

    /// Ranges of a bitmap, as the assembler should report them.
    fn bitmap_ranges(bits: &[bool]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < bits.len() {
            if bits[i] {
                let s = i;
                while i < bits.len() && bits[i] {
                    i += 1;
                }
                out.push((s, i));
            } else {
                i += 1;
            }
        }
        out
    }

    proptest! {
        /// Against a naive bitmap: same ranges after every operation, an error exactly
        /// when the bitmap would need more ranges than allowed, and `remove_front` returns
        /// the run of present bytes at 0.
        #[test]
        fn matches_bitmap_model(max in 0usize..6, ops in proptest::collection::vec(op(), 0..60)) {
            let mut a = Assembler::new(max);
            let mut bits = vec![false; SPACE * 2];
            for op in ops {
                match op {
                    Op::Add(o, l) => {
                        let mut next = bits.clone();
                        for b in &mut next[o..o + l] {
                            *b = true;
                        }
                        let fits = bitmap_ranges(&next).len() <= max;
                        let res = a.add(o, l);
                        if fits {
                            prop_assert_eq!(res, Ok(()));
                            bits = next;
                        } else {
                            prop_assert_eq!(res, Err(TooManyRanges));
                        }
                    }
                    Op::RemoveFront => {
                        let run = bits.iter().take_while(|&&b| b).count();
                        prop_assert_eq!(a.remove_front(), run);
                        bits.drain(..run);
                        bits.resize(SPACE * 2, false);
                    }
                }
                prop_assert_eq!(a.ranges().collect::<Vec<_>>(), bitmap_ranges(&bits));
                for (i, &b) in bits.iter().enumerate() {
                    prop_assert_eq!(a.contains(i), b);
                }
            }
        }
    }
}
