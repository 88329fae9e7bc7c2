//! UDP ping-pong over ulnet's stack: send COUNT datagrams to a peer that echoes them,
//! and report round-trip times; or (`--serve PORT COUNT`) echo COUNT datagrams back.
//!
//! ```text
//! ip netns exec ns-a socat UDP-LISTEN:9000,fork EXEC:cat &
//! ULNET_BACKEND=xdp ULNET_NETNS=ns-b ULNET_IFACE=veth-b ULNET_ADDR=198.18.0.16/24 \
//!     cargo run --example udp_ping_pong -- 198.18.0.1:9000 10
//! ```
//!
//! The namespaces as `ulnet testbed up` makes them (docs/testbed.md): the kernel peer's
//! offloads off, since an XDP channel cannot take the partial checksums veth passes on.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ulnet::net::{Stack, UdpSocket};

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stack = Stack::builder().from_env().build()?;
    let mut buf = [0u8; 2048];
    if args.first().map(String::as_str) == Some("--serve") {
        let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(9000);
        let count: usize = args
            .get(2)
            .and_then(|c| c.parse().ok())
            .unwrap_or(usize::MAX);
        let s = UdpSocket::bind(&stack, ("0.0.0.0", port))?;
        for _ in 0..count {
            let (n, from) = s.recv_from(&mut buf)?;
            s.send_to(&buf[..n], from)?;
        }
        return Ok(());
    }
    let peer: SocketAddr = args.first().and_then(|p| p.parse().ok()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "usage: udp_ping_pong PEER:PORT [COUNT]",
        )
    })?;
    let count: u32 = args.get(1).and_then(|c| c.parse().ok()).unwrap_or(10);
    let s = UdpSocket::bind(&stack, "0.0.0.0:0")?;
    s.connect(peer)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut rtts = Vec::new();
    for seq in 0..count {
        let msg = format!("ping {seq}");
        let t = Instant::now();
        s.send(msg.as_bytes())?;
        // The first datagram may wait for ARP; later ones should be quick.
        match s.recv(&mut buf) {
            Ok(n) if &buf[..n] == msg.as_bytes() => rtts.push(t.elapsed()),
            Ok(_) => eprintln!("udp_ping_pong: {seq}: wrong reply"),
            Err(e) => eprintln!("udp_ping_pong: {seq}: {e}"),
        }
    }
    rtts.sort();
    let median = rtts.get(rtts.len() / 2).copied().unwrap_or_default();
    println!("{}/{count} replies, median rtt {median:?}", rtts.len());
    if rtts.len() as u32 == count {
        Ok(())
    } else {
        Err(io::Error::new(io::ErrorKind::TimedOut, "replies missing"))
    }
}
