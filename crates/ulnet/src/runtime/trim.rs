//! Giving freed TCP buffer memory back to the system (issue 13).
//!
//! The engine frees a connection's buffer storage when it closes or sits idle, but the
//! allocator keeps freed blocks: RSS would stay at its high-water mark. Once a second
//! the loop compares the engine's memory (buffer storage, plus [`CONN_BYTES`] per
//! connection held) with its recent peak; when at least [`TRIM_MIN_FREED`] of it was
//! freed (or [`TRIM_SETTLED_MIN`] once the decline has stopped), it first lets the
//! engine give back the capacity a peak left (`Tcp::shrink`), then asks the allocator to
//! return free pages (`ulnet_channel::sys::heap::trim`). While such a trim may still come
//! due, an idle loop wakes for the next look ([`HeapTrim::wake_at`]): after a mass close
//! nothing else would wake it.
//! Measured in docs/memory.md: 20,000 connections that held 320 MB of buffers went from
//! 401 MB to 81 MB resident once trimmed. Counting connections too matters when many idle
//! ones close: they hold no buffers, and `ulnet bench attack` saw RSS stay at 2.9x its
//! start after 20,000 of them closed because no trim was ever due.

use ulnet_stack::time::{Duration, Instant};

/// How often the loop looks at the engine's buffer memory.
pub(crate) const TRIM_PERIOD: Duration = Duration::from_secs(1);
/// How much memory must have been freed since the last trim (or peak) to trim.
pub(crate) const TRIM_MIN_FREED: u64 = 8 << 20;
/// Less is enough once the decline has stopped (the engine's memory did not fall since
/// the previous look): the tail of a mass close, which [`TRIM_MIN_FREED`] alone would
/// leave in the heap for good (`ulnet bench attack` saw RSS stay at 1.22x its start
/// after 20,000 idle connections closed, 1.00x after one more trim).
pub(crate) const TRIM_SETTLED_MIN: u64 = 1 << 20;
/// What one connection costs beside its buffers, for the trim's accounting: control
/// block, slot and table entry (`ulnet bench attack` measured 2.36 KiB of RSS per idle
/// connection).
pub(crate) const CONN_BYTES: u64 = 2048;

/// What the trim accounts to the engine of `iface`: its buffer storage and
/// [`CONN_BYTES`] per connection.
pub(crate) fn engine_mem(iface: &ulnet_stack::iface::Interface) -> u64 {
    iface.tcp().map_or(0, |t| {
        t.stats().mem_bytes + t.connection_count() as u64 * CONN_BYTES
    })
}

/// When to trim (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HeapTrim {
    next: Instant,
    /// The most buffer memory seen since the last trim.
    high: u64,
    /// What the previous look saw.
    last: u64,
    /// The previous look saw less than the one before: a decline may still be running.
    falling: bool,
    /// The previous look trimmed: the next one trims once more (see [`look`](Self::look)).
    again: bool,
}

impl HeapTrim {
    /// Whether a look is due at `now` (cheap: one comparison per iteration).
    #[inline]
    pub(crate) fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// When an idle loop, whose engine holds `mem` now, should wake to look again: while
    /// memory freed since the last trim could still make one due (the tail of a
    /// decline), while the last look saw memory falling (a trim in the middle of a mass
    /// close leaves nothing freed on the books, but the close goes on after it), or when
    /// memory fell since the last look (a close that began and ended between two looks
    /// leaves the loop idle with nothing else to wake it), else never.
    pub(crate) fn wake_at(&self, mem: u64) -> Option<Instant> {
        (self.again
            || self.falling
            || mem < self.last
            || self.high.saturating_sub(self.last) >= TRIM_SETTLED_MIN)
            .then_some(self.next)
    }

