//! Async sockets under tokio: a server task per connection on stack B handles 1,000
//! concurrent client tasks on stack A (two stacks joined by an in-memory link, each on
//! its own runtime thread); every echo comes back byte-exact. Also async UDP, tasks
//! driving the loop through their reactor (and leaving it), runtimes without an IO
//! driver, and an executor that is not tokio's.

#![cfg(feature = "tokio")]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use ulnet::channel::pipe;
use ulnet::net::{Stack, TcpListener, TcpStream, UdpSocket};

/// Two stacks joined by a pipe, with TCP send and receive buffers of `buffers` bytes.
fn stacks(buffers: usize) -> (Stack, Stack) {
    stacks_driven(buffers, true)
}

/// As [`stacks`], with tasks driving the loops or not (`StackBuilder::drive_from_tasks`).
fn stacks_driven(buffers: usize, drive: bool) -> (Stack, Stack) {
    let (a, b) = pipe::pair().unwrap();
    let build = |addr: &str, ch| {
        Stack::builder()
            .address(addr)
            .tcp_buffers(buffers, buffers)
            .drive_from_tasks(drive)
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
    // Small buffers: 2,000 connections at once.
    let (a, b) = stacks(16 * 1024);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
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
    let (a, b) = stacks(16 * 1024);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
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

/// Byte `i` of stream `s` in [`bulk_writes_through_full_send_buffers_arrive_byte_exact`].
fn pattern(s: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 9) ^ s.wrapping_mul(101)) as u8
}

