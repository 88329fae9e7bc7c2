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

/// `env` with the interposer preloaded (for programs started with `spawn_in`).
fn preloaded(env: &[(String, String)]) -> Vec<(String, String)> {
    let mut v = env.to_vec();
    v.push(("LD_PRELOAD".into(), preload().display().to_string()));
    v
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

/// The frames a ulnet program sent and received, from the pcap file the library
/// writes (`ULNET_PCAP`): frames AF_XDP transmits bypass the kernel's packet taps on
/// both ends of the veth, so tcpdump in either namespace does not see them. Read back as
/// tcpdump's verbose text, one line per packet, filtered by `filter`.
fn pcap_packets(file: &Path, filter: &str) -> Vec<String> {
    ulnet_bench::preflight::require_tool("tcpdump").unwrap_or_else(|e| panic!("{e}"));
    let o = Command::new("tcpdump")
        .arg("-r")
        .arg(file)
        .args(["-n", "-v", filter])
        .output()
        .expect("tcpdump -r");
    let mut v: Vec<String> = Vec::new();
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        match v.last_mut() {
            Some(last) if l.starts_with(char::is_whitespace) => last.push_str(l),
            _ => v.push(l.to_string()),
        }
    }
    assert!(!v.is_empty(), "nothing captured: {}", text(&o));
    v
}

/// `env` with the library writing its frames to `pcap`.
fn with_pcap(env: &[(String, String)], pcap: &Path) -> Vec<(String, String)> {
    let mut v = env.to_vec();
    v.push(("ULNET_PCAP".into(), pcap.display().to_string()));
    v
}

