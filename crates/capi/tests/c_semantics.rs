//! Process and socket semantics under the interposer (`LD_PRELOAD=libulnet_preload.so`,
//! what `ulnet run` sets), checked by C programs built here with plain libc calls:
//! tests/c/semantics.c (non-blocking connect with EINPROGRESS and SO_ERROR, edge- and
//! level-triggered epoll, half-close, accept4 flags, EINTR, SIGPIPE and MSG_NOSIGNAL,
//! fork, dup/dup2/F_DUPFD_CLOEXEC, poll and select over mixed sets, FIONREAD,
//! unsupported flags and options) and tests/c/threads.c (32 connections, 64 threads,
//! one stack). Kernel peers in namespace B: a threaded Python echo server, a closed
//! port, socat clients. Needs `cargo build --workspace` first (scripts/test.sh runs it): test builds do not
//! write the interposer.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

fn preload() -> PathBuf {
    let p = target_dir().join("libulnet_preload.so");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --workspace` first (test builds do not \
         write cdylibs there; scripts/test.sh does it)",
        p.display()
    );
    p
}

/// Runs `exe args` in namespace `ns` under the interposer with `env`, bounded.
fn run_preloaded(
    ns: &str,
    env: &[(String, String)],
    exe: &Path,
    args: &[&str],
    secs: u32,
) -> std::process::Output {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "timeout", "-k", "2", &secs.to_string()])
        .arg(exe)
        .args(args)
        .env("LD_PRELOAD", preload())
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("cannot run the test program")
}

#[test]
fn process_and_socket_semantics_under_the_interposer() {
    let lib = preload();
    let tb = testbed("capis");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    ulnet_bench::preflight::require_tool("python3").unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let sem = scratch.path("semantics");
    let thr = scratch.path("threads");
    compile(&["crates/capi/tests/c/semantics.c"], &sem, false);
    compile(&["crates/capi/tests/c/threads.c"], &thr, false);
    let (ip, env) = ulnet_env(&a, 0);
    let echo = repo().join("crates/capi/tests/c/echo_server.py");
    let mut server = spawn_in(
        &b.ns,
        &[],
        Path::new("python3"),
        &[echo.to_str().unwrap(), &b.ip.to_string(), "7200"],
    );
    wait_line(&mut server, "listening");

    // The accept checks: a kernel client connects three times to ulnet's port 7201.
    let clients = {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &b.ns, "timeout", "60", "sh", "-c"])
            .arg(format!(
                "for i in 1 2 3; do echo hi | socat -t 1 - TCP:{ip}:7201,retry=200,interval=0.1; \
                 sleep 0.2; done"
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        ulnet_bench::exec::ChildGuard::spawn(c).expect("socat clients")
    };
    let o = run_preloaded(
        &a.ns,
        &env,
        &sem,
        &[&b.ip.to_string(), "7200", "7299", "7201"],
        60,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && out.contains("done, 0 failures"),
        "semantics under {}:\n{out}\n{err}",
        lib.display()
    );
    // Unsupported calls are named on standard error with the program.
    assert!(
        err.contains("ulnet: semantics: send() on a ulnet socket")
            && err.contains("recv() on a ulnet socket in the child of fork()"),
        "{err}"
    );
    let _ = clients.wait_timeout(Duration::from_secs(20));

    let o = run_preloaded(
        &a.ns,
        &env,
        &thr,
        &[&b.ip.to_string(), "7200", "32", "1000000"],
        60,
    );
    assert!(
        o.status.success(),
        "threads: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout)
        .contains("32 of 32 connections echoed 1000000 bytes exactly"));

    // A clean exit flushes: 4 MB queued, then return from main; the kernel receives it
    // all, then EOF (socat exits).
    let flush = scratch.path("exit_flush");
    compile(&["crates/capi/tests/c/exit_flush.c"], &flush, false);
    let got = scratch.path("flushed");
    let sink = {
        let mut c = Command::new("ip");
        // socat itself is the guarded child (`ip netns exec` execs in place), with no
        // pipes: a deadline kills it, and nothing is left holding output to drain.
        c.args(["netns", "exec", &b.ns, "socat", "-u"])
            .arg(format!("TCP-LISTEN:7300,bind={},reuseaddr", b.ip))
            .arg(format!("CREATE:{}", got.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        ulnet_bench::exec::ChildGuard::spawn(c).expect("socat sink")
    };
    let o = run_preloaded(
        &a.ns,
        &env,
        &flush,
        &[&b.ip.to_string(), "7300", "4000000"],
        60,
    );
    assert!(o.status.success(), "exit_flush: {}", text(&o));
    let s = sink
        .wait_timeout(Duration::from_secs(30))
        .expect("the sink saw no EOF");
    assert!(s.status.success(), "socat sink: {}", text(&s));
    let data = std::fs::read(&got).unwrap();
    assert_eq!(data.len(), 4_000_000, "bytes the kernel received");
    let expect = |i: usize| (i as u32).wrapping_mul(13).wrapping_add(1) as u8;
    assert!(
        data.iter().enumerate().all(|(i, &b)| b == expect(i)),
        "the bytes differ"
    );
}

/// Peer of tests/c/udp_share.c, in namespace B: sockets A and B, the exchange the C
/// program describes; prints "peer done".
const UDP_SHARE_PEER: &str = r#"
import socket, sys
dst = (sys.argv[1], int(sys.argv[2]))
a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
a.settimeout(0.2)
b.settimeout(10)
for _ in range(150):
    a.sendto(b"hello1", dst)
    try:
        d, src = a.recvfrom(100)
    except socket.timeout:
        continue
    assert d == b"ack1" and src == dst, (d, src)
    break
else:
    sys.exit("no ack1")
a.sendto(b"data-A", dst)
b.sendto(b"hello2", dst)
d, src = b.recvfrom(100)
assert d == b"ack2" and src == dst, (d, src)
a.sendto(b"late-A", dst)
d, src = b.recvfrom(100)
assert d == b"ack3" and src == dst, (d, src)
print("peer done")
"#;

/// Two UDP sockets on one port with SO_REUSEADDR, the first connected (what
/// `iperf3 -s` does for a UDP test): each datagram reaches the right socket, poll shows
/// each readable exactly when a datagram for it waits, and a socket without
/// SO_REUSEADDR is refused the port.
#[test]
fn udp_sockets_share_a_port_like_linux() {
    let _ = preload();
    let tb = testbed("capiu");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    ulnet_bench::preflight::require_tool("python3").unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let exe = scratch.path("udp_share");
    compile(&["crates/capi/tests/c/udp_share.c"], &exe, false);
    let (ip, env) = ulnet_env(&a, 0);
    let peer = {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &b.ns, "timeout", "60", "python3", "-c"])
            .arg(UDP_SHARE_PEER)
            .args([&ip.to_string(), "7400"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        ulnet_bench::exec::ChildGuard::spawn(c).expect("python3 peer")
    };
    let o = run_preloaded(&a.ns, &env, &exe, &["7400"], 60);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("done, 0 failures"),
        "udp_share: {}",
        text(&o)
    );
    let p = peer
        .wait_timeout(Duration::from_secs(20))
        .expect("the peer did not finish");
    assert!(
        p.status.success() && String::from_utf8_lossy(&p.stdout).contains("peer done"),
        "peer: {}",
        text(&p)
    );
}