/// Two tasks on one current-thread runtime (a tokio service's layout) each write 8 MiB
/// through a 32 KiB send buffer, so nearly every write finds the buffer full and takes
/// a turn of the loop on the task's thread before it waits (`Stack::poll_op`), while the
/// other task and the loop's own thread may be turning it; a blocking reader per
/// connection on stack B checks every byte.
#[test]
fn bulk_writes_through_full_send_buffers_arrive_byte_exact() {
    const STREAMS: usize = 2;
    const LEN: usize = 8 << 20;
    let (a, b) = stacks(32 * 1024);
    let listener = TcpListener::bind(&b, "0.0.0.0:8100").unwrap();
    let readers = std::thread::spawn(move || {
        let mut threads = Vec::new();
        for _ in 0..STREAMS {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            threads.push(std::thread::spawn(move || {
                let mut tag = [0u8; 1];
                std::io::Read::read_exact(&mut s, &mut tag).unwrap();
                let stream = usize::from(tag[0]);
                let mut buf = vec![0u8; 64 * 1024];
                let mut at = 0;
                loop {
                    let n = std::io::Read::read(&mut s, &mut buf).unwrap();
                    if n == 0 {
                        break;
                    }
                    for (k, &byte) in buf[..n].iter().enumerate() {
                        assert_eq!(
                            byte,
                            pattern(stream, at + k),
                            "stream {stream} byte {}",
                            at + k
                        );
                    }
                    at += n;
                }
                assert_eq!(at, LEN, "stream {stream}");
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let dst: SocketAddr = "198.18.0.2:8100".parse().unwrap();
        let writers: Vec<_> = (0..STREAMS)
            .map(|stream| {
                let a = a.clone();
                tokio::spawn(async move {
                    let mut s = TcpStream::connect_async(&a, dst).await.unwrap();
                    s.write_all(&[stream as u8]).await.unwrap();
                    let data: Vec<u8> = (0..LEN).map(|i| pattern(stream, i)).collect();
                    // Writes of 48 KiB, more than the send buffer holds.
                    for chunk in data.chunks(48 * 1024) {
                        s.write_all(chunk).await.unwrap();
                    }
                    AsyncWriteExt::shutdown(&mut s).await.unwrap();
                    s
                })
            })
            .collect();
        let all = async {
            let mut streams = Vec::new();
            for w in writers {
                streams.push(w.await.unwrap());
            }
            streams
        };
        let streams = tokio::time::timeout(Duration::from_secs(120), all)
            .await
            .expect("both streams within 120 s");
        // Held until the readers have seen everything (a drop before that would not
        // lose data, but keeps the test about the writes).
        tokio::task::spawn_blocking(move || readers.join().unwrap())
            .await
            .unwrap();
        drop(streams);
    });
}

/// A blocking writer on stack B sends `len` bytes of [`pattern`] stream 0 to `port` on
/// A, then closes.
fn write_pattern(b: &Stack, port: u16, len: usize) -> std::thread::JoinHandle<()> {
    let b = b.clone();
    std::thread::spawn(move || {
        let dst: SocketAddr = format!("198.18.0.1:{port}").parse().unwrap();
        let mut s = ulnet::net::TcpStream::connect(&b, dst).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
        let data: Vec<u8> = (0..len).map(|i| pattern(0, i)).collect();
        std::io::Write::write_all(&mut s, &data).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
    })
}

/// Reads `s` to its end, checking every byte against [`pattern`] stream 0 from `at`;
/// returns the new offset.
async fn read_pattern(s: &mut TcpStream, mut at: usize) -> usize {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            return at;
        }
        for (k, &byte) in buf[..n].iter().enumerate() {
            assert_eq!(byte, pattern(0, at + k), "byte {}", at + k);
        }
        at += n;
    }
}

/// A blocking writer on B sends `len` bytes to `port` on A, where a task on `rt` accepts
/// and reads them all, every byte checked (bounded at 120 s); the count read.
fn receive_on(rt: &tokio::runtime::Runtime, a: &Stack, b: &Stack, port: u16, len: usize) -> usize {
    let listener = TcpListener::bind(a, format!("0.0.0.0:{port}")).unwrap();
    let writer = write_pattern(b, port, len);
    let got = rt.block_on(async {
        let f = async {
            let (mut s, _) = listener.accept_async().await.unwrap();
            read_pattern(&mut s, 0).await
        };
        tokio::time::timeout(Duration::from_secs(120), f)
            .await
            .expect("the stream within 120 s")
    });
    writer.join().unwrap();
    got
}

/// A task receiving a stream on a current-thread runtime with IO takes the frames in
/// itself: its runtime's reactor watches the channel and the task turns the loop
/// (`Stack::poll_op`), every byte arriving in order.
#[test]
fn a_task_receiving_a_stream_turns_the_loop_itself() {
    const LEN: usize = 16 << 20;
    let (a, b) = stacks(256 * 1024);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(receive_on(&rt, &a, &b, 8200, LEN), LEN);
    assert!(a.turns().tasks > 0, "{:?}", a.turns());
    assert_eq!(b.turns().tasks, 0, "B has no tasks");
}

/// A task sending a stream turns the loop on its own thread: its writes take a turn
/// each while the loop's thread stays out of the way (`Engine::after_task_call`), and
/// every byte arrives in order. The loop's counters account for every turn.
#[test]
fn a_task_sending_a_stream_turns_the_loop_on_its_own_thread() {
    const LEN: usize = 8 << 20;
    let (a, b) = stacks(256 * 1024);
    let listener = TcpListener::bind(&a, "0.0.0.0:8250").unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let mut at = 0;
        loop {
            let n = std::io::Read::read(&mut s, &mut buf).unwrap();
            if n == 0 {
                return at;
            }
            for (k, &byte) in buf[..n].iter().enumerate() {
                assert_eq!(byte, pattern(0, at + k), "byte {}", at + k);
            }
            at += n;
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = b.turns();
    rt.block_on(async {
        let f = async {
            let dst: SocketAddr = "198.18.0.1:8250".parse().unwrap();
            let mut s = TcpStream::connect_async(&b, dst).await.unwrap();
            let data: Vec<u8> = (0..LEN).map(|i| pattern(0, i)).collect();
            for piece in data.chunks(64 * 1024) {
                s.write_all(piece).await.unwrap();
            }
            AsyncWriteExt::shutdown(&mut s).await.unwrap();
        };
        tokio::time::timeout(Duration::from_secs(120), f)
            .await
            .expect("the stream within 120 s");
    });
    assert_eq!(reader.join().unwrap(), LEN);
    let t = b.turns();
    assert!(t.after_calls > before.after_calls, "{t:?}");
    let all = b.loop_stats().iterations;
    assert!(
        all >= t.blocked_calls + t.tasks + t.after_calls,
        "{all} turns, {t:?}"
    );
}

/// A task that stops waiting (its read dropped while pending, registered with its
/// reactor, the runtime then gone) leaves the channel to the loop's thread: the
/// stream's next data still arrives with nothing turning the loop but that thread
/// (which parks while tasks turn, `runtime/turn.rs`).
#[test]
fn frames_a_gone_task_waited_for_are_taken_in_by_the_loops_thread() {
    const LEN: usize = 256 * 1024;
    let (a, b) = stacks(512 * 1024);
    let listener = TcpListener::bind(&a, "0.0.0.0:8300").unwrap();
    let dst: SocketAddr = "198.18.0.1:8300".parse().unwrap();
    let mut tx = ulnet::net::TcpStream::connect(&b, dst).unwrap();
    tx.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(async {
        let (s, _) = listener.accept_async().await.unwrap();
        let mut buf = [0u8; 16];
        // The premise: a task has turned the loop, so the loop's thread parks. A task
        // turns when its reactor sees frames on the channel while it waits, and the
        // loop's thread may take the handshake's last frames first (it keeps polling
        // for a while after its own last send): a byte at a time until a task's turn
        // has taken one in.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while a.turns().tasks == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no task turned the loop"
            );
            std::io::Write::write_all(&mut tx, b"x").unwrap();
            let r = tokio::time::timeout(Duration::from_secs(10), s.read_async(&mut buf)).await;
            assert_eq!(r.expect("the byte within 10 s").unwrap(), 1);
        }
        let r = tokio::time::timeout(Duration::from_millis(50), s.read_async(&mut buf)).await;
        assert!(r.is_err(), "nothing more was sent");
        s
    });
    assert!(a.turns().tasks > 0, "the task waited through its reactor");
    drop(rt);
    let data: Vec<u8> = (0..LEN).map(|i| pattern(0, i)).collect();
    std::io::Write::write_all(&mut tx, &data).unwrap();
    tx.shutdown(std::net::Shutdown::Write).unwrap();
    // Only A's own thread turns A now: wait for the data to be readable without a
    // call that would drive the loop (the rest follows as reads open the window).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let ready = a.readiness(&s).is_some_and(|e| e.readable);
        if ready {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "A's loop thread took the stream in"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match std::io::Read::read(&mut &s, &mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("{e}"),
        }
    }
    assert!(got == data, "{} of {LEN} bytes, in order", got.len());
}

/// With `drive_from_tasks(false)` async sockets need no IO driver: a runtime with
/// timers only carries a stream, the loop's thread handing each batch to the task.
#[test]
fn without_task_driving_a_runtime_without_io_works() {
    const LEN: usize = 1 << 20;
    let (a, b) = stacks_driven(256 * 1024, false);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    assert_eq!(receive_on(&rt, &a, &b, 8400, LEN), LEN);
    assert_eq!(a.turns().tasks, 0);
}

/// Polls `f` to completion on this thread, outside any tokio runtime: the least an
/// executor does (park until the waker unparks). The park is bounded so a lost wake-up
/// shows as slowness rather than a hang; the caller bounds the whole.
fn block_on_plain<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "done within 60 s");
        std::thread::park_timeout(Duration::from_millis(200));
    }
}

