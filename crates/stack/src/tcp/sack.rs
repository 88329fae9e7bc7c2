//! Selective acknowledgements: the sender's scoreboard and the receiver's SACK blocks.
//!
//! Read first: RFC 2018 (the option; §4 which blocks a receiver reports), RFC 2883
//! (D-SACK; §4 how it is sent and recognised), RFC 6675 (SACK-based loss recovery: §4
//! IsLost, SetPipe, NextSeg).
//!
//! Sender side, [`Scoreboard`]: the SACKed ranges above SND.UNA, at most `max_blocks`
//! of them (when full, the range farthest from SND.UNA is forgotten, which only makes the
//! sender retransmit something the receiver already has). All sequence arithmetic is
//! circular ([`SeqNumber`]); every range lies within 2^31 of SND.UNA.
//!
//! Receiver side, [`sack_blocks`]: turns the reassembly ranges into the blocks of one
//! outgoing SACK option.

use alloc::vec::Vec;
use ulnet_wire::SeqNumber;

/// A SACK block or scoreboard range: `[start, end)` in sequence space.
pub type SeqRange = (SeqNumber, SeqNumber);

/// Ranges longer than this are not believed: no window is that large (RFC 7323 §2.3
/// caps it at 2^30), so such a block is garbage or an attack.
const MAX_BLOCK_LEN: u32 = 1 << 30;

/// What one ACK's SACK blocks changed on the [`Scoreboard`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackUpdate {
    /// Bytes above SND.UNA that are SACKed now and were not before (RFC 6675 §5 uses this
    /// to recognise an ACK that carries new SACK information).
    pub newly_sacked_bytes: usize,
    /// The first block was a D-SACK (RFC 2883 §4): it reports data received twice, not
    /// new data, and was not added to the scoreboard.
    pub dsack: bool,
}

/// What [`Scoreboard::next_seg`] says to send next (RFC 6675 §4 NextSeg).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextSeg {
    /// Retransmit `[start, end)` (rules 1 and 3); afterwards HighRxt = `end`.
    Retransmit {
        /// First sequence number.
        start: SeqNumber,
        /// One past the last.
        end: SeqNumber,
    },
    /// Send new data `[start, end)` from SND.NXT (rule 2).
    NewData {
        /// First sequence number (SND.NXT).
        start: SeqNumber,
        /// One past the last.
        end: SeqNumber,
    },
}

/// The RFC 6675 scoreboard: which bytes above SND.UNA the receiver has SACKed.
#[derive(Debug, Clone)]
pub struct Scoreboard {
    /// Sorted, disjoint, non-adjacent, non-empty ranges, all above the last SND.UNA.
    ranges: Vec<SeqRange>,
    max_blocks: usize,
}

fn len(r: SeqRange) -> usize {
    r.1.distance_from(r.0) as usize
}

impl Scoreboard {
    /// An empty scoreboard holding at most `max_blocks` separate ranges (reserved now).
    pub fn new(max_blocks: usize) -> Self {
        Scoreboard {
            ranges: Vec::with_capacity(max_blocks),
            max_blocks,
        }
    }

