//! A listener under a SYN flood (issue 13 item 1): SYN cookies (RFC 4987 §3.6) with
//! Linux's option encoding, strict validation, early eviction of half-open connections
//! that retransmitted their SYN-ACK, and real clients served during a flood.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use ulnet_wire::{TcpFlags, TcpRepr};

use super::harness::*;
use super::loopback::{pattern, Rng};
use crate::tcp::{ListenerHandle, State, SynCookies, Tcp, TcpConfig};
use crate::time::{Duration, Instant};

fn small_queue(cfg: TcpConfig, n: usize) -> TcpConfig {
    TcpConfig {
        syn_queue_len: n,
        ..cfg
    }
}

/// Fills the SYN queue of a listener with `n` half-open connections from other ports of
/// the peer; the harness's own remote is left free.
fn fill_syn_queue(h: &mut Harness, n: u16) {
    let me = h.remote;
    for i in 0..n {
        h.remote = SocketAddr::new(me.ip(), 20000 + i);
        h.send(h.peer().seq(7).flags(TcpFlags::SYN));
        let sa = h.out1();
        assert!(sa.has(TcpFlags::SYN | TcpFlags::ACK));
    }
    h.remote = me;
}

/// The peer's SYN from the harness remote; returns the SYN-ACK, which must come straight
/// from `process` (a cookie, nothing queued).
fn cookie_synack(h: &mut Harness, syn: impl FnOnce(Seg) -> Seg) -> Seg {
    let before = h.tcp.connection_count();
    h.send(syn(h.peer()).flags(TcpFlags::SYN));
    assert_eq!(h.pending.len(), 1, "the cookie SYN-ACK is a direct reply");
    let sa = h.out1();
    assert_eq!(sa.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(h.tcp.connection_count(), before, "a cookie keeps no state");
    sa
}

/// The one direct reply `process` gave to the last segment (timers are not run).
fn reply(h: &mut Harness) -> Seg {
    let v = std::mem::take(&mut h.pending);
    assert_eq!(v.len(), 1, "expected one reply, got {v:#?}");
    v.into_iter().next().unwrap()
}

fn accept1(h: &mut Harness, l: ListenerHandle) -> crate::tcp::SocketHandle {
    h.tcp
        .accept(h.now, l)
        .unwrap()
        .expect("a connection to accept")
}

#[test]
fn full_syn_queue_answers_with_a_cookie_that_opens_the_connection() {
    let mut h = Harness::new(small_queue(plain_config(), 2));
    let l = h.listen();
    fill_syn_queue(&mut h, 2);
    let sa = cookie_synack(&mut h, |p| p.seq(1000).mss(1460));
    assert_eq!(sa.ack, 1001);
    assert_eq!(sa.options.mss, Some(1460));
    assert_eq!(sa.window, 65535);
    let st = h.tcp.stats();
    assert_eq!((st.syn_queue_overflows, st.syn_cookies_sent), (1, 1));

    // The ACK returns the cookie, with data: the connection is created established and
    // takes the data.
    h.send(
        h.peer()
            .seq(1001)
            .ack(sa.seq.wrapping_add(1))
            .data(b"hello"),
    );
    assert!(h.pending.is_empty(), "no RST for a genuine cookie");
    let s = accept1(&mut h, l);
    assert_eq!(h.tcp.state(s).unwrap(), State::Established);
    assert_eq!(h.tcp.stats().syn_cookies_accepted, 1);
    assert_eq!(h.read_all(s), b"hello");
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 1460);
    // Data back, from ISS + 1 = the cookie + 1.
    h.tcp.send(h.now, s, b"world").unwrap();
    let d = h
        .advance(Duration::from_millis(1))
        .into_iter()
        .find(|x| !x.payload.is_empty())
        .unwrap();
    assert_eq!(
        (d.seq, d.ack, &d.payload[..]),
        (sa.seq + 1, 1006, &b"world"[..])
    );
}

