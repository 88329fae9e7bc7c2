//! The send sequence space of one connection (RFC 9293 §3.3.1, figure 4): SND.UNA,
//! SND.NXT, SND.WND with the segment that last updated it (SND.WL1, SND.WL2), the ISS,
//! and the peer's MSS and window scale that bound what may be sent.
//!
//! Invariants, kept by the methods (checked with `debug_assert!`):
//! - `iss <= snd_una <= snd_nxt`, all within 2^31 of each other.
//! - `snd_una` only grows (an ACK moves it, RFC 9293 §3.10.7.4).
//! - `snd_nxt` only grows, with one exception: a window probe the peer answered without
//!   taking its byte is retracted (SND.NXT back to SND.UNA, see `retract_to_una`);
//!   retransmissions never move it (they use their own pointers in loss recovery).
//! - `max_snd_wnd` is the largest window the peer ever offered (RFC 5961 §5.2 uses it).

use ulnet_wire::SeqNumber;

use super::options::TS_OPTION_LEN;

/// The send sequence variables (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct SendSeq {
    iss: SeqNumber,
    una: SeqNumber,
    nxt: SeqNumber,
    wnd: u32,
    max_wnd: u32,
    wl1: SeqNumber,
    wl2: SeqNumber,
    /// The peer's MSS (RFC 9293 §3.7.1), never raised after the handshake.
    mss: u16,
    /// The peer's window scale shift (RFC 7323 §2.3).
    wscale: u8,
    /// Every segment carries timestamps (RFC 7323): they cost payload room.
    ts: bool,
}

impl SendSeq {
    /// Nothing sent yet: SND.UNA = SND.NXT = ISS.
    pub(crate) fn new(iss: SeqNumber, mss: u16) -> Self {
        SendSeq {
            iss,
            una: iss,
            nxt: iss,
            wnd: 0,
            max_wnd: 0,
            wl1: SeqNumber(0),
            wl2: iss,
            mss,
            wscale: 0,
            ts: false,
        }
    }

    /// ISS: our initial sequence number.
    #[inline]
    pub(crate) fn iss(&self) -> SeqNumber {
        self.iss
    }

    /// SND.UNA: the oldest unacknowledged sequence number.
    #[inline]
    pub(crate) fn una(&self) -> SeqNumber {
        self.una
    }

    /// SND.NXT: the next sequence number to send.
    #[inline]
    pub(crate) fn nxt(&self) -> SeqNumber {
        self.nxt
    }

    /// SND.WND: the peer's window, scaled.
    #[inline]
    pub(crate) fn wnd(&self) -> u32 {
        self.wnd
    }

    /// The largest window the peer ever offered.
    #[inline]
    pub(crate) fn max_wnd(&self) -> u32 {
        self.max_wnd
    }

    /// The shift applied to the peer's window field (RFC 7323 §2.3).
    #[inline]
    pub(crate) fn wscale(&self) -> u8 {
        self.wscale
    }

    /// The payload bytes of a full-sized segment: the peer's MSS less the options every
    /// segment carries (RFC 6691, RFC 9293 §3.7.1 Eff.snd.MSS).
    #[inline]
    pub(crate) fn data_mss(&self) -> u16 {
        let opt = if self.ts { TS_OPTION_LEN } else { 0 };
        self.mss.saturating_sub(opt).max(1)
    }

    /// Sequence space sent and not yet acknowledged (SND.NXT - SND.UNA).
    #[inline]
    pub(crate) fn in_flight(&self) -> u32 {
        self.nxt.distance_from(self.una)
    }

