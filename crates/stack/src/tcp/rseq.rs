//! The receive sequence space of one connection (RFC 9293 §3.3.1, figure 5): IRS,
//! RCV.NXT, the right edge of the window we advertised (RCV.NXT + RCV.WND as last sent),
//! our window scale, the last ACK we sent (RFC 7323 §4.3 Last.ACK.sent), the largest
//! segment seen from the peer and the peer's FIN seen beyond a hole; and the rules for
//! the window we offer.
//!
//! What it does not own: the receive buffer and the assembler (the socket's receive
//! half, `socket/recv.rs`). The window rules take what they need of them as numbers
//! ([`RecvRoom`]), so this part knows neither.
//!
//! Invariants, kept by the methods:
//! - `nxt` only advances once synchronized (`advance`, `take_fin`); `sync` sets it once
//!   from the peer's SYN.
//! - The advertised right edge `adv` never moves left (RFC 9293 §3.8.6, RFC 7323 §2.4):
//!   `take_window_field` only raises it. The one way back is [`RecvSeq::unsend`], which
//!   undoes a `take_window_field` whose segment never reached the wire (its edge was
//!   never advertised).
//! - `wnd_max` is the largest window ever offered (`adv - nxt` right after a window field
//!   was taken), for the window-update rule.
//! - `mss` only grows (the largest payload seen).

use ulnet_wire::SeqNumber;

/// What the window rules need of the receive buffer and the negotiated options, as
/// numbers (see [`RecvSeq::window_to_advertise`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecvRoom {
    /// The most the receive buffer could take after RCV.NXT (RCV.BUFF - RCV.USER).
    pub space: u32,
    /// The receive buffer's size (RCV.BUFF).
    pub buff: u32,
    /// The peer's Eff.snd.MSS as the receiver sees it (RFC 9293 §3.7.1).
    pub eff_mss: u32,
}

/// The advertised right edge before a window field was taken, to give back with
/// [`RecvSeq::unsend`] when the segment carrying that field is not sent.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub(crate) struct AdvMark(SeqNumber);

/// The receive sequence variables (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct RecvSeq {
    irs: SeqNumber,
    nxt: SeqNumber,
    /// Right edge of the window we last advertised (never moved left, RFC 9293 §3.8.6).
    adv: SeqNumber,
    /// The largest window ever offered (RCV.ADV - RCV.NXT), for the window-update rule.
    wnd_max: u32,
    /// Our window scale shift (RFC 7323 §2.3), applied to the fields we send.
    wscale: u8,
    /// RCV.NXT as carried by the last ACK we sent (RFC 7323 §4.3 Last.ACK.sent).
    last_ack_sent: SeqNumber,
    /// Largest segment payload seen from the peer (for "every second full-sized segment").
    mss: u16,
    /// The peer's FIN, seen beyond a hole; processed when `nxt` reaches it.
    fin_seq: Option<SeqNumber>,
}

impl RecvSeq {
    /// Nothing received yet; `mss` is the first guess at the peer's segment size.
    pub(crate) fn new(mss: u16) -> Self {
        RecvSeq {
            irs: SeqNumber(0),
            nxt: SeqNumber(0),
            adv: SeqNumber(0),
            wnd_max: 0,
            wscale: 0,
            last_ack_sent: SeqNumber(0),
            mss,
            fin_seq: None,
        }
    }

    /// IRS: the peer's initial sequence number.
    #[inline]
    pub(crate) fn irs(&self) -> SeqNumber {
        self.irs
    }

    /// RCV.NXT: the next sequence number expected from the peer.
    #[inline]
    pub(crate) fn nxt(&self) -> SeqNumber {
        self.nxt
    }

    /// RCV.NXT as carried by the last ACK we sent (RFC 7323 §4.3 Last.ACK.sent).
    #[inline]
    pub(crate) fn last_ack_sent(&self) -> SeqNumber {
        self.last_ack_sent
    }

    /// Our window scale shift (RFC 7323 §2.3).
    #[inline]
    pub(crate) fn wscale(&self) -> u8 {
        self.wscale
    }

    /// The largest segment payload seen from the peer.
    #[inline]
    pub(crate) fn mss(&self) -> u16 {
        self.mss
    }

    /// The window currently offered to the peer: up to the advertised right edge.
    #[inline]
    pub(crate) fn wnd(&self) -> u32 {
        self.adv.distance_from(self.nxt)
    }

    /// The peer's SYN (RFC 9293 §3.10.7.2, §3.10.7.3): IRS = SEG.SEQ, RCV.NXT = SEG.SEQ +
    /// 1, and nothing advertised beyond it yet.
    pub(crate) fn sync(&mut self, irs: SeqNumber) {
        self.irs = irs;
        self.nxt = irs + 1;
        self.adv = self.nxt;
    }