/// The number after `key` in a tcpdump line (`win 4096`, `wscale 7`, `ttl 64`).
fn field(line: &str, key: &str) -> Option<u64> {
    let at = line.find(key)? + key.len();
    let rest = line[at..].trim_start();
    let end = rest
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(rest.len());
    let v = &rest[..end];
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Checks that every segment ulnet sent in `pkts` offered at most `max` bytes of window
/// (scaled by the shift its SYN announced, RFC 7323 §2.3), and that there were many.
fn windows_at_most(pkts: &[String], max: u64, what: &str) {
    let syn = pkts
        .iter()
        .find(|p| p.contains("Flags [S"))
        .unwrap_or_else(|| panic!("{what}: no SYN from ulnet in {pkts:#?}"));
    let shift = field(syn, "wscale").unwrap_or(0);
    let mut n = 0;
    for p in pkts {
        let Some(win) = field(p, ", win") else {
            continue;
        };
        let w = if p.contains("Flags [S") {
            win
        } else {
            win << shift
        };
        assert!(
            w <= max,
            "{what}: a window of {w} bytes (shift {shift}): {p}"
        );
        n += 1;
    }
    assert!(n > 50, "{what}: only {n} segments from ulnet captured");
}

/// SO_RCVBUF set before connect (and on a listener, inherited by accepted sockets) is
/// the window ulnet offers, with the window scale chosen for it, and locks out
/// auto-tuning, as on Linux: a kernel peer sending 1 MB never sees more than 4096
/// bytes of window; the bytes arrive exactly; getsockopt reads back the double.
#[test]
fn so_rcvbuf_sets_the_window_the_kernel_sees() {
    let _ = preload();
    let tb = testbed("capir");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    ulnet_bench::preflight::require_tool("python3").unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let exe = scratch.path("opts");
    compile(&["crates/capi/tests/c/opts.c"], &exe, false);
    let (ip, env) = ulnet_env(&a, 0);
    let peer_py = repo().join("crates/capi/tests/c/opts_peer.py");
    let peer_py = peer_py.to_str().unwrap();
    let bytes = "1000000";

    // Before connect: the kernel in B sends.
    let pcap = scratch.path("c1.pcap");
    let mut peer = spawn_in(
        &b.ns,
        &[],
        Path::new("python3"),
        &[peer_py, "send", &b.ip.to_string(), "7500", bytes],
    );
    wait_line(&mut peer, "listening");
    let o = run_preloaded(
        &a.ns,
        &with_pcap(&env, &pcap),
        &exe,
        &["rcvbuf-connect", &b.ip.to_string(), "7500", bytes],
        60,
    );
    assert!(o.status.success(), "rcvbuf-connect: {}", text(&o));
    let _ = peer.wait_timeout(Duration::from_secs(20));
    let from_ulnet = format!("src host {ip} and tcp port 7500");
    windows_at_most(
        &pcap_packets(&pcap, &from_ulnet),
        4096,
        "SO_RCVBUF before connect",
    );

    // On a listener: a kernel client in B pushes to ulnet's port.
    let pcap = scratch.path("c2.pcap");
    let mut prog = spawn_in(
        &a.ns,
        &preloaded(&with_pcap(&env, &pcap)),
        &exe,
        &["rcvbuf-listen", "7501", bytes],
    );
    wait_line(&mut prog, "listening");
    let push = sh_in(
        &b.ns,
        &format!("python3 {peer_py} push {ip} 7501 {bytes}"),
        Duration::from_secs(40),
    );
    assert!(push.status.success(), "push: {}", text(&push));
    let o = prog
        .wait_timeout(Duration::from_secs(30))
        .expect("rcvbuf-listen did not end");
    assert!(o.status.success(), "rcvbuf-listen: {}", text(&o));
    let from_ulnet = format!("src host {ip} and tcp port 7501");
    windows_at_most(
        &pcap_packets(&pcap, &from_ulnet),
        4096,
        "SO_RCVBUF on a listener",
    );
}

/// Checks that every packet in `pkts` carries TOS `tos` and TTL `ttl` (and that there are
/// at least `min`).
fn tos_ttl_all(pkts: &[String], tos: u64, ttl: u64, min: usize, what: &str) {
    for p in pkts {
        assert_eq!(
            (field(p, "(tos "), field(p, " ttl ")),
            (Some(tos), Some(ttl)),
            "{what}: {p}"
        );
    }
    assert!(pkts.len() >= min, "{what}: only {} packets", pkts.len());
}

/// IP_TOS and IP_TTL reach the IP header of every segment and datagram, as on Linux:
/// TCP keeps only the DSCP bits (its ECN field is its own, RFC 3168 §6.1.1), UDP sends
/// the whole byte. TCP moves its bytes exactly meanwhile.
#[test]
fn ip_tos_and_ttl_reach_the_wire() {
    let _ = preload();
    let tb = testbed("capit");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    ulnet_bench::preflight::require_tool("python3").unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let exe = scratch.path("opts");
    compile(&["crates/capi/tests/c/opts.c"], &exe, false);
    let (ip, env) = ulnet_env(&a, 0);
    let peer_py = repo().join("crates/capi/tests/c/opts_peer.py");
    let peer_py = peer_py.to_str().unwrap();
    let pcap = scratch.path("tos.pcap");
    let env = with_pcap(&env, &pcap);

    let mut peer = spawn_in(
        &b.ns,
        &[],
        Path::new("python3"),
        &[peer_py, "send", &b.ip.to_string(), "7510", "200000"],
    );
    wait_line(&mut peer, "listening");
    let o = run_preloaded(
        &a.ns,
        &env,
        &exe,
        &["tos-tcp", &b.ip.to_string(), "7510", "200000"],
        60,
    );
    assert!(o.status.success(), "tos-tcp: {}", text(&o));
    let _ = peer.wait_timeout(Duration::from_secs(20));
    let tcp = pcap_packets(&pcap, &format!("src host {ip} and tcp port 7510"));
    tos_ttl_all(&tcp, 0xb8, 33, 5, "TCP");

    let mut peer = spawn_in(
        &b.ns,
        &[],
        Path::new("python3"),
        &[peer_py, "udp", &b.ip.to_string(), "7511", "3"],
    );
    wait_line(&mut peer, "listening");
    let o = run_preloaded(
        &a.ns,
        &env,
        &exe,
        &["tos-udp", &b.ip.to_string(), "7511"],
        60,
    );
    assert!(o.status.success(), "tos-udp: {}", text(&o));
    let _ = peer.wait_timeout(Duration::from_secs(20));
    let udp = pcap_packets(&pcap, &format!("src host {ip} and udp port 7511"));
    tos_ttl_all(&udp, 0xb9, 33, 3, "UDP");
}

/// bind(2) before connect(2) on TCP, as Linux: the bound port is the connection's local
/// end (port 0 picks one at bind, which getsockname shows); a taken port is
/// `EADDRINUSE` at bind, also a listener's with SO_REUSEADDR on both.
#[test]
fn tcp_bind_before_connect_like_linux() {
    let _ = preload();
    let tb = testbed("capib");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    ulnet_bench::preflight::require_tool("python3").unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let exe = scratch.path("opts");
    compile(&["crates/capi/tests/c/opts.c"], &exe, false);
    let (_, env) = ulnet_env(&a, 0);
    let peer_py = repo().join("crates/capi/tests/c/opts_peer.py");
    let mut peer = spawn_in(
        &b.ns,
        &[],
        Path::new("python3"),
        &[
            peer_py.to_str().unwrap(),
            "names",
            &b.ip.to_string(),
            "7520",
            "2",
        ],
    );
    wait_line(&mut peer, "listening");
    let o = run_preloaded(
        &a.ns,
        &env,
        &exe,
        &["bind-connect", &b.ip.to_string(), "7520", "7521"],
        60,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("done, 0 failures"),
        "bind-connect: {}",
        text(&o)
    );
}

/// POLLHUP/EPOLLHUP as Linux's `tcp_poll` reports them: not for the peer's FIN alone
/// (that is POLLIN|POLLRDHUP), but once both directions are shut (its FIN and our
/// shutdown(SHUT_WR)), and at once after shutdown(SHUT_RDWR); poll and epoll agree.
#[test]
fn pollhup_when_both_directions_are_shut() {
    let _ = preload();
    let tb = testbed("capih");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    ulnet_bench::preflight::require_tool("python3").unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let exe = scratch.path("opts");
    compile(&["crates/capi/tests/c/opts.c"], &exe, false);
    let (_, env) = ulnet_env(&a, 0);
    let peer_py = repo().join("crates/capi/tests/c/opts_peer.py");
    let mut peer = spawn_in(
        &b.ns,
        &[],
        Path::new("python3"),
        &[
            peer_py.to_str().unwrap(),
            "close",
            &b.ip.to_string(),
            "7530",
            "2",
        ],
    );
    wait_line(&mut peer, "listening");
    let o = run_preloaded(&a.ns, &env, &exe, &["hup", &b.ip.to_string(), "7530"], 60);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("done, 0 failures"),
        "hup: {}",
        text(&o)
    );
}

