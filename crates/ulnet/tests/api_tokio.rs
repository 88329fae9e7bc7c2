//! Async sockets under tokio: a server task per connection on stack B handles 1,000
//! concurrent client tasks on stack A (two stacks joined by an in-memory link, each on
//! its own runtime thread); every echo comes back byte-exact. Also async UDP.

#![cfg(feature = "tokio")]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use ulnet::channel::pipe;
use ulnet::net::{Stack, TcpListener, TcpStream, UdpSocket};

fn stacks() -> (Stack, Stack) {
    let (a, b) = pipe::pair().unwrap();
    // Small buffers: 2,000 connections at once.
    let build = |addr: &str, ch| {
        Stack::builder()
            .address(addr)
            .tcp_buffers(16 * 1024, 16 * 1024)
            .channel(ch)
            .build()
            .unwrap()
    };
    (build("198.18.0.1/24", a), build("198.18.0.2/24", b))
}

#[test]
fn tokio_server_handles_1000_concurrent_clients() {
    const CLIENTS: usize = 1000;
    const LEN: usize = 3000;
    let (a, b) = stacks();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let listener = TcpListener::bind(&b, "0.0.0.0:8000").unwrap();
    rt.block_on(async move {
        let server = tokio::spawn(async move {
            let mut handlers = Vec::new();
            for _ in 0..CLIENTS {
                let (mut s, _) = listener.accept_async().await.unwrap();
                handlers.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        let n = s.read(&mut buf).await.unwrap();
                        if n == 0 {
                            break;
                        }
                        s.write_all(&buf[..n]).await.unwrap();
                    }
                    AsyncWriteExt::shutdown(&mut s).await.unwrap();
                }));
            }
            for h in handlers {
                h.await.unwrap();
            }
        });
        let dst: SocketAddr = "198.18.0.2:8000".parse().unwrap();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let a = a.clone();
                tokio::spawn(async move {
                    let mut s = TcpStream::connect_async(&a, dst).await.unwrap();
                    let msg: Vec<u8> = (0..LEN).map(|k| (k * 7 + i) as u8).collect();
                    s.write_all(&msg).await.unwrap();
                    AsyncWriteExt::shutdown(&mut s).await.unwrap();
                    let mut back = Vec::new();
                    s.read_to_end(&mut back).await.unwrap();
                    assert_eq!(back, msg, "client {i}");
                })
            })
            .collect();
        let all = async {
            for c in clients {
                c.await.unwrap();
            }
            server.await.unwrap();
        };
        tokio::time::timeout(Duration::from_secs(120), all)
            .await
            .expect("1000 clients within 120 s");
    });
}

#[test]
fn async_udp_round_trips() {
    let (a, b) = stacks();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async move {
        let srv = UdpSocket::bind(&b, "0.0.0.0:9100").unwrap();
        let echo = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            for _ in 0..50 {
                let (n, from) = srv.recv_from_async(&mut buf).await.unwrap();
                srv.send_to_async(&buf[..n], from).await.unwrap();
            }
            srv
        });
        let c = UdpSocket::bind(&a, "0.0.0.0:0").unwrap();
        let dst: SocketAddr = "198.18.0.2:9100".parse().unwrap();
        let mut buf = [0u8; 1500];
        for i in 0..50u8 {
            c.send_to_async(&[i; 100], dst).await.unwrap();
            let (n, from) =
                tokio::time::timeout(Duration::from_secs(5), c.recv_from_async(&mut buf))
                    .await
                    .expect("echo within 5 s")
                    .unwrap();
            assert_eq!((n, from, buf[0]), (100, dst, i));
        }
        echo.await.unwrap();
    });
}