#[test]
fn cookie_carries_mss_wscale_and_sack_in_the_timestamp() {
    let cfg = small_queue(TcpConfig::default(), 1);
    let mut h = Harness::new(cfg);
    let l = h.listen();
    fill_syn_queue(&mut h, 1);
    let sa = cookie_synack(&mut h, |p| {
        p.seq(5).mss(1400).wscale(9).sack_ok().ts(100, 0)
    });
    assert_eq!(sa.options.mss, Some(1460));
    assert_eq!(
        sa.options.window_scale,
        Some(7),
        "6 MiB largest buffer: shift 7"
    );
    assert!(sa.options.sack_permitted);
    let ts = sa.options.timestamp.unwrap();
    assert_eq!(ts.tsecr, 100);
    // Linux's layout: wscale in bits 0-3, SACK in bit 4.
    assert_eq!(ts.tsval & 0x3f, 9 | 0x10);
    h.send(
        h.peer()
            .seq(6)
            .ack(sa.seq.wrapping_add(1))
            .ts(101, ts.tsval),
    );
    let s = accept1(&mut h, l);
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.window_scale, Some((9, 7)));
    assert!(info.sack && info.timestamps);
    // 1400 rounds down to 1300 (Linux's msstab), less 12 bytes of timestamps per segment.
    assert_eq!(info.snd_mss, 1300 - 12);
    // No RTT sample from the cookie's echo (it is not a send time).
    assert_eq!(info.srtt, None);
}

#[test]
fn cookie_without_timestamps_offers_no_scaling_or_sack() {
    let mut h = Harness::new(small_queue(TcpConfig::default(), 1));
    let l = h.listen();
    fill_syn_queue(&mut h, 1);
    let sa = cookie_synack(&mut h, |p| p.seq(5).mss(1460).wscale(7).sack_ok());
    assert_eq!(sa.options.window_scale, None);
    assert!(!sa.options.sack_permitted && sa.options.timestamp.is_none());
    h.send(h.peer().seq(6).ack(sa.seq.wrapping_add(1)));
    let s = accept1(&mut h, l);
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.window_scale, None);
    assert!(!info.sack && !info.timestamps);
}

#[test]
fn forged_acks_are_refused_and_counted() {
    let mut h = Harness::new(small_queue(plain_config(), 1));
    h.listen();
    fill_syn_queue(&mut h, 1);
    // One real cookie out, so the listener is in cookie mode.
    let sa = cookie_synack(&mut h, |p| p.seq(1000));
    let conns = h.tcp.connection_count();
    let mut rng = Rng(0x5eed_f0c5);
    let n = 20_000u64;
    for i in 0..n {
        let r = rng.next();
        h.remote = SocketAddr::new(h.remote.ip(), 30000 + (i % 30000) as u16);
        h.send(h.peer().seq(r as u32).ack((r >> 32) as u32));
        let rst = reply(&mut h);
        assert!(rst.has(TcpFlags::RST), "a forged ACK gets a RST");
    }
    // Near misses of the genuine cookie: wrong ACK, wrong SEQ, wrong port.
    h.remote = REMOTE.parse().unwrap();
    for (seq, ack) in [
        (1001u32, sa.seq.wrapping_add(2)),
        (1001, sa.seq),
        (1002, sa.seq.wrapping_add(1)),
        (1000, sa.seq.wrapping_add(1)),
    ] {
        h.send(h.peer().seq(seq).ack(ack));
        assert!(reply(&mut h).has(TcpFlags::RST));
    }
    h.remote = SocketAddr::new(h.remote.ip(), h.remote.port() + 1);
    h.send(h.peer().seq(1001).ack(sa.seq.wrapping_add(1)));
    assert!(reply(&mut h).has(TcpFlags::RST));
    let st = h.tcp.stats();
    assert_eq!(st.syn_cookies_failed, n + 5);
    assert_eq!(st.syn_cookies_accepted, 0);
    assert_eq!(h.tcp.connection_count(), conns);
}