    /// The sequence number of a segment without data (a pure ACK, a RST): SND.NXT, or
    /// the right edge of the peer's window (SND.UNA + SND.WND) when the peer shrank its
    /// window below what we already sent. The receiver accepts a segment only if its
    /// sequence number lies in its window (RFC 9293 §3.10.7.4); a shrunken window
    /// (RFC 9293 §3.8.6 discourages it, window-scale rounding and Linux under memory
    /// pressure do it) would otherwise make every ACK we send unacceptable while the
    /// peer keeps retransmitting, waiting for one: a stall. Linux's
    /// `tcp_acceptable_seq` does the same, keeping SND.NXT while it is past the edge by
    /// less than one unit of the window's scale (the field's rounding).
    #[inline]
    pub(crate) fn acceptable_seq(&self) -> SeqNumber {
        let edge = self.una + self.wnd;
        // Before the peer offered any window (a hostile SYN with window 0) there is no
        // edge to honour.
        if self.max_wnd > 0 && self.nxt.diff(edge) >= 1i32 << self.wscale {
            edge
        } else {
            self.nxt
        }
    }

    /// Room the peer's window leaves past SND.NXT (SND.UNA + SND.WND - SND.NXT).
    #[inline]
    pub(crate) fn wnd_room(&self) -> u32 {
        (self.una + self.wnd).distance_from(self.nxt)
    }

    /// Sequence number of the first byte in the send buffer: the SYN takes ISS.
    #[inline]
    pub(crate) fn buf_start(&self) -> SeqNumber {
        if self.una == self.iss {
            self.iss + 1
        } else {
            self.una
        }
    }

    /// The handshake settled the peer's MSS, window scale and timestamps (RFC 9293
    /// §3.7.1, RFC 7323).
    pub(crate) fn set_negotiated(&mut self, mss: u16, wscale: u8, ts: bool) {
        self.mss = mss;
        self.wscale = wscale;
        self.ts = ts;
    }

    /// Lowers the MSS (a socket option or a smaller path MTU); returns whether it
    /// changed.
    pub(crate) fn clamp_mss(&mut self, mss: u16) -> bool {
        if self.mss > mss {
            self.mss = mss;
            return true;
        }
        false
    }

    /// The window of the peer's SYN or of the ACK that completes the handshake: the
    /// first one, so it is also the largest seen so far.
    pub(crate) fn init_window(&mut self, wnd: u32, wl1: SeqNumber, wl2: SeqNumber) {
        self.wnd = wnd;
        self.max_wnd = wnd;
        self.wl1 = wl1;
        self.wl2 = wl2;
    }

    /// RFC 9293 §3.10.7.4: a segment updates the send window only when it is newer than
    /// the one that last did (SND.WL1 < SEG.SEQ, or equal and SND.WL2 =< SEG.ACK).
    #[inline]
    pub(crate) fn window_update_allowed(&self, seq: SeqNumber, ack: SeqNumber) -> bool {
        self.wl1.diff(seq) < 0 || (self.wl1 == seq && self.wl2.diff(ack) <= 0)
    }

    /// Takes the window of an accepted newer segment (see `window_update_allowed`).
    pub(crate) fn update_window(&mut self, wnd: u32, seq: SeqNumber, ack: SeqNumber) {
        self.wnd = wnd;
        self.wl1 = seq;
        self.wl2 = ack;
        self.max_wnd = self.max_wnd.max(wnd);
    }

    /// An acceptable ACK moved SND.UNA to `ack` (checked against SND.NXT by the caller,
    /// RFC 5961 §5.2).
    #[inline]
    pub(crate) fn ack_to(&mut self, ack: SeqNumber) {
        debug_assert!(ack.diff(self.una) >= 0 && ack.diff(self.nxt) <= 0);
        self.una = ack;
    }

    /// A segment ending at `end` went out: SND.NXT moves up to it when it took new
    /// sequence space (a retransmission leaves it alone).
    #[inline]
    pub(crate) fn sent_to(&mut self, end: SeqNumber) {
        if end.diff(self.nxt) > 0 {
            self.nxt = end;
        }
    }

    /// The peer answered a window probe without taking its byte: SND.NXT goes back to
    /// SND.UNA (the one exception to "SND.NXT only grows", RFC 9293 §3.8.6.1; see
    /// `Socket::retract_probe`).
    pub(crate) fn retract_to_una(&mut self) {
        self.nxt = self.una;
    }
}
