//! A listener under a SYN flood (RFC 4987): early eviction from a full SYN queue and SYN
//! cookies (`tcp/cookie.rs`).
//!
//! Read first: RFC 4987 §3.4 (eviction of the oldest half-open connection), §3.6 (SYN
//! cookies), RFC 9293 §3.10.7.2 (a listener's answers).
//!
//! A SYN that finds the SYN queue full first evicts the oldest half-open connection if
//! its SYN-ACK was already retransmitted; otherwise (and for every SYN in
//! [`SynCookies::Always`] mode) it is answered with a cookie SYN-ACK straight from
//! `process`, and nothing is allocated or stored. An ACK that matches no connection, on
//! a listener in cookie mode, is checked as a cookie: a genuine one creates the
//! connection in SYN-RECEIVED with the options it carried, and the ACK itself then
//! completes the handshake through the ordinary rules; a bad one is counted and answered
//! with the RST any ACK to a listener gets.

use super::*;

use crate::tcp::config::SynCookies;
use crate::tcp::config::{mss_for_mtu, SocketOption};
use crate::tcp::cookie::{self, CookieJar, TsOptions};
use crate::tcp::options::{default_mss, wscale_for, Offer};
use crate::time::Duration;

impl Tcp {
    /// True when ACKs for no connection on listener `li` are to be checked as cookies: in
    /// `Always` mode, or within two cookie periods of the SYN queue last being full (a
    /// cookie sent then is still valid; Linux's `tcp_synq_no_recent_overflow`).
    pub(super) fn cookie_mode(&self, li: u32, now: Instant) -> bool {
        let Some(l) = self.listeners[li as usize].listener.as_ref() else {
            return false;
        };
        match self.cfg.syn_cookies {
            SynCookies::Never => false,
            SynCookies::Always => true,
            SynCookies::WhenFull => l.last_overflow.is_some_and(|t| {
                let valid = Duration::from_secs(cookie::PERIOD_SECS * u64::from(cookie::MAX_AGE));
                now.saturating_duration_since(t) <= valid
            }),
        }
    }

    /// What a connection from listener `li` to the peer of `tuple` offers on its SYN-ACK,
    /// and the receive buffer it starts with: the engine's defaults with the listener's options
    /// applied as `Socket::set_option` applies them before the SYN (so a cookie SYN-ACK
    /// and the connection later built from it agree).
    fn listener_offer(&self, li: u32, tuple: &FourTuple) -> (Offer, usize) {
        let ipv6 = tuple.local().is_ipv6();
        let mut mss = mss_for_mtu(self.mtu_for(tuple.remote().ip()), ipv6);
        // The window scale follows the largest receive buffer; the SYN-ACK's window the
        // buffer a connection starts with (`TcpConfig::starting_buffers`).
        let mut rbuf = self.cfg.recv_buffer_len;
        let mut start = self.cfg.starting_buffers(self.mem.under_pressure()).1;
        let opts = self.listeners[li as usize]
            .listener
            .as_ref()
            .map_or(&[][..], |l| &l.options[..]);
        for o in opts {
            match *o {
                SocketOption::RecvBuffer(n) => {
                    rbuf = n.max(1);
                    start = rbuf;
                }
                SocketOption::MaxSegment(m) => mss = mss.min(m.max(88)),
                _ => {}
            }
        }
        let offer = Offer {
            mss,
            wscale: self.cfg.window_scaling.then(|| wscale_for(rbuf)),
            timestamps: self.cfg.timestamps,
            sack: self.cfg.sack,
        };
        (offer, start)
    }

    /// Makes room in listener `li`'s full SYN queue: evicts the oldest half-open
    /// connection if its SYN-ACK was retransmitted (RFC 4987 §3.4). Half-open connections
    /// all start with the same RTO (no RTT sample yet), so they retransmit in arrival
    /// order: when the oldest has not, none has. Stale entries are dropped on the way.
    /// The evicted connection goes silently (no RST towards a likely spoofed source).
    pub(super) fn evict_oldest_syn(&mut self, li: u32, now: Instant) -> bool {
        let lgen = self.listeners[li as usize].generation;
        loop {
            let Some(l) = self.listeners[li as usize].listener.as_mut() else {
                return false;
            };
            let Some(&h) = l.syn_order.front() else {
                return false;
            };
            let slot = &mut self.slots[h.index as usize];
            let live = slot.generation == h.generation
                && slot.in_syn_queue
                && slot.sock.as_ref().is_some_and(|s| {
                    s.origin()
                        .is_some_and(|o| o.index == li && o.generation == lgen)
                });
            if !live {
                l.syn_order.pop_front();
                continue;
            }
            let Some(sock) = slot.sock.as_mut() else {
                return false;
            };
            if !sock.syn_retransmitted() {
                return false;
            }
            l.syn_order.pop_front();
            sock.set_closed(None);
            self.stats.syn_queue_evictions += 1;
            self.settle(h.index, now, None);
            return true;
        }
    }