    /// The handshake settled our window scale (RFC 7323 §2.3).
    pub(crate) fn set_wscale(&mut self, wscale: u8) {
        self.wscale = wscale;
    }

    /// A segment with `len` payload bytes arrived: the largest seen grows.
    #[inline]
    pub(crate) fn note_segment_len(&mut self, len: usize) {
        if len > usize::from(self.mss) {
            self.mss = len.min(usize::from(u16::MAX)) as u16;
        }
    }

    /// `n` bytes were taken in order: RCV.NXT moves past them.
    #[inline]
    pub(crate) fn advance(&mut self, n: u32) {
        self.nxt += n;
    }

    /// More than one full-sized segment arrived since our last ACK (RFC 5681 §4.2: ACK at
    /// least every second one).
    #[inline]
    pub(crate) fn unacked_over_mss(&self) -> bool {
        self.nxt.distance_from(self.last_ack_sent) > u32::from(self.mss)
    }

    /// So many bytes arrived since our last ACK that the ACK cannot wait for the end of
    /// the receive batch: a quarter of the largest window we offered, and at least two
    /// full segments.
    #[inline]
    pub(crate) fn unacked_over_stretch(&self) -> bool {
        let limit = (self.wnd_max / 4).max(2 * u32::from(self.mss));
        self.nxt.distance_from(self.last_ack_sent) >= limit
    }

    /// A segment carrying ACK = RCV.NXT is going out.
    #[inline]
    pub(crate) fn note_ack_sent(&mut self) {
        self.last_ack_sent = self.nxt;
    }

    /// The peer's FIN takes sequence number `at`, at or beyond RCV.NXT: it is processed
    /// once RCV.NXT reaches it ([`RecvSeq::fin_reached`]).
    pub(crate) fn note_fin(&mut self, at: SeqNumber) {
        debug_assert!(at.diff(self.nxt) >= 0);
        self.fin_seq = Some(at);
    }

    /// Every byte before the peer's FIN has arrived.
    #[inline]
    pub(crate) fn fin_reached(&self) -> bool {
        self.fin_seq == Some(self.nxt)
    }

    /// The peer's FIN is taken in sequence (RFC 9293 §3.10.7.4 eighth): it occupies one
    /// sequence number.
    pub(crate) fn take_fin(&mut self) {
        self.nxt += 1;
        self.fin_seq = None;
    }

    /// RFC 9293 §3.10.7.4 "first": is a segment of `len` sequence numbers from `seq`
    /// (partly) inside a receive window of `wnd` bytes from RCV.NXT?
    #[inline]
    pub(crate) fn acceptable(&self, seq: SeqNumber, len: u32, wnd: u32) -> bool {
        acceptable(seq, len, self.nxt, wnd)
    }

    /// The receive window to advertise now, with receiver-side silly window syndrome
    /// avoidance (RFC 1122 §4.2.3.3, RFC 9293 §3.8.6.2.2): the window offered is
    /// RCV.BUFF - RCV.USER only when that moves the right edge we last advertised by at
    /// least min(RCV.BUFF/2, Eff.snd.MSS); otherwise the old edge stays. The edge never
    /// moves left (RFC 9293 §3.8.6).
    #[inline]
    pub(crate) fn window_to_advertise(&self, room: RecvRoom) -> u32 {
        let cur = self.wnd();
        let threshold = (room.buff / 2).min(room.eff_mss);
        let wnd = if room.space >= cur.saturating_add(threshold) {
            room.space
        } else {
            cur
        };
        let max = u32::from(u16::MAX) << self.wscale;
        wnd.min(max)
    }

    /// The edge as it is now, before `take_window_field`, for [`RecvSeq::unsend`].
    #[inline]
    pub(crate) fn mark(&self) -> AdvMark {
        AdvMark(self.adv)
    }

    /// The segment whose window field was taken after `mark` did not go out: the edge it
    /// recorded was never advertised, so it goes back to where it was.
    #[inline]
    pub(crate) fn unsend(&mut self, mark: AdvMark) {
        debug_assert!(mark.0.diff(self.adv) <= 0);
        self.adv = mark.0;
    }

    /// The window field for an outgoing segment; records the advertised edge.
    pub(crate) fn take_window_field(&mut self, syn: bool, room: RecvRoom) -> u16 {
        let wnd = self.window_to_advertise(room);
        if syn {
            // RFC 7323 §2.2: the window in a SYN is never scaled.
            let w = wnd.min(u32::from(u16::MAX));
            self.adv = self.nxt + w;
            self.wnd_max = self.wnd_max.max(w);
            return w as u16;
        }
        let shift = self.wscale;
        // Round down: the peer may send up to the field times 2^shift, so rounding up would
        // offer bytes the buffer cannot hold and the tail of a window-filling segment would
        // be trimmed and resent (seen with 9000-byte segments: 4 bytes cut from a segment
        // that filled a 2656-byte window, then 13 duplicate ACKs until the peer resent
        // them). An edge already offered stays ours to honour (`adv` keeps it) even when
        // the rounded field shows it up to 2^shift - 1 bytes short: RFC 7323 §2.4 expects
        // that apparent shrinking and senders tolerate it.
        let field = (wnd >> shift).min(u32::from(u16::MAX));
        let edge = self.nxt + (field << shift);
        if edge.diff(self.adv) > 0 {
            self.adv = edge;
        }
        self.wnd_max = self.wnd_max.max(self.wnd());
        field as u16
    }