    /// Looks at the engine's buffer memory `mem` now; true when the heap should be
    /// trimmed: [`TRIM_MIN_FREED`] freed since the last trim, or [`TRIM_SETTLED_MIN`]
    /// once the decline stopped or once more was freed than is left (the tail of a mass
    /// close: waiting one more period for it to settle would leave the freed memory
    /// resident for that long). And once more at the look after a trim: the tail of a
    /// mass close frees memory the engine does not account (the app's sessions and
    /// tables, the connection table shrinking) after the trim that the engine's own
    /// decline set off, and nothing accounted would set off another (`ulnet bench
    /// attack`: RSS 1.12x its start 2.5 s after 20,000 idle connections closed, 1.00x
    /// after one more trim).
    pub(crate) fn look(&mut self, now: Instant, mem: u64) -> bool {
        self.next = now + TRIM_PERIOD;
        self.high = self.high.max(mem);
        let freed = self.high - mem;
        let settled = mem >= self.last;
        self.falling = !settled;
        self.last = mem;
        let due =
            freed >= TRIM_MIN_FREED || (freed >= TRIM_SETTLED_MIN && (settled || freed >= mem));
        let again = std::mem::replace(&mut self.again, due);
        if due || again {
            self.high = mem;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_enough_was_freed_and_looks_once_a_period() {
        let mut t = HeapTrim::default();
        let t0 = Instant::from_secs(10);
        assert!(t.due(t0));
        assert!(!t.look(t0, 100 << 20));
        assert!(!t.due(t0 + Duration::from_millis(999)));
        let t1 = t0 + TRIM_PERIOD;
        assert!(!t.look(t1, 95 << 20), "5 MiB freed is not worth a trim");
        let t2 = t1 + TRIM_PERIOD;
        assert!(t.look(t2, 90 << 20));
        // One more a period later, whatever the engine freed meanwhile; then the new
        // reference is what was left.
        let t3 = t2 + TRIM_PERIOD;
        assert!(t.look(t3, 85 << 20), "the trim after a trim");
        assert!(!t.look(t3 + TRIM_PERIOD, 80 << 20), "5 MiB since: not yet");
        assert!(t.look(t3 + TRIM_PERIOD * 2, 0));
        assert!(t.look(t3 + TRIM_PERIOD * 3, 0), "and the one after it");
        assert!(!t.look(t3 + TRIM_PERIOD * 4, 0), "then quiet");
        assert_eq!(t.wake_at(0), None);
    }

    #[test]
    fn the_tail_of_a_decline_is_trimmed_once_it_settles() {
        let mut t = HeapTrim::default();
        let t0 = Instant::from_secs(10);
        assert!(!t.look(t0, 40 << 20));
        // 12 MiB freed: trimmed at once; then 6 MiB more, still falling: not due
        // itself, but the trim after a trim takes it.
        assert!(t.look(t0 + TRIM_PERIOD, 28 << 20));
        assert!(t.look(t0 + TRIM_PERIOD * 2, 22 << 20));
        // An idle loop wakes for the next look while a trim may come due (it was
        // still falling).
        assert_eq!(t.wake_at(22 << 20), Some(t0 + TRIM_PERIOD * 3));
        // 4 MiB more, then settled there: due (more than 1 MiB, settled), and the one
        // after it.
        assert!(!t.look(t0 + TRIM_PERIOD * 3, 18 << 20));
        assert!(t.look(t0 + TRIM_PERIOD * 4, 18 << 20));
        assert!(t.look(t0 + TRIM_PERIOD * 5, 18 << 20));
        assert_eq!(t.wake_at(18 << 20), None);
        // Nothing freed since: no trim, however long it stays.
        assert!(!t.look(t0 + TRIM_PERIOD * 6, 18 << 20));
        // Less than 1 MiB freed, settled: not worth it.
        let less = (18 << 20) - (512 << 10);
        assert!(!t.look(t0 + TRIM_PERIOD * 7, less));
        assert!(!t.look(t0 + TRIM_PERIOD * 8, less));
    }

    #[test]
    fn a_close_that_goes_on_after_a_trim_is_trimmed_when_it_ends() {
        // `ulnet bench attack`: 20,000 idle connections closing across a look. The trim
        // at the look leaves 6 MiB on the books; the rest closes before the next look,
        // which an idle loop must still take, and which trims though 6 MiB < 8 MiB.
        let mut t = HeapTrim::default();
        let t0 = Instant::from_secs(10);
        assert!(!t.look(t0, 40 << 20));
        assert!(t.look(t0 + TRIM_PERIOD, 6 << 20));
        assert_eq!(
            t.wake_at(6 << 20),
            Some(t0 + TRIM_PERIOD * 2),
            "still falling: look again"
        );
        assert!(
            t.look(t0 + TRIM_PERIOD * 2, 0),
            "more freed than left: trim now"
        );
        assert_eq!(
            t.wake_at(0),
            Some(t0 + TRIM_PERIOD * 3),
            "the trim after it"
        );
        assert!(t.look(t0 + TRIM_PERIOD * 3, 0));
        assert_eq!(t.wake_at(0), None, "settled with nothing freed: sleep");
        assert!(!t.look(t0 + TRIM_PERIOD * 4, 0));
    }

    #[test]
    fn a_close_between_two_looks_wakes_the_idle_loop() {
        // `ulnet bench attack` on AF_PACKET: the last look saw 20,000 idle connections
        // (still rising), then they all closed before the next one, and the loop went
        // idle with nothing due: RSS stayed at 3.85x its start for seconds.
        let mut t = HeapTrim::default();
        let t0 = Instant::from_secs(10);
        assert!(!t.look(t0, 20 << 20));
        assert!(!t.look(t0 + TRIM_PERIOD, 40 << 20));
        assert_eq!(
            t.wake_at(40 << 20),
            None,
            "nothing freed: an idle loop sleeps"
        );
        assert_eq!(
            t.wake_at(0),
            Some(t0 + TRIM_PERIOD * 2),
            "fell since the look"
        );
        assert!(t.look(t0 + TRIM_PERIOD * 2, 0));
    }

    #[test]
    fn a_slow_decline_waits_for_the_larger_amount() {
        // 1 MiB a second off 100 MiB: neither settled nor more freed than left.
        let mut t = HeapTrim::default();
        let t0 = Instant::from_secs(10);
        assert!(!t.look(t0, 100 << 20));
        for i in 1..8u32 {
            assert!(
                !t.look(t0 + TRIM_PERIOD * i, u64::from(100 - i) << 20),
                "second {i}"
            );
        }
        assert!(t.look(t0 + TRIM_PERIOD * 8, 92 << 20));
    }

    #[test]
    fn closing_many_idle_connections_is_worth_a_trim() {
        let mut t = HeapTrim::default();
        let t0 = Instant::from_secs(10);
        // 20,000 idle connections, no buffer storage.
        assert!(!t.look(t0, 20_000 * CONN_BYTES));
        assert!(t.look(t0 + TRIM_PERIOD, 0));
    }
}
