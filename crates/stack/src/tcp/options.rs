//! Option negotiation on the handshake and the timestamp clock.
//!
//! Read first: RFC 9293 §3.7.1 (MSS), RFC 7323 §2 (window scale), §3 and §5 (timestamps,
//! PAWS), RFC 2018 §2 (SACK-permitted), RFC 6691 (MSS and options).
//!
//! An option is in force only when both SYNs carried it (RFC 7323 §2.2, §3.2; RFC 2018 §2);
//! a SYN-ACK echoes only what the SYN offered.

use ulnet_wire::{TcpOptions, TcpTimestamp};

use crate::time::Instant;

/// The largest shift RFC 7323 §2.3 allows.
pub(crate) const MAX_WSCALE: u8 = 14;

/// Bytes the timestamps option takes in every segment once negotiated (with its NOP
/// padding): the sender leaves that much room in each segment (RFC 6691).
pub(crate) const TS_OPTION_LEN: u16 = 12;

/// The MSS assumed when the peer sends none (RFC 9293 §3.7.1: 536 for IPv4, RFC 8200
/// §5: 1220 for IPv6).
pub(crate) fn default_mss(ipv6: bool) -> u16 {
    if ipv6 {
        1220
    } else {
        536
    }
}

/// The shift that lets a window of `buffer_len` bytes fit the 16-bit field.
pub(crate) fn wscale_for(buffer_len: usize) -> u8 {
    let mut shift = 0u8;
    while shift < MAX_WSCALE && (buffer_len >> shift) > u16::MAX as usize {
        shift += 1;
    }
    shift
}

/// What we offer on our SYN (or may echo on a SYN-ACK).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offer {
    /// Our MSS (from the path MTU).
    pub mss: u16,
    /// Our receive window shift, if scaling is enabled.
    pub wscale: Option<u8>,
    /// Timestamps enabled.
    pub timestamps: bool,
    /// SACK enabled.
    pub sack: bool,
}

/// The options both sides agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// The peer's MSS, clamped to our path MSS.
    pub snd_mss: u16,
    /// Shift applied to windows the peer sends us.
    pub snd_wscale: u8,
    /// Shift applied to windows we send.
    pub rcv_wscale: u8,
    /// Both SYNs carried the window scale option.
    pub window_scaling: bool,
    /// Timestamps in force.
    pub timestamps: bool,
    /// SACK in force.
    pub sack: bool,
}

impl Offer {
    /// The options for our SYN (active open) or SYN-ACK (`peer` = the SYN's options).
    pub(crate) fn syn_options(&self, tsval: u32, peer: Option<&TcpOptions>) -> TcpOptions {
        let mut o = TcpOptions::none();
        o.mss = Some(self.mss);
        let (ws, ts, sack) = match peer {
            None => (self.wscale, self.timestamps, self.sack),
            Some(p) => (
                self.wscale.filter(|_| p.window_scale.is_some()),
                self.timestamps && p.timestamp.is_some(),
                self.sack && p.sack_permitted,
            ),
        };
        o.window_scale = ws;
        o.sack_permitted = sack;
        if ts {
            let tsecr = peer.and_then(|p| p.timestamp).map_or(0, |t| t.tsval);
            o.timestamp = Some(TcpTimestamp { tsval, tsecr });
        }
        o
    }

    /// Combines our offer with the peer's SYN options.
    pub(crate) fn negotiate(&self, peer: &TcpOptions, ipv6: bool) -> Negotiated {
        let peer_mss = peer.mss.filter(|&m| m > 0).unwrap_or(default_mss(ipv6));
        let (snd_wscale, rcv_wscale, window_scaling) = match (self.wscale, peer.window_scale) {
            // RFC 7323 §2.3: a shift above 14 is logged and treated as 14.
            (Some(ours), Some(theirs)) => (theirs.min(MAX_WSCALE), ours, true),
            _ => (0, 0, false),
        };
        Negotiated {
            // RFC 9293 §3.7.1: never send more than the peer's MSS nor more than our path.
            snd_mss: peer_mss.min(self.mss).max(64),
            snd_wscale,
            rcv_wscale,
            window_scaling,
            timestamps: self.timestamps && peer.timestamp.is_some(),
            sack: self.sack && peer.sack_permitted,
        }
    }
}

/// The timestamp clock: milliseconds (RFC 7323 §5.4 wants 1 ms to 1 s per tick) plus a
/// per-connection offset so TSval does not reveal uptime or link connections (RFC 7323
/// §7.1).
#[inline]
pub(crate) fn ts_clock(now: Instant, offset: u32) -> u32 {
    (now.total_millis() as u32).wrapping_add(offset)
}

/// `a < b` on the 32-bit timestamp circle (RFC 7323 §5.2).
#[inline]
pub(crate) fn ts_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wscale_fits_buffer() {
        assert_eq!(wscale_for(65535), 0);
        assert_eq!(wscale_for(65536), 1);
        assert_eq!(wscale_for(256 * 1024), 3);
        assert_eq!(wscale_for(usize::MAX), 14);
    }

    #[test]
    fn negotiation_needs_both_sides() {
        let offer = Offer {
            mss: 1460,
            wscale: Some(7),
            timestamps: true,
            sack: true,
        };
        let mut peer = TcpOptions::none();
        peer.mss = Some(9000);
        let n = offer.negotiate(&peer, false);
        assert_eq!(n.snd_mss, 1460);
        assert_eq!((n.snd_wscale, n.rcv_wscale), (0, 0));
        assert!(!n.timestamps && !n.sack);
        peer.window_scale = Some(20);
        peer.sack_permitted = true;
        peer.timestamp = Some(TcpTimestamp { tsval: 5, tsecr: 0 });
        peer.mss = None;
        let n = offer.negotiate(&peer, false);
        assert_eq!(n.snd_mss, 536);
        assert_eq!((n.snd_wscale, n.rcv_wscale), (14, 7));
        assert!(n.timestamps && n.sack);
        let synack = offer.syn_options(77, Some(&peer));
        assert_eq!(
            synack.timestamp,
            Some(TcpTimestamp {
                tsval: 77,
                tsecr: 5
            })
        );
        assert_eq!(synack.window_scale, Some(7));
        let bare = offer.syn_options(1, Some(&TcpOptions::none()));
        assert_eq!(bare.window_scale, None);
        assert!(bare.timestamp.is_none() && !bare.sack_permitted);
    }

    #[test]
    fn timestamp_order_wraps() {
        assert!(ts_before(u32::MAX, 1));
        assert!(!ts_before(1, u32::MAX));
        assert_eq!(ts_clock(Instant::from_millis(10), u32::MAX), 9);
    }
}