    /// The receiver's half of "is a window update due" (see
    /// `Socket::window_update_due`): the window still offered has fallen to half the
    /// largest one ever offered and the new one is at least twice as large.
    #[inline]
    pub(crate) fn window_update_due(&self, room: RecvRoom) -> bool {
        let cur = self.wnd();
        let new = self.window_to_advertise(room);
        new > cur && cur.saturating_mul(2) <= self.wnd_max && new >= cur.saturating_mul(2)
    }
}

/// RFC 9293 §3.10.7.4 "first": is the segment (partly) inside the receive window?
fn acceptable(seq: SeqNumber, len: u32, rcv_nxt: SeqNumber, wnd: u32) -> bool {
    let end = rcv_nxt + wnd;
    match (len, wnd) {
        (0, 0) => seq == rcv_nxt,
        (0, _) => seq.in_range(rcv_nxt, end),
        (_, 0) => false,
        (_, _) => seq.in_range(rcv_nxt, end) || (seq + (len - 1)).in_range(rcv_nxt, end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acceptability_four_cases() {
        let r = SeqNumber(u32::MAX - 5);
        assert!(acceptable(r, 0, r, 0));
        assert!(!acceptable(r + 1, 0, r, 0));
        assert!(acceptable(r + 9, 0, r, 10));
        assert!(!acceptable(r + 10, 0, r, 10));
        assert!(!acceptable(r, 5, r, 0));
        assert!(acceptable(r - 3, 5, r, 10));
        assert!(!acceptable(r - 5, 5, r, 10));
        assert!(acceptable(r + 9, 100, r, 10));
        assert!(!acceptable(r + 10, 100, r, 10));
    }

    fn room(space: u32) -> RecvRoom {
        RecvRoom {
            space,
            buff: 65_535,
            eff_mss: 1460,
        }
    }

    #[test]
    fn edge_never_moves_left() {
        let mut r = RecvSeq::new(536);
        r.sync(SeqNumber(1000));
        assert_eq!(r.take_window_field(false, room(10_000)), 10_000);
        assert_eq!(r.wnd(), 10_000);
        // The buffer filled without a read: the window offered shrinks only as RCV.NXT
        // moves, the edge stays.
        r.advance(4000);
        r.take_window_field(false, room(0));
        assert_eq!(r.wnd(), 6000);
    }

    /// With a window scale the field is rounded down, so the peer is never offered a byte
    /// the buffer cannot hold; an edge already offered stays recorded.
    #[test]
    fn scaled_field_never_offers_more_than_the_room() {
        let mut r = RecvSeq::new(8948);
        r.sync(SeqNumber(1000));
        r.set_wscale(3);
        // 2652 bytes of room: 331 units of 8 offer 2648, never 332 (2656).
        let field = r.take_window_field(false, room(2652));
        assert_eq!(field, 331);
        assert!(u32::from(field) << 3 <= 2652);
        assert_eq!(r.wnd(), 2648);
        // Room below one unit: a zero window, not one unit the buffer lacks.
        let mut z = RecvSeq::new(8948);
        z.sync(SeqNumber(0));
        z.set_wscale(3);
        assert_eq!(z.take_window_field(false, room(7)), 0);
        // An edge offered unscaled (the SYN-ACK) at an odd offset is not taken back.
        let mut e = RecvSeq::new(536);
        e.sync(SeqNumber(0));
        e.take_window_field(true, room(10_003));
        e.set_wscale(3);
        assert_eq!(e.take_window_field(false, room(10_003)), 1250);
        assert_eq!(e.wnd(), 10_003);
    }

    #[test]
    fn unsent_field_gives_the_edge_back() {
        let mut r = RecvSeq::new(536);
        r.sync(SeqNumber(7));
        let m = r.mark();
        r.take_window_field(true, room(20_000));
        assert_eq!(r.wnd(), 20_000);
        r.unsend(m);
        assert_eq!(r.wnd(), 0);
    }

    #[test]
    fn fin_waits_for_the_hole() {
        let mut r = RecvSeq::new(536);
        r.sync(SeqNumber(0));
        r.note_fin(SeqNumber(11));
        assert!(!r.fin_reached());
        r.advance(10);
        assert!(r.fin_reached());
        r.take_fin();
        assert_eq!(r.nxt(), SeqNumber(12));
        assert!(!r.fin_reached());
    }
}
