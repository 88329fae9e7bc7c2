//! A connected UDP socket of the socket API gets `ConnectionRefused` when a Linux peer
//! answers with ICMP port unreachable, as a Linux socket gets ECONNREFUSED (issue 12
//! defect 8; RFC 1122 §4.1.3.3: UDP passes ICMP errors up to the application). The
//! peer is the kernel of the testbed's namespace B, where nothing listens on the port.

mod interop_support;

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use interop_support::*;
use ulnet::net::{Stack, UdpSocket};
use ulnet::runtime::Backend;
use ulnet::stack::iface::IpCidr;

#[test]
fn connected_udp_gets_connection_refused_from_a_linux_port_unreachable() {
    let tb = testbed("iudp");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    let ip = a.spare_ip(1);
    let stack = Stack::builder()
        .backend(Backend::Packet)
        .interface(&a.ifname)
        .address_cidr(IpCidr::new(ip, a.prefix_len).unwrap())
        .netns(&a.ns)
        .build()
        .expect("the stack");
    let s = UdpSocket::bind(&stack, SocketAddr::new(ip, 0)).unwrap();
    // Discard (9/udp): nothing listens in the fresh namespace.
    s.connect(SocketAddr::new(b.ip, 9)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 64];
    let mut refused = None;
    // Bounded: at most 25 datagrams, 200 ms each (the first may wait for ARP; Linux
    // rate-limits its ICMP errors, icmp_ratelimit).
    for k in 0..25 {
        if let Err(e) = s.send(b"anyone there?") {
            if e.kind() == ErrorKind::ConnectionRefused {
                refused = Some(k);
                break;
            }
        }
        match s.recv(&mut buf) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                refused = Some(k);
                break;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            other => panic!("unexpected: {other:?}"),
        }
    }
    assert!(refused.is_some(), "no ConnectionRefused after 25 datagrams");
}
