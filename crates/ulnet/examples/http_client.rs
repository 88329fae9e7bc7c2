//! An HTTP/1.1 GET over ulnet's stack: prints the status line and headers to stderr
//! and the body to stdout.
//!
//! ```text
//! ULNET_BACKEND=xdp ULNET_NETNS=ns-b ULNET_IFACE=veth-b ULNET_ADDR=198.18.0.16/24 \
//!     cargo run --example http_client -- http://198.18.0.1:8080/index.html
//! ```
//!
//! The namespaces as `ulnet testbed up` makes them (docs/testbed.md): the kernel peer's
//! offloads off, since an XDP channel cannot take the partial checksums veth passes on.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use ulnet::net::{Stack, TcpStream};

fn main() -> io::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://198.18.0.1/".into());
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "only http:// URLs"))?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let addr: SocketAddr = if host.contains(':') {
        host.parse()
    } else {
        format!("{host}:80").parse()
    }
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("host {host:?}: {e}")))?;

    let stack = Stack::builder().from_env().build()?;
    let mut s = TcpStream::connect_timeout(&stack, &addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nUser-Agent: ulnet\r\n\r\n"
    )?;
    let mut response = Vec::new();
    s.read_to_end(&mut response)?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(response.len(), |i| i + 4);
    eprint!("{}", String::from_utf8_lossy(&response[..split]));
    io::stdout().write_all(&response[split..])?;
    eprintln!("http_client: {} body bytes", response.len() - split);
    Ok(())
}
