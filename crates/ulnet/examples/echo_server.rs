//! A TCP echo server on ulnet's stack: a thread per connection, std-style blocking I/O.
//!
//! ```text
//! ULNET_BACKEND=xdp ULNET_NETNS=ns-b ULNET_IFACE=veth-b ULNET_ADDR=198.18.0.16/24 \
//!     cargo run --example echo_server -- [PORT] [CONNECTIONS]
//! ip netns exec ns-a socat - TCP:198.18.0.16:7
//! ```
//!
//! The namespaces as `ulnet testbed up` makes them (docs/testbed.md): the kernel peer's
//! offloads off, since an XDP channel cannot take the partial checksums veth passes on.
//!
//! Serves forever, or until CONNECTIONS connections have been served.

use std::io::{Read, Write};
use std::thread;

use ulnet::net::{Stack, TcpListener};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(7);
    let limit: Option<usize> = args.next().and_then(|c| c.parse().ok());

    let stack = Stack::builder().from_env().build()?;
    let listener = TcpListener::bind(&stack, ("0.0.0.0", port))?;
    eprintln!("echo_server: listening on {}:{port}", stack.local_ip());

    let mut workers = Vec::new();
    for (n, conn) in listener.incoming().enumerate() {
        let mut s = conn?;
        let peer = s.peer_addr()?;
        workers.push(thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            let mut total = 0u64;
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => {
                        if s.write_all(&buf[..k]).is_err() {
                            break;
                        }
                        total += k as u64;
                    }
                    Err(_) => break,
                }
            }
            eprintln!("echo_server: {peer}: echoed {total} bytes");
        }));
        if limit.is_some_and(|l| n + 1 >= l) {
            break;
        }
    }
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}