/// The async operations are futures like any other: polled by an executor that is not
/// tokio's there is no reactor to register with, and the loop's thread hands over.
#[test]
fn async_sockets_work_outside_a_tokio_runtime() {
    const LEN: usize = 1 << 20;
    let (a, b) = stacks(256 * 1024);
    let listener = TcpListener::bind(&a, "0.0.0.0:8500").unwrap();
    let writer = write_pattern(&b, 8500, LEN);
    let got = block_on_plain(async {
        let (mut s, _) = listener.accept_async().await.unwrap();
        read_pattern(&mut s, 0).await
    });
    writer.join().unwrap();
    assert_eq!(got, LEN);
    assert_eq!(a.turns().tasks, 0);
}

/// A task's writes leave when it yields, together: three 100-byte writes with
/// `TCP_NODELAY` send nothing while the task runs on (20 ms here, its thread held), and
/// reach the peer as one segment once it awaits (each write turned the loop or woke the
/// loop's thread before; docs/performance-log.md, "Session 30").
#[test]
fn a_tasks_writes_leave_together_when_it_yields() {
    let (a, b) = stacks(64 * 1024);
    let listener = std::net::SocketAddr::from(([198, 18, 0, 2], 8300));
    let l = ulnet::net::TcpListener::bind(&b, listener).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(TcpStream::connect_async(&a, listener)).unwrap();
    s.set_nodelay(true).unwrap();
    let (mut peer, _) = l.accept().unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Quiet: the handshake's timers are done and both loops' threads sleep, so nothing
    // but this task's yield sends the writes.
    std::thread::sleep(Duration::from_millis(100));
    let (a0, b0) = (a.loop_stats().tx_frames, b.loop_stats().rx_frames);
    let mut s = s;
    rt.block_on(async {
        for k in 0..3u8 {
            s.write_all(&[k; 100]).await.unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(a.loop_stats().tx_frames, a0, "sent before the task yielded");
        tokio::task::yield_now().await;
    });
    let mut got = [0u8; 300];
    std::io::Read::read_exact(&mut peer, &mut got).unwrap();
    let want: Vec<u8> = (0..3u8).flat_map(|k| [k; 100]).collect();
    assert_eq!(&got[..], &want[..]);
    // B's ACK may still be on its way; A sends nothing else.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        a.loop_stats().tx_frames - a0,
        1,
        "A's frames for three writes"
    );
    assert_eq!(b.loop_stats().rx_frames - b0, 1, "B's frames in");
}

/// A write whose task's runtime shuts down before the task yields still leaves: the
/// spawned turn is dropped unpolled, and dropping it sends.
#[test]
fn a_write_leaves_when_its_runtime_shuts_down_before_the_task_yields() {
    let (a, b) = stacks(64 * 1024);
    let at = std::net::SocketAddr::from(([198, 18, 0, 2], 8301));
    let l = ulnet::net::TcpListener::bind(&b, at).unwrap();
    let mut s = {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(TcpStream::connect_async(&a, at)).unwrap()
    };
    let (mut peer, _) = l.accept().unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The write completes without yielding, so the spawned turn never runs here.
    rt.block_on(async { s.write_all(b"last words").await.unwrap() });
    drop(rt);
    let mut got = [0u8; 10];
    std::io::Read::read_exact(&mut peer, &mut got).unwrap();
    assert_eq!(&got, b"last words");
    // And the stack still flushes the next runtime's writes.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        s.write_all(b"more").await.unwrap();
        tokio::task::yield_now().await;
    });
    let mut got = [0u8; 4];
    std::io::Read::read_exact(&mut peer, &mut got).unwrap();
    assert_eq!(&got, b"more");
}