    /// Records a new half-open connection in its listener's arrival order, dropping stale
    /// entries when the list outgrows twice the SYN queue (so it stays bounded).
    pub(super) fn note_syn_order(&mut self, li: u32, h: SocketHandle) {
        let limit = self.cfg.syn_queue_len.saturating_mul(2).max(16);
        let lgen = self.listeners[li as usize].generation;
        let slots = &self.slots;
        let Some(l) = self.listeners[li as usize].listener.as_mut() else {
            return;
        };
        l.syn_order.push_back(h);
        if l.syn_order.len() > limit {
            l.syn_order.retain(|h| {
                let s = &slots[h.index as usize];
                s.generation == h.generation
                    && s.in_syn_queue
                    && s.sock
                        .as_ref()
                        .and_then(|s| s.origin())
                        .is_some_and(|o| o.index == li && o.generation == lgen)
            });
        }
    }

    /// Whether `src` holds [`ListenerLimits::per_source`](crate::tcp::ListenerLimits)
    /// un-accepted connections of listener `li` already: counted over its SYN queue
    /// (live SYN-RECEIVED connections of its arrival list) and its accept queue, stopping
    /// at the bound. No allocation; only listeners that set the bound pay the scan.
    pub(super) fn source_over_limit(&self, li: u32, src: IpAddr) -> bool {
        let ls = &self.listeners[li as usize];
        let Some(l) = ls.listener.as_ref() else {
            return false;
        };
        let Some(max) = l.limits.per_source else {
            return false;
        };
        let lgen = ls.generation;
        let from_src = |h: &SocketHandle, half_open: bool| {
            self.slots.get(h.index as usize).is_some_and(|slot| {
                slot.generation == h.generation
                    && slot.sock.as_ref().is_some_and(|s| {
                        s.tuple().remote().ip() == src
                            && (!half_open
                                || (s.state() == State::SynReceived
                                    && s.origin()
                                        .is_some_and(|o| o.index == li && o.generation == lgen)))
                    })
            })
        };
        let mut n = 0;
        for h in &l.accept_queue {
            if from_src(h, false) {
                n += 1;
                if n >= max {
                    return true;
                }
            }
        }
        for h in &l.syn_order {
            if from_src(h, true) {
                n += 1;
                if n >= max {
                    return true;
                }
            }
        }
        max == 0
    }