/// `ULNET_STATS=1` prints the library's counters at exit, among them the datagrams of a
/// shared UDP port that no socket took: two sockets share a port, each connected to
/// another sender; 5 datagrams from a third are dropped and counted, then the first
/// socket's sender says "go".
#[test]
fn ulnet_stats_reports_shared_port_drops_at_exit() {
    let _ = preload();
    let tb = testbed("capis5");
    let (a, b) = (tb.a().clone(), tb.b().clone());
    ulnet_bench::preflight::require_tool("python3").unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let exe = scratch.path("opts");
    compile(&["crates/capi/tests/c/opts.c"], &exe, false);
    let (ip, env) = ulnet_env(&a, 0);
    let mut env = preloaded(&env);
    env.push(("ULNET_STATS".into(), "1".into()));
    let mut prog = spawn_in(
        &a.ns,
        &env,
        &exe,
        &["udp-drop", "7540", &b.ip.to_string(), "7541"],
    );
    let mut err = prog.child_mut().stderr.take().expect("stderr piped");
    wait_line(&mut prog, "ready");
    let send = format!(
        "import socket\n\
         d = ('{ip}', 7540)\n\
         x = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         for _ in range(5): x.sendto(b'junk', d)\n\
         g = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         g.bind(('{}', 7541))\n\
         g.sendto(b'go', d)\n",
        b.ip
    );
    let o = sh_in(
        &b.ns,
        &format!("python3 -c \"{send}\""),
        Duration::from_secs(20),
    );
    assert!(o.status.success(), "sender: {}", text(&o));
    let o = prog
        .wait_timeout(Duration::from_secs(30))
        .expect("udp-drop did not end");
    let mut stderr = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
    assert!(o.status.success(), "udp-drop: {}{stderr}", text(&o));
    assert!(
        stderr.contains("ulnet-stats udp_shared_port_dropped 5\n")
            && stderr.contains("ulnet-stats udp_delivered "),
        "{stderr}"
    );
}