#[test]
fn cookie_expires_after_two_periods_and_future_echoes_are_refused() {
    let mut h = Harness::new(small_queue(TcpConfig::default(), 1));
    h.listen();
    fill_syn_queue(&mut h, 1);
    let sa = cookie_synack(&mut h, |p| p.seq(1000).ts(5, 0));
    let tsval = sa.options.timestamp.unwrap().tsval;
    // An echo ahead of our clock cannot be ours.
    h.send(
        h.peer()
            .seq(1001)
            .ack(sa.seq.wrapping_add(1))
            .ts(6, tsval.wrapping_add(10_000)),
    );
    assert!(reply(&mut h).has(TcpFlags::RST));
    assert_eq!(h.tcp.stats().syn_cookies_failed, 1);
    // 129 s later the cookie clock moved by at least two periods.
    h.now += Duration::from_secs(129);
    h.send(h.peer().seq(1001).ack(sa.seq.wrapping_add(1)).ts(6, tsval));
    assert!(reply(&mut h).has(TcpFlags::RST));
    assert_eq!(h.tcp.stats().syn_cookies_accepted, 0);
}

#[test]
fn cookie_is_accepted_a_minute_later() {
    let mut h = Harness::new(small_queue(TcpConfig::default(), 1));
    let l = h.listen();
    fill_syn_queue(&mut h, 1);
    let sa = cookie_synack(&mut h, |p| p.seq(1000).ts(5, 0));
    let tsval = sa.options.timestamp.unwrap().tsval;
    h.now += Duration::from_secs(63);
    h.send(h.peer().seq(1001).ack(sa.seq.wrapping_add(1)).ts(6, tsval));
    assert!(h.pending.is_empty());
    accept1(&mut h, l);
}

#[test]
fn no_cookie_mode_without_a_recent_overflow() {
    // A genuine-looking cookie ACK is not even checked when the queue never overflowed.
    let mut h = Harness::new(plain_config());
    h.listen();
    h.send(h.peer().seq(1).ack(12345));
    assert!(reply(&mut h).has(TcpFlags::RST));
    assert_eq!(h.tcp.stats().syn_cookies_failed, 0);
}

#[test]
fn never_mode_drops_and_always_mode_keeps_no_state() {
    let mut cfg = small_queue(plain_config(), 1);
    cfg.syn_cookies = SynCookies::Never;
    let mut h = Harness::new(cfg);
    h.listen();
    fill_syn_queue(&mut h, 1);
    h.send(h.peer().seq(1).flags(TcpFlags::SYN));
    h.quiet();
    assert_eq!(h.tcp.stats().syn_cookies_sent, 0);
    assert_eq!(h.tcp.stats().syn_queue_overflows, 1);

    let mut cfg = plain_config();
    cfg.syn_cookies = SynCookies::Always;
    let mut h = Harness::new(cfg);
    let l = h.listen();
    let sa = cookie_synack(&mut h, |p| p.seq(1));
    assert_eq!(h.tcp.connection_count(), 0);
    h.send(h.peer().seq(2).ack(sa.seq.wrapping_add(1)));
    let s = accept1(&mut h, l);
    assert_eq!(h.tcp.state(s).unwrap(), State::Established);
}