    /// Forgets all SACK information (e.g. after a timeout, RFC 6675 §5.1 allows it, or
    /// when the connection is reset).
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// No byte is SACKed.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The SACKed ranges, lowest first.
    pub fn ranges(
        &self,
    ) -> impl DoubleEndedIterator<Item = SeqRange> + ExactSizeIterator + Clone + '_ {
        self.ranges.iter().copied()
    }

    /// Total SACKed bytes.
    pub fn sacked_bytes(&self) -> usize {
        self.ranges.iter().map(|&r| len(r)).sum()
    }

    /// One past the highest SACKed sequence number, if any (RFC 6675's "highest octet
    /// covered by any received SACK" is this minus one).
    pub fn highest_sacked(&self) -> Option<SeqNumber> {
        self.ranges.last().map(|r| r.1)
    }

    /// Whether `seq` has been SACKed.
    pub fn is_sacked(&self, seq: SeqNumber) -> bool {
        self.ranges.iter().any(|r| seq.in_range(r.0, r.1))
    }

    /// Processes an ACK: drops what the cumulative ACK `snd_una` now covers, then adds
    /// the SACK blocks as received (RFC 2018 §3). Blocks are trusted to lie below SND.NXT;
    /// prefer [`Scoreboard::update_checked`], which verifies it.
    pub fn update(&mut self, snd_una: SeqNumber, blocks: &[SeqRange]) -> SackUpdate {
        self.update_inner(snd_una, None, blocks)
    }

    /// [`Scoreboard::update`], ignoring blocks that end above `snd_nxt` (data never sent:
    /// a broken or hostile receiver).
    pub fn update_checked(
        &mut self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        blocks: &[SeqRange],
    ) -> SackUpdate {
        self.update_inner(snd_una, Some(snd_nxt), blocks)
    }

    fn update_inner(
        &mut self,
        snd_una: SeqNumber,
        snd_nxt: Option<SeqNumber>,
        blocks: &[SeqRange],
    ) -> SackUpdate {
        self.advance(snd_una);
        let before = self.sacked_bytes();
        // RFC 2883 §4: a D-SACK is a first block below the cumulative ACK, or one inside
        // the second block.
        let dsack = match blocks {
            [first, rest @ ..] => {
                first.0 < snd_una
                    || rest
                        .first()
                        .is_some_and(|second| first.0 >= second.0 && first.1 <= second.1)
            }
            [] => false,
        };
        let skip = usize::from(dsack);
        for &(start, end) in &blocks[skip.min(blocks.len())..] {
            let n = end.diff(start);
            if n <= 0 || n as u32 > MAX_BLOCK_LEN {
                continue;
            }
            if snd_nxt.is_some_and(|nxt| end > nxt) {
                continue;
            }
            let start = start.max(snd_una);
            if end <= start {
                continue;
            }
            self.insert(start, end);
        }
        SackUpdate {
            newly_sacked_bytes: self.sacked_bytes().saturating_sub(before),
            dsack,
        }
    }

    /// Drops everything below the cumulative ACK `snd_una` (an ACK without SACK blocks;
    /// [`Scoreboard::update`] does this itself).
    pub fn advance(&mut self, snd_una: SeqNumber) {
        self.ranges.retain(|r| r.1 > snd_una);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(snd_una);
        }
    }

    fn insert(&mut self, start: SeqNumber, end: SeqNumber) {
        let first = self.ranges.partition_point(|r| r.1 < start);
        let last = self.ranges.partition_point(|r| r.0 <= end);
        if first == last {
            self.ranges.insert(first, (start, end));
        } else {
            let merged = (
                start.min(self.ranges[first].0),
                end.max(self.ranges[last - 1].1),
            );
            self.ranges[first] = merged;
            self.ranges.drain(first + 1..last);
        }
        // Bounded memory: forget the range farthest from SND.UNA. Losing SACK
        // information is always safe, it only costs a needless retransmission.
        if self.ranges.len() > self.max_blocks {
            self.ranges.truncate(self.max_blocks);
        }
    }

    /// RFC 6675 §4 IsLost(seq): true when `dupthresh` or more discontiguous SACKed ranges
    /// lie above `seq`, or more than `(dupthresh - 1) * mss` bytes above it are SACKed.
    /// The scoreboard keeps ranges, not segments, so adjacent SACKed segments count once
    /// in the first test; the byte test covers them.
    pub fn is_lost(&self, seq: SeqNumber, mss: usize, dupthresh: usize) -> bool {
        let mut count = 0usize;
        let mut bytes = 0usize;
        for &(s, e) in self.ranges.iter().rev() {
            if e.diff(seq) <= 1 {
                break;
            }
            let from = s.max(seq + 1);
            count += 1;
            bytes = bytes.saturating_add(e.distance_from(from) as usize);
        }
        count >= dupthresh || bytes > dupthresh.saturating_sub(1).saturating_mul(mss)
    }

    /// The holes (un-SACKed ranges) in `[snd_una, snd_nxt)`, lowest first.
    fn holes(&self, snd_una: SeqNumber, snd_nxt: SeqNumber) -> impl Iterator<Item = SeqRange> + '_ {
        let mut at = snd_una;
        let mut ranges = self.ranges.iter();
        let mut done = false;
        core::iter::from_fn(move || loop {
            if done {
                return None;
            }
            match ranges.next() {
                Some(&(s, e)) => {
                    let s = s.min(snd_nxt);
                    let hole = (at, s);
                    at = at.max(e);
                    if hole.1 > hole.0 {
                        return Some(hole);
                    }
                }
                None => {
                    done = true;
                    if snd_nxt > at {
                        return Some((at, snd_nxt));
                    }
                }
            }
        })
    }

    /// RFC 6675 §4 SetPipe: the sender's estimate of bytes in the network. Each un-SACKed
    /// byte in `[snd_una, snd_nxt)` counts once unless IsLost, and once more if it was
    /// retransmitted (below `high_rxt`, the end of the highest retransmission in this
    /// recovery, exclusive; pass `snd_una` when nothing was retransmitted). IsLost is the
    /// same for every byte of a hole, so this walks holes, not bytes.
    pub fn pipe(
        &self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        high_rxt: SeqNumber,
        mss: usize,
    ) -> usize {
        let mut pipe = 0usize;
        for (s, e) in self.holes(snd_una, snd_nxt) {
            if !self.is_lost(s, mss, DUP_THRESH) {
                pipe = pipe.saturating_add(len((s, e)));
            }
            let rxt_end = e.min(high_rxt);
            if rxt_end > s {
                pipe = pipe.saturating_add(len((s, rxt_end)));
            }
        }
        pipe
    }

    /// RFC 6675 §4 NextSeg, rules 1 to 3: what to send next during SACK recovery.
    /// `high_rxt` is as for [`Scoreboard::pipe`]; `new_data_allowed` is how many bytes of
    /// new data the sender has and the receive window allows past `snd_nxt`.
    ///
    /// 1. The first un-SACKed byte at or above `high_rxt`, below the highest SACKed byte,
    ///    that IsLost: retransmit up to `mss` from there.
    /// 2. Otherwise new data, up to `mss`.
    /// 3. Otherwise as rule 1 without the IsLost test.
    ///
    /// Rule 4 (rescue retransmission) is [`Scoreboard::rescue_seg`].
    pub fn next_seg(
        &self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        high_rxt: SeqNumber,
        mss: usize,
        new_data_allowed: usize,
    ) -> Option<NextSeg> {
        let mss32 = u32::try_from(mss.max(1)).unwrap_or(u32::MAX);
        let highest = self.ranges.last().map(|r| r.0)?;
        let candidates = || {
            self.holes(snd_una, highest).filter_map(|(s, e)| {
                let s = s.max(high_rxt);
                (e > s).then_some((s, e))
            })
        };
        let seg = |(s, e): SeqRange| NextSeg::Retransmit {
            start: s,
            end: e.min(s + mss32),
        };
        if let Some(h) = candidates().find(|&(s, _)| self.is_lost(s, mss, DUP_THRESH)) {
            return Some(seg(h));
        }
        if new_data_allowed > 0 {
            let n = u32::try_from(new_data_allowed)
                .unwrap_or(u32::MAX)
                .min(mss32);
            return Some(NextSeg::NewData {
                start: snd_nxt,
                end: snd_nxt + n,
            });
        }
        candidates().next().map(seg)
    }

    /// RFC 6675 §4 NextSeg rule 4, rescue retransmission: the segment of up to `mss`
    /// ending at the highest outstanding un-SACKed byte. The sender sends it at most once
    /// per recovery (it keeps RescueRxt) when rules 1-3 give nothing.
    pub fn rescue_seg(
        &self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        mss: usize,
    ) -> Option<SeqRange> {
        let mss32 = u32::try_from(mss.max(1)).unwrap_or(u32::MAX);
        let (s, e) = self.holes(snd_una, snd_nxt).last()?;
        Some((s.max(e - mss32), e))
    }
}

