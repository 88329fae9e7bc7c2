//! A SYN flood past the SYN queue allocates nothing (issue 13 item 1, RFC 4987 §3.6):
//! SYN cookies are answered from `process` and forged ACKs are checked and refused
//! without touching the heap. A counting global allocator watches 20,000 spoofed SYNs
//! and 20,000 forged ACKs once the queue is full.
//!
//! The allocator is global, so this lives in its own integration-test binary; it only
//! forwards to `System` (the stack itself stays `forbid(unsafe_code)`).
#![allow(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;

use ulnet_stack::tcp::{Tcp, TcpConfig};
use ulnet_stack::time::Instant;
use ulnet_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr, TcpTimestamp};

mod counting;
use counting::{ALLOCS, COUNTING};

fn seg(src_port: u16, seq: u32, ack: u32, flags: TcpFlags, ts: bool) -> TcpRepr<'static> {
    let mut options = TcpOptions::none();
    if flags.contains(TcpFlags::SYN) {
        options.mss = Some(1460);
        options.window_scale = Some(7);
        options.sack_permitted = true;
    }
    if ts {
        options.timestamp = Some(TcpTimestamp {
            tsval: seq,
            tsecr: ack,
        });
    }
    TcpRepr {
        src_port,
        dst_port: 80,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack),
        flags,
        window: 65535,
        urgent: 0,
        options,
        payload: &[],
        payload_rest: &[],
    }
}

#[test]
fn syn_cookies_and_forged_acks_allocate_nothing() {
    let mut cfg = TcpConfig::default();
    cfg.syn_queue_len = 4;
    let mut tcp = Tcp::new(cfg, [7; 16]);
    let local: SocketAddr = "198.18.0.1:80".parse().unwrap();
    tcp.listen(local, 64).unwrap();
    let now = Instant::from_secs(100);
    let mut replies = 0u64;
    let mut out = |_: IpAddr, _: IpAddr, _: &TcpRepr<'_>| replies += 1;
    // Fill the queue (these allocate: control blocks), then warm up one cookie.
    for i in 0..5u16 {
        let src = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1));
        tcp.process(
            now,
            src,
            local.ip(),
            &seg(1000 + i, 1, 0, TcpFlags::SYN, true),
            &mut out,
        );
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    COUNTING.with(|c| c.set(true));
    for _ in 0..20_000 {
        let r = next();
        let src = IpAddr::V4(Ipv4Addr::new(198, 19, (r >> 40) as u8, (r >> 48) as u8));
        let port = 1024 + (r as u16 % 60000);
        tcp.process(
            now,
            src,
            local.ip(),
            &seg(port, (r >> 16) as u32, 0, TcpFlags::SYN, r & 1 == 0),
            &mut out,
        );
        let r = next();
        tcp.process(
            now,
            src,
            local.ip(),
            &seg(
                port ^ 1,
                r as u32,
                (r >> 32) as u32,
                TcpFlags::ACK,
                r & 1 == 0,
            ),
            &mut out,
        );
    }
    COUNTING.with(|c| c.set(false));
    let allocs = ALLOCS.load(Ordering::Relaxed);
    let st = tcp.stats();
    assert!(st.syn_cookies_sent >= 20_000, "{st:?}");
    assert_eq!(st.syn_cookies_failed, 20_000, "{st:?}");
    assert_eq!(st.syn_cookies_accepted, 0);
    assert_eq!(tcp.connection_count(), 4);
    assert!(replies >= 40_000);
    assert_eq!(allocs, 0, "the cookie path allocated {allocs} times");
}