#[test]
fn full_queue_evicts_the_oldest_half_open_that_retransmitted() {
    let mut h = Harness::new(small_queue(plain_config(), 2));
    h.listen();
    fill_syn_queue(&mut h, 2);
    // Nothing retransmitted yet: a cookie.
    cookie_synack(&mut h, |p| p.seq(1));
    assert_eq!(h.tcp.stats().syn_queue_evictions, 0);
    // After the initial RTO both SYN-ACKs went again.
    let re = h.advance(Duration::from_millis(1001));
    assert_eq!(re.iter().filter(|s| s.has(TcpFlags::SYN)).count(), 2);
    // The next SYN evicts the oldest (port 20000) and gets a stateful SYN-ACK.
    h.remote = SocketAddr::new(h.remote.ip(), 30000);
    h.send(h.peer().seq(50).flags(TcpFlags::SYN));
    assert!(
        h.pending.is_empty(),
        "stateful: the SYN-ACK comes from dispatch"
    );
    let sa = h.out1();
    assert!(sa.has(TcpFlags::SYN | TcpFlags::ACK));
    assert_eq!(h.tcp.stats().syn_queue_evictions, 1);
    assert_eq!(h.tcp.connection_count(), 2);
    // The evicted connection is gone: its ACK meets no connection (and is no cookie).
    h.remote = SocketAddr::new(h.remote.ip(), 20000);
    h.send(h.peer().seq(8).ack(re[0].seq.wrapping_add(1)));
    assert!(reply(&mut h).has(TcpFlags::RST));
    // The younger one is still there and completes.
    h.remote = SocketAddr::new(h.remote.ip(), 20001);
    h.send(h.peer().seq(8).ack(re[1].seq.wrapping_add(1)));
    assert!(h.pending.is_empty());
    assert_eq!(h.tcp.stats().established, 1);
}

/// Segments in flight between the real client and the server (no loss, fixed delay).
struct Wire {
    q: std::collections::VecDeque<(Instant, bool, Seg)>,
}