    /// Answers `syn` on listener `li` with a cookie SYN-ACK, keeping nothing.
    pub(super) fn send_cookie(
        &mut self,
        li: u32,
        now: Instant,
        tuple: &FourTuple,
        syn: &TcpRepr<'_>,
        out: &mut dyn FnMut(IpAddr, IpAddr, &TcpRepr<'_>),
    ) {
        let ipv6 = tuple.local().is_ipv6();
        let (offer, rbuf) = self.listener_offer(li, tuple);
        let peer = &syn.options;
        let peer_mss = peer.mss.filter(|&m| m > 0).unwrap_or(default_mss(ipv6));
        let idx = cookie::mss_index(peer_mss, ipv6);
        let iss = self
            .cookies
            .make(tuple, syn.seq, CookieJar::count(now), idx);
        let mut options = TcpOptions::none();
        options.mss = Some(offer.mss);
        // Window scale and SACK travel in the timestamp: without timestamps the cookie
        // cannot carry them, so they are not offered (as Linux does).
        if let Some(ts) = peer.timestamp.filter(|_| offer.timestamps) {
            let wscale = offer.wscale.filter(|_| peer.window_scale.is_some());
            let sack = offer.sack && peer.sack_permitted;
            options.window_scale = wscale;
            options.sack_permitted = sack;
            let carried = TsOptions {
                wscale: peer.window_scale.filter(|_| wscale.is_some()),
                sack,
            };
            let clock = ts_clock(now, self.ts_offset(tuple));
            options.timestamp = Some(TcpTimestamp {
                tsval: cookie::encode_ts(clock, carried),
                tsecr: ts.tsval,
            });
        }
        let synack = TcpRepr {
            src_port: syn.dst_port,
            dst_port: syn.src_port,
            seq: iss,
            ack: syn.seq + 1,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            // RFC 7323 §2.2: never scaled in a SYN; what the connection built from the
            // cookie will believe it advertised (`Socket::open_from_cookie`).
            window: rbuf.min(usize::from(u16::MAX)) as u16,
            urgent: 0,
            options,
            payload: &[],
            payload_rest: &[],
        };
        self.stats.syn_cookies_sent += 1;
        self.stats.segs_out += 1;
        out(tuple.local().ip(), tuple.remote().ip(), &synack);
    }

    /// An ACK for no connection on listener `li` in cookie mode. True when it carried a
    /// genuine cookie (the connection is created, or the ACK dropped when the accept
    /// queue or the table is full: the peer retransmits); false when the cookie is bad
    /// (counted; the caller answers with a RST).
    pub(super) fn cookie_ack(
        &mut self,
        li: u32,
        now: Instant,
        tuple: FourTuple,
        seg: &TcpRepr<'_>,
        out: &mut dyn FnMut(IpAddr, IpAddr, &TcpRepr<'_>),
    ) -> bool {
        let ipv6 = tuple.local().is_ipv6();
        let irs = seg.seq - 1;
        let iss = seg.ack - 1;
        let Some(idx) = self.cookies.check(&tuple, irs, iss, CookieJar::count(now)) else {
            self.stats.syn_cookies_failed += 1;
            return false;
        };
        let (offer, _) = self.listener_offer(li, &tuple);
        let mut peer = TcpOptions::none();
        peer.mss = Some(cookie::mss_table(ipv6)[usize::from(idx)]);
        let mut ack = *seg;
        if let Some(ts) = seg.options.timestamp.filter(|_| offer.timestamps) {
            // The echo must be a TSval we could have sent for this cookie: not ahead of
            // our clock, not older than the cookie's life (stricter than Linux).
            let clock = ts_clock(now, self.ts_offset(&tuple));
            let life_ms = cookie::PERIOD_SECS * u64::from(cookie::MAX_AGE) * 1000 + 64;
            let behind = clock.wrapping_sub(ts.tsecr);
            let Some(carried) =
                cookie::decode_ts(ts.tsecr).filter(|_| u64::from(behind) <= life_ms)
            else {
                self.stats.syn_cookies_failed += 1;
                return false;
            };
            peer.window_scale = carried.wscale;
            peer.sack_permitted = carried.sack;
            peer.timestamp = Some(TcpTimestamp {
                tsval: ts.tsval,
                tsecr: 0,
            });
            // TSecr holds the cookie's option bits, not a send time: no RTT sample from it
            // (RFC 7323 §4.1 RTTM needs the TSval we sent).
            ack.options.timestamp = Some(TcpTimestamp {
                tsval: ts.tsval,
                tsecr: 0,
            });
        }
        let generation = self.listeners[li as usize].generation;
        let Some(l) = self.listeners[li as usize].listener.as_ref() else {
            return true;
        };
        if l.accept_queue_full() {
            self.stats.accept_queue_overflows += 1;
            return true;
        }
        // A cookie keeps nothing, so the listener's limits are checked again here: a
        // genuine cookie over them is dropped like one over a full accept queue.
        if l.pending_full() {
            self.stats.listen_pending_refused += 1;
            return true;
        }
        if self.source_over_limit(li, tuple.remote().ip()) {
            self.stats.listen_source_refused += 1;
            return true;
        }
        if self.table.is_full() {
            self.stats.table_full += 1;
            return true;
        }
        if self.mem.exhausted() {
            // Past the hard memory limit no connection is created, cookie or not.
            self.stats.mem_refused += 1;
            return true;
        }
        let n = offer.negotiate(&peer, ipv6);
        let mut sock = self.new_socket_with_iss(tuple, iss, now);
        for &o in &l.options {
            // Before the handshake every option applies (the buffers are empty).
            let _ = sock.set_option(o, now, &mut self.mem);
        }
        let origin = ListenerHandle {
            index: li,
            generation,
        };
        sock.open_from_cookie(now, irs, peer.timestamp.map(|t| t.tsval), n, origin);
        let idx = self.insert_socket(sock);
        let h = self.handle_of(idx);
        self.slots[idx as usize].in_syn_queue = true;
        if let Some(l) = self.listeners[li as usize].listener.as_mut() {
            l.syn_count += 1;
        }
        let (src, dst) = (tuple.remote().ip(), tuple.local().ip());
        let mut replies = 0u64;
        let mut reply = |r: &TcpRepr<'_>| {
            replies += 1;
            out(dst, src, r);
        };
        self.socket_input(idx, now, &ack, &mut reply);
        self.stats.segs_out += replies;
        let slot = &mut self.slots[idx as usize];
        if slot.generation == h.generation {
            if let Some(s) = slot.sock.as_mut() {
                if s.state() == State::SynReceived {
                    // The ACK did not complete the handshake (refused by a later rule):
                    // nothing would ever retransmit the SYN-ACK, so do not keep it.
                    s.set_closed(None);
                    self.settle(idx, now, None);
                    self.stats.syn_cookies_failed += 1;
                    return true;
                }
            }
        }
        self.stats.syn_cookies_accepted += 1;
        true
    }
}
