//! Per-socket options set before the SYN (on `connect_with` or a listener) and after,
//! the configurable initial window, and the `TcpInfo` fields a `tcp_info` reader expects
//! (finding 6 of the TCP bug list).

use ulnet_wire::TcpFlags;

use super::harness::*;
use crate::tcp::{CaState, SocketError, SocketOption, TcpConfig};

#[test]
fn initial_window_is_configurable() {
    let mut h = Harness::new(TcpConfig {
        initial_window: 4,
        ..plain_config()
    });
    let (s, _) = h.passive_open(1000, h.peer().mss(1000));
    h.tcp.send(h.now, s, &[1; 20_000]).unwrap();
    assert_eq!(h.out().len(), 4);
    assert_eq!(h.tcp.info(s).unwrap().cwnd, 4000);
}

#[test]
fn options_before_connect_shape_the_syn() {
    let mut h = Harness::new(TcpConfig {
        window_scaling: true,
        ..plain_config()
    });
    let opts = [
        SocketOption::MaxSegment(1000),
        SocketOption::RecvBuffer(4 << 20),
        SocketOption::SendBuffer(3000),
    ];
    let s = h.tcp.connect_with(h.now, h.local, h.remote, &opts).unwrap();
    let syn = h.out1();
    assert_eq!(syn.options.mss, Some(1000));
    assert_eq!(syn.options.window_scale, Some(7), "4 MiB needs shift 7");
    h.send(
        h.peer()
            .seq(5000)
            .flags(TcpFlags::SYN)
            .ack(syn.seq + 1)
            .mss(1460)
            .wscale(0),
    );
    let _ = h.out();
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.snd_mss, 1000, "our MSS caps the peer's larger one");
    // The send buffer holds 3000 bytes.
    assert_eq!(h.tcp.send(h.now, s, &[0; 10_000]).unwrap(), 3000);
}

#[test]
fn listener_options_apply_to_its_connections() {
    let mut h = Harness::new(plain_config());
    let l = h.listen();
    h.tcp
        .set_listener_option(l, SocketOption::MaxSegment(536))
        .unwrap();
    h.tcp
        .set_listener_option(l, SocketOption::RecvBuffer(5000))
        .unwrap();
    h.send(h.peer().seq(1000).flags(TcpFlags::SYN).mss(1460));
    let synack = h.out1();
    assert_eq!((synack.options.mss, synack.window), (Some(536), 5000));
    h.send(h.peer().seq(1001).ack(synack.seq + 1));
    let s = h.tcp.accept(h.now, l).unwrap().unwrap();
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 536);
}

#[test]
fn buffer_options_after_data_are_refused_while_data_is_held() {
    let mut h = Harness::new(plain_config());
    let (s, iss) = h.passive_open(1000, h.peer());
    h.send(h.peer().seq(1001).ack(iss + 1).data(&[1; 100]));
    assert_eq!(
        h.tcp
            .set_option(h.now, s, SocketOption::RecvBuffer(1 << 20)),
        Err(SocketError::InvalidState)
    );
    h.tcp.send(h.now, s, b"x").unwrap();
    assert_eq!(
        h.tcp
            .set_option(h.now, s, SocketOption::SendBuffer(1 << 20)),
        Err(SocketError::InvalidState)
    );
    let _ = h.read_all(s);
    // Growing an empty receive buffer after the handshake is fine; shrinking is not (it
    // would take back offered window, RFC 9293 §3.8.6).
    h.tcp
        .set_option(h.now, s, SocketOption::RecvBuffer(1 << 17))
        .unwrap();
    assert_eq!(
        h.tcp.set_option(h.now, s, SocketOption::RecvBuffer(1000)),
        Err(SocketError::InvalidState)
    );
    // MSS after the handshake only lowers what we send.
    h.tcp
        .set_option(h.now, s, SocketOption::MaxSegment(500))
        .unwrap();
    assert_eq!(h.tcp.info(s).unwrap().snd_mss, 500);
}

#[test]
fn info_reports_ca_state_rcv_mss_lost_and_retransmitted_bytes() {
    // RACK off: in this zero-RTT virtual time it would deem the hole lost on the first
    // SACK (RFC 8985 §6.2, a zero reordering window), skipping the Disorder state checked
    // here; `tlp_rack.rs` covers RACK.
    let mut h = Harness::new(TcpConfig {
        sack: true,
        rack: false,
        ..plain_config()
    });
    let (s, iss) = h.passive_open(1000, h.peer().mss(1000).sack_ok());
    h.send(h.peer().seq(1001).ack(iss + 1).data(&[1; 700]));
    let info = h.tcp.info(s).unwrap();
    assert_eq!((info.ca_state, info.rcv_mss), (CaState::Open, 700));
    let _ = h.out();
    h.tcp.send(h.now, s, &[2; 5000]).unwrap();
    assert_eq!(h.out().len(), 5);
    let una = iss + 1;
    // Segment 1 lost; SACKs for 2..=5 arrive.
    for k in 2..=4u32 {
        h.send(
            h.peer()
                .seq(1701)
                .ack(una)
                .sack_blocks(&[(una + 1000, una + k * 1000)]),
        );
        if k == 2 {
            assert_eq!(h.tcp.info(s).unwrap().ca_state, CaState::Disorder);
        }
    }
    let info = h.tcp.info(s).unwrap();
    assert_eq!(info.ca_state, CaState::Recovery);
    assert_eq!(info.lost, 1000);
    let r = h.out();
    assert_eq!(r[0].seq, una);
    let info = h.tcp.info(s).unwrap();
    assert_eq!((info.retransmits, info.bytes_retrans), (1, 1000));
    assert_eq!(h.tcp.stats().retransmitted_bytes, 1000);
    // A timeout: Loss (a tail loss probe, which recovery allows, may come first).
    while h.tcp.info(s).unwrap().timeouts == 0 {
        let _ = h.wait();
    }
    assert_eq!(h.tcp.info(s).unwrap().ca_state, CaState::Loss);
}

#[test]
fn ipv6_wildcard_listener_takes_ipv4_unless_v6only() {
    // Issue 15: dual stack as Linux's bindv6only=0 (RFC 3493 §3.7): a `[::]:80`
    // listener answers an IPv4 SYN no IPv4 listener claims; set v6-only, it does not.
    let mut h = Harness::new(plain_config());
    let l = h.tcp.listen("[::]:80".parse().unwrap(), 16).unwrap();
    h.send(h.peer().seq(1000).flags(TcpFlags::SYN).mss(1460));
    let synack = h.out1();
    assert_eq!(synack.flags, TcpFlags::SYN | TcpFlags::ACK);
    h.send(h.peer().seq(1001).ack(synack.seq + 1));
    let s = h.tcp.accept(h.now, l).unwrap().expect("an IPv4 connection");
    assert!(h.tcp.info(s).is_ok());

    h.tcp.set_listener_v6only(l, true).unwrap();
    h.remote = "198.18.0.2:40001".parse().unwrap();
    h.send(h.peer().seq(5000).flags(TcpFlags::SYN).mss(1460));
    let rst = h.out1();
    assert!(rst.flags.contains(TcpFlags::RST), "{rst:?}");
    assert!(h.tcp.accept(h.now, l).unwrap().is_none());
}
