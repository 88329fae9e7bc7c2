//! A TCP echo server on ulnet's stack with tokio: a task per connection.
//!
//! ```text
//! ULNET_BACKEND=xdp ULNET_NETNS=ns-b ULNET_IFACE=veth-b ULNET_ADDR=198.18.0.16/24 \
//!     cargo run --example tokio_echo_server -- [PORT] [CONNECTIONS]
//! ip netns exec ns-a socat - TCP:198.18.0.16:7
//! ```
//!
//! The namespaces as `ulnet testbed up` makes them (docs/testbed.md): the kernel peer's
//! offloads off, since an XDP channel cannot take the partial checksums veth passes on.
//!
//! `#[tokio::main]` builds a runtime with its IO driver, which the async sockets use: a
//! task whose read waits sleeps in tokio's reactor on the stack's channel and, woken by
//! it, takes the frames in itself (`StackBuilder::drive_from_tasks`). Serves forever, or
//! until CONNECTIONS connections have been served.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use ulnet::net::{Stack, TcpListener};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(7);
    let limit: Option<usize> = args.next().and_then(|c| c.parse().ok());

    let stack = Stack::builder().from_env().build()?;
    let listener = TcpListener::bind(&stack, ("0.0.0.0", port))?;
    eprintln!(
        "tokio_echo_server: listening on {}:{port}",
        stack.local_ip()
    );

    let mut tasks = Vec::new();
    let mut served = 0;
    while limit.is_none_or(|l| served < l) {
        let (mut s, peer) = listener.accept_async().await?;
        served += 1;
        tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            let mut total = 0u64;
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(k) => {
                        if s.write_all(&buf[..k]).await.is_err() {
                            break;
                        }
                        total += k as u64;
                    }
                }
            }
            eprintln!("tokio_echo_server: {peer}: echoed {total} bytes");
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}