/// Issue 13: 100,000 spoofed SYNs from random sources through the server's `process`, in
/// virtual time (25 SYNs per virtual millisecond: 4 s of flood, long enough for the
/// early half-open connections to retransmit and be evicted), while a real client
/// engine connects during the flood and exchanges 256 KiB each way, byte-exact.
#[test]
fn issue_13_listener_serves_a_real_client_through_a_syn_flood() {
    let server_addr: SocketAddr = "198.18.0.1:80".parse().unwrap();
    let client_ip: IpAddr = "198.18.0.2".parse().unwrap();
    let cfg = TcpConfig {
        send_buffer_len: 64 * 1024,
        recv_buffer_len: 64 * 1024,
        ..TcpConfig::default()
    };
    let mut srv = Tcp::new(cfg.clone(), [1; 16]);
    let mut cli = Tcp::new(cfg, [2; 16]);
    let l = srv.listen(server_addr, 128).unwrap();
    let mut now = Instant::from_secs(10);
    let delay = Duration::from_micros(200);
    let mut wire = Wire {
        q: Default::default(),
    };
    let mut rng = Rng(0xf100d);
    let total = 100_000u32;
    let client_at = total / 2;
    let mut client = None;
    let mut server = None;
    let mut to_send: Vec<u8> = (0..256 * 1024u64).map(pattern).collect();
    let expect_back: Vec<u8> = to_send.iter().map(|b| b ^ 0x5a).collect();
    let mut got_back = Vec::new();
    let mut echoed = 0usize;
    let mut server_got = Vec::new();
    let mut spoofed_out = 0u64;
    let mut sent_syns = 0u32;
    // How many spoofed SYNs had been sent when the real client got in.
    let mut established_at = None;
    let mut buf = vec![0u8; 16 * 1024];

    for step in 0..400_000u32 {
        // The flood: 25 SYNs per step of 1 ms.
        for _ in 0..25 {
            if sent_syns == total {
                break;
            }
            sent_syns += 1;
            let r = rng.next();
            let src = IpAddr::V4(Ipv4Addr::new(198, 19, (r >> 8) as u8, r as u8));
            let syn = TcpRepr {
                src_port: 1024 + ((r >> 16) as u16 % 60000),
                dst_port: 80,
                seq: ulnet_wire::SeqNumber((r >> 32) as u32),
                ack: ulnet_wire::SeqNumber(0),
                flags: TcpFlags::SYN,
                window: 65535,
                urgent: 0,
                options: ulnet_wire::TcpOptions::none(),
                payload: &[],
                payload_rest: &[],
            };
            srv.process(now, src, server_addr.ip(), &syn, &mut |_, d, _| {
                assert_ne!(d, client_ip);
                spoofed_out += 1;
            });
            if sent_syns == client_at {
                client = Some(
                    cli.connect(now, SocketAddr::new(client_ip, 40000), server_addr)
                        .unwrap(),
                );
            }
        }
        // Deliver what is due, both ways.
        while wire.q.front().is_some_and(|(t, _, _)| *t <= now) {
            let (_, to_srv, seg) = wire.q.pop_front().unwrap();
            if to_srv {
                let mut replies = Vec::new();
                srv.process(
                    now,
                    client_ip,
                    server_addr.ip(),
                    &seg.repr(),
                    &mut |_, d, r| {
                        if d == client_ip {
                            replies.push(Seg::from_repr(r));
                        }
                    },
                );
                wire.q
                    .extend(replies.into_iter().map(|s| (now + delay, false, s)));
            } else {
                let mut replies = Vec::new();
                cli.process(
                    now,
                    server_addr.ip(),
                    client_ip,
                    &seg.repr(),
                    &mut |_, _, r| {
                        replies.push(Seg::from_repr(r));
                    },
                );
                wire.q
                    .extend(replies.into_iter().map(|s| (now + delay, true, s)));
            }
        }
        // Applications.
        if server.is_none() {
            server = srv.accept(now, l).unwrap();
        }
        if let Some(c) = client {
            if established_at.is_none() && cli.state(c).unwrap() == State::Established {
                established_at = Some(sent_syns);
            }
            if !to_send.is_empty() && cli.state(c).unwrap() == State::Established {
                if let Ok(n) = cli.send(now, c, &to_send) {
                    to_send.drain(..n);
                }
            }
            while let Ok(n) = cli.recv(now, c, &mut buf) {
                if n == 0 {
                    break;
                }
                got_back.extend_from_slice(&buf[..n]);
            }
        }
        if let Some(s) = server {
            while let Ok(n) = srv.recv(now, s, &mut buf) {
                if n == 0 {
                    break;
                }
                server_got.extend_from_slice(&buf[..n]);
            }
            if echoed < server_got.len() {
                let back: Vec<u8> = server_got[echoed..].iter().map(|b| b ^ 0x5a).collect();
                if let Ok(n) = srv.send(now, s, &back) {
                    echoed += n;
                }
            }
        }
        // Output, both engines.
        srv.dispatch(now, &mut |_, d, r| {
            if d == client_ip {
                wire.q.push_back((now + delay, false, Seg::from_repr(r)));
            } else {
                spoofed_out += 1;
            }
            true
        });
        cli.dispatch(now, &mut |_, _, r| {
            wire.q.push_back((now + delay, true, Seg::from_repr(r)));
            true
        });
        if sent_syns == total && got_back.len() == expect_back.len() {
            break;
        }
        assert!(step < 399_999, "transfer did not finish");
        now += Duration::from_millis(1);
    }
    // Served during the flood, not after it: within a few virtual milliseconds of its
    // SYN (25 spoofed SYNs go in per millisecond).
    let at = established_at.expect("client never established");
    assert!(at < client_at + 250, "established after {at} spoofed SYNs");
    assert_eq!(server_got.len(), 256 * 1024);
    assert!(server_got
        .iter()
        .enumerate()
        .all(|(i, &b)| b == pattern(i as u64)));
    assert_eq!(got_back, expect_back);
    let st = srv.stats();
    assert!(st.syn_cookies_sent > 90_000, "{st:?}");
    assert!(st.syn_queue_evictions > 0, "{st:?}");
    assert_eq!(st.syn_cookies_failed, 0);
    // Memory stayed bounded: the SYN queue and the one real connection.
    assert!(
        srv.connection_count() <= 1024 + 1,
        "{}",
        srv.connection_count()
    );
    assert!(spoofed_out >= u64::from(total));
}