/// DupThresh of RFC 6675 §2 (RFC 5681's three duplicate ACKs).
pub const DUP_THRESH: usize = 3;

fn offset_seq(rcv_nxt: SeqNumber, offset: usize) -> SeqNumber {
    rcv_nxt + u32::try_from(offset).unwrap_or(u32::MAX)
}

/// Fills `out` with the SACK blocks of one outgoing ACK and returns how many (at most
/// `max_blocks`, at most 4: RFC 2018 §3 allows 4, or 3 beside the timestamp option).
///
/// `ranges` are the receiver's out-of-order ranges as offsets from `rcv_nxt` (from
/// [`Assembler::ranges`]); `last_received` is the segment that triggered this ACK;
/// `dsack` a duplicate segment to report.
///
/// Order (RFC 2883 §4, RFC 2018 §4): the D-SACK block first; then, if the duplicate lies
/// inside an out-of-order range, that range; then the range holding the most recently
/// received segment; then the other ranges, highest first (the most recently filled,
/// in a flow that keeps sending past a hole).
///
/// [`Assembler::ranges`]: crate::tcp::reassembly::Assembler::ranges
pub fn sack_blocks<I>(
    ranges: I,
    rcv_nxt: SeqNumber,
    last_received: Option<SeqRange>,
    dsack: Option<SeqRange>,
    max_blocks: usize,
    out: &mut [SeqRange; 4],
) -> usize
where
    I: IntoIterator<Item = (usize, usize)>,
    I::IntoIter: DoubleEndedIterator + Clone,
{
    let limit = max_blocks.min(out.len());
    let ranges = ranges
        .into_iter()
        .map(|(s, e)| (offset_seq(rcv_nxt, s), offset_seq(rcv_nxt, e)));
    let holding = |seq: SeqNumber| ranges.clone().find(|r| seq.in_range(r.0, r.1));
    let mut n = 0;
    // The D-SACK block is not deduplicated against the others: the range holding the
    // duplicate must follow it even when equal (RFC 2883 §4, the sender's "first block
    // inside the second" test).
    let mut first_plain = 0;
    let dsack = dsack.filter(|d| d.1 > d.0);
    if let Some(d) = dsack.filter(|_| limit > 0) {
        out[0] = d;
        n = 1;
        first_plain = 1;
    }
    let push = |b: SeqRange, out: &mut [SeqRange; 4], n: &mut usize| {
        if *n < limit && b.1 > b.0 && !out[first_plain..*n].contains(&b) {
            out[*n] = b;
            *n += 1;
        }
    };
    if let Some(r) = dsack.and_then(|d| holding(d.0)) {
        push(r, out, &mut n);
    }
    if let Some(r) = last_received.and_then(|l| holding(l.0)) {
        push(r, out, &mut n);
    }
    for r in ranges.clone().rev() {
        push(r, out, &mut n);
    }
    n
}

#[cfg(test)]
mod tests;
